//! `quill_array::linalg` against independent references: each factorization is checked by the
//! identities that define it (A X = B, A A⁻¹ = I, L Lᵀ = A, Q R = A with QᵀQ = I, U S Vh = A,
//! A V = V diag(w)) in plain f64 loops here, the determinant against Gaussian elimination
//! written here, on batched, transposed, reversed and broadcast views, f32 and f64; and bad
//! input (non-square, singular, not positive definite, mismatched sizes) is a typed error.

use quill_array::linalg::{self, NormOrd, QrMode};
use quill_array::NDArray;
use quill_core::{s, DType};

/// Row-major matrices of a stack, as nested vectors (any layout read in C order).
fn mats(a: &NDArray) -> Vec<Vec<Vec<f64>>> {
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let v = vals(a);
    v.chunks(m * n)
        .map(|c| c.chunks(n).map(|r| r.to_vec()).collect())
        .collect()
}

/// The values of any float array as f64, in C order.
fn vals(a: &NDArray) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn mul(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let (m, k, n) = (a.len(), b.len(), b.first().map_or(0, Vec::len));
    (0..m)
        .map(|i| {
            (0..n)
                .map(|j| (0..k).map(|t| a[i][t] * b[t][j]).sum())
                .collect()
        })
        .collect()
}

fn t(a: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = a.first().map_or(0, Vec::len);
    (0..n).map(|j| a.iter().map(|r| r[j]).collect()).collect()
}

fn close(a: &[Vec<f64>], b: &[Vec<f64>], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.iter().zip(y) {
            assert!(
                (p - q).abs() <= tol * (1.0 + q.abs()),
                "{p} vs {q}\n{a:?}\n{b:?}"
            );
        }
    }
}

fn eye(n: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| (0..n).map(|j| f64::from(i == j)).collect())
        .collect()
}

/// Gaussian elimination with partial pivoting: the determinant, written independently.
fn det_ref(mut a: Vec<Vec<f64>>) -> f64 {
    let n = a.len();
    let mut det = 1.0;
    for c in 0..n {
        let p = (c..n)
            .max_by(|&x, &y| a[x][c].abs().total_cmp(&a[y][c].abs()))
            .unwrap();
        if a[p][c] == 0.0 {
            return 0.0;
        }
        if p != c {
            a.swap(p, c);
            det = -det;
        }
        det *= a[c][c];
        let pivot = a[c].clone();
        for row in a.iter_mut().skip(c + 1) {
            let f = row[c] / pivot[c];
            for (x, p) in row.iter_mut().zip(&pivot).skip(c) {
                *x -= f * p;
            }
        }
    }
    det
}

/// A batch (2, 3) of n x n matrices, as a transposed and row-reversed view (not contiguous),
/// diagonally dominant so that each is well conditioned.
fn square(n: usize, dtype: DType, seed: u64) -> NDArray {
    let a = NDArray::randn(&[2, 3, n, n], seed, DType::F64).unwrap();
    let bump = NDArray::eye(n, n, 0, DType::F64)
        .unwrap()
        .mul_scalar(n as f64)
        .unwrap();
    let a = a.add(&bump).unwrap().astype(dtype).unwrap();
    let v = a.transpose(-1, -2).unwrap().slice(&s![.., ..;-1]).unwrap();
    assert!(!v.is_contiguous());
    v
}

fn tol(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        1e-4
    } else {
        1e-10
    }
}

#[test]
fn solve_inv_det_on_strided_batches() {
    for dtype in [DType::F32, DType::F64] {
        let a = square(4, dtype, 1);
        let b = NDArray::randn(&[3, 4, 2], 2, dtype).unwrap(); // batch (3) broadcasts to (2, 3)
        let x = linalg::solve(&a, &b).unwrap();
        assert_eq!((x.shape(), x.dtype()), (&[2, 3, 4, 2][..], dtype));
        let (am, xm, bm) = (mats(&a), mats(&x), mats(&b));
        for (i, (ai, xi)) in am.iter().zip(&xm).enumerate() {
            close(&mul(ai, xi), &bm[i % 3], tol(dtype));
        }
        // A vector right-hand side.
        let v = NDArray::randn(&[4], 3, dtype).unwrap();
        let xv = linalg::solve(&a, &v).unwrap();
        assert_eq!(xv.shape(), &[2, 3, 4]);
        let inv = linalg::inv(&a).unwrap();
        for (ai, ii) in am.iter().zip(mats(&inv)) {
            close(&mul(ai, &ii), &eye(4), tol(dtype));
        }
        let det = vals(&linalg::det(&a).unwrap());
        let (sign, log) = linalg::slogdet(&a).unwrap();
        let (sign, log) = (vals(&sign), vals(&log));
        for (i, ai) in am.iter().enumerate() {
            let want = det_ref(ai.clone());
            assert!(
                (det[i] - want).abs() <= tol(dtype) * want.abs(),
                "{} vs {want}",
                det[i]
            );
            assert!((sign[i] * log[i].exp() - want).abs() <= tol(dtype) * want.abs());
        }
    }
}

/// From order 768 the LU runs on the thread pool (`linalg/lu.rs`): solve, inv and slogdet
/// there agree with the same matrix's residuals and with the one-thread path's determinant
/// (the matrix's leading block, bordered by the identity, has the same determinant).
#[test]
fn large_lu_on_the_pool_matches_the_small_one() {
    let n = 800;
    let a = NDArray::randn(&[n, n], 7, DType::F64).unwrap();
    let bump = NDArray::eye(n, n, 0, DType::F64)
        .unwrap()
        .mul_scalar(40.0)
        .unwrap();
    let a = a.add(&bump).unwrap();
    let b = NDArray::randn(&[n, 3], 8, DType::F64).unwrap();
    let x = linalg::solve(&a, &b).unwrap();
    let r = a.matmul(&x).unwrap().sub(&b).unwrap();
    assert!(vals(&r).iter().all(|v| v.abs() < 1e-9));
    let inv = linalg::inv(&a).unwrap();
    let e = a
        .matmul(&inv)
        .unwrap()
        .sub(&NDArray::eye(n, n, 0, DType::F64).unwrap())
        .unwrap();
    assert!(vals(&e).iter().all(|v| v.abs() < 1e-9));
    // det of [[A11, A12], [0, I]] is det A11: the 800-order LU against a 100-order one.
    let m = 100;
    let block = a.slice(&s![..m, ..m]).unwrap().compact().unwrap();
    let mut big = vals(&NDArray::eye(n, n, 0, DType::F64).unwrap());
    let top = vals(&a);
    for i in 0..m {
        big[i * n..(i + 1) * n].copy_from_slice(&top[i * n..(i + 1) * n]);
    }
    let big = NDArray::from_vec(big, &[n, n]).unwrap();
    let (s1, l1) = linalg::slogdet(&big).unwrap();
    let (s2, l2) = linalg::slogdet(&block).unwrap();
    assert_eq!(vals(&s1), vals(&s2));
    assert!((vals(&l1)[0] - vals(&l2)[0]).abs() < 1e-9 * vals(&l2)[0].abs());
}

#[test]
fn singular_and_non_square_input_are_errors() {
    let sing = NDArray::from_vec(vec![1.0f64, 2.0, 2.0, 4.0], &[2, 2]).unwrap();
    let e = linalg::inv(&sing).unwrap_err().to_string();
    assert!(e.contains("linalg.inv") && e.contains("singular"), "{e}");
    let b = NDArray::ones(&[2], DType::F64).unwrap();
    assert!(linalg::solve(&sing, &b)
        .unwrap_err()
        .to_string()
        .contains("singular"));
    assert_eq!(linalg::det(&sing).unwrap().item::<f64>().unwrap(), 0.0);
    let (sign, log) = linalg::slogdet(&sing).unwrap();
    assert_eq!(sign.item::<f64>().unwrap(), 0.0);
    assert_eq!(log.item::<f64>().unwrap(), f64::NEG_INFINITY);
    let rect = NDArray::ones(&[2, 3], DType::F64).unwrap();
    for e in [
        linalg::inv(&rect).unwrap_err(),
        linalg::det(&rect).unwrap_err(),
    ] {
        assert!(e.to_string().contains("square"), "{e}");
    }
    let vec = NDArray::ones(&[3], DType::F64).unwrap();
    assert!(linalg::inv(&vec)
        .unwrap_err()
        .to_string()
        .contains("2 dims"));
    let b3 = NDArray::ones(&[3], DType::F64).unwrap();
    let e = linalg::solve(&NDArray::eye(2, 2, 0, DType::F64).unwrap(), &b3).unwrap_err();
    assert!(e.to_string().contains("rows"), "{e}");
    let not_pd = NDArray::from_vec(vec![1.0f64, 2.0, 2.0, 1.0], &[2, 2]).unwrap();
    let e = linalg::cholesky(&not_pd, false).unwrap_err().to_string();
    assert!(e.contains("positive definite"), "{e}");
    // In a batch, the error names the index.
    let batch = NDArray::stack(&[&NDArray::eye(2, 2, 0, DType::F64).unwrap(), &sing], 0).unwrap();
    assert!(linalg::inv(&batch).unwrap_err().to_string().contains("[1]"));
}

#[test]
fn cholesky_qr_svd_eigh_satisfy_their_identities() {
    for dtype in [DType::F32, DType::F64] {
        let a = square(5, dtype, 7);
        let spd = a.matmul(&a.transpose(-1, -2).unwrap()).unwrap();
        for (upper, s) in [(false, &spd), (true, &spd)] {
            let l = linalg::cholesky(s, upper).unwrap();
            for (li, si) in mats(&l).iter().zip(mats(s)) {
                let (lo, prod) = if upper {
                    (t(li), mul(&t(li), li))
                } else {
                    (li.clone(), mul(li, &t(li)))
                };
                close(&prod, &si, 10.0 * tol(dtype));
                assert!(
                    (0..5).all(|i| (i + 1..5).all(|j| lo[i][j] == 0.0)),
                    "not triangular"
                );
            }
        }
        // QR and SVD of wide and tall matrices, reversed in both dims.
        for (m, n) in [(3, 5), (6, 4)] {
            let x = NDArray::randn(&[2, m, n], 3, dtype).unwrap();
            let x = x.slice(&s![.., ..;-1, ..;-1]).unwrap();
            for mode in [QrMode::Reduced, QrMode::Complete] {
                let (q, r) = linalg::qr(&x, mode).unwrap();
                let k = if mode == QrMode::Reduced { m.min(n) } else { m };
                assert_eq!((q.shape(), r.shape()), (&[2, m, k][..], &[2, k, n][..]));
                for ((qi, ri), xi) in mats(&q).iter().zip(mats(&r)).zip(mats(&x)) {
                    close(&mul(qi, &ri), &xi, 10.0 * tol(dtype));
                    close(&mul(&t(qi), qi), &eye(k), 10.0 * tol(dtype));
                    assert!((0..k).all(|i| (0..i.min(n)).all(|j| ri[i][j].abs() < 1e-6)));
                }
            }
            for full in [false, true] {
                let (u, sv, vh) = linalg::svd(&x, full).unwrap();
                let k = m.min(n);
                let sv = vals(&sv);
                for (i, ((ui, vi), xi)) in mats(&u).iter().zip(mats(&vh)).zip(mats(&x)).enumerate()
                {
                    let s = &sv[i * k..(i + 1) * k];
                    assert!(s.windows(2).all(|w| w[0] >= w[1]), "not descending: {s:?}");
                    let us: Vec<Vec<f64>> = ui
                        .iter()
                        .map(|r| (0..k).map(|j| r[j] * s[j]).collect())
                        .collect();
                    close(&mul(&us, &vi[..k]), &xi, 10.0 * tol(dtype));
                    close(&mul(&t(ui), ui), &eye(ui[0].len()), 10.0 * tol(dtype));
                }
                let got = vals(&linalg::svdvals(&x).unwrap());
                for (p, q) in got.iter().zip(&sv) {
                    assert!((p - q).abs() <= 10.0 * tol(dtype) * (1.0 + q.abs()));
                }
            }
        }
        let (w, v) = linalg::eigh(&spd).unwrap();
        let w = vals(&w);
        for (i, (vi, si)) in mats(&v).iter().zip(mats(&spd)).enumerate() {
            let wi = &w[i * 5..(i + 1) * 5];
            assert!(wi.windows(2).all(|p| p[0] <= p[1]), "not ascending: {wi:?}");
            let vw: Vec<Vec<f64>> = vi
                .iter()
                .map(|r| (0..5).map(|j| r[j] * wi[j]).collect())
                .collect();
            close(&mul(&si, vi), &vw, 100.0 * tol(dtype));
        }
    }
}

#[test]
fn pinv_rank_norms_and_the_composed_functions() {
    // A rank-2 4 x 3 matrix: pinv satisfies A A⁺ A = A, the rank is 2.
    let u = NDArray::randn(&[4, 2], 1, DType::F64).unwrap();
    let v = NDArray::randn(&[2, 3], 2, DType::F64).unwrap();
    let a = u.matmul(&v).unwrap();
    let p = linalg::pinv(&a, None).unwrap();
    assert_eq!(p.shape(), &[3, 4]);
    let (am, pm) = (mats(&a).remove(0), mats(&p).remove(0));
    close(&mul(&mul(&am, &pm), &am), &am, 1e-9);
    assert_eq!(
        linalg::matrix_rank(&a, None)
            .unwrap()
            .item::<i64>()
            .unwrap(),
        2
    );
    // Norms against loops over the values.
    let x = NDArray::randn(&[3, 4], 5, DType::F64)
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let xs = mats(&x).remove(0);
    let flat: Vec<f64> = xs.iter().flatten().copied().collect();
    let got = |o| {
        linalg::vector_norm(&x, None, false, o)
            .unwrap()
            .item::<f64>()
            .unwrap()
    };
    let l3: f64 = flat.iter().map(|v| v.abs().powi(3)).sum::<f64>().cbrt();
    assert!((got(NormOrd::P(3.0)) - l3).abs() < 1e-12);
    let l2: f64 = flat.iter().map(|v| v * v).sum::<f64>().sqrt();
    assert!((got(NormOrd::P(2.0)) - l2).abs() < 1e-12);
    let linf = flat.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!((got(NormOrd::P(f64::INFINITY)) - linf).abs() < 1e-15);
    let row_sums: Vec<f64> = xs.iter().map(|r| r.iter().map(|v| v.abs()).sum()).collect();
    let mi = linalg::matrix_norm(&x, false, NormOrd::P(f64::INFINITY)).unwrap();
    assert!(
        (mi.item::<f64>().unwrap() - row_sums.iter().fold(0.0f64, |a, &b| a.max(b))).abs() < 1e-12
    );
    let fro = linalg::matrix_norm(&x, true, NormOrd::Fro).unwrap();
    assert_eq!(fro.shape(), &[1, 1]);
    assert!((fro.to_vec::<f64>().unwrap()[0] - l2).abs() < 1e-12);
    assert!(linalg::matrix_norm(&x, false, NormOrd::P(3.0)).is_err());
    // diagonal is a view; trace sums it.
    let m = NDArray::arange(0.0, 24.0, 1.0, DType::F64)
        .unwrap()
        .reshape(&[2, 3, 4])
        .unwrap();
    let m = m.slice(&s![.., ..;-1]).unwrap();
    for offset in [-2isize, -1, 0, 1, 3, 5] {
        let d = linalg::diagonal(&m, offset).unwrap();
        let ms = mats(&m);
        let want: Vec<f64> = ms
            .iter()
            .flat_map(|mm| {
                (0..3)
                    .filter_map(|i| {
                        let j = i as isize + offset;
                        (j >= 0 && (j as usize) < 4).then(|| mm[i][j as usize])
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(d.to_vec::<f64>().unwrap(), want, "offset {offset}");
        let tr = linalg::trace(&m, offset).unwrap().to_vec::<f64>().unwrap();
        let k = want.len() / 2;
        assert_eq!(
            tr,
            vec![want[..k].iter().sum::<f64>(), want[k..].iter().sum()]
        );
    }
    linalg::diagonal(&m, 0)
        .unwrap()
        .assign_scalar(-1.0)
        .unwrap();
    assert_eq!(mats(&m)[0][0][0], -1.0);
    // outer, cross, tensordot, matrix_power.
    let a = NDArray::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
    let b = NDArray::from_vec(vec![4i64, 5, 6], &[3]).unwrap();
    assert_eq!(
        linalg::outer(&a, &b).unwrap().to_vec::<i64>().unwrap(),
        vec![4, 5, 6, 8, 10, 12, 12, 15, 18]
    );
    assert_eq!(
        linalg::cross(&a, &b, -1).unwrap().to_vec::<i64>().unwrap(),
        vec![-3, 6, -3]
    );
    let c = NDArray::randn(&[3, 2], 4, DType::F64).unwrap();
    let cx = linalg::cross(&c, &c.flip(&[0, 1]).unwrap(), 0).unwrap();
    let (cm, fm) = (
        mats(&c).remove(0),
        mats(&c.flip(&[0, 1]).unwrap()).remove(0),
    );
    let cxm = mats(&cx).remove(0);
    for j in 0..2 {
        let (p, q) = (
            (0..3).map(|i| cm[i][j]).collect::<Vec<_>>(),
            (0..3).map(|i| fm[i][j]).collect::<Vec<_>>(),
        );
        let want = [
            p[1] * q[2] - p[2] * q[1],
            p[2] * q[0] - p[0] * q[2],
            p[0] * q[1] - p[1] * q[0],
        ];
        for i in 0..3 {
            assert!((cxm[i][j] - want[i]).abs() < 1e-12);
        }
    }
    let x = NDArray::randn(&[2, 3, 4], 8, DType::F64).unwrap();
    let y = NDArray::randn(&[4, 3, 5], 9, DType::F64).unwrap();
    let td = linalg::tensordot(&x, &y, (&[1, 2], &[1, 0])).unwrap();
    assert_eq!(td.shape(), &[2, 5]);
    let (xv, yv, tv) = (
        x.to_vec::<f64>().unwrap(),
        y.to_vec::<f64>().unwrap(),
        td.to_vec::<f64>().unwrap(),
    );
    for i in 0..2 {
        for l in 0..5 {
            let want: f64 = (0..3)
                .flat_map(|j| (0..4).map(move |k| (j, k)))
                .map(|(j, k)| xv[i * 12 + j * 4 + k] * yv[k * 15 + j * 5 + l])
                .sum();
            assert!((tv[i * 5 + l] - want).abs() < 1e-12);
        }
    }
    let sq = square(3, DType::F64, 11);
    let p3 = mats(&linalg::matrix_power(&sq, 3).unwrap());
    let pm1 = mats(&linalg::matrix_power(&sq, -1).unwrap());
    let p0 = mats(&linalg::matrix_power(&sq, 0).unwrap());
    for (i, si) in mats(&sq).iter().enumerate() {
        close(&p3[i], &mul(&mul(si, si), si), 1e-10);
        close(&mul(si, &pm1[i]), &eye(3), 1e-10);
        close(&p0[i], &eye(3), 0.0);
    }
}

#[test]
fn empty_matrices_and_integer_input() {
    let e = NDArray::zeros(&[2, 0, 0], DType::F32).unwrap();
    assert_eq!(
        linalg::det(&e).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 1.0]
    );
    assert_eq!(linalg::inv(&e).unwrap().shape(), &[2, 0, 0]);
    let (q, r) = linalg::qr(
        &NDArray::zeros(&[3, 0], DType::F64).unwrap(),
        QrMode::Complete,
    )
    .unwrap();
    assert_eq!((q.shape(), r.shape()), (&[3, 3][..], &[3, 0][..]));
    assert_eq!(
        linalg::svdvals(&NDArray::zeros(&[0, 4], DType::F64).unwrap())
            .unwrap()
            .shape(),
        &[0]
    );
    // Integers are solved in f64, as NumPy.
    let a = NDArray::from_vec(vec![2i32, 0, 0, 4], &[2, 2]).unwrap();
    let d = linalg::det(&a).unwrap();
    assert_eq!((d.dtype(), d.item::<f64>().unwrap()), (DType::F64, 8.0));
}

/// An array `rtol` is one tolerance per matrix (broadcast against the batch dims): each result
/// equals the scalar form on that matrix alone; a shape that does not broadcast is an error.
#[test]
fn array_rtol_is_one_tolerance_per_matrix() {
    let low = NDArray::randn(&[3, 4, 2], 41, DType::F64)
        .unwrap()
        .matmul(&NDArray::randn(&[3, 2, 5], 42, DType::F64).unwrap())
        .unwrap();
    let noise = NDArray::randn(&[3, 4, 5], 43, DType::F64)
        .unwrap()
        .mul_scalar(1e-4)
        .unwrap();
    let a = low.add(&noise).unwrap(); // rank 4, two singular values near 1e-4
    let tols = [1e-1, 1e-7, 0.5];
    let r = NDArray::from_vec(tols.to_vec(), &[3]).unwrap();
    let ranks = linalg::matrix_rank_rtol(&a, &r)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    let p = linalg::pinv_rtol(&a, &r).unwrap();
    for (i, &t) in tols.iter().enumerate() {
        let ai = a.slice(&s![i as isize]).unwrap();
        let want = linalg::matrix_rank(&ai, Some(t))
            .unwrap()
            .item::<i64>()
            .unwrap();
        assert_eq!(ranks[i], want, "matrix {i}");
        let pi = linalg::pinv(&ai, Some(t)).unwrap();
        close(
            &mats(&p.slice(&s![i as isize]).unwrap())[0],
            &mats(&pi)[0],
            1e-12,
        );
    }
    assert_ne!(
        ranks[0], ranks[1],
        "the tolerances were not applied per matrix"
    );
    let bad = NDArray::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    let e = linalg::pinv_rtol(&a, &bad).unwrap_err().to_string();
    assert!(e.contains("does not broadcast"), "{e}");
}
