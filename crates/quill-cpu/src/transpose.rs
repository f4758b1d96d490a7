//! Tiled 2-D copies for transpose-like patterns: `dst[r * dk + c] = src[r * sk + c * sc]` with
//! a contiguous destination row and a large source stride `sc`. Copies move bits, so kernels
//! exist per element width (`Word`); 4-byte words (f32, i32) use an AVX-512 16x16 register
//! transpose when the CPU has it (detected at run time), where both the 16 loads and the 16
//! stores are whole 64-byte lines, else an AVX2 8x8 one. Everything else uses cache-sized
//! scalar tiles.

/// An element width the copy kernels move.
pub trait Word: Copy + Send + Sync + 'static {
    /// `dst[d0 + r*dk + c] = src[s0 + r*sk + c*sc]` for `r < rows`, `c < cols`.
    #[allow(clippy::too_many_arguments)]
    fn tile(
        dst: &mut [Self],
        d0: isize,
        dk: isize,
        src: &[Self],
        s0: isize,
        sk: isize,
        sc: isize,
        rows: usize,
        cols: usize,
    ) {
        tile_scalar(dst, d0, dk, src, s0, sk, sc, rows, cols);
    }
}

impl Word for u8 {}
impl Word for u16 {}
impl Word for u64 {}
impl Word for bool {}
impl Word for quill_core::C64 {}
impl Word for quill_core::C128 {}

impl Word for u32 {
    fn tile(
        dst: &mut [u32],
        d0: isize,
        dk: isize,
        src: &[u32],
        s0: isize,
        sk: isize,
        sc: isize,
        rows: usize,
        cols: usize,
    ) {
        // `dk >= B` keeps a block's B destination rows disjoint; a self-overlapping
        // destination (an `as_strided` view) has smaller row strides and takes the scalar tiles.
        #[cfg(target_arch = "x86_64")]
        {
            type Block = fn(&mut [u32], isize, isize, &[u32], isize, isize);
            let kernel: Option<(usize, Block)> = if std::arch::is_x86_feature_detected!("avx512f") {
                Some((16, block16))
            } else if std::arch::is_x86_feature_detected!("avx2") {
                Some((8, block8))
            } else {
                None
            };
            if let Some((b, block)) = kernel {
                if sk == 1 && rows >= b && cols >= b && dk >= b as isize {
                    let (rb_end, cb_end) = (rows / b * b, cols / b * b);
                    // Column panels of 128: a panel's source rows (128 x rows values) stay in
                    // L2 while every band of b destination rows sweeps it, so each source line
                    // comes from memory once although a band uses only b of its values. Bands
                    // stay b rows high: destination rows lie a page multiple apart and share
                    // L1 sets, so more concurrent rows than the L1's ways would thrash.
                    const PANEL: usize = 128;
                    for c0 in (0..cb_end).step_by(PANEL) {
                        let c1 = (c0 + PANEL).min(cb_end);
                        for rb in (0..rb_end as isize).step_by(b) {
                            for cb in (c0 as isize..c1 as isize).step_by(b) {
                                block(dst, d0 + rb * dk + cb, dk, src, s0 + rb + cb * sc, sc);
                            }
                        }
                    }
                    let (r_, c_) = (rb_end as isize, cb_end as isize);
                    tile_scalar(
                        dst,
                        d0 + r_ * dk,
                        dk,
                        src,
                        s0 + r_,
                        1,
                        sc,
                        rows - rb_end,
                        cols,
                    );
                    tile_scalar(
                        dst,
                        d0 + c_,
                        dk,
                        src,
                        s0 + c_ * sc,
                        1,
                        sc,
                        rb_end,
                        cols - cb_end,
                    );
                    return;
                }
            }
        }
        tile_scalar(dst, d0, dk, src, s0, sk, sc, rows, cols);
    }
}

/// Cache-blocked scalar tiles (32 x 32: a block's source lines and destination lines both stay
/// in L1).
#[allow(clippy::too_many_arguments)]
pub fn tile_scalar<T: Copy>(
    dst: &mut [T],
    d0: isize,
    dk: isize,
    src: &[T],
    s0: isize,
    sk: isize,
    sc: isize,
    rows: usize,
    cols: usize,
) {
    const B: usize = 32;
    for rb in (0..rows).step_by(B) {
        for cb in (0..cols).step_by(B) {
            for r in rb..(rb + B).min(rows) {
                let drow = d0 + r as isize * dk;
                let srow = s0 + r as isize * sk;
                let ce = (cb + B).min(cols);
                let out = &mut dst[(drow + cb as isize) as usize..(drow + ce as isize) as usize];
                for (c, o) in (cb..ce).zip(out.iter_mut()) {
                    *o = src[(srow + c as isize * sc) as usize];
                }
            }
        }
    }
}

/// One 16x16 block: `dst[d + i*dk + j] = src[s + j*sc + i]` for i, j < 16.
#[cfg(target_arch = "x86_64")]
fn block16(dst: &mut [u32], d: isize, dk: isize, src: &[u32], s: isize, sc: isize) {
    // The whole block must lie inside both slices; this check is what makes the raw loads and
    // stores below in bounds (the callers' layouts guarantee it, so it never fails).
    let s_lo = s + 15 * sc.min(0);
    let s_hi = s + 15 * sc.max(0) + 15;
    let d_hi = d + 15 * dk + 15;
    assert!(
        s_lo >= 0
            && (s_hi as usize) < src.len()
            && d >= 0
            && dk >= 16
            && (d_hi as usize) < dst.len(),
        "block16 out of bounds"
    );
    // SAFETY: avx512f was detected by the caller; the bounds check above covers every index
    // the block reads (s + j*sc + 0..16) and writes (d + i*dk + 0..16), and dk >= 16 keeps the
    // destination rows disjoint, so no two stores alias the `&mut` borrow incorrectly.
    unsafe { block16_avx512(dst.as_mut_ptr().offset(d), dk, src.as_ptr().offset(s), sc) }
}

/// # Safety
/// Requires avx512f; `src + j*sc + 0..16` must be readable and `dst + i*dk + 0..16` writable for
/// all i, j < 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block16_avx512(dst: *mut u32, dk: isize, src: *const u32, sc: isize) {
    use std::arch::x86_64::*;
    let mut r = [_mm512_setzero_si512(); 16];
    for (j, v) in r.iter_mut().enumerate() {
        // SAFETY: in bounds per this function's contract.
        *v = unsafe { _mm512_loadu_si512(src.offset(j as isize * sc) as *const __m512i) };
    }
    // 32-bit interleave, 64-bit interleave, then two rounds of 128-bit lane shuffles.
    let mut t = [_mm512_setzero_si512(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for q in 0..4 {
        let b = 4 * q;
        r[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
        r[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
        r[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
        r[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
    }
    for i in 0..4 {
        t[i] = _mm512_shuffle_i32x4::<0x88>(r[i], r[i + 4]);
        t[i + 4] = _mm512_shuffle_i32x4::<0xdd>(r[i], r[i + 4]);
        t[i + 8] = _mm512_shuffle_i32x4::<0x88>(r[i + 8], r[i + 12]);
        t[i + 12] = _mm512_shuffle_i32x4::<0xdd>(r[i + 8], r[i + 12]);
    }
    for i in 0..4 {
        r[i] = _mm512_shuffle_i32x4::<0x88>(t[i], t[i + 8]);
        r[i + 4] = _mm512_shuffle_i32x4::<0x88>(t[i + 4], t[i + 12]);
        r[i + 8] = _mm512_shuffle_i32x4::<0xdd>(t[i], t[i + 8]);
        r[i + 12] = _mm512_shuffle_i32x4::<0xdd>(t[i + 4], t[i + 12]);
    }
    for (i, v) in r.iter().enumerate() {
        // SAFETY: in bounds per this function's contract.
        unsafe { _mm512_storeu_si512(dst.offset(i as isize * dk) as *mut __m512i, *v) };
    }
}

/// One 8x8 block: `dst[d + i*dk + j] = src[s + j*sc + i]` for i, j < 8 (the AVX2 kernel).
#[cfg(target_arch = "x86_64")]
fn block8(dst: &mut [u32], d: isize, dk: isize, src: &[u32], s: isize, sc: isize) {
    let s_lo = s + 7 * sc.min(0);
    let s_hi = s + 7 * sc.max(0) + 7;
    let d_hi = d + 7 * dk + 7;
    assert!(
        s_lo >= 0
            && (s_hi as usize) < src.len()
            && d >= 0
            && dk >= 8
            && (d_hi as usize) < dst.len(),
        "block8 out of bounds"
    );
    // SAFETY: the caller detected avx2; the check above covers every index the block reads
    // (s + j*sc + 0..8) and writes (d + i*dk + 0..8), and dk >= 8 keeps the rows disjoint.
    unsafe { block8_avx2(dst.as_mut_ptr().offset(d), dk, src.as_ptr().offset(s), sc) }
}

/// # Safety
/// Requires avx2; `src + j*sc + 0..8` must be readable and `dst + i*dk + 0..8` writable for all
/// i, j < 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block8_avx2(dst: *mut u32, dk: isize, src: *const u32, sc: isize) {
    use std::arch::x86_64::*;
    let mut r = [_mm256_setzero_si256(); 8];
    for (j, v) in r.iter_mut().enumerate() {
        // SAFETY: in bounds per this function's contract.
        *v = unsafe { _mm256_loadu_si256(src.offset(j as isize * sc) as *const __m256i) };
    }
    // 32-bit interleave, 64-bit interleave, then 128-bit lane swaps.
    let mut t = [_mm256_setzero_si256(); 8];
    for i in 0..4 {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for q in 0..2 {
        let b = 4 * q;
        r[b] = _mm256_unpacklo_epi64(t[b], t[b + 2]);
        r[b + 1] = _mm256_unpackhi_epi64(t[b], t[b + 2]);
        r[b + 2] = _mm256_unpacklo_epi64(t[b + 1], t[b + 3]);
        r[b + 3] = _mm256_unpackhi_epi64(t[b + 1], t[b + 3]);
    }
    for i in 0..4 {
        t[i] = _mm256_permute2x128_si256::<0x20>(r[i], r[i + 4]);
        t[i + 4] = _mm256_permute2x128_si256::<0x31>(r[i], r[i + 4]);
    }
    for (i, v) in t.iter().enumerate() {
        // SAFETY: in bounds per this function's contract.
        unsafe { _mm256_storeu_si256(dst.offset(i as isize * dk) as *mut __m256i, *v) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn reference(
        dst: &mut [u32],
        d0: isize,
        dk: isize,
        src: &[u32],
        s0: isize,
        sk: isize,
        sc: isize,
        rows: usize,
        cols: usize,
    ) {
        for r in 0..rows as isize {
            for c in 0..cols as isize {
                dst[(d0 + r * dk + c) as usize] = src[(s0 + r * sk + c * sc) as usize];
            }
        }
    }

    #[test]
    fn u32_tiles_match_reference_on_odd_sizes_and_negative_strides() {
        for &(rows, cols) in &[
            (8, 8),
            (9, 15),
            (16, 16),
            (17, 33),
            (48, 16),
            (5, 70),
            (64, 64),
            (31, 47),
        ] {
            for &neg in &[false, true] {
                let sc = (rows + 3) as isize;
                let n = rows + cols * sc as usize + 8;
                let src: Vec<u32> = (0..n as u32).map(|x| x.wrapping_mul(2654435761)).collect();
                let (s0, sc) = if neg {
                    (2 + (cols as isize - 1) * sc, -sc)
                } else {
                    (2, sc)
                };
                let dk = cols as isize + 5;
                let mut a = vec![0u32; rows * dk as usize + 8];
                let mut b = a.clone();
                u32::tile(&mut a, 3, dk, &src, s0, 1, sc, rows, cols);
                reference(&mut b, 3, dk, &src, s0, 1, sc, rows, cols);
                assert_eq!(a, b, "rows {rows} cols {cols} neg {neg}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "block8 out of bounds")]
    #[cfg(target_arch = "x86_64")]
    fn block8_rejects_blocks_outside_the_slices() {
        let src = vec![0u32; 8 * 8 - 1];
        let mut dst = vec![0u32; 8 * 8];
        block8(&mut dst, 0, 8, &src, 0, 8);
    }

    #[test]
    #[should_panic(expected = "block16 out of bounds")]
    #[cfg(target_arch = "x86_64")]
    fn block16_rejects_blocks_outside_the_slices() {
        let src = vec![0u32; 16 * 16 - 1];
        let mut dst = vec![0u32; 16 * 16];
        block16(&mut dst, 0, 16, &src, 0, 16);
    }
}
