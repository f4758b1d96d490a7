//! Optimizers, learning-rate schedules and gradient clipping (being built).
