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
        /// The collective that timed out (`"all_reduce"`, `"barrier"`, `"nccl init"`, ...).
        op: &'static str,
        /// The rank reporting it: the one that gave up waiting, not necessarily the one at fault.
        rank: usize,
        /// The number of ranks in the group.
        world: usize,
        /// This rank's message length in f32 elements (0 for a barrier or NCCL's init).
        elems: usize,
        /// How long this rank actually waited before giving up.
        waited: Duration,
        /// The deadline in force (`QUILL_DIST_TIMEOUT` or the communicator's own).
        timeout: Duration,
    },

    /// Ranks passed buffers of different lengths to one collective.
    #[error("{op}: rank {rank} passed {elems} elements but the ranks passed {all:?} (by rank); every rank must pass the same length")]
    SizeMismatch {
        /// The collective (or `DistributedDataParallel`'s setup) that found the mismatch.
        op: &'static str,
        /// The rank reporting it.
        rank: usize,
        /// The length this rank passed, in elements.
        elems: usize,
        /// The lengths the ranks passed, indexed by rank; a single entry when the backend
        /// returned a result of the wrong length instead.
        all: Vec<usize>,
    },

    /// Ranks called different collectives at the same point.
    #[error("{op}: rank {rank} called {op} while other ranks called {others:?} (by rank); every rank must call the same collectives in the same order")]
    Mismatched {
        /// The collective this rank called.
        op: &'static str,
        /// The rank reporting it.
        rank: usize,
        /// The collective each rank called in the same round, indexed by rank (this rank's
        /// own entry included).
        others: Vec<&'static str>,
    },

    /// A root rank outside the group.
    #[error("{op}: root {root} is not a rank of a group of {world}")]
    BadRoot {
        /// The rooted collective (`"broadcast"`).
        op: &'static str,
        /// The root rank that was asked for.
        root: usize,
        /// The number of ranks in the group: valid roots are `0..world`.
        world: usize,
    },

    /// The communication backend (MPI, NCCL, the thread group) failed or is unusable.
    #[error("{op}: rank {rank}: {msg}")]
    Backend {
        /// The collective or step that failed.
        op: &'static str,
        /// The rank reporting it.
        rank: usize,
        /// What the backend said, or what quill-dist found wrong with it.
        msg: String,
    },

    /// An error from quill itself (a tensor op inside data-parallel training).
    #[error(transparent)]
    Quill(#[from] quill::Error),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, DistError>;
