//! [`matmul_complex`] against a naive complex product written here: f32 and f64 pairs, both
//! methods (the one-product form and 3M) and the size-chosen one, every kernel family this CPU
//! runs, transposed, stepped and reversed matrices (pairs not adjacent,
//! so A is gathered), broadcast B (expanded once) and a folded tall product, batches large
//! enough to run across threads, empty dims and k = 0, one to three threads giving the same
//! bits, and each refusal.

mod common;

use quill_gemm::{
    matmul_complex, matmul_complex_with, row_major, with_kernel, Error, Kernel, Method, Operand,
};

/// A splitmix-style generator: `len` pairs in [-1, 1)².
fn pairs(seed: u64, len: usize) -> Vec<[f64; 2]> {
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (s ^ (s >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    (0..len).map(|_| [next(), next()]).collect()
}

/// Pair `idx` (batch dims first) of `o`.
fn at<T: Copy>(o: &Operand<[T; 2]>, idx: &[usize]) -> [T; 2] {
    let off = idx
        .iter()
        .zip(o.strides)
        .fold(o.offset as isize, |s, (&i, &st)| s + i as isize * st);
    o.data[off as usize]
}

/// The textbook product in f64, pair by pair.
fn naive<T: Copy + Into<f64>>(a: &Operand<[T; 2]>, b: &Operand<[T; 2]>) -> Vec<[f64; 2]> {
    let r = a.shape.len();
    let (m, k, n) = (a.shape[r - 2], a.shape[r - 1], b.shape[r - 1]);
    let batch = &a.shape[..r - 2];
    let mut out = vec![];
    for e in 0..batch.iter().product::<usize>() {
        let idx = common::batch_index(r, batch, e);
        for i in 0..m {
            for j in 0..n {
                let (mut re, mut im) = (0.0, 0.0);
                for p in 0..k {
                    let (mut ia, mut ib) = (idx.clone(), idx.clone());
                    (ia[r - 2], ia[r - 1], ib[r - 2], ib[r - 1]) = (i, p, p, j);
                    let [ar, ai] = at(a, &ia).map(Into::into);
                    let [br, bi] = at(b, &ib).map(Into::into);
                    re += ar * br - ai * bi;
                    im += ar * bi + ai * br;
                }
                out.push([re, im]);
            }
        }
    }
    out
}

/// How a case lays its operands out: shape, strides and offset within a buffer of `len` pairs.
struct Case {
    a: (Vec<usize>, Vec<isize>, usize),
    b: (Vec<usize>, Vec<isize>, usize),
    len: (usize, usize),
}

fn contiguous(a: &[usize], b: &[usize]) -> Case {
    let n = |s: &[usize]| s.iter().product::<usize>();
    Case {
        a: (a.to_vec(), row_major(a), 0),
        b: (b.to_vec(), row_major(b), 0),
        len: (n(a), n(b)),
    }
}

/// The layouts the tests run: m, k, n big enough to cross micro-kernel tiles and, at 96, the
/// threshold for threads.
fn cases() -> Vec<(&'static str, Case)> {
    let mut v = vec![
        ("plain", contiguous(&[5, 7], &[7, 3])),
        ("large", contiguous(&[96, 130], &[130, 97])),
        ("batched", contiguous(&[3, 9, 17], &[3, 17, 6])),
        ("many small", contiguous(&[40, 4, 5], &[40, 5, 3])),
        ("vector row", contiguous(&[1, 33], &[33, 1])),
        ("k = 1", contiguous(&[6, 1], &[1, 5])),
        ("k = 0", contiguous(&[4, 0], &[0, 3])),
        ("m = 0", contiguous(&[0, 5], &[5, 3])),
        ("n = 0", contiguous(&[2, 3, 5], &[2, 5, 0])),
        ("rank 5", contiguous(&[2, 1, 2, 3, 4], &[2, 1, 2, 4, 5])),
    ];
    // A transposed (pairs of a row k apart), B stepped by 2 along its rows, both offset.
    v.push((
        "transposed a, stepped b",
        Case {
            a: (vec![11, 13], vec![1, 11], 0),
            b: (vec![13, 7], vec![14, 2], 1),
            len: (143, 13 * 14 + 1),
        },
    ));
    // Reversed rows and columns of A (negative strides, pairs adjacent only backwards).
    v.push((
        "reversed a",
        Case {
            a: (vec![9, 10], vec![-10, -1], 89),
            b: (vec![10, 4], vec![4, 1], 0),
            len: (90, 40),
        },
    ));
    // B broadcast over the batch (stride 0) with A's batch continuing its rows: one tall product.
    v.push((
        "folded",
        Case {
            a: (vec![4, 5, 8], vec![40, 8, 1], 0),
            b: (vec![4, 8, 6], vec![0, 6, 1], 0),
            len: (160, 48),
        },
    ));
    // B broadcast but A's batch reversed: not foldable, B expanded once for all products.
    v.push((
        "shared b",
        Case {
            a: (vec![3, 5, 8], vec![-40, 8, 1], 80),
            b: (vec![3, 8, 6], vec![0, 6, 1], 0),
            len: (120, 48),
        },
    ));
    v
}

fn check<T>(to: fn(f64) -> T, tol: f64)
where
    T: quill_gemm::Real + quill_gemm::Pack<T> + Into<f64>,
{
    let kernels = Kernel::testable().expect("kernel families");
    for (name, c) in cases() {
        let da: Vec<[T; 2]> = pairs(1, c.len.0).iter().map(|p| p.map(to)).collect();
        let db: Vec<[T; 2]> = pairs(2, c.len.1).iter().map(|p| p.map(to)).collect();
        let a = Operand {
            data: &da,
            offset: c.a.2,
            shape: &c.a.0,
            strides: &c.a.1,
        };
        let b = Operand {
            data: &db,
            offset: c.b.2,
            shape: &c.b.0,
            strides: &c.b.1,
        };
        let want = naive(&a, &b);
        for method in [None, Some(Method::Exact), Some(Method::Gauss)] {
            let mut first: Option<Vec<[T; 2]>> = None;
            for &k in &kernels {
                for threads in 1..=3 {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    // Garbage in the output: every pair must be overwritten.
                    let mut out = vec![[to(7.0), to(-7.0)]; want.len()];
                    pool.install(|| with_kernel(k, || matmul_complex_with(method, a, b, &mut out)))
                        .expect("kernel available")
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    let k_dim = c.a.0[c.a.0.len() - 1] as f64;
                    for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                        for q in 0..2 {
                            let g: f64 = g[q].into();
                            assert!(
                            (g - w[q]).abs() <= tol * (1.0 + k_dim),
                            "{name}, {method:?}, {k:?}, {threads} threads: pair {i} part {q}: {g} vs {}",
                            w[q]
                        );
                        }
                    }
                    let bits = |v: &[[T; 2]]| {
                        v.iter()
                            .flatten()
                            .map(|x| (*x).into())
                            .collect::<Vec<f64>>()
                    };
                    match &first {
                        None => first = Some(out),
                        Some(f) if k == kernels[0] => {
                            assert_eq!(bits(f), bits(&out), "{name}: threads changed the bits")
                        }
                        Some(_) => {}
                    }
                }
            }
        }
    }
}

#[test]
fn complex128_matches_the_naive_product() {
    check::<f64>(|x| x, 1e-14);
}

#[test]
fn complex64_matches_the_naive_product() {
    check::<f32>(|x| x as f32, 1e-6);
}

#[test]
fn refuses_bad_operands_and_outputs() {
    let d = vec![[1.0f64, 0.0]; 12];
    let (s23, s34, s33) = ([2usize, 3], [3usize, 4], [3usize, 3]);
    let (r23, r34, r33) = (row_major(&s23), row_major(&s34), row_major(&s33));
    let a = Operand::new(&d, &s23, &r23);
    let b = Operand::new(&d, &s34, &r34);
    let mut out = vec![[0.0; 2]; 8];
    assert_eq!(matmul_complex(a, b, &mut out), Ok(()));
    let mut short = vec![[0.0; 2]; 7];
    assert_eq!(
        matmul_complex(a, b, &mut short),
        Err(Error::Output { want: 8, got: 7 })
    );
    let c = Operand::new(&d, &s23, &r23);
    assert!(matches!(
        matmul_complex(a, c, &mut out),
        Err(Error::Shape { .. })
    ));
    // 3 x 3 pairs do not fit in 8.
    let small = &d[..8];
    let e = Operand::new(small, &s33, &r33);
    assert_eq!(
        matmul_complex(e, e, &mut [[0.0; 2]; 9]),
        Err(Error::OutOfBounds('a'))
    );
    // Output untouched on refusal.
    assert!(short.iter().all(|p| *p == [0.0, 0.0]));
}
