//! The batched product: `(batch.., m, k) @ (batch.., k, n)` over strided operands (a buffer,
//! a shape and signed strides in elements, as [`Operand`] describes them) into a contiguous
//! `(batch.., m, n)` output. f32 and f64 run the GEMM (`gemm.rs`) per product, threads inside a
//! large product or across the batch; a batch whose B is one matrix for every product and whose
//! A's batch dims continue its rows runs as one tall product. bf16 runs AMX tiles where the CPU
//! has AMX, `vdpbf16ps` on bf16 pairs where it has AVX512_BF16, both kernels rounding each
//! finished tile to bf16 themselves; otherwise f16 and bf16 are widened to f32 while packing.
//! All accumulate in f32 and round once at the end. Integers and bool run a plain loop
//! (`int.rs`). Broadcasting is the caller's: a broadcast batch dim is a stride of 0.

use crate::gemm::{with_scratch, Gemm};
use crate::select::{amx_tiles, bf16_pairs, select};
use crate::tuning::PER_THREAD;
use crate::types::{Mat, Pack, Real};
use half::{bf16, f16};
use quill_par::simd::with_best_simd;
use std::cell::Cell;

/// Multiply-adds above which one product of a batch is worth splitting across threads.
pub(crate) const LARGE: usize = 1 << 24;

/// One operand of a batched product: element `(i_0, .., i_{r-1})` of the `shape`d array is
/// `data[offset + sum(i_d * strides[d])]`. The last two dims are the matrix's rows and columns,
/// the others the batch; strides may be negative, or 0 for a broadcast dim.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a, T> {
    /// The buffer.
    pub data: &'a [T],
    /// Index of the first element in `data`.
    pub offset: usize,
    /// Sizes, batch dims first, then rows and columns.
    pub shape: &'a [usize],
    /// Element strides, one per dim.
    pub strides: &'a [isize],
}

impl<'a, T> Operand<'a, T> {
    /// The `shape`d array with `strides` from the start of `data` (offset 0); [`row_major`]
    /// gives a contiguous array's strides.
    pub fn new(data: &'a [T], shape: &'a [usize], strides: &'a [isize]) -> Self {
        Operand {
            data,
            offset: 0,
            shape,
            strides,
        }
    }

    /// Whether every element lies in `data` (an empty array always does).
    fn in_bounds(&self) -> bool {
        if self.shape.contains(&0) {
            return true;
        }
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (&d, &s) in self.shape.iter().zip(self.strides) {
            let reach = (d as i128 - 1) * s as i128;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        lo >= 0 && hi < self.data.len() as i128
    }
}

/// The row-major strides of `shape`, in elements.
pub fn row_major(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut s = 1isize;
    for (st, &d) in strides.iter_mut().zip(shape).rev() {
        *st = s;
        s *= d.max(1) as isize;
    }
    strides
}

/// Why [`matmul`] refused its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The shapes do not form a batched product: ranks below 2 or unequal, a stride missing,
    /// batch dims that differ, or contracted dims that differ.
    Shape {
        /// A's shape.
        a: Vec<usize>,
        /// B's shape.
        b: Vec<usize>,
    },
    /// The output does not hold `batch * m * n` elements.
    Output {
        /// The elements the product has.
        want: usize,
        /// The output's length.
        got: usize,
    },
    /// An operand's shape and strides reach outside its buffer (`'a'` or `'b'`).
    OutOfBounds(char),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Shape { a, b } => write!(f, "matmul: shapes {a:?} and {b:?} do not match"),
            Error::Output { want, got } => {
                write!(f, "matmul: output holds {got} elements, the product {want}")
            }
            Error::OutOfBounds(which) => write!(f, "matmul: {which} reaches outside its buffer"),
        }
    }
}

impl std::error::Error for Error {}

/// An element type [`matmul`] takes: f32, f64, f16, bf16, the integers (which wrap as NumPy's
/// do) and bool (the or of ands).
pub trait Element: Copy + Send + Sync + Batched {}

/// How an element type runs a checked batched product (sealed: not nameable outside the crate).
pub trait Batched: Sized {
    /// Writes the product `p` describes into `out` (its length checked).
    fn batched(p: &Product<'_, Self>, out: &mut [Self]);
}

/// `out = a @ b`, batched: `a` is `(batch.., m, k)`, `b` is `(batch.., k, n)` (the same
/// batch dims; broadcast dims have stride 0), `out` the contiguous `(batch.., m, n)` result,
/// every element overwritten. Threads come from rayon's pool (quill-par's fork-join), the kernel
/// from [`active_kernel`](crate::active_kernel). Errs, writing nothing, when the shapes do not
/// match, `out` has the wrong length, or an operand reaches outside its buffer.
pub fn matmul<T: Element>(
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    out: &mut [T],
) -> Result<(), Error> {
    let p = Product::checked(a, b, out.len())?;
    T::batched(&p, out);
    Ok(())
}

/// A batched product whose shapes and bounds [`matmul`] checked.
pub struct Product<'a, T> {
    pub(crate) d: Dims,
    pub(crate) a: Operand<'a, T>,
    pub(crate) b: Operand<'a, T>,
}

impl<'a, T> Product<'a, T> {
    /// Checks that `a` and `b` form a batched product lying in their buffers and that an
    /// output of `out_len` elements holds it.
    pub(crate) fn checked(
        a: Operand<'a, T>,
        b: Operand<'a, T>,
        out_len: usize,
    ) -> Result<Self, Error> {
        let (sa, sb) = (a.shape, b.shape);
        let r = sa.len();
        if r < 2
            || sb.len() != r
            || a.strides.len() != r
            || b.strides.len() != r
            || sa[..r - 2] != sb[..r - 2]
            || sa[r - 1] != sb[r - 2]
        {
            return Err(Error::Shape {
                a: sa.into(),
                b: sb.into(),
            });
        }
        if !a.in_bounds() {
            return Err(Error::OutOfBounds('a'));
        }
        if !b.in_bounds() {
            return Err(Error::OutOfBounds('b'));
        }
        let d = Dims {
            m: sa[r - 2],
            k: sa[r - 1],
            n: sb[r - 1],
        };
        let want = sa[..r - 2].iter().product::<usize>() * d.m * d.n;
        if out_len != want {
            return Err(Error::Output { want, got: out_len });
        }
        Ok(Product { d, a, b })
    }
}

/// Sizes of each product of a batch.
pub(crate) struct Dims {
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

macro_rules! element {
    ($($t:ty => |$p:ident, $o:ident| $e:expr;)*) => {$(
        impl Element for $t {}
        impl Batched for $t {
            fn batched($p: &Product<'_, $t>, $o: &mut [$t]) {
                $e
            }
        }
    )*};
}

element! {
    f32 => |p, o| float(p, o, select::<f32>());
    f64 => |p, o| float(p, o, select::<f64>());
    f16 => |p, o| half_float(p, o, f16::from_f32, select::<f32>());
    bf16 => |p, o| match (amx_tiles(), bf16_pairs()) {
        (Some(g), _) => bf16_product(p, o, g),
        (None, Some(g)) => bf16_product(p, o, g),
        (None, None) => half_float(p, o, to_bf16, select::<f32>()),
    };
    i8 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    i16 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    i32 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    i64 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    u8 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    u16 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    u32 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    u64 => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
    bool => |p, o| crate::int::matmul(p.a.data, &mats(p), p.b.data, o, &p.d);
}

/// Element offsets of the first element of every product of the batch, in C order, for both
/// operands, plus the row and column strides of each.
pub(crate) struct Batch {
    pub offsets: Vec<(usize, usize)>,
    pub a: (isize, isize),
    pub b: (isize, isize),
}

pub(crate) fn mats<T>(p: &Product<'_, T>) -> Batch {
    let r = p.a.shape.len();
    let (sa, sb) = (p.a.strides, p.b.strides);
    let batch = &p.a.shape[..r - 2];
    let count: usize = batch.iter().product();
    // C order: the last batch dim moves fastest. Offsets stay inside the buffers by
    // `Operand::in_bounds`.
    let mut offsets = Vec::with_capacity(count);
    let mut index = vec![0usize; batch.len()];
    let (mut oa, mut ob) = (p.a.offset as isize, p.b.offset as isize);
    for _ in 0..count {
        offsets.push((oa as usize, ob as usize));
        for d in (0..batch.len()).rev() {
            index[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if index[d] < batch[d] {
                break;
            }
            oa -= sa[d] * batch[d] as isize;
            ob -= sb[d] * batch[d] as isize;
            index[d] = 0;
        }
    }
    Batch {
        offsets,
        a: (sa[r - 2], sa[r - 1]),
        b: (sb[r - 2], sb[r - 1]),
    }
}

/// When `b` is the same matrix for every product (stride-0 or size-1 batch dims) and `a`'s
/// batch dims continue its row stride, the batch is one tall product: rows `batch * m`.
pub(crate) fn fold_rows<T>(p: &Product<'_, T>) -> Option<(usize, isize)> {
    let r = p.a.shape.len();
    let (shape, sa) = (p.a.shape, p.a.strides);
    let b_fixed = (0..r - 2).all(|d| shape[d] == 1 || p.b.strides[d] == 0);
    if r == 2 || !b_fixed {
        return None;
    }
    let (mut rows, mut stride) = (shape[r - 2], sa[r - 2]);
    for d in (0..r - 2).rev() {
        if shape[d] == 1 {
            continue;
        }
        if rows == 1 {
            stride = sa[d];
        } else if sa[d] != stride * rows as isize {
            return None;
        }
        rows *= shape[d];
    }
    Some((rows, stride))
}

/// f32 / f64: one GEMM per product, threads inside large products or across the batch.
fn float<T: Real, P: bytemuck::Pod + Send + Sync, S: Pack<P>>(
    p: &Product<'_, S>,
    out: &mut [T],
    g: Gemm<T, P>,
) {
    float_out(p, out, None, g)
}

/// `float`, and with `narrow` (bf16 bits, `out.len()` of them; `g` narrows) the results go
/// there, rounded by the kernel, while `out` only carries sums between depth blocks.
fn float_out<T: Real, P: bytemuck::Pod + Send + Sync, S: Pack<P>>(
    p: &Product<'_, S>,
    out: &mut [T],
    narrow: Option<&mut [u16]>,
    g: Gemm<T, P>,
) {
    let (m, k, n) = (p.d.m, p.d.k, p.d.n);
    let (a, b) = (p.a.data, p.b.data);
    if out.is_empty() {
        return;
    }
    let run = |mnk, am: &Mat<S>, bm: &Mat<S>, c: &mut [T], nw: Option<&mut [u16]>, t| match nw {
        Some(nw) => g.run_narrow(mnk, am, bm, c, nw, t),
        None => g.run(mnk, am, bm, c, t),
    };
    let threads = quill_par::threads();
    let bt = mats(p);
    if let Some((rows, rs)) = fold_rows(p) {
        let (oa, ob) = bt.offsets[0];
        let am = Mat::new(a, oa, rs, bt.a.1);
        let bm = Mat::new(b, ob, bt.b.0, bt.b.1);
        let t = threads_for(rows * k * n, threads);
        run([rows, n, k], &am, &bm, out, narrow, t);
        return;
    }
    let count = bt.offsets.len();
    let threads = threads_for(count * m * k * n, threads);
    let across_batch = threads > 1 && count > 1 && (count >= 4 * threads || m * k * n < LARGE);
    // Across the batch, each product runs on one thread; otherwise each uses its share.
    let t = if across_batch {
        1
    } else {
        threads_for(m * k * n, threads)
    };
    // Each product's narrow output beside its f32 block (all None without one).
    let mut narrows: Vec<Option<&mut [u16]>> = match narrow {
        Some(x) => x.chunks_mut(m * n).map(Some).collect(),
        None => (0..count).map(|_| None).collect(),
    };
    let one = |(i, (c, nw)): (usize, (&mut [T], &mut Option<&mut [u16]>))| {
        let (oa, ob) = bt.offsets[i];
        let am = Mat::new(a, oa, bt.a.0, bt.a.1);
        let bm = Mat::new(b, ob, bt.b.0, bt.b.1);
        run([m, n, k], &am, &bm, c, nw.take(), t);
    };
    // Not across the batch, the products run here in order, each on its `t` threads.
    let batch_threads = if across_batch { threads } else { 1 };
    let items = out.chunks_mut(m * n).zip(narrows.iter_mut()).enumerate();
    quill_par::for_each_item(items, batch_threads, one);
}

/// How many of `threads` to give `work` multiply-adds: at least [`PER_THREAD`] each.
pub(crate) fn threads_for(work: usize, threads: usize) -> usize {
    (work / PER_THREAD).clamp(1, threads.max(1))
}

/// f32 to bf16, rounding to nearest even (NaN stays a quiet NaN of its sign), as
/// `half::bf16::from_f32` does, but free of branches, so that the output loop vectorises.
#[inline(always)]
pub(crate) fn to_bf16(x: f32) -> bf16 {
    let b = x.to_bits();
    // Wrapping: a NaN near the top of the range may carry out; the select discards it.
    let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16;
    let nan = (b >> 16) | 0x40;
    bf16::from_bits(if x.is_nan() { nan } else { rounded } as u16)
}

thread_local! {
    /// The f32 product of an f16 / bf16 matmul before it is rounded, kept for the thread's next
    /// call (a fresh zeroed buffer per call cost a tenth of a 512^3 AMX product).
    static WIDE: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// bf16 through a kernel that takes bf16 operands (AMX tiles or `vdpbf16ps`): one that narrows
/// rounds each finished tile itself, so no pass over an f32 result.
fn bf16_product<P: bytemuck::Pod + Send + Sync>(
    p: &Product<'_, bf16>,
    out: &mut [bf16],
    g: Gemm<f32, P>,
) where
    bf16: Pack<P>,
{
    if !g.narrows() {
        return half_float(p, out, to_bf16, g);
    }
    with_scratch(&WIDE, out.len(), |wide: &mut [f32]| {
        float_out(p, wide, Some(bytemuck::cast_slice_mut(out)), g)
    })
}

/// f16 / bf16: accumulate the whole product in f32 (widened while packing, or bf16 pairs fed
/// to `vdpbf16ps` or AMX tiles), round once.
fn half_float<H: Pack<P>, P: bytemuck::Pod + Send + Sync>(
    p: &Product<'_, H>,
    out: &mut [H],
    round: impl Fn(f32) -> H,
    g: Gemm<f32, P>,
) {
    // `float` overwrites every element of `wide`, so the reused buffer needs no clearing.
    with_scratch(&WIDE, out.len(), |wide: &mut [f32]| {
        float(p, wide, g);
        with_best_simd(
            #[inline(always)]
            || {
                for (o, w) in out.iter_mut().zip(wide.iter()) {
                    *o = round(*w);
                }
            },
        )
    })
}

#[cfg(test)]
mod tests {
    /// `to_bf16` agrees with `half`'s conversion bit for bit on ties, carries into the
    /// exponent, overflow to infinity, subnormals, zeros, infinities and NaNs, and a sweep.
    #[test]
    fn bf16_rounding_matches_half() {
        let mut xs: Vec<f32> = [
            0x3F80_8000u32, // tie, even stays
            0x3F81_8000,    // tie, odd rounds up
            0x3F80_7FFF,
            0x3F80_8001,
            0x3FFF_FFFF, // carries into the exponent
            0x7F7F_FFFF, // rounds to infinity
            0x0000_0001, // smallest subnormal
            0x807F_FFFF,
            0x0000_0000,
            0x8000_0000,
            0x7F80_0000,
            0xFF80_0000,
            0x7F80_0001, // signalling NaN with low payload only
            0xFFC0_0000,
            0x7FFF_FFFF,
        ]
        .iter()
        .map(|&b| f32::from_bits(b))
        .collect();
        let mut s = 0x1234_5678u32;
        for _ in 0..100_000 {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            xs.push(f32::from_bits(s));
        }
        for x in xs {
            let (got, want) = (super::to_bf16(x), half::bf16::from_f32(x));
            if x.is_nan() {
                assert!(got.is_nan(), "{:#x}", x.to_bits());
                assert_eq!(got.to_bits() & 0x8000, want.to_bits() & 0x8000);
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{:#x}", x.to_bits());
            }
        }
    }
}
