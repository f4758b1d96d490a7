//! Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight
//! decay: PyTorch's `torch.optim.SGD` algorithm, step for step.

use super::kernel;
use super::state::{self, check_non_negative, Common, Kind};
use super::Optimizer;
use crate::tensor::no_grad;
use crate::{NDArray, Tensor};
use quill_core::{Error, Result, Update};

/// `torch.optim.SGD`. Per parameter with a gradient `g`:
/// ```text
/// g = g + weight_decay * p                       (if weight_decay != 0)
/// b = g (first step) | momentum * b + (1 - dampening) * g
/// d = g + momentum * b (nesterov) | b            (if momentum != 0, else d = g)
/// p = p - lr * d
/// ```
/// Every value of this type is valid: each builder method checks the combination so far, so
/// set `momentum` before `nesterov(true)`.
///
/// needle's SGD (`u = m * u + (1 - m) * g` from `u = 0`) is `dampening(m)` with
/// `zero_init_buffer(true)`: the first step then damps the gradient too.
pub struct Sgd {
    common: Common,
    momentum: f64,
    dampening: f64,
    nesterov: bool,
    weight_decay: f64,
    zero_init: bool,
    buffers: Vec<Option<NDArray>>,
}

const NEW: &str = "Sgd::new";
const STEP: &str = "Sgd::step";
const LOAD: &str = "Sgd::load_state_dict";
const KEYS: &[(&str, Kind)] = &[("momentum_buffer", Kind::Buffer)];

impl Sgd {
    /// Plain SGD over `params` (no momentum, no weight decay). Errors for a negative or
    /// non-finite `lr`, a non-float parameter, or a parameter listed twice.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Sgd> {
        let n = params.len();
        Ok(Sgd {
            common: Common::new(NEW, params, lr)?,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
            zero_init: false,
            buffers: vec![None; n],
        })
    }

    /// Momentum factor (>= 0; default 0).
    pub fn momentum(mut self, momentum: f64) -> Result<Sgd> {
        check_non_negative(NEW, "momentum", momentum)?;
        self.momentum = momentum;
        self.check_nesterov()
    }

    /// Dampening of the gradient added to the momentum buffer (>= 0; default 0). The first
    /// step puts the gradient in the buffer undamped, as PyTorch does.
    pub fn dampening(mut self, dampening: f64) -> Result<Sgd> {
        check_non_negative(NEW, "dampening", dampening)?;
        self.dampening = dampening;
        self.check_nesterov()
    }

    /// Nesterov momentum; needs momentum > 0 and zero dampening.
    pub fn nesterov(mut self, nesterov: bool) -> Result<Sgd> {
        self.nesterov = nesterov;
        self.check_nesterov()
    }

    /// Start the momentum buffer at zero and apply the usual rule on the first step too
    /// (needle's SGD), instead of putting the first gradient in undamped (PyTorch's, the
    /// default).
    pub fn zero_init_buffer(mut self, zero_init: bool) -> Sgd {
        self.zero_init = zero_init;
        self
    }

    /// L2 penalty added to the gradient (>= 0; default 0).
    pub fn weight_decay(mut self, weight_decay: f64) -> Result<Sgd> {
        check_non_negative(NEW, "weight_decay", weight_decay)?;
        self.weight_decay = weight_decay;
        Ok(self)
    }

    fn check_nesterov(self) -> Result<Sgd> {
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(Error::invalid(
                NEW,
                format!(
                    "nesterov momentum requires momentum > 0 and zero dampening (set momentum \
                     before nesterov), got momentum {} and dampening {}",
                    self.momentum, self.dampening
                ),
            ));
        }
        Ok(self)
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) -> Result<()> {
        let _guard = no_grad();
        for (p, buf) in self.common.params.iter().zip(&mut self.buffers) {
            let Some(g) = p.grad() else { continue };
            let rule = |first| Update::Sgd {
                lr: self.common.lr,
                weight_decay: self.weight_decay,
                momentum: self.momentum,
                dampening: self.dampening,
                nesterov: self.nesterov,
                first,
            };
            if self.momentum == 0.0 {
                kernel::apply(STEP, &rule(false), p.array(), g.array(), &[])?;
                continue;
            }
            // A zero-initialised buffer (needle's rule) takes the general update from the start.
            let first = buf.is_none() && !self.zero_init;
            let b = match buf {
                Some(b) => b,
                None => buf.insert(kernel::zeros_for(STEP, p.array())?),
            };
            kernel::apply(STEP, &rule(first), p.array(), g.array(), &[b])?;
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
        for (i, b) in self.buffers.iter().enumerate() {
            if let Some(b) = b {
                out.push((format!("state.{i}.momentum_buffer"), b.deep_copy()?));
            }
        }
        Ok(out)
    }

    fn load_state_dict(&mut self, entries: &[(String, NDArray)]) -> Result<()> {
        let parsed = state::parse(LOAD, &self.common.params, KEYS, entries)?;
        self.common.steps = parsed.steps;
        if let Some(lr) = parsed.lr {
            self.common.lr = lr;
        }
        self.buffers = parsed
            .per_param
            .into_iter()
            .map(|mut slots| slots[0].take())
            .collect();
        Ok(())
    }
}
