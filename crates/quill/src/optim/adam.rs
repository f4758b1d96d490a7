//! Adam (L2 weight decay added to the gradient, `torch.optim.Adam`) and AdamW (decoupled
//! weight decay, `torch.optim.AdamW`): one implementation, the variant chosen by a const
//! parameter, with PyTorch's bias correction and order of operations.

use super::kernel::{self, Float, Rule};
use super::state::{self, check_non_negative, Common, Kind};
use super::Optimizer;
use crate::tensor::no_grad;
use crate::{NDArray, Tensor};
use quill_core::{Error, Result};

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
        for (name, b) in [("beta1", beta1), ("beta2", beta2)] {
            if !(0.0..1.0).contains(&b) {
                return Err(Error::invalid(
                    Self::NEW,
                    format!("{name} must be in [0, 1), got {b}"),
                ));
            }
        }
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

/// The per-element update of one parameter at its step `step` (already incremented).
struct AdamRule {
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    decoupled: bool,
    step: u64,
}

/// PyTorch's `lerp`: the two forms keep the result exact at weight 0 and 1 respectively.
#[inline]
fn lerp<T: Float>(a: T, b: T, w: T, small: bool, one: T) -> T {
    if small {
        a + w * (b - a)
    } else {
        b - (b - a) * (one - w)
    }
}

impl Rule for AdamRule {
    #[inline(always)]
    fn run<T: Float>(&self, p: &mut [T], g: &[T], state: &mut [&mut [T]]) {
        let [m, v] = state else { return };
        let (b1, b2) = self.betas;
        // Scalars as PyTorch computes them: in f64, then converted to the param's dtype.
        let t = self.step as f64;
        let bias_correction1 = 1.0 - b1.powf(t);
        let bias_correction2 = 1.0 - b2.powf(t);
        let neg_step_size = T::from_f64(-(self.lr / bias_correction1));
        let bc2_sqrt = T::from_f64(bias_correction2.sqrt());
        let w1 = 1.0 - b1;
        let (small, w1t, one) = (w1.abs() < 0.5, T::from_f64(w1), T::from_f64(1.0));
        let (b2t, w2t) = (T::from_f64(b2), T::from_f64(1.0 - b2));
        let eps = T::from_f64(self.eps);
        let has_wd = self.weight_decay != 0.0;
        let decay = T::from_f64(1.0 - self.lr * self.weight_decay);
        let l2 = T::from_f64(self.weight_decay);
        let (decoupled, coupled) = (self.decoupled && has_wd, !self.decoupled && has_wd);
        for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
            let mut pv = *p;
            let g = if coupled { g + l2 * pv } else { g };
            if decoupled {
                pv = pv * decay;
            }
            *m = lerp(*m, g, w1t, small, one);
            *v = *v * b2t + w2t * g * g;
            let denom = v.sqrt() / bc2_sqrt + eps;
            *p = pv + neg_step_size * *m / denom;
        }
    }

    #[cfg(feature = "cuda")]
    fn run_cuda(
        &self,
        p: &mut quill_cuda::CudaStorage,
        g: &quill_cuda::CudaStorage,
        state: &mut [&mut quill_cuda::CudaStorage],
        n: usize,
    ) -> Option<Result<()>> {
        let [m, v] = state else { return None };
        // The scalars `run` derives, in the same f64 arithmetic.
        let (b1, b2) = self.betas;
        let t = self.step as f64;
        let has_wd = self.weight_decay != 0.0;
        let s = quill_cuda::ops::AdamScalars {
            neg_step: -(self.lr / (1.0 - b1.powf(t))),
            bc2_sqrt: (1.0 - b2.powf(t)).sqrt(),
            w1: 1.0 - b1,
            small: (1.0 - b1).abs() < 0.5,
            b2,
            w2: 1.0 - b2,
            eps: self.eps,
            decay: 1.0 - self.lr * self.weight_decay,
            l2: self.weight_decay,
            decoupled: self.decoupled && has_wd,
            coupled: !self.decoupled && has_wd,
        };
        Some(quill_cuda::ops::adam_step(p, g, m, v, n, s))
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
            let rule = AdamRule {
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

    fn state_dict(&self) -> Vec<(String, NDArray)> {
        let mut out = self.common.header();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(s) = s {
                out.push((format!("state.{i}.step"), NDArray::scalar(s.step as i64)));
                out.push((format!("state.{i}.exp_avg"), s.exp_avg.deep_copy()));
                out.push((format!("state.{i}.exp_avg_sq"), s.exp_avg_sq.deep_copy()));
            }
        }
        out
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
