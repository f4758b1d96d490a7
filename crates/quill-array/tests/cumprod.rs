//! `NDArray::cumprod` against a naive per-lane running product, along every axis of permuted
//! and reversed views, with and without the initial 1, for integers (in int64, wrapping as
//! NumPy's) and floats; a rank-0 array and a bad axis are errors.

use quill_array::NDArray;
use quill_core::{s, DType};

/// The running products along `axis` of a C-order array of `shape`, naive.
fn naive(v: &[f64], shape: &[usize], axis: usize, initial: bool) -> Vec<f64> {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let m = n + initial as usize;
    let mut out = vec![0.0; outer * m * inner];
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = 1.0;
            if initial {
                out[(o * m) * inner + i] = 1.0;
            }
            for k in 0..n {
                acc *= v[(o * n + k) * inner + i];
                out[(o * m + k + initial as usize) * inner + i] = acc;
            }
        }
    }
    out
}

#[test]
fn running_products_along_every_axis_of_views() {
    for dtype in [DType::F64, DType::F32, DType::I32] {
        let base = NDArray::arange(0.0, 60.0, 1.0, DType::F64).unwrap();
        // Values in [-1.5, 1.5] (floats) or [-2, 2] (ints) so products stay exact-ish.
        let vals = base
            .reshape(&[3, 4, 5])
            .unwrap()
            .mul_scalar(0.37)
            .unwrap()
            .sin()
            .unwrap();
        let vals = if dtype == DType::I32 {
            vals.mul_scalar(2.4).unwrap().round().unwrap()
        } else {
            vals.mul_scalar(1.5).unwrap()
        };
        let a = vals.astype(dtype).unwrap();
        let view = a
            .permute(&[2, 0, 1])
            .unwrap()
            .slice(&s![..;-1, .., 1..])
            .unwrap();
        let shape = view.shape().to_vec();
        let v = view.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        for axis in 0..3 {
            for initial in [false, true] {
                let got = view.cumprod(axis as isize, initial).unwrap();
                let want_dtype = if dtype == DType::I32 {
                    DType::I64
                } else {
                    dtype
                };
                assert_eq!(got.dtype(), want_dtype);
                let got = got.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                let want = naive(&v, &shape, axis, initial);
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "{dtype:?} axis {axis}: {g} vs {w}"
                    );
                }
            }
        }
    }
    // Integers wrap in int64 as NumPy's do.
    let big = NDArray::from_vec(vec![1i64 << 40, 1 << 40], &[2]).unwrap();
    let got = big.cumprod(0, false).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(got, vec![1 << 40, (1i64 << 40).wrapping_mul(1 << 40)]);
    let empty = NDArray::zeros(&[0, 3], DType::F64).unwrap();
    assert_eq!(empty.cumprod(0, true).unwrap().shape(), &[1, 3]);
    assert!(NDArray::zeros(&[], DType::F64)
        .unwrap()
        .cumprod(0, false)
        .is_err());
    assert!(NDArray::zeros(&[2], DType::F64)
        .unwrap()
        .cumprod(1, false)
        .is_err());
}
