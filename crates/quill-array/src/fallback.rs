//! Host round trips: each time a GPU backend has no kernel for an op (it answers
//! `Error::Unsupported`) and `backend.rs` runs the op on host copies of the operands instead
//! (GPU -> host -> CPU kernel -> GPU). Counted per op, like the allocator's statistics, so a
//! training job can say how often it left the device; with `QUILL_WARN_HOST_FALLBACK` set (to
//! anything but `0`), the first trip of each op prints one line on stderr naming the op and
//! what the backend lacked. `supports` says beforehand which ops run natively where.

use crate::{fused, Device};
use quill_core::{BinaryOp, DType, Error, ReduceOp, Result, UnaryOp};
use std::sync::Mutex;

/// The ops that are not in quill-core's unary / binary / reduce tables, by the names that
/// `supports`, `host_round_trips` and the errors use.
const OTHER_OPS: [&str; 16] = [
    "compact",
    "assign",
    "astype",
    "fill",
    "where",
    "mean",
    "var",
    "std",
    "logsumexp",
    "matmul",
    "gather",
    "scatter_add",
    "sort",
    "cumsum",
    "nonzero",
    "searchsorted",
];

/// Optimizer steps, by `Update::name`.
const UPDATE_OPS: [&str; 3] = ["sgd_step", "adam_step", "adamw_step"];

/// Every op name `supports` answers for: quill-core's unary, binary and reduce tables, then
/// the other backend ops, the optimizer steps and the fused ops' registry (`fused::FUSED`).
pub fn supported_ops() -> Vec<&'static str> {
    UnaryOp::ALL
        .iter()
        .map(|u| u.name())
        .chain(BinaryOp::ALL.iter().map(|b| b.name()))
        .chain(ReduceOp::ALL.iter().map(|r| r.name()))
        .chain(OTHER_OPS)
        .chain(UPDATE_OPS)
        .chain(fused::kinds().map(|k| k.name))
        .collect()
}

/// Whether `op` runs on `device` for `dtype` with that device's own kernel (true) or through
/// the host (false: its operands are copied down, the CPU kernel runs, the result goes back),
/// answered from the backend's kernel table without running anything. Every op is native on
/// the CPU. A fused op runs on a device without a host round trip when the device has its
/// kernel or every primitive of its composite (`fused_kernel` tells the two apart). An
/// unknown op name is an error listing the known ones.
pub fn supports(op: &str, dtype: DType, device: Device) -> Result<bool> {
    if !supported_ops().contains(&op) {
        return Err(Error::invalid(
            "supports",
            format!("unknown op {op:?}; the ops are {:?}", supported_ops()),
        ));
    }
    if let Some(kind) = fused::kinds().find(|k| k.name == op) {
        if fused::fused_kernel(op, dtype, device)? {
            return Ok(true);
        }
        for p in kind.composite {
            if !supports(p, dtype, device)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    match device {
        Device::Cpu => Ok(true),
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => Ok(<quill_cuda::CudaStorage as quill_core::Backend>::supports(
            op, dtype,
        )),
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) => {
            let _ = dtype;
            Ok(false)
        }
    }
}

/// (op, round trips) in first-seen order. Ops are few (tens), so a list beats a map.
static TRIPS: Mutex<Vec<(&'static str, u64)>> = Mutex::new(Vec::new());

/// Notes one round trip of `op`; `why` is the backend's reason, shown by the warning.
pub(crate) fn note(op: &'static str, why: &dyn std::fmt::Display) {
    let first = {
        let mut trips = TRIPS.lock().unwrap_or_else(|e| e.into_inner());
        match trips.iter_mut().find(|(name, _)| *name == op) {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                trips.push((op, 1));
                true
            }
        }
    };
    if first && warn_enabled() {
        eprintln!(
            "quill: {why}; running {op} on the host (its operands are copied to the host and \
             the result back), counted in host_round_trips()"
        );
    }
}

/// Notes a round trip of `op` when `device` is not the host: for the ops whose GPU path is,
/// by design, the host one (no backend method; the op copies its operands down itself).
pub(crate) fn note_off_host(op: &'static str, device: Device) {
    if device != Device::Cpu {
        note(op, &format_args!("{op}: no {device} kernel"));
    }
}

fn warn_enabled() -> bool {
    std::env::var_os("QUILL_WARN_HOST_FALLBACK").is_some_and(|v| v != "0" && !v.is_empty())
}

/// How many times each op has run on the host because its GPU backend had no kernel for it,
/// since the start or the last `reset_host_round_trips`: `(op, count)` in the order first
/// seen. Empty on a CPU-only run, and the goal on a GPU.
pub fn host_round_trips() -> Vec<(&'static str, u64)> {
    TRIPS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Sets every count of `host_round_trips` back to zero (forgets the ops).
pub fn reset_host_round_trips() {
    TRIPS.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_native_on_the_cpu_and_unknown_ops_err() {
        for op in supported_ops() {
            for dtype in DType::ALL {
                assert!(supports(op, dtype, Device::Cpu).unwrap(), "{op} {dtype}");
            }
        }
        let e = supports("frobnicate", DType::F32, Device::Cpu).unwrap_err();
        assert!(e.to_string().contains("unknown op \"frobnicate\""), "{e}");
        let ops = supported_ops();
        let unique: std::collections::HashSet<_> = ops.iter().collect();
        assert_eq!(unique.len(), ops.len(), "an op name is listed twice");
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn the_cuda_table_answers_without_a_gpu() {
        let cuda = Device::Cuda(0);
        assert!(supports("exp", DType::F32, cuda).unwrap());
        assert!(supports("add", DType::F64, cuda).unwrap());
        assert!(supports("sum", DType::F32, cuda).unwrap());
        assert!(supports("matmul", DType::F32, cuda).unwrap());
        assert!(!supports("matmul", DType::I32, cuda).unwrap());
        for op in ["sort", "cumsum", "gather", "nonzero", "any"] {
            assert!(!supports(op, DType::F32, cuda).unwrap(), "{op}");
        }
        // Fused ops without a CUDA kernel run their composite there: no host round trip.
        for op in [
            "conv2d",
            "max_pool2d",
            "layer_norm",
            "scaled_dot_product_attention",
        ] {
            assert!(supports(op, DType::F32, cuda).unwrap(), "{op}");
            assert!(!fused::fused_kernel(op, DType::F32, cuda).unwrap(), "{op}");
        }
        // RMS norm's forward has its own CUDA kernel (f32 / f64), its backward the composite.
        assert!(fused::fused_kernel("rms_norm", DType::F32, cuda).unwrap());
        assert!(!fused::fused_kernel("rms_norm", DType::F16, cuda).unwrap());
        assert!(!fused::fused_kernel("rms_norm_backward", DType::F32, cuda).unwrap());
    }

    #[test]
    fn every_fused_op_composite_names_known_primitives() {
        let ops = supported_ops();
        for kind in fused::kinds() {
            assert!(!kind.composite.is_empty(), "{}", kind.name);
            for p in kind.composite {
                assert!(ops.contains(p), "{}: unknown primitive {p}", kind.name);
                assert!(
                    fused::kinds().all(|k| k.name != *p),
                    "{}: a composite of fused ops",
                    kind.name
                );
            }
            assert!(fused::fused_kernel(kind.name, DType::F32, Device::Cpu).unwrap());
            assert!(!fused::fused_kernel(kind.name, DType::I64, Device::Cpu).unwrap());
        }
        let e = fused::fused_kernel("matmul", DType::F32, Device::Cpu).unwrap_err();
        assert!(e.to_string().contains("unknown fused op"), "{e}");
    }

    #[test]
    fn counts_per_op_in_first_seen_order_and_resets() {
        reset_host_round_trips();
        note("conv2d", &"no kernel");
        note("sort", &"no kernel");
        note("conv2d", &"no kernel");
        assert_eq!(host_round_trips(), vec![("conv2d", 2), ("sort", 1)]);
        reset_host_round_trips();
        assert!(host_round_trips().is_empty());
    }
}
