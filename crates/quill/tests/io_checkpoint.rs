//! Checksummed checkpoints and atomic replacement (`quill::io`): `save_checkpoint` digests
//! match an independent SHA-256 of dtype, shape and bytes; a flipped bit, a relabelled dtype, a
//! removed or orphaned digest fail naming the tensor; files without digests (older checkpoints)
//! load unverified; `write_atomic` removes dead writers' temporary files, keeps live ones, and
//! leaves the old file whole when the writer fails.

use quill::io::{
    load_checkpoint, load_safetensors, save_checkpoint, save_safetensors, write_atomic,
    CHECKSUM_PREFIX,
};
use quill::{DType, NDArray};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("io-ck-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn tensors() -> Vec<(String, NDArray)> {
    vec![
        (
            "w".into(),
            NDArray::from_vec((0..12).map(|i| i as f32 * 0.5 - 2.0).collect(), &[3, 4]).unwrap(),
        ),
        ("step".into(), NDArray::scalar(7i64)),
        (
            "b".into(),
            NDArray::from_vec(vec![1.5f64, -2.25], &[2]).unwrap(),
        ),
    ]
}

fn meta() -> BTreeMap<String, String> {
    BTreeMap::from([("epoch".to_string(), "3".to_string())])
}

/// The header and data of a safetensors file, and the data start of tensor `name`.
fn split(bytes: &[u8]) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (
        String::from_utf8(bytes[8..8 + n].to_vec()).unwrap(),
        bytes[8 + n..].to_vec(),
    )
}

fn join(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

fn data_range(header: &str, name: &str) -> (usize, usize) {
    let at = header.find(&format!("\"{name}\":")).unwrap();
    let rest = &header[at..];
    let o = rest.find("\"data_offsets\":[").unwrap() + 16;
    let nums: Vec<usize> = rest[o..rest[o..].find(']').unwrap() + o]
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}

fn err_of(path: &Path) -> String {
    load_checkpoint(path).unwrap_err().to_string()
}

#[test]
fn round_trip_and_digests_match_an_independent_sha256() {
    let dir = scratch("round");
    let path = dir.join("c.safetensors");
    save_checkpoint(&path, &tensors(), &meta()).unwrap();
    let c = load_checkpoint(&path).unwrap();
    assert!(c.verified);
    assert_eq!(c.metadata, meta(), "digests are not returned as metadata");
    assert_eq!(c.tensors.len(), 3);
    for (name, want) in tensors() {
        let got = &c.tensors.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(got.dtype(), want.dtype(), "{name}");
        assert_eq!(got.shape(), want.shape(), "{name}");
        let f = |a: &NDArray| a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(f(got), f(&want), "{name}");
    }
    // The digest is SHA-256 of "DTYPE[dims]" then the raw data bytes, as the file stores them.
    let bytes = fs::read(&path).unwrap();
    let (h, data) = split(&bytes);
    let (_, raw_meta) = load_safetensors(&path).unwrap();
    for (name, label) in [("w", "F32[3,4]"), ("step", "I64[]"), ("b", "F64[2]")] {
        let (s, e) = data_range(&h, name);
        let mut d = Sha256::new();
        d.update(label.as_bytes());
        d.update(&data[s..e]);
        let want: String = d.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            raw_meta[&format!("{CHECKSUM_PREFIX}{name}")],
            want,
            "{name}"
        );
    }
}

#[test]
fn every_flipped_bit_fails_naming_its_tensor() {
    let dir = scratch("flip");
    let path = dir.join("c.safetensors");
    save_checkpoint(&path, &tensors(), &meta()).unwrap();
    let bytes = fs::read(&path).unwrap();
    let (h, data) = split(&bytes);
    let bad = dir.join("bad.safetensors");
    for name in ["w", "step", "b"] {
        let (s, e) = data_range(&h, name);
        for i in s..e {
            for bit in [0u8, 3, 7] {
                let mut d = data.clone();
                d[i] ^= 1 << bit;
                fs::write(&bad, join(&h, &d)).unwrap();
                let msg = err_of(&bad);
                assert!(
                    msg.contains(&format!("tensor \"{name}\"")) && msg.contains("checksum"),
                    "{msg}"
                );
                assert!(msg.contains("bad.safetensors"), "{msg}");
            }
        }
    }
}

#[test]
fn a_relabelled_dtype_fails_its_checksum() {
    let dir = scratch("relabel");
    let path = dir.join("c.safetensors");
    save_checkpoint(&path, &tensors(), &meta()).unwrap();
    let (h, data) = split(&fs::read(&path).unwrap());
    let h = h.replace("\"w\":{\"dtype\":\"F32\"", "\"w\":{\"dtype\":\"I32\"");
    fs::write(&path, join(&h, &data)).unwrap();
    // The file is valid safetensors (same sizes), so the plain reader accepts it...
    assert_eq!(load_safetensors(&path).unwrap().0[2].1.dtype(), DType::I32);
    // ...and only the checksum tells.
    let msg = err_of(&path);
    assert!(msg.contains("tensor \"w\"") && msg.contains("I32"), "{msg}");
}

#[test]
fn files_without_digests_load_unverified_and_partial_ones_fail() {
    let dir = scratch("old");
    let path = dir.join("c.safetensors");
    // A checkpoint written before checksums existed: plain safetensors.
    save_safetensors(&path, &tensors(), &meta()).unwrap();
    let c = load_checkpoint(&path).unwrap();
    assert!(!c.verified);
    assert_eq!(c.metadata, meta());
    assert_eq!(c.tensors.len(), 3);
    // One tensor's digest removed: an edited file, not an old one.
    save_checkpoint(&path, &tensors(), &meta()).unwrap();
    let (_, mut m) = load_safetensors(&path).unwrap();
    let t = load_checkpoint(&path).unwrap().tensors;
    m.remove(&format!("{CHECKSUM_PREFIX}step"));
    save_safetensors(&path, &t, &m).unwrap();
    let msg = err_of(&path);
    assert!(msg.contains("\"step\" has no checksum"), "{msg}");
    // A digest for a tensor that was removed.
    let (_, m) = {
        save_checkpoint(&path, &tensors(), &meta()).unwrap();
        load_safetensors(&path).unwrap()
    };
    let fewer: Vec<_> = t.into_iter().filter(|(n, _)| n != "b").collect();
    save_safetensors(&path, &fewer, &m).unwrap();
    let msg = err_of(&path);
    assert!(msg.contains("sha256.b"), "{msg}");
    // The digest keys are reserved.
    let mut m = meta();
    m.insert(format!("{CHECKSUM_PREFIX}w"), "0".into());
    let msg = save_checkpoint(&path, &tensors(), &m)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("reserved"), "{msg}");
}

#[test]
fn write_atomic_cleans_dead_writers_and_keeps_the_old_file_on_failure() {
    let dir = scratch("atomic");
    let path = dir.join("metrics.csv");
    write_atomic(&path, |w| w.write_all(b"old\n")).unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let dead = dir.join(format!(".metrics.csv.tmp-{}-9", gone.id()));
    let live = dir.join(format!(".metrics.csv.tmp-{}-999", std::process::id()));
    let other = dir.join(format!(".other.csv.tmp-{}-0", gone.id()));
    for f in [&dead, &live, &other] {
        fs::write(f, b"partial").unwrap();
    }
    // A writer that fails half-way: the old file stays, its temporary file goes.
    let err = write_atomic(&path, |w| {
        w.write_all(b"half")?;
        Err(std::io::Error::other("disk full"))
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("disk full"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), b"old\n");
    assert!(!dead.exists(), "a dead writer's temporary file was left");
    assert!(live.exists(), "a live writer's temporary file was removed");
    assert!(
        other.exists(),
        "another target's temporary file was touched"
    );
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    write_atomic(&path, |w| w.write_all(b"new\n")).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"new\n");
}
