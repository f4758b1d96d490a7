//! Every dtype (f32, f64, f16, bf16, i32, i64, u8, bool): compact / to_vec of non-contiguous
//! views, assign between views, fills (`full`, `assign_scalar`) with float, integer and bool
//! scalars, and `astype` between all 64 (source, target) pairs on non-contiguous views (random
//! layouts with negative strides, a transpose, a broadcast), compared per element with
//! `Element::cast` applied naively. The source values include NaN, +-inf, -0.0, values just
//! inside and outside every integer range, and large and negative numbers.

use quill::{s, DType, Element, NDArray, Scalar};
use quill_test_support::*;

/// Special values of `T`: built from float and integer specials through `T::from_scalar`
/// (exact where `T` can hold them), padded to 48 elements.
fn specials<T: Element>() -> Vec<T> {
    let floats = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        -2.7,
        2.5,
        3.5,
        127.9,
        255.0,
        256.0,
        300.0,
        -129.0,
        65504.0,
        65520.0,
        1e10,
        -1e10,
        3e38,
        1e39,
        -1e39,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        2147483647.0,
        2147483648.0,
        -2147483649.0,
        9.3e18,
        -9.3e18,
        1e-8,
        1e-40,
        f64::MIN_POSITIVE,
    ];
    let ints: [i64; 16] = [
        0,
        1,
        -1,
        127,
        128,
        255,
        256,
        -256,
        i32::MAX as i64,
        i32::MIN as i64,
        1 << 31,
        -(1 << 31) - 1,
        i64::MAX,
        i64::MIN,
        (1 << 53) + 1,
        16_777_217,
    ];
    let mut v: Vec<T> = floats
        .iter()
        .map(|&x| T::from_scalar(Scalar::F(x)))
        .chain(ints.iter().map(|&i| T::from_scalar(Scalar::I(i as i128))))
        .collect();
    assert_eq!(v.len(), 48);
    if T::DTYPE == DType::Bool {
        // Mostly true after casting: give bool a mixed pattern instead.
        v = (0..48)
            .map(|i| T::from_scalar(Scalar::B(i % 3 == 1)))
            .collect();
    }
    v
}

fn check_astype_pair<S: Element, D: Element>(src: &NDArray, vals: &[S], ctx: &str) {
    let out = src.astype(D::DTYPE).unwrap();
    assert_eq!(out.dtype(), D::DTYPE);
    assert_eq!(out.shape(), src.shape());
    assert!(out.is_contiguous());
    assert!(!out.shares_storage_with(src));
    let want: Vec<D> = vals.iter().map(|&v| v.cast::<D>()).collect();
    assert_same(
        &out.to_vec::<D>().unwrap(),
        &want,
        &format!("{} -> {}: {ctx}", S::DTYPE, D::DTYPE),
    );
}

fn astype_all_targets<S: Element>(seed: u64) {
    let mut rng = Prng::new(seed);
    let vals = specials::<S>();
    // Views: random layouts of shape [6, 8] and [2, 3, 8], a transpose, a reversed 1-D view,
    // and a broadcast of one row.
    let mut views: Vec<(NDArray, Vec<S>, String)> = Vec::new();
    for shape in [&[6usize, 8][..], &[2, 3, 8], &[48]] {
        let a = strided_from(&mut rng, &vals, shape, S::zero());
        let ctx = format!("strided {:?} {:?}", a.shape(), a.strides());
        views.push((a, vals.clone(), ctx));
    }
    let c = NDArray::from_vec(vals.clone(), &[6, 8]).unwrap();
    let t = c.transpose(0, 1).unwrap();
    let t_vals = gather(&vals, &offsets_of(&t));
    views.push((t, t_vals, "transpose".into()));
    let row = c.slice(&s![3..4, ..;-1]).unwrap();
    let b = row.broadcast_to(&[3, 8]).unwrap();
    let b_vals = gather(&vals, &offsets_of(&b));
    views.push((b, b_vals, "broadcast".into()));
    for (src, vals, ctx) in &views {
        assert!(!src.is_contiguous() || src.ndim() == 1, "{ctx}");
        for d in ALL_DTYPES {
            quill_test_support::with_dtype!(d, D => check_astype_pair::<S, D>(src, vals, ctx));
        }
    }
}

#[test]
fn astype_between_all_64_pairs_matches_elementwise_cast() {
    for (k, s) in ALL_DTYPES.iter().enumerate() {
        quill_test_support::with_dtype!(*s, S => astype_all_targets::<S>(k as u64 + 1));
    }
}

#[test]
fn astype_to_the_same_dtype_is_a_copy() {
    for d in ALL_DTYPES {
        quill_test_support::with_dtype!(d, T => {
            let vals = specials::<T>();
            let a = NDArray::from_vec(vals.clone(), &[48]).unwrap();
            let c = a.astype(d).unwrap();
            assert!(!c.shares_storage_with(&a));
            assert_same(&c.to_vec::<T>().unwrap(), &vals, &format!("{d}"));
            // Writing into the copy leaves the source alone.
            c.assign_scalar(true).unwrap();
            assert_same(&a.to_vec::<T>().unwrap(), &vals, &format!("{d}"));
        });
    }
}

fn compact_assign_fill<T: Element>(seed: u64) {
    let mut rng = Prng::new(seed);
    let d = T::DTYPE;
    // compact of a random layout and of a permuted + flipped + stepped view.
    let shape = [4usize, 5, 6];
    let vals: Vec<T> = random_values(&mut rng, 120);
    let a = strided_from(&mut rng, &vals, &shape, T::one());
    assert_same(
        &a.compact().unwrap().to_vec::<T>().unwrap(),
        &vals,
        &format!("{d} compact"),
    );
    let c = NDArray::from_vec(vals.clone(), &shape).unwrap();
    let v = c
        .permute(&[2, 0, 1])
        .unwrap()
        .slice(&s![..;-2, 1.., ..;-1])
        .unwrap();
    let want = gather(&vals, &offsets_of(&v));
    let vc = v.compact().unwrap();
    assert!(vc.is_contiguous() && !vc.shares_storage_with(&c));
    assert_same(
        &vc.to_vec::<T>().unwrap(),
        &want,
        &format!("{d} view compact"),
    );

    // assign from a random layout into a permuted view of another buffer.
    let init: Vec<T> = random_values(&mut rng, 120);
    let dst_base = NDArray::from_vec(init.clone(), &shape).unwrap();
    let dst = dst_base
        .permute(&[1, 2, 0])
        .unwrap()
        .slice(&s![..;-1, 1..;2])
        .unwrap();
    let src_vals: Vec<T> = random_values(&mut rng, dst.numel());
    let src = strided_from(&mut rng, &src_vals, dst.shape(), T::zero());
    let mut mirror = init.clone();
    for (&o, &v) in offsets_of(&dst).iter().zip(&src_vals) {
        mirror[o] = v;
    }
    dst.assign(&src).unwrap();
    assert_same(
        &dst_base.to_vec::<T>().unwrap(),
        &mirror,
        &format!("{d} assign"),
    );

    // Fills: full with each kind of scalar, and assign_scalar through a stepped view.
    for value in [
        Scalar::F(2.5),
        Scalar::F(-0.0),
        Scalar::F(f64::NAN),
        Scalar::I(-3),
        Scalar::I(300),
        Scalar::B(true),
    ] {
        let f = NDArray::full(&[3, 4], value, d).unwrap();
        assert_eq!(f.dtype(), d);
        assert_same(
            &f.to_vec::<T>().unwrap(),
            &[T::from_scalar(value); 12],
            &format!("{d} full {value:?}"),
        );
        let g = NDArray::from_vec(init.clone(), &shape).unwrap();
        let view = g.slice(&s![1..;2, ..;-2, 3]).unwrap();
        // NumPy 2's setitem refuses what the dtype cannot hold (NaN into an integer, a negative
        // or too large integer into u8) and writes nothing; `full` casts like astype.
        let fits = match (d, value) {
            (d, Scalar::I(v)) if d.is_int() => {
                let bits = 8 * d.size_in_bytes() as u32;
                let (lo, hi) = if d.is_signed_int() {
                    (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
                } else {
                    (0, (1i128 << bits) - 1)
                };
                (lo..=hi).contains(&v)
            }
            (d, Scalar::F(x)) if d.is_int() => !x.is_nan(),
            _ => true,
        };
        if !fits {
            let e = view.assign_scalar(value).unwrap_err().to_string();
            assert!(e.contains("assign_scalar") && e.contains("integer"), "{e}");
            assert_same(
                &g.to_vec::<T>().unwrap(),
                &init,
                &format!("{d} refused {value:?}"),
            );
            continue;
        }
        view.assign_scalar(value).unwrap();
        let mut mirror = init.clone();
        for o in offsets_of(&view) {
            mirror[o] = T::from_scalar(value);
        }
        assert_same(
            &g.to_vec::<T>().unwrap(),
            &mirror,
            &format!("{d} assign_scalar {value:?}"),
        );
    }
}

#[test]
fn compact_assign_and_fill_for_every_dtype() {
    for (k, d) in ALL_DTYPES.iter().enumerate() {
        quill_test_support::with_dtype!(*d, T => compact_assign_fill::<T>(100 + k as u64));
    }
}

#[test]
fn assign_casts_from_every_dtype_into_every_dtype() {
    // A transposed source of one dtype into a reversed view of another, per element.
    for s in ALL_DTYPES {
        for d in ALL_DTYPES {
            quill_test_support::with_dtype!(s, S => quill_test_support::with_dtype!(d, D => {
                let vals = specials::<S>();
                let src = NDArray::from_vec(vals.clone(), &[8, 6])
                    .unwrap()
                    .transpose(0, 1)
                    .unwrap();
                let src_vals = gather(&vals, &offsets_of(&src));
                let base = NDArray::zeros(&[6, 8], d).unwrap();
                let dst = base.flip(&[1]).unwrap();
                dst.assign(&src).unwrap();
                let mut mirror = vec![D::zero(); 48];
                for (&o, &v) in offsets_of(&dst).iter().zip(&src_vals) {
                    mirror[o] = v.cast::<D>();
                }
                assert_same(&base.to_vec::<D>().unwrap(), &mirror, &format!("{s} -> {d}"));
            }));
        }
    }
}

#[test]
fn item_reads_one_element_with_a_cast() {
    for d in ALL_DTYPES {
        quill_test_support::with_dtype!(d, T => {
            let vals = specials::<T>();
            let a = NDArray::from_vec(vals.clone(), &[6, 8]).unwrap();
            for (i, j) in [(0usize, 0usize), (2, 7), (5, 3)] {
                let e = a.slice(&s![i as isize, j as isize]).unwrap();
                let want = vals[i * 8 + j];
                assert!(same(e.item::<T>().unwrap(), want), "{d}");
                assert!(same(e.item::<f64>().unwrap(), want.cast::<f64>()), "{d}");
                assert_eq!(e.item::<i64>().unwrap(), want.cast::<i64>(), "{d}");
                assert_eq!(e.item::<bool>().unwrap(), want.cast::<bool>(), "{d}");
            }
        });
    }
}
