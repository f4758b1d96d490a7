//! Strided copy between two layouts of one shape (compact, setitem, reshape-with-copy). The plan
//! is coalesced and normalised so the destination walks forwards; then each destination row is
//! a `copy_from_slice`, a reversed copy, a fill or a gather, and a transpose-like pattern (the
//! destination's inner dim reads the source with a large stride) is copied in tiles instead.

use crate::par::for_dst_rows;
use crate::transpose::Word;
use quill_core::{Layout, LoopPlan, Runs};

/// Copies `src` seen through `src_l` into `dst` seen through `dst_l` (same shape). Both layouts
/// must lie inside their slices (the array types guarantee it); an out-of-range index would
/// panic, never read or write outside.
pub fn copy_words<T: Word>(dst: &mut [T], dst_l: &Layout, src: &[T], src_l: &Layout) {
    let plan = LoopPlan::new(&[dst_l, src_l]).normalize_for(0);
    if plan.numel() == 0 {
        return;
    }
    if plan.ndim() == 0 {
        dst[plan.offsets[0]] = src[plan.offsets[1]];
        return;
    }
    let tile_k = tile_dim(&plan);
    let align = if tile_k == Some(0) { 16 } else { 1 };
    for_dst_rows(dst, &plan, align, |chunk, base, r0, r1| {
        copy_rows(chunk, base, src, &plan, tile_k, r0, r1)
    });
}

/// The dim to tile with the inner one, when the inner source stride is large and another dim
/// reads the source more closely.
fn tile_dim(p: &LoopPlan) -> Option<usize> {
    let n = p.ndim();
    if n < 2 {
        return None;
    }
    let last = n - 1;
    let (ds, ss) = (&p.strides[0], &p.strides[1]);
    if ds[last] != 1 || ss[last].unsigned_abs() < 16 {
        return None;
    }
    (0..last)
        .filter(|&d| p.shape[d] >= 8)
        .min_by_key(|&d| ss[d].unsigned_abs())
        .filter(|&d| ss[d].unsigned_abs() < ss[last].unsigned_abs())
}

/// Copies rows `r0..r1` of dim 0 into `dst`, whose index 0 is `base` in the full destination.
fn copy_rows<T: Word>(
    dst: &mut [T],
    base: usize,
    src: &[T],
    p: &LoopPlan,
    tile_k: Option<usize>,
    r0: usize,
    r1: usize,
) {
    let n = p.ndim();
    let last = n - 1;
    let (ds, ss) = (&p.strides[0], &p.strides[1]);
    let Some(k) = tile_k else {
        // One row of the inner dim per run.
        let row_len: usize = p.shape[1..].iter().product();
        let runs = p.runs::<2>(r0 * row_len..r1 * row_len);
        let [dl, sl] = runs.inner_strides();
        for r in runs {
            let [d0, s0] = r.offsets;
            row(dst, d0 - base, dl, src, s0 as isize, sl, r.len);
        }
        return;
    };
    // Tiles of dims (k, last) at each index of the other dims, rows r0..r1 of dim 0 either
    // among those (k > 0) or inside the tiles (k == 0).
    let odims: Vec<usize> = (0..last).filter(|&d| d != k).collect();
    let shape: Vec<usize> = odims.iter().map(|&d| p.shape[d]).collect();
    let (dso, sso): (Vec<isize>, Vec<isize>) = odims.iter().map(|&d| (ds[d], ss[d])).unzip();
    let (a, b) = if k == 0 { (r0, r1) } else { (0, p.shape[k]) };
    let range = if k == 0 {
        0..shape.iter().product()
    } else {
        let per: usize = shape[1..].iter().product();
        r0 * per..r1 * per
    };
    let a_ = a as isize;
    let offsets = Runs::from_parts(&shape, [&dso, &sso], [p.offsets[0], p.offsets[1]], range);
    for [doff, soff] in offsets.elements() {
        T::tile(
            dst,
            doff as isize - base as isize + a_ * ds[k],
            ds[k],
            src,
            soff as isize + a_ * ss[k],
            ss[k],
            ss[last],
            b - a,
            p.shape[last],
        );
    }
}

/// One destination row of `len` elements.
#[inline]
fn row<T: Copy>(dst: &mut [T], d0: usize, ds: isize, src: &[T], s0: isize, ss: isize, len: usize) {
    if ds == 1 {
        let out = &mut dst[d0..d0 + len];
        let s = s0 as usize;
        match ss {
            1 => out.copy_from_slice(&src[s..s + len]),
            -1 => reverse_copy(out, &src[s + 1 - len..=s]),
            0 => out.fill(src[s]),
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = src[(s0 + i as isize * ss) as usize];
                }
            }
        }
    } else {
        for i in 0..len as isize {
            dst[(d0 as isize + i * ds) as usize] = src[(s0 + i * ss) as usize];
        }
    }
}

/// `out[i] = src[len - 1 - i]`. Baseline x86_64 has no lane permute, so LLVM reverses a row
/// element by element (half the speed of a forward copy); with AVX-512 or AVX2, detected at run
/// time, it reverses whole registers.
fn reverse_copy<T: Copy>(out: &mut [T], src: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: `reverse_copy_avx512` only requires AVX-512 F and BW, detected just above.
            unsafe { reverse_copy_avx512(out, src) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: `reverse_copy_avx2` only requires AVX2, detected just above.
            unsafe { reverse_copy_avx2(out, src) };
            return;
        }
    }
    reverse_copy_body(out, src);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn reverse_copy_avx512<T: Copy>(out: &mut [T], src: &[T]) {
    reverse_copy_body(out, src);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn reverse_copy_avx2<T: Copy>(out: &mut [T], src: &[T]) {
    reverse_copy_body(out, src);
}

#[inline(always)]
fn reverse_copy_body<T: Copy>(out: &mut [T], src: &[T]) {
    for (o, &v) in out.iter_mut().zip(src.iter().rev()) {
        *o = v;
    }
}
