//! Elementwise kernels: unary and binary ops and `where`, over inputs of any strides (broadcast
//! included) into a contiguous output, which is either a fresh buffer or a contiguous run of an
//! existing one (in-place ops). Inputs come in the op's compute dtype; the array layer casts.

pub mod binary;
pub mod complex;
pub mod math;
pub mod real;
pub mod unary;
pub mod walk;

use crate::simd::with_best_simd;
use crate::{dispatch_dtype, with_storage, CpuElement, CpuStorage};
use binary::BinaryKernel;
use quill_core::{BinaryOp, DType, Error, Layout, LoopPlan, Result, UnaryOp};
use unary::UnaryKernel;
use walk::for_each_run;

fn slice_of<'a, T: CpuElement>(s: &'a CpuStorage, op: &'static str) -> Result<&'a [T]> {
    T::slice(s).ok_or(Error::DTypeMismatch {
        op,
        expected: T::DTYPE,
        got: s.dtype(),
    })
}

fn out_layout(shape: &[usize]) -> Result<Layout> {
    Layout::contiguous(shape)
}

/// `op(src)` into `out[at..at + numel]` (C order). `out` must hold the op's result dtype.
pub fn unary_into(
    op: UnaryOp,
    src: &CpuStorage,
    l: &Layout,
    out: &mut CpuStorage,
    at: usize,
) -> Result<()> {
    let plan = LoopPlan::new(&[&out_layout(l.shape())?, l]);
    with_storage!(src, a => UnaryKernel::unary(op, a, &plan, out, at))
}

/// `op(src)` into a fresh contiguous buffer.
pub fn unary(op: UnaryOp, src: &CpuStorage, l: &Layout) -> Result<CpuStorage> {
    let mut out = CpuStorage::for_overwrite(op.name(), op.result_dtype(src.dtype())?, l.numel())?;
    unary_into(op, src, l, &mut out, 0)?;
    Ok(out)
}

/// `op(a, b)` into `out[at..at + numel]`; `la` and `lb` share one shape (broadcast already) and
/// `a`, `b` one dtype.
pub fn binary_into(
    op: BinaryOp,
    (a, la): (&CpuStorage, &Layout),
    (b, lb): (&CpuStorage, &Layout),
    out: &mut CpuStorage,
    at: usize,
) -> Result<()> {
    let plan = LoopPlan::new(&[&out_layout(la.shape())?, la, lb]);
    with_storage!(a, av => {
        let bv = slice_of(b, op.name())?;
        BinaryKernel::binary(op, &mut binary::Fresh { ab: (av, bv), plan: &plan, out, at })
    })
}

/// `dst = op(dst, b)` where `dst` (seen through `ld`) is contiguous and `b` (through `lb`, of
/// the same shape) is a different buffer of the same dtype; not for comparisons.
pub fn binary_inplace(
    op: BinaryOp,
    dst: &mut CpuStorage,
    ld: &Layout,
    (b, lb): (&CpuStorage, &Layout),
) -> Result<()> {
    if !ld.is_contiguous() {
        return Err(Error::invalid(
            op.name(),
            "in-place kernel needs a contiguous destination",
        ));
    }
    let plan = LoopPlan::new(&[&out_layout(ld.shape())?, lb]);
    let range = ld.offset()..ld.offset() + ld.numel();
    let refused = with_storage!(dst, d => {
        let bv = slice_of(b, op.name())?;
        let mut sink = binary::InPlace { o: &mut d[range], b: bv, plan: &plan, refused: false };
        BinaryKernel::binary(op, &mut sink)?;
        sink.refused
    });
    if refused {
        return Err(Error::invalid(
            op.name(),
            "a comparison cannot be written in place",
        ));
    }
    Ok(())
}

/// `binary` for two contiguous runs of `n` elements starting at `oa` and `ob` (the common
/// case: no layouts to merge).
pub fn binary_flat(
    op: BinaryOp,
    (a, oa): (&CpuStorage, usize),
    (b, ob): (&CpuStorage, usize),
    n: usize,
) -> Result<CpuStorage> {
    let dtype = a.dtype();
    let mut out = CpuStorage::for_overwrite(op.name(), op.result_dtype(dtype, dtype)?, n)?;
    let plan = LoopPlan::flat(n, &[0, oa, ob]);
    with_storage!(a, av => {
        let bv = slice_of(b, op.name())?;
        BinaryKernel::binary(op, &mut binary::Fresh { ab: (av, bv), plan: &plan, out: &mut out, at: 0 })
    })?;
    Ok(out)
}

/// `op(a, b)` into a fresh contiguous buffer of the op's result dtype; the layouts share one
/// shape (broadcast already) and the operands one dtype. Errors when the dtype has no kernel
/// for `op`, or `b` holds another dtype than `a`.
pub fn binary(
    op: BinaryOp,
    a: (&CpuStorage, &Layout),
    b: (&CpuStorage, &Layout),
) -> Result<CpuStorage> {
    let dtype = a.0.dtype();
    let out_dtype = op.result_dtype(dtype, dtype)?;
    let mut out = CpuStorage::for_overwrite(op.name(), out_dtype, a.1.numel())?;
    binary_into(op, a, b, &mut out, 0)?;
    Ok(out)
}

/// `cond ? a : b` elementwise into a fresh buffer; the three layouts share one shape, `cond` is
/// bool and `a`, `b` share a dtype.
pub fn where_(
    (c, lc): (&CpuStorage, &Layout),
    (a, la): (&CpuStorage, &Layout),
    (b, lb): (&CpuStorage, &Layout),
) -> Result<CpuStorage> {
    const OP: &str = "where";
    let cv = slice_of::<bool>(c, OP)?;
    let plan = LoopPlan::new(&[&out_layout(la.shape())?, lc, la, lb]);
    let dtype: DType = a.dtype();
    let mut out = CpuStorage::for_overwrite(OP, dtype, la.numel())?;
    dispatch_dtype!(dtype, T => {
        let (av, bv) = (slice_of::<T>(a, OP)?, slice_of::<T>(b, OP)?);
        let o = T::slice_mut(&mut out).expect("allocated with this dtype");
        for_each_run(o, &plan, |o, [oc, oa, ob], [sc, sa, sb]| {
            let n = o.len();
            // Unit-stride and stride-0 runs (masked gradients: a contiguous mask and values
            // against a scalar zero) as branch-free selects over slices, which vectorise; the
            // per-element index math of the general loop ran 5x slower.
            if sc == 1 && (sa == 1 || sa == 0) && (sb == 1 || sb == 0) {
                let c = &cv[oc..oc + n];
                with_best_simd(
                    #[inline(always)]
                    || select_run(o, c, av, oa, sa, bv, ob, sb),
                );
                return;
            }
            let at = |v: &[T], off: usize, s: isize, i: usize| v[(off as isize + i as isize * s) as usize];
            for (i, x) in o.iter_mut().enumerate() {
                let c = cv[(oc as isize + i as isize * sc) as usize];
                *x = if c { at(av, oa, sa, i) } else { at(bv, ob, sb, i) };
            }
        });
    });
    Ok(out)
}

/// `o[i] = if c[i] { a[i] } else { b[i] }` where each of `a`, `b` is a run from `off` with
/// stride 1 or a repeated element (stride 0): one loop per case, branch-free, so that LLVM
/// vectorises it as a blend inside the SIMD context.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn select_run<T: Copy>(
    o: &mut [T],
    c: &[bool],
    av: &[T],
    oa: usize,
    sa: isize,
    bv: &[T],
    ob: usize,
    sb: isize,
) {
    let n = o.len();
    match (sa, sb) {
        (1, 1) => {
            let (a, b) = (&av[oa..oa + n], &bv[ob..ob + n]);
            for i in 0..n {
                o[i] = if c[i] { a[i] } else { b[i] };
            }
        }
        (1, _) => {
            let (a, b) = (&av[oa..oa + n], bv[ob]);
            for i in 0..n {
                o[i] = if c[i] { a[i] } else { b };
            }
        }
        (_, 1) => {
            let (a, b) = (av[oa], &bv[ob..ob + n]);
            for i in 0..n {
                o[i] = if c[i] { a } else { b[i] };
            }
        }
        _ => {
            let (a, b) = (av[oa], bv[ob]);
            for i in 0..n {
                o[i] = if c[i] { a } else { b };
            }
        }
    }
}
