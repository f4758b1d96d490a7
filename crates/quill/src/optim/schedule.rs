//! Learning-rate schedules as closed forms of the step (or epoch) number, and the helper that
//! sets an optimizer's rate from one. Closed forms, rather than PyTorch's step-by-step
//! recurrences, so a resumed run gets the same rate from the step count alone.

use super::state::check_non_negative;
use super::Optimizer;
use quill_core::{Error, Result};
use std::f64::consts::PI;
use std::fmt;

/// A learning rate for every step (or epoch) `t` = 0, 1, 2, ...
pub trait LrSchedule: fmt::Debug {
    /// The rate for step `t`, from `t` alone (no hidden state), so a resumed run can ask for
    /// any step directly.
    fn lr_at(&self, t: usize) -> f64;
}

/// Sets `opt`'s learning rate to `schedule.lr_at(t)` and returns it.
pub fn apply_schedule(opt: &mut dyn Optimizer, schedule: &dyn LrSchedule, t: usize) -> f64 {
    let lr = schedule.lr_at(t);
    opt.set_lr(lr);
    lr
}

/// The same rate at every step.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstantLr {
    lr: f64,
}

impl ConstantLr {
    /// Errors for a negative or non-finite `lr`.
    pub fn new(lr: f64) -> Result<ConstantLr> {
        check_non_negative("ConstantLr::new", "lr", lr)?;
        Ok(ConstantLr { lr })
    }
}

impl LrSchedule for ConstantLr {
    fn lr_at(&self, _t: usize) -> f64 {
        self.lr
    }
}

/// PyTorch `StepLR`: `base_lr * gamma^floor(t / step_size)`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLr {
    base_lr: f64,
    step_size: usize,
    gamma: f64,
}

impl StepLr {
    /// Errors for `step_size == 0` or a negative / non-finite `base_lr` or `gamma`.
    pub fn new(base_lr: f64, step_size: usize, gamma: f64) -> Result<StepLr> {
        const OP: &str = "StepLr::new";
        check_non_negative(OP, "base_lr", base_lr)?;
        check_non_negative(OP, "gamma", gamma)?;
        if step_size == 0 {
            return Err(Error::invalid(OP, "step_size must be >= 1, got 0"));
        }
        Ok(StepLr {
            base_lr,
            step_size,
            gamma,
        })
    }
}

impl LrSchedule for StepLr {
    fn lr_at(&self, t: usize) -> f64 {
        self.base_lr * self.gamma.powf((t / self.step_size) as f64)
    }
}

/// PyTorch `CosineAnnealingLR` in its closed form:
/// `eta_min + (base_lr - eta_min) * (1 + cos(pi * t / t_max)) / 2`. As that formula, it is
/// periodic: past `t_max` the rate climbs back towards `base_lr` (period `2 * t_max`).
#[derive(Debug, Clone, PartialEq)]
pub struct CosineLr {
    base_lr: f64,
    t_max: usize,
    eta_min: f64,
}

impl CosineLr {
    /// Errors for `t_max == 0` or a negative / non-finite `base_lr` or `eta_min`.
    pub fn new(base_lr: f64, t_max: usize, eta_min: f64) -> Result<CosineLr> {
        const OP: &str = "CosineLr::new";
        check_non_negative(OP, "base_lr", base_lr)?;
        check_non_negative(OP, "eta_min", eta_min)?;
        if t_max == 0 {
            return Err(Error::invalid(OP, "t_max must be >= 1, got 0"));
        }
        Ok(CosineLr {
            base_lr,
            t_max,
            eta_min,
        })
    }
}

impl LrSchedule for CosineLr {
    fn lr_at(&self, t: usize) -> f64 {
        let phase = PI * t as f64 / self.t_max as f64;
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + phase.cos()) / 2.0
    }
}

/// A linear ramp over the first `warmup_steps` steps, then `then` restarted at 0:
/// `lr_at(t) = then.lr_at(0) * (t + 1) / warmup_steps` for `t < warmup_steps`, else
/// `then.lr_at(t - warmup_steps)`. The ramp starts above zero so no step is wasted, and its
/// last step reaches the full rate.
#[derive(Debug)]
pub struct LinearWarmup {
    warmup_steps: usize,
    then: Box<dyn LrSchedule>,
}

impl LinearWarmup {
    /// Warms up over `warmup_steps` steps into `then`; with 0 it is `then` unchanged.
    pub fn new(warmup_steps: usize, then: Box<dyn LrSchedule>) -> LinearWarmup {
        LinearWarmup { warmup_steps, then }
    }
}

impl LrSchedule for LinearWarmup {
    fn lr_at(&self, t: usize) -> f64 {
        if t < self.warmup_steps {
            self.then.lr_at(0) * (t + 1) as f64 / self.warmup_steps as f64
        } else {
            self.then.lr_at(t - self.warmup_steps)
        }
    }
}
