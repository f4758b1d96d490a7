//! `quill_array::linalg` on complex64 / complex128 and the general eigen-decomposition, against
//! identities checked in plain complex loops here (A X = B, A A⁻¹ = I, L Lᴴ = A, Q R = A with
//! Qᴴ Q = I, U S Vh = A, A V = V diag(w)) and the determinant against Gaussian elimination
//! written here, on transposed and reversed batched views; the dtypes of each result (complex
//! factors, real singular values, eigenvalues and log |det|).

use num_complex::Complex;
use quill_array::linalg::{self, QrMode};
use quill_array::NDArray;
use quill_core::{s, DType};

type C = Complex<f64>;
type M = Vec<Vec<C>>;

/// The matrices of a stack, row-major (any layout read in C order).
fn mats(a: &NDArray) -> Vec<M> {
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let v = a.astype(DType::C128).unwrap().to_vec::<C>().unwrap();
    v.chunks(m * n)
        .map(|c| c.chunks(n).map(|r| r.to_vec()).collect())
        .collect()
}

fn vals(a: &NDArray) -> Vec<C> {
    a.astype(DType::C128).unwrap().to_vec::<C>().unwrap()
}

fn mul(a: &M, b: &M) -> M {
    let (m, k, n) = (a.len(), b.len(), b.first().map_or(0, Vec::len));
    (0..m)
        .map(|i| {
            (0..n)
                .map(|j| (0..k).map(|t| a[i][t] * b[t][j]).sum())
                .collect()
        })
        .collect()
}

/// The conjugate transpose.
fn h(a: &M) -> M {
    let n = a.first().map_or(0, Vec::len);
    (0..n)
        .map(|j| a.iter().map(|r| r[j].conj()).collect())
        .collect()
}

fn eye(n: usize) -> M {
    (0..n)
        .map(|i| (0..n).map(|j| C::new(f64::from(i == j), 0.0)).collect())
        .collect()
}

fn close(a: &M, b: &M, tol: f64) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len());
        for (p, q) in x.iter().zip(y) {
            assert!(
                (p - q).norm() <= tol * (1.0 + q.norm()),
                "{p} vs {q}\n{a:?}\n{b:?}"
            );
        }
    }
}

/// Complex Gaussian elimination with partial pivoting: the determinant, written independently.
fn det_ref(mut a: M) -> C {
    let n = a.len();
    let mut det = C::new(1.0, 0.0);
    for c in 0..n {
        let p = (c..n)
            .max_by(|&x, &y| a[x][c].norm().total_cmp(&a[y][c].norm()))
            .unwrap();
        if a[p][c].norm() == 0.0 {
            return C::new(0.0, 0.0);
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

/// A batch (2, 3) of complex n x n matrices as a transposed, row-reversed view, diagonally
/// dominant (well conditioned); Hermitian positive definite with `hermitian` (then only the
/// batch is reversed, which keeps each matrix Hermitian).
fn square(n: usize, dtype: DType, seed: u64, hermitian: bool) -> NDArray {
    let re = NDArray::randn(&[2, 3, n, n], seed, DType::F64).unwrap();
    let im = NDArray::randn(&[2, 3, n, n], seed + 1, DType::F64).unwrap();
    let bump = NDArray::eye(n, n, 0, DType::F64)
        .unwrap()
        .mul_scalar(n as f64)
        .unwrap();
    let a = NDArray::complex(&re.add(&bump).unwrap(), &im).unwrap();
    if hermitian {
        let ah = a.transpose(-1, -2).unwrap().conj().unwrap();
        let p = a.matmul(&ah).unwrap().astype(dtype).unwrap();
        return p.slice(&s![..;-1]).unwrap();
    }
    let v = a
        .astype(dtype)
        .unwrap()
        .transpose(-1, -2)
        .unwrap()
        .slice(&s![.., ..;-1])
        .unwrap();
    assert!(!v.is_contiguous());
    v
}

fn tol(dtype: DType) -> f64 {
    if dtype == DType::C64 {
        1e-4
    } else {
        1e-10
    }
}

#[test]
fn solve_inv_det_slogdet_of_complex_batches() {
    for dtype in [DType::C64, DType::C128] {
        let a = square(4, dtype, 1, false);
        let b = NDArray::complex(
            &NDArray::randn(&[3, 4, 2], 7, DType::F64).unwrap(),
            &NDArray::randn(&[3, 4, 2], 8, DType::F64).unwrap(),
        )
        .unwrap()
        .astype(dtype)
        .unwrap();
        let x = linalg::solve(&a, &b).unwrap();
        assert_eq!((x.dtype(), x.shape()), (dtype, &[2, 3, 4, 2][..]));
        let inv = linalg::inv(&a).unwrap();
        assert_eq!(inv.dtype(), dtype);
        let det = vals(&linalg::det(&a).unwrap());
        let (sign, logabs) = linalg::slogdet(&a).unwrap();
        assert_eq!((sign.dtype(), logabs.dtype()), (dtype, dtype.real_part()));
        let (sign, logabs) = (vals(&sign), vals(&logabs));
        let bm = mats(&b);
        for (i, ((am, xm), im)) in mats(&a).iter().zip(mats(&x)).zip(mats(&inv)).enumerate() {
            close(&mul(am, &xm), &bm[i % 3], tol(dtype));
            close(&mul(am, &im), &eye(4), tol(dtype));
            let want = det_ref(am.clone());
            assert!(
                (det[i] - want).norm() <= tol(dtype) * want.norm(),
                "det {i}"
            );
            assert!((sign[i].norm() - 1.0).abs() < tol(dtype));
            let rebuilt = sign[i] * logabs[i].re.exp();
            assert!((rebuilt - want).norm() <= tol(dtype) * want.norm());
        }
    }
    // A singular complex matrix is an error naming the op; its slogdet is (0, -inf).
    let s = NDArray::complex(
        &NDArray::from_vec(vec![1.0, 2.0, 2.0, 4.0], &[2, 2]).unwrap(),
        &NDArray::from_vec(vec![1.0, 2.0, 2.0, 4.0], &[2, 2]).unwrap(),
    )
    .unwrap();
    let e = linalg::inv(&s).unwrap_err().to_string();
    assert!(e.contains("linalg.inv") && e.contains("singular"), "{e}");
    let (sign, logabs) = linalg::slogdet(&s).unwrap();
    assert_eq!(vals(&sign)[0], C::new(0.0, 0.0));
    assert_eq!(logabs.to_vec::<f64>().unwrap()[0], f64::NEG_INFINITY);
}

#[test]
fn cholesky_qr_svd_eigh_of_complex_matrices() {
    for dtype in [DType::C64, DType::C128] {
        let t = tol(dtype) * 10.0;
        let p = square(4, dtype, 3, true);
        let l = linalg::cholesky(&p, false).unwrap();
        let u = linalg::cholesky(&p, true).unwrap();
        let (w, v) = linalg::eigh(&p).unwrap();
        assert_eq!((w.dtype(), v.dtype()), (dtype.real_part(), dtype));
        let wv = vals(&w);
        for (i, ((pm, lm), (um, vm))) in mats(&p)
            .iter()
            .zip(mats(&l))
            .zip(mats(&u).into_iter().zip(mats(&v)))
            .enumerate()
        {
            close(&mul(&lm, &h(&lm)), pm, t);
            close(&mul(&h(&um), &um), pm, t);
            assert!((0..4).all(|r| (0..r).all(|c| lm[c][r].norm() == 0.0)));
            let scaled: M = vm
                .iter()
                .map(|row| (0..4).map(|j| row[j] * wv[i * 4 + j]).collect())
                .collect();
            close(&mul(pm, &vm), &scaled, t * 100.0);
            close(&mul(&h(&vm), &vm), &eye(4), t);
            assert!((0..3).all(|j| wv[i * 4 + j].re <= wv[i * 4 + j + 1].re));
        }
        let a = square(5, dtype, 5, false)
            .slice(&s![.., .., .., 1..4])
            .unwrap();
        for mode in [QrMode::Reduced, QrMode::Complete] {
            let (q, r) = linalg::qr(&a, mode).unwrap();
            for (am, (qm, rm)) in mats(&a).iter().zip(mats(&q).into_iter().zip(mats(&r))) {
                close(&mul(&qm, &rm), am, t);
                close(&mul(&h(&qm), &qm), &eye(qm[0].len()), t);
            }
        }
        let (u, sv, vh) = linalg::svd(&a, false).unwrap();
        assert_eq!(sv.dtype(), dtype.real_part());
        let sv = vals(&sv);
        for (i, (am, (um, vhm))) in mats(&a)
            .iter()
            .zip(mats(&u).into_iter().zip(mats(&vh)))
            .enumerate()
        {
            let us: M = um
                .iter()
                .map(|row| (0..3).map(|j| row[j] * sv[i * 3 + j]).collect())
                .collect();
            close(&mul(&us, &vhm), am, t);
        }
        let svals = vals(&linalg::svdvals(&a).unwrap());
        for (x, y) in svals.iter().zip(&sv) {
            assert!((x - y).norm() <= t * (1.0 + y.norm()));
        }
    }
}

#[test]
fn eig_of_real_and_complex_matrices() {
    for (dtype, want) in [
        (DType::F32, DType::C64),
        (DType::F64, DType::C128),
        (DType::C64, DType::C64),
        (DType::C128, DType::C128),
    ] {
        let t = if want == DType::C64 { 1e-3 } else { 1e-9 };
        let a = if dtype.is_complex() {
            square(5, dtype, 9, false)
        } else {
            NDArray::randn(&[2, 5, 5], 11, DType::F64)
                .unwrap()
                .astype(dtype)
                .unwrap()
                .slice(&s![.., ..;-1])
                .unwrap()
        };
        let (w, v) = linalg::eig(&a).unwrap();
        assert_eq!((w.dtype(), v.dtype()), (want, want));
        let wv = vals(&w);
        let ev = vals(&linalg::eigvals(&a).unwrap());
        for (i, (am, vm)) in mats(&a).iter().zip(mats(&v)).enumerate() {
            let scaled: M = vm
                .iter()
                .map(|row| (0..5).map(|j| row[j] * wv[i * 5 + j]).collect())
                .collect();
            close(&mul(am, &vm), &scaled, t * 10.0);
            for j in 0..5 {
                let norm: f64 = vm.iter().map(|row| row[j].norm_sqr()).sum::<f64>().sqrt();
                assert!((norm - 1.0).abs() < t, "column {j} has norm {norm}");
            }
            // eigvals gives the same multiset; the determinant is their product.
            for x in &ev[i * 5..i * 5 + 5] {
                assert!(wv[i * 5..i * 5 + 5]
                    .iter()
                    .any(|y| (x - y).norm() < t * 100.0));
            }
            let prod: C = wv[i * 5..i * 5 + 5].iter().product();
            let want_det = det_ref(am.clone());
            assert!((prod - want_det).norm() <= t * 100.0 * (1.0 + want_det.norm()));
        }
    }
    // A real rotation's eigenvalues are ±i; a non-square input is an error.
    let r = NDArray::from_vec(vec![0.0, -1.0, 1.0, 0.0], &[2, 2]).unwrap();
    let mut w = vals(&linalg::eigvals(&r).unwrap());
    w.sort_by(|a, b| a.im.total_cmp(&b.im));
    assert!((w[0] - C::new(0.0, -1.0)).norm() < 1e-12 && (w[1] - C::new(0.0, 1.0)).norm() < 1e-12);
    let e = linalg::eig(&NDArray::ones(&[2, 3], DType::F64).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("linalg.eig") && e.contains("square"), "{e}");
    let empty = linalg::eig(&NDArray::zeros(&[3, 0, 0], DType::F64).unwrap()).unwrap();
    assert_eq!(
        (empty.0.shape(), empty.1.shape()),
        (&[3, 0][..], &[3, 0, 0][..])
    );
}
