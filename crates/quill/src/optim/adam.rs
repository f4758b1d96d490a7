//! Adam (L2 weight decay added to the gradient, `torch.optim.Adam`) and AdamW (decoupled
//! weight decay, `torch.optim.AdamW`): one implementation, the variant chosen by a const
//! parameter, with PyTorch's bias correction and order of operations.

use super::kernel;
use super::state::{self, check_non_negative, Common, Kind};
use super::Optimizer;
use crate::tensor::no_grad;
use crate::{NDArray, Tensor};
use quill_core::{Error, Result, Update};

/// `torch.optim.Adam`: weight decay is an L2 term added to the gradient.
pub type Adam = AdamFamily<false>;
/// `torch.optim.AdamW`: weight decay shrinks the parameter directly (default 0.01).
pub type AdamW = AdamFamily<true>;

/// Adam and AdamW (`DECOUPLED`). Per parameter with gradient `g`, at its step `t` (counted
/// per parameter, from 1, only on steps where it has a gradient):
/// ```text
/// p = p * (1 - lr * weight_decay)                (AdamW)
/// g = g + weight_decay * p                       (Adam, if weight_decay != 0)
/// m = lerp(m, g, 1 - beta1)
/// v = beta2 * v + (1 - beta2) * g * g
/// p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
/// Defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0 (Adam) or 0.01 (AdamW).
pub struct AdamFamily<const DECOUPLED: bool> {
    common: Common,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    slots: Vec<Option<Slot>>,
}

/// One parameter's state: its own step count and the two moment estimates.
struct Slot {
    step: u64,
    exp_avg: NDArray,
    exp_avg_sq: NDArray,
}

const KEYS: &[(&str, Kind)] = &[
    ("step", Kind::Count),
    ("exp_avg", Kind::Buffer),
    ("exp_avg_sq", Kind::Buffer),
];

impl Adam {
    /// Adam over `params`. Errors for a negative or non-finite `lr`, a non-float parameter, or
    /// a parameter listed twice.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        AdamFamily::build(params, lr, 0.0)
    }
}

impl AdamW {
    /// AdamW over `params`, weight decay 0.01. Errors as `Adam::new`.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<AdamW> {
        AdamFamily::build(params, lr, 0.01)
    }
}

impl<const DECOUPLED: bool> AdamFamily<DECOUPLED> {
    const NEW: &'static str = if DECOUPLED { "AdamW::new" } else { "Adam::new" };
    const STEP: &'static str = if DECOUPLED {
        "AdamW::step"
    } else {
        "Adam::step"
    };
    const LOAD: &'static str = if DECOUPLED {
        "AdamW::load_state_dict"
    } else {
        "Adam::load_state_dict"
    };

    fn build(params: Vec<Tensor>, lr: f64, weight_decay: f64) -> Result<Self> {
        let n = params.len();
        Ok(AdamFamily {
            common: Common::new(Self::NEW, params, lr)?,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay,
            slots: (0..n).map(|_| None).collect(),
        })
    }

    /// Decay rates of the first and second moment estimates, each in [0, 1).
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Result<Self> {
        crate::check::below_one(Self::NEW, "beta1", beta1)?;
        crate::check::below_one(Self::NEW, "beta2", beta2)?;
        self.betas = (beta1, beta2);
        Ok(self)
    }

    /// Added to the denominator for numerical stability (>= 0).
    pub fn eps(mut self, eps: f64) -> Result<Self> {
        check_non_negative(Self::NEW, "eps", eps)?;
        self.eps = eps;
        Ok(self)
    }

    /// Weight decay (>= 0): an L2 term for Adam, decoupled for AdamW.
    pub fn weight_decay(mut self, weight_decay: f64) -> Result<Self> {
        check_non_negative(Self::NEW, "weight_decay", weight_decay)?;
        self.weight_decay = weight_decay;
        Ok(self)
    }
}

impl<const DECOUPLED: bool> Optimizer for AdamFamily<DECOUPLED> {
    fn step(&mut self) -> Result<()> {
        let _guard = no_grad();
        for (p, slot) in self.common.params.iter().zip(&mut self.slots) {
            let Some(g) = p.grad() else { continue };
            let s = match slot {
                Some(s) => s,
                None => slot.insert(Slot {
                    step: 0,
                    exp_avg: kernel::zeros_for(Self::STEP, p.array())?,
                    exp_avg_sq: kernel::zeros_for(Self::STEP, p.array())?,
                }),
            };
            let rule = Update::Adam {
                lr: self.common.lr,
                betas: self.betas,
                eps: self.eps,
                weight_decay: self.weight_decay,
                decoupled: DECOUPLED,
                step: s.step + 1,
            };
            kernel::apply(
                Self::STEP,
                &rule,
                p.array(),
                g.array(),
                &[&s.exp_avg, &s.exp_avg_sq],
            )?;
            s.step += 1;
        }
        self.common.steps += 1;
        Ok(())
    }

    fn zero_grad(&self) {
        self.common.zero_grad();
    }
    fn lr(&self) -> f64 {
        self.common.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.common.lr = lr;
    }
    fn params(&self) -> &[Tensor] {
        &self.common.params
    }
    fn step_count(&self) -> u64 {
        self.common.steps
    }

    fn state_dict(&self) -> Result<Vec<(String, NDArray)>> {
        let mut out = self.common.header();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(s) = s {
                out.push((format!("state.{i}.step"), NDArray::scalar(s.step as i64)));
                out.push((format!("state.{i}.exp_avg"), s.exp_avg.deep_copy()?));
                out.push((format!("state.{i}.exp_avg_sq"), s.exp_avg_sq.deep_copy()?));
            }
        }
        Ok(out)
    }

    fn load_state_dict(&mut self, entries: &[(String, NDArray)]) -> Result<()> {
        let parsed = state::parse(Self::LOAD, &self.common.params, KEYS, entries)?;
        let mut slots = Vec::with_capacity(parsed.per_param.len());
        for (i, mut s) in parsed.per_param.into_iter().enumerate() {
            let slot = match (s[0].take(), s[1].take(), s[2].take()) {
                (None, None, None) => None,
                (Some(step), Some(exp_avg), Some(exp_avg_sq)) => Some(Slot {
                    step: state::count(Self::LOAD, "step", &step)?,
                    exp_avg,
                    exp_avg_sq,
                }),
                _ => {
                    return Err(Error::invalid(
                        Self::LOAD,
                        format!(
                            "parameter {i} needs all of state.{i}.step, state.{i}.exp_avg and \
                             state.{i}.exp_avg_sq, or none of them"
                        ),
                    ))
                }
            };
            slots.push(slot);
        }
        self.common.steps = parsed.steps;
        if let Some(lr) = parsed.lr {
            self.common.lr = lr;
        }
        self.slots = slots;
        Ok(())
    }
}
