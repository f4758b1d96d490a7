//! Reading IDX files (the MNIST container format), raw or gzip-compressed, into u8 arrays, with
//! an optional SHA-256 check against a `SHA256SUMS` file beside them.
//!
//! The header is a magic number `00 00 08 ndim` (0x08: unsigned bytes) followed by `ndim`
//! big-endian u32 sizes, then the data in C order. Every way a file can be wrong (short header,
//! short or long data, wrong magic, sizes that overflow) is an error that names the path; the
//! declared sizes never decide an allocation on their own, so a corrupt header cannot ask for
//! gigabytes.

use super::file_error;
use crate::NDArray;
use flate2::read::MultiGzDecoder;
use quill_core::Result;
use sha2::{Digest, Sha256};
use std::io::{self, Read};
use std::path::Path;

const OP: &str = "read_idx";
/// The element-type byte of the magic number for unsigned bytes, the only type read here.
const TYPE_U8: u8 = 0x08;
/// Deflate cannot expand data by more than about 1032:1, so this many bytes per compressed byte
/// bounds what a gzip file can legitimately hold: the buffer reserved up front is capped by it.
const MAX_DEFLATE_RATIO: usize = 1032;

/// What the SHA-256 check found for a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// `SHA256SUMS` lists the file and its digest matches.
    Verified,
    /// `SHA256SUMS` exists but does not list the file.
    NotListed,
    /// There is no `SHA256SUMS` beside the file.
    NoSumsFile,
}

/// Reads an IDX file of unsigned bytes (raw or gzip, told apart by the gzip magic `1f 8b`, not by
/// the name) into a u8 array of the declared shape. When a `SHA256SUMS` file beside it lists the
/// file, the digest of the bytes on disk must match.
pub fn read_idx(path: impl AsRef<Path>) -> Result<NDArray> {
    read_idx_with_checksum(path).map(|(a, _)| a)
}

/// As [`read_idx`], also saying whether the checksum was verified.
pub fn read_idx_with_checksum(path: impl AsRef<Path>) -> Result<(NDArray, Checksum)> {
    let (shape, data, checksum) = read_idx_raw(path.as_ref())?;
    Ok((NDArray::from_vec(data, &shape)?, checksum))
}

/// Lower-case hex SHA-256 of `bytes`, as `sha256sum` prints it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The shape and the C-order bytes of an IDX file, for callers that convert the bytes directly
/// (MNIST scales them to f32) and so need no intermediate u8 array.
pub(crate) fn read_idx_raw(path: &Path) -> Result<(Vec<usize>, Vec<u8>, Checksum)> {
    let file =
        std::fs::read(path).map_err(|e| file_error(OP, path, format!("cannot read: {e}")))?;
    let checksum = check_sha256(OP, path, &file)?;
    let (shape, data) = if file.starts_with(&[0x1f, 0x8b]) {
        decode_gzip(path, &file)?
    } else {
        decode_raw(path, file)?
    };
    Ok((shape, data, checksum))
}

/// A whole file (gunzipped when it starts with the gzip magic) and what its `SHA256SUMS` check
/// found: how the text and pickle readers load files with the same integrity rule as IDX.
pub(crate) fn read_checked(op: &'static str, path: &Path) -> Result<(Vec<u8>, Checksum)> {
    let file =
        std::fs::read(path).map_err(|e| file_error(op, path, format!("cannot read: {e}")))?;
    let checksum = check_sha256(op, path, &file)?;
    if !file.starts_with(&[0x1f, 0x8b]) {
        return Ok((file, checksum));
    }
    let mut data = Vec::with_capacity(file.len().saturating_mul(4));
    MultiGzDecoder::new(&file[..])
        .read_to_end(&mut data)
        .map_err(|e| file_error(op, path, format!("corrupt gzip data: {e}")))?;
    Ok((data, checksum))
}

fn decode_raw(path: &Path, mut file: Vec<u8>) -> Result<(Vec<usize>, Vec<u8>)> {
    let mut reader = &file[..];
    let (shape, declared) = read_header(path, &mut reader)?;
    let header_len = file.len() - reader.len();
    check_data_len(path, &shape, declared, reader.len())?;
    // Reuse the file's buffer: shifting out the header is cheaper than copying the data.
    file.drain(..header_len);
    Ok((shape, file))
}

fn decode_gzip(path: &Path, file: &[u8]) -> Result<(Vec<usize>, Vec<u8>)> {
    let mut dec = MultiGzDecoder::new(file);
    let (shape, declared) = read_header(path, &mut dec)?;
    let mut data = Vec::with_capacity(declared.min(file.len().saturating_mul(MAX_DEFLATE_RATIO)));
    // One byte past the declared size is enough to tell "too long" without reading a bomb.
    let limit = (declared as u64).saturating_add(1);
    dec.take(limit)
        .read_to_end(&mut data)
        .map_err(|e| file_error(OP, path, format!("corrupt gzip data: {e}")))?;
    check_data_len(path, &shape, declared, data.len())?;
    Ok((shape, data))
}

/// Parses the magic number and sizes; returns the shape and its element count (= data bytes).
fn read_header(path: &Path, r: &mut impl Read) -> Result<(Vec<usize>, usize)> {
    let mut magic = [0u8; 4];
    read_exact(path, r, &mut magic, "the 4-byte magic number")?;
    let [z0, z1, ty, ndim] = magic;
    if z0 != 0 || z1 != 0 || ty != TYPE_U8 || !(1..=4).contains(&ndim) {
        return Err(file_error(
            OP,
            path,
            format!(
                "wrong magic number 0x{:08x}: expected 0x0000080N (unsigned bytes, N = 1..4 \
                 dimensions; 0x00000801 labels, 0x00000803 images)",
                u32::from_be_bytes(magic)
            ),
        ));
    }
    let mut dims = vec![0u8; 4 * ndim as usize];
    read_exact(path, r, &mut dims, "the dimension sizes")?;
    let shape: Vec<usize> = dims
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| {
            file_error(
                OP,
                path,
                format!("dims {shape:?} overflow the address space"),
            )
        })?;
    Ok((shape, numel))
}

fn read_exact(path: &Path, r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        let why = if e.kind() == io::ErrorKind::UnexpectedEof {
            "file ends early".to_string()
        } else {
            e.to_string()
        };
        file_error(
            OP,
            path,
            format!("truncated header: cannot read {what} ({why})"),
        )
    })
}

fn check_data_len(path: &Path, shape: &[usize], declared: usize, got: usize) -> Result<()> {
    if got < declared {
        return Err(file_error(
            OP,
            path,
            format!("truncated data: dims {shape:?} declare {declared} bytes but only {got} follow the header"),
        ));
    }
    if got > declared {
        return Err(file_error(
            OP,
            path,
            format!("dims {shape:?} declare {declared} data bytes but more follow the header (dims do not match the file)"),
        ));
    }
    Ok(())
}

/// Checks `bytes` (the file as stored) against `SHA256SUMS` in the file's directory.
fn check_sha256(op: &'static str, path: &Path, bytes: &[u8]) -> Result<Checksum> {
    match listed_digest(op, path)? {
        Listed::No(c) => Ok(c),
        Listed::Digest(hex) => compare_digest(op, path, &hex, &sha256_hex(bytes)),
    }
}

/// As [`check_sha256`] for a file not held in memory: when `SHA256SUMS` lists it, the file
/// is hashed as it is read, a chunk at a time.
pub(crate) fn check_sha256_file(op: &'static str, path: &Path) -> Result<Checksum> {
    let hex = match listed_digest(op, path)? {
        Listed::No(c) => return Ok(c),
        Listed::Digest(hex) => hex,
    };
    let cannot = |e: io::Error| file_error(op, path, format!("cannot read: {e}"));
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cannot(e)),
        };
        hasher.update(&buf[..n]);
    }
    let actual: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    compare_digest(op, path, &hex, &actual)
}

/// What `SHA256SUMS` says about a file: a digest to check, or why there is none.
enum Listed {
    No(Checksum),
    Digest(String),
}

fn compare_digest(op: &'static str, path: &Path, hex: &str, actual: &str) -> Result<Checksum> {
    if !actual.eq_ignore_ascii_case(hex) {
        let sums_path = path.parent().unwrap_or(Path::new(".")).join("SHA256SUMS");
        return Err(file_error(
            op,
            path,
            format!(
                "sha256 mismatch: expected {hex} (from {}), actual {actual}",
                sums_path.display()
            ),
        ));
    }
    Ok(Checksum::Verified)
}

/// The digest `SHA256SUMS` in the file's directory lists for it, if any.
fn listed_digest(op: &'static str, path: &Path) -> Result<Listed> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let sums_path = dir.join("SHA256SUMS");
    let sums = match std::fs::read_to_string(&sums_path) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Listed::No(Checksum::NoSumsFile))
        }
        Err(e) => return Err(file_error(op, &sums_path, format!("cannot read: {e}"))),
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(Listed::No(Checksum::NotListed));
    };
    for (i, line) in sums.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // `sha256sum` format: 64 hex digits, whitespace, then the name ('*' marks binary mode).
        let (hex, rest) = line.split_at(line.find(char::is_whitespace).unwrap_or(line.len()));
        let listed = rest.trim_start().trim_start_matches('*');
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) || listed.is_empty() {
            return Err(file_error(
                op,
                &sums_path,
                format!(
                    "line {} is not `<64 hex digits>  <file name>`: {:?}",
                    i + 1,
                    line.chars().take(100).collect::<String>()
                ),
            ));
        }
        if listed == name {
            return Ok(Listed::Digest(hex.to_string()));
        }
    }
    Ok(Listed::No(Checksum::NotListed))
}
