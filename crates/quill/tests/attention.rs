//! Fused scaled-dot-product attention against independent references: a naive per-element
//! forward and backward over `Vec<f64>` written here, the composite op (matmul + softmax),
//! central differences (`gradcheck`, f64) of the fused op, its composite and its
//! create_graph backward; non-contiguous q / k / v; bad inputs.

use quill::nn::functional::{attention_composite, scaled_dot_product_attention};
use quill::tensor::{
    grad, gradcheck, no_grad, set_grad_enabled, BackwardOptions, GradcheckOptions, Tensor,
};
use quill::{s, DType, Error, NDArray};
use quill_test_support::Prng;

// ---------------------------------------------------------------------------------------------
// The reference: one (lq, lk) problem per leading index, plain loops in f64.

#[derive(Clone, Copy, Debug)]
struct Case {
    batch: usize,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
}

/// `softmax(scale q k^T + mask)` of problem `b` as rows of f64 (masked entries 0).
fn naive_probs(c: &Case, q: &[f64], k: &[f64], b: usize, causal: bool, scale: f64) -> Vec<f64> {
    let mut p = vec![0.0; c.lq * c.lk];
    for i in 0..c.lq {
        let seen = |j: usize| !causal || j <= i;
        let s: Vec<f64> = (0..c.lk)
            .map(|j| {
                (0..c.d)
                    .map(|t| q[(b * c.lq + i) * c.d + t] * k[(b * c.lk + j) * c.d + t])
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let m = (0..c.lk)
            .filter(|&j| seen(j))
            .map(|j| s[j])
            .fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = (0..c.lk)
            .filter(|&j| seen(j))
            .map(|j| (s[j] - m).exp())
            .sum();
        for j in (0..c.lk).filter(|&j| seen(j)) {
            p[i * c.lk + j] = (s[j] - m).exp() / z;
        }
    }
    p
}

fn naive_forward(c: &Case, q: &[f64], k: &[f64], v: &[f64], causal: bool, scale: f64) -> Vec<f64> {
    let mut out = vec![0.0; c.batch * c.lq * c.dv];
    for b in 0..c.batch {
        let p = naive_probs(c, q, k, b, causal, scale);
        for i in 0..c.lq {
            for e in 0..c.dv {
                out[(b * c.lq + i) * c.dv + e] = (0..c.lk)
                    .map(|j| p[i * c.lk + j] * v[(b * c.lk + j) * c.dv + e])
                    .sum();
            }
        }
    }
    out
}

/// `(dq, dk, dv)` of `sum(out * g)`, by the chain rule through the softmax, in loops.
#[allow(clippy::too_many_arguments)]
fn naive_backward(
    c: &Case,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    g: &[f64],
    causal: bool,
    scale: f64,
) -> [Vec<f64>; 3] {
    let (mut dq, mut dk, mut dv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
    for b in 0..c.batch {
        let p = naive_probs(c, q, k, b, causal, scale);
        for i in 0..c.lq {
            let gi = |e: usize| g[(b * c.lq + i) * c.dv + e];
            // dP_ij = g_i . v_j; dS_ij = P_ij (dP_ij - sum_l P_il dP_il).
            let dp: Vec<f64> = (0..c.lk)
                .map(|j| {
                    (0..c.dv)
                        .map(|e| gi(e) * v[(b * c.lk + j) * c.dv + e])
                        .sum()
                })
                .collect();
            let dot: f64 = (0..c.lk).map(|j| p[i * c.lk + j] * dp[j]).sum();
            for j in 0..c.lk {
                let pij = p[i * c.lk + j];
                for e in 0..c.dv {
                    dv[(b * c.lk + j) * c.dv + e] += pij * gi(e);
                }
                let ds = pij * (dp[j] - dot) * scale;
                for t in 0..c.d {
                    dq[(b * c.lq + i) * c.d + t] += ds * k[(b * c.lk + j) * c.d + t];
                    dk[(b * c.lk + j) * c.d + t] += ds * q[(b * c.lq + i) * c.d + t];
                }
            }
        }
    }
    [dq, dk, dv]
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn randv(rng: &mut Prng, n: usize) -> Vec<f64> {
    (0..n).map(|_| 2.0 * rng.unit() - 1.0).collect()
}

fn vals(a: &NDArray) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn leaf(v: &[f64], shape: &[usize], dtype: DType) -> Tensor {
    let a = NDArray::from_vec(v.to_vec(), shape)
        .unwrap()
        .astype(dtype)
        .unwrap();
    Tensor::from_array(a, dtype.is_float()).unwrap()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: lengths");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{ctx}: element {i}: got {a}, want {b}"
        );
    }
}

fn full_shape(lead: &[usize], a: usize, b: usize) -> Vec<usize> {
    [lead, &[a, b]].concat()
}

/// Runs the fused op and the composite on the case (leading dims `lead`), checks the output
/// and all three gradients against the naive loops.
fn check_case(lead: &[usize], c: Case, causal: bool, dtype: DType, seed: u64) {
    let mut rng = Prng::new(seed);
    let (qv, kv, vv) = (
        randv(&mut rng, c.batch * c.lq * c.d),
        randv(&mut rng, c.batch * c.lk * c.d),
        randv(&mut rng, c.batch * c.lk * c.dv),
    );
    let gv = randv(&mut rng, c.batch * c.lq * c.dv);
    let scale = if seed.is_multiple_of(2) {
        1.0 / (c.d as f64).sqrt()
    } else {
        0.7
    };
    let arg = (seed % 2 == 1).then_some(scale);
    let want = naive_forward(&c, &qv, &kv, &vv, causal, scale);
    let [wq, wk, wv] = naive_backward(&c, &qv, &kv, &vv, &gv, causal, scale);
    let tol = if dtype == DType::F64 { 1e-10 } else { 2e-5 };
    let ctx = format!("{lead:?} {c:?} causal {causal} {dtype}");
    for fused in [true, false] {
        let q = leaf(&qv, &full_shape(lead, c.lq, c.d), dtype);
        let k = leaf(&kv, &full_shape(lead, c.lk, c.d), dtype);
        let v = leaf(&vv, &full_shape(lead, c.lk, c.dv), dtype);
        let out = if fused {
            scaled_dot_product_attention(&q, &k, &v, causal, arg).unwrap()
        } else {
            attention_composite(&q, &k, &v, causal, arg).unwrap()
        };
        assert_eq!(out.shape(), full_shape(lead, c.lq, c.dv).as_slice());
        assert_eq!(out.dtype(), dtype);
        let ctx = format!("{ctx} fused {fused}");
        assert_close(&vals(out.array()), &want, tol, &format!("{ctx}: out"));
        let g = leaf(&gv, out.shape(), dtype);
        out.backward_with(&g).unwrap();
        for (t, w, name) in [(&q, &wq, "dq"), (&k, &wk, "dk"), (&v, &wv, "dv")] {
            let got = vals(t.grad().unwrap().array());
            assert_close(&got, w, tol, &format!("{ctx}: {name}"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forward and backward against the loops

#[test]
fn matches_naive_loops_and_composite() {
    let cases: &[(&[usize], Case)] = &[
        (
            &[2, 3],
            Case {
                batch: 6,
                lq: 5,
                lk: 7,
                d: 4,
                dv: 3,
            },
        ),
        (
            &[1],
            Case {
                batch: 1,
                lq: 9,
                lk: 4,
                d: 3,
                dv: 6,
            },
        ),
        // Not multiples of the 64-row blocks or 128-key tiles; Lq > Lk and Lq < Lk.
        (
            &[2],
            Case {
                batch: 2,
                lq: 130,
                lk: 70,
                d: 5,
                dv: 7,
            },
        ),
        (
            &[1],
            Case {
                batch: 1,
                lq: 67,
                lk: 260,
                d: 8,
                dv: 2,
            },
        ),
        // Size-1 dims everywhere, and rank 2 (no leading dims).
        (
            &[],
            Case {
                batch: 1,
                lq: 1,
                lk: 1,
                d: 1,
                dv: 1,
            },
        ),
        (
            &[1, 1],
            Case {
                batch: 1,
                lq: 3,
                lk: 1,
                d: 2,
                dv: 1,
            },
        ),
        (
            &[3],
            Case {
                batch: 3,
                lq: 1,
                lk: 5,
                d: 1,
                dv: 4,
            },
        ),
    ];
    let mut seed = 10;
    for &(lead, c) in cases {
        for causal in [false, true] {
            for dtype in [DType::F64, DType::F32] {
                check_case(lead, c, causal, dtype, seed);
                seed += 1;
            }
        }
    }
}

#[test]
fn large_enough_to_use_threads() {
    // 8 heads of 200 x 300: above the kernel's grain, so blocks and heads run in parallel.
    let c = Case {
        batch: 8,
        lq: 200,
        lk: 300,
        d: 16,
        dv: 8,
    };
    check_case(&[2, 4], c, true, DType::F64, 3);
    check_case(&[2, 4], c, false, DType::F32, 4);
}

#[test]
fn empty_key_sequence_gives_zeros_and_empty_batch_is_empty() {
    let q = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2], DType::F64);
    let k = Tensor::new(NDArray::zeros(&[0, 2], DType::F64).unwrap());
    let v = Tensor::new(NDArray::zeros(&[0, 3], DType::F64).unwrap());
    let out = scaled_dot_product_attention(&q, &k, &v, false, None).unwrap();
    assert_eq!(out.shape(), &[2, 3]);
    assert_eq!(vals(out.array()), vec![0.0; 6]);
    out.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(vals(q.grad().unwrap().array()), vec![0.0; 4]);

    let e = |s: &[usize]| Tensor::new(NDArray::zeros(s, DType::F32).unwrap());
    let out =
        scaled_dot_product_attention(&e(&[0, 3, 2]), &e(&[0, 4, 2]), &e(&[0, 4, 5]), true, None)
            .unwrap();
    assert_eq!(out.shape(), &[0, 3, 5]);
}

#[test]
fn non_contiguous_inputs() {
    // q, k, v made as (batch, seq, heads, dim) and permuted to (batch, heads, seq, dim); k a
    // negative-step slice over the sequence; v an offset, stepped view of a larger array.
    let (b, h, lq, lk, d, dv) = (2, 3, 6, 5, 4, 3);
    let mut rng = Prng::new(77);
    let qraw = randv(&mut rng, b * lq * h * d);
    let kraw = randv(&mut rng, b * (2 * lk) * h * d);
    let vraw = randv(&mut rng, (b + 1) * h * (lk + 2) * (2 * dv));
    let gv = randv(&mut rng, b * h * lq * dv);
    for causal in [false, true] {
        let q = leaf(&qraw, &[b, lq, h, d], DType::F64);
        let k0 = leaf(&kraw, &[b, 2 * lk, h, d], DType::F64);
        let v0 = leaf(&vraw, &[b + 1, h, lk + 2, 2 * dv], DType::F64);
        let qp = q.permute(&[0, 2, 1, 3]).unwrap();
        let kp = k0
            .permute(&[0, 2, 1, 3])
            .unwrap()
            .slice(&s![.., .., ..;-2, ..])
            .unwrap();
        let vp = v0.slice(&s![1.., .., 2.., ..;2]).unwrap();
        assert!(!qp.array().is_contiguous() && kp.array().strides()[2] < 0);
        assert!(vp.array().offset() > 0 && !vp.array().is_contiguous());
        assert_eq!(kp.shape(), &[b, h, lk, d]);
        assert_eq!(vp.shape(), &[b, h, lk, dv]);
        let c = Case {
            batch: b * h,
            lq,
            lk,
            d,
            dv,
        };
        let (qc, kc, vc) = (
            vals(&qp.array().compact().unwrap()),
            vals(&kp.array().compact().unwrap()),
            vals(&vp.array().compact().unwrap()),
        );
        let scale = 1.0 / (d as f64).sqrt();
        let want = naive_forward(&c, &qc, &kc, &vc, causal, scale);
        let [wq, wk, wv] = naive_backward(&c, &qc, &kc, &vc, &gv, causal, scale);
        let out = qp
            .scaled_dot_product_attention(&kp, &vp, causal, None)
            .unwrap();
        assert_close(&vals(out.array()), &want, 1e-10, "non-contiguous out");
        // The seed gradient itself a permuted view of a (batch, seq, heads, dv) array.
        let mut graw = vec![0.0; gv.len()];
        for (n, x) in gv.iter().enumerate() {
            let (e, i, hh, bb) = (n % dv, n / dv % lq, n / (dv * lq) % h, n / (dv * lq * h));
            graw[((bb * lq + i) * h + hh) * dv + e] = *x;
        }
        let g = Tensor::new(NDArray::from_vec(graw, &[b, lq, h, dv]).unwrap())
            .permute(&[0, 2, 1, 3])
            .unwrap();
        out.backward_with(&g).unwrap();
        let dq = q.grad().unwrap().permute(&[0, 2, 1, 3]).unwrap();
        assert_close(&vals(&dq.array().compact().unwrap()), &wq, 1e-10, "dq");
        let dk = k0
            .grad()
            .unwrap()
            .permute(&[0, 2, 1, 3])
            .unwrap()
            .slice(&s![.., .., ..;-2, ..])
            .unwrap();
        assert_close(&vals(&dk.array().compact().unwrap()), &wk, 1e-10, "dk");
        // Positions the view skipped get zero gradient.
        let skipped = k0.grad().unwrap().slice(&s![.., -2..;-2, .., ..]).unwrap();
        assert!(vals(&skipped.array().compact().unwrap())
            .iter()
            .all(|&x| x == 0.0));
        let dvg = v0.grad().unwrap().slice(&s![1.., .., 2.., ..;2]).unwrap();
        assert_close(&vals(&dvg.array().compact().unwrap()), &wv, 1e-10, "dv");
    }
}

#[test]
fn broadcast_grad_seed_and_f16() {
    // sum() hands the op a stride-0 gradient; f16 inputs compute in f32 and round once.
    let mut rng = Prng::new(5);
    let c = Case {
        batch: 2,
        lq: 4,
        lk: 6,
        d: 3,
        dv: 2,
    };
    let (qv, kv, vv) = (
        randv(&mut rng, 24),
        randv(&mut rng, 36),
        randv(&mut rng, 24),
    );
    let q = leaf(&qv, &[2, 4, 3], DType::F64);
    let k = leaf(&kv, &[2, 6, 3], DType::F64);
    let v = leaf(&vv, &[2, 6, 2], DType::F64);
    let out = q.scaled_dot_product_attention(&k, &v, true, None).unwrap();
    out.sum(None, false).unwrap().backward().unwrap();
    let s = 1.0 / 3f64.sqrt();
    let [wq, _, wv] = naive_backward(&c, &qv, &kv, &vv, &[1.0; 16], true, s);
    assert_close(
        &vals(q.grad().unwrap().array()),
        &wq,
        1e-10,
        "dq (sum seed)",
    );
    assert_close(
        &vals(v.grad().unwrap().array()),
        &wv,
        1e-10,
        "dv (sum seed)",
    );

    let h = |x: &[f64], sh: &[usize]| leaf(x, sh, DType::F16);
    let out = h(&qv, &[2, 4, 3])
        .scaled_dot_product_attention(&h(&kv, &[2, 6, 3]), &h(&vv, &[2, 6, 2]), false, None)
        .unwrap();
    assert_eq!(out.dtype(), DType::F16);
    let r = |x: &[f64]| {
        vals(
            &NDArray::from_vec(x.to_vec(), &[x.len()])
                .unwrap()
                .astype(DType::F16)
                .unwrap(),
        )
    };
    let want = naive_forward(&c, &r(&qv), &r(&kv), &r(&vv), false, s);
    assert_close(&vals(out.array()), &want, 2e-3, "f16 out");
}

// ---------------------------------------------------------------------------------------------
// Gradient checks

fn rand_leaf(rng: &mut Prng, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    leaf(&randv(rng, n), shape, DType::F64)
}

#[test]
fn gradcheck_fused_and_composite() {
    let mut rng = Prng::new(9);
    let opts = GradcheckOptions::default();
    for causal in [false, true] {
        let q = rand_leaf(&mut rng, &[2, 5, 3]);
        let k = rand_leaf(&mut rng, &[2, 7, 3]);
        let v = rand_leaf(&mut rng, &[2, 7, 4]);
        let ins = [q, k, v];
        let fused = gradcheck(
            |t| t[0].scaled_dot_product_attention(&t[1], &t[2], causal, Some(0.8)),
            &ins,
            opts,
        )
        .unwrap();
        assert!(fused.passed, "fused causal {causal}: {fused}");
        assert_eq!(fused.checked, 30 + 42 + 56);
        let comp = gradcheck(
            |t| t[0].attention_composite(&t[1], &t[2], causal, None),
            &ins,
            opts,
        )
        .unwrap();
        assert!(comp.passed, "composite causal {causal}: {comp}");
    }
}

#[test]
fn second_order_through_create_graph() {
    // f(q, k, v) = d/dq sum(attn(q, k, v) * w): the create_graph backward of the fused op
    // must be differentiable again; checked by central differences of that gradient.
    let mut rng = Prng::new(21);
    let w = Tensor::new(NDArray::from_vec(randv(&mut rng, 2 * 4 * 3), &[2, 4, 3]).unwrap());
    let opts = BackwardOptions {
        retain_graph: false,
        create_graph: true,
        overwrite_grad: false,
    };
    for causal in [false, true] {
        let ins = [
            rand_leaf(&mut rng, &[2, 4, 3]),
            rand_leaf(&mut rng, &[2, 5, 3]),
            rand_leaf(&mut rng, &[2, 5, 3]),
        ];
        let f = |t: &[Tensor]| {
            // gradcheck's central differences run under no_grad; this f needs the graph.
            let _mode = set_grad_enabled(true);
            let out = t[0].scaled_dot_product_attention(&t[1], &t[2], causal, None)?;
            let l = out.mul(&w)?.sum(None, false)?;
            let g = grad(&l, &t[..2], None, opts)?;
            g[0].add(&g[1].sum(Some(&[1]), true)?)
        };
        let r = gradcheck(f, &ins, GradcheckOptions::default()).unwrap();
        assert!(r.passed, "second order causal {causal}: {r}");

        // The same second-order gradient as the composite op's (independent primitives).
        let second = |fused: bool| {
            let t: Vec<Tensor> = ins
                .iter()
                .map(|x| Tensor::from_array(x.array().deep_copy().unwrap(), true).unwrap())
                .collect();
            let out = if fused {
                t[0].scaled_dot_product_attention(&t[1], &t[2], causal, None)
            } else {
                t[0].attention_composite(&t[1], &t[2], causal, None)
            }
            .unwrap();
            let l = out.mul(&w).unwrap().sum(None, false).unwrap();
            let g = grad(&l, &t[..1], None, opts).unwrap();
            g[0].square()
                .unwrap()
                .sum(None, false)
                .unwrap()
                .backward()
                .unwrap();
            t.iter()
                .map(|x| vals(x.grad().unwrap().array()))
                .collect::<Vec<_>>()
        };
        let (a, b) = (second(true), second(false));
        for i in 0..3 {
            assert_close(&a[i], &b[i], 1e-10, &format!("second order input {i}"));
        }
    }
}

#[test]
fn no_grad_keeps_no_graph() {
    let mut rng = Prng::new(1);
    let q = rand_leaf(&mut rng, &[3, 2]);
    let _g = no_grad();
    let out = q.scaled_dot_product_attention(&q, &q, false, None).unwrap();
    assert!(!out.requires_grad());
}

// ---------------------------------------------------------------------------------------------
// Bad inputs

#[test]
fn bad_inputs_are_typed_errors() {
    let t = |s: &[usize], dt: DType| Tensor::new(NDArray::zeros(s, dt).unwrap());
    let f = DType::F32;
    let sdpa =
        |q: &Tensor, k: &Tensor, v: &Tensor| q.scaled_dot_product_attention(k, v, false, None);
    // Mismatched D.
    let e = sdpa(&t(&[2, 3, 4], f), &t(&[2, 5, 3], f), &t(&[2, 5, 4], f)).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert!(
        e.to_string().contains("[2, 3, 4]") && e.to_string().contains("last dim"),
        "{e}"
    );
    // k and v sequence lengths differ.
    let e = sdpa(&t(&[2, 3, 4], f), &t(&[2, 5, 4], f), &t(&[2, 6, 4], f)).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    // Leading dims differ (no broadcasting).
    let e = sdpa(&t(&[2, 3, 4], f), &t(&[1, 5, 4], f), &t(&[1, 5, 4], f)).unwrap_err();
    assert!(e.to_string().contains("leading"), "{e}");
    // Rank < 2, and unequal ranks.
    let e = sdpa(&t(&[4], f), &t(&[4], f), &t(&[4], f)).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("rank"),
        "{e}"
    );
    let e = sdpa(&t(&[1, 3, 4], f), &t(&[5, 4], f), &t(&[5, 4], f)).unwrap_err();
    assert!(e.to_string().contains("rank"), "{e}");
    // dtype mismatch, and integers.
    let e = sdpa(&t(&[3, 4], f), &t(&[5, 4], DType::F64), &t(&[5, 4], f)).unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    let i = DType::I32;
    let e = sdpa(&t(&[3, 4], i), &t(&[5, 4], i), &t(&[5, 4], i)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    // A non-finite scale.
    let e = t(&[3, 4], f)
        .scaled_dot_product_attention(&t(&[5, 4], f), &t(&[5, 4], f), false, Some(f64::NAN))
        .unwrap_err();
    assert!(e.to_string().contains("scale"), "{e}");
    // The composite names its shapes too.
    let e = t(&[3, 4], f)
        .attention_composite(&t(&[5, 3], f), &t(&[5, 4], f), false, None)
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    // The array-level backward checks the saved shapes.
    let (q, k, v) = (t(&[3, 4], f), t(&[5, 4], f), t(&[5, 2], f));
    let z = |s: &[usize]| NDArray::zeros(s, f).unwrap();
    let e = q
        .array()
        .scaled_dot_product_attention_backward(
            k.array(),
            v.array(),
            &z(&[3, 2]),
            &z(&[4]),
            &z(&[3, 2]),
            false,
            None,
        )
        .unwrap_err();
    assert!(e.to_string().contains("lse"), "{e}");
}
