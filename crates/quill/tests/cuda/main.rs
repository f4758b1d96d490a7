//! Every op on every device. Each test body runs once per device (`device_test!`): on the CPU
//! always, and on GPU 0 when this crate is built with `--features cuda` (skipping without a GPU,
//! failing instead under `REQUIRE_CUDA=1`). On the CPU a result is checked against a naive
//! reference computed here; on a GPU against the CPU's result for the same inputs, taken
//! through the same non-contiguous views. The op sweeps iterate the vocabulary itself
//! (`UnaryOp::ALL`, `BinaryOp::ALL`, every `ReduceOp`) over every dtype, so a new op or dtype
//! is covered without touching this suite.
//!
//! The target keeps its historical name `cuda` (scripts/test-all.sh runs
//! `cargo test -p quill --features cuda --test cuda`); `cargo test --workspace` runs its CPU half.

mod arrays;
mod cases;
mod check;
#[cfg(feature = "cuda")]
mod gpu_only;
mod gradients;
mod matmul;
mod ops_elementwise;
mod ops_reduce;
mod primitives;
mod reductions;
mod training;

use quill::{DType, Device, NDArray};

/// Normal samples times 3, made on the CPU in f64 and cast to `dtype` (so integers are small
/// and varied).
pub fn randn3(shape: &[usize], seed: u64, dtype: DType) -> NDArray {
    NDArray::randn(shape, seed, DType::F64)
        .unwrap()
        .mul_scalar(3.0)
        .unwrap()
        .astype(dtype)
        .unwrap()
}

/// Without a usable GPU, moving an array there is an error naming the device and what is
/// missing, never a panic (cudarc panics on a missing library; quill probes first).
#[test]
fn without_a_gpu_to_device_is_a_clean_error() {
    if Device::cuda_is_available() {
        return;
    }
    let e = NDArray::zeros(&[3], DType::F32)
        .unwrap()
        .to_device(Device::Cuda(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cuda:0"), "{e}");
    if cfg!(feature = "cuda") {
        assert!(e.contains("driver") || e.contains("no such GPU"), "{e}");
    } else {
        assert!(e.contains("--features cuda"), "{e}");
    }
    assert_eq!(Device::cuda_device_count(), 0);
}

/// On the CPU nothing is a host round trip, whatever ran (the ops that copy to the host on a
/// GPU included).
#[test]
fn cpu_ops_make_no_host_round_trips() {
    let a = randn3(&[3, 4], 5, DType::F32);
    a.nonzero().unwrap();
    let s = NDArray::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    s.searchsorted(&a.reshape(&[-1]).unwrap(), false).unwrap();
    a.sort(-1, false).unwrap();
    let trips = quill::host_round_trips();
    assert!(
        trips
            .iter()
            .all(|(op, _)| !["nonzero", "searchsorted", "sort"].contains(op)),
        "{trips:?}"
    );
}
