//! Depthwise convolution (one input channel per group, `groups == c`: MobileNet's and
//! ConvNeXt's layers, with any channel multiplier `o / c`) as a direct stencil over zero-framed
//! copies of each plane. The im2col path ran every channel as a GEMM with a single output row
//! over a `kh * kw`-deep column matrix: a 4- to 12-row micro-tile with one row used, after
//! writing `kh * kw` copies of the plane.
//!
//! - forward: `L`-wide blocks of `R` output rows at a time sum their taps in registers
//!   (`stencil`), reading the input framed by its padding;
//! - input gradient: with unit strides the same stencil, over the output gradient framed so
//!   that every tap of the flipped filters lands inside, writes each input pixel once; with
//!   larger strides each output-gradient row is added, times each tap, onto the framed rows
//!   it came from, and the frame is cropped away;
//! - weight gradient: per tap, a dot product of the output gradient with the framed input
//!   read at the tap's shift, summed over the batch; threads split the channels, so each
//!   weight's sum runs in one fixed order.
//!
//! Planes go to threads whole (sample and channel for the forward and the input gradient).

use super::{per_sample, Geom, GRAIN};
use crate::simd::with_best_simd;
use quill_gemm::Real;

/// Output columns summed in registers at a time (one AVX-512 vector of f32).
const L: usize = 16;
/// Output rows summed together: independent sums, so that a block's taps do not wait on one
/// another's adds (one row at a time ran at a third of the speed).
const R: usize = 4;

/// A `rows x cols` plane holding an `h x w` one at (top, left), zero around it.
#[derive(Clone, Copy)]
struct Frame {
    rows: usize,
    cols: usize,
    top: usize,
    left: usize,
}

impl Frame {
    /// The input framed by its padding: every row an output reads, every column that the last
    /// `L`-wide block's last tap reads (past `wo`, into zeros), and the whole input, so that
    /// cropping an input gradient back needs no bounds of its own.
    fn input(g: &Geom) -> Frame {
        let d = &g.d;
        let (sh, sw) = d.spec.stride;
        let (ph, pw) = d.spec.padding;
        let (dh, dw) = d.spec.dilation;
        Frame {
            rows: ((d.ho - 1) * sh + (d.kh - 1) * dh + 1).max(ph + d.h),
            cols: ((d.wo.next_multiple_of(L) - 1) * sw + (d.kw - 1) * dw + 1).max(pw + d.w),
            top: ph,
            left: pw,
        }
    }

    /// The output gradient framed for the unit-stride input gradient: input pixel (r, c) sums
    /// the flipped taps at rows `r + ph + a * dh` and columns `c + pw + b * dw` of the frame.
    fn output_grad(g: &Geom) -> Frame {
        let d = &g.d;
        let (ph, pw) = d.spec.padding;
        let (qh, qw) = (
            (d.kh - 1) * d.spec.dilation.0,
            (d.kw - 1) * d.spec.dilation.1,
        );
        Frame {
            rows: (d.h + ph + qh).max(qh + d.ho),
            cols: (d.w.next_multiple_of(L) + pw + qw).max(qw + d.wo),
            top: qh,
            left: qw,
        }
    }

    /// The output gradient with its rows widened to whole `L`-wide blocks.
    fn blocks(g: &Geom) -> Frame {
        Frame {
            rows: g.d.ho,
            cols: g.d.wo.next_multiple_of(L),
            top: 0,
            left: 0,
        }
    }

    fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Writes plane `src` (`h x w`) into `dst` at (top, left), zero around it. Only the border
    /// is zeroed: a fill of the whole frame wrote more than the stencil reads.
    #[inline(always)]
    fn fill<T: Real>(&self, src: &[T], (h, w): (usize, usize), dst: &mut [T]) {
        let dst = &mut dst[..self.len()];
        if src.is_empty() {
            // A zero-height or zero-width input, padded into a non-empty output.
            dst.fill(T::default());
            return;
        }
        let (top, rest) = dst.split_at_mut(self.top * self.cols);
        top.fill(T::default());
        let (mid, bottom) = rest.split_at_mut(h * self.cols);
        bottom.fill(T::default());
        for (s, row) in src.chunks_exact(w).zip(mid.chunks_exact_mut(self.cols)) {
            row[..self.left].fill(T::default());
            copy_short(&mut row[self.left..self.left + w], s);
            row[self.left + w..].fill(T::default());
        }
    }
}

/// `dst.copy_from_slice(src)` in `L`-value moves: a row is a few dozen values, and a `memcpy`
/// call per row (and per output block) had taken a quarter of the forward.
#[inline(always)]
fn copy_short<T: Real>(dst: &mut [T], src: &[T]) {
    let mut d = dst.chunks_exact_mut(L);
    let mut s = src.chunks_exact(L);
    for (d, s) in (&mut d).zip(&mut s) {
        let d: &mut [T; L] = d.try_into().expect("L values");
        *d = *<&[T; L]>::try_from(s).expect("L values");
    }
    let (mut d, mut s) = (d.into_remainder(), s.remainder());
    if d.len() >= L / 2 {
        let (d8, dr) = d.split_at_mut(L / 2);
        let d8: &mut [T; L / 2] = d8.try_into().expect("L / 2 values");
        *d8 = s[..L / 2].try_into().expect("L / 2 values");
        (d, s) = (dr, &s[L / 2..]);
    }
    for (d, &s) in d.iter_mut().zip(s) {
        *d = s;
    }
}

/// Whether a convolution takes this path: every group one input channel, several groups (a
/// single-channel input with one group stays a GEMM, whose output channels fill its tiles).
pub(super) fn applies(g: &Geom) -> bool {
    g.cg == 1 && g.d.spec.groups > 1
}

/// `conv.rs`'s `per_sample` over `per`-long chunks of `out`: on the pool when the convolution
/// is large enough.
fn for_planes<T: Real>(
    g: &Geom,
    out: &mut [T],
    per: usize,
    scratch: usize,
    f: impl Fn(usize, &mut [T], &mut [T]) + Sync + Send,
) {
    let split = g.work() >= GRAIN && crate::par::threads() > 1;
    per_sample(out, per, split, scratch, f)
}

/// Calls `f::<S>()` with the column stride `sw` as a constant where it is 1 or 2 (0: read at
/// run time), inside the widest SIMD context for those.
macro_rules! by_stride {
    ($sw:expr, $f:ident::<$t:ty>($($arg:expr),*)) => {
        match $sw {
            1 => with_best_simd(
                #[inline(always)]
                || $f::<$t, 1>($($arg),*),
            ),
            2 => with_best_simd(
                #[inline(always)]
                || $f::<$t, 2>($($arg),*),
            ),
            _ => $f::<$t, 0>($($arg),*),
        }
    };
}

/// The flat offsets in a `cols`-wide frame of a `kh x kw` filter's taps, dilated.
fn tap_offsets(g: &Geom, cols: usize) -> Vec<usize> {
    let d = &g.d;
    let (dh, dw) = d.spec.dilation;
    (0..d.kh)
        .flat_map(|a| (0..d.kw).map(move |b| a * dh * cols + b * dw))
        .collect()
}

/// The forward into `y` (n, o, ho, wo) from contiguous `x` (n, c, h, w) and `w` (o, 1, kh, kw).
pub(super) fn forward<T: Real>(g: &Geom, x: &[T], w: &[T], y: &mut [T]) {
    let d = &g.d;
    let frame = Frame::input(g);
    let offsets = tap_offsets(g, frame.cols);
    let kk = offsets.len();
    let st = Stencil {
        cols: frame.cols,
        sh: d.spec.stride.0,
        sw: d.spec.stride.1,
        offsets: &offsets,
        wo: d.wo,
    };
    // One (sample, channel) plane: its `og` output planes.
    for_planes(g, y, g.og * g.hw, frame.len(), |p, y, xf| {
        let x = &x[p * g.hw_in..(p + 1) * g.hw_in];
        let filters = &w[(p % d.c) * g.og * kk..][..g.og * kk];
        by_stride!(st.sw, forward_plane::<T>(g, frame, &st, x, xf, filters, y));
    });
}

/// One input plane `x`, framed into `xf`, through each of its `og` filters into `y`.
#[inline(always)]
fn forward_plane<T: Real, const S: usize>(
    g: &Geom,
    frame: Frame,
    st: &Stencil,
    x: &[T],
    xf: &mut [T],
    filters: &[T],
    y: &mut [T],
) {
    frame.fill(x, (g.d.h, g.d.w), xf);
    for (yj, wj) in y
        .chunks_exact_mut(g.hw)
        .zip(filters.chunks_exact(st.offsets.len()))
    {
        stencil::<T, S>(st, xf, wj, yj);
    }
}

/// `out[i, j] = sum_t w[t] * src[i * sh * cols + j * sw + offsets[t]]` over an output plane
/// `wo` wide; the caller's frame holds every value the `L`-wide blocks read.
struct Stencil<'a> {
    cols: usize,
    sh: usize,
    sw: usize,
    offsets: &'a [usize],
    wo: usize,
}

/// Runs [`Stencil`] over all of `out`, `R` rows at a time and the last few one at a time, with
/// column stride `S` (0: `st.sw` read at run time).
#[inline(always)]
fn stencil<T: Real, const S: usize>(st: &Stencil, src: &[T], w: &[T], out: &mut [T]) {
    let rows = out.len() / st.wo;
    let whole = rows / R * R;
    let (head, tail) = out.split_at_mut(whole * st.wo);
    for (q, block) in head.chunks_exact_mut(R * st.wo).enumerate() {
        stencil_rows::<T, S, R>(st, src, w, q * R, block);
    }
    for (k, row) in tail.chunks_exact_mut(st.wo).enumerate() {
        stencil_rows::<T, S, 1>(st, src, w, whole + k, row);
    }
}

/// Output rows `i0..i0 + N` of [`Stencil`] into `out` (N rows of `wo`).
#[inline(always)]
fn stencil_rows<T: Real, const S: usize, const N: usize>(
    st: &Stencil,
    src: &[T],
    w: &[T],
    i0: usize,
    out: &mut [T],
) {
    let sw = if S == 0 { st.sw } else { S };
    for j0 in (0..st.wo).step_by(L) {
        let mut acc = [[T::default(); L]; N];
        let base = i0 * st.sh * st.cols + j0 * sw;
        // One flat loop over taps: LLVM then vectorises the L-wide body, not across the
        // taps of a kernel row (interleaved loads at a third of the speed).
        for (&off, &wv) in st.offsets.iter().zip(w) {
            for (r, acc) in acc.iter_mut().enumerate() {
                let v = window::<T, S>(&src[base + r * st.sh * st.cols + off..], sw);
                for l in 0..L {
                    acc[l] = acc[l] + wv * v[l];
                }
            }
        }
        let n = L.min(st.wo - j0);
        for (r, acc) in acc.iter().enumerate() {
            store_block(&mut out[r * st.wo + j0..][..n], acc);
        }
    }
}

/// `src[0], src[sw], ..., src[(L - 1) * sw]`: with `S` 1, one load of `L` values.
#[inline(always)]
fn window<T: Real, const S: usize>(src: &[T], sw: usize) -> [T; L] {
    if S == 1 {
        let x: &[T; L] = src[..L].try_into().expect("L values");
        *x
    } else {
        let src = &src[..(L - 1) * sw + 1];
        std::array::from_fn(|l| src[l * sw])
    }
}

/// The first `out.len()` (at most `L`) sums of a block into `out`.
#[inline(always)]
fn store_block<T: Real>(out: &mut [T], acc: &[T; L]) {
    if let Ok(out) = <&mut [T; L]>::try_from(&mut *out) {
        *out = *acc;
    } else {
        copy_short(out, &acc[..out.len()]);
    }
}

/// The input gradient into `dx` (n, c, h, w) from contiguous `gy` (n, o, ho, wo) and `w`.
pub(super) fn backward_input<T: Real>(g: &Geom, gy: &[T], w: &[T], dx: &mut [T]) {
    let d = &g.d;
    if d.spec.stride != (1, 1) {
        return scatter(g, gy, w, dx);
    }
    let frame = Frame::output_grad(g);
    let (ph, pw) = d.spec.padding;
    let kk = d.kh * d.kw;
    // Tap (j, a, b) of the flipped filters reads output-gradient plane j's frame at
    // (r + ph + a * dh, c + pw + b * dw) for input pixel (r, c).
    let shift = ph * frame.cols + pw;
    let offsets: Vec<usize> = (0..g.og)
        .flat_map(|j| {
            tap_offsets(g, frame.cols)
                .into_iter()
                .map(move |o| j * frame.len() + shift + o)
        })
        .collect();
    let st = Stencil {
        cols: frame.cols,
        sh: 1,
        sw: 1,
        offsets: &offsets,
        wo: d.w,
    };
    for_planes(g, dx, g.hw_in, g.og * frame.len(), |p, dx, gf| {
        let gyp = &gy[p * g.og * g.hw..(p + 1) * g.og * g.hw];
        // The filters of this channel, each reversed in both dims.
        let wf: Vec<T> = w[(p % d.c) * g.og * kk..][..g.og * kk]
            .chunks_exact(kk)
            .flat_map(|f| f.iter().rev().copied())
            .collect();
        with_best_simd(
            #[inline(always)]
            || {
                for (src, dst) in gyp.chunks_exact(g.hw).zip(gf.chunks_exact_mut(frame.len())) {
                    frame.fill(src, (d.ho, d.wo), dst);
                }
                stencil::<T, 1>(&st, gf, &wf, dx)
            },
        );
    });
}

/// The input gradient for strides above 1: every output-gradient row, times each tap, added
/// onto the input frame's rows it was read from, then the frame cropped into `dx`.
fn scatter<T: Real>(g: &Geom, gy: &[T], w: &[T], dx: &mut [T]) {
    let d = &g.d;
    let frame = Frame::input(g);
    let kk = d.kh * d.kw;
    for_planes(g, dx, g.hw_in, frame.len(), |p, dx, dxf| {
        dxf.fill(T::default());
        let gyp = &gy[p * g.og * g.hw..(p + 1) * g.og * g.hw];
        let filters = &w[(p % d.c) * g.og * kk..][..g.og * kk];
        for (gyj, wj) in gyp.chunks_exact(g.hw).zip(filters.chunks_exact(kk)) {
            by_stride!(d.spec.stride.1, scatter_plane::<T>(g, frame, gyj, wj, dxf));
        }
        for (r, dst) in dx.chunks_exact_mut(d.w).enumerate() {
            let at = (r + frame.top) * frame.cols + frame.left;
            dst.copy_from_slice(&dxf[at..at + d.w]);
        }
    });
}

/// Adds output-gradient plane `gy` (ho x wo), times each of one channel's taps `w`, onto the
/// input frame `dxf` at the pixels those taps read.
#[inline(always)]
fn scatter_plane<T: Real, const S: usize>(
    g: &Geom,
    frame: Frame,
    gy: &[T],
    w: &[T],
    dxf: &mut [T],
) {
    let d = &g.d;
    let sw = if S == 0 { d.spec.stride.1 } else { S };
    let (sh, (dh, dw)) = (d.spec.stride.0, d.spec.dilation);
    for (i, grow) in gy.chunks_exact(d.wo).enumerate() {
        for a in 0..d.kh {
            let row = &mut dxf[(i * sh + a * dh) * frame.cols..][..frame.cols];
            for b in 0..d.kw {
                let wv = w[a * d.kw + b];
                let dst = &mut row[b * dw..][..(d.wo - 1) * sw + 1];
                for (t, &v) in dst.iter_mut().step_by(sw).zip(grow) {
                    *t = *t + wv * v;
                }
            }
        }
    }
}

/// The weight gradient (o, 1, kh, kw) from contiguous `x` and `gy`.
pub(super) fn backward_weight<T: Real>(g: &Geom, x: &[T], gy: &[T]) -> Vec<T> {
    let d = &g.d;
    let (xframe, gframe) = (Frame::input(g), Frame::blocks(g));
    let offsets = tap_offsets(g, xframe.cols);
    let kk = offsets.len();
    let mut dw = vec![T::default(); d.o * kk];
    // Per filter tap, `R x L` running lanes, reduced to the tap's sum once the batch is done.
    let lanes_len = g.og * kk * R * L;
    let scratch = xframe.len() + gframe.len() + lanes_len;
    // One input channel: its `og` filters, summed over the batch.
    for_planes(g, &mut dw, g.og * kk, scratch, |gi, dwc, s| {
        let (xf, rest) = s.split_at_mut(xframe.len());
        let (gf, lanes) = rest.split_at_mut(gframe.len());
        lanes.fill(T::default());
        let t = TapDots {
            xframe,
            gframe,
            sh: d.spec.stride.0,
            sw: d.spec.stride.1,
            offsets: &offsets,
        };
        for n in 0..d.n {
            let p = n * d.c + gi;
            let x = &x[p * g.hw_in..(p + 1) * g.hw_in];
            let gy = &gy[p * g.og * g.hw..(p + 1) * g.og * g.hw];
            by_stride!(t.sw, weight_plane::<T>(g, &t, x, gy, xf, gf, lanes));
        }
        for (sum, lanes) in dwc.iter_mut().zip(lanes.chunks_exact(R * L)) {
            *sum = lanes.iter().fold(T::default(), |s, &v| s + v);
        }
    });
    dw
}

/// One sample's input plane `x` (framed into `xf`) against its `og` output-gradient planes
/// `gy` (each framed into `gf`), added onto the lanes of the channel's filter taps.
#[inline(always)]
fn weight_plane<T: Real, const S: usize>(
    g: &Geom,
    t: &TapDots,
    x: &[T],
    gy: &[T],
    xf: &mut [T],
    gf: &mut [T],
    lanes: &mut [T],
) {
    t.xframe.fill(x, (g.d.h, g.d.w), xf);
    let per = t.offsets.len() * R * L;
    for (gyj, lanes) in gy.chunks_exact(g.hw).zip(lanes.chunks_exact_mut(per)) {
        t.gframe.fill(gyj, (g.d.ho, g.d.wo), gf);
        for (&off, lanes) in t.offsets.iter().zip(lanes.chunks_exact_mut(R * L)) {
            tap_lanes::<T, S>(t, xf, gf, off, lanes);
        }
    }
}

/// `dw[t] += sum_{i, j} gy[i, j] * x[i * sh * cols + j * sw + offsets[t]]` over a framed
/// output-gradient plane (`gframe`: rows of whole `L`-wide blocks, zero past `wo`) and a
/// framed input (`xframe`, `cols` wide).
struct TapDots<'a> {
    xframe: Frame,
    gframe: Frame,
    sh: usize,
    sw: usize,
    offsets: &'a [usize],
}

/// One tap of [`TapDots`] with column stride `S` (0: read at run time), added onto its
/// `R x L` running lanes: `R` rows at a time into separate lanes, the rest into the first.
#[inline(always)]
fn tap_lanes<T: Real, const S: usize>(t: &TapDots, x: &[T], gy: &[T], off: usize, lanes: &mut [T]) {
    let sw = if S == 0 { t.sw } else { S };
    let (xcols, gcols) = (t.xframe.cols, t.gframe.cols);
    let rows = t.gframe.rows;
    let whole = rows / R * R;
    for i0 in (0..whole).step_by(R) {
        // This group's sums stay in registers (lanes carried across groups did not), then
        // go onto the running lanes.
        let mut acc = [[T::default(); L]; R];
        for j0 in (0..gcols).step_by(L) {
            for (r, acc) in acc.iter_mut().enumerate() {
                let i = i0 + r;
                let g: &[T; L] = gy[i * gcols + j0..][..L].try_into().expect("L values");
                let v = window::<T, S>(&x[i * t.sh * xcols + j0 * sw + off..], sw);
                for l in 0..L {
                    acc[l] = acc[l] + g[l] * v[l];
                }
            }
        }
        for (s, &a) in lanes.iter_mut().zip(acc.as_flattened()) {
            *s = *s + a;
        }
    }
    for i in whole..rows {
        let mut acc = [T::default(); L];
        for j0 in (0..gcols).step_by(L) {
            let g: &[T; L] = gy[i * gcols + j0..][..L].try_into().expect("L values");
            let v = window::<T, S>(&x[i * t.sh * xcols + j0 * sw + off..], sw);
            for l in 0..L {
                acc[l] = acc[l] + g[l] * v[l];
            }
        }
        for (s, &a) in lanes.iter_mut().zip(&acc) {
            *s = *s + a;
        }
    }
}
