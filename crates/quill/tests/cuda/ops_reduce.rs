//! Every `ReduceOp` over every dtype and layout of `cases`, over no axis list (all), each single
//! axis, a first-and-last pair (for the ops that take several) and with and without keepdims.
//! Values are drawn so that every result is exact in every summation order (`Draw::Exact`,
//! `Draw::Pow2`), so the devices must agree exactly. The naive reference walks each output's
//! elements in C order of the reduced axes. Ops without an identity must refuse an empty
//! reduction with the same kind of error everywhere.

use crate::cases::{draw, layouts, Draw, Input};
use crate::check::{judge, judge_error, round_to};
use quill::{DType, Device, Error, NDArray, ReduceOp, Result};
use quill_test_support::{device_test, unravel, Prng};

/// Every `ReduceOp`; `index_of`'s match stops compiling when a variant is added, and
/// `the_reduce_list_is_complete` checks `ALL` against it.
pub const REDUCE_OPS: [ReduceOp; 8] = ReduceOp::ALL;

fn index_of(op: ReduceOp) -> usize {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
        ReduceOp::ArgMax => 4,
        ReduceOp::ArgMin => 5,
        ReduceOp::Any => 6,
        ReduceOp::All => 7,
    }
}

#[test]
fn the_reduce_list_is_complete() {
    for (i, op) in REDUCE_OPS.into_iter().enumerate() {
        assert_eq!(index_of(op), i, "{op:?}");
    }
}

/// Calls the NDArray method of `op` (arg ops take at most one axis).
fn apply(a: &NDArray, op: ReduceOp, axes: Option<&[isize]>, keep: bool) -> Result<NDArray> {
    let one = axes.map(|x| x[0]);
    match op {
        ReduceOp::Sum => a.sum(axes, keep),
        ReduceOp::Prod => a.prod(axes, keep),
        ReduceOp::Max => a.max(axes, keep),
        ReduceOp::Min => a.min(axes, keep),
        ReduceOp::ArgMax => a.argmax(one, keep),
        ReduceOp::ArgMin => a.argmin(one, keep),
        ReduceOp::Any => a.any(axes, keep),
        ReduceOp::All => a.all(axes, keep),
    }
}

/// `op` over one output's elements, in C order of the reduced axes, in f64.
fn naive(op: ReduceOp, xs: &[f64]) -> f64 {
    let nan = xs.iter().position(|x| x.is_nan());
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let first = |best: f64| xs.iter().position(|&x| x == best).unwrap();
    match op {
        ReduceOp::Sum => xs.iter().sum(),
        ReduceOp::Prod => xs.iter().product(),
        ReduceOp::Max => nan.map_or(max, |_| f64::NAN),
        ReduceOp::Min => nan.map_or(min, |_| f64::NAN),
        // A NaN counts as the extreme: the first NaN wins.
        ReduceOp::ArgMax => nan.unwrap_or_else(|| first(max)) as f64,
        ReduceOp::ArgMin => nan.unwrap_or_else(|| first(min)) as f64,
        ReduceOp::Any => xs.iter().any(|&x| x != 0.0) as u8 as f64,
        ReduceOp::All => xs.iter().all(|&x| x != 0.0) as u8 as f64,
    }
}

/// Per output (C order over the kept axes), its input elements in C order.
fn groups(shape: &[usize], vals: &[f64], axes: &[usize]) -> Vec<Vec<f64>> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let mut g = vec![Vec::new(); kept.iter().map(|&d| shape[d]).product()];
    for (k, &v) in vals.iter().enumerate() {
        let idx = unravel(shape, k);
        g[kept.iter().fold(0, |acc, &d| acc * shape[d] + idx[d])].push(v);
    }
    g
}

/// The axis lists to try on a rank-`nd` array (`None` = all axes).
fn axis_sets(op: ReduceOp, nd: usize) -> Vec<Option<Vec<isize>>> {
    let mut sets = vec![None];
    sets.extend((0..nd as isize).map(|a| Some(vec![a])));
    let arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
    if nd >= 2 && !arg {
        sets.push(Some(vec![0, -1]));
    }
    sets
}

device_test!(every_reduce_op_on_every_dtype_layout_and_axis_set);
fn every_reduce_op_on_every_dtype_layout_and_axis_set(dev: Device) {
    let mut rng = Prng::new(4);
    for op in REDUCE_OPS {
        let how = if op == ReduceOp::Prod {
            Draw::Pow2
        } else {
            Draw::Exact
        };
        let no_identity = matches!(
            op,
            ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
        );
        for dtype in DType::ALL {
            let result = op.result_dtype(dtype);
            for case in layouts() {
                let x = Input::new(&case, dtype, &draw(&mut rng, dtype, case.len, how), dev);
                let (shape, vals) = (x.cpu.shape().to_vec(), x.values());
                let nd = shape.len();
                for axes in axis_sets(op, nd) {
                    let ax: Vec<usize> = match &axes {
                        None => (0..nd).collect(),
                        Some(a) => a
                            .iter()
                            .map(|&i| i.rem_euclid(nd as isize) as usize)
                            .collect(),
                    };
                    for keep in [false, true] {
                        let ctx = format!(
                            "{op:?} over {axes:?} keepdims {keep} of {dtype} {} on {dev}",
                            case.name
                        );
                        let got = apply(&x.dev, op, axes.as_deref(), keep);
                        if no_identity && ax.iter().any(|&d| shape[d] == 0) {
                            let want = Error::invalid(op.name(), "zero-size reduction");
                            judge_error(
                                got,
                                &want,
                                || apply(&x.cpu, op, axes.as_deref(), keep),
                                &["zero-size"],
                                &ctx,
                            );
                            continue;
                        }
                        let got = got.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        let out_shape: Vec<usize> = (0..nd)
                            .filter_map(|d| match (ax.contains(&d), keep) {
                                (false, _) => Some(shape[d]),
                                (true, true) => Some(1),
                                (true, false) => None,
                            })
                            .collect();
                        let naive = || {
                            groups(&shape, &vals, &ax)
                                .iter()
                                .map(|xs| round_to(naive(op, xs), result))
                                .collect()
                        };
                        judge(
                            dev,
                            &got,
                            result,
                            &out_shape,
                            naive,
                            || apply(&x.cpu, op, axes.as_deref(), keep).unwrap(),
                            1.0,
                            true,
                            &ctx,
                        );
                    }
                }
            }
        }
    }
}
