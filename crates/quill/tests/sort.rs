//! sort / argsort / cumsum / nonzero / searchsorted on random strided inputs (reversed,
//! permuted, gapped, offset; size-0 and size-1 dims; rank 1 to 6) against naive per-lane
//! references written here on C-order value lists.

use quill::{DType, NDArray};
use quill_test_support::{numel, random_shape, ravel, strided_from, unravel, Prng};

/// Values with duplicates and NaNs.
fn values(rng: &mut Prng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            if rng.chance(0.1) {
                f64::NAN
            } else {
                rng.int(-6, 6) as f64 * 0.5
            }
        })
        .collect()
}

/// The C-order lanes along `ax`: for each position of the other axes, the list of flat indices.
fn lane_indices(shape: &[usize], ax: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for k in 0..numel(shape) {
        let idx = unravel(shape, k);
        if idx[ax] != 0 {
            continue;
        }
        out.push(
            (0..shape[ax])
                .map(|j| {
                    let mut i = idx.clone();
                    i[ax] = j;
                    ravel(shape, &i)
                })
                .collect(),
        );
    }
    out
}

fn key(x: f64) -> (bool, f64) {
    (x.is_nan(), if x.is_nan() { 0.0 } else { x })
}

fn f64s(a: &NDArray) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

#[test]
fn sort_argsort_and_cumsum_match_naive_lanes() {
    let mut rng = Prng::new(11);
    for case in 0..300 {
        let mut shape = random_shape(&mut rng, 6, 5, 400);
        if shape.is_empty() {
            shape.push(3);
        }
        let dtype = [DType::F64, DType::F32, DType::I64, DType::I32, DType::F16][case % 5];
        let mut vals = values(&mut rng, numel(&shape));
        if !dtype.is_float() {
            vals.iter_mut()
                .filter(|v| v.is_nan())
                .for_each(|v| *v = 3.0);
        }
        let base = strided_from(&mut rng, &vals, &shape, -99.0);
        let a = base.astype(dtype).unwrap();
        let all: Vec<isize> = (0..shape.len() as isize).collect();
        let a = if case % 2 == 0 {
            a
        } else {
            a.flip(&all).unwrap()
        };
        let vals = f64s(&a);
        let ax = rng.below(shape.len());
        let axis = if rng.chance(0.5) {
            ax as isize
        } else {
            ax as isize - shape.len() as isize
        };
        let desc = rng.chance(0.3);
        let sorted = f64s(&a.sort(axis, desc).unwrap());
        let order = a.argsort(axis, desc).unwrap();
        assert_eq!(order.dtype(), DType::I64);
        let order = order.to_vec::<i64>().unwrap();
        let cs = a.cumsum(axis, case % 3 == 0).unwrap();
        let cs_vals = f64s(&cs);
        let init = case % 3 == 0;
        let mut cs_shape = shape.clone();
        cs_shape[ax] += init as usize;
        assert_eq!(cs.shape(), &cs_shape[..], "case {case}");
        let want_dtype = match dtype {
            DType::I32 | DType::I64 => DType::I64,
            d => d,
        };
        assert_eq!(cs.dtype(), want_dtype);
        let cs_lanes = lane_indices(&cs_shape, ax);
        for (l, lane) in lane_indices(&shape, ax).iter().enumerate() {
            // stable argsort by the naive key
            let mut want: Vec<usize> = (0..lane.len()).collect();
            want.sort_by(|&i, &j| {
                let (x, y) = (key(vals[lane[i]]), key(vals[lane[j]]));
                let o = x.partial_cmp(&y).unwrap();
                if desc {
                    o.reverse()
                } else {
                    o
                }
            });
            for (p, &w) in want.iter().enumerate() {
                assert_eq!(
                    order[lane[p]], w as i64,
                    "case {case} {shape:?} ax {ax} desc {desc}"
                );
                assert!(same(sorted[lane[p]], vals[lane[w]]), "case {case}");
            }
            // running sums, in f64 (exact for these half-integers; NaN poisons the rest)
            let mut acc = 0.0;
            let out = &cs_lanes[l];
            if init {
                assert_eq!(cs_vals[out[0]], 0.0);
            }
            for (p, &i) in lane.iter().enumerate() {
                let x = vals[i];
                acc += x;
                let got = cs_vals[out[p + init as usize]];
                assert!(same(got, acc), "case {case} cumsum: {got} vs {acc}");
            }
        }
    }
}

#[test]
fn nonzero_lists_coordinates_in_c_order() {
    let mut rng = Prng::new(12);
    for _ in 0..100 {
        let mut shape = random_shape(&mut rng, 5, 4, 300);
        if shape.is_empty() {
            shape.push(2);
        }
        let vals: Vec<f64> = (0..numel(&shape))
            .map(|_| if rng.chance(0.4) { 0.0 } else { 1.5 })
            .collect();
        let a = strided_from(&mut rng, &vals, &shape, 7.0);
        let got = a.nonzero().unwrap();
        assert_eq!(got.len(), shape.len());
        let coords: Vec<Vec<i64>> = got.iter().map(|c| c.to_vec::<i64>().unwrap()).collect();
        let want: Vec<usize> = (0..vals.len()).filter(|&k| vals[k] != 0.0).collect();
        for (h, &k) in want.iter().enumerate() {
            let idx = unravel(&shape, k);
            for d in 0..shape.len() {
                assert_eq!(coords[d][h], idx[d] as i64);
            }
        }
        assert!(coords.iter().all(|c| c.len() == want.len()));
    }
    assert!(NDArray::scalar(1.0f32).nonzero().is_err());
}

#[test]
fn searchsorted_finds_left_and_right_positions() {
    let mut rng = Prng::new(13);
    for _ in 0..100 {
        let n = rng.below(12);
        let mut s = values(&mut rng, n);
        s.sort_by(|a, b| key(*a).partial_cmp(&key(*b)).unwrap());
        let sorted = NDArray::from_vec(s.clone(), &[n]).unwrap();
        let sorted = if rng.chance(0.5) {
            // the same values through a reversed view of a reversed buffer
            let rev: Vec<f64> = s.iter().rev().cloned().collect();
            NDArray::from_vec(rev, &[n]).unwrap().flip(&[0]).unwrap()
        } else {
            sorted
        };
        let q = values(&mut rng, 7);
        let qa = NDArray::from_vec(q.clone(), &[7])
            .unwrap()
            .reshape(&[7, 1])
            .unwrap();
        for right in [false, true] {
            let got = sorted.searchsorted(&qa, right).unwrap();
            assert_eq!(got.shape(), &[7, 1]);
            let got = got.to_vec::<i64>().unwrap();
            for (i, &x) in q.iter().enumerate() {
                let want = s
                    .iter()
                    .filter(|&&y| {
                        let (ky, kx) = (key(y), key(x));
                        ky < kx || (right && ky == kx)
                    })
                    .count();
                assert_eq!(got[i], want as i64, "{s:?} {x} right {right}");
            }
        }
    }
    let two_d = NDArray::zeros(&[2, 2], DType::F32).unwrap();
    let e = two_d.searchsorted(&two_d, false).unwrap_err().to_string();
    assert!(e.contains("searchsorted") && e.contains("1-D"), "{e}");
}

#[test]
fn bad_axes_and_rank_zero_are_errors() {
    let a = NDArray::zeros(&[2, 3], DType::F32).unwrap();
    for e in [
        a.sort(2, false).unwrap_err(),
        a.argsort(-3, false).unwrap_err(),
        a.cumsum(5, false).unwrap_err(),
        NDArray::scalar(1.0f32).sort(0, false).unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(msg.contains("sort") || msg.contains("cumsum"), "{msg}");
    }
}
