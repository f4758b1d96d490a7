//! Refusing, before anything is trained, outputs that would overwrite one another or an input:
//! the checkpoint against `metrics.csv`, `curves.png` and `curves.svg` in `--out`, and every
//! output against every file under `--data`. Paths are compared by where they resolve to
//! (symlinks, `..` and relative spellings followed; for a file that does not exist yet, its
//! nearest existing ancestor is resolved), and existing files also by device and inode, which
//! catches hard links.

use super::options::Options;
use std::path::{Component, Path, PathBuf};

/// Files under `--data` looked at, at most: a dataset directory holds a handful; a huge tree
/// (a mistaken `--data /`) is not walked whole.
const MAX_INPUTS: usize = 10_000;
/// Directory levels under `--data` looked at.
const MAX_DEPTH: usize = 4;

/// Where `p` resolves to: canonical for an existing path; otherwise its nearest existing
/// ancestor's canonical form with the rest appended (`.` dropped, `..` popped).
fn resolve(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let parts: Vec<Component> = abs.components().collect();
    for k in (0..parts.len()).rev() {
        let base: PathBuf = parts[..k].iter().collect();
        if let Ok(mut out) = base.canonicalize() {
            for c in &parts[k..] {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::CurDir => {}
                    c => out.push(c),
                }
            }
            return out;
        }
    }
    abs
}

/// Whether `a` and `b` are the same file: by resolved path, or (both existing) by identity.
fn same_file(a: &Path, b: &Path) -> bool {
    if resolve(a) == resolve(b) {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    false
}

/// The files under `dir` (or `dir` itself when it is a file), bounded by the constants above.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((p, depth)) = stack.pop() {
        if out.len() >= MAX_INPUTS {
            break;
        }
        if p.is_file() {
            out.push(p);
        } else if p.is_dir() && depth <= MAX_DEPTH {
            if let Ok(entries) = std::fs::read_dir(&p) {
                stack.extend(entries.flatten().map(|e| (e.path(), depth + 1)));
            }
        }
    }
    out
}

/// An error when an output of this run would replace another output or an input file.
pub fn check(o: &Options) -> Result<(), String> {
    let ckpt = o.checkpoint_path();
    if ckpt.is_dir() {
        return Err(format!(
            "--checkpoint {} is a directory; give a file path",
            ckpt.display()
        ));
    }
    let outputs: Vec<(String, PathBuf)> = ["metrics.csv", "curves.png", "curves.svg"]
        .iter()
        .map(|f| (format!("--out {}'s {f}", o.out.display()), o.out.join(f)))
        .collect();
    for (what, p) in &outputs {
        if same_file(&ckpt, p) {
            return Err(format!(
                "--checkpoint {} is the same file as {what} ({}): the run would overwrite one with the other; pick another --checkpoint or --out",
                ckpt.display(),
                p.display()
            ));
        }
    }
    let data = inputs(&o.data);
    let all =
        std::iter::once((format!("--checkpoint {}", ckpt.display()), ckpt.clone())).chain(outputs);
    for (what, p) in all {
        if let Some(f) = data.iter().find(|f| same_file(&p, f)) {
            return Err(format!(
                "{what} would overwrite the input file {} under --data {}; write the outputs elsewhere",
                f.display(),
                o.data.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_resolve_through_their_existing_ancestor() {
        let dir = std::env::temp_dir().join(format!("quill-paths-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        let canon = dir.canonicalize().unwrap();
        assert_eq!(resolve(&dir.join("a/../b/./c.csv")), canon.join("b/c.csv"));
        assert_eq!(resolve(&dir.join("a/x.csv")), canon.join("a/x.csv"));
        assert!(same_file(&dir.join("a/../x"), &dir.join("x")));
        assert!(!same_file(&dir.join("a/x"), &dir.join("x")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
