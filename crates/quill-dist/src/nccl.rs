//! `Nccl` (feature `nccl`): not written yet; see the crate report.
