//! Unit tests of the GEMM's block sizes, thread splits, stampings, B read in place and every
//! loop of the nest (`super`), against naive products.

use super::*;
use crate::kernel::{skip, Kernel};
use crate::kernels;
use crate::select::select;
use crate::types::Family;
use crate::with_kernel;

fn zen3() -> CacheSizes {
    CacheSizes {
        l1d: 32 << 10,
        l2: 512 << 10,
        l3: 32 << 20,
    }
}

#[test]
fn blocks_follow_the_caches() {
    let k = kernels::generic::<f32, 4, 16, false>;
    // Zen 3, AVX2 f32 tile: the sizes once tuned by hand there (KC 256, MC about 240).
    assert_eq!(
        Gemm::for_caches(k, 6, 16, 1, zen3()).sizes(),
        [6, 16, 256, 252, 4096]
    );
    // 48 KiB L1d, 1 MiB L2, AVX-512 f32 tile: its 24-line C tile asks for 512 steps.
    let zen4 = CacheSizes {
        l1d: 48 << 10,
        l2: 1 << 20,
        l3: 32 << 20,
    };
    assert_eq!(
        Gemm::for_caches(k, 12, 32, 1, zen4).sizes(),
        [12, 32, 512, 252, 4096]
    );
    // The AVX2 tile there (6 lines) keeps the L1 rule's depth.
    assert_eq!(Gemm::for_caches(k, 6, 16, 1, zen4).sizes()[2], 384);
    // bf16 pairs: the same bytes per step, twice the depth.
    let p = Gemm::<f32, u32>::for_caches(|_| {}, 12, 32, 2, zen4).sizes();
    assert_eq!(p, [12, 32, 1024, 252, 4096]);
    // AMX's deep blocks: 2048 depth values, A blocks of half of a 2 MiB L2.
    let spr = CacheSizes {
        l1d: 48 << 10,
        l2: 2 << 20,
        l3: 105 << 20,
    };
    let p = Gemm::<f32, u32>::for_steps(|_| {}, 32, 32, 2, 1024, spr).sizes();
    assert_eq!(p, [32, 32, 2048, 256, 4096]);
    // Tiny caches clamp to the smallest workable blocks, but for the depth the C tile
    // asks (4 lines, 128 steps).
    let tiny = CacheSizes {
        l1d: 1,
        l2: 1,
        l3: 1,
    };
    assert_eq!(
        Gemm::for_caches(k, 4, 16, 1, tiny).sizes(),
        [4, 16, 128, 4, 16]
    );
    // Equal depth blocks, whole multiples of the unit but for the last.
    let g = Gemm::for_caches(k, 12, 32, 1, zen4);
    assert_eq!(g.depth_step(600, 16), 304);
    assert_eq!(g.depth_step(1024, 16), 512);
    assert_eq!(g.depth_step(1025, 16), 352);
    assert_eq!(g.depth_step(5, 16), 16);
    assert_eq!(g.depth_step(196, 1), 196);
}

/// Stripes of rows when A's packing costs more per thread, of columns when B's does or
/// when there are too few row tiles; the loop nest's row blocks for large products, unless
/// B is narrow.
#[test]
fn split_weighs_packing() {
    let g = Gemm::for_caches(kernels::generic::<f32, 4, 16, false>, 12, 32, 1, zen3());
    // Row-major A (a transpose, cost 3), row-major B (a copy, 1).
    assert_eq!(g.split([256, 256, 256], [3, 1], 2), Split::Rows(132));
    assert_eq!(g.split([1000, 128, 384], [3, 1], 2), Split::Rows(504));
    assert_eq!(g.split([256, 256, 256], [3, 1], 3), Split::Rows(96));
    // A column-major (a copy), B transposed; or equal costs.
    assert_eq!(g.split([256, 256, 256], [1, 3], 2), Split::Columns(2, 128));
    assert_eq!(g.split([256, 256, 256], [3, 3], 2), Split::Columns(2, 128));
    // Too few row tiles (3, under four a thread), small or not.
    assert_eq!(g.split([32, 512, 512], [3, 1], 2), Split::Columns(2, 256));
    assert_eq!(
        g.split([32, 4096, 4096], [3, 1], 2),
        Split::Columns(2, 2048)
    );
    // Large but with a B so narrow (depth blocks of 512 x 64) that every thread packs it
    // whole; one column wider the nest shares its packing.
    assert_eq!(g.split([4096, 64, 2048], [3, 1], 2), Split::Rows(2052));
    assert_eq!(g.split([4096, 65, 2048], [3, 1], 2), Split::Blocks);
    // The nest's own depth blocks count, not KC: 784 deep runs as two blocks of 400, so
    // 400 x 81 is packed on one thread (rows) and 400 x 82 shared (the nest).
    assert_eq!(g.split([8192, 81, 784], [3, 1], 2), Split::Rows(4104));
    assert_eq!(g.split([8192, 82, 784], [3, 1], 2), Split::Blocks);
    // Narrow and large, but rows would pack more (B transposed, few rows): the nest.
    assert_eq!(g.split([100, 64, 65536], [1, 3], 2), Split::Blocks);
    // Large, or one thread, or one panel; stripes up to STRIPE_WORK (645^3).
    assert_eq!(g.split([1024, 1024, 1024], [3, 1], 2), Split::Blocks);
    assert_eq!(g.split([650, 650, 650], [3, 1], 2), Split::Blocks);
    assert_eq!(g.split([640, 640, 640], [3, 1], 2), Split::Rows(324));
    assert_eq!(g.split([512, 512, 512], [3, 1], 2), Split::Rows(264));
    assert_eq!(g.split([400, 400, 400], [3, 1], 2), Split::Rows(204));
    assert_eq!(g.split([256, 256, 256], [3, 1], 1), Split::Blocks);
    assert_eq!(g.split([40, 20, 40], [1, 3], 2), Split::Blocks);
}

/// An edge tile gets the smallest stamping that covers it, and with stampings a thread's
/// share of rows is a multiple of the shortest one, not of MR.
#[cfg(target_arch = "x86_64")]
#[test]
fn stampings_fit_edge_tiles() {
    let set = f32::kernels();
    let full = set.avx512.stamps.packed[2][2];
    let g = Gemm::for_caches(full, 12, 32, 1, zen3()).with_stamps(set.avx512.stamps);
    let s = g.stamps.unwrap();
    for mr in 1..=12 {
        for nr in 1..=32 {
            let want = ((mr - 1) / 4, usize::from(nr > 8) + usize::from(nr > 16));
            assert_eq!(s.index(mr, nr), want, "{mr} x {nr}");
        }
    }
    assert_eq!(s.cols, [8, 16, 32]);
    // Without a half-width kernel the narrowest class is one vector again.
    let avx2 = f64::kernels().avx2;
    let g2 = Gemm::for_caches(avx2.stamps.packed[2][2], 6, 8, 1, zen3()).with_stamps(avx2.stamps);
    let s2 = g2.stamps.unwrap();
    assert_eq!(s2.cols, [4, 4, 8]);
    assert_eq!(s2.index(2, 4), (0, 0));
    assert_eq!(s2.index(3, 5), (1, 2));
    assert_eq!(s2.index(6, 8), (2, 2));
    let plain = Gemm::for_caches(kernels::generic::<f32, 4, 16, false>, 12, 32, 1, zen3());
    assert!(plain.stamps.is_none());
    // 256 rows on 2 threads: 128 each (ten tiles and an 8-row edge), not 132 + 124; 100
    // rows: 52 + 48, not 60 + 40.
    assert_eq!((g.row_unit(), g2.row_unit(), plain.row_unit()), (4, 2, 12));
    assert_eq!(g.split([256, 256, 256], [3, 1], 2), Split::Rows(128));
    assert_eq!(g.split([100, 100, 100], [3, 1], 2), Split::Rows(52));
    assert_eq!(g2.split([100, 100, 100], [3, 1], 2), Split::Rows(50));
}

/// A splitmix-style generator: values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (s ^ (s >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// B is read in place unless its rows lie a multiple of a page apart (or it has one row,
/// or stride-0 rows), and the products either way match the naive one: a small product
/// (direct path) and a nest-sized one, B 1000 and 1024 columns wide, rows reversed too.
#[test]
fn b_in_place_unless_rows_alias() {
    for kern in Kernel::testable().unwrap() {
        let g = with_kernel(kern, select::<f32>).unwrap();
        let data = vec![1.0f32; 64 * 4096];
        let readable = |k: usize, off: usize, rs: isize| {
            g.b_readable([k, 64], &Mat::new(&data, off, rs, 1))
                .is_some()
        };
        let mid = 32 * 4096;
        for (k, rs, want) in [
            (8, 1000, true),
            (8, 1024, false),
            (8, 2048, false),
            (8, -1024, false),
            (8, 1536, true),
            (1, 1024, true),
            (8, 0, true),
        ] {
            assert_eq!(readable(k, mid, rs), want, "{kern:?} k {k} rs {rs}");
        }
        for (m, k, n) in [
            (16, 64, 1024),
            (16, 64, 1000),
            (24, 600, 1024),
            (24, 600, 1000),
        ] {
            let (a, b) = (values(4, m * k), values(5, k * n));
            for reversed in [false, true] {
                // Reversed: row p of B is stored at row k - 1 - p.
                let (off, rs) = if reversed {
                    ((k - 1) * n, -(n as isize))
                } else {
                    (0, n as isize)
                };
                let bv = Mat::new(&b, off, rs, 1);
                let mut c = vec![f32::NAN; m * n];
                g.run([m, n, k], &Mat::new(&a, 0, k as isize, 1), &bv, &mut c, 1);
                for (e, x) in c.iter().enumerate() {
                    let (i, j) = (e / n, e % n);
                    let w: f64 = (0..k)
                        .map(|p| a[i * k + p] as f64 * bv.get(p, j) as f64)
                        .sum();
                    let tol = 2.0 * (k as f64 + 1.0) * f32::EPSILON as f64;
                    assert!(
                        (*x as f64 - w).abs() <= tol,
                        "{kern:?} {m}x{k}x{n} reversed {reversed}: element {e}: {x} vs {w}"
                    );
                }
            }
        }
    }
}

/// The smallest blocks (KC 32, MC = MR, NC = NR), and blocks of three row tiles and five
/// panels swept in runs of two, make every loop of the nest run many times on a small
/// product: depth accumulation, row and column blocks, runs of panels, edge tiles, and the
/// column split, each overwriting C and (`run_into` with `add`) adding to it, against a
/// naive f64 product; k = 0 too.
#[test]
fn tiny_blocks_every_loop() {
    let tiny = CacheSizes {
        l1d: 1,
        l2: 1,
        l3: 1,
    };
    for kern in Kernel::testable().unwrap() {
        let g = with_kernel(kern, select::<f32>).unwrap();
        let tiny_g = Gemm {
            direct: g.direct,
            stamps: g.stamps,
            fused: g.fused,
            fuse_below: g.fuse_below,
            fuse_rows: g.fuse_rows,
            ..Gemm::for_steps(g.kernel, g.mr, g.nr, 1, 32, tiny)
        };
        // Also blocks of several row tiles and panels, whose row tiles sweep runs of two
        // panels (a short run last, a narrow panel at the matrix's edge).
        let runs = Gemm {
            mc: 3 * g.mr,
            nc: 5 * g.nr,
            sweep: 2 * 32 * g.nr * size_of::<f32>(),
            ..tiny_g
        };
        for (g, (m, k, n)) in [tiny_g, runs].into_iter().flat_map(|g| {
            [
                (1, 1, 1),
                (50, 100, 70),
                (3, 65, 129),
                (37, 33, 31),
                (4, 0, 5),
                // Few rows: B read in place, panel by panel, a packed narrow panel last.
                (2 * g.mr + 1, 40, 11 * g.nr + 3),
                // Packed B: several row tiles per block, runs of two, a short run last.
                (IN_PLACE_ROWS + 2 * g.mr + 1, 40, 11 * g.nr + 3),
            ]
            .map(|s| (g, s))
        }) {
            let (a, b) = (values(1, m * k), values(2, k * n));
            let want: Vec<f64> = (0..m * n)
                .map(|e| {
                    let (i, j) = (e / n, e % n);
                    (0..k)
                        .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                        .sum()
                })
                .collect();
            for threads in [1, 2, 3] {
                let mut c = vec![f32::NAN; m * n];
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    g.run(
                        [m, n, k],
                        &Mat::new(&a, 0, k as isize, 1),
                        &Mat::new(&b, 0, n as isize, 1),
                        &mut c,
                        threads,
                    )
                });
                for (e, (x, w)) in c.iter().zip(&want).enumerate() {
                    let tol = 2.0 * (k as f64 + 1.0) * f32::EPSILON as f64;
                    assert!(
                        (*x as f64 - w).abs() <= tol,
                        "{kern:?} sweep {} {m}x{k}x{n} {threads}t: element {e}: {x} vs {w}",
                        g.sweep
                    );
                }
                // Adding onto what C holds, on the same paths.
                let c0 = values(3, m * n);
                let mut c = c0.clone();
                pool.install(|| {
                    g.run_into(
                        [m, n, k],
                        &Mat::new(&a, 0, k as isize, 1),
                        &Mat::new(&b, 0, n as isize, 1),
                        &mut c,
                        threads,
                        true,
                    )
                });
                for (e, ((x, w), x0)) in c.iter().zip(&want).zip(&c0).enumerate() {
                    let tol = 2.0 * (k as f64 + 2.0) * f32::EPSILON as f64;
                    let w = w + *x0 as f64;
                    assert!(
                        (*x as f64 - w).abs() <= tol,
                        "add {kern:?} sweep {} {m}x{k}x{n} {threads}t: element {e}: {x} vs {w}",
                        g.sweep
                    );
                }
            }
        }
    }
}

/// Products through the fusing kernels (`Gemm::fused`: the row tile at row 0 packs each
/// whole B panel as it multiplies) match the same GEMM packing B first bit for bit, two
/// threads (stripes or a shared pack) too, and a naive f64 product: odd depths, two depth
/// blocks, one and three row blocks, partial last panels, B at an odd offset, with reversed
/// rows, or transposed. On one thread the fusing kernel runs once per whole panel and depth
/// block exactly where B's rows are contiguous, fewer than `fuse_below` bytes apart (AVX2: a
/// page; rows 4 KiB apart and two column blocks reach it) and packed, not read in place
/// (`b_in_place`: few rows, rows that allow it), unless the product has `fuse_rows` rows
/// (AVX2: 13, fused, 12 read in place); five rows fuse as an edge tile. Returns how many of
/// this CPU's kernels fuse.
fn fused_packing_matches_packing_first<T: Real + Pack<T> + From<f32> + Into<f64>>(
    select: fn() -> Gemm<T>,
    eps: f64,
) -> usize {
    let mut fusing = 0;
    for kern in Kernel::testable().unwrap() {
        let g = with_kernel(kern, select).unwrap();
        if g.fused.is_none() {
            continue;
        }
        fusing += 1;
        let [_, nr, kc, mc, nc] = g.sizes();
        let rows = IN_PLACE_ROWS + 1;
        let few = g.fuse_rows.min(IN_PLACE_ROWS);
        let page = 4096 / size_of::<T>();
        // Each through the loop nest: deeper than KC, wider than NC or more than a
        // million multiply-adds (smaller products read A in place, `unpacked_a`).
        for (m, k, n) in [
            (rows, kc + 37, 45),
            (rows + 8, 2 * kc + 1, 3 * nr),
            (2 * mc + 7, 33, 300),
            // Rows 4 KiB apart, then a second column block.
            (rows, kc + 1, page),
            // Fewer rows than a tile: B is read in place where its rows allow (never
            // fused), else packed (fused by a kernel that fuses page-apart rows).
            (5, kc + 1, page),
            (rows, 5, nc + 45),
            // Few enough rows to read B in place, except from `fuse_rows` on.
            (few, kc + 1, 100),
            (few - 1, kc + 1, 100),
        ] {
            let to_t = |v: Vec<f32>| v.into_iter().map(T::from).collect::<Vec<T>>();
            let (a, data) = (to_t(values(8, m * k + 3)), to_t(values(9, k * (n + 3) + 1)));
            let a = Mat::new(&a, 3, k as isize, 1);
            let bs = crate::pack::b_layouts(&data, k, n);
            for (b, what) in &bs {
                let case = format!("{kern:?} {m}x{k}x{n}, B {what}");
                let run = |g: &Gemm<T>, threads: usize| {
                    let mut c = vec![T::from(f32::NAN); m * n];
                    g.run([m, n, k], &a, b, &mut c, threads);
                    c
                };
                let before = FUSED_TILES.with(|n| n.get());
                let fused = run(&g, 1);
                let tiles = FUSED_TILES.with(|n| n.get()) - before;
                let near = b.rs.unsigned_abs() * size_of::<T>() < g.fuse_below;
                let packed = g.b_in_place(m, [k, n], b).is_none() || m >= g.fuse_rows;
                let want = if b.cs == 1 && near && packed {
                    n / nr * g.depth_blocks(k)
                } else {
                    0
                };
                assert_eq!(tiles, want, "{case}: fused tiles");
                // The first element whose bits differ, not two whole products in the message.
                let differs = |other: Vec<T>| {
                    let bits = bytemuck::bytes_of::<T>;
                    fused
                        .iter()
                        .zip(&other)
                        .position(|(x, y)| bits(x) != bits(y))
                };
                assert_eq!(differs(run(&g.without_fused(), 1)), None, "{case}");
                assert_eq!(differs(run(&g, 2)), None, "{case}, two threads");
                for (e, &x) in fused.iter().enumerate() {
                    let (i, j) = (e / n, e % n);
                    let w: f64 = (0..k)
                        .map(|p| a.get(i, p).into() * b.get(p, j).into())
                        .sum();
                    let x: f64 = x.into();
                    let tol = 2.0 * (k as f64 + 1.0) * eps;
                    assert!((x - w).abs() <= tol, "{case}: element {e}: {x} vs {w}");
                }
            }
        }
    }
    fusing
}

#[test]
fn fused_f32_packing_matches_packing_first() {
    if fused_packing_matches_packing_first(select::<f32>, f32::EPSILON as f64) == 0 {
        skip("avx2", "the f32 fusing kernels");
    }
}

#[test]
fn fused_f64_packing_matches_packing_first() {
    if fused_packing_matches_packing_first(select::<f64>, f64::EPSILON) == 0 {
        skip("avx2", "the f64 fusing kernels");
    }
}

/// The one selection table gives each family its tile, stampings, fusing limits and depth
/// blocks, f32 and f64 alike (the sizes `select_f32` / `select_f64` gave before the table): the
/// AVX-512 kernels (also under AMX) fuse at any stride and never for few rows, AVX2 below a
/// page and from 13 rows, the portable kernel not at all; bf16 on AMX takes 2048-deep blocks.
#[test]
fn selection_table_per_family() {
    let caches = CacheSizes::get();
    for kern in Kernel::testable().unwrap() {
        let g32 = with_kernel(kern, select::<f32>).unwrap();
        let g64 = with_kernel(kern, select::<f64>).unwrap();
        let (t32, t64, fuse) = match kern {
            Kernel::Amx | Kernel::Avx512 => ([12, 32], [12, 16], Some((usize::MAX, usize::MAX))),
            Kernel::Avx2 => ([6, 16], [6, 8], Some((4096, 13))),
            Kernel::Generic => ([4, 16], [4, 8], None),
        };
        for (got, want_tile) in [(chosen(&g32, caches), t32), (chosen(&g64, caches), t64)] {
            let (tile, fused, stamps, [sizes, derived]) = got;
            assert_eq!(tile, want_tile, "{kern:?}");
            assert_eq!(fused, fuse, "{kern:?}");
            assert_eq!(stamps, kern != Kernel::Generic, "{kern:?}");
            assert_eq!(sizes, derived, "{kern:?}");
        }
        if let Some(g) = with_kernel(kern, crate::select::amx_tiles).unwrap() {
            assert_eq!(g.sizes()[..3], [32, 32, 2048]);
            assert!(g.narrows && g.fused.is_none());
        }
        if let Some(g) = with_kernel(kern, crate::select::bf16_pairs).unwrap() {
            let derived = Gemm::<f32, u32>::for_caches(g.kernel, 12, 32, 2, caches).sizes();
            assert_eq!(g.sizes(), derived);
            assert!(g.narrows && g.fused.is_some() && g.fuse_rows == usize::MAX);
        }
    }
}

/// What the selection table chose for `g`: its tile, its fusing limits, whether it has
/// stampings, and its sizes beside those the caches' rule derives for its tile.
type Chosen = ([usize; 2], Option<(usize, usize)>, bool, [[usize; 5]; 2]);
fn chosen<T: Real>(g: &Gemm<T>, c: CacheSizes) -> Chosen {
    let derived = Gemm::for_caches(g.kernel, g.mr, g.nr, 1, c).sizes();
    let fuse = g.fused.map(|_| (g.fuse_below, g.fuse_rows));
    ([g.mr, g.nr], fuse, g.stamps.is_some(), [g.sizes(), derived])
}
