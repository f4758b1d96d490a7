//! The seam between the array layer and the devices: the `Backend` trait that every storage
//! (one typed buffer on one device) implements. The array layer has already checked shapes,
//! broadcast the operands to one shape, cast them to the op's compute dtype and put them on one
//! device; a backend only runs kernels over `(buffer, Layout)` pairs. Ops are values
//! (`UnaryOp::Exp`), so a new elementwise op adds no method here.
//!
//! Every method that not every device has a kernel for has a default body that returns
//! `Error::Unsupported`. The array layer's dispatch (one file, `quill/src/backend.rs`) turns
//! that error into its one documented host fallback: copy the operands to the CPU, run the CPU
//! kernel, move the result back.

use crate::{BinaryOp, DType, Error, Layout, ReduceOp, Result, Scalar, UnaryOp};

/// A reduction that is not a plain fold over one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    Mean,
    /// `sum((x - mean)^2) / (n - ddof)`, or its square root for `std`.
    Var {
        ddof: usize,
        std: bool,
    },
    LogSumExp,
}

impl Stat {
    pub fn name(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::Var { std: false, .. } => "var",
            Stat::Var { std: true, .. } => "std",
            Stat::LogSumExp => "logsumexp",
        }
    }
}

/// The indexed axis of `gather` / `scatter_add`: the data's stride and size along it, and its
/// position (for error messages). The data is read through a base layout that has the
/// index's shape and stride 0 on this axis; element `p` is at `base(p) + index[p] * stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Along {
    pub stride: isize,
    pub size: usize,
    pub axis: usize,
}

/// The hyper-parameters of one fused optimizer step (PyTorch's update rules), in f64; each
/// backend converts them to the parameter's compute dtype once per call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Update {
    /// SGD with optional momentum (`state = [momentum_buffer]`), Nesterov and L2 weight decay;
    /// `first` marks the step that initialises the buffer with the gradient.
    Sgd {
        lr: f64,
        weight_decay: f64,
        momentum: f64,
        dampening: f64,
        nesterov: bool,
        first: bool,
    },
    /// Adam (L2 decay) or AdamW (`decoupled`), `state = [exp_avg, exp_avg_sq]`, `step` >= 1.
    Adam {
        lr: f64,
        betas: (f64, f64),
        eps: f64,
        weight_decay: f64,
        decoupled: bool,
        step: u64,
    },
}

impl Update {
    pub fn name(&self) -> &'static str {
        match self {
            Update::Sgd { .. } => "sgd_step",
            Update::Adam {
                decoupled: false, ..
            } => "adam_step",
            Update::Adam { .. } => "adamw_step",
        }
    }

    /// The dtype a parameter of dtype `param` is updated in (and its state kept in): f64
    /// params in f64, every other float dtype (f32, f16, bf16) in f32.
    pub fn compute_dtype(op: &'static str, param: DType) -> Result<DType> {
        match param {
            DType::F64 => Ok(DType::F64),
            DType::F32 | DType::F16 | DType::BF16 => Ok(DType::F32),
            other => Err(Error::invalid(
                op,
                format!("only floating-point parameters can be optimized, got a {other} parameter"),
            )),
        }
    }

    /// How many state buffers the rule reads and writes.
    pub fn state_len(&self) -> usize {
        match self {
            Update::Sgd { momentum, .. } if *momentum == 0.0 => 0,
            Update::Sgd { .. } => 1,
            Update::Adam { .. } => 2,
        }
    }
}

/// Adam's per-step scalars, derived from the hyper-parameters in f64 as PyTorch derives them;
/// every backend converts them to the compute dtype and runs the same per-element rule:
/// `g += l2 * p` (coupled), `p *= decay` (decoupled), `m = lerp(m, g, w1)`,
/// `v = b2 * v + w2 * g * g`, `p += neg_step * m / (sqrt(v) / bc2_sqrt + eps)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamScalars {
    pub neg_step: f64,
    pub bc2_sqrt: f64,
    pub w1: f64,
    /// Which of PyTorch's two `lerp` forms is exact here (`w1 < 0.5`).
    pub small: bool,
    pub b2: f64,
    pub w2: f64,
    pub eps: f64,
    pub decay: f64,
    pub l2: f64,
    pub decoupled: bool,
    pub coupled: bool,
}

impl AdamScalars {
    /// The scalars of step `step` (>= 1).
    pub fn new(
        lr: f64,
        (b1, b2): (f64, f64),
        eps: f64,
        weight_decay: f64,
        decoupled: bool,
        step: u64,
    ) -> Self {
        let t = step as f64;
        let has_wd = weight_decay != 0.0;
        AdamScalars {
            neg_step: -(lr / (1.0 - b1.powf(t))),
            bc2_sqrt: (1.0 - b2.powf(t)).sqrt(),
            w1: 1.0 - b1,
            small: (1.0 - b1).abs() < 0.5,
            b2,
            w2: 1.0 - b2,
            eps,
            decay: 1.0 - lr * weight_decay,
            l2: weight_decay,
            decoupled: decoupled && has_wd,
            coupled: !decoupled && has_wd,
        }
    }
}

/// The sizes of one fused attention call: `batch` independent problems (batch and head dims
/// flattened), each with queries `(lq, d)`, keys `(lk, d)`, values `(lk, dv)`, all row-major
/// and contiguous. `causal` masks key `j` for query `i` when `j > i` (PyTorch's top-left
/// alignment); `scale` multiplies the scores `q . k`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnDims {
    pub batch: usize,
    pub lq: usize,
    pub lk: usize,
    pub d: usize,
    pub dv: usize,
    pub causal: bool,
    pub scale: f64,
}

/// A batch-normalisation problem over a contiguous (n, c, inner) buffer: statistics per
/// channel `c` over the `n * inner` values of that channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormDims {
    pub n: usize,
    pub c: usize,
    pub inner: usize,
    pub eps: f64,
    /// A ReLU follows in the same op: the forward clamps its output at zero and the backward
    /// passes the gradient only where that output is positive (CNN blocks: one pass fewer
    /// each way, no mask array).
    pub relu: bool,
}

/// One device's storage and kernels. Outputs are fresh contiguous buffers (C order) unless the
/// method writes into `self` / `dst`; layouts are the operands' views, any strides.
pub trait Backend: Sized {
    /// The backend's name in errors ("cpu", "cuda").
    const NAME: &'static str;

    /// Whether this backend runs `op` (one of `quill::supported_ops()`'s names) on `dtype` with
    /// a kernel of its own, instead of answering `Unsupported` and so sending the op to the
    /// host. Answered from the backend's kernel table, without running anything; the default
    /// (the CPU's) is true for every op. Data-dependent exceptions (an empty reduction, a
    /// buffer read from an offset) still fall back and are counted.
    fn supports(_op: &str, _dtype: DType) -> bool {
        true
    }

    fn dtype(&self) -> DType;
    /// Length of the buffer in elements.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // Copies, casts, fills.
    /// The elements of `l`, contiguous.
    fn compact(&self, l: &Layout) -> Result<Self>;
    /// `self[ld] = src[ls]`: same shape, same dtype, distinct buffers.
    fn copy_from(&mut self, ld: &Layout, src: &Self, ls: &Layout) -> Result<()>;
    /// The elements of `l` converted to `dtype` (NumPy's cast rules), contiguous.
    fn cast(&self, l: &Layout, dtype: DType) -> Result<Self>;
    /// `value` (cast to the buffer's dtype) at every element of `l`.
    fn fill(&mut self, l: &Layout, value: Scalar) -> Result<()>;

    // Elementwise.
    /// `op(x)` for `x` in the op's compute dtype.
    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Self>;
    /// `op(a, b)` (comparisons included) for operands of one dtype, broadcast to one shape.
    fn binary(op: BinaryOp, a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self>;
    /// `dst[ld] = op(dst[ld], b)` with `ld` contiguous, `b` a distinct buffer of `dst`'s dtype
    /// broadcast to `ld`'s shape; not for comparisons.
    fn binary_inplace(
        op: BinaryOp,
        dst: &mut Self,
        ld: &Layout,
        b: (&Self, &Layout),
    ) -> Result<()> {
        let _ = (ld, b);
        Err(unsupported(op.name(), Self::NAME, dst.dtype()))
    }
    /// `c ? a : b` with `c` bool, `a` and `b` of one dtype, all broadcast to one shape.
    fn where_(c: (&Self, &Layout), a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self>;

    // Reductions and products.
    /// `op` over `axes` (sorted, distinct) of `l`; the result is contiguous over the kept dims,
    /// in the op's result dtype (`ReduceOp::result_dtype`).
    fn reduce(&self, op: ReduceOp, l: &Layout, axes: &[usize]) -> Result<Self>;
    /// A statistic over `axes`, as `reduce`; integers give f64.
    fn stat(&self, stat: Stat, l: &Layout, axes: &[usize]) -> Result<Self> {
        let _ = (l, axes);
        Err(unsupported(stat.name(), Self::NAME, self.dtype()))
    }
    /// `a @ b` for operands of one dtype broadcast to `[batch.., m, k]` and `[batch.., k, n]`;
    /// the result is contiguous `[batch.., m, n]`.
    fn matmul(a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self>;

    // Indexing and ordering.
    /// `out[p] = src[base(p) + index[p] * along.stride]` over the index's shape, indices of an
    /// integer dtype, negative ones counting from the end; out of range is an error naming `op`.
    fn gather(
        op: &'static str,
        src: (&Self, &Layout),
        index: (&Self, &Layout),
        along: Along,
    ) -> Result<Self> {
        let _ = (index, along);
        Err(unsupported(op, Self::NAME, src.0.dtype()))
    }
    /// `dst[base(p) + index[p] * along.stride] += src[p]` in C order of the index.
    fn scatter_add(
        op: &'static str,
        dst: (&mut Self, &Layout),
        src: (&Self, &Layout),
        index: (&Self, &Layout),
        along: Along,
    ) -> Result<()> {
        let _ = (src, index, along);
        Err(unsupported(op, Self::NAME, dst.0.dtype()))
    }
    /// Each lane along `axis` sorted (stable, NaN last; reversed when `descending`, equal
    /// elements still in order), or the i64 positions that sort it when `indices`.
    fn sort(&self, l: &Layout, axis: usize, descending: bool, indices: bool) -> Result<Self> {
        let _ = (l, axis, descending, indices);
        Err(unsupported("sort", Self::NAME, self.dtype()))
    }
    /// Running sums along `axis` in the buffer's dtype (f32, f64 or i64, which wraps); with
    /// `include_initial` each lane starts with a 0 and is one longer.
    fn cumsum(&self, l: &Layout, axis: usize, include_initial: bool) -> Result<Self> {
        let _ = (l, axis, include_initial);
        Err(unsupported("cumsum", Self::NAME, self.dtype()))
    }

    // Training.
    /// One fused optimizer step over `n` contiguous elements from the given offsets: the
    /// parameter (written), its gradient (read) and the rule's state buffers (written), all
    /// distinct buffers of one float compute dtype.
    fn update(
        rule: &Update,
        param: (&mut Self, usize),
        grad: (&Self, usize),
        state: &mut [(&mut Self, usize)],
        n: usize,
    ) -> Result<()> {
        let _ = (grad, state, n);
        Err(unsupported(rule.name(), Self::NAME, param.0.dtype()))
    }
}

/// The error of a backend without a kernel for `op` on `dtype`.
pub fn unsupported(op: &'static str, backend: &'static str, dtype: DType) -> Error {
    Error::unsupported(op, backend, format!("dtype {dtype}"))
}
