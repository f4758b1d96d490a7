//! Every `UnaryOp` and every `BinaryOp` of the vocabulary (iterated from `ALL`, so a new op is
//! covered without touching this file) over every dtype, or dtype pair, on every layout of
//! `cases`. An op that rejects a dtype must do so with the same kind of error on every device.
//! The naive reference is `eval_f64` on the inputs converted to the compute dtype, rounded to
//! the result dtype, as NumPy computes.

use crate::cases::{draw, layouts, pairs, Draw, Input, Rhs};
use crate::check::{judge, judge_error, round_to};
use quill::{BinaryOp, DType, Device, NDArray, UnaryOp};
use quill_test_support::{device_test, f64s, Prng};

/// The values drawn for an operand of `op`.
fn draw_for(op: BinaryOp) -> Draw {
    match op {
        BinaryOp::Pow => Draw::Small,
        BinaryOp::Shl | BinaryOp::Shr => Draw::Shift,
        _ => Draw::General,
    }
}

device_test!(every_unary_op_on_every_dtype_and_layout);
fn every_unary_op_on_every_dtype_and_layout(dev: Device) {
    let mut rng = Prng::new(1);
    for op in UnaryOp::ALL {
        for dtype in DType::ALL {
            for case in layouts() {
                let x = Input::new(
                    &case,
                    dtype,
                    &draw(&mut rng, dtype, case.len, Draw::General),
                    dev,
                );
                let ctx = format!("{op:?} on {dtype} {} on {dev}", case.name);
                let got = x.dev.unary(op);
                let result = match op.result_dtype(dtype) {
                    Ok(r) => r,
                    Err(want) => {
                        judge_error(got, &want, || x.cpu.unary(op), &[op.name()], &ctx);
                        continue;
                    }
                };
                let compute = op.compute_dtype(dtype).unwrap();
                let naive = || {
                    x.values()
                        .iter()
                        .map(|&v| round_to(op.eval_f64(round_to(v, compute)), result))
                        .collect()
                };
                // GELU in its far left tail: the tanh form is x * sigmoid(2u), whose relative
                // error is the absolute error of 2u, a few ulps of |2u| ~ 8; the exact form is
                // x * erfc(z) / 2 with z = -x / sqrt 2, where rounding z to f32 moves the result
                // by 2 z^2 half-ulps (16 at x = -4). Both go beyond 1e-6 in f32.
                let scale = if matches!(op, UnaryOp::Gelu | UnaryOp::GeluTanh) {
                    4.0
                } else {
                    1.0
                };
                let got = got.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                judge(
                    dev,
                    &got,
                    result,
                    x.cpu.shape(),
                    naive,
                    || x.cpu.unary(op).unwrap(),
                    scale,
                    false,
                    &ctx,
                );
            }
        }
    }
}

/// `op(x, y)` for NumPy: `eval_f64` in the compute dtype, except where NumPy's integers differ
/// from the i64 / f64 reference: `x % 0` is 0, and a shift is by the compute type's own width
/// (by the width or more, or negative, nothing is left but the sign; otherwise the i64 result
/// wraps to the width).
fn naive_binary(op: BinaryOp, compute: DType, result: DType, x: f64, y: f64) -> f64 {
    let (x, y) = (round_to(x, compute), round_to(y, compute));
    if matches!(op, BinaryOp::Remainder | BinaryOp::FloorDiv) && !compute.is_float() && y == 0.0 {
        return 0.0;
    }
    if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
        let bits = 8.0 * compute.size_in_bytes() as f64;
        if !(0.0..bits).contains(&y) {
            return if op == BinaryOp::Shr && x < 0.0 {
                -1.0
            } else {
                0.0
            };
        }
        // round_to wraps an integral value to the width.
        return round_to(op.eval_f64(x, y) as i64 as f64, compute);
    }
    round_to(op.eval_f64(x, y), result)
}

device_test!(every_binary_op_on_every_dtype_pair_and_layout);
fn every_binary_op_on_every_dtype_pair_and_layout(dev: Device) {
    let mut rng = Prng::new(2);
    let pairs = pairs();
    for (oi, op) in BinaryOp::ALL.into_iter().enumerate() {
        for (ai, da) in DType::ALL.into_iter().enumerate() {
            for (bi, db) in DType::ALL.into_iter().enumerate() {
                // Every layout pair for equal dtypes; one (rotating) pair for each mixed
                // pair, which is about promotion rather than layouts.
                let chosen: Vec<usize> = if da == db {
                    (0..pairs.len()).collect()
                } else {
                    vec![(oi * 64 + ai * 8 + bi) % pairs.len()]
                };
                for k in chosen {
                    let (lc, rc) = &pairs[k];
                    let how = draw_for(op);
                    let x = Input::new(lc, da, &draw(&mut rng, da, lc.len, how), dev);
                    let y = match rc {
                        Rhs::Other(c) => {
                            Some(Input::new(c, db, &draw(&mut rng, db, c.len, how), dev))
                        }
                        Rhs::Itself if da == db => None,
                        Rhs::Itself => continue,
                    };
                    let (ydev, ycpu) = match &y {
                        Some(y) => (&y.dev, &y.cpu),
                        None => (&x.dev, &x.cpu),
                    };
                    let rname = match rc {
                        Rhs::Other(c) => c.name,
                        Rhs::Itself => "itself",
                    };
                    let ctx = format!("{op:?} on {da} {} and {db} {rname} on {dev}", lc.name);
                    let got = x.dev.binary(op, ydev);
                    let result = match op.result_dtype(da, db) {
                        Ok(r) => r,
                        Err(want) => {
                            judge_error(
                                got,
                                &want,
                                || x.cpu.binary(op, ycpu),
                                &[op.name(), da.name()],
                                &ctx,
                            );
                            continue;
                        }
                    };
                    let compute = op.compute_dtype(da, db).unwrap();
                    let got = got.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    let shape = got.shape().to_vec();
                    let naive = || {
                        let xa = f64s(&x.cpu.broadcast_to(&shape).unwrap());
                        let xb = f64s(&ycpu.broadcast_to(&shape).unwrap());
                        xa.iter()
                            .zip(&xb)
                            .map(|(&p, &q)| naive_binary(op, compute, result, p, q))
                            .collect()
                    };
                    judge(
                        dev,
                        &got,
                        result,
                        &shape,
                        naive,
                        || x.cpu.binary(op, ycpu).unwrap(),
                        1.0,
                        false,
                        &ctx,
                    );
                }
            }
        }
    }
}

device_test!(scalar_operands_and_where -> quill::Result<()>);
/// Weak Python scalars on either side, comparisons with a scalar, and `where_` with a
/// rank-0 operand, on the float dtypes and every layout.
fn scalar_operands_and_where(dev: Device) -> quill::Result<()> {
    let mut rng = Prng::new(3);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for case in layouts() {
            let x = Input::new(
                &case,
                dtype,
                &draw(&mut rng, dtype, case.len, Draw::General),
                dev,
            );
            let v = x.values();
            let ctx = |what: &str| format!("{what} on {dtype} {} on {dev}", case.name);
            let shape = x.cpu.shape().to_vec();
            let map = |f: &dyn Fn(f64) -> f64, to: DType| -> Vec<f64> {
                v.iter().map(|&a| round_to(f(a), to)).collect()
            };
            // The scalar is converted to the array's dtype first (weak, NEP 50).
            let (s25, s1) = (round_to(2.5, dtype), round_to(1.0, dtype));
            judge(
                dev,
                &x.dev.mul_scalar(2.5)?,
                dtype,
                &shape,
                || map(&|a| a * s25, dtype),
                || x.cpu.mul_scalar(2.5).unwrap(),
                1.0,
                false,
                &ctx("mul_scalar"),
            );
            judge(
                dev,
                &x.dev.rsub_scalar(1.0)?,
                dtype,
                &shape,
                || map(&|a| s1 - a, dtype),
                || x.cpu.rsub_scalar(1.0).unwrap(),
                1.0,
                false,
                &ctx("rsub_scalar"),
            );
            judge(
                dev,
                &x.dev.gt_scalar(0.0)?,
                DType::Bool,
                &shape,
                || map(&|a| (a > 0.0) as u8 as f64, DType::Bool),
                || x.cpu.gt_scalar(0.0).unwrap(),
                1.0,
                true,
                &ctx("gt_scalar"),
            );
            let c = x.cpu.gt_scalar(0.5)?;
            let z = NDArray::zeros(&[], dtype)?;
            let w = NDArray::where_(&c.to_device(dev)?, &x.dev, &z.to_device(dev)?)?;
            judge(
                dev,
                &w,
                dtype,
                &shape,
                || map(&|a| if a > 0.5 { a } else { 0.0 }, dtype),
                || NDArray::where_(&c, &x.cpu, &z).unwrap(),
                1.0,
                true,
                &ctx("where"),
            );
        }
    }
    Ok(())
}
