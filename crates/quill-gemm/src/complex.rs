//! The complex product on the real GEMM, two ways.
//!
//! - [`Method::Exact`], one real product per matrix: with `a` read as the `m x 2k` real matrix
//!   of its interleaved (re, im) pairs, and `b` expanded to the `2k x 2n` real matrix whose rows
//!   `2p` and `2p + 1` are `b`'s row `p` as pairs and `i b`'s row `p` as pairs (`[br, bi]`
//!   and `[-bi, br]`), the real product `m x 2n` is `a @ b`'s pairs already interleaved. Each
//!   output sum is the textbook `(ar br - ai bi) + i (ar bi + ai br)` (the rounding of BLAS's
//!   zgemm, the 4M method's), with no pass to split the operands or join the result.
//! - [`Method::Gauss`], the 3M method: `t1 = ar br`, `t2 = ai bi`, `t3 = (ar + ai)(br + bi)`,
//!   then `re = t1 - t2`, `im = t3 - t1 - t2`: three real products instead of four, so a
//!   quarter fewer flops than zgemm once the products dominate. Each pair's error stays within
//!   the usual bound for a product (a small multiple of `k u sum |a_ip| |b_pj|`), but the
//!   imaginary part alone is not accurate relative to itself when it is much smaller than the
//!   real part (Higham, *Accuracy and Stability of Numerical Algorithms*, 23.2.4), which is
//!   why it has its own name in BLAS libraries (`zgemm3m`).
//!
//! [`matmul_complex`] takes the 3M method where its three products outweigh its passes
//! (`tuning::GAUSS_WORK`), [`matmul_complex_with`] whichever the caller names.

use crate::batch::{fold_rows, mats, threads_for, Error, Operand, Product, LARGE};
use crate::select::select;
use crate::tuning::GAUSS_WORK;
use crate::types::{Mat, Pack, Real};
use std::cell::Cell;

/// How [`matmul_complex_with`] forms each product (see the module text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Four real multiplies per pair, as zgemm: each part as accurate as a real product.
    Exact,
    /// Three real products (3M): a quarter fewer flops, the imaginary part accurate only
    /// relative to the pair's magnitude.
    Gauss,
}

/// Bytes of 3M scratch a thread keeps for its next call: the two sum planes and the third
/// product of a 1024^3 complex128 product (24 MB), whose fresh pages cost about a tenth of it.
const PLANES_KEPT: usize = 32 << 20;

thread_local! {
    /// The sum planes and third product of a 3M product, kept for the thread's next call.
    static PLANES: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// `out = a @ b` for complex matrices held as `[re, im]` pairs of f32 or f64: `a` is
/// `(batch.., m, k)`, `b` is `(batch.., k, n)` (equal batch dims, broadcast ones as stride 0),
/// shapes, offsets and strides counted in pairs; `out` is the contiguous `(batch.., m, n)`
/// result, every pair overwritten. Large products take the 3M method ([`Method::Gauss`]),
/// small ones [`Method::Exact`]. Threads and kernel as [`matmul`](crate::matmul). Errs,
/// writing nothing, on shapes that do not form a product, an output of the wrong length or an
/// operand reaching outside its buffer.
pub fn matmul_complex<T: Real + Pack<T>>(
    a: Operand<'_, [T; 2]>,
    b: Operand<'_, [T; 2]>,
    out: &mut [[T; 2]],
) -> Result<(), Error> {
    matmul_complex_with(None, a, b, out)
}

/// [`matmul_complex`] by the named method (`None`: chosen by size, as `matmul_complex` does).
pub fn matmul_complex_with<T: Real + Pack<T>>(
    method: Option<Method>,
    a: Operand<'_, [T; 2]>,
    b: Operand<'_, [T; 2]>,
    out: &mut [[T; 2]],
) -> Result<(), Error> {
    let p = Product::checked(a, b, out.len())?;
    let (m, k, n) = (p.d.m, p.d.k, p.d.n);
    if out.is_empty() {
        return Ok(());
    }
    let out: &mut [T] = bytemuck::cast_slice_mut(out);
    if k == 0 {
        out.fill(T::default());
        return Ok(());
    }
    let threads = quill_par::threads();
    let bt = mats(&p);
    let gauss = |rows: usize| match method {
        Some(m) => m == Method::Gauss,
        None => rows.min(k).min(n) >= 32 && rows * k * n >= GAUSS_WORK,
    };
    // One product: 3M from the pairs, or the exact form from `b` expanded (`blk`, when the
    // whole batch shares one `b`, else expanded here).
    let one = |a: Pairs<T>, b: Pairs<T>, rows: usize, blk: Option<&[T]>, c: &mut [T], t| {
        if gauss(rows) {
            three(a, b, [rows, k, n], c, t);
        } else {
            let (data, (ob, rs, cs)) = b;
            let own;
            let blk = match blk {
                Some(x) => x,
                None => {
                    own = expand(data, ob, (rs, cs), k, n);
                    &own
                }
            };
            product(a.0, a.1, [rows, k, n], blk, c, t);
        }
    };
    let b_at = |ob: usize| (p.b.data, (ob, bt.b.0, bt.b.1));
    if let Some((rows, rs)) = fold_rows(&p) {
        let (oa, ob) = bt.offsets[0];
        let t = threads_for(4 * rows * k * n, threads);
        one((p.a.data, (oa, rs, bt.a.1)), b_at(ob), rows, None, out, t);
        return Ok(());
    }
    let count = bt.offsets.len();
    let threads = threads_for(4 * count * m * k * n, threads);
    let across = threads > 1 && count > 1 && (count >= 4 * threads || 4 * m * k * n < LARGE);
    let t = if across {
        1
    } else {
        threads_for(4 * m * k * n, threads)
    };
    // A b shared by the whole batch (a stride-0 batch dim) is expanded once.
    let shared = !gauss(m) && bt.offsets.iter().all(|o| o.1 == bt.offsets[0].1);
    let once = shared.then(|| expand(p.b.data, bt.offsets[0].1, bt.b, k, n));
    let items = out.chunks_mut(2 * m * n).enumerate();
    quill_par::for_each_item(items, if across { threads } else { 1 }, |(i, c)| {
        let (oa, ob) = bt.offsets[i];
        let a = (p.a.data, (oa, bt.a.0, bt.a.1));
        one(a, b_at(ob), m, once.as_deref(), c, t);
    });
    Ok(())
}

/// The `2k x 2n` real matrix of `b`'s pairs (`b`'s (0, 0) at pair `off`, strides in pairs):
/// row `2p` holds row `p`'s pairs `[br, bi]`, row `2p + 1` the pairs of `i b`, `[-bi, br]`.
fn expand<T: Real>(
    b: &[[T; 2]],
    off: usize,
    (rs, cs): (isize, isize),
    k: usize,
    n: usize,
) -> Vec<T> {
    let mut blk = vec![T::default(); 4 * k * n];
    for (p, rows) in blk.chunks_exact_mut(4 * n).enumerate() {
        let (re, im) = rows.split_at_mut(2 * n);
        let row = off as isize + p as isize * rs;
        for (j, (x, y)) in re
            .chunks_exact_mut(2)
            .zip(im.chunks_exact_mut(2))
            .enumerate()
        {
            // In bounds: `Product::checked` saw every pair of the k x n matrix in `b`.
            let [br, bi] = b[(row + j as isize * cs) as usize];
            x.copy_from_slice(&[br, bi]);
            y.copy_from_slice(&[-bi, br]);
        }
    }
    blk
}

/// One `m x k` by `k x n` complex product into the `m x 2n` reals `c`: `a`'s (0, 0) at pair
/// `oa`, row and column strides `ars`, `acs` in pairs; `blk` is `b` expanded.
fn product<T: Real + Pack<T>>(
    a: &[[T; 2]],
    (oa, ars, acs): (usize, isize, isize),
    [m, k, n]: [usize; 3],
    blk: &[T],
    c: &mut [T],
    threads: usize,
) {
    let g = select::<T>();
    let bm = Mat::new(blk, 0, 2 * n as isize, 1);
    if acs == 1 || k == 1 {
        // The pairs of a row are adjacent: the row is 2k reals at stride 1.
        let am = Mat::<T>::new(bytemuck::cast_slice(a), 2 * oa, 2 * ars, 1);
        g.run([m, 2 * n, 2 * k], &am, &bm, c, threads);
    } else {
        let mut rows = Vec::with_capacity(2 * m * k);
        for i in 0..m {
            let row = oa as isize + i as isize * ars;
            rows.extend((0..k).flat_map(|p| a[(row + p as isize * acs) as usize]));
        }
        let am = Mat::new(&rows, 0, 2 * k as isize, 1);
        g.run([m, 2 * n, 2 * k], &am, &bm, c, threads);
    }
}

/// A matrix of pairs: the buffer, and its (0, 0) pair, row and column strides in pairs.
type Pairs<'a, T> = (&'a [[T; 2]], (usize, isize, isize));

/// The real (`part` 0) or imaginary (1) parts of a matrix of pairs, as a strided real matrix.
fn part<'a, T: Real>((x, (off, rs, cs)): Pairs<'a, T>, part: usize) -> Mat<'a, T> {
    Mat::new(bytemuck::cast_slice(x), 2 * off + part, 2 * rs, 2 * cs)
}

/// Writes `re + im` of each pair of the `rows x cols` matrix `x` into the contiguous `sum`,
/// rows split between `threads`.
fn sums<T: Real>((x, (off, rs, cs)): Pairs<T>, cols: usize, sum: &mut [T], threads: usize) {
    quill_par::for_each_chunk(sum, cols.max(1), threads, |i, s| {
        let row = off as isize + i as isize * rs;
        for (j, s) in s.iter_mut().enumerate() {
            // In bounds: `Product::checked` saw every pair of the matrix in its buffer.
            let [x, y] = x[(row + j as isize * cs) as usize];
            *s = x + y;
        }
    });
}

/// One `m x k` by `k x n` complex product into the `m x 2n` reals `c` by the 3M method: `t1`
/// and `t2` go into the halves of `c`'s rows (rows `2n` apart) reading the parts in place,
/// `t3` from the two sum planes into scratch, and one pass per row interleaves `t1 - t2` and
/// `t3 - t1 - t2`.
fn three<T: Real + Pack<T>>(
    a: Pairs<T>,
    b: Pairs<T>,
    [m, k, n]: [usize; 3],
    c: &mut [T],
    threads: usize,
) {
    let g = select::<T>();
    let (ak, kn, mn) = (m * k, k * n, m * n);
    // Passes split between threads only when each share is worth waking a thread for.
    let pass = |len: usize| threads_for(len * 64, threads);
    crate::gemm::with_scratch_kept(&PLANES, ak + kn + mn, PLANES_KEPT, |s: &mut [T]| {
        let (sa, rest) = s.split_at_mut(ak);
        let (sb, t3) = rest.split_at_mut(kn);
        sums(a, k, sa, pass(ak));
        sums(b, n, sb, pass(kn));
        let (ld, span) = (2 * n, (m - 1) * 2 * n + n);
        g.run_rows(
            [m, n, k],
            &part(a, 0),
            &part(b, 0),
            &mut c[..span],
            ld,
            threads,
        );
        g.run_rows(
            [m, n, k],
            &part(a, 1),
            &part(b, 1),
            &mut c[n..n + span],
            ld,
            threads,
        );
        let (sa, sb) = (
            Mat::new(&*sa, 0, k as isize, 1),
            Mat::new(&*sb, 0, n as isize, 1),
        );
        g.run([m, n, k], &sa, &sb, t3, threads);
        let t3 = &*t3;
        // Eight rows per task, through one row of scratch: in place, pair j's values would
        // land where t1 or t2 values not yet read lie.
        const ROWS: usize = 8;
        quill_par::for_each_chunk(c, ROWS * 2 * n, pass(mn), |b, block| {
            let mut row = vec![T::default(); 2 * n];
            for (i, cr) in block.chunks_exact_mut(2 * n).enumerate() {
                let (t1, t2) = cr.split_at(n);
                let t3 = &t3[(b * ROWS + i) * n..][..n];
                for (j, o) in row.chunks_exact_mut(2).enumerate() {
                    let (x, y) = (t1[j], t2[j]);
                    o[0] = x - y;
                    o[1] = t3[j] - (x + y);
                }
                cr.copy_from_slice(&row);
            }
        });
    });
}
