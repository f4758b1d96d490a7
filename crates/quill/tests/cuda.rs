//! NDArray, Tensor, nn and optim on CUDA with the CPU as the oracle: every case runs the same
//! op on the CPU and on GPU 0 over the same (non-contiguous) inputs and compares. Without a GPU
//! each test returns early saying so; with `REQUIRE_CUDA=1` a missing GPU fails instead, so a
//! GPU run can never pass by skipping.
#![cfg(feature = "cuda")]

mod common;

use common::Prng;
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{models, Module};
use quill::optim::{Adam, Optimizer};
use quill::tensor::Tensor;
use quill::{s, BinaryOp, DType, Device, NDArray, Result, UnaryOp};

const GPU: Device = Device::Cuda(0);

/// True when GPU 0 is usable; panics under REQUIRE_CUDA=1 when it is not.
fn gpu() -> bool {
    if Device::cuda_is_available() {
        return true;
    }
    if std::env::var("REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("REQUIRE_CUDA=1 but no CUDA GPU is usable (driver or device missing)");
    }
    eprintln!("skipped: no CUDA GPU");
    false
}

fn f64s(a: &NDArray) -> Vec<f64> {
    a.to_device(Device::Cpu)
        .unwrap()
        .astype(DType::F64)
        .to_vec::<f64>()
        .unwrap()
}

#[track_caller]
fn close(got: &NDArray, want: &NDArray, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.device(), GPU, "{what}: result device");
    let (g, w) = (f64s(got), f64s(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs());
        assert!(ok, "{what}[{i}]: gpu {a} vs cpu {b}");
    }
}

fn rand(shape: &[usize], seed: u64, dtype: DType) -> NDArray {
    NDArray::randn(shape, seed, DType::F64)
        .unwrap()
        .mul_scalar(3.0)
        .unwrap()
        .astype(dtype)
}

/// The same array as views of several layouts (CPU side): contiguous, permuted, reversed and
/// stepped, broadcast, offset.
fn views(seed: u64, dtype: DType) -> Vec<(&'static str, NDArray)> {
    let base = rand(&[4, 6, 5], seed, dtype);
    vec![
        ("contiguous", base.clone()),
        ("permuted", base.permute(&[2, 0, 1]).unwrap()),
        (
            "reversed, stepped",
            base.slice(&s![..;-1, 1..;2, ..]).unwrap(),
        ),
        (
            "broadcast",
            base.slice(&s![0..1, .., 2..3])
                .unwrap()
                .broadcast_to(&[3, 6, 4])
                .unwrap(),
        ),
        ("offset", base.slice(&s![1.., 2..5, 1..]).unwrap()),
        ("rank 0", base.slice(&s![1, 2, 3]).unwrap()),
        ("empty", base.slice(&s![.., 3..3, ..]).unwrap()),
    ]
}

#[test]
fn round_trips_and_compact_every_dtype_and_layout() {
    if !gpu() {
        return;
    }
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ] {
        for (name, v) in views(1, dtype) {
            let g = v.to_device(GPU).unwrap();
            assert_eq!(g.device(), GPU);
            let back = g.to_device(Device::Cpu).unwrap();
            assert_eq!(f64s(&back), f64s(&v), "{dtype} {name} round trip");
            // Views taken on the GPU, then compacted there.
            let gv = v.compact().to_device(GPU).unwrap();
            let on_gpu = gv
                .permute(&(0..gv.ndim() as isize).rev().collect::<Vec<_>>())
                .unwrap();
            let on_cpu = v
                .permute(&(0..v.ndim() as isize).rev().collect::<Vec<_>>())
                .unwrap();
            close(
                &on_gpu.compact(),
                &on_cpu.compact(),
                0.0,
                &format!("{dtype} {name} compact"),
            );
        }
    }
}

#[test]
fn casts_between_every_pair() {
    if !gpu() {
        return;
    }
    let all = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];
    for from in all {
        let v = rand(&[5, 7], 2, from).permute(&[1, 0]).unwrap();
        let g = v.to_device(GPU).unwrap();
        for to in all {
            close(
                &g.astype(to),
                &v.astype(to),
                0.0,
                &format!("{from} -> {to}"),
            );
        }
    }
}

#[test]
fn elementwise_unary_binary_compare_where() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let tol = match dtype {
            DType::F64 => 1e-12,
            DType::F32 => 1e-5,
            _ => 1e-2,
        };
        for (name, v) in views(3, dtype) {
            let g = v.to_device(GPU)?;
            for op in [
                UnaryOp::Neg,
                UnaryOp::Abs,
                UnaryOp::Exp,
                UnaryOp::Tanh,
                UnaryOp::Sigmoid,
                UnaryOp::Relu,
                UnaryOp::Gelu,
                UnaryOp::Sin,
                UnaryOp::Floor,
                UnaryOp::Round,
                UnaryOp::Square,
                UnaryOp::Erf,
                UnaryOp::Sqrt,
                UnaryOp::Log,
            ] {
                close(
                    &g.unary(op)?,
                    &v.unary(op)?,
                    tol,
                    &format!("{dtype} {name} {op:?}"),
                );
            }
            // Broadcast against a row, scalars both sides.
            let row = rand(&[v.shape().last().copied().unwrap_or(1)], 4, dtype);
            let grow = row.to_device(GPU)?;
            for op in [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Maximum,
                BinaryOp::Pow,
                BinaryOp::Remainder,
            ] {
                if v.ndim() == 0 {
                    continue;
                }
                close(
                    &g.binary(op, &grow)?,
                    &v.binary(op, &row)?,
                    tol,
                    &format!("{dtype} {name} {op:?}"),
                );
                close(
                    &g.binary(op, &g)?,
                    &v.binary(op, &v)?,
                    tol,
                    &format!("{dtype} {name} {op:?} self"),
                );
            }
            close(&g.mul_scalar(2.5)?, &v.mul_scalar(2.5)?, tol, "mul_scalar");
            close(
                &g.rsub_scalar(1.0)?,
                &v.rsub_scalar(1.0)?,
                tol,
                "rsub_scalar",
            );
            close(&g.gt_scalar(0.0)?, &v.gt_scalar(0.0)?, 0.0, "gt_scalar");
            let c = v.gt_scalar(0.5)?;
            let z = NDArray::zeros(&[], dtype)?;
            let w = NDArray::where_(&c.to_device(GPU)?, &g, &z.to_device(GPU)?)?;
            close(&w, &NDArray::where_(&c, &v, &z)?, 0.0, "where");
        }
    }
    // Integers: arithmetic in the dtype, division promotes.
    let a = rand(&[6, 4], 5, DType::I32);
    let b = rand(&[4], 6, DType::I32).add_scalar(10)?;
    let (ga, gb) = (a.to_device(GPU)?, b.to_device(GPU)?);
    for op in [
        BinaryOp::Add,
        BinaryOp::Mul,
        BinaryOp::Remainder,
        BinaryOp::Div,
        BinaryOp::Minimum,
    ] {
        close(
            &ga.binary(op, &gb)?,
            &a.binary(op, &b)?,
            1e-12,
            &format!("i32 {op:?}"),
        );
    }
    Ok(())
}

/// Every op of quill-core's tables on every dtype it runs in (each has a CUDA kernel), against
/// the CPU, on a stepped and reversed view; NaN, infinities and -0.0 included for the floats.
#[test]
fn every_table_op_matches_the_cpu() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    let special = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        0.5,
        -0.5,
        2.0,
    ];
    // By the result's dtype: float ops on integers compute in f64.
    let tol = |a: &NDArray| match a.dtype() {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        DType::F16 | DType::BF16 => 1e-2,
        _ => 0.0,
    };
    for dtype in DType::ALL {
        let base = rand(&[6, 16], 11, dtype);
        let base = if dtype.is_float() {
            let sp = NDArray::from_vec(special.to_vec(), &[1, 8])?.astype(dtype);
            NDArray::concat(&[&base, &sp.broadcast_to(&[1, 16])?.compact()], 0)?
        } else {
            base
        };
        let v = base.slice(&s![..;-1, 1..;2])?;
        let row = rand(&[v.shape()[1]], 12, dtype);
        let (g, grow) = (v.to_device(GPU)?, row.to_device(GPU)?);
        for op in UnaryOp::ALL {
            let Ok(want) = v.unary(op) else { continue };
            close(&g.unary(op)?, &want, tol(&want), &format!("{dtype} {op:?}"));
        }
        for op in BinaryOp::ALL {
            let Ok(want) = v.binary(op, &row) else {
                continue;
            };
            close(
                &g.binary(op, &grow)?,
                &want,
                tol(&want),
                &format!("{dtype} {op:?}"),
            );
        }
    }
    Ok(())
}

#[test]
fn reductions_over_any_axes() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::F16] {
        let tol = if dtype == DType::F16 { 2e-2 } else { 1e-5 };
        for (name, v) in views(7, dtype) {
            if v.numel() == 0 {
                continue;
            }
            let g = v.to_device(GPU)?;
            let nd = v.ndim() as isize;
            let mut axes_sets: Vec<Option<Vec<isize>>> = vec![None];
            for a in 0..nd {
                axes_sets.push(Some(vec![a]));
            }
            if nd >= 2 {
                axes_sets.push(Some(vec![0, nd - 1]));
            }
            for axes in &axes_sets {
                let ax = axes.as_deref();
                for keep in [false, true] {
                    let ctx = format!("{dtype} {name} {axes:?} keep={keep}");
                    close(
                        &g.sum(ax, keep)?,
                        &v.sum(ax, keep)?,
                        tol,
                        &format!("sum {ctx}"),
                    );
                    close(
                        &g.max(ax, keep)?,
                        &v.max(ax, keep)?,
                        0.0,
                        &format!("max {ctx}"),
                    );
                    close(
                        &g.min(ax, keep)?,
                        &v.min(ax, keep)?,
                        0.0,
                        &format!("min {ctx}"),
                    );
                    close(
                        &g.mean(ax, keep)?,
                        &v.mean(ax, keep)?,
                        tol,
                        &format!("mean {ctx}"),
                    );
                    // the fused row kernel for floats (reduced dims moved last), host otherwise
                    close(
                        &g.logsumexp(ax, keep)?,
                        &v.logsumexp(ax, keep)?,
                        tol,
                        &format!("logsumexp {ctx}"),
                    );
                }
            }
            if !matches!(dtype, DType::F16) {
                for a in 0..nd.max(1) {
                    let axis = (nd > 0).then_some(a);
                    close(
                        &g.argmax(axis, false)?,
                        &v.argmax(axis, false)?,
                        0.0,
                        &format!("argmax {name}"),
                    );
                    close(
                        &g.argmin(axis, true)?,
                        &v.argmin(axis, true)?,
                        0.0,
                        &format!("argmin {name}"),
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn matmul_views_batches_and_dtypes() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    for dtype in [DType::F32, DType::F64, DType::I64, DType::F16] {
        let tol = match dtype {
            DType::F64 | DType::I64 => 1e-12,
            DType::F32 => 1e-5,
            _ => 1e-2,
        };
        let a = rand(&[3, 5, 7], 8, dtype);
        let b = rand(&[3, 7, 4], 9, dtype);
        let bt = rand(&[3, 4, 7], 10, dtype).permute(&[0, 2, 1])?; // a .mT view
        let row = rand(&[7, 4], 11, dtype); // broadcast over the batch
        let v = rand(&[7], 12, dtype);
        let stepped = rand(&[3, 10, 7], 13, dtype).slice(&s![.., ..;2, ..])?;
        let cases: Vec<(&str, NDArray, NDArray)> = vec![
            ("batched", a.clone(), b.clone()),
            ("transposed rhs", a.clone(), bt),
            ("broadcast rhs", a.clone(), row),
            ("vector rhs", a.clone(), v.clone()),
            ("vector lhs", v, b.clone()),
            ("stepped lhs", stepped, b.clone()),
            ("2-D", a.slice(&s![1])?, b.slice(&s![2])?),
        ];
        for (name, x, y) in cases {
            let got = x.to_device(GPU)?.matmul(&y.to_device(GPU)?)?;
            close(&got, &x.matmul(&y)?, tol, &format!("{dtype} {name}"));
        }
    }
    Ok(())
}

#[test]
fn assignment_fallbacks_and_errors() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    let cpu = rand(&[6, 5], 14, DType::F32);
    let g = cpu.to_device(GPU)?;
    // Setitem through a reversed, stepped view, from a CPU array and from a scalar.
    let src = rand(&[3, 5], 15, DType::F64);
    cpu.slice(&s![..;-2, ..])?.assign(&src)?;
    g.slice(&s![..;-2, ..])?.assign(&src)?;
    close(&g, &cpu, 0.0, "assign");
    cpu.slice(&s![.., 1..3])?.assign_scalar(7.5)?;
    g.slice(&s![.., 1..3])?.assign_scalar(7.5)?;
    close(&g, &cpu, 0.0, "assign_scalar");
    g.add_assign(&g.slice(&s![0..1, ..])?)?;
    cpu.add_assign(&cpu.slice(&s![0..1, ..])?)?;
    close(&g, &cpu, 1e-6, "add_assign with an aliasing operand");
    // Ops without CUDA kernels run through the host and come back.
    let idx = NDArray::from_vec(vec![2i64, 0, 4], &[3])?;
    close(
        &g.index_select(1, &idx)?,
        &cpu.index_select(1, &idx)?,
        0.0,
        "index_select",
    );
    close(
        &g.logsumexp(Some(&[1]), false)?,
        &cpu.logsumexp(Some(&[1]), false)?,
        1e-6,
        "logsumexp",
    );
    Ok(())
}

#[test]
fn device_mismatch_names_both_devices() {
    if !gpu() {
        return;
    }
    let a = rand(&[4, 3], 17, DType::F32);
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
    // A one-element CPU operand is a scalar: it moves.
    let one = NDArray::from_vec(vec![2.0f32], &[1]).unwrap();
    close(
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
    if !gpu() {
        return Ok(());
    }
    // 2^31 + 3 bytes: 64-bit index math in the copy kernel, then a reversed view of it.
    let n = (1usize << 31) + 3;
    let a = NDArray::zeros(&[n], DType::U8)?.to_device(GPU)?;
    a.slice(&s![(n as isize - 2)..])?.assign_scalar(7)?;
    a.slice(&s![..2])?.assign_scalar(3)?;
    let r = a.slice(&s![..;-1])?.compact();
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
fn training_step_matches_the_cpu() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    let make = || -> Result<_> {
        let m = models::mlp_resnet(20, 16, 1, 4, 0.0, 3)?;
        Ok(m)
    };
    let (cpu_m, gpu_m) = (make()?, make()?);
    gpu_m.to_device(GPU)?;
    let mut cpu_o = Adam::new(cpu_m.parameters(), 1e-2)?;
    let mut gpu_o = Adam::new(gpu_m.parameters(), 1e-2)?;
    let x = rand(&[8, 20], 18, DType::F32);
    let y = NDArray::from_vec(vec![0i64, 1, 2, 3, 0, 1, 2, 3], &[8])?;
    for _ in 0..3 {
        let lc = cross_entropy(
            &cpu_m.forward(&Tensor::new(x.clone()))?,
            &y,
            0.0,
            Reduction::Mean,
        )?;
        let gx = Tensor::new(x.to_device(GPU)?);
        let lg = cross_entropy(
            &gpu_m.forward(&gx)?,
            &y.to_device(GPU)?,
            0.0,
            Reduction::Mean,
        )?;
        assert!(
            (lc.item()? - lg.item()?).abs() < 1e-4,
            "{} vs {}",
            lc.item()?,
            lg.item()?
        );
        cpu_o.zero_grad();
        gpu_o.zero_grad();
        lc.backward()?;
        lg.backward()?;
        cpu_o.step()?;
        gpu_o.step()?;
    }
    for ((n, c), (_, g)) in cpu_m
        .named_parameters()
        .iter()
        .zip(gpu_m.named_parameters())
    {
        assert_eq!(g.device(), GPU, "{n} stays on the GPU");
        close(g.array(), &c.array().to_device(GPU)?, 1e-4, n);
    }
    Ok(())
}

#[test]
fn memory_statistics() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    let before = quill_cuda_stats();
    let a = NDArray::zeros(&[1 << 20], DType::F32)?.to_device(GPU)?;
    let mid = quill_cuda_stats();
    assert!(mid >= before + (4 << 20), "{before} -> {mid}");
    drop(a);
    assert!(quill_cuda_stats() <= mid - (4 << 20));
    Ok(())
}

fn quill_cuda_stats() -> usize {
    quill::cuda::memory_allocated(0).unwrap()
}

#[test]
fn random_layouts_compact_like_the_cpu() {
    if !gpu() {
        return;
    }
    let mut rng = Prng::new(19);
    for _ in 0..50 {
        let rank = rng.below(9);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
        let a = rand(&shape, rng.next_u64(), DType::F32);
        let mut perm: Vec<isize> = (0..rank as isize).collect();
        rng.shuffle(&mut perm);
        let v = a.permute(&perm).unwrap();
        let g = a.to_device(GPU).unwrap().permute(&perm).unwrap();
        close(
            &g.compact(),
            &v.compact(),
            0.0,
            &format!("rank {rank} perm {perm:?}"),
        );
    }
}

/// The other half of the skip above: where no GPU is usable, moving an array there is an
/// error naming the device and what is missing, never a panic (cudarc panics on a missing
/// library; quill probes first).
#[test]
fn without_a_gpu_to_device_is_a_clean_error() {
    if Device::cuda_is_available() {
        return;
    }
    let e = NDArray::zeros(&[3], DType::F32)
        .unwrap()
        .to_device(GPU)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cuda:0"), "{e}");
    assert!(e.contains("driver") || e.contains("no such GPU"), "{e}");
    assert_eq!(Device::cuda_device_count(), 0);
}

#[test]
fn joins_stay_on_the_gpu() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    let (a, b) = (rand(&[2, 3], 20, DType::F32), rand(&[4, 3], 21, DType::F32));
    let (ga, gb) = (a.to_device(GPU)?, b.to_device(GPU)?);
    close(
        &NDArray::concat(&[&ga, &gb], 0)?,
        &NDArray::concat(&[&a, &b], 0)?,
        0.0,
        "concat",
    );
    let e = NDArray::concat(&[&ga, &b], 0).unwrap_err().to_string();
    assert!(e.contains("cuda:0") && e.contains("cpu"), "{e}");
    Ok(())
}

/// The fused GPU updates (Adam, AdamW, SGD with momentum / Nesterov / weight decay) against
/// the CPU rules over a few steps, f32 and f64.
#[test]
fn fused_optimizer_steps_match_the_cpu() -> Result<()> {
    use quill::optim::{AdamW, Sgd};
    if !gpu() {
        return Ok(());
    }
    for dtype in [DType::F32, DType::F64] {
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        type Make = fn(Vec<Tensor>) -> Result<Box<dyn Optimizer>>;
        let makers: [(&str, Make); 4] = [
            ("adam", |p| {
                Ok(Box::new(Adam::new(p, 1e-2)?.weight_decay(1e-2)?))
            }),
            ("adamw", |p| {
                Ok(Box::new(AdamW::new(p, 1e-2)?.weight_decay(1e-2)?))
            }),
            ("sgd", |p| Ok(Box::new(Sgd::new(p, 0.1)?))),
            ("sgd nesterov", |p| {
                Ok(Box::new(
                    Sgd::new(p, 0.1)?
                        .momentum(0.9)?
                        .nesterov(true)?
                        .weight_decay(1e-3)?,
                ))
            }),
        ];
        for (name, make) in makers {
            let w0 = rand(&[7, 5], 22, dtype);
            let cpu = Tensor::from_array(w0.deep_copy(), true)?;
            let gpu_t = Tensor::from_array(w0.to_device(GPU)?, true)?;
            let (mut oc, mut og) = (make(vec![cpu.clone()])?, make(vec![gpu_t.clone()])?);
            for step in 0..3 {
                let g = rand(&[7, 5], 30 + step, dtype);
                cpu.set_grad(Some(Tensor::new(g.clone())))?;
                gpu_t.set_grad(Some(Tensor::new(g.to_device(GPU)?)))?;
                oc.step()?;
                og.step()?;
            }
            close(
                gpu_t.array(),
                &cpu.array().to_device(GPU)?,
                tol,
                &format!("{dtype} {name}"),
            );
        }
    }
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
    if gpu() {
        a.relocate(GPU)?;
        assert_eq!(a.device(), GPU);
    }
    Ok(())
}

#[test]
fn long_rows_and_prefix_views_reduce_like_the_cpu() -> Result<()> {
    if !gpu() {
        return Ok(());
    }
    // 2^21 elements in one row and in two: the two-pass split; 3 * 2^19 + 1: one pass.
    for shape in [
        vec![1usize << 21],
        vec![2, 1 << 20],
        vec![3 * (1 << 19) + 1],
    ] {
        let n: usize = shape.iter().product();
        let v = rand(&[n], 31, DType::F32)
            .reshape(&shape.iter().map(|&d| d as isize).collect::<Vec<_>>())?;
        let g = v.to_device(GPU)?;
        let last = Some(&[-1isize][..]);
        close(&g.sum(last, false)?, &v.sum(last, false)?, 1e-4, "long sum");
        close(&g.max(last, false)?, &v.max(last, false)?, 0.0, "long max");
        close(&g.min(None, false)?, &v.min(None, false)?, 0.0, "long min");
        close(
            &g.mean(None, false)?,
            &v.mean(None, false)?,
            1e-4,
            "long mean",
        );
    }
    // A contiguous prefix of a longer buffer (offset 0, fewer elements than the buffer).
    let v = rand(&[8, 300], 32, DType::F64);
    let g = v.to_device(GPU)?;
    let (vp, gp) = (v.slice(&s![..3])?, g.slice(&s![..3])?);
    close(
        &gp.sum(None, false)?,
        &vp.sum(None, false)?,
        1e-12,
        "prefix sum",
    );
    close(
        &gp.sum(Some(&[1]), false)?,
        &vp.sum(Some(&[1]), false)?,
        1e-12,
        "prefix rows",
    );
    Ok(())
}

#[test]
fn philox_random_numbers_on_the_gpu() -> Result<()> {
    // The CPU path needs no GPU: rand_on(Cpu) is rand.
    let c = NDArray::rand_on(&[5], 9, DType::F32, Device::Cpu)?;
    assert_eq!(f64s(&c), f64s(&NDArray::rand(&[5], 9, DType::F32)?));
    assert!(NDArray::rand_on(&[2], 1, DType::I32, GPU).is_err());
    if !gpu() {
        return Ok(());
    }
    for dtype in [DType::F32, DType::F64, DType::F16] {
        let n = 1 << 16;
        let u = NDArray::rand_on(&[n], 7, dtype, GPU)?;
        assert_eq!(u.device(), GPU);
        let v = f64s(&u);
        assert!(
            v.iter().all(|&x| (0.0..1.0).contains(&x)),
            "{dtype} uniform in [0, 1)"
        );
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(
            (mean - 0.5).abs() < 0.01 && (var - 1.0 / 12.0).abs() < 0.005,
            "{dtype}"
        );
        assert_eq!(
            v,
            f64s(&NDArray::rand_on(&[n], 7, dtype, GPU)?),
            "same seed, same numbers"
        );
        assert_ne!(
            v,
            f64s(&NDArray::rand_on(&[n], 8, dtype, GPU)?),
            "another seed"
        );
        let z = f64s(&NDArray::randn_on(&[n], 7, dtype, GPU)?);
        let zm = z.iter().sum::<f64>() / n as f64;
        let zv = z.iter().map(|x| (x - zm) * (x - zm)).sum::<f64>() / n as f64;
        assert!(
            zm.abs() < 0.02 && (zv - 1.0).abs() < 0.03,
            "{dtype} normal: {zm} {zv}"
        );
    }
    Ok(())
}
