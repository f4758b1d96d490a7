//! What every optimizer shares: its parameter list, learning rate and step count, the checks
//! on constructor arguments, and the flat state-dict format (`"step"`, `"lr"`,
//! `"state.{param index}.{name}"`) with its validation on load.

use super::kernel;
use crate::{NDArray, Tensor};
use quill_core::{DType, Error, Result};

/// The parameters, learning rate and number of `step()` calls of one optimizer.
pub(crate) struct Common {
    pub params: Vec<Tensor>,
    pub lr: f64,
    pub steps: u64,
}

impl Common {
    /// Checks the parameters (floating point, each listed once) and the learning rate.
    pub fn new(op: &'static str, params: Vec<Tensor>, lr: f64) -> Result<Common> {
        check_non_negative(op, "lr", lr)?;
        for (i, p) in params.iter().enumerate() {
            kernel::compute_dtype(op, p.dtype())?;
            // The same tensor twice would be updated twice per step.
            if params[..i].iter().any(|q| q.same_node(p)) {
                return Err(Error::invalid(
                    op,
                    format!("parameter {i} appears more than once in the parameter list"),
                ));
            }
        }
        Ok(Common {
            params,
            lr,
            steps: 0,
        })
    }

    pub fn zero_grad(&self) {
        for p in &self.params {
            p.zero_grad();
        }
    }

    /// The `"step"` and `"lr"` entries.
    pub fn header(&self) -> Vec<(String, NDArray)> {
        vec![
            ("step".into(), NDArray::scalar(self.steps as i64)),
            ("lr".into(), NDArray::scalar(self.lr)),
        ]
    }
}

pub(crate) use crate::check::non_negative as check_non_negative;

/// What a per-parameter state entry holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An array of the parameter's shape.
    Buffer,
    /// A step count (one element, a whole number >= 0).
    Count,
}

/// A validated state dict: the global step count, the learning rate if given, and for each
/// parameter one slot per key of the optimizer (buffers copied into the parameter's compute
/// dtype, counts as one-element arrays).
pub(crate) struct Parsed {
    pub steps: u64,
    pub lr: Option<f64>,
    pub per_param: Vec<Vec<Option<NDArray>>>,
}

/// Validates `entries` against the parameters and the optimizer's per-parameter `keys`; nothing
/// is changed by the caller unless this succeeds. Unknown or repeated names, parameter indices
/// out of range, wrong shapes and non-float buffers are errors.
pub(crate) fn parse(
    op: &'static str,
    params: &[Tensor],
    keys: &[(&str, Kind)],
    entries: &[(String, NDArray)],
) -> Result<Parsed> {
    let mut steps = None;
    let mut lr = None;
    let mut per_param = vec![vec![None; keys.len()]; params.len()];
    for (name, arr) in entries {
        let repeated = || Error::invalid(op, format!("state entry {name:?} appears twice"));
        match name.as_str() {
            "step" => {
                if steps.replace(count(op, name, arr)?).is_some() {
                    return Err(repeated());
                }
            }
            "lr" => {
                let v = one_value(op, name, arr)?;
                check_non_negative(op, "lr", v)?;
                if lr.replace(v).is_some() {
                    return Err(repeated());
                }
            }
            _ => {
                let (i, k) = param_key(op, name, params.len(), keys)?;
                let value = match keys[k].1 {
                    Kind::Count => NDArray::scalar(count(op, name, arr)? as i64),
                    Kind::Buffer => {
                        let p = params[i].array();
                        if arr.shape() != p.shape() {
                            return Err(Error::ShapeMismatch {
                                op,
                                lhs: p.shape().into(),
                                rhs: arr.shape().into(),
                                hint: format!(" (parameter {i} vs state entry {name:?})"),
                            });
                        }
                        if !arr.dtype().is_float() {
                            return Err(Error::invalid(
                                op,
                                format!(
                                    "state entry {name:?} must be floating point, got {}",
                                    arr.dtype()
                                ),
                            ));
                        }
                        kernel::copy_for(op, p, arr)?
                    }
                };
                if per_param[i][k].replace(value).is_some() {
                    return Err(repeated());
                }
            }
        }
    }
    Ok(Parsed {
        steps: steps.unwrap_or(0),
        lr,
        per_param,
    })
}

/// `"state.{i}.{key}"` -> (i, index of key), checked.
fn param_key(
    op: &'static str,
    name: &str,
    n_params: usize,
    keys: &[(&str, Kind)],
) -> Result<(usize, usize)> {
    let known = keys.iter().map(|k| k.0).collect::<Vec<_>>().join(", ");
    let bad = || {
        Error::invalid(
            op,
            format!(
                "unknown state entry {name:?}; expected \"step\", \"lr\" or \
                 \"state.<param index>.<name>\" with name one of: {known}"
            ),
        )
    };
    let rest = name.strip_prefix("state.").ok_or_else(bad)?;
    let (index, key) = rest.split_once('.').ok_or_else(bad)?;
    let i: usize = index.parse().map_err(|_| bad())?;
    if i >= n_params {
        return Err(Error::invalid(
            op,
            format!("state entry {name:?} names parameter {i}, but there are {n_params}"),
        ));
    }
    let k = keys.iter().position(|k| k.0 == key).ok_or_else(bad)?;
    Ok((i, k))
}

fn one_value(op: &'static str, name: &str, arr: &NDArray) -> Result<f64> {
    if arr.numel() != 1 {
        return Err(Error::invalid(
            op,
            format!(
                "state entry {name:?} must hold one value, got shape {:?}",
                arr.shape()
            ),
        ));
    }
    arr.item::<f64>()
}

/// A step count: one element holding a whole number >= 0 (i64 or float).
pub(crate) fn count(op: &'static str, name: &str, arr: &NDArray) -> Result<u64> {
    if arr.dtype() == DType::I64 && arr.numel() == 1 {
        let v = arr.item::<i64>()?;
        return u64::try_from(v)
            .map_err(|_| Error::invalid(op, format!("state entry {name:?} is negative: {v}")));
    }
    let v = one_value(op, name, arr)?;
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(63) {
        Ok(v as u64)
    } else {
        Err(Error::invalid(
            op,
            format!("state entry {name:?} must be a whole number >= 0, got {v}"),
        ))
    }
}
