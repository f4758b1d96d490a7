//! Stateless losses and activations over Tensors: composites of the differentiable ops.
//! Every loss runs in f32 under autocast (its float inputs widened first), as PyTorch's f32
//! list has them: a bf16 loss would round away the small differences training follows.

use crate::tensor::autocast::widen;
use crate::tensor::Tensor;
use crate::NDArray;
use quill_core::{DType, Error, Result};

/// How a loss combines its per-sample values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    /// The mean over all elements, a scalar (the default): the loss scale does not grow with
    /// the batch size.
    #[default]
    Mean,
    /// The sum over all elements, a scalar.
    Sum,
    /// No reduction: one loss per sample (or per element for element-wise losses).
    None,
}

fn reduce(l: Tensor, r: Reduction) -> Result<Tensor> {
    match r {
        Reduction::Mean => l.mean(None, false),
        Reduction::Sum => l.sum(None, false),
        Reduction::None => Ok(l),
    }
}

fn check_labels(op: &'static str, logits: &Tensor, labels: &NDArray) -> Result<()> {
    if logits.ndim() != 2 || labels.ndim() != 1 || labels.shape()[0] != logits.shape()[0] {
        return Err(Error::ShapeMismatch {
            op,
            lhs: logits.shape().into(),
            rhs: labels.shape().into(),
            hint: " (expected logits (N, C) and integer labels (N))".into(),
        });
    }
    if !labels.dtype().is_int() {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::I64,
            got: labels.dtype(),
        });
    }
    // Class indices must lie in [0, C): a negative label would otherwise wrap (Python-style
    // indexing) and silently score the wrong class. PyTorch rejects both.
    let c = logits.shape()[1] as i64;
    if labels.numel() > 0 {
        let lo = labels.min(None, false)?.item::<i64>()?;
        let hi = labels.max(None, false)?.item::<i64>()?;
        if lo < 0 || hi >= c {
            let bad = if lo < 0 { lo } else { hi };
            return Err(Error::InvalidArgument {
                op,
                msg: format!("label {bad} is out of range for {c} classes"),
            });
        }
    }
    Ok(())
}

/// Negative log-likelihood of integer `labels` (N) under log-probabilities (N, C).
pub fn nll_loss(logp: &Tensor, labels: &NDArray, reduction: Reduction) -> Result<Tensor> {
    check_labels("nll_loss", logp, labels)?;
    let logp = &widen(logp)?;
    let picked = logp.take_along_axis(&labels.unsqueeze(1)?, 1)?;
    reduce(picked.neg()?.reshape(&[-1])?, reduction)
}

/// Cross-entropy of logits (N, C) against integer labels (N), with PyTorch's label smoothing
/// (`smoothing` of the target mass spread uniformly over the C classes).
pub fn cross_entropy(
    logits: &Tensor,
    labels: &NDArray,
    smoothing: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    check_labels("cross_entropy", logits, labels)?;
    if !(0.0..=1.0).contains(&smoothing) {
        return Err(Error::InvalidArgument {
            op: "cross_entropy",
            msg: format!("label smoothing must lie in [0, 1], got {smoothing}"),
        });
    }
    let logp = widen(logits)?.log_softmax(1)?;
    let nll = nll_loss(&logp, labels, Reduction::None)?;
    let per = if smoothing > 0.0 {
        let uniform = logp.mean(Some(&[1]), false)?.neg()?;
        nll.mul_scalar(1.0 - smoothing)?
            .add(&uniform.mul_scalar(smoothing)?)?
    } else {
        nll
    };
    reduce(per, reduction)
}

/// Mean squared error (inputs broadcast together).
pub fn mse_loss(pred: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    reduce(widen(pred)?.sub(&widen(target)?)?.square()?, reduction)
}

/// Mean absolute error.
pub fn l1_loss(pred: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    reduce(widen(pred)?.sub(&widen(target)?)?.abs()?, reduction)
}

/// `BCEWithLogits`: `max(x, 0) - x * y + log(1 + exp(-|x|))`, stable for any logit.
///
/// `max(x, 0)` is written `(x + |x|) / 2` so that the subgradients of `|x|` at 0 cancel and
/// the gradient at a zero logit is the true `sigmoid(0) - y` (ReLU's `relu'(0) = 0` would give
/// `-y`).
pub fn binary_cross_entropy_with_logits(
    logits: &Tensor,
    target: &Tensor,
    reduction: Reduction,
) -> Result<Tensor> {
    let (logits, target) = (&widen(logits)?, widen(target)?);
    let a = logits.abs()?;
    let l = logits
        .mul(&target.rsub_scalar(0.5)?)?
        .add(&a.mul_scalar(0.5)?)?
        .add(&a.neg()?.exp()?.log1p()?)?;
    reduce(l, reduction)
}

/// Fused scaled-dot-product attention (PyTorch's `F.scaled_dot_product_attention` without
/// dropout or an explicit mask): see `Tensor::scaled_dot_product_attention`.
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    q.scaled_dot_product_attention(k, v, causal, scale)
}

/// The same attention composed of matmul and softmax (a reference, and the path that keeps
/// the probabilities): see `Tensor::attention_composite`.
pub fn attention_composite(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    q.attention_composite(k, v, causal, scale)
}
