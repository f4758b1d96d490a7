//! safetensors checkpoints (`quill::io`): round trips of every dtype, of non-contiguous views
//! (permuted, stepped, reversed, broadcast), rank-0 and size-0 arrays, names and metadata with
//! characters JSON must escape; an independent check of the bytes with the `safetensors` crate
//! (the reference implementation) in both directions, including byte-identical output; crash
//! safety (a stray or half-written temporary file, a failed save, a truncated checkpoint); and
//! malformed files (bad length prefix, bad JSON, bad offsets, unsupported dtypes, every
//! truncation, random corruption) giving errors that name the file, never panics.

use quill::io::{load_safetensors, save_safetensors};
use quill::{bf16, f16, s, DType, Error, NDArray};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// A fresh, empty directory for one test, under cargo's per-target scratch space.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("io-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The elements of `a` in C order as little-endian bytes: an exact, NaN-aware comparison key.
fn bytes_of(a: &NDArray) -> Vec<u8> {
    match a.dtype() {
        DType::F32 => a
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        DType::F64 => a
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        DType::F16 => a
            .to_vec::<f16>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_bits().to_le_bytes())
            .collect(),
        DType::BF16 => a
            .to_vec::<bf16>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_bits().to_le_bytes())
            .collect(),
        DType::I32 => a
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        DType::I64 => a
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        DType::U8 => a.to_vec::<u8>().unwrap(),
        DType::Bool => a
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .map(|&x| x as u8)
            .collect(),
        DType::I8 => le(a.to_vec::<i8>().unwrap(), i8::to_le_bytes),
        DType::I16 => le(a.to_vec::<i16>().unwrap(), i16::to_le_bytes),
        DType::U16 => le(a.to_vec::<u16>().unwrap(), u16::to_le_bytes),
        DType::U32 => le(a.to_vec::<u32>().unwrap(), u32::to_le_bytes),
        DType::U64 => le(a.to_vec::<u64>().unwrap(), u64::to_le_bytes),
        DType::C64 => a
            .to_vec::<quill::C64>()
            .unwrap()
            .iter()
            .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()].concat())
            .collect(),
        DType::C128 => a
            .to_vec::<quill::C128>()
            .unwrap()
            .iter()
            .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()].concat())
            .collect(),
    }
}

fn le<T, const N: usize>(v: Vec<T>, f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.into_iter().flat_map(f).collect()
}

fn assert_same(got: &NDArray, want: &NDArray, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(bytes_of(got), bytes_of(want), "{what}: elements");
}

/// A 1-D array of `n` values of `dtype`, including the dtype's special values (NaN, -0.0, inf,
/// subnormals, extremes), so that any byte-order or conversion slip shows.
fn sample(dtype: DType, n: usize) -> NDArray {
    let f: Vec<f64> = [
        f64::NAN,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e-40,
        3.25,
        -7.5,
    ]
    .into_iter()
    .chain((0..n).map(|i| i as f64 * 1.37 - 11.0))
    .take(n)
    .collect();
    match dtype {
        DType::F32 => NDArray::from_vec(f.iter().map(|&x| x as f32).collect(), &[n]),
        DType::F64 => NDArray::from_vec(f.clone(), &[n]),
        DType::F16 => NDArray::from_vec(f.iter().map(|&x| f16::from_f64(x)).collect(), &[n]),
        DType::BF16 => NDArray::from_vec(f.iter().map(|&x| bf16::from_f64(x)).collect(), &[n]),
        DType::I32 => NDArray::from_vec(
            [i32::MIN, i32::MAX, -1, 0]
                .into_iter()
                .chain((0..n as i32).map(|i| i * 7919 - 3))
                .take(n)
                .collect(),
            &[n],
        ),
        DType::I64 => NDArray::from_vec(
            [i64::MIN, i64::MAX, -1, 0]
                .into_iter()
                .chain((0..n as i64).map(|i| i << 40 | i))
                .take(n)
                .collect(),
            &[n],
        ),
        DType::U8 => NDArray::from_vec((0..n).map(|i| (i * 37 + 255) as u8).collect(), &[n]),
        DType::Bool => NDArray::from_vec((0..n).map(|i| i % 3 == 1).collect(), &[n]),
        // The narrow and unsigned widths: their limits, then a spread of bit patterns.
        d => {
            let bits = 8 * d.size_in_bytes() as u32;
            let (lo, hi) = if d.is_signed_int() {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let vals: Vec<i128> = [lo, hi, 0, 1]
                .into_iter()
                .chain((0..n as i128).map(|i| i * 0x9E37_79B9 + lo))
                .take(n)
                .collect();
            quill_test_support::with_dtype!(d, T => NDArray::from_vec(
                vals.iter().map(|&x| <T as quill::Element>::from_scalar(quill::Scalar::I(x))).collect::<Vec<T>>(),
                &[n],
            ))
        }
    }
    .unwrap()
}

fn no_meta() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn load_err(path: &Path) -> String {
    match load_safetensors(path) {
        Ok((t, _)) => panic!(
            "{} loaded ({} tensors) but should fail",
            path.display(),
            t.len()
        ),
        Err(e) => {
            assert!(
                matches!(
                    e,
                    Error::InvalidArgument {
                        op: "load_safetensors",
                        ..
                    }
                ),
                "{e:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains(&path.display().to_string()),
                "the error does not name the file: {msg}"
            );
            msg
        }
    }
}

/// Writes a file of an 8-byte length prefix, `header` and `data`.
fn raw_file(path: &Path, header: &str, data: &[u8]) {
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(data);
    fs::write(path, b).unwrap();
}

#[test]
fn round_trip_every_dtype_and_metadata() {
    let dir = scratch("all-dtypes");
    let path = dir.join("model.safetensors");
    let tensors: Vec<(String, NDArray)> = DType::ALL
        .iter()
        .map(|&d| (format!("t_{d}"), sample(d, 24).reshape(&[2, 3, 4]).unwrap()))
        .collect();
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    meta.insert("epoch".to_string(), "12".to_string());
    meta.insert(
        "odd \"key\"\\".to_string(),
        "line\nbreak\ttab \u{1} é 猫 🦀".to_string(),
    );
    save_safetensors(&path, &tensors, &meta).unwrap();

    let (got, got_meta) = load_safetensors(&path).unwrap();
    assert_eq!(got_meta, meta);
    assert_eq!(got.len(), tensors.len());
    let by_name: HashMap<_, _> = got.iter().map(|(n, a)| (n.clone(), a.clone())).collect();
    for (name, want) in &tensors {
        assert_same(&by_name[name], want, name);
        assert!(by_name[name].is_contiguous());
    }
    // The file order: decreasing dtype alignment, then name (the reference writer's order).
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "t_u64", "t_i64", "t_f64", "t_f32", "t_u32", "t_i32", "t_bf16", "t_f16", "t_u16",
            "t_i16", "t_i8", "t_u8", "t_bool"
        ]
    );
    // No temporary file is left behind.
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("model.safetensors")]);
}

#[test]
fn round_trip_views_rank0_and_empty() {
    let dir = scratch("views");
    let path = dir.join("v.safetensors");
    let mut tensors = Vec::new();
    for &d in &DType::ALL {
        let base = sample(d, 60).reshape(&[3, 4, 5]).unwrap();
        let views = [
            ("permuted", base.permute(&[2, 0, 1]).unwrap()),
            ("stepped", base.slice(&s![.., 1..;2, ..;3]).unwrap()),
            ("negative", base.slice(&s![..;-1, .., 4..;-2]).unwrap()),
            (
                "flipped_t",
                base.flip(&[1]).unwrap().transpose(0, 2).unwrap(),
            ),
            (
                "broadcast",
                base.slice(&s![0, 1])
                    .unwrap()
                    .broadcast_to(&[2, 5])
                    .unwrap(),
            ),
            ("offset", base.slice(&s![2]).unwrap()),
            ("rank0", NDArray::scalar(1u8).astype(d).unwrap()),
            ("rank0_view", base.slice(&s![1, 2, 3]).unwrap()),
            ("empty", NDArray::zeros(&[0], d).unwrap()),
            ("empty_3d", NDArray::zeros(&[3, 0, 2], d).unwrap()),
            ("empty_view", base.slice(&s![.., 2..2, ..;-1]).unwrap()),
        ];
        for (kind, v) in views {
            tensors.push((format!("{d}.{kind}"), v));
        }
    }
    assert!(tensors.iter().any(|(_, a)| !a.is_contiguous()));
    save_safetensors(&path, &tensors, &no_meta()).unwrap();
    let (got, meta) = load_safetensors(&path).unwrap();
    assert!(meta.is_empty());
    let by_name: HashMap<_, _> = got.into_iter().collect();
    assert_eq!(by_name.len(), tensors.len());
    for (name, want) in &tensors {
        assert_same(&by_name[name], want, name);
    }
    assert_eq!(by_name["f32.rank0"].shape(), &[] as &[usize]);
    assert_eq!(by_name["i64.empty_3d"].shape(), &[3, 0, 2]);
    // Saving reads the views; it must not change them.
    assert_same(
        &tensors[0].1,
        &sample(DType::F32, 60)
            .reshape(&[3, 4, 5])
            .unwrap()
            .permute(&[2, 0, 1])
            .unwrap(),
        "source",
    );
}

#[test]
fn empty_checkpoint_and_overwrite() {
    let dir = scratch("overwrite");
    let path = dir.join("c.safetensors");
    save_safetensors(&path, &[], &no_meta()).unwrap();
    let (t, m) = load_safetensors(&path).unwrap();
    assert!(t.is_empty() && m.is_empty());
    let a = sample(DType::F32, 6);
    save_safetensors(&path, &[("a".into(), a.clone())], &no_meta()).unwrap();
    let b = sample(DType::I64, 3);
    save_safetensors(&path, &[("b".into(), b.clone())], &no_meta()).unwrap();
    let (t, _) = load_safetensors(&path).unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, "b");
    assert_same(&t[0].1, &b, "b");
    // A relative path (no directory part) also works: the temporary file goes in ".".
    let cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(&dir).unwrap();
    let rel = save_safetensors(Path::new("rel.safetensors"), &[("a".into(), a)], &no_meta());
    std::env::set_current_dir(cwd).unwrap();
    rel.unwrap();
    assert!(load_safetensors(&dir.join("rel.safetensors")).is_ok());
}

#[test]
fn reference_crate_reads_our_files_byte_for_byte() {
    let dir = scratch("reference-reads");
    let path = dir.join("m.safetensors");
    let tensors: Vec<(String, NDArray)> = DType::ALL
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let a = sample(d, 30)
                .reshape(&[5, 6])
                .unwrap()
                .transpose(0, 1)
                .unwrap();
            (format!("layer.{i}/w \"q\""), a)
        })
        .chain([
            (
                "complex".to_string(),
                NDArray::complex(
                    &sample(DType::F32, 6).reshape(&[2, 3]).unwrap(),
                    &sample(DType::F32, 6)
                        .reshape(&[3, 2])
                        .unwrap()
                        .transpose(0, 1)
                        .unwrap(),
                )
                .unwrap(),
            ),
            ("scalar".to_string(), NDArray::scalar(2.5f64)),
            (
                "none".to_string(),
                NDArray::zeros(&[0, 4], DType::I32).unwrap(),
            ),
        ])
        .collect();
    let mut meta = BTreeMap::new();
    meta.insert(
        "note".to_string(),
        "a\u{7}b\"c\\d\u{1f}\r\n\u{8}\u{c}/".to_string(),
    );
    save_safetensors(&path, &tensors, &meta).unwrap();
    let file = fs::read(&path).unwrap();

    let st = SafeTensors::deserialize(&file).unwrap();
    let (header_len, info) = SafeTensors::read_metadata(&file).unwrap();
    assert_eq!(header_len % 8, 0, "the data section starts 8-aligned");
    let want_meta: HashMap<String, String> = meta.clone().into_iter().collect();
    assert_eq!(info.metadata().as_ref(), Some(&want_meta));
    assert_eq!(st.len(), tensors.len());
    let expect_dtype = |d: DType| match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::U8 => Dtype::U8,
        DType::Bool => Dtype::BOOL,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::U16 => Dtype::U16,
        DType::U32 => Dtype::U32,
        DType::U64 => Dtype::U64,
        DType::C64 | DType::C128 => Dtype::C64,
    };
    for (name, a) in &tensors {
        let v = st.tensor(name).unwrap();
        assert_eq!(v.dtype(), expect_dtype(a.dtype()), "{name}");
        assert_eq!(v.shape(), a.shape(), "{name}");
        assert_eq!(v.data(), bytes_of(a).as_slice(), "{name}");
        // Every tensor is aligned to its element size within the file.
        let off = v.data().as_ptr() as usize - file.as_ptr() as usize;
        assert_eq!(off % a.dtype().size_in_bytes(), 0, "{name} is misaligned");
    }

    // The reference serializer, fed the same tensors and metadata, writes the same bytes.
    let owned: Vec<(String, Vec<u8>, DType, Vec<usize>)> = tensors
        .iter()
        .map(|(n, a)| (n.clone(), bytes_of(a), a.dtype(), a.shape().to_vec()))
        .collect();
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(n, b, d, sh)| {
            (
                n.clone(),
                TensorView::new(expect_dtype(*d), sh.clone(), b).unwrap(),
            )
        })
        .collect();
    let reference = safetensors::serialize(views, Some(want_meta)).unwrap();
    assert_eq!(
        file, reference,
        "quill's file differs from the reference serializer's"
    );
}

#[test]
fn we_read_the_reference_crates_files() {
    let dir = scratch("reference-writes");
    let path = dir.join("ref.safetensors");
    let data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = vec![
        (
            "f32".into(),
            Dtype::F32,
            vec![2, 2],
            [1.5f32, -2.0, f32::NAN, 0.0]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
        ),
        (
            "f64".into(),
            Dtype::F64,
            vec![1],
            1e300f64.to_le_bytes().to_vec(),
        ),
        (
            "f16".into(),
            Dtype::F16,
            vec![3],
            [1.0f32, 65504.0, -0.5]
                .iter()
                .flat_map(|&x| f16::from_f32(x).to_bits().to_le_bytes())
                .collect(),
        ),
        (
            "bf16".into(),
            Dtype::BF16,
            vec![],
            bf16::from_f32(3.0e38).to_bits().to_le_bytes().to_vec(),
        ),
        (
            "i32".into(),
            Dtype::I32,
            vec![1, 2],
            [i32::MIN, 42]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
        ),
        ("i64".into(), Dtype::I64, vec![2, 0], vec![]),
        ("u8".into(), Dtype::U8, vec![4], vec![0, 1, 128, 255]),
        ("bool".into(), Dtype::BOOL, vec![3], vec![1, 0, 1]),
        ("i8".into(), Dtype::I8, vec![2], vec![0x80, 0x7f]),
        (
            "u16".into(),
            Dtype::U16,
            vec![2],
            [1u16, u16::MAX]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
        ),
        (
            "u64".into(),
            Dtype::U64,
            vec![1],
            u64::MAX.to_le_bytes().to_vec(),
        ),
    ];
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, d, sh, b)| (n.clone(), TensorView::new(*d, sh.clone(), b).unwrap()))
        .collect();
    let meta: HashMap<String, String> = [("framework".to_string(), "reference".to_string())].into();
    safetensors::serialize_to_file(views, Some(meta), &path).unwrap();

    let (got, got_meta) = load_safetensors(&path).unwrap();
    assert_eq!(
        got_meta.get("framework").map(String::as_str),
        Some("reference")
    );
    let by_name: HashMap<_, _> = got.into_iter().collect();
    for (name, _, shape, bytes) in &data {
        let a = &by_name[name];
        assert_eq!(a.shape(), shape.as_slice(), "{name}");
        assert_eq!(&bytes_of(a), bytes, "{name}");
    }
    assert_eq!(
        by_name["bool"].to_vec::<bool>().unwrap(),
        [true, false, true]
    );
    assert_eq!(by_name["i32"].to_vec::<i32>().unwrap(), [i32::MIN, 42]);

    assert_eq!(by_name["u64"].to_vec::<u64>().unwrap(), [u64::MAX]);
    assert_eq!(by_name["i8"].to_vec::<i8>().unwrap(), [i8::MIN, i8::MAX]);

    // complex64 as the reference crate writes it: real then imaginary f32 per element.
    let c: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let cpath = dir.join("c64.safetensors");
    safetensors::serialize_to_file(
        [("pairs", TensorView::new(Dtype::C64, vec![2], &c).unwrap())],
        None,
        &cpath,
    )
    .unwrap();
    let (got, _) = load_safetensors(&cpath).unwrap();
    assert_eq!(
        got[0].1.to_vec::<quill::C64>().unwrap(),
        [quill::C64::new(1.5, -2.0), quill::C64::new(0.25, 8.0)]
    );
    // A dtype quill lacks is an error naming the file, the tensor and the dtype.
    let bad = dir.join("f8.safetensors");
    safetensors::serialize_to_file(
        [(
            "bytes",
            TensorView::new(Dtype::F8_E4M3, vec![2], &[0u8; 2]).unwrap(),
        )],
        None,
        &bad,
    )
    .unwrap();
    let msg = load_err(&bad);
    assert!(msg.contains("F8_E4M3") && msg.contains("bytes"), "{msg}");
}

#[test]
fn invalid_names_are_rejected_and_leave_the_old_file() {
    let dir = scratch("names");
    let path = dir.join("n.safetensors");
    let a = sample(DType::F32, 4);
    save_safetensors(&path, &[("keep".into(), a.clone())], &no_meta()).unwrap();
    let before = fs::read(&path).unwrap();

    let dup = save_safetensors(
        &path,
        &[("x".into(), a.clone()), ("x".into(), a.clone())],
        &no_meta(),
    )
    .unwrap_err();
    assert!(
        matches!(
            dup,
            Error::InvalidArgument {
                op: "save_safetensors",
                ..
            }
        ),
        "{dup:?}"
    );
    assert!(dup.to_string().contains("\"x\""), "{dup}");
    let reserved =
        save_safetensors(&path, &[("__metadata__".into(), a.clone())], &no_meta()).unwrap_err();
    assert!(reserved.to_string().contains("reserved"), "{reserved}");

    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "a rejected save touched the checkpoint"
    );
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        1,
        "a rejected save left a file behind"
    );
}

#[test]
fn save_errors_name_the_path() {
    let dir = scratch("save-errors");
    let a = sample(DType::U8, 3);
    let missing_dir = dir.join("no/such/dir/x.safetensors");
    let e = save_safetensors(&missing_dir, &[("a".into(), a.clone())], &no_meta()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "save_safetensors",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains(&dir.join("no/such/dir").display().to_string()),
        "{e}"
    );
    // The target is an existing directory: the rename fails and the temporary file is removed.
    let target = dir.join("is_a_dir");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("inside"), b"x").unwrap();
    let e = save_safetensors(&target, &[("a".into(), a)], &no_meta()).unwrap_err();
    assert!(e.to_string().contains("is_a_dir"), "{e}");
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        [std::ffi::OsString::from("is_a_dir")],
        "a temporary file was left behind"
    );
    assert!(Path::new("/").file_name().is_none());
    assert!(save_safetensors(Path::new("/"), &[], &no_meta()).is_err());
}

#[test]
fn crash_mid_save_keeps_the_previous_checkpoint() {
    let dir = scratch("crash");
    let path = dir.join("ckpt.safetensors");
    let old = sample(DType::F32, 64).reshape(&[8, 8]).unwrap();
    let mut meta = no_meta();
    meta.insert("step".into(), "100".into());
    save_safetensors(&path, &[("w".into(), old.clone())], &meta).unwrap();
    let old_bytes = fs::read(&path).unwrap();

    // A crash while writing the next checkpoint leaves a partial temporary file beside the
    // target (what save writes before the rename): the half of a newer file, and garbage.
    let new = sample(DType::F32, 64)
        .reshape(&[8, 8])
        .unwrap()
        .permute(&[1, 0])
        .unwrap();
    let next = dir.join("next.safetensors");
    save_safetensors(&next, &[("w".into(), new.clone())], &no_meta()).unwrap();
    let full = fs::read(&next).unwrap();
    let pid = std::process::id();
    fs::write(
        dir.join(format!(".ckpt.safetensors.tmp-{pid}-0")),
        &full[..full.len() / 2],
    )
    .unwrap();
    fs::write(
        dir.join(format!(".ckpt.safetensors.tmp-{pid}-1")),
        b"\xff garbage \x00",
    )
    .unwrap();

    assert_eq!(fs::read(&path).unwrap(), old_bytes);
    let (t, m) = load_safetensors(&path).unwrap();
    assert_same(&t[0].1, &old, "old checkpoint after a crash");
    assert_eq!(m, meta);

    // The next save succeeds despite the stale temporary files, and replaces the checkpoint.
    save_safetensors(&path, &[("w".into(), new.clone())], &no_meta()).unwrap();
    let (t, m) = load_safetensors(&path).unwrap();
    assert_same(&t[0].1, &new, "new checkpoint");
    assert!(m.is_empty());

    // A checkpoint truncated (as a non-atomic writer would leave it) fails loudly, naming it.
    let truncated = dir.join("truncated.safetensors");
    fs::write(&truncated, &old_bytes[..old_bytes.len() - 7]).unwrap();
    let msg = load_err(&truncated);
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn every_truncation_is_an_error() {
    let dir = scratch("truncations");
    let path = dir.join("full.safetensors");
    let tensors = vec![
        ("a".to_string(), sample(DType::F64, 5)),
        ("b".to_string(), sample(DType::Bool, 3)),
        ("c".to_string(), NDArray::scalar(7i32)),
    ];
    save_safetensors(&path, &tensors, &no_meta()).unwrap();
    let full = fs::read(&path).unwrap();
    let cut = dir.join("cut.safetensors");
    for len in 0..full.len() {
        fs::write(&cut, &full[..len]).unwrap();
        load_err(&cut);
    }
    // Extra bytes after the data are as wrong as missing ones.
    let mut longer = full.clone();
    longer.push(0);
    fs::write(&cut, &longer).unwrap();
    load_err(&cut);
}

#[test]
fn missing_file_names_the_path() {
    let dir = scratch("missing");
    let path = dir.join("absent.safetensors");
    let msg = load_err(&path);
    assert!(msg.contains("cannot read"), "{msg}");
    // A directory is not a checkpoint either.
    load_err(&dir);
}

#[test]
fn malformed_headers_give_errors() {
    let dir = scratch("malformed");
    let p = dir.join("bad.safetensors");
    let eight = [0u8; 8];
    let check = |what: &str, bytes: Vec<u8>, expect: &str| {
        fs::write(&p, bytes).unwrap();
        let msg = load_err(&p);
        assert!(msg.contains(expect), "{what}: expected {expect:?} in {msg}");
    };
    let with_prefix = |n: u64, rest: &[u8]| {
        let mut b = n.to_le_bytes().to_vec();
        b.extend_from_slice(rest);
        b
    };
    check("empty file", vec![], "truncated");
    check("short prefix", vec![1, 0, 0], "truncated");
    check("huge prefix", with_prefix(u64::MAX, b"{}"), "length prefix");
    check(
        "prefix over the limit",
        with_prefix(100_000_001, b"{}"),
        "length prefix",
    );
    check(
        "prefix past the end",
        with_prefix(64, b"{}      "),
        "truncated header",
    );
    check("not JSON", with_prefix(8, b"not json"), "JSON");
    check("not an object", with_prefix(8, b"[1,2,3] "), "JSON");
    check("not UTF-8", with_prefix(8, b"{\"\xff\xfe\":1}"), "UTF-8");
    check(
        "unknown dtype",
        {
            let h = r#"{"x":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}"#;
            let mut b = with_prefix(h.len() as u64, h.as_bytes());
            b.push(0);
            b
        },
        "JSON",
    );
    check(
        "metadata not strings",
        {
            let h = r#"{"__metadata__":{"k":1}}"#;
            with_prefix(h.len() as u64, h.as_bytes())
        },
        "JSON",
    );

    let raw = |header: &str, data: &[u8], expect: &str| {
        raw_file(&p, header, data);
        let msg = load_err(&p);
        assert!(
            msg.contains(expect),
            "{header}: expected {expect:?} in {msg}"
        );
    };
    raw(
        r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
        &eight[..4],
        "offsets",
    );
    raw(
        r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
        &eight[..4],
        "shape",
    );
    raw(
        r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,1000000]}}"#,
        &eight,
        "shape",
    );
    raw(
        r#"{"x":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"y":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#,
        &eight,
        "overlap",
    );
    raw(
        r#"{"x":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#,
        &eight,
        "gap",
    );
    raw(
        r#"{"x":{"dtype":"U8","shape":[2],"data_offsets":[5,3]}}"#,
        &eight,
        "gap",
    );
    raw(
        r#"{"x":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,8]}}"#,
        &eight,
        "overflow",
    );
    raw(
        r#"{"x":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,18446744073709551615]}}"#,
        &eight,
        "",
    );
    // Offsets whose sum with the header length wraps past usize::MAX.
    let big = (usize::MAX / 8) as u64;
    let h: String = format!(
        "{{{}}}",
        (0..8)
            .map(|i| format!(
                r#""t{i}":{{"dtype":"U8","shape":[{big}],"data_offsets":[{},{}]}}"#,
                i * big,
                (i + 1) * big
            ))
            .collect::<Vec<_>>()
            .join(",")
    );
    // With overflow checks (debug builds) the reference parser's sum panics and is caught as
    // an overflow; without them (release) it wraps, and the wrapped end misses the file's end.
    let expect = if cfg!(debug_assertions) {
        "overflow"
    } else {
        "do not end at the end of the file"
    };
    raw(&h, &eight, expect);
}

#[test]
fn random_corruption_never_panics() {
    let dir = scratch("fuzz");
    let path = dir.join("good.safetensors");
    let tensors = vec![
        (
            "alpha".to_string(),
            sample(DType::F32, 6).reshape(&[2, 3]).unwrap(),
        ),
        ("beta".to_string(), sample(DType::U8, 5)),
        ("gamma".to_string(), sample(DType::BF16, 4)),
    ];
    let mut meta = no_meta();
    meta.insert("k".into(), "v".into());
    save_safetensors(&path, &tensors, &meta).unwrap();
    let good = fs::read(&path).unwrap();
    let bad = dir.join("corrupt.safetensors");
    // A fixed xorshift stream: reproducible, and no dependency.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let header_end = 8 + u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    for _ in 0..400 {
        let mut b = good.clone();
        for _ in 0..1 + next() % 3 {
            // Mostly the prefix and the header, where the structure is.
            let i = (next() as usize) % header_end;
            b[i] = match next() % 4 {
                0 => b'0' + (next() % 10) as u8,
                1 => b"{}[],:\"9"[(next() % 8) as usize],
                _ => next() as u8,
            };
        }
        fs::write(&bad, &b).unwrap();
        // Either outcome is fine; a panic fails the test.
        if let Err(e) = load_safetensors(&bad) {
            assert!(e.to_string().contains(&bad.display().to_string()), "{e}");
        }
    }
}
