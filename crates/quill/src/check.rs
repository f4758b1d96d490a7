//! Argument checks shared by quill's modules, optimizers and loaders and by the Python face
//! (`quill._native.check_arg`), so that each rule is written once and every refusal names the
//! op, the argument and the value.

use quill_core::{Error, Result};

/// `value` finite and `>= 0` (learning rates, weight decay, momentum; NaN fails).
pub fn non_negative(op: &'static str, name: &str, value: f64) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        format!("{name} must be a finite value >= 0, got {value}"),
    ))
}

/// `value` finite and `> 0` (epsilons, scales).
pub fn positive(op: &'static str, name: &str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        format!("{name} must be a finite value > 0, got {value}"),
    ))
}

/// A probability: `0 <= p <= 1` (dropout rates, BatchNorm momentum).
pub fn probability(op: &'static str, name: &str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        format!("{name} must be a probability in [0, 1], got {p}"),
    ))
}

/// `0 <= value < 1` (Adam's betas: at 1 the bias correction divides by zero).
pub fn below_one(op: &'static str, name: &str, value: f64) -> Result<()> {
    if (0.0..1.0).contains(&value) {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        format!("{name} must be in [0, 1), got {value}"),
    ))
}

/// A count that must be at least 1 (batch sizes, hidden sizes, epochs), given as a signed
/// number so that a negative one from Python or a flag is named rather than wrapped.
pub fn size(op: &'static str, name: &str, n: i128) -> Result<usize> {
    match usize::try_from(n) {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(Error::invalid(
            op,
            format!("{name} must be an integer >= 1, got {n}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_at_its_bounds() {
        for v in [0.0, 1e-300, 3.0] {
            assert!(non_negative("op", "lr", v).is_ok());
        }
        for v in [-1e-300, f64::NAN, f64::INFINITY, -1.0] {
            let e = non_negative("op", "lr", v).unwrap_err().to_string();
            assert!(
                e.starts_with("op: lr must be") && e.contains(&v.to_string()),
                "{e}"
            );
        }
        assert!(positive("op", "eps", 0.0).is_err());
        assert!(positive("op", "eps", f64::MIN_POSITIVE).is_ok());
        for p in [0.0, 0.5, 1.0] {
            assert!(probability("Dropout", "p", p).is_ok());
        }
        for p in [-0.0001, 1.0001, f64::NAN, 1.5, -1.0] {
            assert!(probability("Dropout", "p", p).is_err(), "{p}");
        }
        assert!(below_one("Adam", "beta1", 0.999).is_ok());
        assert!(below_one("Adam", "beta1", 1.0).is_err());
        assert_eq!(size("DataLoader", "batch_size", 1).unwrap(), 1);
        for n in [0, -1, i128::from(i64::MIN), i128::MAX] {
            let e = size("DataLoader", "batch_size", n).unwrap_err().to_string();
            assert!(e.contains("batch_size must be an integer >= 1") && e.contains(&n.to_string()));
        }
    }
}
