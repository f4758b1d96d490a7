//! The safetensors format: `save_safetensors` writes named arrays plus string metadata, and
//! `load_safetensors` reads them back.
//!
//! Saving is atomic (`atomic.rs`): a crash or an error at any point leaves either the old file
//! or the new one at `path`, never a mix or a truncated file, and temporary files of writers
//! that died mid-save are removed by the next save.
//!
//! The header is written here (it is a few lines of JSON) and the data is streamed tensor by
//! tensor, so saving never holds a second copy of the whole checkpoint in memory. Reading
//! validates the header with the `safetensors` crate, the reference implementation, so quill
//! accepts exactly the files PyTorch and candle accept.

use super::atomic::{io_error, replace_with};
use crate::NDArray;
use ::safetensors::tensor::Metadata;
use ::safetensors::{Dtype, SafeTensorError, SafeTensors};
use half::{bf16, f16};
use quill_core::{DType, Error, Result};
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

const SAVE: &str = "save_safetensors";
const LOAD: &str = "load_safetensors";

/// The key the format reserves for the string-to-string metadata map.
const METADATA_KEY: &str = "__metadata__";

/// The largest header the reference reader accepts; a larger one would make a file that no
/// safetensors reader opens, so saving refuses it up front.
const MAX_HEADER: usize = 100_000_000;

/// Elements converted to bytes per `write_all`: large enough that the per-call cost vanishes,
/// small enough that the scratch buffer stays in cache.
const CHUNK: usize = 1 << 14;

fn to_st(d: DType) -> Dtype {
    match d {
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
        // complex128 has no safetensors dtype: `layout_order` refuses it before this is asked.
        DType::C64 | DType::C128 => Dtype::C64,
    }
}

fn from_st(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::U8 => DType::U8,
        Dtype::BOOL => DType::Bool,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::U16 => DType::U16,
        Dtype::U32 => DType::U32,
        Dtype::U64 => DType::U64,
        Dtype::C64 => DType::C64,
        _ => return None,
    })
}

/// The name the format's JSON header uses for `d` ("F32", "BOOL", ...).
pub(super) fn st_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I32 => "I32",
        DType::I64 => "I64",
        DType::U8 => "U8",
        DType::Bool => "BOOL",
        DType::I8 => "I8",
        DType::I16 => "I16",
        DType::U16 => "U16",
        DType::U32 => "U32",
        DType::U64 => "U64",
        DType::C64 => "C64",
        DType::C128 => "C128",
    }
}

fn bad_file(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::invalid(LOAD, format!("{}: {msg}", path.display()))
}

/// Writes `tensors` and `metadata` to `path` in the safetensors format, replacing any file
/// there atomically (see the module docs): a crash mid-save leaves the previous checkpoint
/// intact.
///
/// Every dtype is stored as its own safetensors dtype (F32, F64, F16, BF16, I8, I16, I32, I64,
/// U8, U16, U32, U64, BOOL, C64; complex128, which the format lacks, is refused),
/// little-endian, in C order; views of any layout are compacted one at a time while writing.
/// Tensors are laid out as the reference implementation lays them out (by decreasing dtype
/// alignment, then by name), so every tensor's data is aligned for readers that map the file;
/// `load_safetensors` returns them in that order. Names must be distinct and must not be
/// `__metadata__`, which the format reserves.
pub fn save_safetensors(
    path: &Path,
    tensors: &[(String, NDArray)],
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    let order = layout_order(tensors)?;
    let header = header_bytes(tensors, &order, metadata)?;
    replace_with(SAVE, path, |w| {
        w.write_all(&(header.len() as u64).to_le_bytes())?;
        w.write_all(header.as_bytes())?;
        for &t in &order {
            write_tensor(w, &tensors[t].1)?;
        }
        Ok(())
    })
}

/// Indices of `tensors` in the order they are written, after checking the names.
fn layout_order(tensors: &[(String, NDArray)]) -> Result<Vec<usize>> {
    let mut seen = std::collections::HashSet::with_capacity(tensors.len());
    for (name, a) in tensors {
        if a.dtype() == DType::C128 {
            return Err(Error::invalid(
                SAVE,
                format!(
                    "tensor {name:?} is complex128, which the safetensors format has no dtype \
                     for (it has C64); save a.astype(complex64), or its .real and .imag"
                ),
            ));
        }
        if name == METADATA_KEY {
            return Err(Error::invalid(
                SAVE,
                format!("the tensor name {METADATA_KEY:?} is reserved by the safetensors format for the metadata map"),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(Error::invalid(
                SAVE,
                format!("the tensor name {name:?} appears more than once; names must be unique"),
            ));
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    // The reference serializer's order; matching it makes the files byte-identical to theirs.
    order.sort_by(|&a, &b| {
        let key = |i: usize| (Reverse(to_st(tensors[i].1.dtype())), &tensors[i].0);
        key(a).cmp(&key(b))
    });
    Ok(order)
}

/// The JSON header, padded with spaces to a multiple of 8 bytes (as the reference writer does)
/// so that the data starts 8-aligned.
fn header_bytes(
    tensors: &[(String, NDArray)],
    order: &[usize],
    metadata: &BTreeMap<String, String>,
) -> Result<String> {
    let mut h = String::from("{");
    if !metadata.is_empty() {
        json_string(&mut h, METADATA_KEY);
        h.push_str(":{");
        for (i, (k, v)) in metadata.iter().enumerate() {
            if i > 0 {
                h.push(',');
            }
            json_string(&mut h, k);
            h.push(':');
            json_string(&mut h, v);
        }
        h.push('}');
    }
    let mut offset = 0usize;
    for (i, &t) in order.iter().enumerate() {
        let (name, a) = &tensors[t];
        if i > 0 || !metadata.is_empty() {
            h.push(',');
        }
        // numel * size fits in isize for any array; only the running sum can overflow.
        let end = a
            .numel()
            .checked_mul(a.dtype().size_in_bytes())
            .and_then(|n| offset.checked_add(n))
            .ok_or_else(|| Error::invalid(SAVE, "the tensors' total size overflows usize"))?;
        json_string(&mut h, name);
        // No spaces in the shape list (`{:?}` would add them): the reference writer has none,
        // and matching it byte for byte makes the output easy to check against it.
        let shape: Vec<String> = a.shape().iter().map(|d| d.to_string()).collect();
        let _ = write!(
            h,
            r#":{{"dtype":"{}","shape":[{}],"data_offsets":[{offset},{end}]}}"#,
            st_name(a.dtype()),
            shape.join(",")
        );
        offset = end;
    }
    h.push('}');
    while h.len() % 8 != 0 {
        h.push(' ');
    }
    if h.len() > MAX_HEADER {
        return Err(Error::invalid(
            SAVE,
            format!(
                "the header would be {} bytes, over the {MAX_HEADER} that safetensors readers accept (too many tensors or too much metadata)",
                h.len()
            ),
        ));
    }
    Ok(h)
}

/// Appends `s` as a JSON string literal, escaping as serde_json does (the short forms for
/// \b \t \n \f \r, `\u00xx` for other control characters), so headers match the reference's.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The elements of `a` in C order as little-endian bytes.
pub(super) fn write_tensor(w: &mut (impl Write + ?Sized), a: &NDArray) -> io::Result<()> {
    let n = a.numel();
    if n == 0 {
        // An empty view's offset may sit at the buffer's end; there is nothing to read anyway.
        return Ok(());
    }
    // One tensor compacted at a time, so saving needs at most one extra tensor in memory.
    let other = |e: Error| io::Error::other(e);
    match a.dtype() {
        DType::F32 => a.with_host_slice(|v| write_le(w, v, f32::to_le_bytes)),
        DType::F64 => a.with_host_slice(|v| write_le(w, v, f64::to_le_bytes)),
        DType::F16 => a.with_host_slice(|v: &[f16]| write_le(w, v, |x| x.to_bits().to_le_bytes())),
        DType::BF16 => {
            a.with_host_slice(|v: &[bf16]| write_le(w, v, |x| x.to_bits().to_le_bytes()))
        }
        DType::I32 => a.with_host_slice(|v| write_le(w, v, i32::to_le_bytes)),
        DType::I64 => a.with_host_slice(|v| write_le(w, v, i64::to_le_bytes)),
        DType::U8 => a.with_host_slice(|v: &[u8]| w.write_all(v)),
        DType::Bool => a.with_host_slice(|v| write_le(w, v, |x: bool| [x as u8])),
        DType::I8 => a.with_host_slice(|v| write_le(w, v, i8::to_le_bytes)),
        DType::I16 => a.with_host_slice(|v| write_le(w, v, i16::to_le_bytes)),
        DType::U16 => a.with_host_slice(|v| write_le(w, v, u16::to_le_bytes)),
        DType::U32 => a.with_host_slice(|v| write_le(w, v, u32::to_le_bytes)),
        DType::U64 => a.with_host_slice(|v| write_le(w, v, u64::to_le_bytes)),
        DType::C64 | DType::C128 => a.to_le_bytes().map(|bytes| w.write_all(&bytes)),
    }
    .map_err(other)?
}

fn write_le<T: Copy, const N: usize>(
    w: &mut (impl Write + ?Sized),
    s: &[T],
    to_bytes: impl Fn(T) -> [u8; N],
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(CHUNK.min(s.len()) * N);
    for chunk in s.chunks(CHUNK) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|&x| to_bytes(x)));
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Reads a safetensors file: the tensors in the file's order (by data offset; for files from
/// `save_safetensors`, by decreasing dtype alignment then name) and the `__metadata__` map
/// (empty when the file has none).
///
/// Every malformed input gives an error that names the file: a missing or unreadable file, a
/// truncated file or header, a header that is not safetensors JSON, data offsets that overlap,
/// leave gaps, disagree with a tensor's shape or run past the end of the file, and dtypes quill
/// lacks (I8, U16, U32, U64, F8 variants, ...). Nothing is allocated beyond the file's own size
/// plus the decoded arrays, whatever the header claims. BOOL bytes other than 0 read as `true`.
// The plain tuple says what comes back at a glance in the docs; an alias would hide it.
#[allow(clippy::type_complexity)]
pub fn load_safetensors(path: &Path) -> Result<(Vec<(String, NDArray)>, BTreeMap<String, String>)> {
    load_with(path, &mut |_, _| Ok(()))
}

/// One tensor as the file stores it, before decoding: what a checksum covers.
pub(super) struct RawTensor<'a> {
    pub name: &'a str,
    pub dtype: DType,
    pub shape: &'a [usize],
    /// The tensor's little-endian data bytes.
    pub bytes: &'a [u8],
}

/// A check run on every tensor before it is decoded, given the file's metadata.
pub(super) type TensorCheck<'c> =
    dyn FnMut(&BTreeMap<String, String>, &RawTensor<'_>) -> Result<()> + 'c;

/// `load_safetensors` with `check` run on each tensor's raw bytes; its error ends the load.
#[allow(clippy::type_complexity)]
pub(super) fn load_with(
    path: &Path,
    check: &mut TensorCheck<'_>,
) -> Result<(Vec<(String, NDArray)>, BTreeMap<String, String>)> {
    // One read of the whole file: its real size bounds the allocation, and the header check
    // below needs the file's length. Peak memory is the file plus the decoded arrays.
    let buf = fs::read(path).map_err(|e| io_error(LOAD, "cannot read", path, e))?;
    let (n, meta) = parse_header(path, &buf)?;
    let data = buf
        .get(8 + n..)
        .ok_or_else(|| bad_file(path, "truncated file"))?;
    let metadata: BTreeMap<String, String> = meta
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut out = Vec::with_capacity(meta.offset_keys().len());
    for name in meta.offset_keys() {
        let info = meta
            .info(&name)
            .ok_or_else(|| bad_file(path, format!("tensor {name:?} is listed without an entry")))?;
        let dtype = from_st(info.dtype).ok_or_else(|| {
            bad_file(
                path,
                format!(
                    "tensor {name:?} has dtype {}, which quill does not support (supported: F32, F64, F16, BF16, I32, I64, U8, BOOL)",
                    info.dtype
                ),
            )
        })?;
        let (start, end) = info.data_offsets;
        // Checked already by the reference validation; `get` keeps a bad file from panicking
        // even if that check ever changes.
        let bytes = data.get(start..end).ok_or_else(|| {
            bad_file(
                path,
                format!(
                    "tensor {name:?} has data offsets [{start}, {end}] beyond the {} data bytes in the file",
                    data.len()
                ),
            )
        })?;
        check(
            &metadata,
            &RawTensor {
                name: &name,
                dtype,
                shape: &info.shape,
                bytes,
            },
        )?;
        let array = decode(dtype, bytes, &info.shape).map_err(|e| {
            bad_file(
                path,
                format!("tensor {name:?} (shape {:?}): {e}", info.shape),
            )
        })?;
        out.push((name, array));
    }
    Ok((out, metadata))
}

/// The header length and the validated header, or an error that says what is wrong in words.
fn parse_header(path: &Path, buf: &[u8]) -> Result<(usize, Metadata)> {
    let prefix = buf
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    // The reference parser adds the last data offset to the header length without a check; an
    // adversarial header makes that overflow, which panics in builds with overflow checks. A
    // malformed file must give an error, never a panic, so the panic is caught here.
    let parsed = std::panic::catch_unwind(|| SafeTensors::read_metadata(buf));
    let err = match parsed {
        Ok(Ok(ok)) => return Ok(ok),
        Ok(Err(e)) => e,
        Err(_) => {
            return Err(bad_file(
                path,
                "the header's data offsets overflow (corrupted or not a safetensors file)",
            ))
        }
    };
    let data_len = |n: u64| (buf.len() as u64).saturating_sub(8).saturating_sub(n);
    let msg = match (&err, prefix) {
        (SafeTensorError::HeaderTooSmall, _) => format!(
            "truncated file: {} bytes, fewer than the 8-byte header length",
            buf.len()
        ),
        (SafeTensorError::HeaderTooLarge, Some(n)) => format!(
            "the header length prefix is {n} bytes, over the {MAX_HEADER} safetensors allows (corrupted or not a safetensors file)"
        ),
        (SafeTensorError::InvalidHeaderLength, Some(n)) => format!(
            "truncated header: the length prefix is {n} bytes but only {} follow it (truncated, corrupted or not a safetensors file)",
            buf.len() - 8
        ),
        (SafeTensorError::InvalidHeader(e), _) => format!("the header is not UTF-8: {e}"),
        (SafeTensorError::InvalidHeaderDeserialization(e), _) => {
            format!("the header is not valid safetensors JSON: {e}")
        }
        (SafeTensorError::InvalidOffset(name), _) => format!(
            "the data offsets of tensor {name:?} overlap or leave a gap (the tensors must tile the data section)"
        ),
        (SafeTensorError::TensorInvalidInfo, _) => {
            "a tensor's data offsets do not match its shape and dtype".to_string()
        }
        (SafeTensorError::ValidationOverflow, _) => {
            "a tensor's shape overflows usize when multiplied out".to_string()
        }
        (SafeTensorError::MetadataIncompleteBuffer, Some(n)) => format!(
            "the header's data offsets do not end at the end of the file, which holds {} data bytes (truncated file, or offsets out of range)",
            data_len(n)
        ),
        (e, _) => format!("malformed safetensors file: {e}"),
    };
    Err(bad_file(path, msg))
}

/// An array of `shape` and `dtype` from little-endian bytes (whose length the caller checked).
fn decode(dtype: DType, bytes: &[u8], shape: &[usize]) -> Result<NDArray> {
    match dtype {
        DType::F32 => NDArray::from_vec(read_le(bytes, f32::from_le_bytes), shape),
        DType::F64 => NDArray::from_vec(read_le(bytes, f64::from_le_bytes), shape),
        DType::F16 => NDArray::from_vec(
            read_le(bytes, |b| f16::from_bits(u16::from_le_bytes(b))),
            shape,
        ),
        DType::BF16 => NDArray::from_vec(
            read_le(bytes, |b| bf16::from_bits(u16::from_le_bytes(b))),
            shape,
        ),
        DType::I32 => NDArray::from_vec(read_le(bytes, i32::from_le_bytes), shape),
        DType::I64 => NDArray::from_vec(read_le(bytes, i64::from_le_bytes), shape),
        DType::U8 => NDArray::from_vec(bytes.to_vec(), shape),
        // Any non-zero byte is true: a bool never takes another bit pattern in memory.
        DType::Bool => NDArray::from_vec(bytes.iter().map(|&b| b != 0).collect(), shape),
        DType::I8 => NDArray::from_vec(read_le(bytes, i8::from_le_bytes), shape),
        DType::I16 => NDArray::from_vec(read_le(bytes, i16::from_le_bytes), shape),
        DType::U16 => NDArray::from_vec(read_le(bytes, u16::from_le_bytes), shape),
        DType::U32 => NDArray::from_vec(read_le(bytes, u32::from_le_bytes), shape),
        DType::U64 => NDArray::from_vec(read_le(bytes, u64::from_le_bytes), shape),
        DType::C64 | DType::C128 => NDArray::from_le_bytes(bytes, shape, dtype),
    }
}

fn read_le<T, const N: usize>(bytes: &[u8], from_bytes: impl Fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut b = [0u8; N];
            b.copy_from_slice(c);
            from_bytes(b)
        })
        .collect()
}
