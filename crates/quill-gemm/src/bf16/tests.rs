//! Unit tests of the bf16 pair packing, `pair_runs`, the fusing kernel and `narrow_rows`.

use super::*;
use crate::batch::to_bf16;
use crate::gemm::Gemm;

const ROWS: usize = 32;
const NR: usize = 32;

/// `n` bf16 values of random bits (NaNs, infinities and denormals among them).
fn random_bits(mut seed: u64, n: usize) -> Vec<bf16> {
    (0..n)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bf16::from_bits((seed >> 40) as u16)
        })
        .collect()
}

/// `pack_b` (one panel) and `pack_b_block` (all panels, row pair by row pair) of a
/// row-major bf16 B against the pair panel's definition, bit for bit: whole 32-wide steps
/// (the `vpermt2w` path where the CPU has AVX-512BW) and partial last panels, odd and even
/// depths (an odd one pairs its last row with zero), reversed rows, and B starting at an
/// odd offset. Padding (columns past the matrix, steps past the depth) must be zero.
#[test]
fn row_major_b_pairs_pack_like_the_definition() {
    let data = random_bits(11, 40 * 100);
    for (off, rs) in [(0, 100), (1, 100), (39 * 100, -100)] {
        let b = Mat::new(&data, off, rs, 1);
        for kc in [1usize, 2, 5, 16, 33] {
            for (j0, cols) in [(0usize, 32usize), (3, 64), (1, 70), (2, 17), (0, 96)] {
                let (nr, steps) = (32, kc.div_ceil(2));
                let panels = cols.div_ceil(nr);
                let want: Vec<u32> = (0..panels * steps * nr)
                    .map(|e| {
                        let (q, s, j) = (e / (steps * nr), e / nr % steps, e % nr);
                        let col = q * nr + j;
                        if col >= cols {
                            return 0;
                        }
                        let hi = (2 * s + 1 < kc).then(|| b.get(2 * s + 1, j0 + col));
                        pair(b.get(2 * s, j0 + col), hi)
                    })
                    .collect();
                let case = format!("off {off} rs {rs} kc {kc} cols {j0}..+{cols}");
                let mut block = vec![0xDEAD_BEEF; want.len()];
                <bf16 as Pack<u32>>::pack_b_block(&mut block, &b, 0, kc, j0, cols, nr);
                assert_eq!(block, want, "block: {case}");
                for (q, panel_want) in want.chunks(steps * nr).enumerate() {
                    let mut panel = vec![0xDEAD_BEEF; steps * nr];
                    let w = nr.min(cols - q * nr);
                    <bf16 as Pack<u32>>::pack_b(&mut panel, &b, 0, kc, j0 + q * nr, w, nr);
                    assert_eq!(panel, panel_want, "panel {q}: {case}");
                }
            }
        }
    }
}

/// `pair_runs` writes a run whose first and last steps fit exactly (forwards and
/// backwards through the source), and refuses, writing nothing, a run one value too long
/// at either end of the source or of `dst`.
#[test]
fn pair_runs_stay_inside_their_slices() {
    let data = random_bits(5, 4 * 40);
    let pairs = |lo: usize, hi: usize| -> Vec<u32> {
        (0..32)
            .map(|j| pair(data[lo + j], Some(data[hi + j])))
            .collect()
    };
    // Three steps, 40 values apart in the source and 50 words apart in `dst`.
    let mut dst = vec![7u32; 2 * 50 + 32];
    if !pair_runs(&mut dst, 50, &data, [0, 8], 40, 3) {
        assert!(!wide_pairs(), "a run that fits was refused");
        return;
    }
    for i in 0..3 {
        assert_eq!(dst[i * 50..][..32], pairs(i * 40, 8 + i * 40), "step {i}");
        if i < 2 {
            assert!(dst[i * 50 + 32..(i + 1) * 50].iter().all(|&x| x == 7));
        }
    }
    let mut back = vec![7u32; 64];
    assert!(pair_runs(&mut back, 32, &data, [120, 128], -120, 2));
    assert_eq!(back[..32], pairs(120, 128));
    assert_eq!(back[32..], pairs(0, 8));
    let len = data.len();
    let refused: [(usize, usize, [usize; 2], isize, usize); 5] = [
        (2 * 50 + 31, 50, [0, 8], 40, 3),       // dst one short
        (2 * 50 + 32, 50, [0, 9], 64, 3),       // hi's last step one past the source
        (2 * 50 + 32, 50, [len - 31, 0], 0, 1), // lo's only step one past
        (64, 32, [119, 128], -120, 2),          // lo runs back past the start
        (64, 32, [128, 126], -127, 2),          // hi too
    ];
    for (n, dst_step, starts, src_step, count) in refused {
        let mut d = vec![7u32; n];
        let case = format!("{n} {dst_step} {starts:?} {src_step} {count}");
        assert!(
            !pair_runs(&mut d, dst_step, &data, starts, src_step, count),
            "{case}"
        );
        assert!(d.iter().all(|&x| x == 7), "{case}");
    }
    assert!(pair_runs(&mut [], 32, &data, [0, 0], 1, 0));
}

/// Products through the fusing kernel (`Gemm::fused`: the row tile at row 0 packs each
/// whole B panel) match the same GEMM packing B first, bit for bit, in C (earlier depth
/// blocks' sums) and in the bf16 output: odd and even depths, two depth blocks, one-row,
/// several-row-tile and several-row-block A, fewer than 32 columns, partial last panels,
/// two column blocks, B at an odd offset, with reversed rows, or transposed (which fuses
/// only with one row, its columns then contiguous). On one thread the fusing kernel must
/// have run exactly once per whole panel and depth block; two threads (each fusing its
/// stripe) must give the same bits.
#[test]
#[cfg(target_arch = "x86_64")]
fn fused_b_packing_matches_packing_first() {
    let Some(g) = crate::select::bf16_pairs() else {
        crate::kernel::skip("avx512bf16", "the fusing kernel");
        return;
    };
    // Signs and mantissas at random, magnitudes in [0.5, 1): every sum stays finite, so
    // each output bit is compared (random exponents overflowed nearly every sum to an
    // infinity; NaN propagation is `bf16_non_finite_stays_in_its_row`'s).
    let data: Vec<bf16> = random_bits(21, 2 * 1100 * 100)
        .into_iter()
        .map(|x| bf16::from_bits((x.to_bits() & 0x807f) | 0x3f00))
        .collect();
    let fused_tiles = || crate::gemm::FUSED_TILES.with(|n| n.get());
    let [_, nr, _, mc, nc] = g.sizes();
    for (m, k, n) in [
        (1, 1, 32),
        (5, 2, 45),
        (7, 3, 20),
        (12, 7, 64),
        (30, 64, 100),
        (13, 1100, 33),
        // Three row blocks: the later ones read the panels the first one packed.
        (2 * mc + 7, 64, 100),
        // Two column blocks, the second with a partial panel.
        (13, 2, nc + 45),
    ] {
        let a = Mat::new(&data, 3, k as isize, 1);
        let bs = crate::pack::b_layouts(&data, k, n);
        for (b, what) in &bs {
            let run = |g: &Gemm<f32, u32>, threads: usize| {
                let (mut c, mut out) = (vec![0f32; m * n], vec![0u16; m * n]);
                g.run_narrow([m, n, k], &a, b, &mut c, &mut out, threads);
                (c.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), out)
            };
            let case = format!("{m}x{k}x{n}, B {what}");
            let before = fused_tiles();
            let fused = run(&g, 1);
            let tiles = fused_tiles() - before;
            // Whole panels per column block, summed over the blocks (NC is a multiple of
            // NR), once per depth block.
            let want = (b.cs == 1) as usize * n / nr * g.depth_blocks(k);
            assert_eq!(tiles, want, "{case}: fused tiles");
            assert!(
                fused.1.iter().all(|&x| bf16::from_bits(x).is_finite()),
                "{case}"
            );
            assert_eq!(fused, run(&g.without_fused(), 1), "{case}");
            assert_eq!(fused, run(&g, 2), "{case}, two threads");
        }
    }
}

/// `pack_a` of a row-major bf16 A against the pair panel's definition, bit for bit (NaN
/// and denormal patterns included), over row starts that are and are not 4-byte aligned
/// (odd offsets, odd row strides, a reversed row order), odd and even depths, and row
/// counts below, at and past the transpose's groups of four. Where every run is aligned
/// and there are four rows or more, the transpose itself must have run.
#[test]
fn row_major_pairs_pack_like_the_definition() {
    const MR: usize = 12;
    let data = random_bits(3, 64 * 48);
    #[cfg(target_arch = "x86_64")]
    let simd = std::arch::is_x86_feature_detected!("avx");
    #[cfg(not(target_arch = "x86_64"))]
    let simd = false;
    for (off, rs) in [
        (0, 48),
        (1, 48),
        (0, 47),
        (2, 46),
        (47 * 48, -48),
        (47 * 48 + 1, -48),
    ] {
        let a = Mat::new(&data, off, rs, 1);
        for kc in [1usize, 2, 7, 8, 16, 33] {
            for rows in [1, 3, 4, 6, 11, 12] {
                for (i0, p0) in [(0, 0), (1, 1), (3, 2)] {
                    let steps = kc.div_ceil(2);
                    let want: Vec<u32> = (0..steps * MR)
                        .map(|e| {
                            let (s, i) = (e / MR, e % MR);
                            let hi = (2 * s + 1 < kc).then(|| a.get(i0 + i, p0 + 2 * s + 1));
                            if i < rows {
                                pair(a.get(i0 + i, p0 + 2 * s), hi)
                            } else {
                                0
                            }
                        })
                        .collect();
                    let mut got = vec![0xDEAD_BEEF; steps * MR];
                    <bf16 as Pack<u32>>::pack_a(&mut got, &a, i0, rows, p0, kc, MR);
                    let case = format!("off {off} rs {rs} kc {kc} rows {rows} at {i0},{p0}");
                    assert_eq!(got, want, "{case}");
                    let aligned = (0..rows).all(|i| {
                        let idx = a.shifted(i0 + i, p0).off;
                        (data[idx..].as_ptr() as usize).is_multiple_of(4)
                    });
                    let mut fast = vec![0xDEAD_BEEF; steps * MR];
                    let took = pairs_transposed(&mut fast, &a, [i0, rows, p0, kc, MR]);
                    assert_eq!(took, simd && aligned && rows >= 4 && kc >= 2, "{case}");
                    if took {
                        assert_eq!(fast, want, "{case}");
                    }
                }
            }
        }
    }
}

/// `narrow_rows` against `to_bf16` (the portable rounding) on every mask width, with and
/// without C's earlier sums, over values that cover ties, overflow to infinity, NaNs and
/// infinities; denormals (which it flushes, as the dot-product instructions do) are left
/// out. Nothing past `nr` is written.
#[test]
#[cfg(target_arch = "x86_64")]
fn narrow_rows_round_like_to_bf16() {
    if !narrows_here() {
        crate::kernel::skip("avx512bf16", "narrow_rows");
        return;
    }
    let special = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0xff81_2345),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::from_bits(0x3f80_8000), // a tie: rounds to even
        f32::from_bits(0x3f81_8000), // a tie: rounds up to even
        -0.0,
    ];
    let mut seed = 7u64;
    let mut value = |e: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        if e.is_multiple_of(13) {
            special[(seed >> 33) as usize % special.len()]
        } else {
            let x = f32::from_bits((seed >> 32) as u32);
            if x.is_subnormal() {
                1.5
            } else {
                x
            }
        }
    };
    let mut sums = [0.0f32; ROWS * NR];
    sums.iter_mut().enumerate().for_each(|(e, x)| *x = value(e));
    let ldc = 40;
    let c: Vec<f32> = (0..ROWS * ldc).map(|e| value(e + 5) / 4.0).collect();
    for (mr, nr) in [(32, 32), (31, 17), (1, 1), (5, 16), (32, 31)] {
        for add_c in [false, true] {
            let mut out = vec![0xBEEFu16; ROWS * ldc];
            let o = Narrow {
                out: out.as_mut_ptr(),
                c: c.as_ptr(),
                ldc,
                mr,
                nr,
                add_c,
            };
            // SAFETY: `out` and `c` hold 32 rows of `ldc` >= nr values, `sums` 32 rows of
            // 32; `narrows_here` checked the CPU's features.
            unsafe { narrow_rows(&sums, &o) };
            for i in 0..ROWS {
                for j in 0..ldc {
                    let got = out[i * ldc + j];
                    if i < mr && j < nr {
                        // Not `+ 0.0` without C: that would turn -0 into +0.
                        let s = sums[i * NR + j];
                        let x = if add_c { s + c[i * ldc + j] } else { s };
                        let want = if x.is_subnormal() {
                            continue;
                        } else {
                            to_bf16(x).to_bits()
                        };
                        assert_eq!(got, want, "{mr}x{nr} add_c={add_c} ({i}, {j}): {x:e}");
                    } else {
                        assert_eq!(got, 0xBEEF, "{mr}x{nr}: ({i}, {j}) written");
                    }
                }
            }
        }
    }
}
