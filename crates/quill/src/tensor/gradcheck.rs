//! `gradcheck`: compares the gradients backward computes with central differences in f64 (and
//! complex128: the real and imaginary directions of each element), element by element, and
//! reports the worst disagreement.

use super::{graph, no_grad, BackwardOptions, Tensor};
use crate::NDArray;
use quill_core::runs::unravel;
use quill_core::{DType, Error, Result, Scalar, SliceArg, C128};
use std::fmt;

/// Step and tolerances: an element passes when `|analytic - numeric| <= atol + rtol * |numeric|`.
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOptions {
    /// Half-width of the central difference `(f(x + eps) - f(x - eps)) / (2 eps)`; 1e-6 suits
    /// f64 (smaller loses digits to cancellation, larger to curvature).
    pub eps: f64,
    /// Absolute tolerance, which decides for gradients near zero; 1e-5.
    pub atol: f64,
    /// Tolerance relative to the numeric gradient, which decides for large ones; 1e-3.
    pub rtol: f64,
    /// Seed of the random weights that project a non-scalar output to a scalar.
    pub seed: u64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions {
            eps: 1e-6,
            atol: 1e-5,
            rtol: 1e-3,
            seed: 0,
        }
    }
}

/// The outcome: whether every element passed, and the worst one.
#[derive(Clone, Debug)]
pub struct GradcheckReport {
    /// Whether every checked element was within tolerance (two NaNs agree; one does not).
    pub passed: bool,
    /// Number of elements compared, over all inputs that require grad.
    pub checked: usize,
    /// The input holding the worst element (the one with the largest `excess`), as a position
    /// in `inputs`, counting the inputs that do not require grad too.
    pub worst_input: usize,
    /// The worst element's multi-index within `inputs[worst_input]`.
    pub worst_index: Vec<usize>,
    /// The gradient backward computed at the worst element.
    pub analytic: f64,
    /// The central-difference estimate at the worst element.
    pub numeric: f64,
    /// `|analytic - numeric| - (atol + rtol * |numeric|)`: > 0 fails.
    pub excess: f64,
}

impl GradcheckReport {
    /// `Ok` when passed, else an error carrying the report.
    pub fn check(&self) -> Result<()> {
        if self.passed {
            Ok(())
        } else {
            Err(Error::InvalidArgument {
                op: "gradcheck",
                msg: self.to_string(),
            })
        }
    }
}

impl fmt::Display for GradcheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} elements); worst: input {} at {:?}: analytic {:e}, numeric {:e}, |diff| {:e}",
            if self.passed { "passed" } else { "FAILED" },
            self.checked,
            self.worst_input,
            self.worst_index,
            self.analytic,
            self.numeric,
            (self.analytic - self.numeric).abs()
        )
    }
}

/// Checks the gradients of `f` at `inputs` (f64 or complex128 tensors; those that require grad
/// are checked). A non-scalar output is projected to a scalar with fixed random weights (complex
/// ones, keeping the real part, for a complex output); a complex input is checked in both
/// directions: its gradient's real part against d/dx and its imaginary part against d/dy
/// (PyTorch's convention). Inputs
/// may be any views; an element is perturbed in place through the view and restored.
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    opts: GradcheckOptions,
) -> Result<GradcheckReport> {
    const OP: &str = "gradcheck";
    for (i, x) in inputs.iter().enumerate() {
        if x.requires_grad() && !matches!(x.dtype(), DType::F64 | DType::C128) {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "input {i} is {}: central differences need f64 or complex128 inputs; cast \
                     with astype",
                    x.dtype()
                ),
            });
        }
        if x.array()
            .strides()
            .iter()
            .zip(x.shape())
            .any(|(&s, &d)| s == 0 && d > 1)
        {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "input {i} is a broadcast view (stride 0): one write would perturb several \
                     elements; compact() it first"
                ),
            });
        }
    }
    let out = f(inputs)?;
    let w = Tensor::new(NDArray::randn(out.shape(), opts.seed, DType::F64)?);
    // A complex output is projected with complex weights: L = Re(sum(y conj(w))), real, so
    // that backward gives dL/dx + i dL/dy for each complex input (PyTorch's convention).
    let wc = if out.dtype().is_complex() {
        let im = NDArray::randn(out.shape(), opts.seed.wrapping_add(1), DType::F64)?;
        Some(Tensor::new(NDArray::complex(w.array(), &im)?.conj()?))
    } else {
        None
    };
    let project = |y: &Tensor| -> Result<Tensor> {
        match &wc {
            Some(wc) => y.astype(DType::C128)?.mul(wc)?.real()?.sum(None, false),
            None => y.astype(DType::F64)?.mul(&w)?.sum(None, false),
        }
    };
    let loss = project(&out)?;
    let wanted: Vec<Tensor> = inputs
        .iter()
        .filter(|x| x.requires_grad())
        .cloned()
        .collect();
    if wanted.is_empty() {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: "no input requires grad".into(),
        });
    }
    let analytic = if loss.requires_grad() {
        graph::grad(&loss, &wanted, None, BackwardOptions::default())?
    } else {
        wanted
            .iter()
            .map(|x| x.zeros_like())
            .collect::<Result<_>>()?
    };
    let _g = no_grad();
    let mut rep = GradcheckReport {
        passed: true,
        checked: 0,
        worst_input: 0,
        worst_index: vec![],
        analytic: 0.0,
        numeric: 0.0,
        excess: f64::NEG_INFINITY,
    };
    let mut k = 0;
    for (i, x) in inputs.iter().enumerate() {
        if !x.requires_grad() {
            continue;
        }
        let complex = x.dtype().is_complex();
        // (d/dx, d/dy) of each element: the real and imaginary parts of a complex gradient.
        let an: Vec<(f64, f64)> = if complex {
            analytic[k]
                .astype(DType::C128)?
                .array()
                .compact()?
                .to_vec::<C128>()?
                .into_iter()
                .map(|z| (z.re, z.im))
                .collect()
        } else {
            analytic[k]
                .astype(DType::F64)?
                .array()
                .compact()?
                .to_vec::<f64>()?
                .into_iter()
                .map(|a| (a, 0.0))
                .collect()
        };
        k += 1;
        for (flat, &(a_re, a_im)) in an.iter().enumerate() {
            let idx = unravel(x.shape(), flat);
            let at: Vec<SliceArg> = idx.iter().map(|&j| SliceArg::Index(j as isize)).collect();
            let v0 = if complex {
                x.array().slice(&at)?.item::<C128>()?
            } else {
                C128::new(x.array().slice(&at)?.item::<f64>()?, 0.0)
            };
            let put = |v: C128| -> Result<()> {
                if complex {
                    x.array().set_scalar(&at, Scalar::C(v.re, v.im))
                } else {
                    x.array().set_scalar(&at, v.re)
                }
            };
            let eval = |v: C128| -> Result<f64> {
                put(v)?;
                project(&f(inputs)?)?.item()
            };
            let parts: &[(f64, C128)] = if complex {
                &[(a_re, C128::new(1.0, 0.0)), (a_im, C128::new(0.0, 1.0))]
            } else {
                &[(a_re, C128::new(1.0, 0.0))]
            };
            for &(a, dir) in parts {
                let hi = eval(v0 + dir * opts.eps);
                let lo = eval(v0 - dir * opts.eps);
                put(v0)?;
                let num = (hi? - lo?) / (2.0 * opts.eps);
                let excess = (a - num).abs() - (opts.atol + opts.rtol * num.abs());
                // A NaN on either side fails unless both are NaN.
                let excess = if a.is_nan() != num.is_nan() {
                    f64::INFINITY
                } else {
                    excess
                };
                rep.checked += 1;
                if excess > rep.excess || rep.checked == 1 {
                    rep.excess = excess;
                    rep.worst_input = i;
                    rep.worst_index = idx.clone();
                    rep.analytic = a;
                    rep.numeric = num;
                }
            }
        }
    }
    // NaN excess: both sides NaN, which agree.
    rep.passed = rep.excess.is_nan() || rep.excess <= 0.0;
    Ok(rep)
}
