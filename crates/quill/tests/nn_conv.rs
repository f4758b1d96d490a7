//! Conv2d, MaxPool2d and AvgPool2d: forward passes against naive loops in f64 on
//! non-contiguous inputs, gradients against central differences (`gradcheck`), shape errors,
//! and the MNIST CNN's output shape.

use quill::nn::models::{parameter_count, small_cnn};
use quill::nn::{AvgPool2d, Conv2d, MaxPool2d, Module};
use quill::tensor::{gradcheck, GradcheckOptions, Tensor};
use quill::{s, DType, Error, NDArray};

/// A non-contiguous (N, C, H, W) f64 view: drawn as (N, H, C, 2W), permuted, every other
/// column taken.
fn strided_input(shape: [usize; 4], seed: u64) -> NDArray {
    let [n, c, h, w] = shape;
    let base = NDArray::randn(&[n, h, c, 2 * w], seed, DType::F64).unwrap();
    let v = base
        .permute(&[0, 2, 1, 3])
        .unwrap()
        .slice(&s![.., .., .., ..;2])
        .unwrap();
    assert_eq!(v.shape(), &shape);
    assert!(!v.is_contiguous());
    v
}

/// The elements in C order as f64 (the shared test helper).
fn values(a: &NDArray) -> Vec<f64> {
    quill_test_support::f64s(a)
}

fn dims4(s: &[usize]) -> [usize; 4] {
    [s[0], s[1], s[2], s[3]]
}

type Pair = (usize, usize);

/// Direct convolution: for every output element, the sum over channels and kernel taps of
/// the zero-padded input times the weight.
fn naive_conv(
    (x, xs): (&[f64], [usize; 4]),
    (w, ws): (&[f64], [usize; 4]),
    b: Option<&[f64]>,
    stride: Pair,
    pad: Pair,
    dil: Pair,
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [o, _, kh, kw] = ws;
    let ho = (h + 2 * pad.0 - dil.0 * (kh - 1) - 1) / stride.0 + 1;
    let wo = (wd + 2 * pad.1 - dil.1 * (kw - 1) - 1) / stride.1 + 1;
    let mut out = Vec::with_capacity(n * o * ho * wo);
    for ni in 0..n {
        for oi in 0..o {
            for y in 0..ho {
                for z in 0..wo {
                    let mut acc = b.map_or(0.0, |b| b[oi]);
                    for ci in 0..c {
                        for i in 0..kh {
                            for j in 0..kw {
                                let r = (y * stride.0 + i * dil.0) as isize - pad.0 as isize;
                                let q = (z * stride.1 + j * dil.1) as isize - pad.1 as isize;
                                if r < 0 || q < 0 || r >= h as isize || q >= wd as isize {
                                    continue;
                                }
                                let xv = x[((ni * c + ci) * h + r as usize) * wd + q as usize];
                                let wv = w[((oi * c + ci) * kh + i) * kw + j];
                                acc += xv * wv;
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    (out, [n, o, ho, wo])
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: lengths");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{ctx}: element {k}: got {g}, want {w}"
        );
    }
}

/// (kernel, stride, padding, dilation, bias, H, W)
const CONFIGS: &[(Pair, Pair, Pair, Pair, bool, usize, usize)] = &[
    ((3, 3), (1, 1), (0, 0), (1, 1), true, 7, 9),
    ((3, 3), (2, 2), (1, 1), (1, 1), false, 8, 7),
    ((5, 5), (1, 1), (2, 2), (1, 1), true, 6, 10),
    ((3, 3), (2, 2), (2, 2), (2, 2), true, 9, 8),
    ((1, 1), (1, 1), (0, 0), (1, 1), false, 5, 6),
    ((1, 1), (2, 2), (1, 1), (1, 1), true, 5, 6),
    ((5, 5), (2, 2), (0, 0), (2, 2), true, 11, 12),
    ((3, 1), (1, 2), (1, 0), (2, 1), true, 7, 8),
];

#[test]
fn conv2d_matches_direct_convolution() {
    for (t, &(k, st, pad, dil, bias, h, w)) in CONFIGS.iter().enumerate() {
        let ctx = format!(
            "kernel {k:?} stride {st:?} padding {pad:?} dilation {dil:?} bias {bias} input {h}x{w}"
        );
        let conv = Conv2d::new(3, 4, k, st, pad, dil, bias, 10 + t as u64).unwrap();
        assert_eq!(conv.weight.shape(), &[4, 3, k.0, k.1]);
        assert_eq!(conv.bias.is_some(), bias);
        let x = strided_input([2, 3, h, w], 100 + t as u64);
        let wv = values(conv.weight.array());
        let bv = conv.bias.as_ref().map(|b| values(b.array()));
        let (want, wshape) = naive_conv(
            (&values(&x), [2, 3, h, w]),
            (&wv, dims4(conv.weight.shape())),
            bv.as_deref(),
            st,
            pad,
            dil,
        );
        // In f64 through the functional form: exact up to summation order.
        let w64 = Tensor::new(conv.weight.array().astype(DType::F64).unwrap());
        let b64 = conv
            .bias
            .as_ref()
            .map(|b| Tensor::new(b.array().astype(DType::F64).unwrap()));
        let y =
            Conv2d::functional(&Tensor::new(x.clone()), &w64, b64.as_ref(), st, pad, dil).unwrap();
        assert_eq!(y.shape(), &wshape, "{ctx}");
        assert_eq!(y.dtype(), DType::F64, "{ctx}");
        assert_close(&values(y.array()), &want, 1e-12, &ctx);
        // The module in f32.
        let y32 = conv
            .forward(&Tensor::new(x.astype(DType::F32).unwrap()))
            .unwrap();
        assert_eq!(y32.shape(), &wshape, "{ctx}");
        assert_eq!(y32.dtype(), DType::F32, "{ctx}");
        assert_close(&values(y32.array()), &want, 1e-4, &ctx);
    }
}

#[test]
fn conv2d_default_init_matches_pytorch_bounds() {
    let conv = Conv2d::new(8, 16, 3, 1, 1, 1, true, 7).unwrap();
    let bound = 1.0 / ((8 * 9) as f64).sqrt();
    for t in [&conv.weight, conv.bias.as_ref().unwrap()] {
        let v = values(t.array());
        assert!(t.requires_grad() && t.is_leaf());
        assert!(v.iter().all(|x| x.abs() <= bound), "outside ±{bound}");
        // Spread over the range, not collapsed near zero.
        let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        assert!(max > 0.8 * bound, "max |w| {max} vs bound {bound}");
    }
    let names: Vec<String> = conv
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["weight", "bias"]);
    let nb = Conv2d::new(8, 16, 3, 1, 1, 1, false, 7).unwrap();
    assert_eq!(nb.named_parameters().len(), 1);
    // The same seed gives the same weights.
    assert_eq!(values(nb.weight.array()), values(conv.weight.array()));
}

fn leaf(a: NDArray) -> Tensor {
    Tensor::from_array(a, true).unwrap()
}

#[test]
fn conv2d_gradcheck() {
    let cases: &[(Pair, Pair, Pair, Pair, bool, usize, usize)] = &[
        ((3, 3), (1, 1), (1, 1), (1, 1), true, 5, 6),
        ((3, 3), (2, 2), (2, 2), (2, 2), true, 7, 6),
        ((1, 3), (2, 1), (0, 1), (1, 1), false, 5, 5),
        ((2, 2), (1, 2), (0, 0), (1, 1), true, 4, 5),
    ];
    for (t, &(k, st, pad, dil, bias, h, w)) in cases.iter().enumerate() {
        let ctx = format!("kernel {k:?} stride {st:?} padding {pad:?} dilation {dil:?} {h}x{w}");
        let conv = Conv2d::new(3, 4, k, st, pad, dil, bias, 40 + t as u64).unwrap();
        // A strided leaf: gradcheck perturbs it through the view.
        let x = leaf(strided_input([2, 3, h, w], 200 + t as u64));
        let wt = leaf(conv.weight.array().astype(DType::F64).unwrap());
        let mut inputs = vec![x, wt];
        if let Some(b) = &conv.bias {
            inputs.push(leaf(b.array().astype(DType::F64).unwrap()));
        }
        let rep = gradcheck(
            |v| Conv2d::functional(&v[0], &v[1], v.get(2), st, pad, dil),
            &inputs,
            GradcheckOptions::default(),
        )
        .unwrap();
        assert!(rep.passed, "{ctx}: {rep}");
        let n: usize = inputs.iter().map(|t| t.numel()).sum();
        assert_eq!(rep.checked, n, "{ctx}");
    }
}

#[test]
fn conv2d_module_backward_fills_parameter_grads() {
    let conv = Conv2d::new(2, 3, 3, 1, 1, 1, true, 5).unwrap();
    let x = Tensor::randn(&[2, 2, 6, 6], 1, DType::F32).unwrap();
    conv.forward(&x)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let gw = conv.weight.grad().unwrap();
    assert_eq!(gw.shape(), &[3, 2, 3, 3]);
    // d(sum y)/d b_o = N * Ho * Wo.
    let gb = values(conv.bias.as_ref().unwrap().grad().unwrap().array());
    assert_close(&gb, &[72.0; 3], 1e-6, "bias grad");
}

/// Max or mean over each window, no padding.
fn naive_pool(x: &[f64], xs: [usize; 4], k: Pair, st: Pair, max: bool) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, w] = xs;
    let (ho, wo) = ((h - k.0) / st.0 + 1, (w - k.1) / st.1 + 1);
    let mut out = Vec::new();
    for p in 0..n * c {
        for y in 0..ho {
            for z in 0..wo {
                let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
                for i in 0..k.0 {
                    for j in 0..k.1 {
                        let v = x[(p * h + y * st.0 + i) * w + z * st.1 + j];
                        acc = if max { acc.max(v) } else { acc + v };
                    }
                }
                out.push(if max { acc } else { acc / (k.0 * k.1) as f64 });
            }
        }
    }
    (out, [n, c, ho, wo])
}

/// (kernel, stride, H, W): tiling (the reshape path, with and without a crop) and overlapping
/// or gapped windows (the stacked path).
const POOLS: &[(Pair, Pair, usize, usize)] = &[
    ((2, 2), (2, 2), 8, 6),
    ((2, 2), (2, 2), 7, 9),
    ((3, 3), (3, 3), 8, 10),
    ((3, 3), (2, 2), 7, 8),
    ((3, 3), (1, 1), 5, 6),
    ((2, 3), (1, 2), 6, 7),
    ((2, 2), (3, 3), 8, 8),
];

fn pool_forward(x: &Tensor, k: Pair, st: Pair, max: bool) -> quill::Result<Tensor> {
    if max {
        MaxPool2d::functional(x, k, st)
    } else {
        AvgPool2d::functional(x, k, st)
    }
}

#[test]
fn pools_match_naive_loops() {
    for (t, &(k, st, h, w)) in POOLS.iter().enumerate() {
        let x = strided_input([2, 3, h, w], 300 + t as u64);
        for max in [true, false] {
            let ctx = format!("max {max} kernel {k:?} stride {st:?} {h}x{w}");
            let (want, shape) = naive_pool(&values(&x), [2, 3, h, w], k, st, max);
            let y = pool_forward(&Tensor::new(x.clone()), k, st, max).unwrap();
            assert_eq!(y.shape(), &shape, "{ctx}");
            assert_close(&values(y.array()), &want, 1e-12, &ctx);
            // The modules agree with the functions, in f32 too.
            let x32 = Tensor::new(x.astype(DType::F32).unwrap());
            let m = if max {
                MaxPool2d::new(k, st).unwrap().forward(&x32)
            } else {
                AvgPool2d::new(k, st).unwrap().forward(&x32)
            }
            .unwrap();
            assert_eq!(m.dtype(), DType::F32);
            assert_close(&values(m.array()), &want, 1e-5, &ctx);
        }
    }
}

#[test]
fn pools_gradcheck() {
    for (t, &(k, st, h, w)) in POOLS.iter().enumerate() {
        for max in [true, false] {
            let ctx = format!("max {max} kernel {k:?} stride {st:?} {h}x{w}");
            // randn values: ties (where max is not differentiable) have probability zero.
            let x = leaf(strided_input([2, 2, h, w], 400 + t as u64));
            let rep = gradcheck(
                |v| pool_forward(&v[0], k, st, max),
                &[x],
                GradcheckOptions::default(),
            )
            .unwrap();
            assert!(rep.passed, "{ctx}: {rep}");
        }
    }
}

#[test]
fn max_pool_gradient_goes_to_the_maximum_and_ties_share_it() {
    // One 2x2 window with a unique maximum, one constant window.
    let x = leaf(
        NDArray::from_vec(
            vec![1.0f64, 5.0, 3.0, 2.0, 7.0, 7.0, 7.0, 7.0],
            &[1, 2, 2, 2],
        )
        .unwrap(),
    );
    let y = MaxPool2d::new(2, 2).unwrap().forward(&x).unwrap();
    assert_eq!(values(y.array()), [5.0, 7.0]);
    y.sum(None, false).unwrap().backward().unwrap();
    let g = values(x.grad().unwrap().array());
    assert_eq!(g, [0.0, 1.0, 0.0, 0.0, 0.25, 0.25, 0.25, 0.25]);
}

fn message(e: Error) -> String {
    e.to_string()
}

#[test]
fn conv2d_shape_errors() {
    let conv = Conv2d::new(3, 4, 3, 1, 0, 1, true, 0).unwrap();
    // Wrong rank.
    let e = conv
        .forward(&Tensor::zeros(&[3, 8, 8], DType::F32).unwrap())
        .unwrap_err();
    assert!(
        matches!(e, Error::ShapeMismatch { op: "Conv2d", .. }),
        "{e:?}"
    );
    let m = message(e);
    assert!(
        m.contains("Conv2d") && m.contains("[3, 8, 8]") && m.contains("[4, 3, 3, 3]"),
        "{m}"
    );
    // Wrong channel count.
    let e = conv
        .forward(&Tensor::zeros(&[2, 5, 8, 8], DType::F32).unwrap())
        .unwrap_err();
    assert!(
        matches!(e, Error::ShapeMismatch { op: "Conv2d", .. }),
        "{e:?}"
    );
    let m = message(e);
    assert!(
        m.contains("[2, 5, 8, 8]") && m.contains("5 channels"),
        "{m}"
    );
    // Input smaller than the kernel: no output.
    let e = conv
        .forward(&Tensor::zeros(&[2, 3, 2, 8], DType::F32).unwrap())
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { op: "Conv2d", .. }),
        "{e:?}"
    );
    assert!(message(e).contains("[2, 3, 2, 8]"));
    // Dilation makes the window too wide even though the kernel fits.
    let e = Conv2d::new(3, 4, 3, 1, 0, 3, false, 0)
        .unwrap()
        .forward(&Tensor::zeros(&[1, 3, 6, 6], DType::F32).unwrap())
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { op: "Conv2d", .. }),
        "{e:?}"
    );
    // Padding rescues a small input.
    let y = Conv2d::new(3, 4, 3, 1, 1, 1, false, 0)
        .unwrap()
        .forward(&Tensor::zeros(&[1, 3, 1, 1], DType::F32).unwrap())
        .unwrap();
    assert_eq!(y.shape(), &[1, 4, 1, 1]);
    // Zero sizes at construction; a bias of the wrong length in the functional form.
    for bad in [
        Conv2d::new(3, 4, 0, 1, 0, 1, true, 0),
        Conv2d::new(3, 4, 3, 0, 0, 1, true, 0),
        Conv2d::new(3, 4, 3, 1, 0, 0, true, 0),
        Conv2d::new(0, 4, 3, 1, 0, 1, true, 0),
    ] {
        let e = bad.err().expect("zero size accepted");
        assert!(
            matches!(e, Error::InvalidArgument { op: "Conv2d", .. }),
            "{e:?}"
        );
    }
    let x = Tensor::zeros(&[1, 3, 5, 5], DType::F32).unwrap();
    let b = Tensor::zeros(&[5], DType::F32).unwrap();
    let e = Conv2d::functional(&x, &conv.weight, Some(&b), 1, 0, 1).unwrap_err();
    assert!(
        matches!(e, Error::ShapeMismatch { op: "Conv2d", .. }),
        "{e:?}"
    );
    let w3 = Tensor::zeros(&[4, 3, 3], DType::F32).unwrap();
    let e = Conv2d::functional(&x, &w3, None, 1, 0, 1).unwrap_err();
    assert!(
        matches!(e, Error::ShapeMismatch { op: "Conv2d", .. }),
        "{e:?}"
    );
}

#[test]
fn pool_errors() {
    let x = Tensor::zeros(&[1, 2, 3, 3], DType::F32).unwrap();
    let e = MaxPool2d::new(4, 4).unwrap().forward(&x).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "MaxPool2d",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(message(e).contains("[1, 2, 3, 3]"));
    let e = AvgPool2d::new(2, 1)
        .unwrap()
        .forward(&Tensor::zeros(&[2, 3, 3], DType::F32).unwrap())
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "AvgPool2d",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(MaxPool2d::new(0, 1).is_err());
    assert!(AvgPool2d::new(2, 0).is_err());
    assert!(MaxPool2d::functional(&x, 2, (1, 0)).is_err());
}

#[test]
fn small_cnn_maps_mnist_batches_to_logits() {
    let m = small_cnn(0).unwrap();
    // conv1 144 + bn 32 + conv2 4608 + bn 64 + fc1 200832 + fc2 1290.
    assert_eq!(parameter_count(&m), 206_970);
    let x = Tensor::randn(&[2, 1, 28, 28], 3, DType::F32).unwrap();
    let y = m.forward(&x).unwrap();
    assert_eq!(y.shape(), &[2, 10]);
    assert!(values(y.array()).iter().all(|v| v.is_finite()));
    y.sum(None, false).unwrap().backward().unwrap();
    for (name, p) in m.named_parameters() {
        let g = p.grad().unwrap_or_else(|| panic!("no grad for {name}"));
        assert_eq!(g.shape(), p.shape(), "{name}");
    }
    m.eval();
    assert_eq!(m.forward(&x).unwrap().shape(), &[2, 10]);
}
