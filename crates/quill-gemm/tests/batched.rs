//! quill-gemm's public entry points against naive products written here: the batched
//! [`matmul`] over strided operands (every element type, every kernel family this CPU runs,
//! broadcast and reversed batch dims, transposed and stepped matrices, the folded tall
//! product, empty dims, one to three threads giving the same bits, and each refusal), and a
//! selected [`Gemm`] run directly, overwriting and accumulating.

mod common;

use half::{bf16, f16};
use quill_gemm::{matmul, row_major, select, with_kernel, Element, Error, Kernel, Mat, Operand};

/// A splitmix-style generator: `len` values in [-1, 1).
fn values(seed: u64, len: usize) -> Vec<f64> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (s ^ (s >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

/// Element `idx` (a full index, batch dims first) of operand `o`, through `to`.
fn at<T: Copy>(o: &Operand<T>, idx: &[usize]) -> T {
    let off = idx
        .iter()
        .zip(o.strides)
        .fold(o.offset as isize, |s, (&i, &st)| s + i as isize * st);
    o.data[off as usize]
}

/// The naive `(batch.., m, n)` product of `a` and `b` in f64.
fn naive<T: Copy>(a: &Operand<T>, b: &Operand<T>, to: impl Fn(T) -> f64) -> Vec<f64> {
    let r = a.shape.len();
    let (m, k, n) = (a.shape[r - 2], a.shape[r - 1], b.shape[r - 1]);
    let batch = &a.shape[..r - 2];
    let count: usize = batch.iter().product();
    let mut out = Vec::with_capacity(count * m * n);
    for e in 0..count {
        let idx = common::batch_index(r, batch, e);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let (mut ia, mut ib) = (idx.clone(), idx.clone());
                    (ia[r - 2], ia[r - 1], ib[r - 2], ib[r - 1]) = (i, p, p, j);
                    s += to(at(a, &ia)) * to(at(b, &ib));
                }
                out.push(s);
            }
        }
    }
    out
}

/// Runs `f` on a pool of `t` threads.
fn on_threads<R: Send>(t: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(t)
        .build()
        .unwrap()
        .install(f)
}

/// `a @ b` through `matmul`, checked against `naive` within `tol(k, want)`; returns the bits.
fn check<T: Element + Default + PartialEq + std::fmt::Debug>(
    a: Operand<T>,
    b: Operand<T>,
    to: impl Fn(T) -> f64 + Copy,
    tol: impl Fn(usize, f64) -> f64,
    ctx: &str,
) -> Vec<T> {
    let want = naive(&a, &b, to);
    let mut out = vec![T::default(); want.len()];
    matmul(a, b, &mut out).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let k = a.shape[a.shape.len() - 1];
    for (i, (g, w)) in out.iter().zip(&want).enumerate() {
        let g = to(*g);
        assert!(
            (g - w).abs() <= tol(k, *w),
            "{ctx}: element {i}: {g} vs {w}"
        );
    }
    out
}

fn f32_tol(k: usize, _: f64) -> f64 {
    2.0 * (k as f64 + 1.0) * f32::EPSILON as f64
}

/// Layouts of a `(2, 3, rows, cols)` operand over a buffer of `len` values: contiguous;
/// transposed matrices; the first batch dim broadcast (stride 0) and the second reversed;
/// every matrix row reversed and the columns stepped by 2 from an offset.
fn layouts(rows: usize, cols: usize) -> Vec<(usize, [isize; 4], &'static str)> {
    let (r, c) = (rows as isize, cols as isize);
    let mat = r * c;
    vec![
        (0, [3 * mat, mat, c, 1], "contiguous"),
        (0, [3 * mat, mat, 1, r], "transposed"),
        (
            2 * mat as usize,
            [0, -mat, c, 1],
            "broadcast, reversed batch",
        ),
        (
            ((r - 1) * 2 * c + 1) as usize,
            [6 * mat, 2 * mat, -2 * c, 2],
            "reversed rows, stepped columns",
        ),
    ]
}

/// f32 and f64 over every layout pair, every kernel, one to three threads: within rounding of
/// the naive product, and the same bits whatever the thread count.
#[test]
fn floats_every_layout_kernel_and_thread_count() {
    let (m, k, n) = (13, 37, 29);
    let data = values(7, 64 * m * k * 4);
    let datb = values(8, 64 * k * n * 4);
    for kern in Kernel::testable().unwrap() {
        for (oa, sa, wa) in layouts(m, k) {
            for (ob, sb, wb) in layouts(k, n) {
                let shape_a = [2, 3, m, k];
                let shape_b = [2, 3, k, n];
                let ctx = format!("{kern:?} A {wa}, B {wb}");
                let a32: Vec<f32> = data.iter().map(|&x| x as f32).collect();
                let b32: Vec<f32> = datb.iter().map(|&x| x as f32).collect();
                let a = Operand {
                    data: &a32,
                    offset: oa,
                    shape: &shape_a,
                    strides: &sa,
                };
                let b = Operand {
                    data: &b32,
                    offset: ob,
                    shape: &shape_b,
                    strides: &sb,
                };
                let bits: Vec<Vec<f32>> = (1..=3)
                    .map(|t| {
                        on_threads(t, || {
                            with_kernel(kern, || check(a, b, |x| x as f64, f32_tol, &ctx)).unwrap()
                        })
                    })
                    .collect();
                assert!(
                    bits.iter().all(|x| x == &bits[0]),
                    "{ctx}: thread counts differ"
                );
                let a = Operand {
                    data: &data,
                    ..a.cast()
                };
                let b = Operand {
                    data: &datb,
                    ..b.cast()
                };
                let tol = |k: usize, _| 2.0 * (k as f64 + 1.0) * f64::EPSILON;
                with_kernel(kern, || check(a, b, |x| x, tol, &ctx)).unwrap();
            }
        }
    }
}

/// Re-typing an operand's view (same offset, shape and strides) for another buffer.
trait Cast<'a> {
    fn cast<U>(self) -> Operand<'a, U>;
}
impl<'a, T> Cast<'a> for Operand<'a, T> {
    fn cast<U>(self) -> Operand<'a, U> {
        Operand {
            data: &[],
            offset: self.offset,
            shape: self.shape,
            strides: self.strides,
        }
    }
}

/// A batch whose B is one matrix (broadcast) and whose A's batch dims continue its rows runs
/// as one tall product; with A's batch dims not continuing them it runs product by product.
/// Both give the naive product on two threads, large enough to split.
#[test]
fn folded_and_unfolded_batches() {
    let (m, k, n) = (64, 96, 80);
    let a: Vec<f32> = values(1, 4 * m * k + 4 * k)
        .iter()
        .map(|&x| x as f32)
        .collect();
    let b: Vec<f32> = values(2, k * n).iter().map(|&x| x as f32).collect();
    let shape_a = [4, m, k];
    let shape_b = [4, k, n];
    let b_strides = [0, n as isize, 1];
    for (sa, what) in [
        ([(m * k) as isize, k as isize, 1], "folds"),
        (
            [(m * k + k) as isize, k as isize, 1],
            "gaps between products",
        ),
    ] {
        let a = Operand {
            data: &a,
            offset: 0,
            shape: &shape_a,
            strides: &sa,
        };
        let b = Operand {
            data: &b,
            offset: 0,
            shape: &shape_b,
            strides: &b_strides,
        };
        on_threads(2, || check(a, b, |x| x as f64, f32_tol, what));
    }
}

/// f16 and bf16 accumulate in f32 and round once; integers wrap as NumPy's do; bool is the
/// or of ands. Each through every kernel (bf16 takes AMX or `vdpbf16ps` where they run).
#[test]
fn every_element_type() {
    let (m, k, n) = (9, 70, 11);
    let shape_a = [2, m, k];
    let shape_b = [2, k, n];
    let (ra, rb) = (row_major(&shape_a), row_major(&shape_b));
    let va = values(3, 2 * m * k);
    let vb = values(4, 2 * k * n);
    for kern in Kernel::testable().unwrap() {
        with_kernel(kern, || {
            let half_tol = |eps: f64| move |k: usize, w: f64| f32_tol(k, w) + w.abs() * eps;
            let ah: Vec<f16> = va.iter().map(|&x| f16::from_f64(x)).collect();
            let bh: Vec<f16> = vb.iter().map(|&x| f16::from_f64(x)).collect();
            check(
                Operand::new(&ah, &shape_a, &ra),
                Operand::new(&bh, &shape_b, &rb),
                |x: f16| x.to_f64(),
                half_tol(1.0 / 2048.0),
                &format!("{kern:?} f16"),
            );
            let ab: Vec<bf16> = va.iter().map(|&x| bf16::from_f64(x)).collect();
            let bb: Vec<bf16> = vb.iter().map(|&x| bf16::from_f64(x)).collect();
            check(
                Operand::new(&ab, &shape_a, &ra),
                Operand::new(&bb, &shape_b, &rb),
                |x: bf16| x.to_f64(),
                half_tol(1.0 / 256.0),
                &format!("{kern:?} bf16"),
            );
        })
        .unwrap();
    }
    // i8 products wrap: 100 * 100 * 70 overflows i8 many times over.
    let ai: Vec<i8> = va.iter().map(|&x| (x * 127.0) as i8).collect();
    let bi: Vec<i8> = vb.iter().map(|&x| (x * 127.0) as i8).collect();
    let mut out = vec![0i8; 2 * m * n];
    let (a, b) = (
        Operand::new(&ai, &shape_a, &ra),
        Operand::new(&bi, &shape_b, &rb),
    );
    matmul(a, b, &mut out).unwrap();
    let want = naive(&a, &b, |x| x as f64);
    for (g, w) in out.iter().zip(&want) {
        assert_eq!(*g, (*w as i64) as i8);
    }
    let au: Vec<u64> = va.iter().map(|&x| (x * 1e6).abs() as u64).collect();
    let bu: Vec<u64> = vb.iter().map(|&x| (x * 1e6).abs() as u64).collect();
    let mut out = vec![0u64; 2 * m * n];
    let (a, b) = (
        Operand::new(&au, &shape_a, &ra),
        Operand::new(&bu, &shape_b, &rb),
    );
    matmul(a, b, &mut out).unwrap();
    for (e, g) in out.iter().enumerate() {
        let (bi, i, j) = (e / (m * n), e / n % m, e % n);
        let w = (0..k).fold(0u64, |s, p| {
            s.wrapping_add(au[bi * m * k + i * k + p].wrapping_mul(bu[bi * k * n + p * n + j]))
        });
        assert_eq!(*g, w);
    }
    let ab: Vec<bool> = va.iter().map(|&x| x > 0.9).collect();
    let bb: Vec<bool> = vb.iter().map(|&x| x > 0.9).collect();
    let mut out = vec![false; 2 * m * n];
    let (a, b) = (
        Operand::new(&ab, &shape_a, &ra),
        Operand::new(&bb, &shape_b, &rb),
    );
    matmul(a, b, &mut out).unwrap();
    let want = naive(&a, &b, |x| x as u8 as f64);
    for (g, w) in out.iter().zip(&want) {
        assert_eq!(*g, *w > 0.0);
    }
}

/// Empty dims: m, n or the batch 0 leave nothing to write; k = 0 writes zeros.
#[test]
fn empty_dims() {
    for (batch, m, k, n) in [(0, 3, 4, 5), (2, 0, 4, 5), (2, 3, 4, 0), (2, 3, 0, 5)] {
        let (sa, sb) = ([batch, m, k], [batch, k, n]);
        let (ra, rb) = (row_major(&sa), row_major(&sb));
        let (a, b) = (vec![1.0f32; batch * m * k], vec![1.0f32; batch * k * n]);
        let mut out = vec![f32::NAN; batch * m * n];
        matmul(
            Operand::new(&a, &sa, &ra),
            Operand::new(&b, &sb, &rb),
            &mut out,
        )
        .unwrap();
        assert!(out.iter().all(|&x| x == 0.0), "{batch} {m} {k} {n}");
    }
}

/// Each refusal, before anything is written: shapes that do not form a product, an output of
/// the wrong length, and views reaching past either end of their buffers.
#[test]
fn refusals() {
    let data = vec![1.0f32; 64];
    let mut out = vec![7.0f32; 16];
    let op = |shape: &'static [usize], strides: &'static [isize], offset| Operand {
        data: &data,
        offset,
        shape,
        strides,
    };
    let shape = |a: &[usize], b: &[usize]| Error::Shape {
        a: a.into(),
        b: b.into(),
    };
    let r = matmul(op(&[4, 4], &[4, 1], 0), op(&[3, 4], &[4, 1], 0), &mut out);
    assert_eq!(r, Err(shape(&[4, 4], &[3, 4])));
    let r = matmul(op(&[4], &[1], 0), op(&[4], &[1], 0), &mut out);
    assert_eq!(r, Err(shape(&[4], &[4])));
    let r = matmul(
        op(&[2, 2, 2], &[4, 2, 1], 0),
        op(&[1, 2, 2], &[4, 2, 1], 0),
        &mut out,
    );
    assert_eq!(r, Err(shape(&[2, 2, 2], &[1, 2, 2])));
    let r = matmul(op(&[4, 4], &[4, 1], 0), op(&[4, 2], &[2, 1], 0), &mut out);
    assert_eq!(r, Err(Error::Output { want: 8, got: 16 }));
    let r = matmul(op(&[4, 4], &[16, 1], 16), op(&[4, 4], &[4, 1], 0), &mut out);
    assert_eq!(r, Err(Error::OutOfBounds('a')));
    let r = matmul(op(&[4, 4], &[4, 1], 0), op(&[4, 4], &[-4, 1], 8), &mut out);
    assert_eq!(r, Err(Error::OutOfBounds('b')));
    assert!(out.iter().all(|&x| x == 7.0));
    assert!(Error::OutOfBounds('b')
        .to_string()
        .contains("b reaches outside"));
}

/// A selected GEMM run on its own: overwriting, then accumulating onto what C holds, on one
/// and two threads, with a transposed A; and the direct-A entry where the GEMM has it.
#[test]
fn selected_gemm_runs_and_accumulates() {
    let (m, k, n) = (70, 50, 90);
    let a: Vec<f64> = values(5, m * k);
    let b: Vec<f64> = values(6, k * n);
    // A stored transposed (k x m) and read through its strides.
    let at = Mat::new(&a, 0, 1, m as isize);
    let bm = Mat::new(&b, 0, n as isize, 1);
    let want: Vec<f64> = (0..m * n)
        .map(|e| (0..k).map(|p| at.get(e / n, p) * bm.get(p, e % n)).sum())
        .collect();
    let tol = 4.0 * k as f64 * f64::EPSILON;
    for kern in Kernel::testable().unwrap() {
        let g = with_kernel(kern, select::<f64>).unwrap();
        assert!(g.nr() >= 8 && !g.narrows());
        for t in [1, 2] {
            let mut c = vec![f64::NAN; m * n];
            on_threads(t, || g.run([m, n, k], &at, &bm, &mut c, t));
            for (x, w) in c.iter().zip(&want) {
                assert!((x - w).abs() <= tol, "{kern:?} {t}t: {x} vs {w}");
            }
            on_threads(t, || g.run_into([m, n, k], &at, &bm, &mut c, t, true));
            for (x, w) in c.iter().zip(&want) {
                assert!(
                    (x - 2.0 * w).abs() <= 2.0 * tol,
                    "{kern:?} {t}t add: {x} vs {w}"
                );
            }
        }
        if g.reads_a_direct(n) {
            let mut c = vec![f64::NAN; m * n];
            assert!(g.run_direct_a([m, n, k], &at, &bm, &mut c, false));
            for (x, w) in c.iter().zip(&want) {
                assert!((x - w).abs() <= tol, "{kern:?} direct: {x} vs {w}");
            }
        }
    }
}
