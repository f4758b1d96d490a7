//! Every differentiable op against central differences (`gradcheck`, f64), on inputs with
//! random non-contiguous layouts (permuted, gapped, reversed, offset), from rank 0 to rank 8.

// `&[x.clone()]` keeps one-input cases shaped like the multi-input ones.
#![allow(clippy::cloned_ref_to_slice_refs)]

use quill::tensor::{gradcheck, GradcheckOptions, Tensor};
use quill::{s, BinaryOp, NDArray, Result, UnaryOp};
use quill_core::ops::BinaryKind;
use quill_test_support::{strided_from, Prng};

/// A leaf requiring grad with values uniform in `[lo, hi)` and a random strided layout.
fn input(rng: &mut Prng, shape: &[usize], lo: f64, hi: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let vals: Vec<f64> = (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect();
    let a = strided_from(rng, &vals, shape, f64::NAN);
    Tensor::from_array(a, true).unwrap()
}

#[track_caller]
fn check(name: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    let rep = gradcheck(f, inputs, GradcheckOptions::default()).unwrap();
    assert!(rep.passed, "{name}: {rep}");
    assert!(
        rep.checked > 0 || inputs.iter().all(|x| x.numel() == 0),
        "{name}"
    );
}

#[test]
fn unary_ops() {
    let mut rng = Prng::new(1);
    use UnaryOp::*;
    // (op, domain) chosen away from poles, kinks and the boundaries of each op's domain.
    let cases: &[(UnaryOp, f64, f64)] = &[
        (Neg, -2.0, 2.0),
        (Abs, 0.1, 2.0),
        (Exp, -2.0, 2.0),
        (Exp2, -2.0, 2.0),
        (Log, 0.2, 3.0),
        (Log2, 0.2, 3.0),
        (Log10, 0.2, 3.0),
        (Log1p, -0.5, 3.0),
        (Expm1, -2.0, 2.0),
        (Sqrt, 0.2, 3.0),
        (Rsqrt, 0.2, 3.0),
        (Square, -2.0, 2.0),
        (Reciprocal, 0.3, 3.0),
        (Sin, -3.0, 3.0),
        (Cos, -3.0, 3.0),
        (Tan, -1.2, 1.2),
        (Tanh, -3.0, 3.0),
        (Asin, -0.9, 0.9),
        (Acos, -0.9, 0.9),
        (Atan, -3.0, 3.0),
        (Sinh, -2.0, 2.0),
        (Cosh, -2.0, 2.0),
        (Asinh, -3.0, 3.0),
        (Acosh, 1.2, 3.0),
        (Atanh, -0.9, 0.9),
        (Sigmoid, -4.0, 4.0),
        (Relu, 0.05, 2.0),
        (Gelu, -3.0, 3.0),
        (GeluTanh, -3.0, 3.0),
        (Erf, -2.0, 2.0),
        (Floor, 0.1, 0.9),
        (Ceil, 0.1, 0.9),
        (Round, 0.1, 0.4),
        (Trunc, 0.1, 0.9),
        (Sign, 0.1, 0.9),
    ];
    for &(op, lo, hi) in cases {
        for shape in [&[3, 4][..], &[2, 3, 2], &[], &[5]] {
            let x = input(&mut rng, shape, lo, hi);
            check(&format!("{op:?} {shape:?}"), |t| t[0].unary(op), &[x]);
        }
    }
    // Every op of the table with a gradient has its case above.
    for op in UnaryOp::ALL.into_iter().filter(|op| !op.is_predicate()) {
        assert!(
            cases.iter().any(|c| c.0 == op),
            "{op:?} has no gradient check case"
        );
    }
    // relu on the negative side, and abs there too.
    let x = input(&mut rng, &[4, 3], -2.0, -0.05);
    check("relu<0", |t| t[0].relu(), &[x.clone()]);
    check("abs<0", |t| t[0].abs(), &[x]);
}

#[test]
fn binary_ops_with_broadcasting() {
    let mut rng = Prng::new(2);
    use BinaryOp::*;
    let shapes: &[(&[usize], &[usize])] = &[
        (&[3, 4], &[3, 4]),
        (&[2, 1, 4], &[3, 1]),
        (&[4], &[2, 3, 4]),
        (&[], &[2, 3]),
        (&[2, 3], &[]),
    ];
    // Every op of the table with a float result is differentiable: the list is the table's, so
    // a new one is checked without touching this test (comparisons, logical, bitwise and shift
    // ops have no gradient).
    let differentiable: Vec<BinaryOp> = BinaryOp::ALL
        .into_iter()
        .filter(|op| matches!(op.kind(), BinaryKind::Arith | BinaryKind::Float))
        .collect();
    assert!(differentiable.len() >= 10, "{differentiable:?}");
    for op in differentiable {
        for &(sa, sb) in shapes {
            let (lo, hi) = if matches!(op, Pow | Div | Remainder | FloorDiv) {
                (0.5, 2.0)
            } else {
                (-2.0, 2.0)
            };
            let a = input(&mut rng, sa, lo, hi);
            let b = input(&mut rng, sb, lo, hi);
            check(
                &format!("{op:?} {sa:?} {sb:?}"),
                |t| t[0].binary(op, &t[1]),
                &[a, b],
            );
        }
    }
}

#[test]
fn scalar_forms_where_clip_astype() {
    let mut rng = Prng::new(3);
    let x = input(&mut rng, &[3, 5], 0.5, 2.0);
    check("add_scalar", |t| t[0].add_scalar(1.5), &[x.clone()]);
    check("rsub_scalar", |t| t[0].rsub_scalar(1.5), &[x.clone()]);
    check("rdiv_scalar", |t| t[0].rdiv_scalar(2.0), &[x.clone()]);
    check("pow_scalar", |t| t[0].pow_scalar(2.5), &[x.clone()]);
    check("rpow_scalar", |t| t[0].rpow_scalar(1.7), &[x.clone()]);
    check("clip", |t| t[0].clip(0.9, 1.6), &[x.clone()]);
    let y = input(&mut rng, &[5], -1.0, 1.0);
    let cond = NDArray::from_vec(
        vec![
            true, false, true, true, false, false, true, false, true, true, false, true, false,
            true, false,
        ],
        &[3, 5],
    )
    .unwrap();
    check(
        "where",
        |t| Tensor::where_(&cond, &t[0], &t[1]),
        &[x.clone(), y],
    );
    // Central differences cannot see through an f32 rounding: check the cast by hand.
    let c = x
        .astype(quill::DType::F32)
        .unwrap()
        .mul_scalar(3.0)
        .unwrap();
    c.sum(None, false).unwrap().backward().unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.dtype(), quill::DType::F64);
    assert!(g.to_vec::<f64>().unwrap().iter().all(|&v| v == 3.0));
}

#[test]
fn reductions() {
    let mut rng = Prng::new(4);
    let axes_cases: &[Option<&[isize]>] =
        &[None, Some(&[0]), Some(&[-1]), Some(&[0, 2]), Some(&[])];
    for &axes in axes_cases {
        for keep in [false, true] {
            let x = input(&mut rng, &[3, 4, 2], 0.5, 1.5);
            let ctx = format!("{axes:?} keep={keep}");
            check(
                &format!("sum {ctx}"),
                |t| t[0].sum(axes, keep),
                &[x.clone()],
            );
            check(
                &format!("mean {ctx}"),
                |t| t[0].mean(axes, keep),
                &[x.clone()],
            );
            check(
                &format!("prod {ctx}"),
                |t| t[0].prod(axes, keep),
                &[x.clone()],
            );
            check(
                &format!("max {ctx}"),
                |t| t[0].max(axes, keep),
                &[x.clone()],
            );
            check(
                &format!("min {ctx}"),
                |t| t[0].min(axes, keep),
                &[x.clone()],
            );
            check(
                &format!("logsumexp {ctx}"),
                |t| t[0].logsumexp(axes, keep),
                &[x.clone()],
            );
            if axes != Some(&[]) {
                check(
                    &format!("var {ctx}"),
                    |t| t[0].var(axes, 1, keep),
                    &[x.clone()],
                );
                check(
                    &format!("std {ctx}"),
                    |t| t[0].std(axes, 0, keep),
                    &[x.clone()],
                );
            }
        }
    }
    // prod with zeros: one zero per row, two zeros in a row, none.
    let x = Tensor::from_array(
        NDArray::from_vec(vec![0.0, 2.0, 3.0, 0.0, 0.0, 5.0, 1.5, 2.0, 0.5], &[3, 3]).unwrap(),
        true,
    )
    .unwrap();
    check("prod with zeros", |t| t[0].prod(Some(&[1]), false), &[x]);
}

#[test]
fn max_min_ties_share_the_gradient() {
    // PyTorch: amax / amin spread the gradient evenly over tied extremes.
    let x = Tensor::from_array(
        NDArray::from_vec(vec![1.0, 3.0, 3.0, 2.0, -1.0, -1.0, -1.0, 0.5], &[2, 4]).unwrap(),
        true,
    )
    .unwrap();
    x.max(Some(&[1]), false)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>().unwrap(),
        vec![0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 1.0]
    );
    x.zero_grad();
    x.min(None, false).unwrap().backward().unwrap();
    let third = 1.0 / 3.0;
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>().unwrap(),
        vec![0.0, 0.0, 0.0, 0.0, third, third, third, 0.0]
    );
    // maximum: ties split half and half.
    let a =
        Tensor::from_array(NDArray::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap(), true).unwrap();
    let b =
        Tensor::from_array(NDArray::from_vec(vec![1.0, 5.0, 0.0], &[3]).unwrap(), true).unwrap();
    a.maximum(&b)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        a.grad().unwrap().to_vec::<f64>().unwrap(),
        vec![0.5, 0.0, 1.0]
    );
    assert_eq!(
        b.grad().unwrap().to_vec::<f64>().unwrap(),
        vec![0.5, 1.0, 0.0]
    );
}

#[test]
fn movement_ops() {
    let mut rng = Prng::new(5);
    let x = input(&mut rng, &[2, 3, 4], -1.0, 1.0);
    check("reshape", |t| t[0].reshape(&[4, -1]), &[x.clone()]);
    check("flatten", |t| t[0].flatten(1, -1), &[x.clone()]);
    check("permute", |t| t[0].permute(&[2, 0, 1]), &[x.clone()]);
    check("transpose", |t| t[0].transpose(0, -1), &[x.clone()]);
    check("flip", |t| t[0].flip(&[0, 2]), &[x.clone()]);
    check(
        "slice steps",
        |t| t[0].slice(&s![.., ..;-2, 1..;2]),
        &[x.clone()],
    );
    check("slice index", |t| t[0].slice(&s![1, .., -1]), &[x.clone()]);
    check(
        "unsqueeze",
        |t| t[0].unsqueeze(1)?.unsqueeze(-1),
        &[x.clone()],
    );
    let y = input(&mut rng, &[3, 1, 4], -1.0, 1.0);
    check("squeeze", |t| t[0].squeeze(&[1]), &[y.clone()]);
    check(
        "broadcast_to",
        |t| t[0].broadcast_to(&[2, 3, 5, 4]),
        &[y.clone()],
    );
    let z = input(&mut rng, &[2, 2, 4], -1.0, 1.0);
    check(
        "concat",
        |t| Tensor::concat(&[&t[0], &t[1]], 1),
        &[x.clone(), z.clone()],
    );
    let w = input(&mut rng, &[2, 3, 4], -1.0, 1.0);
    check(
        "stack",
        |t| Tensor::stack(&[&t[0], &t[1]], -1),
        &[x.clone(), w],
    );
    check(
        "split",
        |t| {
            let p = t[0].split(&[1, 3], 2)?;
            p[0].mul_scalar(2.0)?
                .sum(Some(&[2]), false)?
                .add(&p[1].sum(Some(&[2]), false)?)
        },
        &[x.clone()],
    );
    let v = input(&mut rng, &[3, 2], -1.0, 1.0);
    check(
        "slice_assign",
        |t| t[0].slice_assign(&s![0, .., 1..;2], &t[1]),
        &[x.clone(), v],
    );
    let vb = input(&mut rng, &[3], -1.0, 1.0);
    check(
        "slice_assign broadcast",
        |t| t[0].slice_assign(&s![.., ..;-1, 0], &t[1].unsqueeze(0)?),
        &[x, vb],
    );
}

#[test]
fn high_rank_and_empty() {
    let mut rng = Prng::new(6);
    let shape8 = [2, 1, 2, 1, 2, 1, 2, 1];
    let x = input(&mut rng, &shape8, -1.0, 1.0);
    check(
        "rank 8 tanh * sum",
        |t| t[0].tanh()?.sum(Some(&[0, 4, -2]), true),
        &[x.clone()],
    );
    check(
        "rank 8 permute",
        |t| t[0].permute(&[7, 6, 5, 4, 3, 2, 1, 0])?.exp(),
        &[x],
    );
    let s = input(&mut rng, &[], -1.0, 1.0);
    check("rank 0", |t| t[0].mul(&t[0])?.sin(), &[s]);
    // A size-0 input: the backward runs and gives an empty gradient.
    let e = Tensor::from_array(NDArray::zeros(&[0, 3], quill::DType::F64).unwrap(), true).unwrap();
    e.exp()
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(e.grad().unwrap().shape(), &[0, 3]);
}

#[test]
fn matmul_all_forms() {
    let mut rng = Prng::new(7);
    let forms: &[(&[usize], &[usize])] = &[
        (&[3, 4], &[4, 5]),
        (&[4], &[4, 5]),
        (&[3, 4], &[4]),
        (&[4], &[4]),
        (&[2, 3, 4], &[4, 5]),
        // A matrix shared by a batch (a Linear weight): its gradient is one stacked product.
        (&[2, 3, 5, 4], &[4, 6]),
        (&[1, 3, 4], &[4, 5]),
        (&[2, 1, 3, 4], &[3, 4, 2]),
        (&[4], &[2, 4, 3]),
        (&[2, 3, 4], &[4]),
    ];
    for &(sa, sb) in forms {
        let a = input(&mut rng, sa, -1.0, 1.0);
        let b = input(&mut rng, sb, -1.0, 1.0);
        check(
            &format!("matmul {sa:?} {sb:?}"),
            |t| t[0].matmul(&t[1]),
            &[a, b],
        );
    }
}

#[test]
fn softmax_and_indexing() {
    let mut rng = Prng::new(8);
    let x = input(&mut rng, &[3, 5], -2.0, 2.0);
    check("softmax", |t| t[0].softmax(-1), &[x.clone()]);
    check("log_softmax", |t| t[0].log_softmax(0), &[x.clone()]);
    let idx = NDArray::from_vec(vec![4i64, 0, 0, 2, 1, 3], &[3, 2]).unwrap();
    check("gather", |t| t[0].gather(1, &idx), &[x.clone()]);
    let sel = NDArray::from_vec(vec![2i64, 0, 2, -1], &[4]).unwrap();
    check("index_select", |t| t[0].index_select(1, &sel), &[x.clone()]);
    check(
        "index_select axis 0",
        |t| t[0].index_select(0, &sel.slice(&s![..3]).unwrap()),
        &[x.clone()],
    );
    let along = NDArray::from_vec(vec![1i64, 4, 0], &[3, 1]).unwrap();
    check(
        "take_along_axis",
        |t| t[0].take_along_axis(&along, 1),
        &[x.clone()],
    );
    let src = input(&mut rng, &[3, 2], -1.0, 1.0);
    check(
        "scatter_add",
        |t| t[0].scatter_add(1, &idx, &t[1]),
        &[x, src],
    );
}

#[test]
fn gradcheck_reports_a_wrong_gradient() {
    // A function whose "gradient" is wrong by construction: detach one factor.
    let mut rng = Prng::new(9);
    let x = input(&mut rng, &[4], 0.5, 1.5);
    let rep = gradcheck(
        |t| t[0].mul(&t[0].detach()),
        &[x],
        GradcheckOptions::default(),
    )
    .unwrap();
    assert!(!rep.passed);
    let msg = rep.check().unwrap_err().to_string();
    assert!(msg.contains("gradcheck") && msg.contains("worst"), "{msg}");
    // f32 inputs are refused: differences in f32 are too coarse.
    let y = Tensor::from_array(NDArray::ones(&[2], quill::DType::F32).unwrap(), true).unwrap();
    let e = gradcheck(|t| t[0].exp(), &[y], GradcheckOptions::default()).unwrap_err();
    assert!(e.to_string().contains("f64"), "{e}");
}
