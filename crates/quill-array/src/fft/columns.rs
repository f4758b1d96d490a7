//! Complex transforms along an axis that is not the last, in place and without transposing
//! the array: the lanes (values `inner` apart) are taken a wave of columns at a time, each
//! lane gathered into its own contiguous slot of a wave buffer and transformed there by the
//! thread pool, then the wave is written back row by row (each row by one task). A wave holds
//! about [`WAVE`] values, so both passes stay in cache, and an n-dimensional transform needs
//! no array-sized buffer beyond the one it returns.

use super::Planned;
use num_complex::Complex;
use rayon::prelude::*;
use rustfft::Fft;
use std::sync::Arc;

/// Values a wave buffer holds (4 MB of complex128).
const WAVE: usize = 1 << 18;

/// Transforms every lane of `v`, a C-order array viewed as `[outer, len, inner]` with the
/// transformed axis in the middle, by `plan` (of `len` points) in place, each result scaled by
/// `s`. Each wave is read whole into its buffer before any of it is written back.
pub(super) fn along<T: Planned>(
    v: &mut [Complex<T>],
    [outer, len, inner]: [usize; 3],
    plan: &Arc<dyn Fft<T>>,
    s: T,
) {
    let zero = Complex::new(T::zero(), T::zero());
    if v.is_empty() {
        return;
    }
    let width = (WAVE / (outer * len)).clamp(1, inner);
    let mut wave = vec![zero; outer * width * len];
    let mut c0 = 0;
    while c0 < inner {
        let w = width.min(inner - c0);
        let buf = &mut wave[..outer * w * len];
        let src = &*v;
        // Lane t is column c0 + t % w of block t / w; neighbouring lanes share cache lines of
        // `v`, so a task takes several.
        buf.par_chunks_mut(len)
            .with_min_len(8)
            .enumerate()
            .for_each_init(
                || vec![zero; plan.get_inplace_scratch_len()],
                |scratch, (t, lane)| {
                    let (o, c) = (t / w, c0 + t % w);
                    let base = o * len * inner + c;
                    for (i, x) in lane.iter_mut().enumerate() {
                        *x = src[base + i * inner];
                    }
                    plan.process_with_scratch(lane, scratch);
                },
            );
        let buf = &*buf;
        v.par_chunks_mut(inner)
            .with_min_len(16)
            .enumerate()
            .for_each(|(r, row)| {
                let (o, i) = (r / len, r % len);
                for (j, y) in row[c0..c0 + w].iter_mut().enumerate() {
                    *y = buf[(o * w + j) * len + i] * s;
                }
            });
        c0 += w;
    }
}
