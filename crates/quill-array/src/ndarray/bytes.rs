//! Arrays to and from raw little-endian bytes (bool as one 0/1 byte), the form that crosses
//! into other runtimes: a GPU buffer, NumPy's `tobytes` / `frombuffer`.

use super::NDArray;
use crate::backend::Storage;
use quill_core::{DType, Error, Layout, Result};
use quill_cpu::CpuStorage;

/// The bytes of a CPU buffer.
pub(crate) fn cpu_bytes(s: &CpuStorage) -> Vec<u8> {
    fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        let mut out = Vec::with_capacity(v.len() * N);
        for &x in v {
            out.extend_from_slice(&f(x));
        }
        out
    }
    match s {
        CpuStorage::Bool(v) => v.iter().map(|&b| b as u8).collect(),
        CpuStorage::U8(v) => v.to_vec(),
        CpuStorage::F32(v) => le(v, f32::to_le_bytes),
        CpuStorage::F64(v) => le(v, f64::to_le_bytes),
        CpuStorage::F16(v) => le(v, |x| x.to_bits().to_le_bytes()),
        CpuStorage::BF16(v) => le(v, |x| x.to_bits().to_le_bytes()),
        CpuStorage::I32(v) => le(v, i32::to_le_bytes),
        CpuStorage::I64(v) => le(v, i64::to_le_bytes),
        CpuStorage::I8(v) => le(v, i8::to_le_bytes),
        CpuStorage::I16(v) => le(v, i16::to_le_bytes),
        CpuStorage::U16(v) => le(v, u16::to_le_bytes),
        CpuStorage::U32(v) => le(v, u32::to_le_bytes),
        CpuStorage::U64(v) => le(v, u64::to_le_bytes),
        // Two parts each, real first (NumPy's and C's layout).
        CpuStorage::C64(v) => v
            .iter()
            .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()])
            .flatten()
            .collect(),
        CpuStorage::C128(v) => v
            .iter()
            .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()])
            .flatten()
            .collect(),
    }
}

/// A CPU buffer of `dtype` from bytes (whole elements; a trailing partial one is ignored).
pub(crate) fn cpu_from_bytes(b: &[u8], dtype: DType) -> CpuStorage {
    fn chunks<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N)
            .map(|c| c.try_into().expect("exact chunks"))
    }
    match dtype {
        DType::Bool => CpuStorage::Bool(b.iter().map(|&x| x != 0).collect()),
        DType::U8 => CpuStorage::U8(b.to_vec().into()),
        DType::F32 => CpuStorage::F32(chunks(b).map(f32::from_le_bytes).collect()),
        DType::F64 => CpuStorage::F64(chunks(b).map(f64::from_le_bytes).collect()),
        DType::I32 => CpuStorage::I32(chunks(b).map(i32::from_le_bytes).collect()),
        DType::I64 => CpuStorage::I64(chunks(b).map(i64::from_le_bytes).collect()),
        DType::I8 => CpuStorage::I8(chunks(b).map(i8::from_le_bytes).collect()),
        DType::I16 => CpuStorage::I16(chunks(b).map(i16::from_le_bytes).collect()),
        DType::U16 => CpuStorage::U16(chunks(b).map(u16::from_le_bytes).collect()),
        DType::U32 => CpuStorage::U32(chunks(b).map(u32::from_le_bytes).collect()),
        DType::U64 => CpuStorage::U64(chunks(b).map(u64::from_le_bytes).collect()),
        DType::C64 => CpuStorage::C64(
            chunks::<8>(b)
                .map(|c| {
                    let (re, im) = c.split_at(4);
                    let part = |p: &[u8]| f32::from_le_bytes(p.try_into().expect("4 bytes"));
                    quill_core::C64::new(part(re), part(im))
                })
                .collect(),
        ),
        DType::C128 => CpuStorage::C128(
            chunks::<16>(b)
                .map(|c| {
                    let (re, im) = c.split_at(8);
                    let part = |p: &[u8]| f64::from_le_bytes(p.try_into().expect("8 bytes"));
                    quill_core::C128::new(part(re), part(im))
                })
                .collect(),
        ),
        DType::F16 => CpuStorage::F16(
            chunks(b)
                .map(|c| half::f16::from_bits(u16::from_le_bytes(c)))
                .collect(),
        ),
        DType::BF16 => CpuStorage::BF16(
            chunks(b)
                .map(|c| half::bf16::from_bits(u16::from_le_bytes(c)))
                .collect(),
        ),
    }
}

impl NDArray {
    /// An array of `shape` and `dtype` over C-order little-endian `bytes` (bool: one byte per
    /// element, nonzero is true), as NumPy's `tobytes` writes them.
    pub fn from_le_bytes(bytes: &[u8], shape: &[usize], dtype: DType) -> Result<NDArray> {
        const OP: &str = "from_le_bytes";
        let layout = Layout::contiguous(shape)?;
        let want = layout.numel().checked_mul(dtype.size_in_bytes());
        if want != Some(bytes.len()) {
            return Err(Error::invalid(
                OP,
                format!(
                    "shape {shape:?} of {dtype} needs {} bytes, got {}",
                    want.map_or("more than usize::MAX".to_string(), |w| w.to_string()),
                    bytes.len()
                ),
            ));
        }
        Ok(NDArray::from_storage(
            Storage::Cpu(cpu_from_bytes(bytes, dtype)),
            layout,
        ))
    }

    /// The elements in C order as little-endian bytes (bool as 0/1), from any device.
    pub fn to_le_bytes(&self) -> Result<Vec<u8>> {
        let c = self.to_device(crate::Device::Cpu)?.compact()?;
        let size = c.dtype.size_in_bytes();
        let g = c.read();
        let all = cpu_bytes(g.cpu());
        let off = c.layout.offset() * size;
        Ok(all[off..off + c.numel() * size].to_vec())
    }
}
