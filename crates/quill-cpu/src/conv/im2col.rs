//! The column matrix of one group of one sample (`im2col`: row (c, i, j) holds tap (i, j) of
//! input channel `c` for each output pixel, zero where the tap falls in the padding) and its
//! adjoint (`col2im`).
//!
//! Where a plane as wide as the output holds every pixel that a tap row reads, at one constant
//! shift from the output pixel that reads it, the row is a single copy of the plane (col2im a
//! single add), with the taps in the padding zeroed after:
//! - unit strides and as many output as input columns ("same" padding): the input itself;
//! - otherwise, where each of the input's stride phases fits in the output's width (strided
//!   layers with `ceil(w / sw)` output columns: ResNet's downsampling 3x3 and 1x1 layers and
//!   its 7x7 stem): the input split once into phase planes, pixel (r * sh + a, q * sw + b) at
//!   (r, q) of plane (a, b), `wo` wide. Row by row, a stride-2 3x3 layer (14-pixel output rows)
//!   had spent 14 % of its forward gathering every other input pixel.
//!
//! The rest (unpadded layers, whose output is narrower than the input) go row by row.

use super::Geom;
use quill_gemm::Real;
use std::ops::Range;

/// One group's input as [`im2col`] reads it: the input, and its phase planes when the
/// geometry takes them.
pub(super) struct Source<'a, T> {
    x: &'a [T],
    planes: &'a [T],
}

impl<'a, T: Real> Source<'a, T> {
    /// `x` (one group of one sample), split into the first [`Geom::planes_len`] values of
    /// `buf` when the geometry takes phase planes.
    pub(super) fn new(g: &Geom, x: &'a [T], buf: &'a mut [T]) -> Self {
        let planes = &mut buf[..g.planes_len()];
        split_phases(g, x, planes);
        Source { x, planes }
    }
}

/// Where a tap row reads: the `wo`-wide plane `at` of the input (`phase` false) or of the
/// phase planes, in which output pixel (oh, ow) reads (oh + dy, ow + dx).
struct Shift {
    phase: bool,
    at: Range<usize>,
    dy: isize,
    dx: isize,
}

impl Geom {
    /// For kernel column `j`: the offset of its first tap from the output column and the
    /// output columns `lo..hi` whose tap lands inside the input row.
    fn cols(&self, j: usize) -> (isize, usize, usize) {
        let (sw, pw, dw) = (
            self.d.spec.stride.1,
            self.d.spec.padding.1,
            self.d.spec.dilation.1,
        );
        let off = (j * dw) as isize - pw as isize;
        span(off, sw, self.d.w, self.d.wo)
    }

    /// Unit strides and as many output as input columns: the input is its own plane.
    fn same_width(&self) -> bool {
        self.d.spec.stride == (1, 1) && self.d.wo == self.d.w
    }

    /// The input goes through phase planes: not [`Geom::same_width`], each phase's
    /// `ceil(w / sw)` columns fit in the output's width, and the taps read every phase. A
    /// 1x1 stride-2 layer reads one phase in four: split whole, its input gradient ran 0.89x.
    fn phased(&self) -> bool {
        let d = &self.d;
        let (s, p, dl) = (d.spec.stride, d.spec.padding, d.spec.dilation);
        !self.same_width()
            && d.w.div_ceil(s.1) <= d.wo
            && every_phase(d.kh, dl.0, p.0, s.0)
            && every_phase(d.kw, dl.1, p.1, s.1)
    }

    /// Values of one group's phase planes (0 without them): `sh * sw` planes of
    /// `ceil(h / sh)` rows of `wo` per channel.
    pub(super) fn planes_len(&self) -> usize {
        if !self.phased() {
            return 0;
        }
        let (sh, sw) = self.d.spec.stride;
        self.cg * sh * sw * self.d.h.div_ceil(sh) * self.d.wo
    }

    /// Where the tap at offset (offh, offw) from an output pixel's first input pixel reads
    /// channel `c`; `None` when the geometry goes row by row.
    fn shift(&self, c: usize, offh: isize, offw: isize) -> Option<Shift> {
        let d = &self.d;
        if self.same_width() {
            let at = c * self.hw_in..(c + 1) * self.hw_in;
            return Some(Shift {
                phase: false,
                at,
                dy: offh,
                dx: offw,
            });
        }
        if !self.phased() {
            return None;
        }
        let (sh, sw) = (d.spec.stride.0 as isize, d.spec.stride.1 as isize);
        let size = d.h.div_ceil(d.spec.stride.0) * d.wo;
        let (a, b) = (offh.rem_euclid(sh) as usize, offw.rem_euclid(sw) as usize);
        let p = (c * sh as usize + a) * sw as usize + b;
        Some(Shift {
            phase: true,
            at: p * size..(p + 1) * size,
            dy: offh.div_euclid(sh),
            dx: offw.div_euclid(sw),
        })
    }
}

/// Whether the `k` taps of a dimension (dilation `dl`, padding `p`, stride `s`) land on every
/// residue modulo `s`, so that each phase plane is read.
fn every_phase(k: usize, dl: usize, p: usize, s: usize) -> bool {
    let residue = |i: usize| ((i * dl) as isize - p as isize).rem_euclid(s as isize) as usize;
    k >= s && (0..s).all(|r| (0..k).any(|i| residue(i) == r))
}

/// Splits one group's input `x` into its phase planes (see the module header); does nothing
/// when `planes` is empty. Plane entries that no input pixel maps to are left as they were:
/// a tap reads them only in the padding, which the copy zeroes.
fn split_phases<T: Real>(g: &Geom, x: &[T], planes: &mut [T]) {
    let d = &g.d;
    if planes.is_empty() || d.w == 0 {
        return;
    }
    let (sh, sw) = d.spec.stride;
    let size = d.h.div_ceil(sh) * d.wo;
    crate::simd::with_best_simd(
        #[inline(always)]
        || {
            // Plane (c, a, b) takes input rows a, a + sh, .. of channel c, as rows of `wo`;
            // `group` holds the sw planes of one (c, a).
            let mut groups = planes.chunks_exact_mut(sw * size);
            for xc in x.chunks_exact(g.hw_in).take(g.cg) {
                for (a, group) in groups.by_ref().take(sh).enumerate() {
                    let rows = || xc.chunks_exact(d.w).skip(a).step_by(sh);
                    if sw == 2 {
                        // Both phases of a row in one pass over its pairs (a pass per phase
                        // with a stride-2 read ran at under a pixel per cycle).
                        let (even, odd) = group.split_at_mut(size);
                        let (even, odd) = (even.chunks_exact_mut(d.wo), odd.chunks_exact_mut(d.wo));
                        for ((e, o), row) in even.zip(odd).zip(rows()) {
                            let pairs = row.chunks_exact(2);
                            if let Some(&last) = pairs.remainder().first() {
                                e[d.w / 2] = last;
                            }
                            for ((e, o), p) in e.iter_mut().zip(o.iter_mut()).zip(pairs) {
                                (*e, *o) = (p[0], p[1]);
                            }
                        }
                        continue;
                    }
                    for (b, plane) in group.chunks_exact_mut(size).enumerate() {
                        for (dst, row) in plane.chunks_exact_mut(d.wo).zip(rows()) {
                            for (v, &p) in dst.iter_mut().zip(row[b.min(d.w)..].iter().step_by(sw))
                            {
                                *v = p;
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The adjoint of [`split_phases`]: adds each phase plane's pixels onto the input pixels they
/// came from.
fn merge_phases<T: Real>(g: &Geom, planes: &[T], dx: &mut [T]) {
    let d = &g.d;
    if planes.is_empty() || d.w == 0 {
        return;
    }
    let (sh, sw) = d.spec.stride;
    let size = d.h.div_ceil(sh) * d.wo;
    crate::simd::with_best_simd(
        #[inline(always)]
        || {
            let mut groups = planes.chunks_exact(sw * size);
            for xc in dx.chunks_exact_mut(g.hw_in).take(g.cg) {
                for (a, group) in groups.by_ref().take(sh).enumerate() {
                    let rows = xc.chunks_exact_mut(d.w).skip(a).step_by(sh);
                    if sw == 2 {
                        let (even, odd) = group.split_at(size);
                        let (even, odd) = (even.chunks_exact(d.wo), odd.chunks_exact(d.wo));
                        for ((e, o), row) in even.zip(odd).zip(rows) {
                            let mut pairs = row.chunks_exact_mut(2);
                            for ((e, o), p) in e.iter().zip(o).zip(pairs.by_ref()) {
                                (p[0], p[1]) = (p[0] + *e, p[1] + *o);
                            }
                            if let Some(last) = pairs.into_remainder().first_mut() {
                                *last = *last + e[d.w / 2];
                            }
                        }
                        continue;
                    }
                    // Row `a + r * sh` of the channel is row r of each of the group's planes.
                    for (r, row) in rows.enumerate() {
                        for (b, plane) in group.chunks_exact(size).enumerate() {
                            let src = &plane[r * d.wo..(r + 1) * d.wo];
                            for (v, &p) in row[b.min(d.w)..].iter_mut().step_by(sw).zip(src) {
                                *v = *v + p;
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The outputs `lo..hi` (of `count`) whose tap `o * step + off` lies in `0..len`.
fn span(off: isize, step: usize, len: usize, count: usize) -> (isize, usize, usize) {
    let s = step as isize;
    let lo = if off >= 0 { 0 } else { (-off + s - 1) / s } as usize;
    let end = len as isize - off;
    let hi = if end <= 0 { 0 } else { (end + s - 1) / s } as usize;
    let lo = lo.min(count);
    (off, lo, hi.clamp(lo, count))
}

/// Writes the column matrix (kk, pixels) of output rows `out_rows` of one group of one sample
/// (see the module header).
pub(super) fn im2col<T: Real>(g: &Geom, src: &Source<T>, col: &mut [T], out_rows: Range<usize>) {
    let d = &g.d;
    let (sh, sw) = d.spec.stride;
    let (ph, dh) = (d.spec.padding.0, d.spec.dilation.0);
    let (r0, nrows) = (out_rows.start, out_rows.len());
    let mut rows = col.chunks_exact_mut(nrows * d.wo);
    for c in 0..g.cg {
        let xc = &src.x[c * g.hw_in..(c + 1) * g.hw_in];
        for i in 0..d.kh {
            let (offh, lo_h, hi_h) = span((i * dh) as isize - ph as isize, sh, d.h, d.ho);
            // The same span, relative to the block's first output row.
            let lo_b = lo_h.saturating_sub(r0).min(nrows);
            let hi_b = hi_h.saturating_sub(r0).clamp(lo_b, nrows);
            for j in 0..d.kw {
                let (offw, lo, hi) = g.cols(j);
                let row = rows.next().expect("kk rows of the block's pixels");
                if let Some(s) = g.shift(c, offh, offw) {
                    let plane = if s.phase { src.planes } else { src.x };
                    let dy = s.dy + r0 as isize;
                    shifted_copy(row, &plane[s.at], d.wo, (dy, lo_b, hi_b), (s.dx, lo, hi));
                    continue;
                }
                for (ob, dst) in row.chunks_exact_mut(d.wo).enumerate() {
                    let oh = r0 + ob;
                    if oh < lo_h || oh >= hi_h {
                        dst.fill(T::default());
                        continue;
                    }
                    let ih = (oh * sh) as isize + offh;
                    let src = &xc[ih as usize * d.w..(ih as usize + 1) * d.w];
                    dst[..lo].fill(T::default());
                    dst[hi..].fill(T::default());
                    let first = (lo * sw) as isize + offw;
                    if sw == 1 {
                        let a = first as usize;
                        dst[lo..hi].copy_from_slice(&src[a..a + hi - lo]);
                    } else {
                        for (k, v) in dst[lo..hi].iter_mut().enumerate() {
                            *v = src[first as usize + k * sw];
                        }
                    }
                }
            }
        }
    }
}

/// One row of the column matrix from a plane as wide as the output (`w` = `wo`), which output
/// pixel (oh, ow) reads at (oh + offh, ow + offw): a constant shift in the flat plane, so the
/// rows `lo_h..hi_h` whose taps land inside are one copy, after which the columns outside
/// `lo..hi` (which picked up a neighbouring row's pixels, or lie past the copy) are zeroed. A
/// copy (and two fills) per output row had spent more time in `memmove` / `memset` calls than
/// in moving a 14-pixel row.
fn shifted_copy<T: Real>(
    row: &mut [T],
    plane: &[T],
    w: usize,
    (offh, lo_h, hi_h): (isize, usize, usize),
    (offw, lo, hi): (isize, usize, usize),
) {
    let Some((a, b, src)) = shift_span(w, (offh, lo_h, hi_h), (offw, lo, hi)) else {
        row.fill(T::default());
        return;
    };
    row[a..b].copy_from_slice(&plane[src..src + (b - a)]);
    row[..lo_h * w].fill(T::default());
    row[hi_h * w..].fill(T::default());
    zero_columns(&mut row[lo_h * w..hi_h * w], w, lo, hi);
}

/// For [`shifted_copy`] / [`shifted_add`]: the span `a..b` of the column-matrix row from the
/// first in-range tap to the last, and the image index that `a` maps to; `None` when no tap
/// lands inside the image.
fn shift_span(
    w: usize,
    (offh, lo_h, hi_h): (isize, usize, usize),
    (offw, lo, hi): (isize, usize, usize),
) -> Option<(usize, usize, usize)> {
    if lo_h >= hi_h || lo >= hi {
        return None;
    }
    // (lo_h + offh, lo + offw) is inside the plane: `span` picked lo_h and lo so.
    let at = (lo_h as isize + offh) * w as isize + lo as isize + offw;
    Some((lo_h * w + lo, (hi_h - 1) * w + hi, at as usize))
}

/// Zeroes columns `..lo` and `hi..` of the `w`-wide rows in `rows`. Column by column: those are
/// a pixel or two per row, and per-row `fill`s each became a `memset` call (a tenth of the
/// conv layer's time).
fn zero_columns<T: Real>(rows: &mut [T], w: usize, lo: usize, hi: usize) {
    for k in (0..lo).chain(hi..w) {
        for x in rows.iter_mut().skip(k).step_by(w) {
            *x = T::default();
        }
    }
}

/// The adjoint of [`shifted_copy`]: the column-matrix row's entries whose taps fall in the
/// padding are zeroed (the row is scratch), then the rows `lo_h..hi_h` are added onto the
/// plane in one pass along the constant shift.
fn shifted_add<T: Real>(
    row: &mut [T],
    plane: &mut [T],
    w: usize,
    (offh, lo_h, hi_h): (isize, usize, usize),
    (offw, lo, hi): (isize, usize, usize),
) {
    let Some((a, b, dst)) = shift_span(w, (offh, lo_h, hi_h), (offw, lo, hi)) else {
        return;
    };
    zero_columns(&mut row[lo_h * w..hi_h * w], w, lo, hi);
    for (x, &y) in plane[dst..dst + (b - a)].iter_mut().zip(&row[a..b]) {
        *x = *x + y;
    }
}

/// The adjoint of [`im2col`] over all output rows: adds each entry of the column matrix back
/// onto the input pixel it was read from (taps in the padding are dropped). `planes` is
/// scratch of at least [`Geom::planes_len`] values; `col` is scratch too.
pub(super) fn col2im<T: Real>(g: &Geom, col: &mut [T], dx: &mut [T], planes: &mut [T]) {
    let d = &g.d;
    let (sh, sw) = d.spec.stride;
    let (ph, dh) = (d.spec.padding.0, d.spec.dilation.0);
    let planes = &mut planes[..g.planes_len()];
    planes.fill(T::default());
    let mut rows = col.chunks_exact_mut(g.hw);
    for c in 0..g.cg {
        for i in 0..d.kh {
            let (offh, lo_h, hi_h) = span((i * dh) as isize - ph as isize, sh, d.h, d.ho);
            for j in 0..d.kw {
                let (offw, lo, hi) = g.cols(j);
                let row = rows.next().expect("kk rows of hw");
                if let Some(s) = g.shift(c, offh, offw) {
                    let plane = if s.phase { &mut *planes } else { &mut *dx };
                    let (dy, dxs) = (s.dy, s.dx);
                    shifted_add(row, &mut plane[s.at], d.wo, (dy, lo_h, hi_h), (dxs, lo, hi));
                    continue;
                }
                let xc = &mut dx[c * g.hw_in..(c + 1) * g.hw_in];
                for oh in lo_h..hi_h {
                    let src = &row[oh * d.wo..(oh + 1) * d.wo];
                    let ih = ((oh * sh) as isize + offh) as usize;
                    let dst = &mut xc[ih * d.w..(ih + 1) * d.w];
                    let first = ((lo * sw) as isize + offw) as usize;
                    if sw == 1 {
                        for (a, &b) in dst[first..first + hi - lo].iter_mut().zip(&src[lo..hi]) {
                            *a = *a + b;
                        }
                    } else {
                        for (k, &b) in src[lo..hi].iter().enumerate() {
                            let a = &mut dst[first + k * sw];
                            *a = *a + b;
                        }
                    }
                }
            }
        }
    }
    merge_phases(g, planes, dx);
}

#[cfg(test)]
mod tests {
    use super::*;
    use quill_core::{Conv2dSpec, ConvDims};

    /// The geometry of a 1-sample, `c`-channel layer (one group).
    fn geom(
        c: usize,
        hw: (usize, usize),
        k: (usize, usize),
        s: (usize, usize),
        p: (usize, usize),
        dl: (usize, usize),
    ) -> Geom {
        let spec = Conv2dSpec {
            stride: s,
            padding: p,
            dilation: dl,
            groups: 1,
        };
        let d = ConvDims::new("test", &[1, c, hw.0, hw.1], &[2, c, k.0, k.1], spec).unwrap();
        Geom::new(&d)
    }

    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f64 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Strided layers with `ceil(w / sw)` output columns whose taps read every phase take phase
    /// planes; "same" layers read the input itself; the rest go row by row.
    #[test]
    fn phase_planes_where_every_phase_is_read() {
        type Pair = (usize, usize);
        /// Input, kernel, stride, padding, dilation; then (same width, phase planes).
        type Case = (Pair, Pair, Pair, Pair, Pair, (bool, bool));
        let cases: [Case; 8] = [
            // ResNet's downsampling 3x3 and its 7x7 stem.
            ((28, 28), (3, 3), (2, 2), (1, 1), (1, 1), (false, true)),
            ((224, 224), (7, 7), (2, 2), (3, 3), (1, 1), (false, true)),
            // Odd width: ceil(27 / 2) = 14 output columns.
            ((27, 27), (3, 3), (2, 2), (1, 1), (1, 1), (false, true)),
            // 1x1 stride 2 reads one phase; dilation 2 with stride 2 reads one parity.
            ((28, 28), (1, 1), (2, 2), (0, 0), (1, 1), (false, false)),
            ((28, 28), (3, 3), (2, 2), (2, 2), (2, 2), (false, false)),
            // Unpadded: 26 output columns of 28.
            ((28, 28), (3, 3), (1, 1), (0, 0), (1, 1), (false, false)),
            // "Same", and wider than the input (one phase, widened).
            ((28, 28), (3, 3), (1, 1), (1, 1), (1, 1), (true, false)),
            ((28, 28), (3, 3), (1, 1), (2, 2), (1, 1), (false, true)),
        ];
        for (hw, k, s, p, dl, want) in cases {
            let g = geom(2, hw, k, s, p, dl);
            assert_eq!(
                (g.same_width(), g.phased()),
                want,
                "{hw:?} {k:?} {s:?} {p:?} {dl:?}"
            );
        }
        assert!(every_phase(3, 1, 1, 3) && !every_phase(2, 1, 0, 3) && !every_phase(4, 3, 0, 3));
    }

    /// Every path of `im2col` (whole and by blocks of output rows) against a per-pixel gather,
    /// and `col2im` against it by the adjoint identity <col2im(C), x> = <C, im2col(x)>. The
    /// planes' scratch starts as NaN: an entry read outside the input would show.
    #[test]
    fn im2col_and_col2im_match_a_per_pixel_gather() {
        let cases = [
            geom(3, (28, 28), (3, 3), (2, 2), (1, 1), (1, 1)),
            geom(2, (27, 25), (3, 3), (2, 2), (1, 1), (1, 1)),
            geom(2, (17, 16), (7, 7), (2, 2), (3, 3), (1, 1)),
            geom(2, (13, 14), (5, 4), (3, 2), (2, 1), (1, 1)),
            geom(2, (9, 11), (3, 5), (2, 3), (1, 2), (1, 1)),
            geom(2, (8, 8), (3, 3), (1, 1), (2, 2), (1, 1)),
            geom(2, (9, 9), (3, 3), (1, 1), (1, 1), (1, 1)),
            geom(2, (12, 12), (1, 1), (2, 2), (0, 0), (1, 1)),
            geom(2, (12, 10), (3, 3), (2, 1), (2, 2), (2, 2)),
            geom(2, (10, 10), (3, 3), (1, 1), (0, 0), (1, 1)),
        ];
        for (t, g) in cases.iter().enumerate() {
            let d = &g.d;
            let (sh, sw) = d.spec.stride;
            let x = values(g.cg * g.hw_in, t as u64);
            let mut want = vec![0.0; g.kk * g.hw];
            for c in 0..g.cg {
                for i in 0..d.kh {
                    for j in 0..d.kw {
                        for oh in 0..d.ho {
                            for ow in 0..d.wo {
                                let ih = (oh * sh + i * d.spec.dilation.0) as isize
                                    - d.spec.padding.0 as isize;
                                let iw = (ow * sw + j * d.spec.dilation.1) as isize
                                    - d.spec.padding.1 as isize;
                                let inside = (0..d.h as isize).contains(&ih)
                                    && (0..d.w as isize).contains(&iw);
                                want[((c * d.kh + i) * d.kw + j) * g.hw + oh * d.wo + ow] =
                                    if inside {
                                        x[c * g.hw_in + ih as usize * d.w + iw as usize]
                                    } else {
                                        0.0
                                    };
                            }
                        }
                    }
                }
            }
            let mut buf = vec![f64::NAN; g.planes_len()];
            let src = Source::new(g, &x, &mut buf);
            let mut col = vec![f64::NAN; g.kk * g.hw];
            im2col(g, &src, &mut col, 0..d.ho);
            assert_eq!(col, want, "case {t}: whole");
            // Two blocks of output rows, the second shorter.
            let r = d.ho.div_ceil(2).max(1);
            for rows in [0..r, r..d.ho] {
                let m = rows.len() * d.wo;
                let mut block = vec![f64::NAN; g.kk * m];
                im2col(g, &src, &mut block, rows.clone());
                for (k, got) in block.chunks(m.max(1)).enumerate() {
                    let from = k * g.hw + rows.start * d.wo;
                    assert_eq!(
                        got,
                        &want[from..from + m],
                        "case {t}: rows {rows:?}, tap row {k}"
                    );
                }
            }
            let cv = values(g.kk * g.hw, 100 + t as u64);
            let mut dx = vec![0.0; g.cg * g.hw_in];
            let mut planes = vec![f64::NAN; g.planes_len()];
            col2im(g, &mut cv.clone(), &mut dx, &mut planes);
            let lhs: f64 = dx.iter().zip(&x).map(|(a, b)| a * b).sum();
            let rhs: f64 = cv.iter().zip(&want).map(|(a, b)| a * b).sum();
            assert!(
                (lhs - rhs).abs() < 1e-9 * (1.0 + rhs.abs()),
                "case {t}: {lhs} vs {rhs}"
            );
        }
    }
}
