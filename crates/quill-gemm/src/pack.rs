//! Packing: copies a block of a strided matrix (any signed row and column strides, including 0)
//! into the panel order the micro-kernels stream, converting elements on the way (f16/bf16 are
//! widened to f32 here, so the kernels see only f32 or f64). Panels past the matrix edge are
//! zero-padded, which lets edge tiles run the full kernel loop. Safe code: every read is
//! bounds-checked, and a matrix that lies in its buffer never fails those checks. The traits
//! (`Cvt`, `Pack`) and `Mat` are `types.rs`'s; this file holds their f32 / f64 / f16 / bf16
//! implementations for the f32 and f64 kernels (`bf16.rs` and `amx.rs` pack bf16 pairs).

use crate::tuning::{ROW_GROUP, ROW_GROUP_STRIDE};
use crate::types::{Cvt, Mat, Pack};
use half::{bf16, f16};

impl Cvt<f32> for f32 {
    #[inline(always)]
    fn cvt(self) -> f32 {
        self
    }
    fn same(data: &[f32]) -> Option<&[f32]> {
        Some(data)
    }
    fn transpose_runs(dst: &mut [f32], runs: &[&[f32]], kc: usize, w: usize, ahead: isize) -> bool {
        crate::transpose_pack::f32_runs(dst, runs, kc, w, ahead)
    }
}
impl Cvt<f64> for f64 {
    #[inline(always)]
    fn cvt(self) -> f64 {
        self
    }
    fn same(data: &[f64]) -> Option<&[f64]> {
        Some(data)
    }
}
impl Cvt<f32> for f16 {
    #[inline(always)]
    fn cvt(self) -> f32 {
        self.to_f32()
    }
}
impl Cvt<f32> for bf16 {
    #[inline(always)]
    fn cvt(self) -> f32 {
        self.to_f32()
    }
}

/// [`Pack::pack_b_block`] panel by panel: panel `q` of columns `j0..j0 + cols` at
/// `dst[q * steps(kc) * nr..]`.
pub(crate) fn by_panels<P, S: Pack<P>>(
    dst: &mut [P],
    b: &Mat<S>,
    p0: usize,
    kc: usize,
    j0: usize,
    cols: usize,
    nr: usize,
) {
    each_panel(dst, nr * S::steps(kc), b, p0, kc, j0, cols, nr)
}

/// Depth `p0..p0 + kc` of each B panel of columns `j0..j0 + cols`, panel `q` written from
/// `dst[q * panel_len..]`: whole panels ([`by_panels`]), or one group of rows of panels
/// `panel_len` apart (the row-group order).
#[allow(clippy::too_many_arguments)]
fn each_panel<P, S: Pack<P>>(
    dst: &mut [P],
    panel_len: usize,
    b: &Mat<S>,
    p0: usize,
    kc: usize,
    j0: usize,
    cols: usize,
    nr: usize,
) {
    for (q, d) in dst
        .chunks_mut(panel_len)
        .take(cols.div_ceil(nr))
        .enumerate()
    {
        let j = q * nr;
        S::pack_b(d, b, p0, kc, j0 + j, nr.min(cols - j), nr);
    }
}

/// Where element `(p0, j0)` of `b` lies, as a byte address, and B's row stride in bytes, when
/// each row is contiguous and the `kc x cols` box from there lies inside `b`'s buffer: the
/// source a fusing kernel (`Gemm::fused`) packs B's panels from.
pub(crate) fn rows_in_place<S>(
    b: &Mat<S>,
    [p0, kc, j0, cols]: [usize; 4],
) -> Option<(*const u8, isize)> {
    if b.cs != 1 || kc == 0 || cols == 0 || !b.holds([p0, j0], [kc, cols]) {
        return None;
    }
    // From the buffer's start, not a slice from the corner: with reversed rows the kernel
    // reads below that corner.
    let at = b.data.as_ptr().wrapping_offset(b.at_signed(p0, j0)).cast();
    Some((at, b.rs * size_of::<S>() as isize))
}

/// For tests: the layouts every path that reads B must take, as `k x n` views of `data`
/// (at least `k * (n + 3) + 1` values): row-major, at an odd offset with padded rows, with
/// reversed rows (row p at row k - 1 - p), and transposed (each column contiguous).
#[cfg(test)]
pub(crate) fn b_layouts<S>(data: &[S], k: usize, n: usize) -> [(Mat<'_, S>, &'static str); 4] {
    [
        (Mat::new(data, 0, n as isize, 1), "row-major"),
        (Mat::new(data, 1, n as isize + 3, 1), "odd offset"),
        (
            Mat::new(data, (k - 1) * n, -(n as isize), 1),
            "reversed rows",
        ),
        (Mat::new(data, 0, 1, k as isize), "transposed"),
    ]
}

impl<T: Copy + Default, S: Cvt<T>> Pack<T> for S {
    const DEPTH: usize = 1;
    fn direct(data: &[S]) -> Option<&[T]> {
        S::same(data)
    }
    #[inline]
    fn pack_a(dst: &mut [T], a: &Mat<S>, i0: usize, rows: usize, p0: usize, kc: usize, mr: usize) {
        pack_a(dst, a, i0, rows, p0, kc, mr)
    }
    #[inline]
    fn pack_b(dst: &mut [T], b: &Mat<S>, p0: usize, kc: usize, j0: usize, cols: usize, nr: usize) {
        pack_b(dst, b, p0, kc, j0, cols, nr)
    }
    /// Values that need no conversion.
    fn fuse_source(b: &Mat<S>, block: [usize; 4]) -> Option<(*const u8, isize)> {
        S::same(b.data)?;
        rows_in_place(b, block)
    }
    fn pack_b_block(
        dst: &mut [T],
        b: &Mat<S>,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        // Only rows a page or more apart: with shorter rows the panel order reads as fast, and
        // the group order's writes to every panel at once cost more (`ROW_GROUP_STRIDE`).
        if b.cs != 1 || cols <= nr || b.rs.unsigned_abs() * size_of::<S>() < ROW_GROUP_STRIDE {
            return by_panels(dst, b, p0, kc, j0, cols, nr);
        }
        for p in (0..kc).step_by(ROW_GROUP) {
            let g = ROW_GROUP.min(kc - p);
            each_panel(&mut dst[p * nr..], nr * kc, b, p0 + p, g, j0, cols, nr);
        }
    }
}

/// Packs rows `i0..i0 + rows` (rows <= mr) and columns `p0..p0 + kc` of `a` into one A panel:
/// `dst[kk * mr + i] = a[i0 + i, p0 + kk]`, rows past `rows` zero.
pub(crate) fn pack_a<T: Copy + Default, S: Cvt<T>>(
    dst: &mut [T],
    a: &Mat<S>,
    i0: usize,
    rows: usize,
    p0: usize,
    kc: usize,
    mr: usize,
) {
    let dst = &mut dst[..kc * mr];
    if a.cs == 1 {
        // Row-major source: each row is a contiguous run; scatter it down the panel.
        let next = mr as isize * a.rs;
        if transposed(dst, rows, kc, mr, next, |i| {
            &a.data[a.at(i0 + i, p0)..][..kc]
        }) {
            return;
        }
        for i in 0..rows {
            let s = a.at(i0 + i, p0);
            for (kk, &x) in a.data[s..s + kc].iter().enumerate() {
                dst[kk * mr + i] = x.cvt();
            }
        }
        if rows < mr {
            for step in dst.chunks_exact_mut(mr) {
                step[rows..].fill(T::default());
            }
        }
    } else if a.rs == 1 {
        // Column-major (a transposed view, as in a weight gradient `x^T @ g`): each k step's
        // rows are one contiguous run, copied as a slice so that the copy vectorises; at the
        // kernels' heights as one of constant length (a run-time length left a scalar tail
        // that cost a 784 x 128 @ 128 x 512 weight gradient 5 % of its time).
        let start = |kk: usize| a.at(i0, p0 + kk);
        if let (true, Some(data)) = (rows == mr, S::same(a.data)) {
            match mr {
                4 => return copy_runs::<4, T>(dst, data, start),
                6 => return copy_runs::<6, T>(dst, data, start),
                12 => return copy_runs::<12, T>(dst, data, start),
                _ => {}
            }
        }
        for (kk, step) in dst.chunks_exact_mut(mr).enumerate() {
            let s = a.at(i0, p0 + kk);
            for (x, &y) in step[..rows].iter_mut().zip(&a.data[s..s + rows]) {
                *x = y.cvt();
            }
            step[rows..].fill(T::default());
        }
    } else {
        // General strides: walk one k step at a time.
        for (kk, step) in dst.chunks_exact_mut(mr).enumerate() {
            let s = a.at(i0, p0 + kk) as isize;
            for (i, x) in step[..rows].iter_mut().enumerate() {
                *x = a.data[(s + i as isize * a.rs) as usize].cvt();
            }
            step[rows..].fill(T::default());
        }
    }
}

/// Packs rows `p0..p0 + kc` and columns `j0..j0 + cols` (cols <= nr) of `b` into one B panel:
/// `dst[kk * nr + j] = b[p0 + kk, j0 + j]`, columns past `cols` zero.
pub(crate) fn pack_b<T: Copy + Default, S: Cvt<T>>(
    dst: &mut [T],
    b: &Mat<S>,
    p0: usize,
    kc: usize,
    j0: usize,
    cols: usize,
    nr: usize,
) {
    let dst = &mut dst[..kc * nr];
    if b.cs == 1 {
        // By the kernels' widths: a copy of a constant length is inlined, where a run-time one
        // calls memmove per step (a 100^3 product spent 8 % of its time in those calls for
        // whole panels, and 3 % for its partial last one).
        match nr {
            8 => return copy_rows::<8, T, S>(dst, b, p0, j0, cols),
            16 => return copy_rows::<16, T, S>(dst, b, p0, j0, cols),
            32 => return copy_rows::<32, T, S>(dst, b, p0, j0, cols),
            _ => {}
        }
        for (kk, step) in dst.chunks_exact_mut(nr).enumerate() {
            let s = b.at(p0 + kk, j0);
            for (x, &y) in step.iter_mut().zip(&b.data[s..s + cols]) {
                *x = y.cvt();
            }
            step[cols..].fill(T::default());
        }
    } else if b.rs == 1 {
        // A transposed B: each column is contiguous; scatter it across the panel.
        let next = nr as isize * b.cs;
        if transposed(dst, cols, kc, nr, next, |j| {
            &b.data[b.at(p0, j0 + j)..][..kc]
        }) {
            return;
        }
        for j in 0..cols {
            let s = b.at(p0, j0 + j);
            for (kk, &y) in b.data[s..s + kc].iter().enumerate() {
                dst[kk * nr + j] = y.cvt();
            }
        }
        if cols < nr {
            for step in dst.chunks_exact_mut(nr) {
                step[cols..].fill(T::default());
            }
        }
    } else {
        for (kk, step) in dst.chunks_exact_mut(nr).enumerate() {
            let s = b.at(p0 + kk, j0) as isize;
            for (j, x) in step[..cols].iter_mut().enumerate() {
                *x = b.data[(s + j as isize * b.cs) as usize].cvt();
            }
            step[cols..].fill(T::default());
        }
    }
}

/// `pack_b` of a row-major B's `W`-wide panel of `cols` columns at column `j0`, from row `p0`
/// on: one `W`-long row per step of `dst`, zero past `cols`.
fn copy_rows<const W: usize, T: Copy + Default, S: Cvt<T>>(
    dst: &mut [T],
    b: &Mat<S>,
    p0: usize,
    j0: usize,
    cols: usize,
) {
    // Two loops, not one with the test inside: the whole-panel copy is the hot one.
    if cols == W {
        // A copy of a constant length compiles to a few vector moves; the element-wise loop
        // below, even with an identity conversion, stayed 16 scalar moves per f32 step (a
        // fifth of a 64 x 1024 x 1024 product's time on AVX2 went to packing B).
        if let Some(data) = S::same(b.data) {
            return copy_runs::<W, T>(dst, data, |kk| b.at(p0 + kk, j0));
        }
        for (kk, step) in dst.chunks_exact_mut(W).enumerate() {
            let s = b.at(p0 + kk, j0);
            for (x, &y) in step.iter_mut().zip(&b.data[s..s + W]) {
                *x = y.cvt();
            }
        }
        return;
    }
    for (kk, step) in dst.chunks_exact_mut(W).enumerate() {
        let src = &b.data[b.at(p0 + kk, j0)..][..cols];
        for (j, x) in step.iter_mut().enumerate() {
            *x = src.get(j).map_or(T::default(), |&y| y.cvt());
        }
    }
}

/// `dst`'s `W`-long steps, step `kk` copied from `data[start(kk)..][..W]`: a copy of constant
/// length, which compiles to a few vector moves.
fn copy_runs<const W: usize, T: Copy>(dst: &mut [T], data: &[T], start: impl Fn(usize) -> usize) {
    for (kk, step) in dst.chunks_exact_mut(W).enumerate() {
        let s = start(kk);
        step.copy_from_slice(&data[s..s + W]);
    }
}

/// The SIMD form of the two scatters above: `count` runs (`run(i)`, each `kc` long) across a
/// panel `w` wide, the values past `count` zeroed. False, with nothing written, where the
/// element type has no SIMD transpose or the panel is wider than the runs buffer.
pub(crate) fn transposed<'a, T: Copy + Default, S: Cvt<T> + 'a>(
    dst: &mut [T],
    count: usize,
    kc: usize,
    w: usize,
    ahead: isize,
    run: impl Fn(usize) -> &'a [S],
) -> bool {
    const MAX: usize = 32;
    if count > MAX || count > w {
        return false;
    }
    let mut runs: [&[S]; MAX] = [&[]; MAX];
    for (i, r) in runs.iter_mut().enumerate().take(count) {
        *r = run(i);
    }
    if !S::transpose_runs(dst, &runs[..count], kc, w, ahead) {
        return false;
    }
    if count < w {
        for step in dst.chunks_exact_mut(w) {
            step[count..].fill(T::default());
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Mat::holds` against checking every element of the box: row-major, reversed rows and
    /// columns, an offset, boxes that reach one past either end of the buffer, empty boxes.
    #[test]
    fn holds_matches_every_element() {
        let data = [0u8; 12];
        let mats = [
            Mat::new(&data, 0, 4, 1),
            Mat::new(&data, 11, -4, -1),
            Mat::new(&data, 2, 3, 1),
            Mat::new(&data, 8, -4, 1),
        ];
        for m in &mats {
            for (i0, j0, rows, cols) in [
                (0, 0, 3, 4),
                (0, 0, 4, 1),
                (0, 0, 1, 5),
                (1, 1, 2, 3),
                (2, 3, 1, 1),
                (3, 0, 1, 1),
                (0, 0, 0, 9),
                (9, 9, 3, 0),
            ] {
                let every = (0..rows)
                    .all(|i| (0..cols).all(|j| (0..12).contains(&m.at_signed(i0 + i, j0 + j))));
                assert_eq!(
                    m.holds([i0, j0], [rows, cols]),
                    every,
                    "off {} rs {} cs {}: box {rows}x{cols} at ({i0}, {j0})",
                    m.off,
                    m.rs,
                    m.cs
                );
            }
        }
    }

    /// `pack_b_block` against the panel layout's definition (`dst[q][kk * nr + j] =
    /// b[p0 + kk, j0 + q * nr + j]`, zero past the last column), for row-major B with rows a
    /// page apart (the row-group order: depths around `ROW_GROUP`, partial last panels) and
    /// close together, reversed row strides, a transposed B and a stepped one.
    #[test]
    fn block_packing_matches_the_panel_layout() {
        let (rows, cols) = (70usize, 90usize);
        // Room for rows a page apart too (ROW_GROUP_STRIDE), where the row-group order runs.
        let wide = ROW_GROUP_STRIDE / 4 + 10;
        let data: Vec<f32> = (0..rows * wide).map(|x| x as f32 * 0.5 - 7.0).collect();
        let layouts = [
            Mat::new(&data, 0, wide as isize, 1),
            Mat::new(&data, (rows - 1) * wide + 7, -(wide as isize), 1),
            Mat::new(&data, 0, cols as isize, 1),
            Mat::new(&data, (rows - 1) * cols, -(cols as isize), 1),
            Mat::new(&data, 0, 1, rows as isize),
            Mat::new(&data, 3, 2 * cols as isize, 1),
            Mat::new(&data, 5, 1, 2 * rows as isize),
        ];
        for (l, b) in layouts.iter().enumerate() {
            for nr in [8, 16, 32] {
                for kc in [1, 15, ROW_GROUP, ROW_GROUP + 1, 40, 64] {
                    for (p0, j0, w) in [(0, 0, 90usize), (3, 5, 61), (6, 1, nr), (1, 2, nr - 3)] {
                        let panels = w.div_ceil(nr);
                        let mut got = vec![f32::NAN; panels * kc * nr];
                        <f32 as Pack<f32>>::pack_b_block(&mut got, b, p0, kc, j0, w, nr);
                        for (q, panel) in got.chunks(kc * nr).enumerate() {
                            for kk in 0..kc {
                                for j in 0..nr {
                                    let col = q * nr + j;
                                    let want = if col < w {
                                        b.get(p0 + kk, j0 + col)
                                    } else {
                                        0.0
                                    };
                                    assert_eq!(
                                        panel[kk * nr + j].to_bits(),
                                        want.to_bits(),
                                        "layout {l} nr {nr} kc {kc} p0 {p0} j0 {j0} w {w}: \
                                         panel {q} step {kk} lane {j}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// `pack_a` against the panel layout's definition (`dst[kk * mr + i] = a[i0 + i, p0 + kk]`,
    /// zero past the last row) for column-major A (a transposed view: the constant-length copy
    /// at the kernels' heights, and the run-time one below them), row-major A (the SIMD
    /// transpose) and a stepped A, f32 and a converted source (bf16 into f32).
    #[test]
    fn a_packing_matches_the_panel_layout() {
        let (rows, cols) = (40usize, 50usize);
        // Multiples of 1/4 below 64 (exact in bf16), repeating only every 251 values.
        let data: Vec<f32> = (0..rows * cols * 2)
            .map(|x| (x % 251) as f32 * 0.25 - 3.0)
            .collect();
        let halves: Vec<half::bf16> = data.iter().map(|&x| half::bf16::from_f32(x)).collect();
        let layouts = [
            (0, 1, rows as isize),
            (rows * (cols - 1), 1, -(rows as isize)),
            (0, cols as isize, 1),
            (3, 2, 2 * rows as isize),
        ];
        for (l, &(off, rs, cs)) in layouts.iter().enumerate() {
            let a = Mat::new(&data, off, rs, cs);
            let ah = Mat::new(&halves, off, rs, cs);
            for mr in [4, 6, 12, 16] {
                for (i0, h) in [(0, mr), (5, mr), (7, mr - 1), (2, 1)] {
                    for (p0, kc) in [(0, 1), (3, 17), (1, 40)] {
                        let mut got = vec![f32::NAN; kc * mr];
                        let mut goth = vec![f32::NAN; kc * mr];
                        pack_a(&mut got, &a, i0, h, p0, kc, mr);
                        pack_a(&mut goth, &ah, i0, h, p0, kc, mr);
                        for kk in 0..kc {
                            for i in 0..mr {
                                let want = if i < h { a.get(i0 + i, p0 + kk) } else { 0.0 };
                                let at = format!("layout {l} mr {mr} i0 {i0} rows {h} p0 {p0} kc {kc}: step {kk} row {i}");
                                assert_eq!(got[kk * mr + i].to_bits(), want.to_bits(), "{at}");
                                assert_eq!(
                                    goth[kk * mr + i].to_bits(),
                                    want.to_bits(),
                                    "bf16 {at}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
