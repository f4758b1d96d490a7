//! Matmul kernels: the batched product of `(batch.., m, k)` and `(batch.., k, n)` strided operands
//! into a fresh contiguous `(batch.., m, n)` buffer. f32 and f64 run a BLIS-style GEMM (`gemm.rs`,
//! its loop nest in `gemm/nest.rs`: cache blocking, packing from any signed strides in `pack.rs`
//! (SIMD transposes in `transpose_pack.rs`), SIMD micro-kernels chosen at run time in `kernels.rs`,
//! block sizes from the caches in `cache.rs`, A read in place for one-thread products up to about
//! 100^3, threads met through `par.rs`); bf16 runs AMX tiles where the CPU has AMX (`amx.rs`),
//! `vdpbf16ps` on bf16 pairs where it has AVX512_BF16 (`bf16.rs`), both kernels rounding each
//! finished tile to bf16 themselves; otherwise f16 and bf16 are widened to f32 while packing. All
//! accumulate in f32 and round once at the end. Integers and bool run a plain loop (`int.rs`).
//! Shape logic (1-D operands, broadcasting the batch dims) belongs to the caller; this module takes
//! the broadcast layouts.

mod amx;
mod bf16;
mod cache;
mod gemm;
mod int;
mod kernels;
mod pack;
mod transpose_pack;

use crate::CpuStorage;
pub(crate) use gemm::{with_scratch, Gemm, Real};
use half::f16;

use quill_core::{Error, Layout, Result, Runs};
use std::cell::Cell;
use std::sync::OnceLock;

pub use cache::CacheSizes;
pub use kernels::Kernel;
// The fused attention kernel runs its tile products through the same single-threaded GEMM.
pub(crate) use gemm::{select_f32, select_f64};
pub(crate) use pack::{Cvt, Mat, Pack};

/// Multiply-adds each thread must be given before work is split: waking a pool thread and
/// meeting it again costs microseconds, the time one core takes for about this many. 1 M
/// rather than 2 M: on a quiet 2-core Zen 5, 128^3 (2 M) split in two ran 1.27x faster with the
/// AVX-512 kernel and 1.63x with AVX2 (`scripts/gemm_bench.py`, same run); 2 M had been chosen
/// on a machine loaded by other builds, where the woken thread often came late. 256 K since
/// each thread's stripe of a small product reads A in place as a one-thread product does
/// (`Gemm::one_thread`): on a 2-core Zen 4 (AMD EPYC, 2 threads, same run) 100^3 then ran
/// 1.6x faster (0.93x NumPy before, 1.55x after), 1000 x 32 x 32 1.7x, 200^3 1.2x; the
/// caller runs a stripe itself, so a helper that wakes late costs little.
const PER_THREAD: usize = 1 << 18;
/// Multiply-adds above which one product of a batch is worth splitting across threads.
const LARGE: usize = 1 << 24;

thread_local! {
    static OVERRIDE: Cell<Option<Kernel>> = const { Cell::new(None) };
}

/// The kernel named by `QUILL_MATMUL_KERNEL` (amx, avx512, avx2, generic) when it is available here,
/// otherwise the fastest one this CPU supports. Read once.
fn default_kernel() -> Kernel {
    static K: OnceLock<Kernel> = OnceLock::new();
    *K.get_or_init(|| {
        std::env::var("QUILL_MATMUL_KERNEL")
            .ok()
            .and_then(|v| Kernel::parse(&v))
            .filter(|k| k.is_available())
            .unwrap_or_else(Kernel::best)
    })
}

/// The micro-kernel that a matmul started from this thread uses now.
pub fn active_kernel() -> Kernel {
    OVERRIDE.with(Cell::get).unwrap_or_else(default_kernel)
}

/// Runs `f` with every matmul started from this thread using kernel `k` (for tests and
/// benchmarks: every path can be checked on one machine). Errs when this CPU lacks `k`.
pub fn with_kernel<R>(k: Kernel, f: impl FnOnce() -> R) -> Result<R> {
    if !k.is_available() {
        return Err(Error::invalid(
            "matmul",
            format!("the {k:?} kernel needs CPU features this machine lacks"),
        ));
    }
    let prev = OVERRIDE.with(|o| o.replace(Some(k)));
    // Restore on unwind too, so a panicking test cannot leak its choice into the next one.
    struct Restore(Option<Kernel>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(prev);
    Ok(f())
}

/// Sizes of each product of a batch.
struct Dims {
    m: usize,
    k: usize,
    n: usize,
}

/// `a @ b` for layouts of equal rank >= 2 whose batch dims already agree (stride-0 broadcast
/// dims are fine) and storages of one dtype. Returns the contiguous `(batch.., m, n)` product.
pub fn matmul(a: &CpuStorage, a_l: &Layout, b: &CpuStorage, b_l: &Layout) -> Result<CpuStorage> {
    const OP: &str = "matmul";
    let (sa, sb) = (a_l.shape(), b_l.shape());
    let r = sa.len();
    let mismatch = |hint: String| Error::ShapeMismatch {
        op: OP,
        lhs: sa.into(),
        rhs: sb.into(),
        hint,
    };
    if r < 2 || sb.len() != r || sa[..r - 2] != sb[..r - 2] {
        return Err(mismatch(
            " (the kernel needs equal batch dims and rank >= 2)".into(),
        ));
    }
    if sa[r - 1] != sb[r - 2] {
        return Err(mismatch(format!(
            " (contracted dims {} vs {})",
            sa[r - 1],
            sb[r - 2]
        )));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op: OP,
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    let batch: usize = sa[..r - 2].iter().product();
    let d = Dims {
        m: sa[r - 2],
        k: sa[r - 1],
        n: sb[r - 1],
    };
    let len = batch * d.m * d.n;
    let mut out = CpuStorage::for_overwrite("matmul", a.dtype(), len)?;
    use CpuStorage as S;
    match (a, b, &mut out) {
        (S::F32(x), S::F32(y), S::F32(o)) => float(&d, x, a_l, y, b_l, o, gemm::select_f32()),
        (S::F64(x), S::F64(y), S::F64(o)) => float(&d, x, a_l, y, b_l, o, gemm::select_f64()),
        (S::F16(x), S::F16(y), S::F16(o)) => {
            half_float(&d, x, a_l, y, b_l, o, f16::from_f32, gemm::select_f32())
        }
        (S::BF16(x), S::BF16(y), S::BF16(o)) => match (amx::select(), bf16::select()) {
            (Some(g), _) => bf16_product(&d, x, a_l, y, b_l, o, g),
            (None, Some(g)) => bf16_product(&d, x, a_l, y, b_l, o, g),
            (None, None) => half_float(&d, x, a_l, y, b_l, o, to_bf16, gemm::select_f32()),
        },
        (S::I32(x), S::I32(y), S::I32(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::I64(x), S::I64(y), S::I64(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::U8(x), S::U8(y), S::U8(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::I8(x), S::I8(y), S::I8(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::I16(x), S::I16(y), S::I16(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::U16(x), S::U16(y), S::U16(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::U32(x), S::U32(y), S::U32(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::U64(x), S::U64(y), S::U64(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        (S::Bool(x), S::Bool(y), S::Bool(o)) => int::matmul(x, &mats(a_l, b_l), y, o, &d),
        _ => unreachable!("dtypes checked above; the output takes the inputs' dtype"),
    }
    Ok(out)
}

/// Element offsets of the first element of every product of the batch, in C order, for both
/// operands, plus the row and column strides of each.
pub(crate) struct Batch {
    pub offsets: Vec<(usize, usize)>,
    pub a: (isize, isize),
    pub b: (isize, isize),
}

fn mats(a_l: &Layout, b_l: &Layout) -> Batch {
    let r = a_l.ndim();
    let (sa, sb) = (a_l.strides(), b_l.strides());
    let batch = &a_l.shape()[..r - 2];
    let count: usize = batch.iter().product();
    // Offsets stay inside the buffers by the layouts' checks.
    let offsets = Runs::from_parts(
        batch,
        [&sa[..r - 2], &sb[..r - 2]],
        [a_l.offset(), b_l.offset()],
        0..count,
    )
    .elements()
    .map(|[oa, ob]| (oa, ob))
    .collect();
    Batch {
        offsets,
        a: (sa[r - 2], sa[r - 1]),
        b: (sb[r - 2], sb[r - 1]),
    }
}

/// When `b` is the same matrix for every product (stride-0 or size-1 batch dims) and `a`'s
/// batch dims continue its row stride, the batch is one tall product: rows `batch * m`.
fn fold_rows(a_l: &Layout, b_l: &Layout) -> Option<(usize, isize)> {
    let r = a_l.ndim();
    let (shape, sa) = (a_l.shape(), a_l.strides());
    let b_fixed = (0..r - 2).all(|d| shape[d] == 1 || b_l.strides()[d] == 0);
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
    d: &Dims,
    a: &[S],
    a_l: &Layout,
    b: &[S],
    b_l: &Layout,
    out: &mut [T],
    g: Gemm<T, P>,
) {
    float_out(d, a, a_l, b, b_l, out, None, g)
}

/// `float`, and with `narrow` (bf16 bits, `out.len()` of them; `g` narrows) the results go
/// there, rounded by the kernel, while `out` only carries sums between depth blocks.
#[allow(clippy::too_many_arguments)]
fn float_out<T: Real, P: bytemuck::Pod + Send + Sync, S: Pack<P>>(
    d: &Dims,
    a: &[S],
    a_l: &Layout,
    b: &[S],
    b_l: &Layout,
    out: &mut [T],
    narrow: Option<&mut [u16]>,
    g: Gemm<T, P>,
) {
    let (m, k, n) = (d.m, d.k, d.n);
    if out.is_empty() {
        return;
    }
    let run = |mnk, am: &Mat<S>, bm: &Mat<S>, c: &mut [T], nw: Option<&mut [u16]>, t| match nw {
        Some(nw) => g.run_narrow(mnk, am, bm, c, nw, t),
        None => g.run(mnk, am, bm, c, t),
    };
    let threads = crate::par::threads();
    let bt = mats(a_l, b_l);
    if let Some((rows, rs)) = fold_rows(a_l, b_l) {
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
    crate::par::for_each_item(items, batch_threads, one);
}

/// How many of `threads` to give `work` multiply-adds: at least [`PER_THREAD`] each.
fn threads_for(work: usize, threads: usize) -> usize {
    (work / PER_THREAD).clamp(1, threads.max(1))
}

/// f32 to bf16, rounding to nearest even (NaN stays a quiet NaN of its sign), as
/// `half::bf16::from_f32` does, but free of branches, so that the output loop vectorises.
#[inline(always)]
fn to_bf16(x: f32) -> half::bf16 {
    let b = x.to_bits();
    // Wrapping: a NaN near the top of the range may carry out; the select discards it.
    let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16;
    let nan = (b >> 16) | 0x40;
    half::bf16::from_bits(if x.is_nan() { nan } else { rounded } as u16)
}

thread_local! {
    /// The f32 product of an f16 / bf16 matmul before it is rounded, kept for the thread's next
    /// call (a fresh zeroed buffer per call cost a tenth of a 512^3 AMX product).
    static WIDE: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// bf16 through a kernel that takes bf16 operands (AMX tiles or `vdpbf16ps`): one that narrows
/// rounds each finished tile itself, so no pass over an f32 result.
#[allow(clippy::too_many_arguments)]
fn bf16_product<P: bytemuck::Pod + Send + Sync>(
    d: &Dims,
    a: &[half::bf16],
    a_l: &Layout,
    b: &[half::bf16],
    b_l: &Layout,
    out: &mut [half::bf16],
    g: Gemm<f32, P>,
) where
    half::bf16: Pack<P>,
{
    if !g.narrows() {
        return half_float(d, a, a_l, b, b_l, out, to_bf16, g);
    }
    gemm::with_scratch(&WIDE, out.len(), |wide: &mut [f32]| {
        float_out(
            d,
            a,
            a_l,
            b,
            b_l,
            wide,
            Some(bytemuck::cast_slice_mut(out)),
            g,
        )
    })
}

/// f16 / bf16: accumulate the whole product in f32 (widened while packing, or bf16 pairs fed
/// to `vdpbf16ps` or AMX tiles), round once.
#[allow(clippy::too_many_arguments)]
fn half_float<H: Pack<P>, P: bytemuck::Pod + Send + Sync>(
    d: &Dims,
    a: &[H],
    a_l: &Layout,
    b: &[H],
    b_l: &Layout,
    out: &mut [H],
    round: impl Fn(f32) -> H,
    g: Gemm<f32, P>,
) {
    // `float` overwrites every element of `wide`, so the reused buffer needs no clearing.
    gemm::with_scratch(&WIDE, out.len(), |wide: &mut [f32]| {
        float(d, a, a_l, b, b_l, wide, g);
        crate::simd::with_best_simd(
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
    use super::Kernel;

    /// The one name table serves both ways: each kernel's name parses back to it in any case,
    /// the names differ, and other words (or an empty one) parse to nothing.
    #[test]
    fn kernel_names_round_trip() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::parse(k.name()), Some(k));
            assert_eq!(Kernel::parse(&k.name().to_ascii_uppercase()), Some(k));
        }
        let mut names: Vec<_> = Kernel::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Kernel::ALL.len());
        for bad in ["", "avx", "avx5122", "sse"] {
            assert_eq!(Kernel::parse(bad), None, "{bad:?}");
        }
    }

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
