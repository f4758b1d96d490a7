//! `DistError`, the one error type of quill-dist: every variant names the collective (or the
//! step) and the rank, and where sizes matter, the sizes, so a message read alone in one rank's
//! log says which process failed where.

use std::time::Duration;

/// What went wrong in a collective or in data-parallel training.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// A collective did not complete within the deadline: some other rank died, hangs, or
    /// called a different collective.
    #[error("{op}: rank {rank} of {world} waited {waited:?} (timeout {timeout:?}, QUILL_DIST_TIMEOUT) for the other ranks on a message of {elems} f32 elements; a rank has died, hangs, or called a different collective; aborting the job is the only safe way on")]
    Timeout {
        op: &'static str,
        rank: usize,
        world: usize,
        elems: usize,
        waited: Duration,
        timeout: Duration,
    },

    /// Ranks passed buffers of different lengths to one collective.
    #[error("{op}: rank {rank} passed {elems} elements but the ranks passed {all:?} (by rank); every rank must pass the same length")]
    SizeMismatch {
        op: &'static str,
        rank: usize,
        elems: usize,
        all: Vec<usize>,
    },

    /// Ranks called different collectives at the same point.
    #[error("{op}: rank {rank} called {op} while other ranks called {others:?} (by rank); every rank must call the same collectives in the same order")]
    Mismatched {
        op: &'static str,
        rank: usize,
        others: Vec<&'static str>,
    },

    /// A root rank outside the group.
    #[error("{op}: root {root} is not a rank of a group of {world}")]
    BadRoot {
        op: &'static str,
        root: usize,
        world: usize,
    },

    /// The communication backend (MPI, NCCL, the thread group) failed or is unusable.
    #[error("{op}: rank {rank}: {msg}")]
    Backend {
        op: &'static str,
        rank: usize,
        msg: String,
    },

    /// An error from quill itself (a tensor op inside data-parallel training).
    #[error(transparent)]
    Quill(#[from] quill::Error),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, DistError>;
