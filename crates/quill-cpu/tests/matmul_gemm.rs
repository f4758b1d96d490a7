//! The GEMM's paths beyond the shape rules (`matmul.rs` covers those): every size 1..67 on
//! every kernel, the column split taken when m is small, the same bits whatever the thread
//! count, non-contiguous operands on those paths, and the bf16 path (`vdpbf16ps` where the CPU
//! has AVX512_BF16, widened to f32 elsewhere) against a naive f64 product of the bf16 inputs.

use quill_array::NDArray;
use quill_core::{s, DType};
use quill_gemm::{with_kernel, CacheSizes, Kernel};
use quill_test_support::Prng;

/// The naive product of row-major `a` (m x k) and `b` (k x n) in f64.
fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn f64s(x: &NDArray) -> Vec<f64> {
    x.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Values in [-1, 1] of `dt`.
fn rand(rng: &mut Prng, shape: &[usize], dt: DType) -> NDArray {
    let v: Vec<f64> = (0..shape.iter().product())
        .map(|_| rng.unit() * 2.0 - 1.0)
        .collect();
    NDArray::from_vec(v, shape).unwrap().astype(dt).unwrap()
}

/// Checks the 2-D product `a @ b` against `naive` on the values `a` and `b` hold (so rounding
/// of the inputs to f16 / bf16 is part of the reference): f32 accumulation error grows with k,
/// and a half-precision output is rounded once more.
fn check(a: &NDArray, b: &NDArray, ctx: &str) {
    let got = a.matmul(b).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    check_against(a, b, &got, ctx);
}

/// Checks `got` as the product `a @ b`, as [`check`] does.
fn check_against(a: &NDArray, b: &NDArray, got: &NDArray, ctx: &str) {
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    assert_eq!(got.shape(), &[m, n], "{ctx}");
    let want = naive(&f64s(a), &f64s(b), m, k, n);
    let (acc_eps, out_eps) = match a.dtype() {
        DType::F64 => (f64::EPSILON, 0.0),
        DType::BF16 => (f32::EPSILON as f64, 1.0 / 256.0),
        DType::F16 => (f32::EPSILON as f64, 1.0 / 2048.0),
        _ => (f32::EPSILON as f64, 0.0),
    };
    for (i, (g, w)) in f64s(got).iter().zip(&want).enumerate() {
        let tol = 2.0 * (k as f64 + 1.0) * acc_eps + w.abs() * out_eps;
        assert!(
            (g - w).abs() <= tol,
            "{ctx}: element {i} ({}, {}): got {g}, want {w}",
            i / n,
            i % n
        );
    }
}

fn kernels() -> Vec<Kernel> {
    quill_test_support::kernels::available()
}

/// Runs `f` on a pool of `t` threads.
fn on_threads<R: Send>(t: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(t)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn cache_sizes_are_plausible() {
    let c = CacheSizes::get();
    assert!(c.l1d >= 8 << 10 && c.l1d < c.l2, "{c:?}");
    assert!(c.l2 <= 64 << 20, "{c:?}");
}

/// Every m, n and k from 1 to 67 (each swept with the other two fixed at sizes that leave edge
/// tiles), every kernel, one and two threads.
#[test]
fn every_size_to_67_every_kernel() {
    let mut rng = Prng::new(11);
    for kern in kernels() {
        for dt in [DType::F32, DType::F64] {
            for t in [1, 2] {
                for x in 1..=67 {
                    for (m, k, n) in [(x, 37, 45), (29, x, 53), (23, 41, x)] {
                        let a = rand(&mut rng, &[m, k], dt);
                        let b = rand(&mut rng, &[k, n], dt);
                        let ctx = format!("{kern:?} {dt} {t}t {m}x{k}x{n}");
                        on_threads(t, || with_kernel(kern, || check(&a, &b, &ctx)).unwrap());
                    }
                }
            }
        }
    }
}

/// Small m with wide n (the column split), with n not a multiple of any tile width and deep
/// enough for several depth blocks, on 2 and 3 threads; the Linear-layer shapes too.
#[test]
fn column_split_small_m() {
    let mut rng = Prng::new(12);
    let shapes = [
        (1, 300, 1000),
        (1, 1100, 1000),
        (5, 513, 97),
        (32, 512, 512),
        (47, 130, 1001),
        (128, 784, 130),
    ];
    for kern in kernels() {
        for t in [2, 3] {
            for &(m, k, n) in &shapes {
                let a = rand(&mut rng, &[m, k], DType::F32);
                let b = rand(&mut rng, &[k, n], DType::F32);
                let ctx = format!("{kern:?} {t}t {m}x{k}x{n}");
                on_threads(t, || with_kernel(kern, || check(&a, &b, &ctx)).unwrap());
            }
        }
    }
}

/// One thread, the row split and the column split sum every element in the same order, so
/// they agree to the bit, whether the product starts inside a pool or outside one.
#[test]
fn same_bits_for_any_thread_count() {
    let mut rng = Prng::new(13);
    for kern in kernels() {
        for (m, k, n) in [
            (8, 700, 900),
            (300, 500, 200),
            (64, 64, 64),
            (1000, 128, 384),
            // Large, but B so narrow that the threads take stripes of rows (`SHARED_B_PACK`).
            (1200, 1024, 60),
        ] {
            for dt in [DType::F32, DType::BF16] {
                let a = rand(&mut rng, &[m, k], dt);
                let b = rand(&mut rng, &[k, n], dt);
                let run = |t| {
                    on_threads(t, || with_kernel(kern, || f64s(&a.matmul(&b).unwrap()))).unwrap()
                };
                let one = run(1);
                for t in [2, 3, 4] {
                    assert!(
                        run(t) == one,
                        "{kern:?} {dt} {m}x{k}x{n}: {t} threads differ from 1"
                    );
                }
                // From outside any pool (this test's own thread): the caller runs parts and
                // the global pool's threads claim the rest.
                let outside = with_kernel(kern, || f64s(&a.matmul(&b).unwrap())).unwrap();
                assert!(
                    outside == one,
                    "{kern:?} {dt} {m}x{k}x{n}: outside the pool differs"
                );
            }
        }
    }
}

/// Products small enough for one stripe per thread: rows when A's packing costs more (a
/// row-major A is transposed into its panels), columns when B's does (B transposed) or costs
/// the same; A and B row-major, transposed, with negative steps and offsets; 2 and 3 threads
/// (uneven stripes), against the f64 reference and bit for bit against one thread.
#[test]
fn stripes_of_rows_or_columns() {
    let mut rng = Prng::new(31);
    for kern in kernels() {
        for dt in [DType::F32, DType::F64] {
            let a = rand(&mut rng, &[301, 130], dt);
            let at = rand(&mut rng, &[130, 301], dt).transpose(0, 1).unwrap();
            let aw = rand(&mut rng, &[303, 260], dt);
            let an = aw.slice(&s![1..302, ..;-2]).unwrap();
            let an = an.slice(&s![..;-1, ..]).unwrap();
            let b = rand(&mut rng, &[130, 200], dt);
            let bt = rand(&mut rng, &[200, 130], dt).transpose(0, 1).unwrap();
            let cases = [
                (&a, &b, "rows: A @ B"),
                (&an, &b, "rows: reversed stepped A @ B"),
                (&at, &b, "columns: A^T @ B"),
                (&a, &bt, "columns: A @ B^T"),
                // A gathered (4 a value) against B transposed (3): rows still pack less.
                (&an, &bt, "rows: reversed stepped A @ B^T"),
            ];
            for (a, b, what) in cases {
                let run = |t| on_threads(t, || with_kernel(kern, || a.matmul(b).unwrap()).unwrap());
                let one = f64s(&run(1));
                for t in [2, 3] {
                    let ctx = format!("{kern:?} {dt} {t}t {what}");
                    let got = run(t);
                    check_against(a, b, &got, &ctx);
                    assert!(f64s(&got) == one, "{ctx}: differs from one thread");
                }
            }
        }
    }
}

/// Transposed, negative-step, offset and broadcast (stride-0) operands on the small-m and
/// bf16 paths.
#[test]
fn non_contiguous_operands() {
    let mut rng = Prng::new(14);
    for kern in kernels() {
        for dt in [DType::F32, DType::BF16] {
            for t in [1, 2] {
                // A transposed (column-major), B a negative-step slice of a wider matrix.
                let at = rand(&mut rng, &[77, 9], dt).transpose(0, 1).unwrap();
                let bw = rand(&mut rng, &[77, 150], dt);
                let b = bw.slice(&s![.., 3..;-2]).unwrap();
                let b = b.slice(&s![..;-1, ..]).unwrap();
                // A offset into a bigger buffer; B transposed.
                let ab = rand(&mut rng, &[40, 90], dt);
                let a2 = ab.slice(&s![5..30, 7..88]).unwrap();
                let b2 = rand(&mut rng, &[70, 81], dt).transpose(0, 1).unwrap();
                // A broadcast along its rows (every row the same), B a broadcast column.
                let row = rand(&mut rng, &[1, 65], dt);
                let a3 = row.broadcast_to(&[13, 65]).unwrap();
                let col = rand(&mut rng, &[65, 1], dt);
                let b3 = col.broadcast_to(&[65, 40]).unwrap();
                // B with its rows reversed (negative row stride, unit column stride).
                let b4 = rand(&mut rng, &[81, 19], dt);
                let b4 = b4.slice(&s![..;-1, ..]).unwrap();
                // Packed (past the in-place size) through the transposing copies: A with its
                // rows reversed and a step along them, B transposed with its columns reversed.
                let a5 = rand(&mut rng, &[81, 203], dt);
                let a5 = a5.slice(&s![..;-1, 1..201]).unwrap();
                let b5 = rand(&mut rng, &[37, 200], dt).transpose(0, 1).unwrap();
                let b5 = b5.slice(&s![.., ..;-1]).unwrap();
                let cases = [
                    (&at, &b, "T @ -step"),
                    (&a2, &b2, "offset @ T"),
                    (&a3, &b3, "bcast @ bcast"),
                    (&a2, &b4, "offset @ reversed rows"),
                    (&a5, &b5, "reversed rows @ T reversed columns"),
                ];
                for (a, b, what) in cases {
                    let ctx = format!("{kern:?} {dt} {t}t {what}");
                    on_threads(t, || with_kernel(kern, || check(a, b, &ctx)).unwrap());
                }
            }
        }
    }
}

/// bf16 on every kernel (the AVX-512 one uses `vdpbf16ps` where the CPU has AVX512_BF16, the
/// AMX one tiles of 32 x 32 over groups of 32 depth values, 2048 depth values a block):
/// odd depths (a pair padded with zero), depths around whole groups, edge tiles, several
/// depth blocks, batches.
#[test]
fn bf16_against_f64_reference() {
    let mut rng = Prng::new(15);
    for kern in kernels() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (13, 3, 33),
            (12, 2, 32),
            (25, 385, 65),
            (7, 1001, 9),
            (130, 257, 70),
            (64, 64, 64),
            (32, 32, 32),
            (33, 31, 31),
            (64, 800, 96),
            (96, 769, 64),
            // Past AMX's 2048-deep blocks: edge tiles add the first block's sums, full tiles
            // load them, across two and three blocks.
            (40, 2085, 45),
            (64, 4097, 64),
        ] {
            let a = rand(&mut rng, &[m, k], DType::BF16);
            let b = rand(&mut rng, &[k, n], DType::BF16);
            let ctx = format!("{kern:?} bf16 {m}x{k}x{n}");
            with_kernel(kern, || check(&a, &b, &ctx)).unwrap();
        }
        // A batch: each product checked on its own.
        let a = rand(&mut rng, &[3, 20, 31], DType::BF16);
        let b = rand(&mut rng, &[3, 31, 18], DType::BF16);
        let c = with_kernel(kern, || a.matmul(&b).unwrap()).unwrap();
        for i in 0..3 {
            let (x, y) = (
                a.slice(&s![i, .., ..]).unwrap(),
                b.slice(&s![i, .., ..]).unwrap(),
            );
            let want = with_kernel(kern, || x.matmul(&y).unwrap()).unwrap();
            assert_eq!(
                f64s(&c.slice(&s![i, .., ..]).unwrap()),
                f64s(&want),
                "{kern:?} batch {i}"
            );
        }
    }
}

/// Batches of bf16 products on two threads: spread across the batch (each product whole on
/// one thread, its rounded output beside its f32 block), and folded into one tall product
/// when B is shared (a broadcast batch dim); each checked against the f64 reference.
#[test]
fn bf16_batches_on_threads() {
    let mut rng = Prng::new(17);
    for kern in kernels() {
        let a = rand(&mut rng, &[8, 70, 130], DType::BF16);
        let b = rand(&mut rng, &[8, 130, 66], DType::BF16);
        let shared = rand(&mut rng, &[1, 130, 66], DType::BF16);
        let shared = shared.broadcast_to(&[8, 130, 66]).unwrap();
        for (b, what) in [(&b, "per-product B"), (&shared, "shared B")] {
            let c = on_threads(2, || with_kernel(kern, || a.matmul(b).unwrap())).unwrap();
            for i in 0..8 {
                let (x, y) = (
                    a.slice(&s![i, .., ..]).unwrap(),
                    b.slice(&s![i, .., ..]).unwrap(),
                );
                let ci = c.slice(&s![i, .., ..]).unwrap();
                let ctx = format!("{kern:?} {what} product {i}");
                check_against(&x, &y, &ci, &ctx);
            }
        }
    }
}

/// An infinity or NaN in A reaches exactly the outputs whose sums include it: zero padding
/// (rows, columns and depth past the matrix) must not turn into 0 * inf = NaN elsewhere.
#[test]
fn bf16_non_finite_stays_in_its_row() {
    let mut rng = Prng::new(16);
    for kern in kernels() {
        for (m, k, n) in [(40, 33, 35), (5, 3, 7), (64, 800, 64)] {
            let mut a = f64s(&rand(&mut rng, &[m, k], DType::BF16));
            let b = rand(&mut rng, &[k, n], DType::BF16);
            a[k + 2] = f64::INFINITY; // row 1
            a[3 * k] = f64::NAN; // row 3
            let a = NDArray::from_vec(a, &[m, k])
                .unwrap()
                .astype(DType::BF16)
                .unwrap();
            let c = f64s(&with_kernel(kern, || a.matmul(&b).unwrap()).unwrap());
            for (e, x) in c.iter().enumerate() {
                let i = e / n;
                let ok = match i {
                    1 => !x.is_finite(),
                    3 => x.is_nan(),
                    _ => x.is_finite(),
                };
                assert!(ok, "{kern:?} {m}x{k}x{n}: element ({i}, {}) = {x}", e % n);
            }
        }
    }
}

/// bf16 products are exact in f32, so sums of small integers come out exact, past the
/// 256 at which a bf16 accumulator would stall.
#[test]
fn bf16_accumulates_in_f32() {
    for kern in kernels() {
        for k in [255, 256, 257, 1000, 2049, 4100] {
            let a = NDArray::full(&[3, k], 1.0, DType::BF16).unwrap();
            let b = NDArray::full(&[k, 5], 1.0, DType::BF16).unwrap();
            let c = with_kernel(kern, || a.matmul(&b).unwrap()).unwrap();
            // k ones sum to k exactly in f32; the bf16 output then rounds k to 8 bits.
            let want = half::bf16::from_f32(k as f32).to_f64();
            assert!(
                f64s(&c).iter().all(|&x| x == want),
                "{kern:?} k={k}: {:?}",
                f64s(&c)
            );
        }
    }
}

/// Every depth value counts exactly once, in every depth block: B's columns hold at most 241
/// ones at random depths (always the first and last), A is ones, so each output is its
/// column's count, exact even in bf16. One term lost or counted twice (at a depth block's
/// edge, an odd depth's padded pair) changes it; the sums of `bf16_accumulates_in_f32`
/// round past 256 and could hide a few.
#[test]
fn bf16_counts_every_depth_once() {
    let mut rng = Prng::new(17);
    for kern in kernels() {
        for k in [1, 2, 31, 255, 257, 1000, 1023, 1025, 2049, 4100] {
            let n = 37;
            let mut b = vec![0.0; k * n];
            let mut want = vec![0.0; n];
            for j in 0..n {
                for p in 0..k {
                    let random = want[j] < 240.0 && rng.chance(150.0 / k as f64);
                    if p == 0 || p == k - 1 || random {
                        b[p * n + j] = 1.0;
                        want[j] += 1.0;
                    }
                }
            }
            let a = NDArray::full(&[5, k], 1.0, DType::BF16).unwrap();
            let b = NDArray::from_vec(b, &[k, n])
                .unwrap()
                .astype(DType::BF16)
                .unwrap();
            for threads in [1, 2] {
                let c = on_threads(threads, || {
                    with_kernel(kern, || a.matmul(&b).unwrap()).unwrap()
                });
                let got = f64s(&c);
                for (e, g) in got.iter().enumerate() {
                    let j = e % n;
                    assert_eq!(
                        *g,
                        want[j],
                        "{kern:?} k={k}, {threads} threads: ({}, {j})",
                        e / n
                    );
                }
            }
        }
    }
}

/// Products up to about 100^3, and each thread's stripe of a product split across threads,
/// skip packing A: the kernel reads A in place through its strides (rows past a partial tile
/// re-read the last row). Every kernel, f32 and f64, on 1 to 3 threads, on transposed,
/// stepped, negative-step, offset and broadcast (stride-0) operands, edge tiles and size-1
/// dims, against the naive product.
#[test]
fn tiny_products_read_a_in_place() {
    let mut rng = Prng::new(16);
    for kern in kernels() {
        for dt in [DType::F32, DType::F64] {
            let big = rand(&mut rng, &[70, 80], dt);
            let tall = rand(&mut rng, &[80, 70], dt);
            let sq = rand(&mut rng, &[101, 103], dt);
            let sq2 = rand(&mut rng, &[102, 101], dt);
            let views: Vec<(&str, NDArray, NDArray)> = vec![
                (
                    "contiguous, edge tiles",
                    big.slice(&s![..13, ..37]).unwrap().deep_copy().unwrap(),
                    tall.slice(&s![..37, ..21]).unwrap().deep_copy().unwrap(),
                ),
                (
                    "1 x 1 x 1",
                    big.slice(&s![..1, ..1]).unwrap(),
                    tall.slice(&s![..1, ..1]).unwrap(),
                ),
                (
                    "size-1 m and n",
                    big.slice(&s![5..6, ..40]).unwrap(),
                    tall.slice(&s![..40, 3..4]).unwrap(),
                ),
                (
                    "a transposed",
                    tall.slice(&s![..30, ..25])
                        .unwrap()
                        .transpose(0, 1)
                        .unwrap(),
                    big.slice(&s![..30, ..33]).unwrap(),
                ),
                (
                    "stepped",
                    big.slice(&s![..;3, 1..;2]).unwrap(),
                    tall.slice(&s![..;2, ..;4]).unwrap(),
                ),
                (
                    "negative steps",
                    big.slice(&s![..;-3, ..;-2]).unwrap(),
                    tall.slice(&s![..;-2, 5..;-5]).unwrap(),
                ),
                (
                    "offset",
                    big.slice(&s![9..30, 17..60]).unwrap(),
                    tall.slice(&s![11..54, 2..50]).unwrap(),
                ),
                (
                    "stride-0 rows",
                    big.slice(&s![4..5, ..50])
                        .unwrap()
                        .broadcast_to(&[19, 50])
                        .unwrap(),
                    tall.slice(&s![..50, ..17]).unwrap(),
                ),
                (
                    "stride-0 depth",
                    big.slice(&s![..14, 6..7])
                        .unwrap()
                        .broadcast_to(&[14, 31])
                        .unwrap(),
                    tall.slice(&s![..31, ..40]).unwrap(),
                ),
                (
                    "64^3",
                    big.slice(&s![..64, ..64]).unwrap(),
                    tall.slice(&s![..64, ..64]).unwrap(),
                ),
                (
                    "100^3, edge tiles both ways",
                    sq.slice(&s![..100, ..100]).unwrap(),
                    sq2.slice(&s![..100, ..100]).unwrap(),
                ),
                (
                    "100 x 90 x 100, A transposed and reversed",
                    sq.slice(&s![..90, ..;-1])
                        .unwrap()
                        .slice(&s![.., ..100])
                        .unwrap()
                        .transpose(0, 1)
                        .unwrap(),
                    sq2.slice(&s![1..91, ..100]).unwrap(),
                ),
            ];
            // On 2 and 3 threads the larger ones are split in stripes, each reading A in place.
            for (what, a, b) in &views {
                for t in [1, 2, 3] {
                    let ctx = format!("{kern:?} {dt} {what} {t}t");
                    on_threads(t, || with_kernel(kern, || check(a, b, &ctx)).unwrap());
                }
            }
            // A broadcast batch: one A matrix (stride-0 batch) against several B matrices, and
            // a stepped batch of A against one B (stride-0 batch); each product checked alone.
            let a1 = big.slice(&s![..9, ..21]).unwrap();
            let bs = rand(&mut rng, &[5, 21, 11], dt);
            let ab = a1.broadcast_to(&[5, 9, 21]).unwrap();
            let cube = rand(&mut rng, &[8, 9, 21], dt).slice(&s![..;-2]).unwrap();
            let b1 = tall.slice(&s![..21, ..11]).unwrap();
            let bb = b1.broadcast_to(&[4, 21, 11]).unwrap();
            for (a, b) in [(&ab, &bs), (&cube, &bb)] {
                let c = with_kernel(kern, || a.matmul(b).unwrap()).unwrap();
                for i in 0..b.shape()[0] {
                    let (x, y) = (
                        a.slice(&s![i, .., ..]).unwrap(),
                        b.slice(&s![i, .., ..]).unwrap(),
                    );
                    let want = naive(
                        &f64s(&x.deep_copy().unwrap()),
                        &f64s(&y.deep_copy().unwrap()),
                        9,
                        21,
                        11,
                    );
                    for (e, (g, w)) in f64s(&c.slice(&s![i, .., ..]).unwrap())
                        .iter()
                        .zip(&want)
                        .enumerate()
                    {
                        assert!(
                            (g - w).abs() <= 2.0 * 22.0 * f32::EPSILON as f64,
                            "{kern:?} {dt} batch {i} element {e}: {g} vs {w}"
                        );
                    }
                }
            }
            // Size-0 dims: an empty product, and k = 0 (zeros).
            let z = |s: &[usize]| NDArray::zeros(s, dt).unwrap();
            let e = with_kernel(kern, || z(&[0, 5]).matmul(&z(&[5, 3])).unwrap()).unwrap();
            assert_eq!(e.shape(), &[0, 3]);
            let r = with_kernel(kern, || {
                rand(&mut rng, &[0, 4], dt)
                    .transpose(0, 1)
                    .unwrap()
                    .matmul(&z(&[0, 6]))
                    .unwrap()
            })
            .unwrap();
            assert_eq!(r.shape(), &[4, 6]);
            assert!(f64s(&r).iter().all(|&x| x == 0.0), "{kern:?} {dt}: k = 0");
        }
    }
}

/// Products with few rows (up to 36) read a unit-column-stride f32 / f64 B where it lies
/// instead of packing it, all but a partial last panel. Every kernel, one and two threads,
/// f32 and f64; B contiguous, with its rows reversed, an offset column window of a wider
/// matrix, and one row broadcast down all rows (row stride 0); depths past one depth block;
/// widths with and without a partial panel; 36 and 37 rows either side of the threshold.
#[test]
fn few_rows_read_b_in_place() {
    let mut rng = Prng::new(21);
    for kern in kernels() {
        for dt in [DType::F32, DType::F64] {
            for (m, k, n) in [
                (1, 300, 96),
                (5, 40, 100),
                (36, 450, 70),
                (36, 1100, 70),
                (37, 33, 130),
            ] {
                let a = rand(&mut rng, &[m, k], dt);
                let plain = rand(&mut rng, &[k, n], dt);
                let rev = rand(&mut rng, &[k, n], dt);
                let rev = rev.slice(&s![..;-1, ..]).unwrap();
                let wide = rand(&mut rng, &[k + 2, n + 9], dt);
                let window = wide.slice(&s![1..k + 1, 5..n + 5]).unwrap();
                let row = rand(&mut rng, &[1, n], dt);
                let bcast = row.broadcast_to(&[k, n]).unwrap();
                let cases = [
                    (&plain, "contiguous"),
                    (&rev, "reversed rows"),
                    (&window, "offset window"),
                    (&bcast, "broadcast row"),
                ];
                for (b, what) in cases {
                    for t in [1, 2] {
                        let ctx = format!("{kern:?} {dt} {m}x{k}x{n} {t}t B {what}");
                        on_threads(t, || with_kernel(kern, || check(&a, b, &ctx)).unwrap());
                    }
                }
            }
        }
    }
}
