//! The fused training-path ops against independent references: `batch_norm_train` against the
//! same formula written as primitive Tensor ops (values, first and second derivatives, on
//! strided inputs), `NDArray::dropout_mask` (values, rate, independence of the thread count,
//! errors), and `in_pool`.

use quill::tensor::{grad, BackwardOptions, Tensor};
use quill::{s, DType, NDArray, Result};
use quill_test_support::grads::gradcheck_two_orders;
use quill_test_support::Prng;

fn vals(t: &NDArray) -> Vec<f64> {
    t.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn uniform(rng: &mut Prng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect()
}

fn leaf(v: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_array(NDArray::from_vec(v, shape).unwrap(), true).unwrap()
}

/// Batch norm as primitives: the composite the fused op replaced.
fn reference(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Result<Tensor> {
    let axes: Vec<isize> = (0..x.ndim() as isize).filter(|&a| a != 1).collect();
    let mut p = vec![1isize; x.ndim()];
    p[1] = w.shape()[0] as isize;
    let mean = x.mean(Some(&axes), true)?;
    let var = x.sub(&mean)?.square()?.mean(Some(&axes), true)?;
    let xhat = x.sub(&mean)?.div(&var.add_scalar(eps)?.sqrt()?)?;
    xhat.mul(&w.reshape(&p)?)?.add(&b.reshape(&p)?)
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// Inputs of `shape` as a contiguous leaf, a permuted view and a reversed stepped view.
fn layouts(rng: &mut Prng, shape: &[usize]) -> Vec<(String, Tensor)> {
    let n: usize = shape.iter().product();
    let plain = leaf(uniform(rng, n, -2.0, 2.0), shape);
    let rank = shape.len();
    // Permuted: built as the reverse-order shape, then permuted back to `shape`.
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let axes: Vec<isize> = (0..rank as isize).rev().collect();
    let base = NDArray::from_vec(uniform(rng, n, -2.0, 2.0), &rev).unwrap();
    let permuted = Tensor::from_array(base.permute(&axes).unwrap(), true).unwrap();
    // Every other row, reversed: dim 0 twice as long in the buffer, stride -2.
    let mut big = shape.to_vec();
    big[0] *= 2;
    let buf = NDArray::from_vec(uniform(rng, 2 * n, -2.0, 2.0), &big).unwrap();
    let stepped = Tensor::from_array(buf.slice(&s![..;-2]).unwrap(), true).unwrap();
    vec![
        ("contiguous".into(), plain),
        ("permuted".into(), permuted),
        ("reversed, stepped".into(), stepped),
    ]
}

#[test]
fn batch_norm_train_matches_primitives_values_and_gradients() -> Result<()> {
    let mut rng = Prng::new(41);
    for shape in [vec![7usize, 3], vec![4, 5, 3, 2], vec![1, 2], vec![3, 4, 1]] {
        let c = shape[1];
        for (name, x) in layouts(&mut rng, &shape) {
            let w = leaf(uniform(&mut rng, c, 0.5, 1.5), &[c]);
            let b = leaf(uniform(&mut rng, c, -0.5, 0.5), &[c]);
            let (y, mean, var) = x.batch_norm_train(&w, &b, 1e-5)?;
            let want = reference(&x, &w, &b, 1e-5)?;
            let ctx = format!("{shape:?} {name}");
            assert_close(&vals(y.array()), &vals(want.array()), 1e-12, &ctx);
            // Batch statistics: per channel, over every other dim, biased variance.
            let axes: Vec<isize> = (0..shape.len() as isize).filter(|&a| a != 1).collect();
            let m = x.array().mean(Some(&axes), false)?;
            let v = x.array().var(Some(&axes), 0, false)?;
            assert_close(&vals(&mean), &vals(&m), 1e-12, &format!("{ctx} mean"));
            assert_close(&vals(&var), &vals(&v), 1e-12, &format!("{ctx} var"));
            // Gradients with an uneven seed, against the composite's.
            let seed = Tensor::new(NDArray::from_vec(
                uniform(&mut rng, y.numel(), -1.0, 1.0),
                y.shape(),
            )?);
            let opts = BackwardOptions::default();
            let ins = [x.clone(), w.clone(), b.clone()];
            let got = grad(&y, &ins, Some(&seed), opts)?;
            let want = grad(&want, &ins, Some(&seed), opts)?;
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.shape(), w.shape(), "{ctx} grad {k} shape");
                assert_close(&vals(g.array()), &vals(w.array()), 1e-10, &ctx);
            }
        }
    }
    Ok(())
}

#[test]
fn batch_norm_train_gradcheck_first_and_second_order() -> Result<()> {
    let mut rng = Prng::new(42);
    for shape in [vec![5usize, 3], vec![3, 2, 2, 2]] {
        let c = shape[1];
        let n: usize = shape.iter().product();
        let x = leaf(uniform(&mut rng, n, -2.0, 2.0), &shape);
        let w = leaf(uniform(&mut rng, c, 0.5, 1.5), &[c]);
        let b = leaf(uniform(&mut rng, c, -0.5, 0.5), &[c]);
        let r = Tensor::new(NDArray::from_vec(uniform(&mut rng, n, -1.0, 1.0), &shape)?);
        let inputs = [x, w, b];
        let first = |t: &[Tensor]| -> Result<Tensor> {
            let (y, _, _) = t[0].batch_norm_train(&t[1], &t[2], 1e-5)?;
            y.mul(&r)?.sum(None, false)
        };
        let (one, two) = gradcheck_two_orders(first, &inputs, &mut rng)?;
        assert!(one.passed, "first order {shape:?}: {one}");
        assert!(two.passed, "second order {shape:?}: {two}");
    }
    Ok(())
}

#[test]
fn batch_norm_train_f32_and_errors() -> Result<()> {
    let x = NDArray::randn(&[64, 8], 3, DType::F32)?
        .mul_scalar(3.0)?
        .add_scalar(2.0)?;
    let x = Tensor::new(x);
    let w = Tensor::new(NDArray::ones(&[8], DType::F32)?);
    let b = Tensor::new(NDArray::zeros(&[8], DType::F32)?);
    let (y, _, _) = x.batch_norm_train(&w, &b, 1e-5)?;
    assert_eq!(y.dtype(), DType::F32);
    // Normalised: each channel has mean 0 and variance 1 (up to eps and f32 rounding).
    let m = vals(&y.array().mean(Some(&[0]), false)?);
    let v = vals(&y.array().var(Some(&[0]), 0, false)?);
    assert!(m.iter().all(|m| m.abs() < 1e-5), "{m:?}");
    assert!(v.iter().all(|v| (v - 1.0).abs() < 1e-3), "{v:?}");

    let bad_c = Tensor::new(NDArray::ones(&[7], DType::F32)?);
    let e = x
        .batch_norm_train(&bad_c, &b, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("batch_norm") && e.contains("[64, 8]") && e.contains("[7]"),
        "{e}"
    );
    let e = x
        .batch_norm_train(&w, &bad_c, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bias is [7]"), "{e}");
    let rank1 = Tensor::new(NDArray::ones(&[8], DType::F32)?);
    assert!(rank1.batch_norm_train(&w, &b, 1e-5).is_err());
    let empty = Tensor::new(NDArray::zeros(&[0, 8], DType::F32)?);
    let e = empty
        .batch_norm_train(&w, &b, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least one value per channel"), "{e}");
    Ok(())
}

/// The fused CPU kernel at sizes that take its threaded and 16-lane paths, in f32, against
/// the f64 composite: a channel mean far from zero (a one-pass variance without the shift
/// would lose it to cancellation), rank 3 and 5 inputs, an offset view; x and weight of
/// different dtypes take the composite path and agree too.
#[test]
fn batch_norm_train_fused_kernel_sizes_and_paths() -> Result<()> {
    let mut rng = Prng::new(43);
    for shape in [
        vec![64usize, 16, 14, 14],
        vec![9, 3, 37],
        vec![4, 3, 2, 5, 7],
        vec![300, 40],
    ] {
        let c = shape[1];
        let n: usize = shape.iter().product();
        let inner = n / shape[0] / c;
        // Channel ch centred at 1000 * (ch + 1), spread 1.
        let xv: Vec<f64> = (0..n)
            .map(|i| 1000.0 * ((i / inner) % c + 1) as f64 + uniform(&mut rng, 1, -1.0, 1.0)[0])
            // Representable in f32, so that the reference sees the f32 runs' inputs.
            .map(|v| v as f32 as f64)
            .collect();
        let wv = uniform(&mut rng, c, 0.5, 1.5);
        let bv = uniform(&mut rng, c, -0.5, 0.5);
        let gv = uniform(&mut rng, n, -1.0, 1.0);
        let x64 = leaf(xv.clone(), &shape);
        let (w64, b64) = (leaf(wv.clone(), &[c]), leaf(bv.clone(), &[c]));
        let want = reference(&x64, &w64, &b64, 1e-5)?;
        let seed64 = Tensor::new(NDArray::from_vec(gv.clone(), &shape)?);
        let ins64 = [x64.clone(), w64.clone(), b64.clone()];
        let want_g = grad(&want, &ins64, Some(&seed64), BackwardOptions::default())?;
        let f32leaf = |v: &[f64], sh: &[usize]| {
            Tensor::from_array(
                NDArray::from_vec(v.to_vec(), sh)
                    .unwrap()
                    .astype(DType::F32)
                    .unwrap(),
                true,
            )
            .unwrap()
        };
        // f32 input, plus the same values as an offset view into a larger buffer.
        let mut big = shape.clone();
        big[0] += 1;
        let mut padded = vec![0.0; n / shape[0]];
        padded.extend_from_slice(&xv);
        let offset_view = Tensor::from_array(
            NDArray::from_vec(padded, &big)?
                .astype(DType::F32)
                .unwrap()
                .slice(&s![1..])?,
            true,
        )?;
        for (name, x) in [
            ("f32", f32leaf(&xv, &shape)),
            ("f32 offset view", offset_view),
        ] {
            let (w, b) = (f32leaf(&wv, &[c]), f32leaf(&bv, &[c]));
            let (y, mean, var) = x.batch_norm_train(&w, &b, 1e-5)?;
            let ctx = format!("{shape:?} {name}");
            assert_close(&vals(y.array()), &vals(want.array()), 2e-3, &ctx);
            let axes: Vec<isize> = (0..shape.len() as isize).filter(|&a| a != 1).collect();
            let v = x64.array().var(Some(&axes), 0, false)?;
            assert_close(&vals(&var), &vals(&v), 1e-3, &format!("{ctx} var"));
            let m = x64.array().mean(Some(&axes), false)?;
            assert_close(&vals(&mean), &vals(&m), 1e-6, &format!("{ctx} mean"));
            let seed = Tensor::new(
                NDArray::from_vec(gv.clone(), &shape)?
                    .astype(DType::F32)
                    .unwrap(),
            );
            let got = grad(
                &y,
                &[x.clone(), w, b],
                Some(&seed),
                BackwardOptions::default(),
            )?;
            for (k, (g, w)) in got.iter().zip(&want_g).enumerate() {
                assert_eq!(g.dtype(), DType::F32);
                assert_close(
                    &vals(g.array()),
                    &vals(w.array()),
                    2e-3,
                    &format!("{ctx} grad {k}"),
                );
            }
        }
        // Mixed dtypes: f64 x, f32 parameters (the composite path).
        let (w, b) = (f32leaf(&wv, &[c]), f32leaf(&bv, &[c]));
        let (y, _, _) = x64.batch_norm_train(&w, &b, 1e-5)?;
        assert_close(
            &vals(y.array()),
            &vals(want.array()),
            1e-6,
            &format!("{shape:?} mixed"),
        );
    }
    Ok(())
}

/// The array-level kernels check what they are given.
#[test]
fn batch_norm_array_errors() -> Result<()> {
    let x = NDArray::ones(&[4, 3, 5], DType::F32)?;
    let w = NDArray::ones(&[3], DType::F32)?;
    let (_, _, v) = x.batch_norm_train(&w, &w, 1e-5)?;
    let e = x.batch_norm_train(&w, &w, -1.0).unwrap_err().to_string();
    assert!(e.contains("eps"), "{e}");
    // Mixed float dtypes run the composite (promoting as the elementwise ops do), as the
    // Tensor op does, and agree with the kernel.
    let xr = NDArray::randn(&[4, 3, 5], 9, DType::F32)?;
    let (mixed, _, _) = xr.batch_norm_train(&w.astype(DType::F64)?, &w, 1e-5)?;
    let (kernel, _, _) = xr.batch_norm_train(&w, &w, 1e-5)?;
    assert_eq!(mixed.dtype(), DType::F64);
    assert_close(&vals(&mixed), &vals(&kernel), 1e-5, "mixed dtypes");
    let e = x
        .batch_norm_train(&NDArray::ones(&[3], DType::I64)?, &w, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("batch_norm"), "{e}");
    let e = x
        .astype(DType::I32)
        .unwrap()
        .batch_norm_train(
            &w.astype(DType::I32).unwrap(),
            &w.astype(DType::I32).unwrap(),
            1e-5,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("floating-point"), "{e}");
    let bad_g = NDArray::ones(&[4, 3, 4], DType::F32)?;
    let e = x
        .batch_norm_backward(&bad_g, &w, &v, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("batch_norm_backward") && e.contains("[4, 3, 4]"),
        "{e}"
    );
    let e = x
        .batch_norm_backward(&x, &w, &NDArray::ones(&[2], DType::F32)?, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("batch_norm_backward") && e.contains("[2]"),
        "{e}"
    );
    Ok(())
}

fn mask_in_pool(threads: usize, shape: &[usize], p: f64, seed: u64) -> Vec<f64> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| vals(&NDArray::dropout_mask(shape, p, seed, DType::F32).unwrap()))
}

#[test]
fn dropout_mask_values_rate_and_thread_independence() -> Result<()> {
    for (shape, p) in [
        (vec![300usize, 500], 0.1),
        (vec![70_000], 0.5),
        (vec![3, 5, 7], 0.25),
        (vec![], 0.3),
        (vec![4, 0, 2], 0.2),
    ] {
        let one = mask_in_pool(1, &shape, p, 7);
        let two = mask_in_pool(2, &shape, p, 7);
        let three = mask_in_pool(3, &shape, p, 7);
        assert_eq!(one, two, "{shape:?}: 1 vs 2 threads");
        assert_eq!(one, three, "{shape:?}: 1 vs 3 threads");
        let n: usize = shape.iter().product();
        assert_eq!(one.len(), n);
        let keep = (1.0 / (1.0 - p)) as f32 as f64;
        assert!(one.iter().all(|&v| v == 0.0 || v == keep), "{shape:?}");
        if n >= 10_000 {
            let dropped = one.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
            // Binomial: 5 standard deviations.
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!(
                (dropped - p).abs() < 5.0 * sd,
                "{shape:?}: dropped {dropped}, p {p}"
            );
            // The mean is preserved: E[mask] = 1.
            let mean = one.iter().sum::<f64>() / n as f64;
            assert!((mean - 1.0).abs() < 10.0 * sd / (1.0 - p), "mean {mean}");
            assert_ne!(
                one,
                mask_in_pool(2, &shape, p, 8),
                "another seed, another mask"
            );
        }
    }
    // p = 0 keeps everything; f64 and f16 masks equal the f32 one.
    assert!(mask_in_pool(2, &[1000], 0.0, 1).iter().all(|&v| v == 1.0));
    let m32 = vals(&NDArray::dropout_mask(&[999], 0.2, 5, DType::F32)?);
    let m64 = vals(&NDArray::dropout_mask(&[999], 0.2, 5, DType::F64)?);
    let m16 = NDArray::dropout_mask(&[999], 0.2, 5, DType::F16)?;
    assert_eq!(m16.dtype(), DType::F16);
    assert_eq!(m32, m64);
    assert_eq!(m32, vals(&m16));
    Ok(())
}

#[test]
fn dropout_mask_errors() {
    for p in [1.0, -0.1, f64::NAN, 2.0] {
        let e = NDArray::dropout_mask(&[4], p, 0, DType::F32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("dropout_mask") && e.contains("[0, 1)"), "{e}");
    }
    let e = NDArray::dropout_mask(&[4], 0.5, 0, DType::I32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dropout_mask") && e.contains("float"), "{e}");
    assert!(NDArray::dropout_mask(&[usize::MAX, 2], 0.5, 0, DType::F32).is_err());
}

#[test]
fn in_pool_runs_on_a_pool_thread_and_returns_the_result() {
    assert!(rayon::current_thread_index().is_none());
    let (idx, sum) = quill::in_pool(|| {
        let a = NDArray::arange(0.0, 100_000.0, 1.0, DType::F64).unwrap();
        (
            rayon::current_thread_index(),
            a.sum(None, false).unwrap().item::<f64>().unwrap(),
        )
    });
    assert!(idx.is_some());
    assert_eq!(sum, 99_999.0 * 100_000.0 / 2.0);
}
