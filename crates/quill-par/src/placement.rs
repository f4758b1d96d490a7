//! Where a fork-join helper (a GEMM's, say) runs, when `QUILL_PIN_THREADS=1` asks for it (off
//! by default: a library does not move its caller's threads unasked). A pool thread woken for
//! a fork-join region can be queued on the core of the thread that woke it, which goes on
//! running its own parts: the helper then waits out the caller's time slice, or shares its
//! core, and the product runs at one thread's speed. That was seen on a 2-vCPU VM, in streaks
//! after idle (docs/perf-log/2026-11-30.md). With the switch on, a helper that finds itself on
//! the caller's core steps aside: it narrows its own affinity to exclude that core, which makes
//! the kernel migrate it at once, then restores the mask it had, so it stays free to run
//! anywhere afterwards. Linux only; elsewhere nothing moves.

use std::sync::OnceLock;

/// Whether `QUILL_PIN_THREADS` asks for helper placement (read once per process).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| switch_on(std::env::var("QUILL_PIN_THREADS").ok().as_deref()))
}

/// `1`, `true`, `yes` or `on` (any case) turn the switch on; anything else, or nothing, leaves
/// it off.
fn switch_on(v: Option<&str>) -> bool {
    v.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// The core this thread runs on now, or `None` where that is unknown.
pub(crate) fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
        let c = unsafe { libc::sched_getcpu() };
        usize::try_from(c).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Moves this thread off core `cpu` if it runs there and may run elsewhere; its affinity mask
/// is the same afterwards. Returns whether it moved. Any failure leaves the thread where it is.
pub(crate) fn step_aside(cpu: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        if current_cpu() != Some(cpu) || cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: cpu_set_t is a plain bit array, for which all zeroes is a valid value.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `mask` is a live cpu_set_t and `size` is its size, so the kernel writes
        // within it; pid 0 is the calling thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut mask) } != 0 {
            return false;
        }
        let mut away = mask;
        // SAFETY: `cpu < CPU_SETSIZE` was checked above, so CPU_ISSET and CPU_CLR index within
        // the set (libc checks the index too); CPU_COUNT reads the whole set and nothing past.
        unsafe {
            if !libc::CPU_ISSET(cpu, &mask) || libc::CPU_COUNT(&mask) < 2 {
                return false;
            }
            libc::CPU_CLR(cpu, &mut away);
        }
        // SAFETY: as above, both sets are live cpu_set_t values of `size` bytes, read only.
        unsafe {
            if libc::sched_setaffinity(0, size, &away) != 0 {
                return false;
            }
            // Restoring does not move a thread already on an allowed core; should it fail, the
            // thread keeps the narrower mask, which still leaves it every core but one.
            libc::sched_setaffinity(0, size, &mask);
        }
        current_cpu() != Some(cpu)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        false
    }
}

#[cfg(test)]
mod switch_tests {
    use super::switch_on;

    #[test]
    fn placement_is_off_unless_asked_for() {
        assert!(!switch_on(None));
        for off in ["", "0", "false", "no", "off", "2", "pin"] {
            assert!(!switch_on(Some(off)), "{off:?}");
        }
        for on in ["1", "true", "TRUE", "yes", "On", " 1 "] {
            assert!(switch_on(Some(on)), "{on:?}");
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{current_cpu, step_aside};

    fn mask() -> Vec<usize> {
        // SAFETY: as in `step_aside`.
        let mut m: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: as in `step_aside`.
        assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut m) }, 0);
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: every index is below CPU_SETSIZE.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &m) })
            .collect()
    }

    /// On a machine where this thread may use two or more cores it leaves the one it was on;
    /// with one core it stays. Either way its mask is unchanged. The scheduler may move the
    /// thread between reading its core and stepping aside, which makes one try miss, so it
    /// gets several.
    #[test]
    fn moves_off_the_core_and_keeps_the_mask() {
        let before = mask();
        // A fresh thread, so that a mask left narrowed by a bug could not leak into others.
        std::thread::spawn(move || {
            let moved = (0..100).any(|_| {
                let here = current_cpu().expect("sched_getcpu works on Linux");
                assert!(before.contains(&here), "on {here}, allowed {before:?}");
                step_aside(here)
            });
            assert_eq!(moved, before.len() > 1, "allowed cores {before:?}");
            assert_eq!(mask(), before);
        })
        .join()
        .unwrap();
    }

    /// Cores past the set's size change nothing (and index nothing out of bounds).
    #[test]
    fn out_of_range_core_is_a_no_op() {
        let before = mask();
        for cpu in [libc::CPU_SETSIZE as usize, 1 << 20, usize::MAX] {
            assert!(!step_aside(cpu));
        }
        assert_eq!(mask(), before);
    }
}
