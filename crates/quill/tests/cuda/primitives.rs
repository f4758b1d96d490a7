//! The Backend primitives outside the op tables, on every device: sort and argsort (stable,
//! NaN last ascending and first descending), cumsum (with and without the leading 0), gather
//! and scatter_add (negative and repeated indices), each along every axis of permuted,
//! reversed, offset and broadcast views (scatter_add is out of place, so a broadcast input is
//! fine), against loops over plain `f64` lanes written here.

use quill::{s, DType, Device, NDArray, Result};
use quill_test_support::device_test;
use std::cmp::Ordering;

/// The views of a (3, 4, 5) input made on `dev` from the same values: contiguous, permuted,
/// reversed and stepped, offset, and broadcast along dim 0.
fn views(dev: Device, dtype: DType, vals: &[f64]) -> Result<Vec<(&'static str, NDArray)>> {
    let base = NDArray::from_vec(vals.to_vec(), &[vals.len()])?
        .astype(dtype)?
        .to_device(dev)?;
    Ok(vec![
        ("contiguous", base.slice(&s![..60])?.reshape(&[3, 4, 5])?),
        (
            "permuted",
            base.slice(&s![..60])?
                .reshape(&[5, 4, 3])?
                .permute(&[2, 1, 0])?,
        ),
        (
            "reversed",
            base.slice(&s![..120])?
                .reshape(&[6, 4, 5])?
                .slice(&s![..;-2, .., ..;-1])?,
        ),
        ("offset", base.slice(&s![7..67])?.reshape(&[3, 4, 5])?),
        (
            "broadcast",
            base.slice(&s![..20])?
                .reshape(&[1, 4, 5])?
                .broadcast_to(&[3, 4, 5])?,
        ),
    ])
}

/// The lanes of `a` along `axis`, each as f64 values (on the host).
fn lanes(a: &NDArray, axis: usize) -> Result<Vec<Vec<f64>>> {
    let nd = a.ndim();
    let mut perm: Vec<isize> = (0..nd as isize).filter(|&d| d != axis as isize).collect();
    perm.push(axis as isize);
    let n = a.shape()[axis];
    let v = a
        .to_device(Device::Cpu)?
        .astype(DType::F64)?
        .permute(&perm)?
        .compact()?
        .to_vec::<f64>()?;
    Ok(if n == 0 {
        vec![]
    } else {
        v.chunks(n).map(|c| c.to_vec()).collect()
    })
}

/// NumPy's order: ascending with NaN last, descending with NaN first; ties keep their order
/// (the sort that uses this is stable).
fn order(a: f64, b: f64, descending: bool) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) if descending => Ordering::Less,
        (true, false) => Ordering::Greater,
        (false, true) if descending => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => {
            let o = a.partial_cmp(&b).unwrap_or(Ordering::Equal);
            if descending {
                o.reverse()
            } else {
                o
            }
        }
    }
}

fn same(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-9 * (1.0 + w.abs()))
}

/// Values with ties and (for floats) NaNs, small enough for every dtype.
fn values(dtype: DType) -> Vec<f64> {
    (0..120)
        .map(|i| {
            let v = ((i * 37) % 11) as f64 - 4.0;
            if dtype.is_float() && i % 13 == 5 {
                f64::NAN
            } else if dtype == DType::U8 || dtype == DType::Bool {
                v.abs()
            } else {
                v
            }
        })
        .collect()
}

device_test!(sort_argsort_and_cumsum_along_every_axis -> Result<()>);
fn sort_argsort_and_cumsum_along_every_axis(dev: Device) -> Result<()> {
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::I64,
        DType::I32,
        DType::U8,
    ] {
        for (name, x) in views(dev, dtype, &values(dtype))? {
            for axis in 0..3 {
                let ctx = format!("{dtype} {name} axis {axis} on {dev}");
                let input = lanes(&x, axis)?;
                for descending in [false, true] {
                    let sorted = x.sort(axis as isize, descending)?;
                    assert_eq!(sorted.device(), dev, "{ctx}");
                    let idx = x.argsort(axis as isize, descending)?;
                    assert_eq!(idx.dtype(), DType::I64, "{ctx}");
                    for ((lane, got), got_idx) in input
                        .iter()
                        .zip(lanes(&sorted, axis)?)
                        .zip(lanes(&idx, axis)?)
                    {
                        let mut want_idx: Vec<usize> = (0..lane.len()).collect();
                        want_idx.sort_by(|&a, &b| order(lane[a], lane[b], descending));
                        let want: Vec<f64> = want_idx.iter().map(|&i| lane[i]).collect();
                        assert!(
                            same(&got, &want),
                            "{ctx} desc={descending}: {got:?} vs {want:?}"
                        );
                        let want_idx: Vec<f64> = want_idx.iter().map(|&i| i as f64).collect();
                        assert_eq!(got_idx, want_idx, "{ctx} desc={descending} argsort");
                    }
                }
                for initial in [false, true] {
                    let c = x.cumsum(axis as isize, initial)?;
                    assert_eq!(c.device(), dev, "{ctx}");
                    for (lane, got) in input.iter().zip(lanes(&c, axis)?) {
                        let mut acc = 0.0;
                        let mut want: Vec<f64> = if initial { vec![0.0] } else { vec![] };
                        for v in lane {
                            acc += v;
                            want.push(acc);
                        }
                        // f16 sums in f32 and rounds each running sum to f16.
                        let tol = if dtype == DType::F16 { 1e-2 } else { 1e-6 };
                        let ok = got.len() == want.len()
                            && got.iter().zip(&want).all(|(g, w)| {
                                (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs())
                            });
                        assert!(ok, "{ctx} cumsum initial={initial}: {got:?} vs {want:?}");
                    }
                }
            }
        }
    }
    Ok(())
}

device_test!(gather_and_scatter_add_with_negative_and_repeated_indices -> Result<()>);
fn gather_and_scatter_add_with_negative_and_repeated_indices(dev: Device) -> Result<()> {
    for dtype in [DType::F32, DType::F64, DType::I64] {
        let vals: Vec<f64> = (0..120).map(|i| (i % 17) as f64 - 8.0).collect();
        for (name, x) in views(dev, dtype, &vals)? {
            let host = x.to_device(Device::Cpu)?.astype(DType::F64)?;
            let xv = host.compact()?.to_vec::<f64>()?; // C order of (3, 4, 5)
            for axis in 0..3usize {
                let ctx = format!("{dtype} {name} axis {axis} on {dev}");
                let mut ishape = [3usize, 4, 5];
                ishape[axis] = 3;
                let n_axis = [3usize, 4, 5][axis] as i64;
                // Indices in [-n, n): negative ones count from the end, some repeat.
                let idx: Vec<i64> = (0..ishape.iter().product::<usize>() as i64)
                    .map(|k| (k * 7) % (2 * n_axis) - n_axis)
                    .collect();
                let index = NDArray::from_vec(idx.clone(), &ishape)?.to_device(dev)?;
                let src_vals: Vec<f64> = (0..idx.len()).map(|k| (k % 5) as f64 + 1.0).collect();
                let src = NDArray::from_vec(src_vals.clone(), &ishape)?
                    .astype(dtype)?
                    .to_device(dev)?;
                let at = |i: usize, j: usize, k: usize| (i * 4 + j) * 5 + k;
                let mut gathered = Vec::new();
                let mut scattered = xv.clone();
                let mut m = 0;
                for i in 0..ishape[0] {
                    for j in 0..ishape[1] {
                        for k in 0..ishape[2] {
                            let raw = idx[m];
                            let p = (if raw < 0 { raw + n_axis } else { raw }) as usize;
                            let pos = match axis {
                                0 => at(p, j, k),
                                1 => at(i, p, k),
                                _ => at(i, j, p),
                            };
                            gathered.push(xv[pos]);
                            scattered[pos] += src_vals[m];
                            m += 1;
                        }
                    }
                }
                let g = x.gather(axis as isize, &index)?;
                assert_eq!((g.shape(), g.device()), (&ishape[..], dev), "{ctx}");
                let got = g
                    .to_device(Device::Cpu)?
                    .astype(DType::F64)?
                    .to_vec::<f64>()?;
                assert!(same(&got, &gathered), "{ctx} gather");
                let sc = x.scatter_add(axis as isize, &index, &src)?;
                assert_eq!(sc.device(), dev, "{ctx}");
                let got = sc
                    .to_device(Device::Cpu)?
                    .astype(DType::F64)?
                    .to_vec::<f64>()?;
                assert!(same(&got, &scattered), "{ctx} scatter_add");
            }
        }
    }
    Ok(())
}
