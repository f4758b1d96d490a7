//! Constructors: `from_vec` (and its length-mismatch error), `scalar`, `zeros` / `ones` / `full`
//! / `zeros_like` for every dtype, `arange` (against a naive loop: positive and negative steps,
//! fractional steps, empty results, a zero step and non-finite bounds as errors), `linspace`
//! (exact endpoint, num 0 and 1), `eye` (n != m, diagonal offsets positive, negative and out of
//! range), `rand` (in [0, 1), reproducible by seed, mean ~0.5), `randn` (mean ~0, std ~1), random
//! constructors on integer dtypes as errors, shapes whose size overflows as errors instead of
//! panics, and `item()` with its error.

use quill::{DType, Element, Error, NDArray, Scalar};
use quill_test_support::*;

#[test]
fn from_vec_checks_the_length_and_keeps_c_order() {
    let a = NDArray::from_vec((0..24).collect::<Vec<i32>>(), &[2, 3, 4]).unwrap();
    assert_eq!(a.shape(), &[2, 3, 4]);
    assert_eq!(a.strides(), &[12, 4, 1]);
    assert_eq!(a.offset(), 0);
    assert!(a.is_contiguous());
    assert_eq!(a.dtype(), DType::I32);
    assert_eq!(a.to_vec::<i32>().unwrap(), (0..24).collect::<Vec<_>>());
    for (len, shape) in [
        (23usize, vec![2usize, 3, 4]),
        (25, vec![2, 3, 4]),
        (1, vec![0]),
        (0, vec![]),
    ] {
        let e = NDArray::from_vec(vec![0f32; len], &shape).unwrap_err();
        assert!(matches!(e, Error::DataLength { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("from_vec"), "{msg}");
        assert!(msg.contains(&format!("{shape:?}")), "{msg}");
        assert!(msg.contains(&len.to_string()), "{msg}");
    }
    // Empty and rank-0 arrays.
    let e = NDArray::from_vec(Vec::<f64>::new(), &[3, 0]).unwrap();
    assert_eq!(e.numel(), 0);
    let r = NDArray::from_vec(vec![7u8], &[]).unwrap();
    assert_eq!(r.ndim(), 0);
    assert_eq!(r.item::<u8>().unwrap(), 7);
    let s = NDArray::scalar(true);
    assert_eq!((s.ndim(), s.dtype()), (0, DType::Bool));
    assert!(s.item::<bool>().unwrap());
}

#[test]
fn zeros_ones_full_for_every_dtype() {
    let shape = [3usize, 0, 2];
    for d in ALL_DTYPES {
        quill_test_support::with_dtype!(d, T => {
            for sh in [&[2usize, 3, 4][..], &[], &shape, &[1]] {
                let n = numel(sh);
                let z = NDArray::zeros(sh, d).unwrap();
                assert_eq!((z.shape(), z.dtype()), (sh, d));
                assert!(z.is_contiguous());
                assert_same(&z.to_vec::<T>().unwrap(), &vec![T::from_scalar(Scalar::I(0)); n], &format!("{d} zeros"));
                let o = NDArray::ones(sh, d).unwrap();
                assert_same(&o.to_vec::<T>().unwrap(), &vec![T::from_scalar(Scalar::I(1)); n], &format!("{d} ones"));
                for v in [Scalar::F(-1.5), Scalar::I(1000), Scalar::B(false), Scalar::F(f64::INFINITY)] {
                    let f = NDArray::full(sh, v, d).unwrap();
                    assert_same(&f.to_vec::<T>().unwrap(), &vec![T::from_scalar(v); n], &format!("{d} full {v:?}"));
                }
                let zl = o.zeros_like().unwrap();
                assert_eq!((zl.shape(), zl.dtype()), (sh, d));
                assert!(!zl.shares_storage_with(&o));
                assert_same(&zl.to_vec::<T>().unwrap(), &vec![T::zero(); n], &format!("{d} zeros_like"));
            }
        });
    }
}

#[test]
fn zeros_are_zero_even_when_the_buffer_pool_recycles_dirty_memory() {
    // A large dirty buffer goes back to the pool; the next zeros of that size must be zero.
    let n = 1 << 18;
    for _ in 0..3 {
        let a = NDArray::full(&[n], 7.0, DType::F32).unwrap();
        drop(a);
        let z = NDArray::zeros(&[n], DType::F32).unwrap();
        assert!(z.to_vec::<f32>().unwrap().iter().all(|&x| x == 0.0));
        let f = NDArray::full(&[n - 3], -2.0, DType::F32).unwrap();
        assert!(f.to_vec::<f32>().unwrap().iter().all(|&x| x == -2.0));
    }
}

/// NumPy's arange by a naive loop: `start + i * step` while it is on the near side of `stop`.
fn naive_arange(start: f64, stop: f64, step: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut i = 0usize;
    loop {
        let x = start + i as f64 * step;
        if (step > 0.0 && x >= stop) || (step < 0.0 && x <= stop) {
            return out;
        }
        out.push(x);
        i += 1;
    }
}

#[test]
fn arange_matches_a_naive_loop() {
    let cases = [
        (0.0, 10.0, 1.0),
        (0.0, 10.0, 3.0),
        (-5.0, 5.0, 0.5),
        (10.0, 0.0, -1.0),
        (10.0, -3.0, -2.5),
        (2.0, 2.0, 1.0),
        (5.0, 0.0, 1.0),
        (0.0, 5.0, -1.0),
        (0.0, 1.0, 0.25),
        (-1.0, -1.0625, -0.0625),
        (1e6, 1e6 + 100.0, 7.0),
        (0.0, 1000.0, 1.0),
    ];
    for (start, stop, step) in cases {
        let want = naive_arange(start, stop, step);
        for d in [DType::F64, DType::F32, DType::I64, DType::I32] {
            quill_test_support::with_dtype!(d, T => {
                let a = NDArray::arange(start, stop, step, d).unwrap();
                assert_eq!(a.shape(), &[want.len()], "arange({start}, {stop}, {step}) {d}");
                let w: Vec<T> = want.iter().map(|&x| T::from_f64(x)).collect();
                assert_same(&a.to_vec::<T>().unwrap(), &w, &format!("arange({start}, {stop}, {step}) {d}"));
            });
        }
    }
}

#[test]
fn arange_rejects_zero_steps_and_non_finite_bounds() {
    for (start, stop, step) in [
        (0.0, 10.0, 0.0),
        (0.0, 10.0, -0.0),
        (0.0, f64::INFINITY, 1.0),
        (f64::NEG_INFINITY, 0.0, 1.0),
        (f64::NAN, 1.0, 1.0),
        (0.0, 1.0, f64::NAN),
        (0.0, 1.0, f64::INFINITY),
    ] {
        let e = NDArray::arange(start, stop, step, DType::F32).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        assert!(e.to_string().contains("arange"), "{e}");
    }
    // Too many elements is an error, not an allocation attempt.
    let e = NDArray::arange(0.0, 1e300, 1e-300, DType::F32).unwrap_err();
    assert!(e.to_string().contains("arange"), "{e}");
}

#[test]
fn linspace_hits_the_endpoint_exactly() {
    for (start, stop, num) in [
        (0.0, 1.0, 11usize),
        (-3.0, 7.5, 4),
        (1.0, -1.0, 5),
        (0.1, 0.7, 7),
        (2.0, 2.0, 3),
        (0.0, 1.0, 1000),
    ] {
        let a = NDArray::linspace(start, stop, num, DType::F64).unwrap();
        let v = a.to_vec::<f64>().unwrap();
        assert_eq!(v.len(), num);
        assert_eq!(v[0], start);
        assert_eq!(
            v[num - 1],
            stop,
            "endpoint exact for linspace({start}, {stop}, {num})"
        );
        let step = (stop - start) / (num - 1) as f64;
        for (i, &x) in v.iter().enumerate().take(num - 1) {
            let want = start + i as f64 * step;
            assert!(
                (x - want).abs() <= 1e-12 * (1.0 + want.abs()),
                "{i}: {x} vs {want}"
            );
        }
        let f = NDArray::linspace(start, stop, num, DType::F32).unwrap();
        let fv = f.to_vec::<f32>().unwrap();
        assert_eq!(fv[num - 1], stop as f32);
    }
    let e = NDArray::linspace(0.0, 1.0, 0, DType::F32).unwrap();
    assert_eq!(e.shape(), &[0]);
    let one = NDArray::linspace(3.0, 9.0, 1, DType::F64).unwrap();
    assert_eq!(one.to_vec::<f64>().unwrap(), vec![3.0]);
}

#[test]
fn eye_matches_a_naive_definition() {
    for (n, m) in [
        (4usize, 4usize),
        (3, 5),
        (5, 3),
        (1, 1),
        (0, 3),
        (3, 0),
        (1, 6),
    ] {
        for k in [-6isize, -3, -1, 0, 1, 2, 4, 7, isize::MIN, isize::MAX] {
            for d in [DType::F32, DType::I64, DType::Bool] {
                quill_test_support::with_dtype!(d, T => {
                    let e = NDArray::eye(n, m, k, d).unwrap();
                    assert_eq!(e.shape(), &[n, m]);
                    let want: Vec<T> = (0..n * m)
                        .map(|idx| {
                            let (i, j) = ((idx / m) as i128, (idx % m) as i128);
                            if j - i == k as i128 { T::one() } else { T::zero() }
                        })
                        .collect();
                    assert_same(&e.to_vec::<T>().unwrap(), &want, &format!("eye({n}, {m}, {k}) {d}"));
                });
            }
        }
    }
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[test]
fn rand_is_uniform_in_unit_interval_and_reproducible() {
    for d in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let a = NDArray::rand(&[100, 1000], 42, d).unwrap();
        assert_eq!((a.shape(), a.dtype()), (&[100usize, 1000][..], d));
        let v = a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        assert!(
            v.iter().all(|&x| (0.0..1.0).contains(&x)),
            "{d}: value outside [0, 1)"
        );
        let (mean, std) = mean_std(&v);
        assert!((mean - 0.5).abs() < 0.01, "{d}: mean {mean}");
        assert!(
            (std - (1.0f64 / 12.0).sqrt()).abs() < 0.01,
            "{d}: std {std}"
        );
        // Same seed: same data; another seed: different data.
        let b = NDArray::rand(&[100, 1000], 42, d).unwrap();
        assert_eq!(
            b.astype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
            v,
            "{d}"
        );
        let c = NDArray::rand(&[100, 1000], 43, d).unwrap();
        let cv = c.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let differing = cv.iter().zip(&v).filter(|(x, y)| x != y).count();
        assert!(
            differing > v.len() / 2,
            "{d}: seeds 42 and 43 give {differing} differences"
        );
        // Many distinct values (not a constant or a short cycle).
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.dedup();
        let min_distinct = match d {
            DType::BF16 => 200,
            DType::F16 => 1500,
            _ => 50_000,
        };
        assert!(
            sorted.len() >= min_distinct,
            "{d}: only {} distinct values",
            sorted.len()
        );
    }
    // Shapes: rank 0 and empty.
    let r = NDArray::rand(&[], 1, DType::F32).unwrap();
    assert_eq!(r.ndim(), 0);
    assert!((0.0..1.0).contains(&r.item::<f64>().unwrap()));
    assert_eq!(NDArray::rand(&[3, 0], 1, DType::F32).unwrap().numel(), 0);
}

#[test]
fn randn_is_standard_normal() {
    for d in [DType::F32, DType::F64] {
        let a = NDArray::randn(&[200_000], 7, d).unwrap();
        let v = a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let (mean, std) = mean_std(&v);
        assert!(mean.abs() < 0.01, "{d}: mean {mean}");
        assert!((std - 1.0).abs() < 0.01, "{d}: std {std}");
        let beyond_2sd = v.iter().filter(|x| x.abs() > 2.0).count() as f64 / v.len() as f64;
        assert!(
            (beyond_2sd - 0.0455).abs() < 0.003,
            "{d}: tail mass {beyond_2sd}"
        );
        let b = NDArray::randn(&[200_000], 7, d).unwrap();
        assert_eq!(b.astype(DType::F64).unwrap().to_vec::<f64>().unwrap(), v);
        let c = NDArray::randn(&[200_000], 8, d).unwrap();
        assert_ne!(c.astype(DType::F64).unwrap().to_vec::<f64>().unwrap(), v);
    }
    let s = NDArray::randn(&[2, 3, 4], 1, DType::F16).unwrap();
    assert_eq!(s.shape(), &[2, 3, 4]);
}

#[test]
fn random_constructors_reject_non_float_dtypes() {
    for d in [DType::I32, DType::I64, DType::U8, DType::Bool] {
        let e = NDArray::rand(&[3], 0, d).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        assert!(
            e.to_string().contains("rand") && e.to_string().contains(d.name()),
            "{e}"
        );
        let e = NDArray::randn(&[3], 0, d).unwrap_err();
        assert!(e.to_string().contains("randn"), "{e}");
    }
}

#[test]
fn overflowing_shapes_err_instead_of_panicking() {
    let huge: [&[usize]; 4] = [
        &[usize::MAX, 2],
        &[1 << 40, 1 << 40],
        &[usize::MAX],
        &[1 << 62, 4],
    ];
    for shape in huge {
        for d in [DType::F32, DType::U8] {
            for (op, r) in [
                ("zeros", NDArray::zeros(shape, d)),
                ("full", NDArray::full(shape, 1.0, d)),
                ("ones", NDArray::full(shape, true, d)),
                ("rand", NDArray::rand(shape, 0, DType::F32)),
            ] {
                let e = r.unwrap_err();
                assert!(matches!(e, Error::Overflow { .. }), "{op} {shape:?}: {e}");
                assert!(e.to_string().contains(&format!("{shape:?}")), "{e}");
            }
        }
        let e = NDArray::from_vec(vec![0f32; 2], shape).unwrap_err();
        assert!(
            matches!(e, Error::Overflow { .. }),
            "from_vec {shape:?}: {e}"
        );
    }
    // Element count fits, byte size does not.
    let e = NDArray::zeros(&[1 << 61], DType::F64).unwrap_err();
    assert!(matches!(e, Error::Overflow { .. }), "{e}");
    let e = NDArray::zeros(&[isize::MAX as usize / 2 + 1], DType::I32).unwrap_err();
    assert!(matches!(e, Error::Overflow { .. }), "{e}");
    let e = NDArray::eye(1 << 40, 1 << 40, 0, DType::F32).unwrap_err();
    assert!(matches!(e, Error::Overflow { .. }), "{e}");
    let e = NDArray::linspace(0.0, 1.0, usize::MAX, DType::F32).unwrap_err();
    assert!(matches!(e, Error::Overflow { .. }), "{e}");
}

#[test]
fn item_reads_single_elements_and_errs_otherwise() {
    let a = NDArray::from_vec(vec![1.5f32, -2.5, 3.0], &[3]).unwrap();
    for i in 0..3isize {
        let e = a.slice(&quill::s![i..i + 1]).unwrap();
        let want = [1.5f32, -2.5, 3.0][i as usize];
        assert_eq!(e.item::<f32>().unwrap(), want);
        assert_eq!(e.item::<i32>().unwrap(), want.cast::<i32>());
        assert_eq!(e.item::<u8>().unwrap(), want.cast::<u8>());
    }
    // A size-1 view deep inside a reversed, offset view.
    let b = NDArray::arange(0.0, 60.0, 1.0, DType::I64)
        .unwrap()
        .reshape(&[3, 4, 5])
        .unwrap()
        .flip(&[0, 2])
        .unwrap();
    let one = b.slice(&quill::s![1..2, 2, -2..-1]).unwrap();
    assert_eq!(one.shape(), &[1, 1]);
    assert_eq!(one.item::<i64>().unwrap(), offsets_of(&one)[0] as i64);
    for shape in [&[3usize][..], &[0], &[2, 2]] {
        let z = NDArray::zeros(shape, DType::F32).unwrap();
        let e = z.item::<f32>().unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("item") && msg.contains(&format!("{shape:?}")),
            "{msg}"
        );
    }
}
