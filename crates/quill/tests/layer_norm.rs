//! `Tensor::layer_norm` (the fused op behind `nn::LayerNorm`) against independent references:
//! values against a per-row loop over plain `Vec<f64>`, gradients against the same formula
//! written as primitive Tensor ops and against central differences (first and second order),
//! on strided, permuted, broadcast and size-1 inputs; f32, the threaded path's independence of
//! the thread count, and bad shapes.

use quill::nn::{LayerNorm, Module};
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

/// Per row of the C-order values: `(x - mean) / sqrt(var + eps) * w + b`, biased variance.
fn naive(x: &[f64], w: &[f64], b: &[f64], eps: f64) -> Vec<f64> {
    let d = w.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let mean = row.iter().sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
        for (j, v) in row.iter().enumerate() {
            out.push((v - mean) / (var + eps).sqrt() * w[j] + b[j]);
        }
    }
    out
}

/// Layer norm as primitives: the composite the fused op replaced.
fn composite(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Result<Tensor> {
    let mean = x.mean(Some(&[-1]), true)?;
    let c = x.sub(&mean)?;
    let var = c.square()?.mean(Some(&[-1]), true)?;
    c.div(&var.add_scalar(eps)?.sqrt()?)?.mul(w)?.add(b)
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

/// Inputs of `shape` (rank >= 2) as a contiguous leaf, a permuted view, a reversed stepped
/// view, an offset view and a row broadcast along dim 0 (stride 0).
fn layouts(rng: &mut Prng, shape: &[usize]) -> Vec<(String, Tensor)> {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    let plain = leaf(uniform(rng, n, -2.0, 2.0), shape);
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let axes: Vec<isize> = (0..rank as isize).rev().collect();
    let base = NDArray::from_vec(uniform(rng, n, -2.0, 2.0), &rev).unwrap();
    let permuted = Tensor::from_array(base.permute(&axes).unwrap(), true).unwrap();
    let mut big = shape.to_vec();
    big[0] *= 2;
    let buf = NDArray::from_vec(uniform(rng, 2 * n, -2.0, 2.0), &big).unwrap();
    let stepped = Tensor::from_array(buf.slice(&s![..;-2]).unwrap(), true).unwrap();
    let mut longer = shape.to_vec();
    longer[0] += 1;
    let buf = NDArray::from_vec(uniform(rng, n + n / shape[0], -2.0, 2.0), &longer).unwrap();
    let offset = Tensor::from_array(buf.slice(&s![1..]).unwrap(), true).unwrap();
    let mut one = shape.to_vec();
    one[0] = 1;
    let row = NDArray::from_vec(uniform(rng, n / shape[0], -2.0, 2.0), &one).unwrap();
    let broadcast = Tensor::from_array(row.broadcast_to(shape).unwrap(), true).unwrap();
    vec![
        ("contiguous".into(), plain),
        ("permuted".into(), permuted),
        ("reversed, stepped".into(), stepped),
        ("offset".into(), offset),
        ("broadcast".into(), broadcast),
    ]
}

#[test]
fn layer_norm_matches_naive_values_and_composite_gradients() -> Result<()> {
    let mut rng = Prng::new(51);
    for shape in [
        vec![7usize, 5],
        vec![3, 4, 9],
        vec![2, 1, 3, 17],
        vec![4, 1],
        vec![1, 8],
        vec![70, 40],
    ] {
        let d = *shape.last().unwrap();
        for (name, x) in layouts(&mut rng, &shape) {
            let w = leaf(uniform(&mut rng, d, 0.5, 1.5), &[d]);
            let b = leaf(uniform(&mut rng, d, -0.5, 0.5), &[d]);
            let y = x.layer_norm(&w, &b, 1e-5)?;
            let ctx = format!("{shape:?} {name}");
            assert_eq!(y.shape(), &shape[..], "{ctx}");
            let want = naive(&vals(x.array()), &vals(w.array()), &vals(b.array()), 1e-5);
            assert_close(&vals(y.array()), &want, 1e-12, &ctx);
            let seed = Tensor::new(NDArray::from_vec(
                uniform(&mut rng, y.numel(), -1.0, 1.0),
                y.shape(),
            )?);
            let opts = BackwardOptions::default();
            let ins = [x.clone(), w.clone(), b.clone()];
            let got = grad(&y, &ins, Some(&seed), opts)?;
            let reference = composite(&x, &w, &b, 1e-5)?;
            let want = grad(&reference, &ins, Some(&seed), opts)?;
            for (k, (g, r)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.shape(), r.shape(), "{ctx} grad {k} shape");
                assert_close(&vals(g.array()), &vals(r.array()), 1e-9, &ctx);
            }
        }
    }
    Ok(())
}

#[test]
fn layer_norm_rank_one_and_empty() -> Result<()> {
    let mut rng = Prng::new(52);
    let x = leaf(uniform(&mut rng, 6, -1.0, 1.0), &[6]);
    let w = leaf(uniform(&mut rng, 6, 0.5, 1.5), &[6]);
    let b = leaf(uniform(&mut rng, 6, -0.5, 0.5), &[6]);
    let y = x.layer_norm(&w, &b, 1e-5)?;
    let want = naive(&vals(x.array()), &vals(w.array()), &vals(b.array()), 1e-5);
    assert_close(&vals(y.array()), &want, 1e-12, "rank 1");
    let gs = grad(
        &y.square()?.sum(None, false)?,
        &[x.clone(), w.clone()],
        None,
        Default::default(),
    )?;
    let r = composite(&x, &w, &b, 1e-5)?.square()?.sum(None, false)?;
    let want = grad(&r, &[x, w.clone()], None, Default::default())?;
    for (g, r) in gs.iter().zip(&want) {
        assert_close(&vals(g.array()), &vals(r.array()), 1e-9, "rank 1 grad");
    }
    let empty = leaf(vec![], &[0, 6]);
    let y = empty.layer_norm(&w, &b, 1e-5)?;
    assert_eq!(y.shape(), &[0, 6]);
    let gs = grad(
        &y.sum(None, false)?,
        &[w.clone(), b],
        None,
        Default::default(),
    )?;
    assert_eq!(vals(gs[0].array()), vec![0.0; 6]);
    assert_eq!(vals(gs[1].array()), vec![0.0; 6]);
    Ok(())
}

#[test]
fn layer_norm_gradcheck_first_and_second_order() -> Result<()> {
    let mut rng = Prng::new(53);
    for shape in [vec![4usize, 5], vec![3, 2, 6]] {
        let d = *shape.last().unwrap();
        let n: usize = shape.iter().product();
        // A permuted x: its rows are strided in the buffer.
        let rev: Vec<usize> = shape.iter().rev().copied().collect();
        let axes: Vec<isize> = (0..shape.len() as isize).rev().collect();
        let xs = NDArray::from_vec(uniform(&mut rng, n, -2.0, 2.0), &rev)?.permute(&axes)?;
        let x = Tensor::from_array(xs, true)?;
        let w = leaf(uniform(&mut rng, d, 0.5, 1.5), &[d]);
        let b = leaf(uniform(&mut rng, d, -0.5, 0.5), &[d]);
        let r = Tensor::new(NDArray::from_vec(uniform(&mut rng, n, -1.0, 1.0), &shape)?);
        let inputs = [x, w, b];
        let first = |t: &[Tensor]| -> Result<Tensor> {
            t[0].layer_norm(&t[1], &t[2], 1e-5)?
                .mul(&r)?
                .sum(None, false)
        };
        let (one, two) = gradcheck_two_orders(first, &inputs, &mut rng)?;
        assert!(one.passed, "first order {shape:?}: {one}");
        assert!(two.passed, "second order {shape:?}: {two}");
    }
    Ok(())
}

fn f32_step(threads: usize, x: &NDArray, w: &NDArray, b: &NDArray, g: &NDArray) -> Vec<Vec<f64>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let x = Tensor::from_array(x.clone(), true).unwrap();
        let w = Tensor::from_array(w.clone(), true).unwrap();
        let b = Tensor::from_array(b.clone(), true).unwrap();
        let y = x.layer_norm(&w, &b, 1e-5).unwrap();
        let gs = grad(
            &y,
            &[x, w, b],
            Some(&Tensor::new(g.clone())),
            Default::default(),
        )
        .unwrap();
        let mut out = vec![vals(y.array())];
        out.extend(gs.iter().map(|t| vals(t.array())));
        out
    })
}

#[test]
fn layer_norm_f32_threads_and_module() -> Result<()> {
    // 300 x 128 is past the kernels' threading threshold.
    let (rows, d) = (300usize, 128usize);
    let x = NDArray::randn(&[rows, d], 3, DType::F32)?
        .mul_scalar(3.0)?
        .add_scalar(2.0)?;
    let w = NDArray::randn(&[d], 4, DType::F32)?;
    let b = NDArray::randn(&[d], 5, DType::F32)?;
    let g = NDArray::randn(&[rows, d], 6, DType::F32)?;
    let one = f32_step(1, &x, &w, &b, &g);
    assert_eq!(one, f32_step(2, &x, &w, &b, &g), "1 vs 2 threads");
    assert_eq!(one, f32_step(3, &x, &w, &b, &g), "1 vs 3 threads");
    // Against the f64 op (itself checked against the naive loop above).
    let want = f32_step(
        1,
        &x.astype(DType::F64)?,
        &w.astype(DType::F64)?,
        &b.astype(DType::F64)?,
        &g.astype(DType::F64)?,
    );
    for (k, (got, want)) in one.iter().zip(&want).enumerate() {
        // gw and gb sum 300 rows: a looser bound.
        let tol = if k >= 2 { 1e-4 } else { 1e-5 };
        assert_close(got, want, tol, &format!("f32 output {k}"));
    }
    // The module runs the op.
    let ln = LayerNorm::new(d)?;
    let y = ln.forward(&Tensor::new(x.clone()))?;
    let want = naive(&vals(&x), &vec![1.0; d], &vec![0.0; d], 1e-5);
    assert_close(&vals(y.array()), &want, 1e-5, "module");
    assert_eq!(y.grad_fn_name(), Some("LayerNormBackward"));
    Ok(())
}

#[test]
fn layer_norm_bad_shapes() -> Result<()> {
    let x = Tensor::new(NDArray::ones(&[4, 8], DType::F32)?);
    let w = Tensor::new(NDArray::ones(&[8], DType::F32)?);
    let b = Tensor::new(NDArray::zeros(&[8], DType::F32)?);
    let w7 = Tensor::new(NDArray::ones(&[7], DType::F32)?);
    let e = x.layer_norm(&w7, &b, 1e-5).unwrap_err().to_string();
    assert!(
        e.contains("layer_norm") && e.contains("[4, 8]") && e.contains("[7]"),
        "{e}"
    );
    let e = x.layer_norm(&w, &w7, 1e-5).unwrap_err().to_string();
    assert!(e.contains("bias is [7]"), "{e}");
    let w2 = Tensor::new(NDArray::ones(&[2, 4], DType::F32)?);
    assert!(x.layer_norm(&w2, &b, 1e-5).is_err());
    let scalar = Tensor::new(NDArray::ones(&[], DType::F32)?);
    assert!(scalar.layer_norm(&w, &b, 1e-5).is_err());
    let e = LayerNorm::new(5)?.forward(&x).unwrap_err().to_string();
    assert!(e.contains("LayerNorm"), "{e}");
    Ok(())
}
