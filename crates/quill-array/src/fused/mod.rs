//! Fused ops: one mechanism for every op that does in one kernel what several primitives
//! would do. Each op is one file here holding its whole definition: the checks (errors name
//! the op), its composite in NDArray primitives (the reference, and what runs where no kernel
//! exists), and which backend kernels it has (the loops themselves live in the backend crates,
//! `quill_cpu::fused` and quill-cuda). `run` is the one device policy:
//!
//! 1. the device's own kernel, when the op declares one for that device and dtype;
//! 2. else the composite, on the same device (its primitives dispatch as usual).
//!
//! No fused op copies its operands to the host: a primitive the device lacks is counted by
//! `host_round_trips` as any primitive is. `FUSED` is the registry that `supports`,
//! `supported_ops` and `fused_kernel` read, so a caller can ask without running anything.
//!
//! Adding a fused op: a file here (a `FusedKind`, a type implementing `FusedOp`, and the
//! `NDArray` methods that run it), one line in `FUSED`, the kernel per backend, and the Tensor
//! wrapper with its backward in the `quill` crate.

mod attention;
mod batch_norm;
mod conv;
mod layer_norm;
mod max_pool;
mod recurrent;
mod rms_norm;
mod sum_squares;

pub use recurrent::{Activation, Cell, RecurrentTape};

use crate::backend::colocate_all;
use crate::{Device, NDArray};
use quill_core::{DType, Error, Result};

/// What the registry knows of a fused op, without an instance of it.
pub struct FusedKind {
    /// The name `supports`, `host_round_trips` and the errors use.
    pub name: &'static str,
    /// The dtypes the CPU kernel takes (operands of one dtype).
    pub cpu: fn(DType) -> bool,
    /// The dtypes the CUDA kernel takes (operands of one dtype).
    pub cuda: fn(DType) -> bool,
    /// The primitives the composite runs (by `supports`' names): where the device lacks
    /// a kernel, the op runs on it exactly when these do.
    pub composite: &'static [&'static str],
}

/// A kernel for no dtype (a backend without one for this op).
pub(crate) fn none(_: DType) -> bool {
    false
}

/// f32 and f64: the dtypes of the float kernels.
pub(crate) fn f32_f64(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64)
}

/// Every float dtype: the kernels that compute f16 and bf16 in f32.
pub(crate) fn floats(d: DType) -> bool {
    d.is_float()
}

/// The arithmetic dtype of the float kernels and composites: f64 for f64, f32 otherwise.
pub(crate) fn compute_of(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// `x`'s shape with the last dim 1: the shape of per-row statistics.
pub(crate) fn row_shape(x: &NDArray) -> Vec<usize> {
    let mut s = x.shape().to_vec();
    if let Some(last) = s.last_mut() {
        *last = 1;
    }
    s
}

/// Errors unless `got` is `want`, the shape that `by` (the forward's sizes) implies.
pub(crate) fn check_implied(
    op: &'static str,
    what: &str,
    got: &[usize],
    want: &[usize],
    by: &str,
) -> Result<()> {
    if got == want {
        return Ok(());
    }
    Err(Error::ShapeMismatch {
        op,
        lhs: got.into(),
        rhs: want.into(),
        hint: format!(" ({what} must have the shape {by} implies)"),
    })
}

/// Every fused op. One line per op (and one per backward that is a fused op of its own).
pub(crate) const FUSED: [&FusedKind; 15] = [
    &attention::FORWARD,
    &attention::BACKWARD,
    &batch_norm::FORWARD,
    &batch_norm::BACKWARD,
    &conv::FORWARD,
    &conv::BACKWARD_INPUT,
    &conv::BACKWARD_WEIGHT,
    &layer_norm::FORWARD,
    &layer_norm::BACKWARD,
    &max_pool::FORWARD,
    &max_pool::BACKWARD,
    &recurrent::FORWARD,
    &rms_norm::FORWARD,
    &rms_norm::BACKWARD,
    &sum_squares::FORWARD,
];

/// One fused op with its parameters (eps, ...); its operands come to `run`.
pub(crate) trait FusedOp {
    /// The arrays it returns (a tuple, or `Option`s for gradients not asked for).
    type Output;
    /// Its registry entry.
    fn kind(&self) -> &'static FusedKind;
    /// Shapes and dtypes of the operands; an error names the op and the values.
    fn check(&self, inputs: &[&NDArray]) -> Result<()>;
    /// The op in NDArray primitives, on any device and dtype.
    fn composite(&self, inputs: &[&NDArray]) -> Result<Self::Output>;
    /// The CPU kernel; called only for operands on the CPU of one dtype that `kind().cpu`
    /// takes.
    fn cpu(&self, inputs: &[&NDArray]) -> Result<Self::Output>;
    /// The CUDA kernel; called only for operands on one GPU of one dtype that `kind().cuda`
    /// takes.
    fn cuda(&self, inputs: &[&NDArray]) -> Result<Self::Output> {
        let _ = inputs;
        Err(Error::invalid(
            self.kind().name,
            "declares a CUDA kernel but has none (a quill bug)",
        ))
    }
}

thread_local! {
    /// Set by `with_composites`: every fused op on this thread takes its composite.
    static COMPOSITES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every fused op that it calls on this thread taking its composite instead of
/// a kernel: to check a kernel against its composite (the per-device test matrix does), or to
/// measure what a kernel buys. Nests; the previous setting comes back when `f` returns or
/// panics.
pub fn with_composites<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            COMPOSITES.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(COMPOSITES.with(|c| c.replace(true)));
    f()
}

/// Runs `op` on `inputs` by the policy of this module's doc.
pub(crate) fn run<O: FusedOp>(op: &O, inputs: &[&NDArray]) -> Result<O::Output> {
    let kind = op.kind();
    let device = colocate_all(kind.name, inputs)?;
    op.check(inputs)?;
    let dtype = inputs.first().map_or(DType::F32, |a| a.dtype());
    let uniform = !COMPOSITES.with(|c| c.get())
        && inputs
            .iter()
            .all(|a| a.dtype() == dtype && a.device() == device);
    match device {
        Device::Cpu if uniform && (kind.cpu)(dtype) => op.cpu(inputs),
        Device::Cuda(_) if uniform && (kind.cuda)(dtype) => op.cuda(inputs),
        _ => op.composite(inputs),
    }
}

impl NDArray {
    /// `self` in `dtype`: itself when it already is (no copy, unlike `astype`).
    pub(crate) fn astype_if(&self, dtype: DType) -> Result<NDArray> {
        if self.dtype() == dtype {
            Ok(self.clone())
        } else {
            self.astype(dtype)
        }
    }
}

/// The fused ops' registry entries.
pub(crate) fn kinds() -> impl Iterator<Item = &'static FusedKind> {
    FUSED.into_iter()
}

/// The fused ops' names (forwards and backwards), in registry order.
pub fn fused_ops() -> Vec<&'static str> {
    kinds().map(|k| k.name).collect()
}

/// Whether the fused op `op` runs its own kernel (true) or its composite (false) on `device`
/// for operands of `dtype`. An unknown name is an error listing the fused ops.
pub fn fused_kernel(op: &str, dtype: DType, device: Device) -> Result<bool> {
    let Some(kind) = kinds().find(|k| k.name == op) else {
        let names: Vec<&str> = kinds().map(|k| k.name).collect();
        return Err(Error::invalid(
            "fused_kernel",
            format!("unknown fused op {op:?}; the fused ops are {names:?}"),
        ));
    };
    Ok(match device {
        Device::Cpu => (kind.cpu)(dtype),
        Device::Cuda(_) => (kind.cuda)(dtype),
    })
}
