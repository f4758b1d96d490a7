//! Host round trips: each time a GPU backend has no kernel for an op (it answers
//! `Error::Unsupported`) and `backend.rs` runs the op on host copies of the operands instead
//! (GPU -> host -> CPU kernel -> GPU). Counted per op, like the allocator's statistics, so a
//! training job can say how often it left the device; with `QUILL_WARN_HOST_FALLBACK` set (to
//! anything but `0`), the first trip of each op prints one line on stderr naming the op and
//! what the backend lacked.

use std::sync::Mutex;

/// (op, round trips) in first-seen order. Ops are few (tens), so a list beats a map.
static TRIPS: Mutex<Vec<(&'static str, u64)>> = Mutex::new(Vec::new());

/// Notes one round trip of `op`; `why` is the backend's reason, shown by the warning.
pub(crate) fn note(op: &'static str, why: &dyn std::fmt::Display) {
    let first = {
        let mut trips = TRIPS.lock().unwrap_or_else(|e| e.into_inner());
        match trips.iter_mut().find(|(name, _)| *name == op) {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                trips.push((op, 1));
                true
            }
        }
    };
    if first && warn_enabled() {
        eprintln!(
            "quill: {why}; running {op} on the host (its operands are copied to the host and \
             the result back), counted in host_round_trips()"
        );
    }
}

/// Notes a round trip of `op` when `device` is not the host: for the ops whose GPU path is,
/// by design, the host one (no backend method; the op copies its operands down itself).
pub(crate) fn note_off_host(op: &'static str, device: crate::Device) {
    if device != crate::Device::Cpu {
        note(op, &format_args!("{op}: no {device} kernel"));
    }
}

fn warn_enabled() -> bool {
    std::env::var_os("QUILL_WARN_HOST_FALLBACK").is_some_and(|v| v != "0" && !v.is_empty())
}

/// How many times each op has run on the host because its GPU backend had no kernel for it,
/// since the start or the last `reset_host_round_trips`: `(op, count)` in the order first
/// seen. Empty on a CPU-only run, and the goal on a GPU.
pub fn host_round_trips() -> Vec<(&'static str, u64)> {
    TRIPS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Sets every count of `host_round_trips` back to zero (forgets the ops).
pub fn reset_host_round_trips() {
    TRIPS.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_op_in_first_seen_order_and_resets() {
        reset_host_round_trips();
        note("conv2d", &"no kernel");
        note("sort", &"no kernel");
        note("conv2d", &"no kernel");
        assert_eq!(host_round_trips(), vec![("conv2d", 2), ("sort", 1)]);
        reset_host_round_trips();
        assert!(host_round_trips().is_empty());
    }
}
