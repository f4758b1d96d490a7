//! The CPU matmul kernels a test can run on this machine (`Kernel::testable`). One this CPU
//! lacks is noted on stderr and skipped, unless `REQUIRE_KERNELS` names it: then the test
//! fails, so that a run on a machine meant to have it never passes by skipping.

use quill_cpu::matmul::Kernel;

/// Every kernel this CPU runs, fastest first; panics on a required one it lacks.
pub fn available() -> Vec<Kernel> {
    Kernel::testable().unwrap_or_else(|e| panic!("{e}"))
}
