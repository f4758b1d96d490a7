//! Launches of the NVRTC kernels: copy (compact / setitem), fill, cast, elementwise unary,
//! binary, comparison and select, reductions over a contiguous [outer, reduced, inner] view,
//! row softmax, and Philox random numbers. Every strided launch plans its operands together
//! with quill-core's `LoopPlan` (coalesced dims, size-1 dims dropped) and picks the 32-bit
//! index kernel when every offset fits.

use crate::device::{grid_for, CudaDevice, BLOCK};
use crate::klayout::layouts;
#[cfg(test)]
use crate::klayout::KLayout;
use crate::storage::CudaStorage;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use quill_core::{DType, Element, Error, Layout, LoopPlan, Result, Scalar};
use std::sync::Arc;

/// The dtype suffix of kernel names.
pub fn tag(d: DType) -> &'static str {
    d.name()
}

fn same_device(op: &'static str, a: &CudaStorage, b: &CudaStorage) -> Result<()> {
    if a.ordinal() != b.ordinal() {
        return Err(Error::DeviceMismatch {
            op,
            lhs: format!("cuda:{}", a.ordinal()),
            rhs: format!("cuda:{}", b.ordinal()),
        });
    }
    Ok(())
}

fn check_dtype(op: &'static str, s: &CudaStorage, want: DType) -> Result<()> {
    if s.dtype() != want {
        return Err(Error::DTypeMismatch {
            op,
            expected: want,
            got: s.dtype(),
        });
    }
    Ok(())
}

/// `base_suffix`, or its 32-bit index twin (`copy32_f32`, `unary32_exp_f32`).
fn indexed(base: &str, index32: bool, suffix: &str) -> String {
    let name = format!("{base}_{suffix}");
    if index32 {
        crate::kernels::index32_name(&name)
    } else {
        name
    }
}

/// True when module `module` has a kernel named `name` (the host asks before launching, and
/// runs anything else through the CPU).
pub fn has_kernel(module: &str, name: &str) -> bool {
    use std::collections::{HashMap, HashSet};
    use std::sync::OnceLock;
    static NAMES: OnceLock<HashMap<&'static str, HashSet<String>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        crate::kernels::SOURCES
            .iter()
            .map(|(m, _)| {
                (
                    *m,
                    crate::kernels::expected_kernels(m).into_iter().collect(),
                )
            })
            .collect()
    });
    names.get(module).is_some_and(|s| s.contains(name))
}

/// Whether `unary` has a kernel for `op` on `dtype`.
pub fn has_unary(op: &str, dtype: DType) -> bool {
    has_kernel("elementwise", &format!("unary_{op}_{}", tag(dtype)))
}
/// Whether `binary` (or `compare` for comparisons) has a kernel for `op` on `dtype`.
pub fn has_binary(op: &str, dtype: DType) -> bool {
    has_kernel("elementwise", &format!("binary_{op}_{}", tag(dtype)))
        || has_kernel("elementwise", &format!("compare_{op}_{}", tag(dtype)))
}
/// Whether `reduce` has a kernel for `op` on `dtype`.
pub fn has_reduce(op: &str, dtype: DType) -> bool {
    let name = format!("reduce_{op}_rows_{}", tag(dtype)).replace("reduce_arg", "arg");
    has_kernel("reduce", &name)
}

/// Launches `module::name` over `cfg` with the arguments listed (references to locals that
/// outlive the launch call).
macro_rules! launch {
    ($dev:expr, $module:expr, $name:expr, $cfg:expr; $($arg:expr),* $(,)?) => {{
        let dev: &CudaDevice = $dev;
        let name: &str = &$name;
        let f = dev.function($module, name)?;
        let mut b = dev.stream.launch_builder(&f);
        $( b.arg($arg); )*
        // SAFETY: every kernel's parameter list is the one listed here (names and signatures
        // are fixed by kernels/*.cu and checked by the NVRTC test); the layouts passed with
        // each pointer were checked against its buffer by quill-core before any view existed,
        // and outputs are fresh blocks of the element count the kernel writes.
        unsafe { b.launch($cfg) }
            .map(|_| ())
            .map_err(|e| dev.err("cuda launch", format!("{name}: {e}")))
    }};
}

/// Copies the elements of `src` (viewed through `ls`) into `dst` (viewed through `ld`, same
/// shape; `ls` may broadcast): compact when `ld` is contiguous, setitem otherwise.
pub fn copy(src: &CudaStorage, ls: &Layout, dst: &mut CudaStorage, ld: &Layout) -> Result<()> {
    const OP: &str = "copy";
    same_device(OP, src, dst)?;
    check_dtype(OP, src, dst.dtype())?;
    let plan = LoopPlan::new(&[ld, ls]);
    let n = plan.numel();
    if n == 0 {
        return Ok(());
    }
    let k = layouts(OP, &plan)?;
    let (kd, ks) = (k[0], k[1]);
    let name = indexed("copy", plan.index32, tag(src.dtype()));
    let (ps, pd, n64) = (src.ptr(), dst.ptr_mut(), n as i64);
    launch!(src.device(), "copy", name, grid_for(n); &ps, &ks, &pd, &kd, &n64)
}

/// A contiguous copy of `src` viewed through `ls`.
pub fn compact(src: &CudaStorage, ls: &Layout) -> Result<CudaStorage> {
    let mut out = CudaStorage::uninit(src.device(), ls.numel(), src.dtype())?;
    copy(src, ls, &mut out, &Layout::contiguous(ls.shape())?)?;
    Ok(out)
}

/// Writes `value` (cast to the storage's dtype with NumPy's rules) into every element of `dst`
/// viewed by `ld`.
pub fn fill(dst: &mut CudaStorage, ld: &Layout, value: Scalar) -> Result<()> {
    const OP: &str = "fill";
    let plan = LoopPlan::new(&[ld]);
    let n = plan.numel();
    if n == 0 {
        return Ok(());
    }
    let kd = layouts(OP, &plan)?[0];
    let name = indexed("fill", plan.index32, tag(dst.dtype()));
    let (pd, n64) = (dst.ptr_mut(), n as i64);
    let dev = dst.device().clone();
    // The value goes by value in the dtype's own representation.
    macro_rules! go {
        ($v:expr) => {{
            let v = $v;
            launch!(&dev, "copy", name, grid_for(n); &pd, &kd, &v, &n64)
        }};
    }
    match dst.dtype() {
        DType::F32 => go!(f32::from_scalar(value)),
        DType::F64 => go!(f64::from_scalar(value)),
        DType::F16 => go!(half::f16::from_scalar(value).to_bits()),
        DType::BF16 => go!(half::bf16::from_scalar(value).to_bits()),
        DType::I32 => go!(i32::from_scalar(value)),
        DType::I64 => go!(i64::from_scalar(value)),
        DType::U8 => go!(u8::from_scalar(value)),
        DType::Bool => go!(bool::from_scalar(value) as u8),
        DType::I8 => go!(i8::from_scalar(value)),
        DType::I16 => go!(i16::from_scalar(value)),
        DType::U16 => go!(u16::from_scalar(value)),
        DType::U32 => go!(u32::from_scalar(value)),
        DType::U64 => go!(u64::from_scalar(value)),
        // The kernels take the two parts' bytes, real first, as one u64 / u128.
        DType::C64 => {
            let z = quill_core::C64::from_scalar(value);
            go!(u64::from(z.re.to_bits()) | (u64::from(z.im.to_bits()) << 32))
        }
        DType::C128 => {
            let z = quill_core::C128::from_scalar(value);
            go!(u128::from(z.re.to_bits()) | (u128::from(z.im.to_bits()) << 64))
        }
    }
}

/// `src` viewed by `ls`, cast to `dtype` with NumPy's rules, as a contiguous array.
pub fn cast(src: &CudaStorage, ls: &Layout, dtype: DType) -> Result<CudaStorage> {
    const OP: &str = "astype";
    if src.dtype().is_complex() || dtype.is_complex() {
        // No complex casts on the GPU: the same dtype is a copy, the others go through the CPU.
        if src.dtype() == dtype {
            return compact(src, ls);
        }
        return Err(Error::Unsupported {
            op: OP,
            backend: "cuda",
            what: format!("a cast from {} to {dtype}", src.dtype()),
        });
    }
    let mut out = CudaStorage::uninit(src.device(), ls.numel(), dtype)?;
    let plan = LoopPlan::new(&[ls]);
    let n = plan.numel();
    if n == 0 {
        return Ok(out);
    }
    let ks = layouts(OP, &plan)?[0];
    let pair = format!("{}_{}", tag(src.dtype()), tag(dtype));
    let name = indexed("cast", plan.index32, &pair);
    let (ps, pd, n64) = (src.ptr(), out.ptr_mut(), n as i64);
    launch!(src.device(), "copy", name, grid_for(n); &ps, &ks, &pd, &n64)?;
    Ok(out)
}

/// Elementwise `op` (a kernel op name: `exp`, `relu`, `isnan`, ...) of `x` viewed by `lx`,
/// contiguous output of the same dtype, or bool for the predicates (`isnan`, `logical_not`).
pub fn unary(op: &str, x: &CudaStorage, lx: &Layout) -> Result<CudaStorage> {
    const OP: &str = "unary";
    let predicate = quill_core::UnaryOp::from_name(op).is_some_and(|u| u.is_predicate());
    let out_dtype = if predicate { DType::Bool } else { x.dtype() };
    let mut out = CudaStorage::uninit(x.device(), lx.numel(), out_dtype)?;
    let plan = LoopPlan::new(&[&Layout::contiguous(lx.shape())?, lx]);
    let n = plan.numel();
    if n == 0 {
        return Ok(out);
    }
    let kx = layouts(OP, &plan)?[1];
    let name = indexed(&format!("unary_{op}"), plan.index32, tag(x.dtype()));
    let (px, po, n64) = (x.ptr(), out.ptr_mut(), n as i64);
    launch!(x.device(), "elementwise", name, grid_for(n); &px, &kx, &po, &n64)?;
    Ok(out)
}

/// The output of a two-operand kernel: `a` and `b` already broadcast to one shape.
fn two(
    op: &'static str,
    kernel: String,
    (a, la): (&CudaStorage, &Layout),
    (b, lb): (&CudaStorage, &Layout),
    out_dtype: DType,
) -> Result<CudaStorage> {
    same_device(op, a, b)?;
    check_dtype(op, b, a.dtype())?;
    let mut out = CudaStorage::uninit(a.device(), la.numel(), out_dtype)?;
    let plan = LoopPlan::new(&[&Layout::contiguous(la.shape())?, la, lb]);
    let n = plan.numel();
    if n == 0 {
        return Ok(out);
    }
    let k = layouts(op, &plan)?;
    let (ka, kb) = (k[1], k[2]);
    let name = indexed(&kernel, plan.index32, tag(a.dtype()));
    let (pa, pb, po, n64) = (a.ptr(), b.ptr(), out.ptr_mut(), n as i64);
    launch!(a.device(), "elementwise", name, grid_for(n); &pa, &ka, &pb, &kb, &po, &n64)?;
    Ok(out)
}

/// `a op b` (`add`, `mul`, `maximum`, ...), both of one dtype and broadcast to one shape.
pub fn binary(
    op: &str,
    a: (&CudaStorage, &Layout),
    b: (&CudaStorage, &Layout),
) -> Result<CudaStorage> {
    two("binary", format!("binary_{op}"), a, b, a.0.dtype())
}

/// `a op b` for a comparison (`eq`, `lt`, ...): a bool result.
pub fn compare(
    op: &str,
    a: (&CudaStorage, &Layout),
    b: (&CudaStorage, &Layout),
) -> Result<CudaStorage> {
    two("compare", format!("compare_{op}"), a, b, DType::Bool)
}

/// Elements of `a` where `c` is true, else of `b` (all broadcast to one shape).
pub fn where_(
    c: (&CudaStorage, &Layout),
    a: (&CudaStorage, &Layout),
    b: (&CudaStorage, &Layout),
) -> Result<CudaStorage> {
    const OP: &str = "where";
    same_device(OP, c.0, a.0)?;
    same_device(OP, a.0, b.0)?;
    check_dtype(OP, c.0, DType::Bool)?;
    check_dtype(OP, b.0, a.0.dtype())?;
    let mut out = CudaStorage::uninit(a.0.device(), a.1.numel(), a.0.dtype())?;
    let plan = LoopPlan::new(&[&Layout::contiguous(a.1.shape())?, c.1, a.1, b.1]);
    let n = plan.numel();
    if n == 0 {
        return Ok(out);
    }
    let k = layouts(OP, &plan)?;
    let (kc, ka, kb) = (k[1], k[2], k[3]);
    let name = indexed("where", plan.index32, tag(a.0.dtype()));
    let (pc, pa, pb, po, n64) = (c.0.ptr(), a.0.ptr(), b.0.ptr(), out.ptr_mut(), n as i64);
    launch!(a.0.device(), "elementwise", name, grid_for(n); &pc, &kc, &pa, &ka, &pb, &kb, &po, &n64)?;
    Ok(out)
}

/// Reduction `op` (`sum`, `prod`, `max`, `min`, `argmax`, `argmin`) of a contiguous buffer seen
/// as [outer, red, inner] over its middle dim: `outer * inner` results (i64 for arg*).
pub fn reduce(op: &str, x: &CudaStorage, [outer, red, inner]: [usize; 3]) -> Result<CudaStorage> {
    const OP: &str = "reduce";
    if outer.checked_mul(red).and_then(|v| v.checked_mul(inner)) != Some(x.len()) {
        return Err(Error::invalid(
            OP,
            format!(
                "[{outer}, {red}, {inner}] does not cover the {} elements",
                x.len()
            ),
        ));
    }
    let arg = op.starts_with("arg");
    if let Some(k) = split_factor(arg, outer, red, inner) {
        // Few long rows would leave most of the GPU idle (one block per row): each row is cut
        // into k consecutive chunks reduced by their own blocks, then the k partials per row.
        let partial = reduce(op, x, [outer * k, red / k, 1])?;
        return reduce(op, &partial, [outer, k, 1]);
    }
    let out_dtype = if arg { DType::I64 } else { x.dtype() };
    let mut out = CudaStorage::uninit(x.device(), outer * inner, out_dtype)?;
    if outer * inner == 0 {
        return Ok(out);
    }
    if red == 0 {
        return Err(Error::invalid(
            OP,
            format!("{op} over an empty axis on CUDA (reduce on the CPU, or keep the axis)"),
        ));
    }
    let (px, po) = (x.ptr(), out.ptr_mut());
    let (o, r, i) = (outer as i64, red as i64, inner as i64);
    if inner == 1 {
        // One block per output row: warp shuffles and a shared-memory combine.
        let rows = outer.min(i32::MAX as usize) as u32;
        let cfg = LaunchConfig {
            grid_dim: (rows, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let name = format!("reduce_{op}_rows_{}", tag(x.dtype()));
        let name = name.replace("reduce_arg", "arg");
        launch!(x.device(), "reduce", name, cfg; &px, &o, &r, &i, &po)?;
    } else {
        let name = format!("reduce_{op}_cols_{}", tag(x.dtype()));
        let name = name.replace("reduce_arg", "arg");
        launch!(x.device(), "reduce", name, grid_for(outer * inner); &px, &o, &r, &i, &po)?;
    }
    Ok(out)
}

/// Chunks per row for a two-pass row reduction, when there are fewer rows than a GPU has
/// blocks to run and the rows are long: the largest power of two up to 1024 that divides `red`
/// and leaves chunks of at least 4096. Arg-reductions stay one pass (a partial index would need
/// its chunk's offset).
fn split_factor(arg: bool, outer: usize, red: usize, inner: usize) -> Option<usize> {
    const MIN_CHUNK: usize = 4096;
    if arg || inner != 1 || outer >= 256 || red < 2 * MIN_CHUNK {
        return None;
    }
    let mut k = 1024;
    while k > 1 && (!red.is_multiple_of(k) || red / k < MIN_CHUNK) {
        k /= 2;
    }
    (k > 1).then_some(k)
}

/// `softmax`, `log_softmax` (a `[rows, cols]` result) or `logsumexp` (`[rows]`) over the last dim
/// of a contiguous [rows, cols] buffer.
pub fn softmax(op: &str, x: &CudaStorage, rows: usize, cols: usize) -> Result<CudaStorage> {
    let n_out = if op == "logsumexp" { rows } else { rows * cols };
    let mut out = CudaStorage::uninit(x.device(), n_out, x.dtype())?;
    if rows == 0 {
        return Ok(out);
    }
    let cfg = LaunchConfig {
        grid_dim: (rows.min(i32::MAX as usize) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let name = format!("{op}_{}", tag(x.dtype()));
    let (px, po, r, c) = (x.ptr(), out.ptr_mut(), rows as i64, cols as i64);
    launch!(x.device(), "softmax", name, cfg; &px, &po, &r, &c)?;
    Ok(out)
}

/// `n` Philox4x32-10 samples (`uniform` in [0, 1) or `normal`) from the stream of `seed`
/// starting at counter `offset`.
pub fn random(
    dev: &Arc<CudaDevice>,
    dist: &str,
    n: usize,
    dtype: DType,
    seed: u64,
    offset: u64,
) -> Result<CudaStorage> {
    let mut out = CudaStorage::uninit(dev, n, dtype)?;
    if n == 0 {
        return Ok(out);
    }
    let name = format!("philox_{dist}_{}", tag(dtype));
    let (po, n64) = (out.ptr_mut(), n as i64);
    launch!(dev, "random", name, grid_for(n); &po, &n64, &seed, &offset)?;
    Ok(out)
}

pub use quill_core::backend::AdamScalars;

fn check_update(
    op: &'static str,
    p: &CudaStorage,
    others: &[&CudaStorage],
    n: usize,
) -> Result<()> {
    if !matches!(p.dtype(), DType::F32 | DType::F64) {
        return Err(Error::invalid(
            op,
            format!("updates f32 or f64 buffers, got {}", p.dtype()),
        ));
    }
    for o in others {
        same_device(op, p, o)?;
        check_dtype(op, o, p.dtype())?;
        if o.len() < n {
            return Err(Error::invalid(
                op,
                format!("a buffer of {} elements, {n} needed", o.len()),
            ));
        }
    }
    if p.len() < n {
        return Err(Error::invalid(
            op,
            format!("a parameter of {} elements, {n} needed", p.len()),
        ));
    }
    Ok(())
}

/// One fused Adam / AdamW step over the first `n` elements of contiguous buffers.
pub fn adam_step(
    p: &mut CudaStorage,
    g: &CudaStorage,
    m: &mut CudaStorage,
    v: &mut CudaStorage,
    n: usize,
    s: AdamScalars,
) -> Result<()> {
    const OP: &str = "adam_step";
    check_update(OP, p, &[g, m, v], n)?;
    if n == 0 {
        return Ok(());
    }
    let (pp, pg, pm, pv, n64) = (p.ptr_mut(), g.ptr(), m.ptr_mut(), v.ptr_mut(), n as i64);
    let (small, dec, cpl) = (s.small as i32, s.decoupled as i32, s.coupled as i32);
    let dev = p.device().clone();
    let name = format!("adam_step_{}", tag(p.dtype()));
    macro_rules! go {
        ($t:ty) => {{
            let c = |x: f64| x as $t;
            let (a, b, w1, b2, w2, eps, decay, l2) = (
                c(s.neg_step), c(s.bc2_sqrt), c(s.w1), c(s.b2), c(s.w2), c(s.eps), c(s.decay),
                c(s.l2),
            );
            launch!(&dev, "optim", name, grid_for(n); &pp, &pg, &pm, &pv, &n64, &a, &b, &w1,
                &small, &b2, &w2, &eps, &decay, &l2, &dec, &cpl)
        }};
    }
    match p.dtype() {
        DType::F32 => go!(f32),
        _ => go!(f64),
    }
}

/// One fused SGD step; `buf` is the momentum buffer (None without momentum).
#[allow(clippy::too_many_arguments)]
pub fn sgd_step(
    p: &mut CudaStorage,
    g: &CudaStorage,
    buf: Option<&mut CudaStorage>,
    n: usize,
    lr: f64,
    weight_decay: f64,
    momentum: f64,
    dampening: f64,
    nesterov: bool,
    first: bool,
) -> Result<()> {
    const OP: &str = "sgd_step";
    match &buf {
        Some(b) => check_update(OP, p, &[g, b], n)?,
        None => check_update(OP, p, &[g], n)?,
    }
    if n == 0 {
        return Ok(());
    }
    let (pp, pg, n64) = (p.ptr_mut(), g.ptr(), n as i64);
    let pb: u64 = buf.map_or(0, |b| b.ptr_mut());
    let (has_wd, nest, fst) = ((weight_decay != 0.0) as i32, nesterov as i32, first as i32);
    let dev = p.device().clone();
    let name = format!("sgd_step_{}", tag(p.dtype()));
    macro_rules! go {
        ($t:ty) => {{
            let (nl, wd, mo, keep) =
                (-lr as $t, weight_decay as $t, momentum as $t, (1.0 - dampening) as $t);
            launch!(&dev, "optim", name, grid_for(n); &pp, &pg, &pb, &n64, &nl, &wd, &has_wd,
                &mo, &keep, &nest, &fst)
        }};
    }
    match p.dtype() {
        DType::F32 => go!(f32),
        _ => go!(f64),
    }
}

/// RMS normalisation over the last dim of the contiguous [rows, cols] `x` (from element 0)
/// with `w` (cols), both f32 or both f64: `(y [rows, cols], rstd [rows])` with
/// `y = x * rstd * w` and `rstd = 1 / sqrt(mean(x^2) + eps)` (the fused op `rms_norm`).
pub fn rms_norm(
    x: &CudaStorage,
    w: &CudaStorage,
    rows: usize,
    cols: usize,
    eps: f64,
) -> Result<(CudaStorage, CudaStorage)> {
    const OP: &str = "rms_norm";
    same_device(OP, x, w)?;
    check_dtype(OP, w, x.dtype())?;
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(Error::invalid(
            OP,
            format!("the CUDA kernel takes f32 or f64, got {}", x.dtype()),
        ));
    }
    let n = rows.saturating_mul(cols);
    if x.len() < n || w.len() < cols {
        return Err(Error::invalid(
            OP,
            format!(
                "buffers of {} and {} elements for [{rows}, {cols}] and [{cols}]",
                x.len(),
                w.len()
            ),
        ));
    }
    let mut y = CudaStorage::uninit(x.device(), n, x.dtype())?;
    let mut rstd = CudaStorage::uninit(x.device(), rows, x.dtype())?;
    if rows == 0 {
        return Ok((y, rstd));
    }
    let cfg = LaunchConfig {
        grid_dim: (rows.min(i32::MAX as usize) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let name = format!("rms_norm_{}", tag(x.dtype()));
    let (px, pw) = (x.ptr(), w.ptr());
    let (py, pr) = (y.ptr_mut(), rstd.ptr_mut());
    let (r, c) = (rows as i64, cols as i64);
    launch!(x.device(), "norm", name, cfg; &px, &pw, &py, &pr, &r, &c, &eps)?;
    Ok((y, rstd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_rows_split_into_power_of_two_chunks() {
        assert_eq!(split_factor(false, 1, 1 << 26, 1), Some(1024));
        assert_eq!(split_factor(false, 2, 8192 * 3, 1), Some(4)); // chunks of 6144 >= 4096
        assert_eq!(split_factor(false, 1, 8191, 1), None); // too short to split
        assert_eq!(split_factor(false, 1, 8191 * 2, 1), Some(2)); // two chunks of 8191
        assert_eq!(split_factor(false, 1, (1 << 20) + 1, 1), None); // odd: no factor
        assert_eq!(split_factor(true, 1, 1 << 26, 1), None); // argmax stays one pass
        assert_eq!(split_factor(false, 512, 1 << 20, 1), None); // enough rows already
        assert_eq!(split_factor(false, 1, 1 << 20, 4), None); // column reductions
    }

    #[test]
    fn kernel_names() {
        assert_eq!(indexed("copy", true, "f32"), "copy32_f32");
        assert_eq!(indexed("unary_exp", true, "f32"), "unary32_exp_f32");
        assert_eq!(indexed("compare_lt", false, "i64"), "compare_lt_i64");
        assert_eq!(indexed("copy", false, "bf16"), "copy_bf16");
        assert_eq!(indexed("cast", true, "f16_i64"), "cast32_f16_i64");
        assert_eq!(tag(DType::Bool), "bool");
    }

    /// Every name a launch here can build, for every op and dtype the `has_*` checks admit,
    /// exists in its module (its 32-bit twin too).
    #[test]
    fn every_admitted_launch_names_a_kernel() {
        use quill_core::{BinaryOp, UnaryOp};
        let all = [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::Bool,
        ];
        let mut admitted = 0;
        for d in all {
            for op in UnaryOp::ALL {
                if has_unary(op.name(), d) {
                    admitted += 1;
                    for i32x in [false, true] {
                        let n = indexed(&format!("unary_{}", op.name()), i32x, tag(d));
                        assert!(has_kernel("elementwise", &n), "{n}");
                    }
                }
            }
            for op in BinaryOp::ALL {
                if has_binary(op.name(), d) {
                    admitted += 1;
                }
            }
            for op in ["sum", "prod", "max", "min", "argmax", "argmin"] {
                if has_reduce(op, d) {
                    let cols = format!("reduce_{op}_cols_{}", tag(d)).replace("reduce_arg", "arg");
                    assert!(has_kernel("reduce", &cols), "{cols}");
                }
            }
            for i32x in [false, true] {
                for base in ["copy", "fill", "where"] {
                    let n = indexed(base, i32x, tag(d));
                    let m = if base == "where" {
                        "elementwise"
                    } else {
                        "copy"
                    };
                    assert!(has_kernel(m, &n), "{n}");
                }
                for to in all {
                    let n = indexed("cast", i32x, &format!("{}_{}", tag(d), tag(to)));
                    assert!(has_kernel("copy", &n), "{n}");
                }
            }
        }
        assert!(admitted > 100, "{admitted}");
        assert!(has_unary("exp", DType::F32) && !has_unary("exp", DType::I32));
        assert!(has_binary("lt", DType::Bool) && !has_binary("sub", DType::Bool));
        assert!(has_binary("add", DType::Bool) && has_unary("isnan", DType::Bool));
        assert!(has_reduce("argmax", DType::F32) && !has_reduce("sum", DType::U8));
    }

    #[test]
    fn klayout_is_what_kernels_expect() {
        let l = KLayout {
            offset: 3,
            ndim: 1,
            pad: 0,
            shape: [5, 1, 1, 1, 1, 1, 1, 1],
            strides: [-1, 0, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(std::mem::align_of::<KLayout>(), 8);
        assert_eq!(l.shape[0] * l.strides[0], -5);
    }
}
