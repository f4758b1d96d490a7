//! The per-thread grad mode: whether ops record the graph. `no_grad()` turns recording off
//! until its guard drops (evaluation, optimiser steps); backward passes set it from
//! `create_graph`.

use std::cell::Cell;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True when ops on this thread record the graph.
pub fn is_grad_enabled() -> bool {
    ENABLED.with(|e| e.get())
}

/// Restores the previous grad mode when dropped.
#[must_use = "the mode reverts when the guard drops"]
pub struct GradModeGuard {
    prev: bool,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        ENABLED.with(|e| e.set(self.prev));
    }
}

/// Sets the grad mode of this thread until the returned guard drops.
pub fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let prev = ENABLED.with(|e| e.replace(enabled));
    GradModeGuard { prev }
}

/// Stops recording on this thread until the returned guard drops:
/// `let _g = no_grad();` (note: `let _ = no_grad();` drops it at once).
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}
