//! Constructors: from data, constant fills, ranges, identity, and seeded random arrays.

use super::NDArray;
use crate::backend::Storage;
use crate::device::Device;
use quill_core::shape::checked_numel;
use quill_core::{DType, Element, Error, Layout, Result, Scalar};
use quill_cpu::{dispatch_dtype, CpuStorage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Checks that `shape` has a representable element count and byte size for `dtype`.
pub(super) fn checked_len(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    let n = checked_numel(op, shape)?;
    if n.checked_mul(dtype.size_in_bytes())
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(Error::Overflow {
            op,
            shape: shape.into(),
        });
    }
    super::check_alloc(op, n, dtype)?;
    Ok(n)
}

impl NDArray {
    /// An array of `shape` over `data` in C order.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<NDArray> {
        let n = checked_len("from_vec", shape, T::DTYPE)?;
        if n != data.len() {
            return Err(Error::DataLength {
                op: "from_vec",
                shape: shape.into(),
                numel: n,
                len: data.len(),
            });
        }
        Ok(NDArray::from_storage(
            Storage::Cpu(CpuStorage::from_elements(data)),
            Layout::contiguous(shape)?,
        ))
    }

    /// A rank-0 array holding `value`.
    pub fn scalar<T: Element>(value: T) -> NDArray {
        NDArray::from_storage(
            Storage::Cpu(CpuStorage::from_elements(vec![value])),
            Layout::contiguous(&[]).expect("rank 0"),
        )
    }

    /// A fresh array of `shape` filled with zeros, on the CPU.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let z = NDArray::zeros(&[2, 3], DType::I32)?;
    /// assert_eq!(z.to_vec::<i32>()?, vec![0; 6]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn zeros(shape: &[usize], dtype: DType) -> Result<NDArray> {
        let n = checked_len("zeros", shape, dtype)?;
        Ok(NDArray::from_storage(
            Storage::Cpu(CpuStorage::zeros("zeros", dtype, n)?),
            Layout::contiguous(shape)?,
        ))
    }

    /// A fresh array of `shape` filled with ones, on the CPU.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// assert_eq!(NDArray::ones(&[3], DType::F64)?.to_vec::<f64>()?, vec![1.0; 3]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn ones(shape: &[usize], dtype: DType) -> Result<NDArray> {
        NDArray::full(shape, true, dtype)
    }

    /// An array of `shape` with every element `value` cast to `dtype` (NumPy's cast rules).
    pub fn full(shape: &[usize], value: impl Into<Scalar>, dtype: DType) -> Result<NDArray> {
        let n = checked_len("full", shape, dtype)?;
        let layout = Layout::contiguous(shape)?;
        let mut s = CpuStorage::for_overwrite("full", dtype, n)?;
        quill_cpu::fill(&mut s, &layout, value.into());
        Ok(NDArray::from_storage(Storage::Cpu(s), layout))
    }

    /// `start, start + step, ...` below `stop` (above it for a negative step), as NumPy's arange.
    pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<NDArray> {
        const OP: &str = "arange";
        if step == 0.0 || !(start.is_finite() && stop.is_finite() && step.is_finite()) {
            return Err(Error::invalid(OP, format!("needs finite bounds and a non-zero step, got start {start}, stop {stop}, step {step}")));
        }
        let len = ((stop - start) / step).ceil().max(0.0);
        if len > isize::MAX as f64 {
            return Err(Error::invalid(
                OP,
                format!("start {start}, stop {stop}, step {step} gives too many elements"),
            ));
        }
        let n = len as usize;
        checked_len(OP, &[n], dtype)?;
        from_fn("arange", dtype, n, |i| start + i as f64 * step)
    }

    /// `num` evenly spaced values from `start` to `stop` inclusive, as NumPy's linspace.
    pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Result<NDArray> {
        checked_len("linspace", &[num], dtype)?;
        let step = if num > 1 {
            (stop - start) / (num - 1) as f64
        } else {
            0.0
        };
        from_fn("linspace", dtype, num, |i| {
            if num > 1 && i == num - 1 {
                stop
            } else {
                start + i as f64 * step
            }
        })
    }

    /// An `n x m` array with ones on the diagonal `k` (0: main, > 0: above).
    pub fn eye(n: usize, m: usize, k: isize, dtype: DType) -> Result<NDArray> {
        let a = NDArray::zeros(&[n, m], dtype)?;
        let (r0, c0) = if k >= 0 {
            (0, k as usize)
        } else {
            (k.unsigned_abs(), 0)
        };
        if r0 < n && c0 < m {
            let len = (n - r0).min(m - c0);
            let diag = Layout::as_strided(&[len], &[m as isize + 1], r0 * m + c0, n * m)?;
            a.with_layout(diag).assign_scalar(1)?;
        }
        Ok(a)
    }

    /// Uniform samples in [0, 1) from a ChaCha8 stream seeded by `seed` (same values on every
    /// platform). Float dtypes only.
    pub fn rand(shape: &[usize], seed: u64, dtype: DType) -> Result<NDArray> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // k / 2^bits with the dtype's mantissa width: exact in the dtype, so never rounds to 1.
        let bits = match dtype {
            DType::F64 => 53,
            DType::F16 => 11,
            DType::BF16 => 8,
            _ => 24,
        };
        let scale = (0.5f64).powi(bits);
        random(shape, dtype, "rand", || {
            (rng.random::<u64>() >> (64 - bits)) as f64 * scale
        })
    }

    /// `rand` made on `device`. On a GPU the numbers come from Philox4x32-10 there (PyTorch's
    /// CUDA generator): no host work and no transfer, but a different stream from the CPU's
    /// ChaCha8 for the same seed.
    pub fn rand_on(shape: &[usize], seed: u64, dtype: DType, device: Device) -> Result<NDArray> {
        match crate::backend::random_on(device, false, shape, seed, dtype)? {
            Some(a) => Ok(a),
            None => NDArray::rand(shape, seed, dtype),
        }
    }

    /// `randn` made on `device` (Philox and Box-Muller on a GPU, as `rand_on`).
    pub fn randn_on(shape: &[usize], seed: u64, dtype: DType, device: Device) -> Result<NDArray> {
        match crate::backend::random_on(device, true, shape, seed, dtype)? {
            Some(a) => Ok(a),
            None => NDArray::randn(shape, seed, dtype),
        }
    }

    /// Standard normal samples of `shape` (a float dtype), drawn from a ChaCha8 stream seeded
    /// by `seed`: the same seed gives the same values on every machine.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::randn(&[1000], 7, DType::F64)?;
    /// assert_eq!(a.to_vec::<f64>()?, NDArray::randn(&[1000], 7, DType::F64)?.to_vec::<f64>()?);
    /// assert!(a.mean(None, false)?.item::<f64>()?.abs() < 0.2);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn randn(shape: &[usize], seed: u64, dtype: DType) -> Result<NDArray> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        random(shape, dtype, "randn", || {
            rng.sample(rand_distr::StandardNormal)
        })
    }

    /// The mask of inverted dropout: each element independently `1 / (1 - p)` (kept) or 0
    /// (dropped with probability `p`), in `dtype` (a float). Element `i` is decided by word `i`
    /// of the ChaCha8 stream seeded by `seed` (kept when its top 24 bits, read as a fraction,
    /// are `>= p`), so the mask does not depend on how many threads fill it.
    pub fn dropout_mask(shape: &[usize], p: f64, seed: u64, dtype: DType) -> Result<NDArray> {
        const OP: &str = "dropout_mask";
        if !dtype.is_float() {
            return Err(Error::invalid(
                OP,
                format!("needs a float dtype, got {dtype}"),
            ));
        }
        if !(0.0..1.0).contains(&p) {
            return Err(Error::invalid(OP, format!("p must lie in [0, 1), got {p}")));
        }
        let n = checked_len(OP, shape, dtype)?;
        // One pass, in parallel: this replaced rand + compare + cast + scale (four passes,
        // 134 us for a (128, 256) mask on 2 threads).
        const CHUNK: usize = 16 * 1024;
        let threshold = (p * (1u32 << 24) as f64).ceil() as u32;
        let keep = (1.0 / (1.0 - p)) as f32;
        let mut v: Vec<f32> = quill_cpu::pool::take(OP, n)?;
        let fill = |c: usize, out: &mut [f32]| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_word_pos((c * CHUNK) as u128);
            let mut words = [0u32; 256];
            for part in out.chunks_mut(words.len()) {
                let w = &mut words[..part.len()];
                rng.fill(w);
                // Branch-free: a 10 % drop rate mispredicts a branch on every tenth element.
                for (x, &u) in part.iter_mut().zip(w.iter()) {
                    *x = keep * ((u >> 8 >= threshold) as u32 as f32);
                }
            }
        };
        quill_cpu::par::for_each_chunk(&mut v, CHUNK, quill_cpu::par::threads(), fill);
        let m = NDArray::from_vec(v, shape)?;
        Ok(if dtype == DType::F32 {
            m
        } else {
            m.astype(dtype)?
        })
    }

    /// Zeros of this array's shape and dtype, on its device.
    pub fn zeros_like(&self) -> Result<NDArray> {
        self.full_like(0.0)
    }

    /// `value` (cast to this dtype) everywhere, in this array's shape, dtype and device.
    pub fn full_like(&self, value: impl Into<Scalar>) -> Result<NDArray> {
        NDArray::full_on(self.shape(), value, self.dtype(), self.device())
    }

    /// Zeros of `shape` and `dtype` made on `device` (`torch.zeros(..., device=)`).
    pub fn zeros_on(shape: &[usize], dtype: DType, device: Device) -> Result<NDArray> {
        NDArray::full_on(shape, 0.0, dtype, device)
    }

    /// `full` made on `device`: on a GPU by a fill kernel there, with no host buffer and no
    /// transfer.
    pub fn full_on(
        shape: &[usize],
        value: impl Into<Scalar>,
        dtype: DType,
        device: Device,
    ) -> Result<NDArray> {
        if device == Device::Cpu {
            return NDArray::full(shape, value, dtype);
        }
        let n = checked_len("full", shape, dtype)?;
        let out = NDArray::fresh(Storage::for_overwrite(device, dtype, n)?, shape)?;
        // Cast as `full` casts on the CPU (no range check: that is the setitem path's).
        out.write().fill(&out.layout, value.into())?;
        Ok(out)
    }
}

fn random(
    shape: &[usize],
    dtype: DType,
    op: &'static str,
    mut next: impl FnMut() -> f64,
) -> Result<NDArray> {
    if !dtype.is_float() {
        return Err(Error::invalid(
            op,
            format!("needs a float dtype, got {dtype}"),
        ));
    }
    let n = checked_len(op, shape, dtype)?;
    let values: Vec<f64> = (0..n).map(|_| next()).collect();
    from_fn(op, dtype, n, |i| values[i])?
        .reshape(&shape.iter().map(|&d| d as isize).collect::<Vec<_>>())
}

/// A 1-D array of `n` values `f(i)` converted to `dtype`.
fn from_fn(op: &'static str, dtype: DType, n: usize, f: impl Fn(usize) -> f64) -> Result<NDArray> {
    dispatch_dtype!(dtype, T => {
        // From the pool, not `collect`: a large pool buffer is advised for huge pages before
        // its first touch, which makes later streaming reads ~25% faster (sum over rows of a
        // 64 MiB array: 19.6 -> 25.0 GB/s).
        let mut v: Vec<T> = quill_cpu::pool::take(op, n)?;
        for (i, x) in v.iter_mut().enumerate() {
            *x = <T as Element>::from_f64(f(i));
        }
        NDArray::from_vec(v, &[n])
    })
}
