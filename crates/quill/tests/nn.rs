//! `nn` against independent references: naive f64 loops written here (matmul, per-channel
//! normalisation, softmax, log-softmax, row picks), PyTorch's formulas (running statistics with
//! momentum 0.1 and unbiased variance, label smoothing, init bounds and fans), hand-derived
//! values, and `gradcheck` (central differences in f64) through the modules themselves.

use quill::nn::functional::{
    binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss, nll_loss, Reduction,
};
use quill::nn::{
    init, models, BatchNorm, BatchNorm1d, BatchNorm2d, Dropout, Embedding, Flatten, Identity,
    LayerNorm, Linear, Module, ReLU, Residual, Sequential, Sigmoid, Softmax, Tanh, GELU,
};
use quill::tensor::{gradcheck, no_grad, GradcheckOptions, Tensor};
use quill::{s, DType, Error, NDArray, Result};
use quill_test_support::Prng;

// ---------------------------------------------------------------------------------------------
// Helpers

/// The elements in C order as f64.
fn vals(t: &Tensor) -> Vec<f64> {
    arr_vals(t.array())
}

fn arr_vals(a: &NDArray) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn uniform_vec(rng: &mut Prng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect()
}

/// An array of `dtype` holding `v` (rounded to the dtype).
fn arr(v: &[f64], shape: &[usize], dtype: DType) -> NDArray {
    NDArray::from_vec(v.to_vec(), shape)
        .unwrap()
        .astype(dtype)
        .unwrap()
}

/// A constant f32 tensor.
fn t32(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::new(arr(v, shape, DType::F32))
}

/// An f64 leaf requiring grad.
fn leaf64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_array(arr(v, shape, DType::F64), true).unwrap()
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= atol + rtol * w.abs(),
            "element {i}: got {g}, want {w} (|diff| {:e})",
            (g - w).abs()
        );
    }
}

#[track_caller]
fn assert_err_mentions<T: std::fmt::Debug>(r: Result<T>, needle: &str) -> Error {
    let e = r.expect_err("expected an error");
    let msg = e.to_string();
    assert!(
        msg.contains(needle),
        "error {msg:?} does not mention {needle:?}"
    );
    e
}

#[track_caller]
fn check_grad(name: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    let rep = gradcheck(f, inputs, GradcheckOptions::default()).unwrap();
    assert!(rep.passed, "{name}: {rep}");
    let want: usize = inputs
        .iter()
        .filter(|t| t.requires_grad())
        .map(|t| t.numel())
        .sum();
    assert_eq!(rep.checked, want, "{name}: every element checked");
}

/// `y[r][j] = sum_k x[r][k] w[k][j] + b[j]` over `rows` rows.
fn naive_linear(
    x: &[f64],
    rows: usize,
    w: &[f64],
    b: Option<&[f64]>,
    i: usize,
    o: usize,
) -> Vec<f64> {
    let mut y = vec![0.0; rows * o];
    for r in 0..rows {
        for j in 0..o {
            let mut acc = b.map_or(0.0, |b| b[j]);
            for k in 0..i {
                acc += x[r * i + k] * w[k * o + j];
            }
            y[r * o + j] = acc;
        }
    }
    y
}

/// erf by its Maclaurin series (accurate to ~1e-12 for |x| <= 4).
fn erf(x: f64) -> f64 {
    let mut term = x;
    let mut sum = x;
    for n in 1..200 {
        term *= -x * x / n as f64;
        let t = term / (2 * n + 1) as f64;
        sum += t;
        if t.abs() < 1e-17 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// Softmax of C-order `v` of `shape` along `axis`.
fn naive_softmax(v: &[f64], shape: &[usize], axis: usize) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = vec![0.0; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let m = (0..n).map(|k| v[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = (0..n).map(|k| (v[at(k)] - m).exp()).sum();
            for k in 0..n {
                out[at(k)] = (v[at(k)] - m).exp() / z;
            }
        }
    }
    out
}

/// Row-wise log-softmax of (n, c).
fn naive_log_softmax(v: &[f64], n: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * c];
    for r in 0..n {
        let row = &v[r * c..(r + 1) * c];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
        for k in 0..c {
            out[r * c + k] = row[k] - lse;
        }
    }
    out
}

/// Per-channel statistics of C-order `v` of shape (n, c, s): (mean, biased var).
fn channel_stats(v: &[f64], n: usize, c: usize, s: usize) -> (Vec<f64>, Vec<f64>) {
    let m = (n * s) as f64;
    let mut mean = vec![0.0; c];
    let mut var = vec![0.0; c];
    for ch in 0..c {
        let mut acc = 0.0;
        for b in 0..n {
            for k in 0..s {
                acc += v[(b * c + ch) * s + k];
            }
        }
        mean[ch] = acc / m;
        let mut sq = 0.0;
        for b in 0..n {
            for k in 0..s {
                sq += (v[(b * c + ch) * s + k] - mean[ch]).powi(2);
            }
        }
        var[ch] = sq / m;
    }
    (mean, var)
}

/// `(x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c]` over (n, c, s).
#[allow(clippy::too_many_arguments)]
fn naive_norm(
    v: &[f64],
    n: usize,
    c: usize,
    s: usize,
    mean: &[f64],
    var: &[f64],
    w: &[f64],
    b: &[f64],
) -> Vec<f64> {
    let mut out = vec![0.0; v.len()];
    for bi in 0..n {
        for ch in 0..c {
            for k in 0..s {
                let i = (bi * c + ch) * s + k;
                out[i] = (v[i] - mean[ch]) / (var[ch] + 1e-5).sqrt() * w[ch] + b[ch];
            }
        }
    }
    out
}

/// A snapshot (deep copy) of a module's state, as plain values.
fn snapshot(m: &dyn Module) -> Vec<(String, Vec<usize>, Vec<f64>)> {
    m.state_dict()
        .into_iter()
        .map(|(n, a)| (n, a.shape().to_vec(), arr_vals(&a)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Linear and Embedding

#[test]
fn linear_forward_matches_naive_matmul() -> Result<()> {
    let mut rng = Prng::new(1);
    let (i, o) = (5, 3);
    let lin = Linear::new(i, o, true, 42)?;
    let w = vals(&lin.weight);
    let b = vals(lin.bias.as_ref().unwrap());
    assert_eq!(lin.weight.shape(), &[i, o]);
    assert_eq!(lin.bias.as_ref().unwrap().shape(), &[o]);

    // 2-D.
    let xv = uniform_vec(&mut rng, 4 * i, -2.0, 2.0);
    let x = t32(&xv, &[4, i]);
    let y = lin.forward(&x)?;
    assert_eq!(y.shape(), &[4, o]);
    assert_eq!(y.dtype(), DType::F32);
    let xr = vals(&x);
    assert_close(
        &vals(&y),
        &naive_linear(&xr, 4, &w, Some(&b), i, o),
        1e-5,
        1e-5,
    );

    // Batched 3-D: (2, 4, i) -> (2, 4, o), every row independently.
    let xv = uniform_vec(&mut rng, 2 * 4 * i, -2.0, 2.0);
    let x = t32(&xv, &[2, 4, i]);
    let y = lin.forward(&x)?;
    assert_eq!(y.shape(), &[2, 4, o]);
    assert_close(
        &vals(&y),
        &naive_linear(&vals(&x), 8, &w, Some(&b), i, o),
        1e-5,
        1e-5,
    );

    // 1-D: (i) -> (o).
    let x = t32(&xv[..i], &[i]);
    let y = lin.forward(&x)?;
    assert_eq!(y.shape(), &[o]);
    assert_close(
        &vals(&y),
        &naive_linear(&vals(&x), 1, &w, Some(&b), i, o),
        1e-5,
        1e-5,
    );

    // A non-contiguous view: a transposed (i, 6) array, then every other row.
    let base = arr(
        &uniform_vec(&mut rng, i * 6, -2.0, 2.0),
        &[i, 6],
        DType::F32,
    );
    let view = base.transpose(0, 1)?.slice(&s![0..6; 2, ..])?;
    assert_eq!(view.shape(), &[3, i]);
    assert!(!view.is_contiguous());
    let xr = arr_vals(&view);
    let y = lin.forward(&Tensor::new(view))?;
    assert_close(
        &vals(&y),
        &naive_linear(&xr, 3, &w, Some(&b), i, o),
        1e-5,
        1e-5,
    );

    // Without bias.
    let nb = Linear::new(i, o, false, 42)?;
    assert!(nb.bias.is_none());
    assert_eq!(nb.named_parameters().len(), 1);
    let y = nb.forward(&t32(&xr, &[3, i]))?;
    assert_close(
        &vals(&y),
        &naive_linear(&xr, 3, &vals(&nb.weight), None, i, o),
        1e-5,
        1e-5,
    );
    Ok(())
}

#[test]
fn linear_shape_errors_name_linear() -> Result<()> {
    let lin = Linear::new(5, 3, true, 0)?;
    assert_err_mentions(lin.forward(&Tensor::zeros(&[4, 6], DType::F32)?), "Linear");
    assert_err_mentions(lin.forward(&Tensor::zeros(&[5, 4], DType::F32)?), "Linear");
    assert_err_mentions(lin.forward(&Tensor::scalar(1.0f32)), "Linear");
    Ok(())
}

#[test]
fn linear_default_init_is_pytorch_uniform() -> Result<()> {
    for &(i, o) in &[(100usize, 7usize), (3, 50), (784, 64)] {
        let lin = Linear::new(i, o, true, 9)?;
        let bound = 1.0 / (i as f64).sqrt();
        for (name, p) in lin.named_parameters() {
            let v = vals(&p);
            assert!(
                v.iter().all(|x| x.abs() <= bound),
                "{name} exceeds ±{bound}"
            );
            // The sample spreads over the interval (not a constant, not a narrower range).
            let max = v.iter().cloned().fold(0.0, |a: f64, x| a.max(x.abs()));
            if v.len() >= 50 {
                assert!(max > 0.8 * bound, "{name}: max |w| {max} vs bound {bound}");
            }
            assert!(p.requires_grad() && p.is_leaf(), "{name}");
        }
        let names: Vec<String> = lin.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight", "bias"]);
    }
    // Seeded: the same seed gives the same weights, another seed others.
    let a = vals(&Linear::new(20, 10, true, 3)?.weight);
    assert_eq!(a, vals(&Linear::new(20, 10, true, 3)?.weight));
    assert_ne!(a, vals(&Linear::new(20, 10, true, 4)?.weight));
    Ok(())
}

#[test]
fn linear_gradcheck_f64() -> Result<()> {
    let mut rng = Prng::new(2);
    let lin = Linear::with_dtype(4, 3, true, 5, DType::F64)?;
    assert_eq!(lin.weight.dtype(), DType::F64);
    let w = lin.weight.clone();
    let b = lin.bias.clone().unwrap();
    let x = leaf64(&uniform_vec(&mut rng, 2 * 5 * 4, -1.0, 1.0), &[2, 5, 4]);

    // The module's forward is the direct expression.
    let direct = x.matmul(&w)?.add(&b)?;
    assert_eq!(vals(&lin.forward(&x)?), vals(&direct));

    // Through the expression, and through the module (gradcheck perturbs the weight and bias
    // arrays in place, which the module shares).
    check_grad(
        "x @ w + b",
        |t| t[0].matmul(&t[1])?.add(&t[2]),
        &[x.clone(), w.clone(), b.clone()],
    );
    check_grad("Linear::forward", |t| lin.forward(&t[0]), &[x, w, b]);
    Ok(())
}

#[test]
fn embedding_lookup_and_scatter_gradient() -> Result<()> {
    let (num, dim) = (6, 4);
    let emb = Embedding::new(num, dim, 7)?;
    let w = vals(&emb.weight);
    // Indices with repeats, shape (2, 3).
    let idx = [2i64, 0, 2, 5, 2, 0];
    let ia = NDArray::from_vec(idx.to_vec(), &[2, 3])?;
    let out = emb.forward(&Tensor::new(ia.clone()))?;
    assert_eq!(out.shape(), &[2, 3, dim]);
    let want: Vec<f64> = idx
        .iter()
        .flat_map(|&r| w[r as usize * dim..(r as usize + 1) * dim].to_vec())
        .collect();
    assert_eq!(vals(&out), want);
    // Other integer dtypes and a 0-d index.
    let out32 = emb.lookup(&ia.astype(DType::I32).unwrap())?;
    assert_eq!(vals(&out32), want);
    let one = emb.lookup(&NDArray::scalar(5i64))?;
    assert_eq!(one.shape(), &[dim]);
    assert_eq!(vals(&one), w[5 * dim..6 * dim].to_vec());

    // d(sum(out * g))/dW[r] = sum of g over the positions that picked row r.
    let mut rng = Prng::new(3);
    let g = uniform_vec(&mut rng, idx.len() * dim, -1.0, 1.0);
    let gt = t32(&g, &[2, 3, dim]);
    out.mul(&gt)?.sum(None, false)?.backward()?;
    let got = vals(&emb.weight.grad().expect("weight grad"));
    let gr = vals(&gt);
    let mut want = vec![0.0; num * dim];
    for (p, &r) in idx.iter().enumerate() {
        for d in 0..dim {
            want[r as usize * dim + d] += gr[p * dim + d];
        }
    }
    assert_close(&got, &want, 1e-6, 1e-6);

    // Plain sum: the gradient counts how often each row was picked.
    emb.weight.zero_grad();
    emb.forward(&Tensor::new(ia))?
        .sum(None, false)?
        .backward()?;
    let got = vals(&emb.weight.grad().unwrap());
    let counts = [2.0, 0.0, 3.0, 0.0, 0.0, 1.0];
    for r in 0..num {
        for d in 0..dim {
            assert_eq!(got[r * dim + d], counts[r], "row {r}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Activations

/// A module, its name and the naive scalar formula it must match.
type Case = (&'static str, Box<dyn Module>, fn(f64) -> f64);

#[test]
fn activations_match_naive_formulas() -> Result<()> {
    let mut rng = Prng::new(4);
    let shape = [3, 4, 5];
    let mut v = uniform_vec(&mut rng, 60, -3.0, 3.0);
    v[0] = 0.0;
    v[1] = -0.0;
    for dtype in [DType::F32, DType::F64] {
        let x = Tensor::new(arr(&v, &shape, dtype));
        let xv = vals(&x);
        let tol = if dtype == DType::F32 { 1e-6 } else { 1e-12 };
        let cases: Vec<Case> = vec![
            ("ReLU", Box::new(ReLU), |x| x.max(0.0)),
            ("Tanh", Box::new(Tanh), f64::tanh),
            ("Sigmoid", Box::new(Sigmoid), |x| 1.0 / (1.0 + (-x).exp())),
            ("GELU", Box::new(GELU), |x| {
                0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
            }),
            ("Identity", Box::new(Identity), |x| x),
        ];
        for (name, m, f) in cases {
            let y = m.forward(&x)?;
            assert_eq!(y.shape(), &shape, "{name}");
            assert_eq!(y.dtype(), dtype, "{name}");
            let want: Vec<f64> = xv.iter().map(|&x| f(x)).collect();
            let got = vals(&y);
            for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= tol * (1.0 + w.abs()),
                    "{name} {dtype} at {k}: {g} vs {w}"
                );
            }
            assert!(m.named_parameters().is_empty(), "{name}");
        }
        // Softmax along each axis (and a negative one).
        for (axis, naxis) in [(0isize, 0usize), (1, 1), (2, 2), (-1, 2), (-3, 0)] {
            let y = Softmax { axis }.forward(&x)?;
            assert_close(&vals(&y), &naive_softmax(&xv, &shape, naxis), tol, tol);
        }
    }
    // Identity returns the same node; Flatten keeps the order.
    let x = Tensor::new(arr(&v, &shape, DType::F32));
    assert!(Identity.forward(&x)?.same_node(&x));
    let f = Flatten.forward(&x)?;
    assert_eq!(f.shape(), &[3, 20]);
    assert_eq!(vals(&f), vals(&x));
    let f = Flatten.forward(&Tensor::new(arr(&v[..6], &[2, 3, 1, 1], DType::F32)))?;
    assert_eq!(f.shape(), &[2, 3]);
    let f = Flatten.forward(&Tensor::new(arr(&v[..5], &[5], DType::F32)))?;
    assert_eq!(f.shape(), &[5, 1]);
    // Flatten of a non-contiguous view flattens in logical order.
    let xt = Tensor::new(x.array().transpose(0, 2)?);
    assert_eq!(vals(&Flatten.forward(&xt)?), vals(&xt));
    // Large logits: softmax stays finite and exact.
    // (Tolerance: softmax is exp(x - logsumexp(x)), and in f32 the rounding of logsumexp near
    // 1000 (ulp 6e-5) shows up as a ~3e-5 relative error; PyTorch's exp(x - max) / sum is
    // exact here.)
    let big = t32(&[1000.0, 0.0, -1000.0, 1000.0], &[1, 4]);
    assert_close(
        &vals(&Softmax { axis: 1 }.forward(&big)?),
        &[0.5, 0.0, 0.0, 0.5],
        0.0,
        1e-4,
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Containers

#[test]
fn sequential_and_residual_outputs_and_names() -> Result<()> {
    let mut rng = Prng::new(5);
    let seq = Sequential::new()
        .add(Linear::new(4, 3, true, 1)?)
        .add(ReLU)
        .add(Linear::new(3, 2, true, 2)?);
    let names: Vec<String> = seq.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
    assert_eq!(seq.parameters().len(), 4);
    let p = seq.named_parameters();
    let (w0, b0, w2, b2) = (vals(&p[0].1), vals(&p[1].1), vals(&p[2].1), vals(&p[3].1));

    let xv = uniform_vec(&mut rng, 5 * 4, -2.0, 2.0);
    let x = t32(&xv, &[5, 4]);
    let xr = vals(&x);
    let h: Vec<f64> = naive_linear(&xr, 5, &w0, Some(&b0), 4, 3)
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    let want = naive_linear(&h, 5, &w2, Some(&b2), 3, 2);
    assert_close(&vals(&seq.forward(&x)?), &want, 1e-5, 1e-5);

    // An empty Sequential is the identity.
    assert_eq!(vals(&Sequential::new().forward(&x)?), xr);

    // Residual: x + f(x), parameters under "fn.".
    let res = Residual::new(Sequential::new().add(Linear::new(4, 4, true, 3)?).add(ReLU));
    let names: Vec<String> = res.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["fn.0.weight", "fn.0.bias"]);
    let p = res.named_parameters();
    let f: Vec<f64> = naive_linear(&xr, 5, &vals(&p[0].1), Some(&vals(&p[1].1)), 4, 4)
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    let want: Vec<f64> = xr.iter().zip(&f).map(|(a, b)| a + b).collect();
    assert_close(&vals(&res.forward(&x)?), &want, 1e-5, 1e-5);

    // Nested names and buffers, and boxed modules.
    let nested = Sequential::new()
        .add(Linear::new(4, 4, true, 4)?)
        .add(Residual::new(
            Sequential::new()
                .add(Linear::new(4, 4, true, 5)?)
                .add(BatchNorm1d::new_1d(4)?),
        ));
    let names: Vec<String> = nested
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "0.weight",
            "0.bias",
            "1.fn.0.weight",
            "1.fn.0.bias",
            "1.fn.1.weight",
            "1.fn.1.bias"
        ]
    );
    let bufs: Vec<String> = nested.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(bufs, ["1.fn.1.running_mean", "1.fn.1.running_var"]);
    let sd: Vec<String> = nested.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(sd.len(), 8);
    assert_eq!(&sd[6..], &bufs[..]);
    let boxed: Box<dyn Module> = Box::new(nested);
    assert_eq!(boxed.parameters().len(), 6);
    assert_eq!(
        models::parameter_count(&boxed),
        4 * 4 + 4 + 4 * 4 + 4 + 4 + 4
    );
    Ok(())
}

#[test]
fn train_eval_propagates_through_containers() -> Result<()> {
    let x = Tensor::new(NDArray::ones(&[64, 32], DType::F32)?);
    let model = Sequential::new()
        .add(Identity)
        .add(Residual::new(Sequential::new().add(Dropout::new(0.5, 1)?)));
    // Training: some of f(x) dropped (x + 0) and the rest doubled (x + 2x).
    let y = vals(&model.forward(&x)?);
    let zeros = y.iter().filter(|&&v| v == 1.0).count();
    let kept = y.iter().filter(|&&v| v == 3.0).count();
    assert_eq!(zeros + kept, y.len());
    assert!(zeros > 0 && kept > 0);
    // Eval reaches the nested Dropout: x + x.
    model.eval();
    assert!(vals(&model.forward(&x)?).iter().all(|&v| v == 2.0));
    model.train();
    let y = vals(&model.forward(&x)?);
    assert!(y.contains(&1.0) && y.contains(&3.0));

    // Dropout inside Sequential after a Linear: eval output is the Linear's.
    let lin = Linear::new(32, 16, true, 2)?;
    let plain = vals(&lin.forward(&x)?);
    let seq = Sequential::new().add(lin).add(Dropout::new(0.3, 9)?);
    seq.eval();
    assert_eq!(vals(&seq.forward(&x)?), plain);
    seq.train();
    assert_ne!(vals(&seq.forward(&x)?), plain);

    // BatchNorm inside Residual inside Sequential switches to running stats in eval.
    let bn_model = Sequential::new().add(Residual::new(BatchNorm1d::new_1d(3)?));
    let xv: Vec<f64> = (0..12).map(|k| k as f64).collect();
    let xb = t32(&xv, &[4, 3]);
    bn_model.eval();
    // Fresh running stats (0, 1): x + x / sqrt(1 + eps).
    let want: Vec<f64> = xv.iter().map(|&v| v + v / (1.0f64 + 1e-5).sqrt()).collect();
    assert_close(&vals(&bn_model.forward(&xb)?), &want, 1e-5, 1e-6);
    // Eval forwards leave the running stats alone.
    assert_eq!(vals(&bn_model.named_buffers()[0].1), [0.0; 3]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// BatchNorm

/// Runs a BatchNorm over (n, c, s)-shaped data given in `shape`, checking training output,
/// running statistics after two steps, and the eval output.
fn check_batchnorm(bn: &BatchNorm, shape: &[usize], seed: u64) -> Result<()> {
    let mut rng = Prng::new(seed);
    let (n, c) = (shape[0], shape[1]);
    let s: usize = shape[2..].iter().product();
    let numel = n * c * s;
    // Non-trivial affine parameters.
    let w = uniform_vec(&mut rng, c, 0.5, 2.0);
    let b = uniform_vec(&mut rng, c, -1.0, 1.0);
    bn.weight.array().assign(&arr(&w, &[c], DType::F64))?;
    bn.bias.array().assign(&arr(&b, &[c], DType::F64))?;
    let (w, b) = (vals(&bn.weight), vals(&bn.bias));

    let mut run_mean = vec![0.0; c];
    let mut run_var = vec![1.0; c];
    let m = (n * s) as f64;
    for step in 0..2 {
        // Channels with different offsets and scales.
        let xv: Vec<f64> = (0..numel)
            .map(|i| {
                let ch = (i / s) % c;
                (ch as f64 - 1.0) * 3.0 + (1.0 + ch as f64) * (rng.unit() * 2.0 - 1.0)
            })
            .collect();
        let x = t32(&xv, shape);
        let xr = vals(&x);
        let (mean, var) = channel_stats(&xr, n, c, s);
        let y = bn.forward(&x)?;
        assert_eq!(y.shape(), shape);
        let want = naive_norm(&xr, n, c, s, &mean, &var, &w, &b);
        assert_close(&vals(&y), &want, 1e-4, 1e-4);
        // PyTorch: running = 0.9 * running + 0.1 * batch, variance unbiased (needle's
        // BatchNorm1d: biased).
        let correction = if bn.unbiased_running_var {
            m / (m - 1.0)
        } else {
            1.0
        };
        for ch in 0..c {
            run_mean[ch] = 0.9 * run_mean[ch] + 0.1 * mean[ch];
            run_var[ch] = 0.9 * run_var[ch] + 0.1 * var[ch] * correction;
        }
        assert_close(&vals(&bn.running_mean), &run_mean, 1e-5, 1e-5);
        assert_close(&vals(&bn.running_var), &run_var, 1e-5, 1e-5);
        assert_eq!(bn.running_mean.shape(), &[c], "step {step}");
    }

    // Eval: the running statistics, and no further update.
    bn.eval();
    let xv = uniform_vec(&mut rng, numel, -3.0, 3.0);
    let x = t32(&xv, shape);
    let want = naive_norm(&vals(&x), n, c, s, &run_mean, &run_var, &w, &b);
    assert_close(&vals(&bn.forward(&x)?), &want, 1e-4, 1e-4);
    assert_close(&vals(&bn.running_mean), &run_mean, 1e-5, 1e-5);
    // Eval works for a batch of one.
    let one = t32(&xv[..c * s], &[&[1usize, c][..], &shape[2..]].concat());
    assert_eq!(bn.forward(&one)?.shape()[0], 1);
    bn.train();
    Ok(())
}

#[test]
fn batchnorm1d_matches_naive_and_pytorch_running_stats() -> Result<()> {
    let bn = BatchNorm1d::new_1d(3)?;
    let names: Vec<String> = bn.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias", "running_mean", "running_var"]);
    assert_eq!(vals(&bn.weight), [1.0; 3]);
    assert_eq!(vals(&bn.bias), [0.0; 3]);
    assert_eq!(vals(&bn.running_mean), [0.0; 3]);
    assert_eq!(vals(&bn.running_var), [1.0; 3]);
    assert_eq!(bn.parameters().len(), 2);
    check_batchnorm(&bn, &[8, 3], 10)
}

#[test]
fn batchnorm_with_a_biased_running_variance_is_needles() -> Result<()> {
    let mut bn = BatchNorm1d::new_1d(3)?;
    bn.unbiased_running_var = false;
    check_batchnorm(&bn, &[8, 3], 12)
}

#[test]
fn batchnorm2d_matches_naive_and_pytorch_running_stats() -> Result<()> {
    let bn = BatchNorm2d::new_2d(4)?;
    check_batchnorm(&bn, &[3, 4, 2, 5], 11)
}

#[test]
fn batchnorm_shape_errors() -> Result<()> {
    let bn1 = BatchNorm1d::new_1d(3)?;
    assert_err_mentions(
        bn1.forward(&Tensor::zeros(&[4, 5], DType::F32)?),
        "BatchNorm1d",
    );
    assert_err_mentions(
        bn1.forward(&Tensor::zeros(&[4, 3, 2], DType::F32)?),
        "BatchNorm1d",
    );
    assert_err_mentions(
        bn1.forward(&Tensor::zeros(&[3], DType::F32)?),
        "BatchNorm1d",
    );
    let bn2 = BatchNorm2d::new_2d(3)?;
    assert_err_mentions(
        bn2.forward(&Tensor::zeros(&[4, 3], DType::F32)?),
        "BatchNorm2d",
    );
    assert_err_mentions(
        bn2.forward(&Tensor::zeros(&[2, 4, 2, 2], DType::F32)?),
        "BatchNorm2d",
    );
    // Failed forwards leave the running stats untouched.
    assert_eq!(vals(&bn1.running_mean), [0.0; 3]);
    assert_eq!(vals(&bn2.running_var), [1.0; 3]);
    Ok(())
}

#[test]
fn batchnorm_gradcheck_f64() -> Result<()> {
    let mut rng = Prng::new(12);
    for shape in [vec![5usize, 3], vec![3, 2, 2, 3]] {
        let c = shape[1];
        let mut bn = if shape.len() == 2 {
            BatchNorm1d::new_1d(c)?
        } else {
            BatchNorm2d::new_2d(c)?
        };
        // f64 parameters (the module's fields are public).
        bn.weight = leaf64(&uniform_vec(&mut rng, c, 0.5, 1.5), &[c]);
        bn.bias = leaf64(&uniform_vec(&mut rng, c, -0.5, 0.5), &[c]);
        let n: usize = shape.iter().product();
        let x = leaf64(&uniform_vec(&mut rng, n, -2.0, 2.0), &shape);
        let inputs = [x, bn.weight.clone(), bn.bias.clone()];
        check_grad("BatchNorm train", |t| bn.forward(&t[0]), &inputs);
        bn.eval();
        check_grad("BatchNorm eval", |t| bn.forward(&t[0]), &inputs);
        bn.train();
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// LayerNorm and Dropout

#[test]
fn layernorm_matches_naive() -> Result<()> {
    let mut rng = Prng::new(13);
    let d = 6;
    let ln = LayerNorm::new(d)?;
    let w = uniform_vec(&mut rng, d, 0.5, 2.0);
    let b = uniform_vec(&mut rng, d, -1.0, 1.0);
    ln.weight.array().assign(&arr(&w, &[d], DType::F64))?;
    ln.bias.array().assign(&arr(&b, &[d], DType::F64))?;
    let (w, b) = (vals(&ln.weight), vals(&ln.bias));
    let rows = 2 * 3;
    let xv: Vec<f64> = (0..rows * d)
        .map(|i| (i / d) as f64 * 2.0 + rng.unit() * 3.0)
        .collect();
    let x = t32(&xv, &[2, 3, d]);
    let xr = vals(&x);
    let mut want = vec![0.0; rows * d];
    for r in 0..rows {
        let row = &xr[r * d..(r + 1) * d];
        let mean = row.iter().sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        for k in 0..d {
            want[r * d + k] = (row[k] - mean) / (var + 1e-5).sqrt() * w[k] + b[k];
        }
    }
    let y = ln.forward(&x)?;
    assert_eq!(y.shape(), &[2, 3, d]);
    assert_close(&vals(&y), &want, 1e-5, 1e-4);
    let names: Vec<String> = ln.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    assert_err_mentions(
        ln.forward(&Tensor::zeros(&[2, 5], DType::F32)?),
        "LayerNorm",
    );
    assert_err_mentions(ln.forward(&Tensor::scalar(1.0f32)), "LayerNorm");

    // gradcheck in f64.
    let mut ln = LayerNorm::new(4)?;
    ln.weight = leaf64(&uniform_vec(&mut rng, 4, 0.5, 1.5), &[4]);
    ln.bias = leaf64(&uniform_vec(&mut rng, 4, -0.5, 0.5), &[4]);
    let x = leaf64(&uniform_vec(&mut rng, 12, -2.0, 2.0), &[3, 4]);
    check_grad(
        "LayerNorm",
        |t| ln.forward(&t[0]),
        &[x, ln.weight.clone(), ln.bias.clone()],
    );
    Ok(())
}

#[test]
fn dropout_mask_statistics_scaling_and_determinism() -> Result<()> {
    let mut rng = Prng::new(14);
    let p = 0.3;
    let n = 200 * 500;
    let xv = uniform_vec(&mut rng, n, 1.0, 2.0);
    let x = t32(&xv, &[200, 500]);
    let xr = vals(&x);
    let d = Dropout::new(p, 21)?;
    let y = vals(&d.forward(&x)?);
    let zeros = y.iter().filter(|&&v| v == 0.0).count();
    let frac = zeros as f64 / n as f64;
    // Binomial std is ~0.0014: 0.01 is ~7 sigma.
    assert!((frac - p).abs() < 0.01, "zero fraction {frac} vs p {p}");
    for (k, (&g, &x)) in y.iter().zip(&xr).enumerate() {
        if g != 0.0 {
            let want = x / (1.0 - p);
            assert!(
                (g - want).abs() <= 1e-6 * want,
                "element {k}: {g} vs {want}"
            );
        }
    }
    // The next call draws a different mask.
    let y2 = vals(&d.forward(&x)?);
    assert_ne!(y, y2);
    // The same seed gives the same sequence of masks; another seed another.
    let same = Dropout::new(p, 21)?;
    assert_eq!(vals(&same.forward(&x)?), y);
    assert_eq!(vals(&same.forward(&x)?), y2);
    assert_ne!(vals(&Dropout::new(p, 22)?.forward(&x)?), y);

    // Gradient: the same mask and scale.
    let small = Tensor::from_array(NDArray::ones(&[50, 40], DType::F64)?, true)?;
    let out = Dropout::new(0.5, 3)?.forward(&small)?;
    out.sum(None, false)?.backward()?;
    assert_eq!(vals(&small.grad().unwrap()), vals(&out));

    // Eval and p = 0: the identity (the same tensor).
    d.eval();
    assert!(d.forward(&x)?.same_node(&x));
    assert!(Dropout::new(0.0, 1)?.forward(&x)?.same_node(&x));
    // p outside [0, 1] (p = 1 drops everything: tests/nn_arguments.rs).
    for bad in [1.0001, 1.5, -0.1, f64::NAN] {
        assert_err_mentions(Dropout::new(bad, 0).map(|_| ()), "Dropout");
    }
    Ok(())
}

#[test]
fn dropout_resumes_its_mask_stream_from_state_dict() -> Result<()> {
    let x = Tensor::new(NDArray::ones(&[40, 50], DType::F32)?);
    let a = Dropout::new(0.5, 77)?;
    let first = vals(&a.forward(&x)?);
    // Checkpoint after one call (copied out: state_dict shares the arrays).
    let saved: Vec<(String, NDArray)> = a
        .state_dict()
        .into_iter()
        .map(|(n, t)| (n, t.deep_copy().unwrap()))
        .collect();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].0, "calls");
    assert_eq!(saved[0].1.item::<i64>()?, 1);
    let second = vals(&a.forward(&x)?);
    assert_ne!(first, second);

    // A fresh Dropout draws the first mask; one resumed from the checkpoint the second.
    let fresh = Dropout::new(0.5, 77)?;
    let resumed = Dropout::new(0.5, 77)?;
    resumed.load_state_dict(&saved)?;
    assert_eq!(vals(&resumed.forward(&x)?), second);
    assert_eq!(vals(&fresh.forward(&x)?), first);
    // Eval calls do not advance the stream.
    fresh.eval();
    fresh.forward(&x)?;
    fresh.train();
    assert_eq!(vals(&fresh.forward(&x)?), second);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// state_dict / load_state_dict

fn small_model(seed: u64) -> Result<Sequential> {
    Ok(Sequential::new()
        .add(Linear::new(4, 8, true, seed)?)
        .add(BatchNorm1d::new_1d(8)?)
        .add(ReLU)
        .add(Linear::new(8, 3, true, seed + 1)?))
}

#[test]
fn state_dict_round_trip_and_errors() -> Result<()> {
    let mut rng = Prng::new(15);
    let x = t32(&uniform_vec(&mut rng, 10 * 4, -2.0, 2.0), &[10, 4]);
    let a = small_model(1)?;
    // One training step moves the running statistics off their defaults.
    a.forward(&x)?;
    a.eval();
    let ya = vals(&a.forward(&x)?);
    let sd = a.state_dict();
    let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "0.weight",
            "0.bias",
            "1.weight",
            "1.bias",
            "3.weight",
            "3.bias",
            "1.running_mean",
            "1.running_var"
        ]
    );

    let b = small_model(100)?;
    b.eval();
    assert_ne!(vals(&b.forward(&x)?), ya);
    let before = snapshot(&b);

    // Missing key.
    let missing: Vec<(String, NDArray)> = sd
        .iter()
        .filter(|(n, _)| n != "1.running_var")
        .cloned()
        .collect();
    assert_err_mentions(b.load_state_dict(&missing), "1.running_var");
    assert_eq!(snapshot(&b), before);
    // Unexpected key (everything else valid).
    let mut extra = sd.clone();
    extra.push(("4.weight".into(), NDArray::zeros(&[2, 2], DType::F32)?));
    assert_err_mentions(b.load_state_dict(&extra), "4.weight");
    assert_eq!(snapshot(&b), before);
    // Wrong shape on the last key: nothing before it may be written either.
    let mut wrong = sd.clone();
    let last = wrong.len() - 1;
    wrong[last].1 = NDArray::ones(&[7], DType::F32)?;
    let e = assert_err_mentions(b.load_state_dict(&wrong), "1.running_var");
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e:?}");
    assert_eq!(snapshot(&b), before);
    // Wrong shape on a weight (transposed).
    let mut wrong = sd.clone();
    wrong[4].1 = NDArray::zeros(&[3, 8], DType::F32)?;
    assert_err_mentions(b.load_state_dict(&wrong), "3.weight");
    assert_eq!(snapshot(&b), before);

    // The real load: identical outputs, values copied (not aliased).
    b.load_state_dict(&sd)?;
    assert_eq!(vals(&b.forward(&x)?), ya);
    assert_eq!(snapshot(&b), snapshot(&a));
    b.parameters()[0].array().add_scalar_assign(1.0)?;
    assert_eq!(vals(&a.forward(&x)?), ya);
    // Order does not matter, and f64 values are cast to the model's dtype.
    let c = small_model(200)?;
    c.eval();
    let shuffled: Vec<(String, NDArray)> = sd
        .iter()
        .rev()
        .map(|(n, t)| (n.clone(), t.astype(DType::F64).unwrap()))
        .collect();
    c.load_state_dict(&shuffled)?;
    assert_eq!(c.parameters()[0].dtype(), DType::F32);
    assert_eq!(vals(&c.forward(&x)?), ya);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Losses

#[test]
fn cross_entropy_matches_naive_log_softmax() -> Result<()> {
    let mut rng = Prng::new(16);
    let (n, c) = (6, 5);
    let xv = uniform_vec(&mut rng, n * c, -4.0, 4.0);
    let labels = [0i64, 4, 2, 2, 1, 3];
    let la = NDArray::from_vec(labels.to_vec(), &[n])?;
    for dtype in [DType::F32, DType::F64] {
        let x = Tensor::new(arr(&xv, &[n, c], dtype));
        let logp = naive_log_softmax(&vals(&x), n, c);
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        for smoothing in [0.0, 0.1, 0.35, 1.0] {
            // PyTorch: (1 - eps) * nll + eps * mean_c(-logp).
            let per: Vec<f64> = (0..n)
                .map(|r| {
                    let nll = -logp[r * c + labels[r] as usize];
                    let uni = -(0..c).map(|k| logp[r * c + k]).sum::<f64>() / c as f64;
                    (1.0 - smoothing) * nll + smoothing * uni
                })
                .collect();
            let none = cross_entropy(&x, &la, smoothing, Reduction::None)?;
            assert_eq!(none.shape(), &[n]);
            assert_eq!(none.dtype(), dtype);
            assert_close(&vals(&none), &per, tol, tol);
            let sum = cross_entropy(&x, &la, smoothing, Reduction::Sum)?;
            assert_eq!(sum.shape(), &[] as &[usize]);
            assert_close(&[sum.item()?], &[per.iter().sum()], tol, tol);
            let mean = cross_entropy(&x, &la, smoothing, Reduction::Mean)?;
            assert_close(
                &[mean.item()?],
                &[per.iter().sum::<f64>() / n as f64],
                tol,
                tol,
            );
        }
        assert_eq!(Reduction::default(), Reduction::Mean);

        // nll_loss over the naive log-probabilities.
        let lp = Tensor::new(arr(&logp, &[n, c], dtype));
        let want: Vec<f64> = (0..n).map(|r| -logp[r * c + labels[r] as usize]).collect();
        assert_close(
            &vals(&nll_loss(&lp, &la, Reduction::None)?),
            &want,
            tol,
            tol,
        );
        let m = nll_loss(&lp, &la, Reduction::Mean)?.item()?;
        assert_close(&[m], &[want.iter().sum::<f64>() / n as f64], tol, tol);
        let s = nll_loss(&lp, &la, Reduction::Sum)?.item()?;
        assert_close(&[s], &[want.iter().sum::<f64>()], tol, tol);
    }
    // Hand value: uniform logits give log(C).
    let u = Tensor::zeros(&[3, 4], DType::F64)?;
    let l = cross_entropy(
        &u,
        &NDArray::from_vec(vec![0i64, 1, 3], &[3])?,
        0.0,
        Reduction::Mean,
    )?;
    assert!((l.item()? - 4f64.ln()).abs() < 1e-15);
    // Large logits stay finite: a confident right answer costs ~0, a wrong one ~the margin.
    let big = t32(&[1000.0, -1000.0, 1000.0, -1000.0], &[2, 2]);
    let l = cross_entropy(
        &big,
        &NDArray::from_vec(vec![0i64, 1], &[2])?,
        0.0,
        Reduction::None,
    )?;
    assert_eq!(vals(&l), [0.0, 2000.0]);
    // Other integer label dtypes.
    let x = t32(&xv, &[n, c]);
    let a = vals(&cross_entropy(&x, &la, 0.0, Reduction::None)?);
    let b = vals(&cross_entropy(
        &x,
        &la.astype(DType::I32).unwrap(),
        0.0,
        Reduction::None,
    )?);
    assert_eq!(a, b);
    Ok(())
}

#[test]
fn cross_entropy_gradient() -> Result<()> {
    let mut rng = Prng::new(17);
    let (n, c) = (4, 5);
    let xv = uniform_vec(&mut rng, n * c, -3.0, 3.0);
    let labels = [1i64, 0, 4, 1];
    let la = NDArray::from_vec(labels.to_vec(), &[n])?;
    for smoothing in [0.0, 0.2] {
        for red in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            let x = leaf64(&xv, &[n, c]);
            check_grad(
                "cross_entropy",
                |t| cross_entropy(&t[0], &la, smoothing, red),
                &[x],
            );
        }
        // Closed form of the mean: (softmax - target) / N, target = (1 - eps) onehot + eps / C.
        let x = leaf64(&xv, &[n, c]);
        cross_entropy(&x, &la, smoothing, Reduction::Mean)?.backward()?;
        let sm = naive_softmax(&xv, &[n, c], 1);
        let want: Vec<f64> = (0..n * c)
            .map(|i| {
                let (r, k) = (i / c, i % c);
                let onehot = if labels[r] as usize == k { 1.0 } else { 0.0 };
                (sm[i] - ((1.0 - smoothing) * onehot + smoothing / c as f64)) / n as f64
            })
            .collect();
        assert_close(&vals(&x.grad().unwrap()), &want, 1e-12, 1e-10);
    }
    // nll_loss too.
    let lp = leaf64(&xv, &[n, c]);
    check_grad("nll_loss", |t| nll_loss(&t[0], &la, Reduction::Mean), &[lp]);
    Ok(())
}

#[test]
fn loss_label_errors() -> Result<()> {
    let x = Tensor::zeros(&[3, 4], DType::F32)?;
    let ok = NDArray::from_vec(vec![0i64, 1, 2], &[3])?;
    cross_entropy(&x, &ok, 0.0, Reduction::Mean)?;
    // Wrong length, wrong rank (labels and logits).
    let short = NDArray::from_vec(vec![0i64, 1], &[2])?;
    let e = assert_err_mentions(
        cross_entropy(&x, &short, 0.0, Reduction::Mean),
        "cross_entropy",
    );
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e:?}");
    let two_d = NDArray::from_vec(vec![0i64, 1, 2], &[3, 1])?;
    assert_err_mentions(
        cross_entropy(&x, &two_d, 0.0, Reduction::Mean),
        "cross_entropy",
    );
    let flat = Tensor::zeros(&[4], DType::F32)?;
    let one = NDArray::from_vec(vec![0i64], &[1])?;
    assert_err_mentions(
        cross_entropy(&flat, &one, 0.0, Reduction::Mean),
        "cross_entropy",
    );
    assert_err_mentions(nll_loss(&x, &short, Reduction::Mean), "nll_loss");
    // Float or bool labels.
    let fl = NDArray::from_vec(vec![0.0f32, 1.0, 2.0], &[3])?;
    let e = assert_err_mentions(
        cross_entropy(&x, &fl, 0.0, Reduction::Mean),
        "cross_entropy",
    );
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e:?}");
    let bl = NDArray::from_vec(vec![false, true, true], &[3])?;
    assert_err_mentions(nll_loss(&x, &bl, Reduction::Mean), "nll_loss");
    // Smoothing outside [0, 1].
    assert_err_mentions(cross_entropy(&x, &ok, 1.5, Reduction::Mean), "smoothing");
    assert_err_mentions(cross_entropy(&x, &ok, -0.1, Reduction::Mean), "smoothing");
    // A label out of range is an error, not a silent read (nor a Python-style wrap).
    let oob = NDArray::from_vec(vec![0i64, 4, 1], &[3])?;
    assert_err_mentions(cross_entropy(&x, &oob, 0.0, Reduction::Mean), "label 4");
    let neg = NDArray::from_vec(vec![0i64, -1, 1], &[3])?;
    assert_err_mentions(cross_entropy(&x, &neg, 0.0, Reduction::Mean), "label -1");
    assert_err_mentions(
        nll_loss(&x, &neg.astype(DType::I32).unwrap(), Reduction::Sum),
        "nll_loss",
    );
    let neg8 = NDArray::from_vec(vec![0u8, 9, 1], &[3])?;
    assert_err_mentions(
        cross_entropy(&x, &neg8, 0.0, Reduction::Mean),
        "out of range",
    );
    // Empty batches pass the check.
    let none = NDArray::from_vec(Vec::<i64>::new(), &[0])?;
    let e = cross_entropy(
        &Tensor::zeros(&[0, 4], DType::F32)?,
        &none,
        0.0,
        Reduction::Sum,
    )?;
    assert_eq!(e.item()?, 0.0);
    Ok(())
}

#[test]
fn regression_losses_match_naive() -> Result<()> {
    let mut rng = Prng::new(18);
    let n = 24;
    let pv = uniform_vec(&mut rng, n, -3.0, 3.0);
    let tv = uniform_vec(&mut rng, n, -3.0, 3.0);
    let (p, t) = (t32(&pv, &[4, 6]), t32(&tv, &[4, 6]));
    let (pr, tr) = (vals(&p), vals(&t));
    let sq: Vec<f64> = pr.iter().zip(&tr).map(|(a, b)| (a - b).powi(2)).collect();
    let ab: Vec<f64> = pr.iter().zip(&tr).map(|(a, b)| (a - b).abs()).collect();
    for (name, f, want) in [
        (
            "mse",
            mse_loss as fn(&Tensor, &Tensor, Reduction) -> Result<Tensor>,
            &sq,
        ),
        ("l1", l1_loss, &ab),
    ] {
        let none = f(&p, &t, Reduction::None)?;
        assert_eq!(none.shape(), &[4, 6], "{name}");
        assert_close(&vals(&none), want, 1e-5, 1e-5);
        let s: f64 = want.iter().sum();
        assert_close(&[f(&p, &t, Reduction::Sum)?.item()?], &[s], 1e-4, 1e-5);
        assert_close(
            &[f(&p, &t, Reduction::Mean)?.item()?],
            &[s / n as f64],
            1e-5,
            1e-5,
        );
    }
    // Broadcasting target: a row.
    let row = t32(&tv[..6], &[6]);
    let want: Vec<f64> = (0..n)
        .map(|i| (pr[i] - vals(&row)[i % 6]).powi(2))
        .collect();
    assert_close(
        &vals(&mse_loss(&p, &row, Reduction::None)?),
        &want,
        1e-5,
        1e-5,
    );

    // BCE with logits against the textbook -(y log s + (1 - y) log(1 - s)) for moderate x.
    let yv: Vec<f64> = (0..n).map(|i| [0.0, 1.0, 0.3][i % 3]).collect();
    let y = t32(&yv, &[4, 6]);
    let bce: Vec<f64> = pr
        .iter()
        .zip(&yv)
        .map(|(&x, &y)| {
            let s = 1.0 / (1.0 + (-x).exp());
            -(y * s.ln() + (1.0 - y) * (1.0 - s).ln())
        })
        .collect();
    let got = binary_cross_entropy_with_logits(&p, &y, Reduction::None)?;
    assert_close(&vals(&got), &bce, 1e-5, 1e-5);
    let m = binary_cross_entropy_with_logits(&p, &y, Reduction::Mean)?.item()?;
    assert_close(&[m], &[bce.iter().sum::<f64>() / n as f64], 1e-5, 1e-5);
    // Large |logits|: finite, with the hand values max(x, 0) - x y (+ ~0).
    let big = t32(
        &[1000.0, 1000.0, -1000.0, -1000.0, 100.0, -100.0, 0.0],
        &[7],
    );
    let by = t32(&[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0], &[7]);
    let l = vals(&binary_cross_entropy_with_logits(
        &big,
        &by,
        Reduction::None,
    )?);
    assert!(l.iter().all(|v| v.is_finite()), "{l:?}");
    assert_close(
        &l,
        &[1000.0, 0.0, 0.0, 1000.0, 100.0, 100.0, 2f64.ln()],
        1e-6,
        1e-6,
    );
    // Its gradient at large logits is sigmoid(x) - y: finite too.
    let bl = Tensor::from_array(big.array().astype(DType::F64).unwrap(), true)?;
    binary_cross_entropy_with_logits(&bl, &by, Reduction::Sum)?.backward()?;
    let g = vals(&bl.grad().unwrap());
    let want: Vec<f64> = vals(&bl)
        .iter()
        .zip(vals(&by))
        .map(|(&x, y)| 1.0 / (1.0 + (-x).exp()) - y)
        .collect();
    assert_close(&g, &want, 1e-12, 1e-9);

    // gradchecks in f64 (away from the kinks of |x| and max(x, 0) at 0).
    let away: Vec<f64> = pv
        .iter()
        .map(|&v| if v.abs() < 0.1 { v + 0.5 } else { v })
        .collect();
    let pl = leaf64(&away, &[4, 6]);
    let tl = leaf64(&tv, &[4, 6]);
    check_grad(
        "mse",
        |t| mse_loss(&t[0], &t[1], Reduction::Mean),
        &[pl.clone(), tl.clone()],
    );
    let pl1 = leaf64(
        &pv.iter()
            .zip(&tv)
            .map(|(&a, &b)| if (a - b).abs() < 0.1 { a + 0.5 } else { a })
            .collect::<Vec<_>>(),
        &[4, 6],
    );
    check_grad("l1", |t| l1_loss(&t[0], &t[1], Reduction::Sum), &[pl1, tl]);
    let yl = leaf64(&yv, &[4, 6]);
    check_grad(
        "bce_with_logits",
        |t| binary_cross_entropy_with_logits(&t[0], &t[1], Reduction::Mean),
        &[pl, yl],
    );
    // The loss is smooth at a zero logit: the gradient there is sigmoid(0) - y = 0.5 - y.
    let zl = leaf64(&[0.0, 0.0, 0.0], &[3]);
    let zy = leaf64(&[0.0, 1.0, 0.25], &[3]);
    check_grad(
        "bce_with_logits at 0",
        |t| binary_cross_entropy_with_logits(&t[0], &t[1], Reduction::Sum),
        &[zl.clone(), zy.clone()],
    );
    binary_cross_entropy_with_logits(&zl, &zy, Reduction::Sum)?.backward()?;
    assert_eq!(vals(&zl.grad().unwrap()), [0.5, -0.5, 0.25]);
    assert_eq!(vals(&zy.grad().unwrap()), [0.0, 0.0, 0.0]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// init

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

#[test]
fn init_fans() -> Result<()> {
    assert_eq!(init::fans(&[3, 5])?, (3, 5));
    // Conv weights (out, in, kh, kw): the receptive field multiplies both.
    assert_eq!(init::fans(&[8, 4, 3, 3])?, (4 * 9, 8 * 9));
    assert_eq!(init::fans(&[8, 4, 5])?, (20, 40));
    assert_err_mentions(init::fans(&[5]), "rank");
    assert!(init::fans(&[]).is_err());
    assert!(init::xavier_uniform(&[7], 1.0, 0, DType::F32).is_err());
    assert!(init::kaiming_normal(&[7], 0, DType::F32).is_err());
    Ok(())
}

#[test]
fn init_bounds_and_std_follow_the_formulas() -> Result<()> {
    // Uniform in [-b, b): max |w| near b, std b / sqrt(3).
    let check_uniform = |a: &NDArray, bound: f64, name: &str| {
        let v = arr_vals(a);
        assert!(
            v.iter().all(|x| x.abs() <= bound),
            "{name}: outside ±{bound}"
        );
        let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        assert!(max > 0.99 * bound, "{name}: max {max} vs bound {bound}");
        let (m, s) = mean_std(&v);
        assert!(m.abs() < 0.02 * bound, "{name}: mean {m}");
        let want = bound / 3f64.sqrt();
        assert!((s - want).abs() < 0.02 * want, "{name}: std {s} vs {want}");
    };
    let check_normal = |a: &NDArray, std: f64, name: &str| {
        let (m, s) = mean_std(&arr_vals(a));
        assert!(m.abs() < 0.02 * std, "{name}: mean {m}");
        assert!((s - std).abs() < 0.02 * std, "{name}: std {s} vs {std}");
    };

    let (i, o) = (200usize, 300usize);
    let a = init::xavier_uniform(&[i, o], 1.0, 1, DType::F32)?;
    assert_eq!((a.shape(), a.dtype()), (&[i, o][..], DType::F32));
    check_uniform(&a, (6.0 / (i + o) as f64).sqrt(), "xavier_uniform");
    let a = init::xavier_uniform(&[i, o], 2.5, 1, DType::F64)?;
    check_uniform(
        &a,
        2.5 * (6.0 / (i + o) as f64).sqrt(),
        "xavier_uniform gain",
    );
    let a = init::xavier_normal(&[i, o], 1.0, 2, DType::F32)?;
    check_normal(&a, (2.0 / (i + o) as f64).sqrt(), "xavier_normal");
    let a = init::xavier_normal(&[i, o], 0.5, 2, DType::F64)?;
    check_normal(
        &a,
        0.5 * (2.0 / (i + o) as f64).sqrt(),
        "xavier_normal gain",
    );
    let a = init::kaiming_uniform(&[i, o], 3, DType::F32)?;
    check_uniform(&a, (6.0 / i as f64).sqrt(), "kaiming_uniform");
    let a = init::kaiming_normal(&[i, o], 4, DType::F32)?;
    check_normal(&a, (2.0 / i as f64).sqrt(), "kaiming_normal");
    // 4-D conv weight: fan_in = in * kh * kw.
    let a = init::kaiming_normal(&[64, 32, 5, 5], 5, DType::F32)?;
    check_normal(&a, (2.0f64 / (32.0 * 25.0)).sqrt(), "kaiming_normal 4-D");
    let a = init::kaiming_uniform(&[64, 32, 5, 5], 6, DType::F32)?;
    check_uniform(&a, (6.0f64 / (32.0 * 25.0)).sqrt(), "kaiming_uniform 4-D");
    let a = init::xavier_uniform(&[64, 32, 5, 5], 1.0, 7, DType::F32)?;
    check_uniform(&a, (6.0f64 / (96.0 * 25.0)).sqrt(), "xavier_uniform 4-D");

    // Plain uniform / normal, and determinism by seed.
    check_uniform(
        &init::uniform(&[300, 200], 0.7, 8, DType::F32)?,
        0.7,
        "uniform",
    );
    check_normal(
        &init::normal(&[300, 200], 1.3, 9, DType::F64)?,
        1.3,
        "normal",
    );
    let x = arr_vals(&init::kaiming_uniform(&[10, 10], 11, DType::F32)?);
    assert_eq!(
        x,
        arr_vals(&init::kaiming_uniform(&[10, 10], 11, DType::F32)?)
    );
    assert_ne!(
        x,
        arr_vals(&init::kaiming_uniform(&[10, 10], 12, DType::F32)?)
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Models and training

#[test]
fn mlp_resnet_structure() -> Result<()> {
    let m = models::mlp_resnet(20, 16, 2, 5, 0.1, 0)?;
    let (d, h, c) = (20, 16, 5);
    let block = h * (h / 2) + h / 2 + 2 * (h / 2) + (h / 2) * h + h + 2 * h;
    assert_eq!(
        models::parameter_count(&m),
        d * h + h + 2 * block + h * c + c
    );
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "0.weight");
    assert!(names.contains(&"2.0.fn.0.weight".to_string()), "{names:?}");
    assert!(names.contains(&"3.0.fn.5.bias".to_string()), "{names:?}");
    assert_eq!(names.last().unwrap(), "4.bias");
    let x = t32(&vec![0.5; 8 * d], &[8, d]);
    assert_eq!(m.forward(&x)?.shape(), &[8, c]);
    m.eval();
    let a = vals(&m.forward(&x)?);
    assert_eq!(a, vals(&m.forward(&x)?));
    Ok(())
}

#[test]
fn tiny_mlp_loss_falls_under_sgd() -> Result<()> {
    let mut rng = Prng::new(19);
    let n = 64;
    // Two linearly separable classes (by the sign of x0 - 0.5 x1), with a margin.
    let mut xs = Vec::with_capacity(2 * n);
    let mut ys = Vec::with_capacity(n);
    while ys.len() < n {
        let (a, b) = (rng.unit() * 2.0 - 1.0, rng.unit() * 2.0 - 1.0);
        let s = a - 0.5 * b;
        if s.abs() < 0.1 {
            continue;
        }
        xs.extend([a, b]);
        ys.push(i64::from(s > 0.0));
    }
    let x = t32(&xs, &[n, 2]);
    let y = NDArray::from_vec(ys, &[n])?;
    let model = Sequential::new()
        .add(Linear::new(2, 16, true, 1)?)
        .add(ReLU)
        .add(Linear::new(16, 2, true, 2)?);
    let lr = 0.5;
    let mut losses = Vec::new();
    for _ in 0..200 {
        for p in model.parameters() {
            p.zero_grad();
        }
        let loss = cross_entropy(&model.forward(&x)?, &y, 0.0, Reduction::Mean)?;
        losses.push(loss.item()?);
        loss.backward()?;
        let _g = no_grad();
        for p in model.parameters() {
            let g = p.grad().expect("every parameter gets a gradient");
            p.array().sub_assign(&g.array().mul_scalar(lr)?)?;
        }
    }
    let final_loss = cross_entropy(&model.forward(&x)?, &y, 0.0, Reduction::Mean)?.item()?;
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(
        final_loss < 0.5 * losses[0],
        "loss {} -> {final_loss}",
        losses[0]
    );
    // And the model classifies the training set.
    let pred = model.forward(&x)?.argmax(Some(1), false)?;
    let correct = arr_vals(&pred.array().eq(&y)?.astype(DType::F64).unwrap())
        .iter()
        .sum::<f64>();
    assert!(correct >= 0.95 * n as f64, "{correct} / {n} correct");
    Ok(())
}
