//! The per-thread autocast state: mixed-precision execution as PyTorch's `torch.autocast`.
//! Inside `let _g = autocast(DType::BF16)?;` the ops that gain from a narrow dtype (matmul,
//! hence `nn::Linear`; needle's `conv`; `scaled_dot_product_attention`) cast their f32 (and
//! f16) operands to bf16 through the recorded `astype` and return a bf16 result, while the
//! ops whose accuracy needs the range or the mantissa of f32 (softmax, log_softmax,
//! logsumexp, sum, prod, mean, var, std, exp and log, the norms, the losses) widen bf16 and
//! f16 operands to f32 first. `conv2d` is on the f32 side for now, unlike PyTorch's: its CPU
//! kernel has no bf16 arithmetic (see `ops/conv2d.rs`). Parameters stay f32 ("master
//! weights"): the backward of a cast is the cast back, so their gradients arrive in f32.
//!
//! The state lives in a thread-local, as the grad mode does (`mode.rs`): ops run on the
//! thread that called them (kernels fan out to the pool on their own), so a guard made on
//! the thread that runs the model covers every op it calls. The backward pass turns autocast
//! off (`graph.rs`), so each backward op runs in the dtype its forward chose, as PyTorch's.

use crate::tensor::Tensor;
use quill_core::{DType, Error, Result};
use std::cell::Cell;

thread_local! {
    static DTYPE: Cell<Option<DType>> = const { Cell::new(None) };
}

/// The dtype ops autocast to on this thread (`None`: autocast is off).
pub fn autocast_dtype() -> Option<DType> {
    DTYPE.with(|d| d.get())
}

/// True when this thread is inside an [`autocast`] region.
pub fn is_autocast_enabled() -> bool {
    autocast_dtype().is_some()
}

/// Restores the previous autocast state when dropped (regions nest).
#[must_use = "autocast reverts when the guard drops"]
pub struct AutocastGuard {
    prev: Option<DType>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        DTYPE.with(|d| d.set(self.prev));
    }
}

/// Autocasts this thread's ops to `dtype` until the returned guard drops:
/// `let _g = autocast(DType::BF16)?;` (`let _ = ...` would drop it at once). `None` turns
/// autocast off inside an enclosing region. bf16 and f16 are accepted; any other dtype is an
/// `InvalidArgument` naming `autocast`, and the state is left as it was.
pub fn autocast(dtype: impl Into<Option<DType>>) -> Result<AutocastGuard> {
    let dtype = dtype.into();
    if let Some(d) = dtype {
        if !matches!(d, DType::BF16 | DType::F16) {
            return Err(Error::invalid(
                "autocast",
                format!("dtype must be bf16 or f16 (or None to turn autocast off), got {d}"),
            ));
        }
    }
    Ok(set(dtype))
}

/// Turns autocast off on this thread until the returned guard drops (what the backward pass
/// does); infallible, unlike [`autocast`].
pub fn no_autocast() -> AutocastGuard {
    set(None)
}

fn set(dtype: Option<DType>) -> AutocastGuard {
    AutocastGuard {
        prev: DTYPE.with(|d| d.replace(dtype)),
    }
}

/// Whether autocast casts a tensor of `d`: the float dtypes below f64, as PyTorch (an f64
/// operand was asked for on purpose; integers are not numbers to round).
fn eligible(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16)
}

/// For an op that runs in the autocast dtype: its operands cast to it when autocast is on and
/// some eligible operand has another dtype, else `None` (the op runs as called). The op calls
/// itself again with the cast operands, which then need no cast, so it recurses once.
pub(crate) fn lower<const N: usize>(inputs: [&Tensor; N]) -> Result<Option<[Tensor; N]>> {
    let Some(d) = autocast_dtype() else {
        return Ok(None);
    };
    if !inputs.iter().any(|t| eligible(t.dtype()) && t.dtype() != d) {
        return Ok(None);
    }
    let mut out = inputs.map(|t| t.clone());
    for t in out.iter_mut() {
        if eligible(t.dtype()) {
            *t = t.astype(d)?;
        }
    }
    Ok(Some(out))
}

/// For an op that runs in f32 under autocast, as [`lower`] for the narrow ones: its operands
/// with bf16 / f16 ones widened to f32 when autocast is on and some operand needs it, else
/// `None` (the op runs as called; with the widened operands it recurses once).
pub(crate) fn widened<const N: usize>(inputs: [&Tensor; N]) -> Result<Option<[Tensor; N]>> {
    if !is_autocast_enabled() || !inputs.iter().any(|t| needs_widening(t.dtype())) {
        return Ok(None);
    }
    let mut out = inputs.map(|t| t.clone());
    for t in out.iter_mut() {
        if needs_widening(t.dtype()) {
            *t = t.astype(DType::F32)?;
        }
    }
    Ok(Some(out))
}

/// The dtypes an f32-only op widens.
fn needs_widening(d: DType) -> bool {
    matches!(d, DType::BF16 | DType::F16)
}

/// For an op that runs in f32 under autocast: `t` widened to f32 when autocast is on and `t`
/// is bf16 or f16, else `t` itself (a handle to the same node).
pub(crate) fn widen(t: &Tensor) -> Result<Tensor> {
    if is_autocast_enabled() && needs_widening(t.dtype()) {
        return t.astype(DType::F32);
    }
    Ok(t.clone())
}
