//! The bf16 GEMM on CPUs with AMX (Intel Xeon from Sapphire Rapids on): `tdpbf16ps` multiplies a
//! 16 x 32 bf16 tile of A by a 32 x 16 bf16 tile of B (held as 16 rows of 16 depth pairs) into a
//! 16 x 16 f32 tile, 8192 multiply-adds per instruction. The micro-tile is 32 x 32: four C tiles
//! stay in tile registers while two A and two B tiles stream in per 32 depth values. The loop nest
//! is `gemm/nest.rs`'s; this file owns the packing, the kernel, and asking Linux for the tile state
//! (a process must request it before its first tile instruction). Its depth blocks are
//! `tuning.rs`'s AMX row.
//!
//! Stable Rust has no AMX intrinsics, so the kernel is one `asm!` block; the compiler never
//! allocates tile registers itself, so nothing else touches them between instructions.

use crate::bf16::{narrow_rows, Narrow};
use crate::types::{Mat, Pack, Tile};
use half::bf16;

/// Two consecutive depth values of bf16, the lower depth in the low half: the pair AMX reads.
/// Its own type (not `u32`) because the A panel is laid out differently from `bf16.rs`'s.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
#[repr(transparent)]
pub(crate) struct TilePair(u32);
// SAFETY: `repr(transparent)` over `u32`: no padding, and every bit pattern is a valid value.
unsafe impl bytemuck::Zeroable for TilePair {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for TilePair {}

/// Rows of the micro-tile: two A tiles.
pub(crate) const MR: usize = 32;
/// Columns of the micro-tile: two B tiles.
pub(crate) const NR: usize = 32;
/// Depth pairs per tile row (64 bytes, the widest tile row).
const GROUP: usize = 16;
impl Pack<TilePair> for bf16 {
    const DEPTH: usize = 2;

    /// Whole groups of 16 pairs: the kernel loads full tiles, and the padding is zero in both
    /// operands (zero times anything finite adds nothing; both sides are zero, so no 0 * inf).
    fn steps(kc: usize) -> usize {
        kc.div_ceil(2).next_multiple_of(GROUP)
    }

    /// Groups of 16 pairs, each an `mr x 16` row-major block (the A tiles of rows 0..16 and
    /// 16..32 one after the other): depth value `p` of row `i` is `bf16` number
    /// `(p / 32) * 32 * mr + i * 32 + p % 32` of the panel. A pair's two values are adjacent
    /// bf16s in memory, so a row-major A copies 32 values at a time.
    fn pack_a(
        dst: &mut [TilePair],
        a: &Mat<bf16>,
        i0: usize,
        rows: usize,
        p0: usize,
        kc: usize,
        mr: usize,
    ) {
        let len = <bf16 as Pack<TilePair>>::steps(kc) * mr;
        let dst: &mut [u16] = bytemuck::cast_slice_mut(&mut dst[..len]);
        let at = |i: usize, p: usize| (p / 32) * 32 * mr + i * 32 + p % 32;
        // Zero only what the copies below leave: the rows past `rows` in every group, and the
        // depth past kc (all in the last group) of the others. A whole-panel fill had cost
        // 4 % of a 128 x 784 x 512 product.
        let groups = dst.len() / (32 * mr);
        if rows < mr {
            for g in 0..groups {
                dst[at(rows, 32 * g)..at(0, 32 * (g + 1))].fill(0);
            }
        }
        let tail = kc % 32;
        if tail != 0 {
            for i in 0..rows {
                let start = at(i, kc);
                dst[start..start + 32 - tail].fill(0);
            }
        }
        if a.cs == 1 {
            for i in 0..rows {
                let s = a.shifted(i0 + i, p0).off;
                let runs = a.data[s..s + kc].chunks_exact(32);
                let tail = runs.remainder();
                let mut g = 0;
                // Fixed-size copies: 64-byte moves inline, where `memmove` calls cost 6 %.
                for run in runs {
                    let run: &[bf16; 32] = run.try_into().expect("chunks of 32");
                    let d = at(i, 32 * g);
                    let to: &mut [u16; 32] = (&mut dst[d..d + 32]).try_into().expect("32");
                    *to = bytemuck::cast(*run);
                    g += 1;
                }
                if !tail.is_empty() {
                    let d = at(i, 32 * g);
                    dst[d..d + tail.len()].copy_from_slice(bytemuck::cast_slice(tail));
                }
            }
        } else {
            // A transposed view (unit row stride) or general strides: one depth value at a
            // time, the rows of a column in order.
            for p in 0..kc {
                for i in 0..rows {
                    dst[at(i, p)] = a.get(i0 + i, p0 + p).to_bits();
                }
            }
        }
    }

    /// `dst[s * nr + j] = pair(b[p0 + 2s, j0 + j], b[p0 + 2s + 1, j0 + j])`: row `s` of a B
    /// tile holds depth pair `s` of 16 columns, `bf16.rs`'s layout, padded with zero steps.
    fn pack_b(
        dst: &mut [TilePair],
        b: &Mat<bf16>,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        let len = <bf16 as Pack<TilePair>>::steps(kc) * nr;
        let dst: &mut [u32] = bytemuck::cast_slice_mut(&mut dst[..len]);
        let (pairs, pad) = dst.split_at_mut(kc.div_ceil(2) * nr);
        <bf16 as Pack<u32>>::pack_b(pairs, b, p0, kc, j0, cols, nr);
        pad.fill(0);
    }

    fn pack_b_block(
        dst: &mut [TilePair],
        b: &Mat<bf16>,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        let panel_len = <bf16 as Pack<TilePair>>::steps(kc) * nr;
        if b.cs == 1 {
            let dst: &mut [u32] = bytemuck::cast_slice_mut(dst);
            crate::bf16::pairs_by_rows(dst, b, [p0, kc, j0, cols, nr], panel_len);
            return;
        }
        crate::pack::by_panels(dst, b, p0, kc, j0, cols, nr);
    }
}

/// Whether this CPU has AMX-TILE, AMX-BF16, AVX-512F/BW and AVX512_BF16, and Linux granted
/// this process the tile state. Asked once. Linux refuses (and quill then keeps to
/// `vdpbf16ps`) where the hypervisor hides the state, or where a thread's signal stack is too
/// small for the larger signal frame the tiles need.
pub(crate) fn available() -> bool {
    static READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READY.get_or_init(request)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn request() -> bool {
    use std::arch::x86_64::{__cpuid_count, __get_cpuid_max};
    // ARCH_REQ_XCOMP_PERM and XFEATURE_XTILEDATA from the kernel's <asm/prctl.h>.
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // The kernel rounds its sums with AVX-512BW and AVX512_BF16 (every AMX CPU so far has
    // both).
    if !(is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512bf16"))
    {
        return false;
    }
    // Leaf 7 is read only when the CPU reports it.
    if __get_cpuid_max(0).0 < 7 {
        return false;
    }
    let edx = __cpuid_count(7, 0).edx;
    let (amx_bf16, amx_tile) = (edx >> 22 & 1 == 1, edx >> 24 & 1 == 1);
    // SAFETY: arch_prctl with this request only changes which xsave features the process may
    // use; it reads no memory of ours. A kernel or hypervisor without AMX returns an error.
    amx_bf16
        && amx_tile
        && unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        } == 0
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn request() -> bool {
    false
}

/// The tile configuration: palette 1, all eight tiles 16 rows of 64 bytes.
#[repr(C, align(64))]
struct Config([u8; 64]);

static CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64;
        c[48 + t] = 16;
        t += 1;
    }
    Config(c)
};

/// `C[mr x nr] (=|+=) A * B` over `t.kc` pair steps (a multiple of 16): 32 x 32, four f32
/// tiles in tmm0-3, A tiles in tmm4-5, B tiles in tmm6-7.
///
/// # Safety
/// See `MicroKernel`: `t.a` holds `t.kc * 32` pairs in `pack_a`'s groups,
/// `t.b + s * t.bs` 32 pairs for every step `s < t.kc`, and `t.kc` is a positive multiple of
/// 16; the CPU has AMX-TILE and AMX-BF16 and [`available`] returned true.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn amx_bf16(t: &Tile<f32, TilePair>) {
    let bs = t.bs * 4;
    let full = t.mr == MR && t.nr == NR;
    let ldc = t.ldc as isize * 4;
    if full && t.narrow.is_null() {
        let init = if t.first { std::ptr::null() } else { t.c };
        // SAFETY: a full tile: the caller lets us read and write 32 rows of 32 f32 at stride
        // ldc from t.c; the operands are as this function's contract states.
        unsafe { tiles(t.a, t.b, bs, t.kc / GROUP, init, ldc, t.c, ldc) };
        return;
    }
    // An edge tile or a narrowed one: the product into a local tile (a full tile starts
    // from C's sums so far), then only the mr x nr part goes out.
    // Uninitialised: `tiles` stores all 32 x 32 values (zeroing it cost 6 % of a product).
    let mut tile = std::mem::MaybeUninit::<[f32; MR * NR]>::uninit();
    let init = if full && !t.first {
        t.c.cast_const()
    } else {
        std::ptr::null()
    };
    let row = (NR * 4) as isize;
    // SAFETY: `tile` holds 32 rows of 32 f32 at stride NR, all of which `tiles` stores, so
    // it is initialised after; `init`, when set, is a full tile the caller lets us read;
    // operands as above.
    // A reference, not a move: copying the 4 KiB out cost 7 % of a 1024x128x384 product.
    let tile: &[f32; MR * NR] = unsafe {
        tiles(
            t.a,
            t.b,
            bs,
            t.kc / GROUP,
            init,
            ldc,
            tile.as_mut_ptr().cast(),
            row,
        );
        tile.assume_init_ref()
    };
    let add_c = !full && !t.first;
    if t.narrow.is_null() {
        for i in 0..t.mr {
            for j in 0..t.nr {
                // SAFETY: i < mr and j < nr, inside the caller's block.
                unsafe {
                    let p = t.c.add(i * t.ldc + j);
                    let y = tile[i * NR + j];
                    *p = if add_c { *p + y } else { y };
                }
            }
        }
    } else {
        let o = Narrow {
            out: t.narrow,
            c: t.c,
            ldc: t.ldc,
            mr: t.mr,
            nr: t.nr,
            add_c,
        };
        // SAFETY: `available` checked the AVX-512 features; `narrow` and `c` are as the
        // contract states.
        unsafe { narrow_rows(tile, &o) };
    }
}

/// Loads [`CONFIG`] into this thread's tile configuration unless it is already there.
/// `ldtilecfg` is slow (a quarter of a 512^3 product's kernel time when run per micro-tile),
/// while `sttilecfg` and a 64-byte compare are cheap; checking, rather than trusting a flag,
/// stays right when other code in the thread (say oneDNN in the same Python process) loads its
/// own configuration or releases the tiles.
///
/// # Safety
/// The CPU has AMX and the process its permission ([`available`]).
#[cfg(target_arch = "x86_64")]
unsafe fn configure() {
    let mut now = Config([0; 64]);
    // SAFETY: `now` is 64 writable, 64-byte aligned bytes; `sttilecfg` writes exactly those
    // (zeros when no configuration is loaded). `CONFIG` is 64 readable, aligned bytes.
    unsafe {
        std::arch::asm!("sttilecfg [{}]", in(reg) now.0.as_mut_ptr(), options(nostack));
        if now.0 != CONFIG.0 {
            std::arch::asm!("ldtilecfg [{}]", in(reg) CONFIG.0.as_ptr(), options(nostack));
        }
    }
}

/// One 32 x 32 product over `groups` groups of 16 pairs: C tiles from `init` (row stride
/// `is` bytes; null: zero), A from the packed groups at `a`, B rows `bs` bytes apart from `b`;
/// the result stored at `dst` (row stride `ds` bytes).
///
/// # Safety
/// `a` holds `groups * 16 * 32` pairs; `b + s * bs` bytes 128 bytes for every `s < 16 *
/// groups`; `init` (unless null) and `dst` 32 rows of 32 f32 at their strides; `groups >= 1`;
/// the CPU has AMX and the process its permission.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn tiles(
    a: *const TilePair,
    b: *const TilePair,
    bs: isize,
    groups: usize,
    init: *const f32,
    is: isize,
    dst: *mut f32,
    ds: isize,
) {
    debug_assert!(groups >= 1);
    // SAFETY: this function's contract includes `configure`'s.
    unsafe { configure() };
    if !init.is_null() {
        // C's rows are often 4 KiB apart (one L1 set) and were evicted since the last depth
        // block stored them: fetch them now, while the products run (their loads took a
        // fifth of a 1024^3 product's kernel time).
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for i in 0..MR as isize {
            let row = init.cast::<i8>().wrapping_offset(i * is);
            // SAFETY: a prefetch is a hint that never faults, whatever the address; SSE is
            // part of x86_64.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(row);
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(64));
            }
        }
    }
    // SAFETY: the caller's contract covers every address read or written: the C tiles at
    // init / dst (rows 0..16 at +0 and +64 bytes, rows 16..32 from 16 strides on), A's two
    // tiles of each group (64-byte rows, the second 1024 bytes on, then 2048 to the next
    // group), B's two tiles of each group (rows `bs` apart, the second 64 bytes on, then 16
    // rows to the next group). The tile registers are used by nothing else (the compiler
    // never allocates them); `configure` loaded their shapes. The tiles are not released after
    // each product, so that the next one finds the configuration in place.
    unsafe {
        std::arch::asm!(
            "test {init}, {init}",
            "jz 2f",
            "tileloadd tmm0, [{init} + {is}*1]",
            "tileloadd tmm1, [{init} + {is}*1 + 64]",
            "mov {tmp}, {is}",
            "shl {tmp}, 4",
            "add {tmp}, {init}",
            "tileloadd tmm2, [{tmp} + {is}*1]",
            "tileloadd tmm3, [{tmp} + {is}*1 + 64]",
            "jmp 3f",
            "2:",
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "3:",
            "tileloadd tmm6, [{b} + {bs}*1]",
            "tileloadd tmm7, [{b} + {bs}*1 + 64]",
            "tileloadd tmm4, [{a} + {arow}*1]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tileloadd tmm5, [{a} + {arow}*1 + 1024]",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "add {a}, 2048",
            "add {b}, {bstep}",
            "dec {n}",
            "jnz 3b",
            "tilestored [{dst} + {ds}*1], tmm0",
            "tilestored [{dst} + {ds}*1 + 64], tmm1",
            "mov {tmp}, {ds}",
            "shl {tmp}, 4",
            "add {tmp}, {dst}",
            "tilestored [{tmp} + {ds}*1], tmm2",
            "tilestored [{tmp} + {ds}*1 + 64], tmm3",
            init = in(reg) init,
            is = in(reg) is,
            a = inout(reg) a => _,
            arow = in(reg) 64usize,
            b = inout(reg) b => _,
            bs = in(reg) bs,
            bstep = in(reg) bs * GROUP as isize,
            n = inout(reg) groups => _,
            dst = in(reg) dst,
            ds = in(reg) ds,
            tmp = out(reg) _,
            options(nostack),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::to_bf16;

    /// A different bf16 bit pattern for each `e` below 16 000 (all finite): packing moves
    /// bits, so every misplaced value shows (`bf16::from_f32(e)` repeats values past 256).
    fn distinct(e: usize) -> bf16 {
        bf16::from_bits(0x3f80 + e as u16)
    }

    /// The A panel holds value (i, p) at `(p / 32) * 32 * mr + i * 32 + p % 32`, zero past the
    /// rows and the depth, for row-major, column-major and negative strides; runs everywhere
    /// (packing needs no AMX).
    #[test]
    fn pack_a_groups_of_sixteen_pairs() {
        let (m, k) = (40, 75);
        let data: Vec<bf16> = (0..m * k).map(distinct).collect();
        let value = |i: usize, p: usize| data[i * k + p];
        let mats = [
            Mat::new(&data, 0, k as isize, 1),
            // The same matrix through a transposed buffer is built below; here the rows run
            // backwards from the last one.
            Mat::new(&data, (m - 1) * k, -(k as isize), 1),
        ];
        let tdata: Vec<bf16> = (0..m * k).map(|e| value(e % m, e / m)).collect();
        let t = Mat::new(&tdata, 0, 1, m as isize);
        for (which, a) in mats.iter().chain([&t]).enumerate() {
            for (i0, rows, p0, kc) in [
                (0, 32, 0, 64),
                (3, 17, 5, 33),
                (8, 32, 1, 70),
                (39, 1, 0, 1),
            ] {
                let steps = <bf16 as Pack<TilePair>>::steps(kc);
                assert!(steps.is_multiple_of(GROUP));
                let mut dst = vec![TilePair(0xDEAD_BEEF); steps * MR + 5];
                <bf16 as Pack<TilePair>>::pack_a(&mut dst, a, i0, rows, p0, kc, MR);
                let got: &[u16] = bytemuck::cast_slice(&dst[..steps * MR]);
                for i in 0..MR {
                    for p in 0..2 * steps {
                        let want = if i < rows && p < kc {
                            let r = if which == 1 { m - 1 - (i0 + i) } else { i0 + i };
                            value(r, p0 + p).to_bits()
                        } else {
                            0
                        };
                        let at = (p / 32) * 32 * MR + i * 32 + p % 32;
                        assert_eq!(
                            got[at], want,
                            "mat {which} {i0},{rows},{p0},{kc}: ({i}, {p})"
                        );
                    }
                }
                // Nothing past the panel is touched.
                assert!(dst[steps * MR..].iter().all(|x| x.0 == 0xDEAD_BEEF));
            }
        }
    }

    /// The B panel is `bf16.rs`'s pair layout with zero steps up to a whole group.
    #[test]
    fn pack_b_pads_whole_groups() {
        let (k, n) = (37, 50);
        let data: Vec<bf16> = (0..k * n).map(distinct).collect();
        let b = Mat::new(&data, 0, n as isize, 1);
        for (p0, kc, j0, cols) in [(0, 37, 0, 32), (4, 33, 20, 30), (36, 1, 49, 1)] {
            let steps = <bf16 as Pack<TilePair>>::steps(kc);
            let mut dst = vec![TilePair(7); steps * NR];
            <bf16 as Pack<TilePair>>::pack_b(&mut dst, &b, p0, kc, j0, cols, NR);
            for s in 0..steps {
                for j in 0..NR {
                    let v = |p: usize| {
                        if p < kc && j < cols {
                            data[(p0 + p) * n + j0 + j].to_bits() as u32
                        } else {
                            0
                        }
                    };
                    let want = v(2 * s) | v(2 * s + 1) << 16;
                    assert_eq!(
                        dst[s * NR + j].0,
                        want,
                        "{p0},{kc},{j0},{cols}: step {s} col {j}"
                    );
                }
            }
        }
    }

    /// The kernel against a naive sum over the packed panels: a full tile written in place
    /// (overwriting, then adding to what C holds), and edge tiles that must leave every
    /// element outside `mr x nr` alone; several groups and C with a wider row stride. Each
    /// also narrowed: the rounded sums go to the bf16 output alone, C untouched.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn kernel_full_and_edge_tiles() {
        if !available() {
            // Also where Linux refused the tile state.
            crate::kernel::skip("amx", "the AMX kernel");
            return;
        }
        let (m, k, n) = (32, 100, 32);
        let a: Vec<bf16> = (0..m * k)
            .map(|e| bf16::from_f32(((e * 7) % 11) as f32 - 5.0))
            .collect();
        let b: Vec<bf16> = (0..k * n)
            .map(|e| bf16::from_f32(((e * 5) % 13) as f32 - 6.0))
            .collect();
        let want = |i: usize, j: usize| -> f32 {
            (0..k)
                .map(|p| a[i * k + p].to_f32() * b[p * n + j].to_f32())
                .sum()
        };
        let steps = <bf16 as Pack<TilePair>>::steps(k);
        let (mut ap, mut bp) = (vec![TilePair(0); steps * MR], vec![TilePair(0); steps * NR]);
        let ldc = 40;
        for (mr, nr) in [(32, 32), (31, 32), (32, 1), (5, 17)] {
            for first in [true, false] {
                <bf16 as Pack<TilePair>>::pack_a(
                    &mut ap,
                    &Mat::new(&a, 0, k as isize, 1),
                    0,
                    mr,
                    0,
                    k,
                    MR,
                );
                <bf16 as Pack<TilePair>>::pack_b(
                    &mut bp,
                    &Mat::new(&b, 0, n as isize, 1),
                    0,
                    k,
                    0,
                    nr,
                    NR,
                );
                for narrowed in [false, true] {
                    // A different exact value in each element: a C tile loaded from or
                    // stored to the wrong rows or columns shows.
                    let c0: Vec<f32> = (0..33 * ldc).map(|e| (e % 97) as f32).collect();
                    let mut c = c0.clone();
                    let mut out = vec![0xBEEFu16; 33 * ldc];
                    let t = Tile {
                        kc: steps,
                        a: ap.as_ptr(),
                        ars: 0,
                        acs: 0,
                        b: bp.as_ptr(),
                        bs: NR as isize,
                        c: c.as_mut_ptr(),
                        ldc,
                        first,
                        mr,
                        nr,
                        narrow: if narrowed {
                            out.as_mut_ptr()
                        } else {
                            std::ptr::null_mut()
                        },
                    };
                    // SAFETY: panels of `steps` steps (a multiple of 16) for 32 x 32; C and
                    // the narrow output hold 33 rows of `ldc` >= 32 values; AMX was found
                    // available above.
                    unsafe { amx_bf16(&t) };
                    for i in 0..33 {
                        for j in 0..ldc {
                            let inside = i < mr && j < nr;
                            let c0 = c0[i * ldc + j];
                            let sum = || want(i, j) + if first { 0.0 } else { c0 };
                            if narrowed {
                                // The output gets the rounded sums, C keeps its earlier ones.
                                let w = if inside {
                                    to_bf16(sum()).to_bits()
                                } else {
                                    0xBEEF
                                };
                                assert_eq!(out[i * ldc + j], w, "{mr}x{nr} {first}: ({i}, {j})");
                            }
                            let w = if inside && !narrowed { sum() } else { c0 };
                            let at = format!("{mr}x{nr} {first} {narrowed}: C ({i}, {j})");
                            assert_eq!(c[i * ldc + j], w, "{at}");
                        }
                    }
                }
            }
        }
    }
}
