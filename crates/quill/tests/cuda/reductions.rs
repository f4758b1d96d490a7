//! The composite reductions on each device, `mean` and `logsumexp` (every layout, axis set and
//! keepdims, float and integer dtypes), and long rows: one row of 2^21 elements (the GPU's
//! two-pass split), two rows of 2^20, an odd length, and a contiguous prefix view of a longer
//! buffer. The naive reference is an f64 loop over each output's elements.

use crate::cases::{draw, layouts, Draw, Input};
use crate::check::round_to;
use crate::randn3;
use quill::{s, DType, Device, Result};
use quill_test_support::{assert_close, assert_close_values, device_test, f64s, unravel, Prng};

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

fn naive_mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// `log(sum(exp(x)))` through the max; all -inf (or empty) gives -inf, any +inf gives +inf,
/// NaN propagates.
fn naive_logsumexp(xs: &[f64]) -> f64 {
    if xs.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + xs.iter().map(|x| (x - max).exp()).sum::<f64>().ln()
}

device_test!(mean_and_logsumexp_over_any_axes -> Result<()>);
fn mean_and_logsumexp_over_any_axes(dev: Device) -> Result<()> {
    let mut rng = Prng::new(7);
    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::F16] {
        // Floats keep their dtype, integers give f64 (NumPy).
        let out = if dtype.is_float() { dtype } else { DType::F64 };
        // Against the naive f64 value on the CPU; against the CPU on a device.
        let tol = match (dev, out) {
            (Device::Cpu, DType::F32) => 1e-5,
            (Device::Cpu, DType::F16) => 4e-3,
            (Device::Cpu, _) => 1e-12,
            (_, DType::F16) => 2e-2,
            _ => 1e-5,
        };
        for case in layouts() {
            let x = Input::new(
                &case,
                dtype,
                &draw(&mut rng, dtype, case.len, Draw::Exact),
                dev,
            );
            let (shape, vals) = (x.cpu.shape().to_vec(), x.values());
            let nd = shape.len();
            let mut sets: Vec<Option<Vec<isize>>> = vec![None];
            sets.extend((0..nd as isize).map(|a| Some(vec![a])));
            if nd >= 2 {
                sets.push(Some(vec![0, nd as isize - 1]));
            }
            for axes in &sets {
                let ax: Vec<usize> = match axes {
                    None => (0..nd).collect(),
                    Some(a) => a.iter().map(|&i| i as usize).collect(),
                };
                for keep in [false, true] {
                    let ctx = format!("{dtype} {} {axes:?} keepdims {keep} on {dev}", case.name);
                    let a = axes.as_deref();
                    let (m, l) = (x.dev.mean(a, keep)?, x.dev.logsumexp(a, keep)?);
                    for (name, got, f) in [
                        ("mean", &m, naive_mean as fn(&[f64]) -> f64),
                        ("logsumexp", &l, naive_logsumexp),
                    ] {
                        assert_eq!((got.device(), got.dtype()), (dev, out), "{name} {ctx}");
                        if dev == Device::Cpu {
                            let want: Vec<f64> = groups(&shape, &vals, &ax)
                                .iter()
                                .map(|g| round_to(f(g), out))
                                .collect();
                            assert_close_values(&f64s(got), &want, tol, &format!("{name} {ctx}"));
                        }
                    }
                    if dev != Device::Cpu {
                        assert_close(&m, &x.cpu.mean(a, keep)?, tol, &format!("mean {ctx}"));
                        assert_close(
                            &l,
                            &x.cpu.logsumexp(a, keep)?,
                            tol,
                            &format!("logsumexp {ctx}"),
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

device_test!(long_rows_and_prefix_views -> Result<()>);
fn long_rows_and_prefix_views(dev: Device) -> Result<()> {
    // 2^21 elements in one row and in two: the GPU's two-pass split; 3 * 2^19 + 1: one pass.
    for shape in [
        vec![1usize << 21],
        vec![2, 1 << 20],
        vec![3 * (1 << 19) + 1],
    ] {
        let n: usize = shape.iter().product();
        let v = randn3(&[n], 31, DType::F32)
            .reshape(&shape.iter().map(|&d| d as isize).collect::<Vec<_>>())?;
        let g = v.to_device(dev)?;
        let rows: Vec<Vec<f64>> = f64s(&v)
            .chunks(shape[shape.len() - 1])
            .map(|r| r.to_vec())
            .collect();
        let all: Vec<f64> = rows.concat();
        let last = Some(&[-1isize][..]);
        let sums: Vec<f64> = rows.iter().map(|r| r.iter().sum()).collect();
        let maxs: Vec<f64> = rows
            .iter()
            .map(|r| r.iter().copied().fold(f64::MIN, f64::max))
            .collect();
        let ctx = format!("{shape:?} on {dev}");
        assert_close_values(
            &f64s(&g.sum(last, false)?),
            &sums,
            1e-4,
            &format!("long sum {ctx}"),
        );
        assert_close_values(
            &f64s(&g.max(last, false)?),
            &maxs,
            0.0,
            &format!("long max {ctx}"),
        );
        let min = all.iter().copied().fold(f64::MAX, f64::min);
        assert_close_values(
            &f64s(&g.min(None, false)?),
            &[min],
            0.0,
            &format!("long min {ctx}"),
        );
        let mean = all.iter().sum::<f64>() / n as f64;
        assert_close_values(
            &f64s(&g.mean(None, false)?),
            &[mean],
            1e-4,
            &format!("long mean {ctx}"),
        );
    }
    // A contiguous prefix of a longer buffer (offset 0, fewer elements than the buffer).
    let v = randn3(&[8, 300], 32, DType::F64);
    let vals = f64s(&v);
    let gp = v.to_device(dev)?.slice(&s![..3])?;
    let total: f64 = vals[..900].iter().sum();
    assert_close_values(
        &f64s(&gp.sum(None, false)?),
        &[total],
        1e-12,
        &format!("prefix sum on {dev}"),
    );
    let rows: Vec<f64> = vals[..900].chunks(300).map(|r| r.iter().sum()).collect();
    assert_close_values(
        &f64s(&gp.sum(Some(&[1]), false)?),
        &rows,
        1e-12,
        &format!("prefix rows on {dev}"),
    );
    Ok(())
}
