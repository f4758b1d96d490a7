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
    /// The arithmetic mean: the sum divided by the number of reduced elements.
    Mean,
    /// `sum((x - mean)^2) / (n - ddof)`, or its square root for `std`.
    Var {
        /// Delta degrees of freedom subtracted from the count `n` (0: population, 1: sample).
        ddof: usize,
        /// Return the standard deviation (the square root of the variance) instead.
        std: bool,
    },
    /// `log(sum(exp(x)))` over the reduced elements.
    LogSumExp,
}

impl Stat {
    /// The op's name, as errors print it: `"mean"`, `"var"`, `"std"` or `"logsumexp"`.
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
    /// The data's stride along the indexed axis, in elements.
    pub stride: isize,
    /// The data's length along the indexed axis; every index must lie in `0..size`.
    pub size: usize,
    /// The indexed axis's position in the data's shape, used only in error messages.
    pub axis: usize,
}

/// The hyper-parameters of one fused optimizer step (PyTorch's update rules), in f64; each
/// backend converts them to the parameter's compute dtype once per call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Update {
    /// SGD with optional momentum (`state = [momentum_buffer]`), Nesterov and L2 weight decay;
    /// `first` marks the step that initialises the buffer with the gradient.
    Sgd {
        /// Learning rate: the step is `-lr` times the (momentum-adjusted) gradient.
        lr: f64,
        /// L2 penalty: `weight_decay * p` is added to the gradient; 0 skips it.
        weight_decay: f64,
        /// Momentum factor; 0 means plain SGD with no state buffer.
        momentum: f64,
        /// Dampening: the new gradient enters the buffer scaled by `1 - dampening`.
        dampening: f64,
        /// Use Nesterov momentum: step along `g + momentum * buf` instead of `buf`.
        nesterov: bool,
        /// This is the first step with momentum, so the buffer is set to the gradient.
        first: bool,
    },
    /// Adam (L2 decay) or AdamW (`decoupled`), `state = [exp_avg, exp_avg_sq]`, `step` >= 1.
    Adam {
        /// Learning rate, before bias correction.
        lr: f64,
        /// Decay rates `(beta1, beta2)` of the first- and second-moment averages.
        betas: (f64, f64),
        /// Added to the bias-corrected `sqrt(v)` in the denominator to avoid division by zero.
        eps: f64,
        /// Weight-decay coefficient: L2 added to the gradient, or decoupled for AdamW.
        weight_decay: f64,
        /// AdamW: scale the parameter by `1 - lr * weight_decay` instead of adding L2 to the
        /// gradient.
        decoupled: bool,
        /// The 1-based step count, used for bias correction.
        step: u64,
    },
}

impl Update {
    /// The op name of the rule: `"sgd_step"`, `"adam_step"` or `"adamw_step"`.
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
    /// Minus the bias-corrected step size: `-lr / (1 - beta1^step)`.
    pub neg_step: f64,
    /// Square root of the second-moment bias correction: `sqrt(1 - beta2^step)`.
    pub bc2_sqrt: f64,
    /// Weight of the new gradient in the first-moment `lerp`: `1 - beta1`.
    pub w1: f64,
    /// Which of PyTorch's two `lerp` forms is exact here (`w1 < 0.5`).
    pub small: bool,
    /// Decay of the second-moment average: `beta2`.
    pub b2: f64,
    /// Weight of the squared gradient in the second moment: `1 - beta2`.
    pub w2: f64,
    /// Added to `sqrt(v) / bc2_sqrt` in the denominator.
    pub eps: f64,
    /// Decoupled decay factor applied to the parameter: `1 - lr * weight_decay`.
    pub decay: f64,
    /// Coupled L2 coefficient added to the gradient: `weight_decay`.
    pub l2: f64,
    /// Apply `decay` to the parameter (AdamW with non-zero weight decay).
    pub decoupled: bool,
    /// Add `l2 * p` to the gradient (Adam with non-zero weight decay).
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
    /// Number of independent problems: the batch and head dims multiplied together.
    pub batch: usize,
    /// Query sequence length (rows of `q` and of the output).
    pub lq: usize,
    /// Key/value sequence length (rows of `k` and `v`).
    pub lk: usize,
    /// Query and key feature size, the length of each dot product.
    pub d: usize,
    /// Value feature size, and so the output's row length.
    pub dv: usize,
    /// Apply the causal mask (key `j` hidden from query `i` when `j > i`).
    pub causal: bool,
    /// Factor applied to each score `q . k` before the softmax.
    pub scale: f64,
}

/// A batch-normalisation problem over a contiguous (n, c, inner) buffer: statistics per
/// channel `c` over the `n * inner` values of that channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormDims {
    /// Batch size: the leading dim of the buffer.
    pub n: usize,
    /// Number of channels, each with its own statistics.
    pub c: usize,
    /// Product of the dims after the channel dim (1 for a 2-D input).
    pub inner: usize,
    /// Added to the variance before its square root is taken.
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

    /// The element type of the buffer.
    fn dtype(&self) -> DType;
    /// Length of the buffer in elements.
    fn len(&self) -> usize;
    /// Whether the buffer holds no elements.
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
