//! `--resume` against damaged and doctored checkpoints (issue 48's reliability suite): a dtype
//! relabelled in the header, a changed shape, an epoch past usize or not a number, a flipped
//! data bit, NaN weights (refused unless --allow-nonfinite), a truncated file; each is an error
//! naming the tensor or key, and a checkpoint written before checksums existed still resumes.

mod common;

use common::*;
use quill::io::{load_checkpoint, save_checkpoint, save_safetensors, CHECKSUM_PREFIX};
use quill::{DType, NDArray};
use std::path::{Path, PathBuf};

/// A directory holding a 1-epoch run's outputs, copied fresh for each mutant.
fn trained() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch("ckpt", "base");
        run_ok(&small(&d, 1));
        d
    })
}

fn copy_of(name: &str) -> PathBuf {
    let d = scratch("ckpt", name);
    for f in ["checkpoint.safetensors", "metrics.csv"] {
        std::fs::copy(trained().join(f), d.join(f)).unwrap();
    }
    d
}

fn resume(dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = small(dir, 2);
    args.push("--resume".into());
    args.extend(extra.iter().map(|s| s.to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    quill(&a)
}

fn ck(dir: &Path) -> PathBuf {
    dir.join("checkpoint.safetensors")
}

/// The first 2-D F32 model tensor's name.
fn a_weight(dir: &Path) -> String {
    let c = load_checkpoint(&ck(dir)).unwrap();
    c.tensors
        .iter()
        .find(|(n, a)| n.starts_with("model.") && a.dtype() == DType::F32 && a.ndim() == 2)
        .unwrap()
        .0
        .clone()
}

/// Rewrites the checkpoint (with valid checksums) after `edit`.
fn rewrite(
    dir: &Path,
    edit: impl FnOnce(&mut Vec<(String, NDArray)>, &mut std::collections::BTreeMap<String, String>),
) {
    let mut c = load_checkpoint(&ck(dir)).unwrap();
    edit(&mut c.tensors, &mut c.metadata);
    save_checkpoint(&ck(dir), &c.tensors, &c.metadata).unwrap();
}

/// The header (JSON) and data of a safetensors file.
fn split(bytes: &[u8]) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (
        String::from_utf8(bytes[8..8 + n].to_vec()).unwrap(),
        bytes[8 + n..].to_vec(),
    )
}

fn join(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.trim_end().to_string();
    while !h.len().is_multiple_of(8) {
        h.push(' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h.as_bytes());
    out.extend(data);
    out
}

/// The data offset of tensor `name` in the header.
fn data_start(header: &str, name: &str) -> usize {
    let at = header.find(&format!("\"{name}\":")).unwrap();
    let rest = &header[at..];
    let o = rest.find("\"data_offsets\":[").unwrap() + 16;
    rest[o..].split(',').next().unwrap().parse().unwrap()
}

#[test]
fn a_dtype_relabelled_in_the_header_is_refused() {
    let d = copy_of("relabel");
    let w = a_weight(&d);
    let bytes = std::fs::read(ck(&d)).unwrap();
    let (h, data) = split(&bytes);
    let from = format!("\"{w}\":{{\"dtype\":\"F32\"");
    assert!(h.contains(&from));
    let h = h.replace(&from, &format!("\"{w}\":{{\"dtype\":\"I32\""));
    std::fs::write(ck(&d), join(&h, &data)).unwrap();
    // The bytes are intact, but the checksum covers the dtype.
    assert_refused(&resume(&d, &[]), &[&w, "checksum"]);
    // Without checksums (an old file), the comparison with the model catches it.
    let (h, data) = split(&std::fs::read(ck(&d)).unwrap());
    let stripped = strip_checksums(&h);
    std::fs::write(ck(&d), join(&stripped, &data)).unwrap();
    assert_refused(&resume(&d, &[]), &[&w, "expects f32", "has i32"]);
}

/// The header without its `sha256.*` metadata entries (never the first key, so each follows
/// a comma: `,"sha256.NAME":"HEX"`).
fn strip_checksums(h: &str) -> String {
    let mut out = h.to_string();
    let pat = format!(",\"{CHECKSUM_PREFIX}");
    while let Some(at) = out.find(&pat) {
        let key_end = at + 2 + out[at + 2..].find('"').unwrap();
        let value_start = key_end + 3;
        let value_end = value_start + out[value_start..].find('"').unwrap();
        out.replace_range(at..=value_end, "");
    }
    out
}

#[test]
fn a_changed_shape_is_refused_naming_expected_and_found() {
    let d = copy_of("shape");
    let w = a_weight(&d);
    rewrite(&d, |t, _| {
        let a = &mut t.iter_mut().find(|(n, _)| *n == w).unwrap().1;
        let s = a.shape().to_vec();
        *a = a
            .reshape(&[s[1] as isize, s[0] as isize])
            .unwrap()
            .compact()
            .unwrap();
    });
    assert_refused(&resume(&d, &[]), &[&w, "expects f32 [", "has f32 ["]);
}

#[test]
fn epochs_out_of_range_or_not_numbers_are_refused_naming_the_key() {
    for bad in [
        "18446744073709551615",
        "99999999999999999999999",
        "-1",
        "0",
        "two",
        "",
    ] {
        let d = copy_of("epoch");
        rewrite(&d, |_, m| {
            m.insert("epoch".into(), bad.into());
        });
        assert_refused(&resume(&d, &[]), &["\"epoch\"", bad]);
    }
    // An epoch past --epochs names the flag.
    let d = copy_of("epoch-past");
    rewrite(&d, |_, m| {
        m.insert("epoch".into(), "5".into());
    });
    assert_refused(&resume(&d, &[]), &["epoch 5", "--epochs"]);
}

#[test]
fn a_flipped_data_bit_is_refused_naming_the_tensor() {
    let d = copy_of("bitflip");
    let w = a_weight(&d);
    let bytes = std::fs::read(ck(&d)).unwrap();
    let (h, mut data) = split(&bytes);
    data[data_start(&h, &w) + 5] ^= 0x10;
    std::fs::write(ck(&d), join(&h, &data)).unwrap();
    assert_refused(&resume(&d, &[]), &[&w, "fails its checksum"]);
}

#[test]
fn nan_weights_need_allow_nonfinite() {
    let d = copy_of("nan");
    let w = a_weight(&d);
    rewrite(&d, |t, _| {
        let a = &mut t.iter_mut().find(|(n, _)| *n == w).unwrap().1;
        let mut v: Vec<f32> = a.to_vec().unwrap();
        v[3] = f32::NAN;
        *a = NDArray::from_vec(v, a.shape()).unwrap();
    });
    assert_refused(&resume(&d, &[]), &[&w, "non-finite", "--allow-nonfinite"]);
    let o = resume(&d, &["--allow-nonfinite"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_truncated_checkpoint_is_refused_naming_the_file() {
    let d = copy_of("truncated");
    let bytes = std::fs::read(ck(&d)).unwrap();
    for len in [0, 7, 100, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(ck(&d), &bytes[..len]).unwrap();
        assert_refused(&resume(&d, &[]), &["checkpoint.safetensors"]);
    }
}

#[test]
fn a_checkpoint_from_before_checksums_still_resumes() {
    // Written as quill wrote checkpoints before this change: plain safetensors, no checksum
    // and no history keys.
    let d = copy_of("old");
    let c = load_checkpoint(&ck(&d)).unwrap();
    assert!(c.verified);
    let mut meta = c.metadata.clone();
    meta.remove("history");
    save_safetensors(&ck(&d), &c.tensors, &meta).unwrap();
    assert!(!load_checkpoint(&ck(&d)).unwrap().verified);
    let o = resume(&d, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("no checksums"), "{}", stderr(&o));
    assert_eq!(csv_epochs(&d), [1, 2]);
    // The resumed run wrote a checksummed checkpoint.
    assert!(load_checkpoint(&ck(&d)).unwrap().verified);
}
