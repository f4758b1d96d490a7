//! `Tensor::conv2d` (the im2col + GEMM kernels and their explicit backward): the output and
//! both gradients against a direct 7-loop convolution over `Vec<f64>` for strides 1-3,
//! padding 0-2, dilation 1-2, groups 1 / 2 / 4 and depthwise, kh != kw, batch 1, size-1
//! spatial dims, the threaded paths and the 1x1 shortcut; non-contiguous operands (permuted
//! from NHWC, negative steps, offset views); central differences in f64; gradients of
//! gradients through `create_graph` against the composite formulation and finite
//! differences; bad inputs.

use quill::nn::{Conv2d, Module};
use quill::tensor::{grad, gradcheck, set_grad_enabled, BackwardOptions, GradcheckOptions, Tensor};
use quill::{s, Conv2dSpec, DType, Error, NDArray};
use quill_test_support::{assert_close_values, f64s, Prng};

type Pair = (usize, usize);

/// Shapes and hyper-parameters of one case.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    c: usize,
    o: usize,
    h: usize,
    w: usize,
    k: Pair,
    stride: Pair,
    pad: Pair,
    dil: Pair,
    groups: usize,
}

impl Case {
    fn spec(&self) -> Conv2dSpec {
        Conv2dSpec {
            stride: self.stride,
            padding: self.pad,
            dilation: self.dil,
            groups: self.groups,
        }
    }
    fn out_hw(&self) -> Pair {
        let f = |len: usize, k: usize, s: usize, p: usize, d: usize| {
            (len + 2 * p - d * (k - 1) - 1) / s + 1
        };
        (
            f(self.h, self.k.0, self.stride.0, self.pad.0, self.dil.0),
            f(self.w, self.k.1, self.stride.1, self.pad.1, self.dil.1),
        )
    }
    fn x_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    fn w_shape(&self) -> [usize; 4] {
        [self.o, self.c / self.groups, self.k.0, self.k.1]
    }
    fn y_shape(&self) -> [usize; 4] {
        let (ho, wo) = self.out_hw();
        [self.n, self.o, ho, wo]
    }
}

/// Direct convolution and its two gradients for the output gradient `gy`: for every output
/// element, every channel of its group and every kernel tap inside the input.
fn naive(t: &Case, x: &[f64], w: &[f64], gy: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let [n, c, h, wd] = t.x_shape();
    let [o, cg, kh, kw] = t.w_shape();
    let (ho, wo) = t.out_hw();
    let og = o / t.groups;
    let mut y = vec![0.0; n * o * ho * wo];
    let mut dx = vec![0.0; x.len()];
    let mut dw = vec![0.0; w.len()];
    for ni in 0..n {
        for oi in 0..o {
            let grp = oi / og;
            for yi in 0..ho {
                for zi in 0..wo {
                    let yk = ((ni * o + oi) * ho + yi) * wo + zi;
                    for cl in 0..cg {
                        let ci = grp * cg + cl;
                        for i in 0..kh {
                            for j in 0..kw {
                                let r = (yi * t.stride.0 + i * t.dil.0) as isize - t.pad.0 as isize;
                                let q = (zi * t.stride.1 + j * t.dil.1) as isize - t.pad.1 as isize;
                                if r < 0 || q < 0 || r >= h as isize || q >= wd as isize {
                                    continue;
                                }
                                let xk = ((ni * c + ci) * h + r as usize) * wd + q as usize;
                                let wk = ((oi * cg + cl) * kh + i) * kw + j;
                                y[yk] += x[xk] * w[wk];
                                dx[xk] += gy[yk] * w[wk];
                                dw[wk] += gy[yk] * x[xk];
                            }
                        }
                    }
                }
            }
        }
    }
    let _ = c;
    (y, dx, dw)
}

fn randn(shape: &[usize], seed: u64) -> NDArray {
    NDArray::randn(shape, seed, DType::F64).unwrap()
}

/// How the input is laid out in memory.
#[derive(Clone, Copy, Debug)]
enum View {
    Contiguous,
    /// Drawn as NHWC and permuted to NCHW.
    FromNhwc,
    /// W reversed by a negative-step slice of a reversed copy (same values, negative stride).
    Flipped,
    /// An interior window of a larger array (offset, strides of the larger one).
    Offset,
}

/// The values `v` (C order of `shape`) as an array laid out as `view` says.
fn laid_out(v: &NDArray, view: View) -> NDArray {
    let sh = v.shape().to_vec();
    let out = match view {
        View::Contiguous => v.clone(),
        View::FromNhwc => v
            .permute(&[0, 2, 3, 1])
            .unwrap()
            .compact()
            .unwrap()
            .permute(&[0, 3, 1, 2])
            .unwrap(),
        View::Flipped => v
            .slice(&s![.., .., .., ..;-1])
            .unwrap()
            .compact()
            .unwrap()
            .slice(&s![.., .., .., ..;-1])
            .unwrap(),
        View::Offset => {
            let big =
                NDArray::zeros(&[sh[0] + 1, sh[1] + 2, sh[2] + 1, sh[3] + 3], DType::F64).unwrap();
            let lo = [1usize, 2, 1, 3];
            let args: Vec<quill::SliceArg> = (0..4)
                .map(|d| quill::SliceArg::Range {
                    start: Some(lo[d] as isize),
                    stop: Some((lo[d] + sh[d]) as isize),
                    step: 1,
                })
                .collect();
            let inner = big.slice(&args).unwrap();
            inner.assign(v).unwrap();
            inner
        }
    };
    assert_eq!(out.shape(), &sh[..]);
    assert_eq!(f64s(&out), f64s(v), "{view:?} keeps the values");
    if !matches!(view, View::Contiguous) && sh.iter().all(|&d| d > 1) {
        assert!(!out.is_contiguous(), "{view:?} should be a strided view");
    }
    out
}

/// Runs the fused op forward and backward (seeded with `gy`) on `x` laid out as `view`, in
/// `dtype`, and checks the output and both gradients against the direct loops.
fn check_case(t: &Case, seed: u64, view: View, dtype: DType) {
    let ctx = format!("{t:?} {view:?} {dtype}");
    let xv = randn(&t.x_shape(), seed);
    let wv = randn(&t.w_shape(), seed + 1);
    let gv = randn(&t.y_shape(), seed + 2);
    let (y_ref, dx_ref, dw_ref) = naive(t, &f64s(&xv), &f64s(&wv), &f64s(&gv));
    let x = Tensor::from_array(laid_out(&xv, view).astype(dtype).unwrap(), true).unwrap();
    let w = Tensor::from_array(laid_out(&wv, view).astype(dtype).unwrap(), true).unwrap();
    let gy = Tensor::new(laid_out(&gv, view).astype(dtype).unwrap());
    let y = x.conv2d(&w, t.spec()).unwrap();
    assert_eq!(y.shape(), &t.y_shape(), "{ctx}");
    assert_eq!(y.dtype(), dtype, "{ctx}");
    y.backward_with(&gy).unwrap();
    let tol = if dtype == DType::F64 { 1e-11 } else { 2e-4 };
    assert_close_values(&f64s(y.array()), &y_ref, tol, &format!("{ctx}: y"));
    let gx = x.grad().unwrap();
    let gw = w.grad().unwrap();
    assert_eq!(gx.shape(), &t.x_shape(), "{ctx}");
    assert_eq!(gw.shape(), &t.w_shape(), "{ctx}");
    assert_close_values(&f64s(gx.array()), &dx_ref, tol, &format!("{ctx}: dx"));
    assert_close_values(&f64s(gw.array()), &dw_ref, tol, &format!("{ctx}: dw"));
}

#[allow(clippy::too_many_arguments)]
fn case(
    n: usize,
    c: usize,
    o: usize,
    hw: Pair,
    k: Pair,
    s: Pair,
    p: Pair,
    d: Pair,
    g: usize,
) -> Case {
    Case {
        n,
        c,
        o,
        h: hw.0,
        w: hw.1,
        k,
        stride: s,
        pad: p,
        dil: d,
        groups: g,
    }
}

#[test]
fn sweep_stride_padding_dilation_groups() {
    let mut seed = 1000;
    for s in 1..=3 {
        for p in 0..=2 {
            for d in 1..=2 {
                for g in [1, 2, 4] {
                    let t = case(2, 4, 8, (7, 6), (3, 2), (s, s), (p, p), (d, d), g);
                    check_case(&t, seed, View::Contiguous, DType::F64);
                    seed += 3;
                }
            }
        }
    }
}

#[test]
fn odd_shapes_match_direct_convolution() {
    let cases = [
        // kh != kw, mixed per-dim stride / padding / dilation.
        case(2, 3, 5, (9, 8), (1, 3), (1, 2), (0, 2), (2, 1), 1),
        case(2, 6, 4, (8, 9), (4, 2), (3, 1), (1, 0), (1, 2), 2),
        // Depthwise: one channel per group, with a channel multiplier.
        case(3, 6, 6, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1), 6),
        case(2, 4, 8, (6, 5), (3, 3), (2, 2), (1, 1), (1, 1), 4),
        // Batch 1 and size-1 spatial dims.
        case(1, 3, 2, (1, 1), (1, 1), (1, 1), (0, 0), (1, 1), 1),
        case(1, 3, 2, (1, 5), (1, 3), (1, 1), (0, 1), (1, 1), 1),
        case(1, 2, 3, (1, 1), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(2, 4, 4, (5, 1), (3, 1), (2, 1), (2, 0), (1, 1), 2),
        // Output of one pixel from a kernel as large as the padded input.
        case(2, 2, 3, (3, 4), (5, 6), (1, 1), (1, 1), (1, 1), 1),
        // 1x1, stride 1, no padding: the input is the column matrix.
        case(3, 8, 6, (5, 7), (1, 1), (1, 1), (0, 0), (1, 1), 1),
        case(3, 8, 6, (5, 7), (1, 1), (1, 1), (0, 0), (1, 1), 2),
        // 1x1 with stride or padding takes the im2col path.
        case(2, 4, 3, (5, 6), (1, 1), (2, 2), (1, 1), (1, 1), 1),
        // Large enough to split the batch across threads.
        case(8, 8, 16, (12, 12), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(8, 8, 16, (12, 12), (3, 3), (1, 1), (1, 1), (1, 1), 4),
        // One sample large enough for threaded GEMMs.
        case(1, 16, 32, (16, 16), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(1, 16, 32, (16, 16), (1, 1), (1, 1), (0, 0), (1, 1), 1),
        // Fewer than 16 taps: the weight gradient as dot products (the CNN's first layer,
        // rows of 784 = 49 x 16; and 9 taps over rows of 35 = 2 x 16 + 3, one sample).
        case(4, 1, 16, (28, 28), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(1, 1, 5, (5, 7), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        // Output channels that fill the GEMM's 16- or 32-wide tiles: the forward and weight
        // gradient run transposed. The CNN's second layer (196 pixels: 16 tiles of 12 and a
        // 4-row one; a 196-deep weight gradient, in two depth blocks where KC is 192 or
        // less); 216 taps; 576 taps and 576 pixels (two depth blocks wherever KC is at most
        // 512, the largest any kernel gets); strides and dilation; 32 channels a group; a 1x1
        // layer (its weight gradient reads the input in place); 136 channels (four full tiles
        // and a part); and 2304 pixels x 32 channels, past the transposed size limit.
        // Transposed GEMMs run by blocks of output rows (at most 2^16 pixels x channels each:
        // 25 rows of 40 x 64 channels), so the cases with 64 channels and 38-40 columns split
        // into a full block and a shorter one: "same" padding (one shifted copy per block);
        // stride 2 with dilation 2; a 5x3 kernel with rows but not columns padded; a 1x1
        // layer, whose weight gradient reads the input's blocks in place.
        case(2, 2, 64, (40, 40), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(2, 3, 64, (81, 80), (3, 3), (2, 2), (2, 2), (2, 2), 1),
        case(2, 2, 64, (45, 40), (5, 3), (1, 1), (2, 0), (1, 1), 1),
        case(2, 16, 64, (40, 40), (1, 1), (1, 1), (0, 0), (1, 1), 1),
        case(4, 16, 32, (14, 14), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(2, 24, 32, (6, 7), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(2, 64, 32, (6, 5), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(2, 4, 32, (24, 24), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(3, 4, 32, (9, 8), (3, 2), (2, 1), (1, 0), (1, 2), 1),
        case(2, 8, 64, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), 2),
        case(3, 16, 32, (5, 7), (1, 1), (1, 1), (0, 0), (1, 1), 1),
        case(2, 4, 136, (5, 5), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(2, 2, 32, (48, 48), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ];
    for (i, t) in cases.iter().enumerate() {
        check_case(t, 2000 + 10 * i as u64, View::Contiguous, DType::F64);
        check_case(t, 2000 + 10 * i as u64, View::Contiguous, DType::F32);
    }
}

/// Depthwise layers (one input channel per group) take the direct stencil of
/// `quill-cpu/src/conv/depthwise.rs`: strides 1 and 2 (compiled for them) and 3 (read at run
/// time), mixed per-dim; padding up to past the dilated kernel; dilation; kernels 1x1 to 5x3;
/// channel multipliers 1-3; output rows shorter than, equal to and longer than its 16-column
/// blocks; an input of zero height padded into a non-empty output; a batch large enough for
/// the threaded planes; f32, f64 and strided views.
#[test]
fn depthwise_stencil_matches_direct_convolution() {
    let mut seed = 6000;
    let mut run = |t: Case, views: &[View]| {
        for &view in views {
            for dtype in [DType::F64, DType::F32] {
                check_case(&t, seed, view, dtype);
            }
        }
        seed += 3;
    };
    for s in [(1, 1), (2, 2), (3, 3), (1, 2), (2, 1)] {
        for p in 0..=3 {
            for d in 1..=2 {
                for (k, mult) in [((3, 3), 1), ((1, 1), 2), ((5, 3), 1), ((2, 4), 3)] {
                    let t = case(2, 3, 3 * mult, (9, 8), k, s, (p, p), (d, d), 3);
                    run(t, &[View::Contiguous]);
                }
            }
        }
    }
    for wd in [15, 16, 17, 33] {
        run(
            case(2, 4, 4, (5, wd), (3, 3), (1, 1), (1, 1), (1, 1), 4),
            &[
                View::Contiguous,
                View::FromNhwc,
                View::Flipped,
                View::Offset,
            ],
        );
        run(
            case(1, 2, 4, (6, wd), (3, 3), (2, 2), (1, 1), (1, 1), 2),
            &[View::Contiguous],
        );
    }
    // Zero-height input: every tap reads padding.
    run(
        case(2, 2, 2, (0, 3), (1, 3), (1, 1), (1, 1), (1, 1), 2),
        &[View::Contiguous],
    );
    // Threaded: 16 planes, 8 channels, 9 taps over 32 x 32.
    run(
        case(2, 8, 16, (32, 32), (3, 3), (1, 1), (1, 1), (1, 1), 8),
        &[View::Contiguous, View::FromNhwc],
    );
    run(
        case(4, 16, 16, (20, 18), (3, 3), (2, 2), (1, 1), (1, 1), 16),
        &[View::Contiguous],
    );
}

#[test]
fn non_contiguous_operands() {
    let cases = [
        case(2, 4, 6, (6, 7), (3, 3), (1, 1), (1, 1), (1, 1), 1),
        case(2, 4, 6, (7, 6), (3, 2), (2, 1), (2, 1), (2, 1), 2),
        case(8, 8, 16, (12, 12), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ];
    for (i, t) in cases.iter().enumerate() {
        for view in [View::FromNhwc, View::Flipped, View::Offset] {
            check_case(t, 3000 + 10 * i as u64, view, DType::F64);
        }
    }
    // Half precision computes in f32 and rounds once.
    let t = case(2, 4, 4, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), 2);
    let x = randn(&t.x_shape(), 5).astype(DType::F16).unwrap();
    let w = randn(&t.w_shape(), 6).astype(DType::F16).unwrap();
    let y = Tensor::new(x.clone())
        .conv2d(&Tensor::new(w.clone()), t.spec())
        .unwrap();
    assert_eq!(y.dtype(), DType::F16);
    let zeros = vec![0.0; t.y_shape().iter().product()];
    let (want, _, _) = naive(&t, &f64s(&x), &f64s(&w), &zeros);
    assert_close_values(&f64s(y.array()), &want, 1e-2, "f16");
}

fn leaf(a: NDArray) -> Tensor {
    Tensor::from_array(a, true).unwrap()
}

#[test]
fn gradcheck_in_f64() {
    let cases = [
        case(2, 4, 4, (5, 6), (3, 3), (1, 1), (1, 1), (1, 1), 2),
        case(1, 3, 2, (6, 5), (2, 3), (2, 1), (2, 0), (1, 2), 1),
        case(2, 4, 4, (5, 5), (3, 3), (2, 2), (1, 1), (1, 1), 4),
    ];
    for (i, t) in cases.iter().enumerate() {
        let x = leaf(laid_out(
            &randn(&t.x_shape(), 40 + i as u64),
            View::FromNhwc,
        ));
        let w = leaf(randn(&t.w_shape(), 50 + i as u64));
        let b = leaf(randn(&[t.o], 60 + i as u64));
        let spec = t.spec();
        let rep = gradcheck(
            |v| {
                Conv2d::functional_grouped(
                    &v[0],
                    &v[1],
                    Some(&v[2]),
                    spec.stride,
                    spec.padding,
                    spec.dilation,
                    spec.groups,
                )
            },
            &[x.clone(), w.clone(), b.clone()],
            GradcheckOptions::default(),
        )
        .unwrap();
        assert!(rep.passed, "{t:?}: {rep}");
        assert_eq!(rep.checked, x.numel() + w.numel() + b.numel());
    }
}

/// The first-order gradients `(dx, dw)` of `sum(conv(x, w) * r)`, themselves differentiable.
fn first_order(
    f: impl Fn(&Tensor, &Tensor) -> quill::Result<Tensor>,
    x: &Tensor,
    w: &Tensor,
    r: &Tensor,
) -> (Tensor, Tensor) {
    // gradcheck evaluates under no_grad; the inner gradient needs a recorded graph.
    let _mode = set_grad_enabled(true);
    let y = f(x, w).unwrap();
    let l = y.mul(r).unwrap().sum(None, false).unwrap();
    let opts = BackwardOptions {
        retain_graph: true,
        create_graph: true,
        overwrite_grad: false,
    };
    let g = grad(&l, &[x.clone(), w.clone()], None, opts).unwrap();
    (g[0].clone(), g[1].clone())
}

#[test]
fn second_order_through_create_graph() {
    for (i, t) in [
        case(2, 4, 4, (5, 6), (3, 2), (2, 1), (1, 1), (1, 2), 2),
        case(1, 3, 2, (5, 5), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ]
    .iter()
    .enumerate()
    {
        let spec = t.spec();
        let x = leaf(randn(&t.x_shape(), 70 + i as u64));
        let w = leaf(randn(&t.w_shape(), 80 + i as u64));
        let r = Tensor::new(randn(&t.y_shape(), 90 + i as u64));
        let (rx, rw) = (
            Tensor::new(randn(&t.x_shape(), 91 + i as u64)),
            Tensor::new(randn(&t.w_shape(), 92 + i as u64)),
        );
        // h(x, w) = <dx, rx> + <dw, rw>: its gradient is a second derivative of the conv.
        let h = |f: &dyn Fn(&Tensor, &Tensor) -> quill::Result<Tensor>, x: &Tensor, w: &Tensor| {
            let (dx, dw) = first_order(f, x, w, &r);
            dx.mul(&rx)
                .unwrap()
                .sum(None, false)
                .unwrap()
                .add(&dw.mul(&rw).unwrap().sum(None, false).unwrap())
        };
        let fast = |x: &Tensor, w: &Tensor| x.conv2d(w, spec);
        let composite = |x: &Tensor, w: &Tensor| x.conv2d_composite(w, spec);
        // Against the composite formulation, element by element.
        let opts = BackwardOptions::default();
        let hf = h(&fast, &x, &w).unwrap();
        let gf = grad(&hf, &[x.clone(), w.clone()], None, opts).unwrap();
        let hc = h(&composite, &x, &w).unwrap();
        let gc = grad(&hc, &[x.clone(), w.clone()], None, opts).unwrap();
        assert!((hf.item().unwrap() - hc.item().unwrap()).abs() < 1e-9);
        for (a, b) in gf.iter().zip(&gc) {
            assert_close_values(&f64s(a.array()), &f64s(b.array()), 1e-10, "second order");
        }
        // The mixed derivative is not zero (the check can fail).
        assert!(f64s(gf[1].array()).iter().any(|v| v.abs() > 1e-3));
        // And against central differences of the first-order gradients.
        let rep = gradcheck(
            |v| h(&fast, &v[0], &v[1]),
            &[x.clone(), w.clone()],
            GradcheckOptions::default(),
        )
        .unwrap();
        assert!(rep.passed, "{t:?}: {rep}");
    }
}

#[test]
fn random_shapes_against_direct_loops() {
    let mut rng = Prng::new(7);
    for it in 0..20 {
        let groups = [1, 2, 3][rng.below(3)];
        let mut t = case(
            1 + rng.below(3),
            groups * (1 + rng.below(3)),
            groups * (1 + rng.below(3)),
            (4 + rng.below(6), 4 + rng.below(6)),
            (1 + rng.below(3), 1 + rng.below(3)),
            (1 + rng.below(3), 1 + rng.below(3)),
            (rng.below(3), rng.below(3)),
            (1 + rng.below(2), 1 + rng.below(2)),
            groups,
        );
        // At least one output pixel.
        t.h = t.h.max(t.dil.0 * (t.k.0 - 1) + 1);
        t.w = t.w.max(t.dil.1 * (t.k.1 - 1) + 1);
        check_case(&t, 4000 + it, View::FromNhwc, DType::F64);
    }
}

#[test]
fn grouped_module_fills_parameter_grads() {
    let conv = Conv2d::grouped(4, 8, (3, 2), 1, 1, 1, 2, true, 3).unwrap();
    assert_eq!(conv.weight.shape(), &[8, 2, 3, 2]);
    let bound = 1.0 / ((2 * 3 * 2) as f64).sqrt();
    assert!(f64s(conv.weight.array()).iter().all(|v| v.abs() <= bound));
    let x = Tensor::randn(&[2, 4, 5, 5], 1, DType::F32).unwrap();
    let y = conv.forward(&x).unwrap();
    assert_eq!(y.shape(), &[2, 8, 5, 6]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(conv.weight.grad().unwrap().shape(), &[8, 2, 3, 2]);
    // d(sum y)/d b_o = N * Ho * Wo.
    let gb = f64s(conv.bias.as_ref().unwrap().grad().unwrap().array());
    assert_close_values(&gb, &[60.0; 8], 1e-6, "bias grad");
}

#[test]
fn bad_inputs_are_typed_errors() {
    let x = |s: &[usize]| Tensor::zeros(s, DType::F32).unwrap();
    let spec = |groups| Conv2dSpec {
        groups,
        ..Conv2dSpec::default()
    };
    // Channels not divisible by groups.
    let e = x(&[1, 6, 5, 5])
        .conv2d(&x(&[4, 3, 3, 3]), spec(4))
        .unwrap_err();
    assert!(
        matches!(e, Error::ShapeMismatch { op: "conv2d", .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("groups = 4") && e.to_string().contains("[1, 6, 5, 5]"));
    // Output channels not divisible by groups.
    let e = x(&[1, 4, 5, 5])
        .conv2d(&x(&[3, 2, 3, 3]), spec(2))
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e:?}");
    // The weight's in_c is not C / groups.
    let e = x(&[1, 4, 5, 5])
        .conv2d(&x(&[4, 4, 3, 3]), spec(2))
        .unwrap_err();
    assert!(e.to_string().contains("in_c / groups = 4"), "{e}");
    // groups, stride, dilation of zero.
    assert!(matches!(
        x(&[1, 4, 5, 5])
            .conv2d(&x(&[4, 4, 3, 3]), spec(0))
            .unwrap_err(),
        Error::InvalidArgument { op: "conv2d", .. }
    ));
    let bad = Conv2dSpec {
        stride: (1, 0),
        ..Conv2dSpec::default()
    };
    assert!(x(&[1, 4, 5, 5]).conv2d(&x(&[4, 4, 3, 3]), bad).is_err());
    let bad = Conv2dSpec {
        dilation: (0, 1),
        ..Conv2dSpec::default()
    };
    assert!(x(&[1, 4, 5, 5]).conv2d(&x(&[4, 4, 3, 3]), bad).is_err());
    // Ranks, empty output, dtypes.
    assert!(x(&[4, 5, 5]).conv2d(&x(&[4, 4, 3, 3]), spec(1)).is_err());
    assert!(x(&[1, 4, 5, 5]).conv2d(&x(&[4, 4, 3]), spec(1)).is_err());
    let e = x(&[1, 4, 2, 5])
        .conv2d(&x(&[4, 4, 3, 3]), spec(1))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("empty"));
    let e = x(&[1, 4, 5, 5])
        .conv2d(&Tensor::zeros(&[4, 4, 3, 3], DType::F64).unwrap(), spec(1))
        .unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e:?}");
    let ints = |s: &[usize]| Tensor::zeros(s, DType::I32).unwrap();
    let e = ints(&[1, 4, 5, 5])
        .conv2d(&ints(&[4, 4, 3, 3]), spec(1))
        .unwrap_err();
    assert!(e.to_string().contains("floating-point"), "{e}");
    // The gradient kernels check the gradient's shape.
    let g = NDArray::zeros(&[1, 4, 4, 4], DType::F32).unwrap();
    let w = NDArray::zeros(&[4, 4, 3, 3], DType::F32).unwrap();
    let e = g
        .conv2d_backward_input(&w, &[1, 4, 5, 5], spec(1))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                op: "conv2d_backward_input",
                ..
            }
        ),
        "{e:?}"
    );
    let xa = NDArray::zeros(&[1, 4, 5, 5], DType::F32).unwrap();
    let e = xa
        .conv2d_backward_weight(&g, &[4, 4, 3, 3], spec(1))
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e:?}");
    // The layer: indivisible channels, zero groups.
    assert!(Conv2d::grouped(6, 4, 3, 1, 1, 1, 4, false, 0).is_err());
    assert!(Conv2d::grouped(4, 4, 3, 1, 1, 1, 0, false, 0).is_err());
    // A module's bias of the wrong length.
    let e = Conv2d::functional(
        &x(&[1, 4, 5, 5]),
        &x(&[4, 4, 3, 3]),
        Some(&x(&[3])),
        1,
        0,
        1,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::ShapeMismatch { op: "Conv2d", .. }),
        "{e:?}"
    );
}

/// The transposed weight gradient takes its partial sums from the buffer pool unzeroed and
/// lets each part's first GEMM overwrite them: run twice, the second run's buffers come back
/// holding the first run's sums (at least 256 KiB: 64 x 1152 taps), which must not leak in.
/// A batch of zero samples writes no GEMM at all, and its gradient is zero.
#[test]
fn weight_gradient_ignores_recycled_buffers() {
    let t = case(4, 128, 64, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), 1);
    for dtype in [DType::F64, DType::F32] {
        for round in 0..3 {
            check_case(&t, 7000 + round, View::Contiguous, dtype);
        }
    }
    let empty = case(0, 128, 64, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), 1);
    check_case(&t, 7100, View::Contiguous, DType::F32);
    check_case(&empty, 7101, View::Contiguous, DType::F32);
}
