//! Which micro-kernel family runs: the [`Kernel`] families, what this CPU can run, the default
//! (the fastest one, or the one `QUILL_MATMUL_KERNEL` names) and a per-thread override for tests
//! and benchmarks ([`with_kernel`]). `REQUIRE_KERNELS` turns a test's skip of a family this CPU
//! lacks into a failure.

use std::cell::Cell;
use std::sync::OnceLock;

/// Which micro-kernel family runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// AMX tiles for bf16 (32x32 micro-tile, `amx.rs`); f32 and f64 run the AVX-512 kernels.
    Amx,
    /// AVX-512F: f32 12x32, f64 12x16 tiles.
    Avx512,
    /// AVX2 + FMA: f32 6x16, f64 6x8 tiles.
    Avx2,
    /// Portable Rust: f32 4x16, f64 4x8 tiles.
    Generic,
}

impl Kernel {
    /// Every family, fastest first ([`Kernel::best`] takes the first one available).
    pub const ALL: [Kernel; 4] = [Kernel::Amx, Kernel::Avx512, Kernel::Avx2, Kernel::Generic];

    /// Whether this CPU (and, for AMX, the OS, which must grant the tile state) can run the
    /// family. Always false off x86-64 except for `Generic`.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Amx => crate::amx::available(),
            #[cfg(target_arch = "x86_64")]
            // Its narrowest stampings are AVX2 + FMA code (every AVX-512 CPU has both).
            Kernel::Avx512 => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            Kernel::Generic => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The fastest kernel this CPU runs.
    pub fn best() -> Kernel {
        Kernel::ALL
            .into_iter()
            .find(|k| k.is_available())
            .unwrap_or(Kernel::Generic)
    }

    /// Whether the environment variable `REQUIRE_KERNELS` (comma-separated names as
    /// `QUILL_MATMUL_KERNEL` spells them, plus `avx512bf16` for the bf16 dot-product path)
    /// names this kernel: tests that would skip it on a CPU without it fail instead, so that
    /// a run on a machine meant to have it never passes by skipping (as `REQUIRE_CUDA=1` does
    /// for the GPU).
    pub fn required(self) -> bool {
        required(self.name())
    }

    /// The kernel's name as `QUILL_MATMUL_KERNEL` and `REQUIRE_KERNELS` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Amx => "amx",
            Kernel::Avx512 => "avx512",
            Kernel::Avx2 => "avx2",
            Kernel::Generic => "generic",
        }
    }

    /// The kernels this CPU runs, for test suites, each one it lacks noted on stderr; an
    /// error names one it lacks that `REQUIRE_KERNELS` asks for ([`Kernel::required`]).
    pub fn testable() -> Result<Vec<Kernel>, String> {
        let mut here = Vec::new();
        for k in Kernel::ALL {
            if k.is_available() {
                here.push(k);
            } else if k.required() {
                return Err(lacks(k.name()));
            } else {
                eprintln!("note: no {} here; that kernel is not exercised", k.name());
            }
        }
        Ok(here)
    }

    /// The kernel whose [`Kernel::name`] is `s`, ignoring ASCII case (how
    /// `QUILL_MATMUL_KERNEL` is read); `None` for any other string.
    pub fn parse(s: &str) -> Option<Kernel> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }
}

/// Whether `REQUIRE_KERNELS` names `name` (see [`Kernel::required`]).
fn required(name: &str) -> bool {
    std::env::var("REQUIRE_KERNELS")
        .is_ok_and(|v| v.split(',').any(|s| s.trim().eq_ignore_ascii_case(name)))
}

/// The failure of a run whose `REQUIRE_KERNELS` names `name`, which this CPU lacks.
fn lacks(name: &str) -> String {
    format!("REQUIRE_KERNELS names {name}; this CPU lacks it")
}

/// For a test about to skip the path `name` (as `REQUIRE_KERNELS` spells it) that this CPU
/// lacks: fails when `REQUIRE_KERNELS` names it, else notes `what` was not run.
#[cfg(test)]
pub(crate) fn skip(name: &str, what: &str) {
    assert!(!required(name), "{}", lacks(name));
    eprintln!("note: no {name} here; {what} not run");
}

thread_local! {
    static OVERRIDE: Cell<Option<Kernel>> = const { Cell::new(None) };
}

/// The kernel named by `QUILL_MATMUL_KERNEL` (amx, avx512, avx2, generic) when it is available here,
/// otherwise the fastest one this CPU supports. Read once.
fn default_kernel() -> Kernel {
    static K: OnceLock<Kernel> = OnceLock::new();
    *K.get_or_init(|| {
        std::env::var("QUILL_MATMUL_KERNEL")
            .ok()
            .and_then(|v| Kernel::parse(&v))
            .filter(|k| k.is_available())
            .unwrap_or_else(Kernel::best)
    })
}

/// The micro-kernel that a matmul started from this thread uses now.
pub fn active_kernel() -> Kernel {
    OVERRIDE.with(Cell::get).unwrap_or_else(default_kernel)
}

/// [`with_kernel`]'s error: this CPU (or, for AMX, the OS) cannot run the kernel asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unavailable(pub Kernel);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {:?} kernel needs CPU features this machine lacks",
            self.0
        )
    }
}

impl std::error::Error for Unavailable {}

/// Runs `f` with every matmul started from this thread using kernel `k` (for tests and
/// benchmarks: every path can be checked on one machine). Errs when this CPU lacks `k`.
pub fn with_kernel<R>(k: Kernel, f: impl FnOnce() -> R) -> Result<R, Unavailable> {
    if !k.is_available() {
        return Err(Unavailable(k));
    }
    let prev = OVERRIDE.with(|o| o.replace(Some(k)));
    // Restore on unwind too, so a panicking test cannot leak its choice into the next one.
    struct Restore(Option<Kernel>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(prev);
    Ok(f())
}

#[cfg(test)]
mod tests {
    use super::Kernel;

    /// The one name table serves both ways: each kernel's name parses back to it in any case,
    /// the names differ, and other words (or an empty one) parse to nothing.
    #[test]
    fn kernel_names_round_trip() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::parse(k.name()), Some(k));
            assert_eq!(Kernel::parse(&k.name().to_ascii_uppercase()), Some(k));
        }
        let mut names: Vec<_> = Kernel::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Kernel::ALL.len());
        for bad in ["", "avx", "avx5122", "sse"] {
            assert_eq!(Kernel::parse(bad), None, "{bad:?}");
        }
    }

    /// A kernel this CPU lacks is refused, naming it; one it has runs `f` under it and the
    /// choice is undone afterwards, after a panic too.
    #[test]
    fn with_kernel_overrides_and_restores() {
        let before = super::active_kernel();
        for k in Kernel::ALL {
            match super::with_kernel(k, super::active_kernel) {
                Ok(active) => assert_eq!(active, k),
                Err(e) => {
                    assert!(!k.is_available());
                    assert!(e.to_string().contains(&format!("{k:?}")), "{e}");
                }
            }
            assert_eq!(super::active_kernel(), before);
        }
        let r = std::panic::catch_unwind(|| {
            super::with_kernel(Kernel::Generic, || panic!("inside")).ok();
        });
        assert!(r.is_err());
        assert_eq!(super::active_kernel(), before);
    }
}
