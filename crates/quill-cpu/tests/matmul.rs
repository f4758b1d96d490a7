//! `NDArray::matmul` against a naive reference written here (a triple loop in f64, or wrapping
//! i64 for integers) that implements NumPy's `matmul` shape rules on its own: odd sizes, edge
//! tiles of every micro-kernel, deep and wide products (several cache blocks), 1-D operands,
//! batch broadcasting, operands of any strides, empty dims, every dtype, and the errors.

use quill_array::NDArray;
use quill_core::{s, DType, Element};
use quill_gemm::{with_kernel, Kernel};
use quill_test_support::Prng;

// ------------------------------------------------------------------------------------------
// The reference

/// NumPy's result shape and, per output element, the (a, b) C-order row bases to combine.
fn reference<A: Copy>(
    a: &[A],
    sa: &[usize],
    b: &[A],
    sb: &[usize],
    zero: A,
    mac: impl Fn(A, A, A) -> A,
) -> (Vec<usize>, Vec<A>) {
    let a2: Vec<usize> = if sa.len() == 1 {
        vec![1, sa[0]]
    } else {
        sa.to_vec()
    };
    let b2: Vec<usize> = if sb.len() == 1 {
        vec![sb[0], 1]
    } else {
        sb.to_vec()
    };
    let (ra, rb) = (a2.len(), b2.len());
    let (m, k, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 1]);
    assert_eq!(k, b2[rb - 2]);
    let (ba, bb) = (&a2[..ra - 2], &b2[..rb - 2]);
    let nb = ba.len().max(bb.len());
    let pad = |s: &[usize]| [vec![1; nb - s.len()], s.to_vec()].concat();
    let (pa, pb) = (pad(ba), pad(bb));
    let batch: Vec<usize> = pa.iter().zip(&pb).map(|(&x, &y)| x.max(y)).collect();
    let mut out = Vec::new();
    for bi in 0..batch.iter().product::<usize>() {
        let idx = quill_test_support::unravel(&batch, bi);
        let ia: Vec<usize> = idx.iter().zip(&pa).map(|(&i, &d)| i % d).collect();
        let ib: Vec<usize> = idx.iter().zip(&pb).map(|(&i, &d)| i % d).collect();
        let (oa, ob) = (
            quill_test_support::ravel(&pa, &ia) * m * k,
            quill_test_support::ravel(&pb, &ib) * k * n,
        );
        for i in 0..m {
            for j in 0..n {
                let mut acc = zero;
                for p in 0..k {
                    acc = mac(acc, a[oa + i * k + p], b[ob + p * n + j]);
                }
                out.push(acc);
            }
        }
    }
    let mut shape = batch;
    if sa.len() > 1 {
        shape.push(m);
    }
    if sb.len() > 1 {
        shape.push(n);
    }
    (shape, out)
}

fn f64s(x: &NDArray) -> Vec<f64> {
    x.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}
fn i64s(x: &NDArray) -> Vec<i64> {
    x.astype(DType::I64).unwrap().to_vec::<i64>().unwrap()
}

/// Checks `a @ b` against the reference: exact for integers and bool, within a bound that
/// grows with the contracted length for floats.
fn check(a: &NDArray, b: &NDArray, ctx: &str) {
    let got = a.matmul(b).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let dt = quill_core::promote::promote_types(a.dtype(), b.dtype());
    assert_eq!(got.dtype(), dt, "{ctx}");
    let k = *a.shape().last().unwrap();
    if dt.is_float() {
        let mac = |s: f64, x: f64, y: f64| s + x * y;
        let (shape, want) = reference(&f64s(a), a.shape(), &f64s(b), b.shape(), 0.0, mac);
        assert_eq!(got.shape(), &shape[..], "{ctx}");
        let (acc_eps, out_eps) = match dt {
            DType::F64 => (f64::EPSILON, 0.0),
            DType::F16 => (f32::EPSILON as f64, 1.0 / 2048.0),
            DType::BF16 => (f32::EPSILON as f64, 1.0 / 256.0),
            _ => (f32::EPSILON as f64, 0.0),
        };
        // Inputs lie in [-1, 1], so every partial sum is at most k in magnitude.
        for (i, (g, w)) in f64s(&got).iter().zip(&want).enumerate() {
            let tol = 2.0 * (k as f64 + 1.0) * acc_eps + w.abs() * out_eps;
            assert!(
                (g - w).abs() <= tol,
                "{ctx}: element {i}: got {g}, want {w}"
            );
        }
    } else {
        let (shape, want) = if dt == DType::Bool {
            let mac = |s: i64, x: i64, y: i64| s | (x & y);
            reference(&i64s(a), a.shape(), &i64s(b), b.shape(), 0, mac)
        } else {
            let mac = |s: i64, x: i64, y: i64| s.wrapping_add(x.wrapping_mul(y));
            reference(&i64s(a), a.shape(), &i64s(b), b.shape(), 0, mac)
        };
        assert_eq!(got.shape(), &shape[..], "{ctx}");
        // The i64 sum wrapped to the width (and read back as i64, as `i64s` reads `got`).
        let wrap = |v: i64| quill_test_support::with_dtype!(dt, T => T::from_scalar(quill_core::Scalar::I(v as i128)).cast::<i64>());
        let want: Vec<i64> = want.into_iter().map(wrap).collect();
        assert_eq!(i64s(&got), want, "{ctx}");
    }
}

/// A contiguous array of `dt` with random values: floats in [-1, 1], small integers, bools.
fn rand(rng: &mut Prng, shape: &[usize], dt: DType) -> NDArray {
    let n = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| match dt {
            d if d.is_float() => rng.unit() * 2.0 - 1.0,
            // At 0.1 an output of depth 65 is false about half the time (0.99^65); at 0.3
            // nearly all were true, and an all-true product would have passed.
            DType::Bool => rng.chance(0.1) as u8 as f64,
            DType::U8 => rng.below(256) as f64,
            _ => rng.int(-50, 50) as f64,
        })
        .collect();
    NDArray::from_vec(v, shape).unwrap().astype(dt).unwrap()
}

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

fn available_kernels() -> Vec<Kernel> {
    quill_test_support::kernels::available()
}

// ------------------------------------------------------------------------------------------
// Sizes and kernels

#[test]
fn odd_sizes() {
    let mut rng = Prng::new(1);
    let sizes = [
        (1, 1, 1),
        (7, 17, 65),
        (65, 7, 17),
        (17, 257, 7),
        (129, 65, 129),
        (257, 129, 65),
        (1, 257, 129),
        (129, 1, 257),
    ];
    for dt in [DType::F32, DType::F64] {
        for &(m, k, n) in &sizes {
            let (a, b) = (rand(&mut rng, &[m, k], dt), rand(&mut rng, &[k, n], dt));
            check(&a, &b, &format!("{dt} {m}x{k} @ {k}x{n}"));
        }
    }
}

/// Every remainder of every tile shape (MR up to 12, NR up to 32), on every kernel this CPU runs.
#[test]
fn edge_tiles_every_kernel() {
    let mut rng = Prng::new(2);
    for kern in available_kernels() {
        for dt in [DType::F32, DType::F64] {
            let a = rand(&mut rng, &[25, 3], dt);
            let b = rand(&mut rng, &[3, 65], dt);
            for m in (1..=13).chain([24, 25]) {
                for n in (1..=33).chain([64, 65]) {
                    let (x, y) = (
                        a.slice(&s![..m, ..]).unwrap(),
                        b.slice(&s![.., ..n]).unwrap(),
                    );
                    with_kernel(kern, || {
                        check(&x, &y, &format!("{kern:?} {dt} m={m} n={n}"))
                    })
                    .unwrap();
                }
            }
        }
    }
}

/// Several KC, MC and NC blocks (accumulation across depth blocks, row and column blocks,
/// threads inside one product), on every kernel.
#[test]
fn multi_block_every_kernel() {
    let mut rng = Prng::new(3);
    for kern in available_kernels() {
        for dt in [DType::F32, DType::F64] {
            // 1100 rows: more than any MC (at most 1024), so several row blocks on any cache.
            for (m, k, n) in [
                (13, 600, 33),
                (500, 2, 4100),
                (257, 129, 65),
                (1100, 40, 70),
            ] {
                let (a, b) = (rand(&mut rng, &[m, k], dt), rand(&mut rng, &[k, n], dt));
                with_kernel(kern, || {
                    check(&a, &b, &format!("{kern:?} {dt} {m}x{k}x{n}"))
                })
                .unwrap();
            }
        }
    }
}

/// The slower kernels give the fastest one's answer (up to summation order).
#[test]
fn kernels_agree() {
    let mut rng = Prng::new(4);
    let ks = available_kernels();
    for dt in [DType::F32, DType::F64] {
        let (a, b) = (
            rand(&mut rng, &[129, 257], dt),
            rand(&mut rng, &[257, 65], dt),
        );
        let run = |k| f64s(&with_kernel(k, || a.matmul(&b).unwrap()).unwrap());
        let best = run(ks[0]);
        let tol = if dt == DType::F32 { 1e-4 } else { 1e-12 };
        for &k in &ks[1..] {
            for (x, y) in run(k).iter().zip(&best) {
                assert!(
                    (x - y).abs() <= tol,
                    "{k:?} vs {:?} {dt}: {x} vs {y}",
                    ks[0]
                );
            }
        }
    }
    assert!(with_kernel(Kernel::Generic, || ()).is_ok());
}

// ------------------------------------------------------------------------------------------
// Shapes

#[test]
fn one_dim_operands() {
    let mut rng = Prng::new(5);
    let dt = DType::F32;
    let v = rand(&mut rng, &[17], dt);
    let cases: Vec<(NDArray, NDArray)> = vec![
        (v.clone(), rand(&mut rng, &[17], dt)),
        (v.clone(), rand(&mut rng, &[17, 7], dt)),
        (rand(&mut rng, &[9, 17], dt), v.clone()),
        (v.clone(), rand(&mut rng, &[3, 17, 5], dt)),
        (rand(&mut rng, &[2, 3, 4, 17], dt), v.clone()),
    ];
    let want_shapes: [&[usize]; 5] = [&[], &[7], &[9], &[3, 5], &[2, 3, 4]];
    for ((a, b), want) in cases.iter().zip(want_shapes) {
        assert_eq!(a.matmul(b).unwrap().shape(), want);
        check(a, b, &format!("{:?} @ {:?}", a.shape(), b.shape()));
    }
}

#[test]
fn batch_broadcasting() {
    let mut rng = Prng::new(6);
    for dt in [DType::F32, DType::F64, DType::I32] {
        let (m, k, n) = (7, 17, 9);
        let shapes: [(&[usize], &[usize]); 6] = [
            (&[2, 1, m, k], &[3, k, n]),
            (&[m, k], &[4, k, n]),
            (&[4, m, k], &[k, n]),
            (&[1, m, k], &[5, k, n]),
            (&[3, 1, m, k], &[1, 2, k, n]),
            (&[64, 65, 33], &[64, 33, 20]),
        ];
        for (sa, sb) in shapes {
            let (a, b) = (rand(&mut rng, sa, dt), rand(&mut rng, sb, dt));
            check(&a, &b, &format!("{dt} {sa:?} @ {sb:?}"));
        }
    }
    let a = NDArray::zeros(&[2, 1, 3, 4], DType::F32).unwrap();
    let b = NDArray::zeros(&[3, 4, 5], DType::F32).unwrap();
    assert_eq!(a.matmul(&b).unwrap().shape(), &[2, 3, 3, 5]);
}

#[test]
fn strided_operands() {
    let mut rng = Prng::new(7);
    for dt in [DType::F32, DType::F64, DType::BF16, DType::I64] {
        let big = rand(&mut rng, &[70, 80], dt);
        let tall = rand(&mut rng, &[80, 70], dt);
        let views: Vec<(&str, NDArray, NDArray)> = vec![
            (
                "a transposed",
                tall.transpose(0, 1).unwrap(),
                tall.slice(&s![.., ..9]).unwrap(),
            ),
            (
                "b transposed",
                big.slice(&s![..9, ..]).unwrap(),
                big.transpose(0, 1).unwrap(),
            ),
            (
                "both transposed",
                tall.transpose(0, 1).unwrap(),
                big.transpose(0, 1).unwrap(),
            ),
            (
                "stepped",
                big.slice(&s![..;2, 1..;3]).unwrap(),
                tall.slice(&s![1..;3, ..;5]).unwrap(),
            ),
            (
                "negative steps",
                big.slice(&s![..;-1, ..;-2]).unwrap(),
                tall.slice(&s![..;-2, 5..;-3]).unwrap(),
            ),
            (
                "offset views",
                big.slice(&s![3..20, 7..]).unwrap(),
                tall.slice(&s![7.., 2..19]).unwrap(),
            ),
            (
                "stride-0 rows",
                big.slice(&s![4..5, ..])
                    .unwrap()
                    .broadcast_to(&[13, 80])
                    .unwrap(),
                tall.clone(),
            ),
            (
                "stride-0 cols",
                big.slice(&s![..19, 6..7])
                    .unwrap()
                    .broadcast_to(&[19, 80])
                    .unwrap(),
                tall.slice(&s![.., ..;-7]).unwrap(),
            ),
        ];
        for (what, a, b) in views {
            check(&a, &b, &format!("{dt} {what}"));
        }
        // Batched: permuted, stride-0 batch (broadcast_to), a stepped batch dim.
        let cube = rand(&mut rng, &[6, 20, 30], dt);
        let p = cube.permute(&[1, 0, 2]).unwrap(); // (20, 6, 30), batch stride 30
        let q = cube.permute(&[0, 2, 1]).unwrap(); // (6, 30, 20)
        check(
            &p.slice(&s![..6]).unwrap(),
            &q,
            &format!("{dt} permuted batch"),
        );
        let bb = big
            .slice(&s![..30, ..11])
            .unwrap()
            .broadcast_to(&[6, 30, 11])
            .unwrap();
        check(&cube, &bb, &format!("{dt} stride-0 batch rhs"));
        let ab = big
            .slice(&s![..5, ..20])
            .unwrap()
            .broadcast_to(&[6, 5, 20])
            .unwrap();
        check(&ab, &cube, &format!("{dt} stride-0 batch lhs"));
        check(
            &cube.slice(&s![..;-2]).unwrap(),
            &bb.slice(&s![..3]).unwrap(),
            &format!("{dt} stepped batch"),
        );
    }
}

/// A batch over a fixed rhs folds into one tall product when the lhs rows continue across the
/// batch; here the lhs is column-major inside each matrix as well.
#[test]
fn folded_batch() {
    let mut rng = Prng::new(8);
    let (bn, m, k, n) = (4, 33, 19, 21);
    let flat = rand(&mut rng, &[bn * m * k], DType::F32);
    let a = flat
        .as_strided(&[bn, m, k], &[m as isize, 1, (bn * m) as isize], 0)
        .unwrap();
    let b = rand(&mut rng, &[k, n], DType::F32);
    check(&a, &b, "column-major folded lhs");
    check(
        &rand(&mut rng, &[2, 3, 150, 40], DType::F32),
        &rand(&mut rng, &[40, 300], DType::F32),
        "big fold",
    );
}

#[test]
fn empty_dims() {
    for dt in [DType::F32, DType::F64, DType::F16, DType::I32, DType::Bool] {
        let z = |s: &[usize]| NDArray::zeros(s, dt).unwrap();
        let r = z(&[3, 0]).matmul(&z(&[0, 4])).unwrap();
        assert_eq!(r.shape(), &[3, 4]);
        assert!(
            f64s(&r).iter().all(|&x| x == 0.0),
            "{dt}: k = 0 gives zeros"
        );
        // k = 0 into a recycled buffer: the result must still be zeros.
        let ones = NDArray::ones(&[4, 5], dt).unwrap();
        drop(ones.matmul(&NDArray::ones(&[5, 6], dt).unwrap()).unwrap());
        assert!(f64s(&z(&[4, 0]).matmul(&z(&[0, 6])).unwrap())
            .iter()
            .all(|&x| x == 0.0));
        assert_eq!(z(&[0, 5]).matmul(&z(&[5, 4])).unwrap().shape(), &[0, 4]);
        assert_eq!(z(&[3, 5]).matmul(&z(&[5, 0])).unwrap().shape(), &[3, 0]);
        assert_eq!(
            z(&[0, 3, 5]).matmul(&z(&[5, 4])).unwrap().shape(),
            &[0, 3, 4]
        );
        assert_eq!(z(&[0]).matmul(&z(&[0])).unwrap().shape(), &[] as &[usize]);
    }
}

// ------------------------------------------------------------------------------------------
// Dtypes

#[test]
fn every_dtype() {
    let mut rng = Prng::new(9);
    for dt in quill_test_support::ALL_DTYPES {
        let (a, b) = (rand(&mut rng, &[17, 65], dt), rand(&mut rng, &[65, 33], dt));
        check(&a, &b, &format!("{dt}"));
        let at = rand(&mut rng, &[65, 17], dt).transpose(0, 1).unwrap();
        check(
            &at,
            &b.slice(&s![.., ..;-1]).unwrap(),
            &format!("{dt} strided"),
        );
        let (x, y) = (
            rand(&mut rng, &[3, 7, 9], dt),
            rand(&mut rng, &[9, 129], dt),
        );
        check(&x, &y, &format!("{dt} batched"));
    }
    for f in FLOATS {
        let (a, b) = (
            rand(&mut rng, &[129, 257], f),
            rand(&mut rng, &[257, 17], f),
        );
        check(&a, &b, &format!("{f} deep"));
    }
}

#[test]
fn mixed_dtypes_promote() {
    let mut rng = Prng::new(10);
    for (da, db) in [
        (DType::I32, DType::F32),
        (DType::U8, DType::I32),
        (DType::Bool, DType::F32),
        (DType::F16, DType::BF16),
        (DType::F32, DType::F64),
    ] {
        let (a, b) = (rand(&mut rng, &[5, 6], da), rand(&mut rng, &[6, 7], db));
        check(&a, &b, &format!("{da} @ {db}"));
    }
}

#[test]
fn integers_wrap_and_bool_is_or_of_ands() {
    let a = NDArray::from_vec(vec![200u8, 100, 3], &[1, 3]).unwrap();
    let b = NDArray::from_vec(vec![2u8, 1, 1], &[3, 1]).unwrap();
    assert_eq!(
        a.matmul(&b).unwrap().to_vec::<u8>().unwrap(),
        [((400 + 100 + 3) % 256) as u8]
    );
    let big = NDArray::from_vec(vec![1i32 << 20; 65 * 2], &[2, 65]).unwrap();
    check(&big, &big.transpose(0, 1).unwrap(), "i32 overflow wraps");
    let x = NDArray::from_vec(vec![i64::MAX, 3], &[1, 2]).unwrap();
    check(&x, &x.transpose(0, 1).unwrap(), "i64 overflow wraps");
    let p = NDArray::from_vec(vec![true, false, false, false], &[2, 2]).unwrap();
    let q = NDArray::from_vec(vec![false, true, true, true], &[2, 2]).unwrap();
    assert_eq!(
        p.matmul(&q).unwrap().to_vec::<bool>().unwrap(),
        [false, true, false, false]
    );
}

/// f16 accumulates in f32: 4096 ones sum to 4096 (an f16 accumulator stalls at 2048).
#[test]
fn half_accumulates_in_f32() {
    for dt in [DType::F16, DType::BF16] {
        let a = NDArray::ones(&[1, 4096], dt).unwrap();
        let r = a.matmul(&a.transpose(0, 1).unwrap()).unwrap();
        assert_eq!(f64s(&r), [4096.0], "{dt}");
    }
}

#[test]
fn operands_sharing_a_buffer() {
    let mut rng = Prng::new(11);
    let a = rand(&mut rng, &[65, 40], DType::F32);
    check(&a, &a.transpose(0, 1).unwrap(), "a @ a.T");
    check(
        &a.slice(&s![..40]).unwrap(),
        &a.transpose(0, 1).unwrap(),
        "a[:40] @ a.T",
    );
}

// ------------------------------------------------------------------------------------------
// Errors

#[test]
fn errors_name_both_shapes() {
    let z = |s: &[usize]| NDArray::zeros(s, DType::F32).unwrap();
    let e = z(&[2, 3]).matmul(&z(&[4, 5])).unwrap_err().to_string();
    assert_eq!(
        e,
        "matmul: shape mismatch: [2, 3] vs [4, 5] (contracted dims 3 vs 4)"
    );
    let e = z(&[3]).matmul(&z(&[4])).unwrap_err().to_string();
    assert!(
        e.contains("[3] vs [4]") && e.contains("contracted dims 3 vs 4"),
        "{e}"
    );
    let e = z(&[2, 3, 4])
        .matmul(&z(&[3, 4, 5]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[2, 3, 4] vs [3, 4, 5]") && e.contains("batch dims"),
        "{e}"
    );
    let s = NDArray::scalar(1.0f32);
    for (a, b) in [(&s, &z(&[3])), (&z(&[3]), &s), (&s, &s)] {
        let e = a.matmul(b).unwrap_err().to_string();
        assert!(
            e.starts_with("matmul:") && e.contains("at least one dim"),
            "{e}"
        );
    }
}
