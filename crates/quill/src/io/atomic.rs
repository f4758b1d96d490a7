//! Replacing a file atomically: the bytes go to a temporary file beside the target (same
//! directory, so the rename never crosses a file system), which is fsynced and renamed over the
//! target, and the directory is fsynced after. A crash at any point leaves either the old file or
//! the new one at the target's name, never a mix or a truncated file.
//!
//! A writer killed before its rename leaves its temporary file, named `.NAME.tmp-PID-N`, behind.
//! Every replacement first removes such files for the same target whose PID is no longer alive
//! (on Linux, where `/proc` says so; elsewhere nothing is removed, since a live writer's file must
//! never be). The files of this process and of live processes are left alone.

use quill_core::{Error, Result};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes temporary names unique within this process, so that two threads saving to one path
/// never write into the same temporary file (the pid alone separates processes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

pub(crate) fn io_error(op: &'static str, what: &str, path: &Path, e: io::Error) -> Error {
    Error::invalid(op, format!("{what} {}: {e}", path.display()))
}

/// Replaces `path` with the bytes `write` produces, atomically (see the module docs). `write`
/// gets a buffered writer; an error from it, or from any step after, removes the temporary file
/// and leaves the old file at `path` untouched.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    replace_with("write_atomic", path, write)
}

/// `write_atomic` with the errors naming `op` (the public function the caller implements).
pub(crate) fn replace_with(
    op: &'static str,
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let (dir, name) = split(op, path)?;
    remove_stale_temps(&dir, &name);
    let mut tmp_name = OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let written = write_file(op, &tmp, write).and_then(|()| {
        fs::rename(&tmp, path).map_err(|e| {
            Error::invalid(
                op,
                format!("cannot rename {} to {}: {e}", tmp.display(), path.display()),
            )
        })
    });
    if let Err(e) = written {
        // Best effort: a leftover temporary file wastes space but never harms the target, and
        // the next replacement removes it once this process is gone.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // Makes the rename itself durable. Best effort: some platforms and file systems cannot open
    // or sync a directory, and the data is already safe in the renamed file.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The target's directory (`.` for a bare name) and file name.
fn split(op: &'static str, path: &Path) -> Result<(PathBuf, OsString)> {
    let Some(name) = path.file_name() else {
        return Err(Error::invalid(
            op,
            format!("{} does not name a file", path.display()),
        ));
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_os_string()))
}

/// Writes the whole file to `tmp` and fsyncs it, so that after the rename the data is on disk.
fn write_file(
    op: &'static str,
    tmp: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .map_err(|e| io_error(op, "cannot create", tmp, e))?;
    let write_err = |e| io_error(op, "cannot write", tmp, e);
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write(&mut w).map_err(write_err)?;
    let file = w.into_inner().map_err(|e| write_err(e.into_error()))?;
    file.sync_all()
        .map_err(|e| io_error(op, "cannot fsync", tmp, e))
}

/// The writer's PID in a temporary name of the target `name` (`.NAME.tmp-PID-N`), if `file` is
/// one.
fn temp_owner(file: &str, name: &str) -> Option<u32> {
    let rest = file.strip_prefix('.')?.strip_prefix(name)?;
    let (pid, n) = rest.strip_prefix(".tmp-")?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(n)).then(|| pid.parse().ok())?
}

/// Whether process `pid` may still be running: `false` only where `/proc` shows it is not.
fn may_be_alive(pid: u32) -> bool {
    let proc_fs = Path::new("/proc");
    if !proc_fs.join("self").exists() {
        // No procfs (not Linux, or not mounted): no way to tell, so never remove.
        return true;
    }
    proc_fs.join(pid.to_string()).exists()
}

/// Removes the temporary files of `name` in `dir` left by writers that died before renaming.
/// Best effort: a file that cannot be listed or removed is left (it wastes space, no more).
fn remove_stale_temps(dir: &Path, name: &OsString) {
    let (Some(name), Ok(entries)) = (name.to_str(), fs::read_dir(dir)) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file.to_str().and_then(|f| temp_owner(f, name)) else {
            continue;
        };
        if pid != me && !may_be_alive(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_exactly() {
        assert_eq!(
            temp_owner(".ck.safetensors.tmp-42-0", "ck.safetensors"),
            Some(42)
        );
        assert_eq!(
            temp_owner(".ck.safetensors.tmp-42-17", "ck.safetensors"),
            Some(42)
        );
        for other in [
            "ck.safetensors",
            ".ck.safetensors.tmp-42",
            ".ck.safetensors.tmp-x-0",
            ".ck.safetensors.tmp-42-0x",
            ".ck.safetensors.tmp--0",
            ".ck.safetensorsX.tmp-42-0",
            ".metrics.csv.tmp-42-0",
        ] {
            assert_eq!(temp_owner(other, "ck.safetensors"), None, "{other}");
        }
    }
}
