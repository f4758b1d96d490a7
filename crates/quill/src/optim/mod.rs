//! Optimizers (SGD, Adam, AdamW), learning-rate schedules and gradient clipping. An optimizer
//! holds the parameter tensors of a model and, on `step()`, updates each one that has a
//! gradient in place, through the NDArray buffer it shares with the model, in one fused pass
//! over contiguous buffers that records no graph. State (momentum buffers, moments, step
//! counts) round-trips through a flat `state_dict` of named arrays so training can resume.

mod adam;
mod clip;
mod kernel;
mod schedule;
mod sgd;
mod state;

pub use adam::{Adam, AdamFamily, AdamW};
pub use clip::clip_grad_norm;
pub use schedule::{apply_schedule, ConstantLr, CosineLr, LinearWarmup, LrSchedule, StepLr};
pub use sgd::Sgd;

use crate::{NDArray, Tensor};
use quill_core::Result;

/// What every optimizer does. Object safe, so a trainer can hold a `Box<dyn Optimizer>`.
pub trait Optimizer {
    /// Updates every parameter that has a gradient (parameters without one are skipped and
    /// their state is left as it is). An error part way leaves the earlier parameters updated.
    fn step(&mut self) -> Result<()>;
    /// Drops every parameter's gradient (PyTorch's `set_to_none=True`).
    fn zero_grad(&self);
    /// The learning rate the next `step()` will use (as last set by a schedule or `set_lr`).
    fn lr(&self) -> f64;
    /// Sets the learning rate used from the next `step()` on (schedules call this).
    fn set_lr(&mut self, lr: f64);
    /// The parameters, in the order given to the constructor (state indices refer to it).
    fn params(&self) -> &[Tensor];
    /// The number of `step()` calls so far (restored by `load_state_dict`).
    fn step_count(&self) -> u64;
    /// A snapshot of the state: `"step"` (i64, 0-d), `"lr"` (f64, 0-d) and per parameter
    /// `"state.{index}.{name}"`: `momentum_buffer` for SGD; `step` (i64, 0-d), `exp_avg` and
    /// `exp_avg_sq` for Adam / AdamW. Parameters that have no state yet have no entries. The
    /// buffers are copies (later steps do not change them), hence the `Result`: a copy may not fit.
    fn state_dict(&self) -> Result<Vec<(String, NDArray)>>;
    /// Replaces the state with `state` (missing `"step"` means 0, missing `"lr"` keeps the
    /// current rate; parameters without entries start fresh). Arrays are copied, converted to
    /// the parameter's compute dtype. Unknown or repeated names, indices out of range, and
    /// wrong shapes are errors, and then nothing changes.
    fn load_state_dict(&mut self, state: &[(String, NDArray)]) -> Result<()>;
}
