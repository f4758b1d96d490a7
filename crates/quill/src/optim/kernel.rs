//! The fused update driver shared by the optimizers: it brings a parameter, its gradient and
//! its state buffers to contiguous buffers of one compute dtype, then runs an optimizer's
//! per-element rule over them in a single pass. The rules themselves live with their
//! optimizers (`sgd.rs`, `adam.rs`); this file owns the buffer plumbing.

use crate::NDArray;
use quill_core::{DType, Error, Result};
use quill_cpu::CpuElement;
use std::ops::{Add, Div, Mul, Sub};

/// The element types the update rules run in: f64 params update in f64, every other float
/// dtype (f32, f16, bf16) in f32.
pub(crate) trait Float:
    CpuElement
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + PartialOrd
{
    fn sqrt(self) -> Self;
}

impl Float for f32 {
    #[inline]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}
impl Float for f64 {
    #[inline]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// One optimizer's per-element rule: updates `p` from `g` and the state buffers (each as long
/// as `p`), all in one pass. Hyper-parameters are converted to `T` once per call, as PyTorch
/// converts its scalar arguments to the tensor's dtype.
pub(crate) trait Rule: Sync {
    fn run<T: Float>(&self, p: &mut [T], g: &[T], state: &mut [&mut [T]]);

    /// The same update as one CUDA kernel over the first `n` elements of contiguous GPU
    /// buffers of the compute dtype; `None` when the rule has no kernel.
    #[cfg(feature = "cuda")]
    fn run_cuda(
        &self,
        _p: &mut quill_cuda::CudaStorage,
        _g: &quill_cuda::CudaStorage,
        _state: &mut [&mut quill_cuda::CudaStorage],
        _n: usize,
    ) -> Option<Result<()>> {
        None
    }
}

/// The dtype a parameter of dtype `dtype` is updated in (and its state is kept in).
pub(crate) fn compute_dtype(op: &'static str, dtype: DType) -> Result<DType> {
    match dtype {
        DType::F64 => Ok(DType::F64),
        DType::F32 | DType::F16 | DType::BF16 => Ok(DType::F32),
        other => Err(Error::invalid(
            op,
            format!("only floating-point parameters can be optimized, got a {other} parameter"),
        )),
    }
}

/// A zero-filled state buffer for `param` (contiguous, of the compute dtype).
pub(crate) fn zeros_for(op: &'static str, param: &NDArray) -> Result<NDArray> {
    NDArray::zeros(param.shape(), compute_dtype(op, param.dtype())?)?.to_device(param.device())
}

/// A private contiguous copy of `src` in the compute dtype of `param` (for state that must not
/// alias anything the caller holds).
pub(crate) fn copy_for(op: &'static str, param: &NDArray, src: &NDArray) -> Result<NDArray> {
    Ok(src.astype(compute_dtype(op, param.dtype())?))
}

/// Applies `rule` to `param` (written in place) given `grad` and the param's `state` buffers,
/// which must be contiguous arrays of the compute dtype with the param's shape, owned by the
/// optimizer. A param that is already contiguous in its compute dtype is updated directly in
/// its buffer (the model sees the change through the shared buffer); any other param is
/// updated in a compact copy that is then written back.
pub(crate) fn apply(
    op: &'static str,
    rule: &impl Rule,
    param: &NDArray,
    grad: &NDArray,
    state: &[&NDArray],
) -> Result<()> {
    if grad.shape() != param.shape() {
        return Err(Error::ShapeMismatch {
            op,
            lhs: param.shape().into(),
            rhs: grad.shape().into(),
            hint: " (parameter vs its gradient)".into(),
        });
    }
    if [param, grad].iter().chain(state).any(|a| a.is_cuda()) {
        #[cfg(feature = "cuda")]
        if apply_cuda(op, rule, param, grad, state)? {
            return Ok(());
        }
        return apply_via_host(op, rule, param, grad, state);
    }
    let cd = compute_dtype(op, param.dtype())?;
    let direct = param.dtype() == cd && param.is_contiguous();
    let work = if direct {
        param.clone()
    } else {
        param.astype(cd)
    };
    // A gradient that is strided (a broadcast view, say), of another dtype, or that shares the
    // param's buffer (which the pass writes while reading the gradient) is copied first.
    let grad = if grad.dtype() == cd && grad.is_contiguous() && !grad.shares_storage_with(&work) {
        grad.clone()
    } else {
        grad.astype(cd)
    };
    match cd {
        DType::F64 => run_typed::<f64>(op, rule, &work, &grad, state)?,
        _ => run_typed::<f32>(op, rule, &work, &grad, state)?,
    }
    if !direct {
        param.assign(&work)?;
    }
    Ok(())
}

/// The fused GPU update, when the parameter and its state are whole contiguous buffers of
/// the compute dtype on one GPU (a gradient that is not is copied into one first). `Ok(false)`
/// leaves the update to the host path.
#[cfg(feature = "cuda")]
fn apply_cuda(
    op: &'static str,
    rule: &impl Rule,
    param: &NDArray,
    grad: &NDArray,
    state: &[&NDArray],
) -> Result<bool> {
    let cd = compute_dtype(op, param.dtype())?;
    let dev = param.device();
    let whole = |a: &NDArray| {
        a.device() == dev
            && a.dtype() == cd
            && a.is_contiguous()
            && a.offset() == 0
            && a.numel() == param.numel()
    };
    if !whole(param)
        || !state
            .iter()
            .all(|s| whole(s) && !s.shares_storage_with(param))
    {
        return Ok(false);
    }
    let grad = if whole(grad) && !grad.shares_storage_with(param) {
        grad.clone()
    } else {
        grad.to_device(dev)?.astype(cd)
    };
    let n = param.numel();
    crate::ndarray::cuda_update_in_place(param, &grad, state, |p, g, st| rule.run_cuda(p, g, st, n))
}

/// The update for arrays on a GPU: on host copies, written back into the device buffers.
/// Correct, but it moves every parameter across the bus each step; fused GPU updates are
/// the CUDA backend's next step.
fn apply_via_host(
    op: &'static str,
    rule: &impl Rule,
    param: &NDArray,
    grad: &NDArray,
    state: &[&NDArray],
) -> Result<()> {
    let host = |a: &NDArray| a.to_device(crate::Device::Cpu).map(|h| h.compact());
    let hp = host(param)?;
    let hg = host(grad)?;
    let hs: Vec<NDArray> = state.iter().map(|s| host(s)).collect::<Result<_>>()?;
    let refs: Vec<&NDArray> = hs.iter().collect();
    apply(op, rule, &hp, &hg, &refs)?;
    param.assign(&hp)?;
    for (s, h) in state.iter().zip(&hs) {
        s.assign(h)?;
    }
    Ok(())
}

fn internal(op: &'static str, what: &str) -> Error {
    Error::invalid(
        op,
        format!("internal: {what} is not a contiguous buffer of the compute dtype"),
    )
}

fn run_typed<T: Float>(
    op: &'static str,
    rule: &impl Rule,
    param: &NDArray,
    grad: &NDArray,
    state: &[&NDArray],
) -> Result<()> {
    let n = param.numel();
    let g_guard = grad.read();
    let g = T::slice(g_guard.cpu())
        .and_then(|v| v.get(grad.offset()..grad.offset() + n))
        .ok_or_else(|| internal(op, "the gradient"))?;
    let mut s_guards: Vec<_> = state.iter().map(|s| s.write()).collect();
    let mut s: Vec<&mut [T]> = Vec::with_capacity(state.len());
    for (guard, arr) in s_guards.iter_mut().zip(state) {
        let off = arr.offset();
        let slice = T::slice_mut(guard.cpu_mut())
            .and_then(|v| v.get_mut(off..off + n))
            .filter(|_| arr.is_contiguous() && arr.numel() == n)
            .ok_or_else(|| internal(op, "a state buffer"))?;
        s.push(slice);
    }
    let mut p_guard = param.write();
    let p = T::slice_mut(p_guard.cpu_mut())
        .and_then(|v| v.get_mut(param.offset()..param.offset() + n))
        .ok_or_else(|| internal(op, "the parameter"))?;
    run_chunks(rule, p, g, s);
    Ok(())
}

/// Elements per task: large parameters are split across threads, and each piece runs inside
/// the widest SIMD context the CPU has (a portable build would otherwise run the rule's sqrt
/// and division at SSE2 width, on one core).
const CHUNK: usize = 1 << 15;

fn run_chunks<T: Float>(rule: &impl Rule, p: &mut [T], g: &[T], mut s: Vec<&mut [T]>) {
    use rayon::prelude::*;
    let one = |p: &mut [T], g: &[T], s: &mut [&mut [T]]| {
        quill_cpu::simd::with_best_simd(
            #[inline(always)]
            || rule.run(p, g, s),
        )
    };
    if p.len() < 2 * CHUNK {
        return one(p, g, &mut s);
    }
    let mut pieces: Vec<Vec<&mut [T]>> = (0..p.len().div_ceil(CHUNK)).map(|_| Vec::new()).collect();
    for buf in s.iter_mut() {
        for (i, c) in buf.chunks_mut(CHUNK).enumerate() {
            pieces[i].push(c);
        }
    }
    p.par_chunks_mut(CHUNK)
        .zip(g.par_chunks(CHUNK))
        .zip(pieces.into_par_iter())
        .for_each(|((p, g), mut st)| one(p, g, &mut st));
}
