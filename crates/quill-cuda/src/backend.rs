//! The CUDA backend: `CudaStorage` implements quill-core's `Backend` trait with the NVRTC
//! kernels (`ops.rs`) and cuBLAS (`blas.rs`). Where no kernel exists for an op or a dtype the
//! method returns `Error::Unsupported`, and the array layer runs the op on host copies. That
//! covers, today: gather / scatter_add, sort, cumsum, any / all, empty reductions, matmul of
//! integers, bool and halves, and updates of parameters that are not whole buffers.

use crate::storage::CudaStorage;
use crate::{blas, ops};
use quill_core::backend::unsupported;
use quill_core::{
    Backend, BinaryOp, DType, Layout, ReduceOp, Result, Scalar, Stat, UnaryOp, Update,
};

/// A fresh device scalar of `dtype` holding `v` (the scale of a mean, say).
fn scalar_on(like: &CudaStorage, v: f64, dtype: DType) -> Result<CudaStorage> {
    let bytes = match dtype {
        DType::F64 => v.to_le_bytes().to_vec(),
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        DType::BF16 => half::bf16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        d => return Err(unsupported("scale", "cuda", d)),
    };
    CudaStorage::from_host_bytes(like.ordinal(), &bytes, dtype)
}

/// `x * v` for a contiguous float `x` of `shape`.
fn scale(x: &CudaStorage, shape: &[usize], v: f64) -> Result<CudaStorage> {
    let l = Layout::contiguous(shape)?;
    let s = scalar_on(x, v, x.dtype())?;
    let ls = Layout::contiguous(&[])?.broadcast_to(shape)?;
    CudaStorage::binary(BinaryOp::Mul, (x, &l), (&s, &ls))
}

/// The shape left after reducing `axes` of `shape`, and the number of elements reduced.
fn kept(shape: &[usize], axes: &[usize]) -> (Vec<usize>, usize) {
    let out = (0..shape.len())
        .filter(|d| !axes.contains(d))
        .map(|d| shape[d])
        .collect();
    (out, axes.iter().map(|&d| shape[d]).product())
}

/// `x` (through `l`) as a contiguous buffer with the kept dims first and the reduced dims
/// last, and its [kept, reduced] sizes; no copy when `x` already is one whole block.
fn rows_last(
    x: &CudaStorage,
    l: &Layout,
    axes: &[usize],
) -> Result<(Option<CudaStorage>, usize, usize)> {
    let nd = l.ndim();
    let (k, red) = kept(l.shape(), axes);
    let outer: usize = k.iter().product();
    let trailing = axes
        .iter()
        .enumerate()
        .all(|(i, &d)| d == nd - axes.len() + i);
    if trailing && l.is_contiguous() && l.offset() == 0 && l.numel() == x.len() {
        return Ok((None, outer, red));
    }
    let perm: Vec<isize> = (0..nd)
        .filter(|d| !axes.contains(d))
        .chain(axes.iter().copied())
        .map(|d| d as isize)
        .collect();
    Ok((Some(ops::compact(x, &l.permute(&perm)?)?), outer, red))
}

/// Whether some kernel module has a kernel called `name`.
fn any_kernel(name: &str) -> bool {
    crate::kernels::SOURCES
        .iter()
        .any(|(m, _)| ops::has_kernel(m, name))
}

impl Backend for CudaStorage {
    const NAME: &'static str = "cuda";

    /// From the kernel table (the same predicates the methods below gate on): elementwise and
    /// reductions where a kernel exists for the dtype (complex: + - * / and negation), copies /
    /// fills / where (complex too), casts (not complex), float
    /// statistics, f32 / f64 matmul and the optimizer steps with a kernel; not the fused ops
    /// (conv, pooling, batch norm, attention), gather / scatter_add, sort, cumsum, nonzero,
    /// searchsorted, any / all.
    fn supports(op: &str, dtype: DType) -> bool {
        if UnaryOp::ALL.iter().any(|u| u.name() == op) {
            return ops::has_unary(op, dtype);
        }
        if BinaryOp::ALL.iter().any(|b| b.name() == op) {
            return ops::has_binary(op, dtype);
        }
        if let Some(r) = ReduceOp::ALL.iter().find(|r| r.name() == op) {
            return match r {
                ReduceOp::Any | ReduceOp::All => false,
                ReduceOp::ArgMax | ReduceOp::ArgMin => ops::has_reduce(op, dtype),
                _ => ops::has_reduce(op, r.result_dtype(dtype)),
            };
        }
        match op {
            // Complex arrays copy, fill and select on the GPU; their casts run on the CPU.
            "compact" | "assign" | "fill" | "where" => true,
            "astype" => !dtype.is_complex(),
            "mean" | "var" | "std" => dtype.is_float(),
            "logsumexp" => ops::has_kernel("softmax", &format!("logsumexp_{}", ops::tag(dtype))),
            "matmul" => matches!(dtype, DType::F32 | DType::F64),
            "sgd_step" | "adam_step" | "adamw_step" => {
                let kernel = if op == "sgd_step" {
                    "sgd_step"
                } else {
                    "adam_step"
                };
                any_kernel(&format!("{kernel}_{}", ops::tag(dtype)))
            }
            _ => false,
        }
    }

    fn dtype(&self) -> DType {
        CudaStorage::dtype(self)
    }
    fn len(&self) -> usize {
        CudaStorage::len(self)
    }

    fn compact(&self, l: &Layout) -> Result<Self> {
        ops::compact(self, l)
    }
    fn copy_from(&mut self, ld: &Layout, src: &Self, ls: &Layout) -> Result<()> {
        ops::copy(src, ls, self, ld)
    }
    fn cast(&self, l: &Layout, dtype: DType) -> Result<Self> {
        ops::cast(self, l, dtype)
    }
    fn fill(&mut self, l: &Layout, value: Scalar) -> Result<()> {
        ops::fill(self, l, value)
    }

    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Self> {
        if !Self::supports(op.name(), self.dtype()) {
            return Err(unsupported(op.name(), Self::NAME, self.dtype()));
        }
        ops::unary(op.name(), self, l)
    }
    fn binary(op: BinaryOp, a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self> {
        let dt = a.0.dtype();
        if !Self::supports(op.name(), dt) {
            return Err(unsupported(op.name(), Self::NAME, dt));
        }
        if op.is_comparison() {
            ops::compare(op.name(), a, b)
        } else {
            ops::binary(op.name(), a, b)
        }
    }
    fn binary_inplace(
        op: BinaryOp,
        dst: &mut Self,
        ld: &Layout,
        b: (&Self, &Layout),
    ) -> Result<()> {
        let out = Self::binary(op, (dst, ld), b)?;
        ops::copy(&out, &Layout::contiguous(ld.shape())?, dst, ld)
    }
    fn where_(c: (&Self, &Layout), a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self> {
        ops::where_(c, a, b)
    }

    fn reduce(&self, op: ReduceOp, l: &Layout, axes: &[usize]) -> Result<Self> {
        let arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
        // Accumulate in the result dtype (integer sums in i64, as NumPy).
        let dt = if arg {
            self.dtype()
        } else {
            op.result_dtype(self.dtype())
        };
        let empty = axes.iter().any(|&d| l.shape()[d] == 0);
        // Empty reductions (identities, errors) and any/all keep the CPU's rules.
        if empty || !Self::supports(op.name(), self.dtype()) {
            return Err(unsupported(op.name(), Self::NAME, self.dtype()));
        }
        let cast;
        let (x, l) = if self.dtype() != dt {
            cast = ops::cast(self, l, dt)?;
            (&cast, Layout::contiguous(l.shape())?)
        } else {
            (self, l.clone())
        };
        // Kept dims first, reduced dims next: [outer, red] with inner 1, unless the reduced dims
        // already form one contiguous block of the whole buffer ([outer, red, inner]).
        let block = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let whole = l.is_contiguous() && l.offset() == 0 && l.numel() == x.len();
        if whole && block && !axes.is_empty() {
            let sh = l.shape();
            let (i, j) = (axes[0], axes[axes.len() - 1] + 1);
            let p = |r: &[usize]| r.iter().product::<usize>();
            return ops::reduce(op.name(), x, [p(&sh[..i]), p(&sh[i..j]), p(&sh[j..])]);
        }
        let (copy, outer, red) = rows_last(x, &l, axes)?;
        ops::reduce(op.name(), copy.as_ref().unwrap_or(x), [outer, red, 1])
    }

    fn stat(&self, stat: Stat, l: &Layout, axes: &[usize]) -> Result<Self> {
        let dt = self.dtype();
        let empty = axes.iter().any(|&d| l.shape()[d] == 0);
        if !dt.is_float() || empty {
            return Err(unsupported(stat.name(), Self::NAME, dt));
        }
        let (out_shape, n) = kept(l.shape(), axes);
        match stat {
            // The sum's kernel accumulates in f32 (f64 for f64), then one scale.
            Stat::Mean => {
                let s = self.reduce(ReduceOp::Sum, l, axes)?;
                scale(&s, &out_shape, 1.0 / n as f64)
            }
            // Two passes: the mean, then the centred squares.
            Stat::Var { ddof, std } => {
                let m = self.stat(Stat::Mean, l, axes)?;
                let keep: Vec<usize> = (0..l.ndim())
                    .map(|d| if axes.contains(&d) { 1 } else { l.shape()[d] })
                    .collect();
                let lm = Layout::contiguous(&keep)?.broadcast_to(l.shape())?;
                let d = Self::binary(BinaryOp::Sub, (self, l), (&m, &lm))?;
                let lc = Layout::contiguous(l.shape())?;
                let d2 = Self::binary(BinaryOp::Mul, (&d, &lc), (&d, &lc))?;
                let s = d2.reduce(ReduceOp::Sum, &lc, axes)?;
                let v = scale(&s, &out_shape, 1.0 / (n as f64 - ddof as f64))?;
                if std {
                    v.unary(UnaryOp::Sqrt, &Layout::contiguous(&out_shape)?)
                } else {
                    Ok(v)
                }
            }
            // The fused row kernel: one read of each row for max and sum.
            Stat::LogSumExp => {
                let name = format!("logsumexp_{}", ops::tag(dt));
                if axes.is_empty() || !ops::has_kernel("softmax", &name) {
                    return Err(unsupported(stat.name(), Self::NAME, dt));
                }
                let (copy, rows, cols) = rows_last(self, l, axes)?;
                ops::softmax("logsumexp", copy.as_ref().unwrap_or(self), rows, cols)
            }
        }
    }

    fn matmul(a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self> {
        let dt = a.0.dtype();
        if !Self::supports("matmul", dt) {
            return Err(unsupported("matmul", Self::NAME, dt));
        }
        let nd = a.1.ndim();
        let (m, k, n) = (
            a.1.shape()[nd - 2],
            a.1.shape()[nd - 1],
            b.1.shape()[nd - 1],
        );
        let batch: usize = a.1.shape()[..nd - 2].iter().product();
        // One batch dim: a strided batch needs a single stride per operand; merge or compact.
        let flat =
            |(x, l): (&Self, &Layout), r: usize, c: usize| -> Result<(Option<Self>, Layout)> {
                let dims = [batch as isize, r as isize, c as isize];
                match l.reshape(&dims) {
                    Ok(v) => Ok((None, v)),
                    Err(_) => {
                        let copy = ops::compact(x, l)?;
                        Ok((Some(copy), Layout::contiguous(&[batch, r, c])?))
                    }
                }
            };
        let (ca, la) = flat(a, m, k)?;
        let (cb, lb) = flat(b, k, n)?;
        blas::matmul(
            ca.as_ref().unwrap_or(a.0),
            &la,
            cb.as_ref().unwrap_or(b.0),
            &lb,
        )
    }

    fn update(
        rule: &Update,
        (p, po): (&mut Self, usize),
        (g, go): (&Self, usize),
        state: &mut [(&mut Self, usize)],
        n: usize,
    ) -> Result<()> {
        // The kernels take whole buffers from element 0.
        if po != 0 || go != 0 || state.iter().any(|(_, o)| *o != 0) {
            return Err(unsupported(rule.name(), Self::NAME, p.dtype()));
        }
        match (*rule, state) {
            (
                Update::Sgd {
                    lr,
                    weight_decay,
                    momentum,
                    dampening,
                    nesterov,
                    first,
                },
                state,
            ) => {
                let buf = state.first_mut().map(|(b, _)| &mut **b);
                ops::sgd_step(
                    p,
                    g,
                    buf,
                    n,
                    lr,
                    weight_decay,
                    momentum,
                    dampening,
                    nesterov,
                    first,
                )
            }
            (
                Update::Adam {
                    lr,
                    betas: (b1, b2),
                    eps,
                    weight_decay,
                    decoupled,
                    step,
                },
                [(m, _), (v, _)],
            ) => {
                let s = ops::AdamScalars::new(lr, (b1, b2), eps, weight_decay, decoupled, step);
                ops::adam_step(p, g, m, v, n, s)
            }
            _ => Err(quill_core::Error::invalid(
                rule.name(),
                "Adam keeps two state buffers (exp_avg, exp_avg_sq)",
            )),
        }
    }
}
