//! What only exists with a GPU (built with the `cuda` feature): errors naming both devices when
//! a GPU array meets a CPU one, a copy past 2^31 elements (64-bit index math), the allocator's
//! statistics, and a pinned (exported) buffer refusing to move. Each test skips without a GPU
//! (and fails instead under `REQUIRE_CUDA=1`).

use crate::randn3;
use quill::{s, DType, Device, NDArray, Result};
use quill_test_support::{assert_close, cuda_usable};

const GPU: Device = Device::Cuda(0);

#[test]
fn device_mismatch_names_both_devices() {
    if !cuda_usable() {
        return;
    }
    let a = randn3(&[4, 3], 17, DType::F32);
    let g = a.to_device(GPU).unwrap();
    let e = g.add(&a).unwrap_err().to_string();
    assert!(
        e.contains("cuda:0") && e.contains("cpu") && e.contains("to_device"),
        "{e}"
    );
    let e = g
        .matmul(&a.permute(&[1, 0]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cuda:0") && e.contains("cpu"), "{e}");
    let b = randn3(&[2, 3], 18, DType::F32);
    let e = NDArray::concat(&[&g, &b], 0).unwrap_err().to_string();
    assert!(e.contains("cuda:0") && e.contains("cpu"), "{e}");
    // linalg's factorizations run on the host, but do not move a mixed pair silently.
    let sq = randn3(&[3, 3], 19, DType::F32);
    let e = quill::linalg::solve(&sq.to_device(GPU).unwrap(), &sq)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("linalg.solve") && e.contains("cuda:0") && e.contains("cpu"),
        "{e}"
    );
    // A one-element CPU operand is a scalar: it moves.
    let one = NDArray::from_vec(vec![2.0f32], &[1]).unwrap();
    assert_close(
        &g.mul(&one).unwrap(),
        &a.mul(&one).unwrap(),
        0.0,
        "scalar operand",
    );
    let e = NDArray::zeros(&[2], DType::F32)
        .unwrap()
        .to_device(Device::Cuda(99))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cuda:99") && e.contains("no such GPU"), "{e}");
}

#[test]
fn copy_past_two_to_the_31_elements() -> Result<()> {
    if !cuda_usable() {
        return Ok(());
    }
    // 2^31 + 3 bytes: 64-bit index math in the copy kernel, then a reversed view of it.
    let n = (1usize << 31) + 3;
    let a = NDArray::zeros(&[n], DType::U8)?.to_device(GPU)?;
    a.slice(&s![(n as isize - 2)..])?.assign_scalar(7)?;
    a.slice(&s![..2])?.assign_scalar(3)?;
    let r = a.slice(&s![..;-1])?.compact()?;
    let head = r.slice(&s![..4])?.to_device(Device::Cpu)?.to_vec::<u8>()?;
    let tail = r
        .slice(&s![(n as isize - 3)..])?
        .to_device(Device::Cpu)?
        .to_vec::<u8>()?;
    assert_eq!(head, [7, 7, 0, 0]);
    assert_eq!(tail, [0, 3, 3]);
    Ok(())
}

#[test]
fn memory_statistics() -> Result<()> {
    if !cuda_usable() {
        return Ok(());
    }
    let allocated = || quill::cuda::memory_allocated(0).unwrap();
    let before = allocated();
    let a = NDArray::zeros(&[1 << 20], DType::F32)?.to_device(GPU)?;
    let mid = allocated();
    assert!(mid >= before + (4 << 20), "{before} -> {mid}");
    drop(a);
    assert!(allocated() <= mid - (4 << 20));
    Ok(())
}

#[test]
fn a_pinned_buffer_refuses_to_move() -> Result<()> {
    // No GPU needed: the refusal comes before any transfer.
    let a = NDArray::zeros(&[4, 4], DType::F32)?;
    let pin = a.pin()?;
    let err = a.relocate(GPU).unwrap_err().to_string();
    assert!(err.contains("exported"), "{err}");
    assert_eq!(a.device(), Device::Cpu);
    drop(pin);
    assert_eq!(a.pin_count(), 0);
    if cuda_usable() {
        a.relocate(GPU)?;
        assert_eq!(a.device(), GPU);
    }
    Ok(())
}

/// `nonzero` has no GPU kernel by design (its output size is data-dependent): each call on a
/// GPU array is one counted host round trip, with the right answer.
#[test]
fn host_round_trips_are_counted_per_op() {
    if !cuda_usable() {
        return;
    }
    let a = NDArray::from_vec(vec![0.0f32, 2.0, 0.0, -1.0], &[2, 2]).unwrap();
    let before = count("nonzero");
    let g = a.to_device(GPU).unwrap();
    let nz = g.nonzero().unwrap();
    assert_eq!(count("nonzero"), before + 1);
    let rows = nz[0]
        .to_device(Device::Cpu)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    assert_eq!(rows, vec![0, 1]);
}

fn count(op: &str) -> u64 {
    quill::host_round_trips()
        .into_iter()
        .find(|(name, _)| *name == op)
        .map_or(0, |(_, n)| n)
}

/// `supports` is the truth: every unary and binary op on every dtype goes through the host
/// exactly when `supports` says it has no GPU kernel (the table and the dispatch agree).
#[test]
fn supports_agrees_with_what_runs_on_the_gpu() {
    if !cuda_usable() {
        return;
    }
    for dtype in DType::ALL {
        let a = randn3(&[3, 5], 41, dtype).to_device(GPU).unwrap();
        let b = randn3(&[3, 5], 42, dtype).to_device(GPU).unwrap();
        for op in quill::UnaryOp::ALL {
            let before = count(op.name());
            if a.unary(op).is_err() {
                continue; // not defined for this dtype on any device
            }
            let native = quill::supports(op.name(), dtype, GPU).unwrap();
            assert_eq!(count(op.name()) == before, native, "{} {dtype}", op.name());
        }
        for op in quill::BinaryOp::ALL {
            let before = count(op.name());
            if a.binary(op, &b).is_err() {
                continue;
            }
            let native = quill::supports(op.name(), dtype, GPU).unwrap();
            assert_eq!(count(op.name()) == before, native, "{} {dtype}", op.name());
        }
    }
}

/// Complex arrays on the GPU: strided copies, fills, `where` and + - * / and negation run on
/// device kernels (no host round trip) and equal the CPU's results exactly (the same formulas:
/// schoolbook products, Smith's quotients); every other complex op (exp, sum, the parts, a
/// cast) runs on host copies, counted, with the CPU's answer.
#[test]
fn complex_arrays_compute_on_the_gpu_and_fall_back_for_the_rest() {
    if !cuda_usable() {
        return;
    }
    for dtype in [DType::C64, DType::C128] {
        let a = NDArray::complex(
            &randn3(&[4, 6], 31, DType::F64),
            &randn3(&[4, 6], 32, DType::F64),
        )
        .unwrap()
        .astype(dtype)
        .unwrap();
        let b = NDArray::complex(&randn3(&[6], 33, DType::F64), &randn3(&[6], 34, DType::F64))
            .unwrap()
            .astype(dtype)
            .unwrap();
        // A reversed, stepped view and a broadcast row.
        let av = a.slice(&s![..;-1, ..;2]).unwrap();
        let bv = b.slice(&s![..;2]).unwrap();
        let (ga, gb) = (a.to_device(GPU).unwrap(), b.to_device(GPU).unwrap());
        let (gav, gbv) = (
            ga.slice(&s![..;-1, ..;2]).unwrap(),
            gb.slice(&s![..;2]).unwrap(),
        );
        let host = |x: &NDArray| {
            x.to_device(Device::Cpu)
                .unwrap()
                .astype(DType::C128)
                .unwrap()
                .to_vec::<quill::C128>()
                .unwrap()
        };
        let before: u64 = quill::host_round_trips().iter().map(|(_, n)| n).sum();
        for (name, cpu, gpu) in [
            ("add", av.add(&bv).unwrap(), gav.add(&gbv).unwrap()),
            ("sub", av.sub(&bv).unwrap(), gav.sub(&gbv).unwrap()),
            ("mul", av.mul(&bv).unwrap(), gav.mul(&gbv).unwrap()),
            ("div", av.div(&bv).unwrap(), gav.div(&gbv).unwrap()),
            ("neg", av.neg().unwrap(), gav.neg().unwrap()),
            ("compact", av.compact().unwrap(), gav.compact().unwrap()),
        ] {
            assert_eq!(gpu.device(), GPU, "{name}");
            assert_eq!(gpu.dtype(), dtype, "{name}");
            assert_eq!(host(&gpu), host(&cpu), "{name} {dtype}");
        }
        let z = NDArray::full(&[3], quill::Scalar::C(1.5, -2.0), dtype).unwrap();
        let gz = NDArray::full(&[3], quill::Scalar::C(1.5, -2.0), dtype)
            .unwrap()
            .to_device(GPU)
            .unwrap();
        gz.assign_scalar(quill::Scalar::C(1.5, -2.0)).unwrap();
        assert_eq!(host(&gz), host(&z), "fill {dtype}");
        let after: u64 = quill::host_round_trips().iter().map(|(_, n)| n).sum();
        assert_eq!(after, before, "native complex ops made host round trips");
        // The rest: through the host, with the CPU's answers.
        assert_eq!(host(&gav.exp().unwrap()), host(&av.exp().unwrap()), "exp");
        assert_eq!(
            host(&gav.sum(None, false).unwrap()),
            host(&av.sum(None, false).unwrap()),
            "sum"
        );
        assert_eq!(
            host(&gav.real().unwrap()),
            host(&av.real().unwrap()),
            "real"
        );
        assert_eq!(host(&gav.astype(DType::C128).unwrap()), host(&av), "astype");
        let later: u64 = quill::host_round_trips().iter().map(|(_, n)| n).sum();
        assert!(later > after, "the fallbacks were not counted");
    }
}
