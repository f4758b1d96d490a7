//! The `Communicator` trait: a group of `world_size()` processes (ranks) and the collectives
//! data-parallel training needs, on f32 host buffers. Implementations: [`crate::Local`] (one
//! rank), [`crate::ThreadGroup`] (N ranks as threads of one process, for tests), `Mpi` (feature
//! `mpi`). Every collective must be called by every rank, in the same
//! order; every one fails with [`DistError::Timeout`] rather than wait forever.

use crate::error::{DistError, Result};
use std::time::Duration;

/// How `all_reduce` combines the ranks' buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Element-wise sum.
    Sum,
    /// Element-wise sum divided by the world size (how gradients are averaged).
    Mean,
}

/// The collectives every backend provides. The `_vec` methods take and give back owned buffers
/// (no copy on the way: a backend that works on another thread moves them there); the slice
/// methods are the convenient form over them. Implementations are `Send + Sync` so a
/// communication thread can share them with the training thread.
pub trait Communicator: Send + Sync {
    /// This process's rank, `0..world_size()`.
    fn rank(&self) -> usize;
    /// Number of ranks in the group.
    fn world_size(&self) -> usize;
    /// The backend's name (`"local"`, `"threads"`, `"mpi"`), for messages.
    fn backend(&self) -> &'static str;
    /// How long a collective may wait for the other ranks before it fails.
    fn timeout(&self) -> Duration;

    /// Every rank's `buf` combined element-wise by `op`; every rank gets the result. Ranks must
    /// pass equal lengths.
    fn all_reduce_vec(&self, buf: Vec<f32>, op: ReduceOp) -> Result<Vec<f32>>;
    /// Rank `root`'s `buf` on every rank (the others' contents are overwritten). Equal lengths.
    fn broadcast_vec(&self, buf: Vec<f32>, root: usize) -> Result<Vec<f32>>;
    /// Every rank's `buf` concatenated in rank order (`world_size() * buf.len()` elements).
    /// Equal lengths.
    fn all_gather_vec(&self, buf: Vec<f32>) -> Result<Vec<f32>>;
    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<()>;

    /// Ends every process of the job after a fault (MPI_Abort on MPI), printing `msg` first.
    /// The default, for single-process groups, exits this process.
    fn abort(&self, code: i32, msg: &str) -> ! {
        eprintln!("rank {}: aborting: {msg}", self.rank());
        std::process::exit(code)
    }

    /// `all_reduce_vec` in place.
    fn all_reduce(&self, buf: &mut [f32], op: ReduceOp) -> Result<()> {
        let out = self.all_reduce_vec(buf.to_vec(), op)?;
        copy_back("all_reduce", self.rank(), buf, &out)
    }
    /// `broadcast_vec` in place.
    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        let out = self.broadcast_vec(buf.to_vec(), root)?;
        copy_back("broadcast", self.rank(), buf, &out)
    }
    /// `all_gather_vec` of a borrowed buffer.
    fn all_gather(&self, buf: &[f32]) -> Result<Vec<f32>> {
        self.all_gather_vec(buf.to_vec())
    }
}

fn copy_back(op: &'static str, rank: usize, buf: &mut [f32], out: &[f32]) -> Result<()> {
    if out.len() != buf.len() {
        return Err(DistError::SizeMismatch {
            op,
            rank,
            elems: buf.len(),
            all: vec![out.len()],
        });
    }
    buf.copy_from_slice(out);
    Ok(())
}

/// Checks `root` against the world size.
pub(crate) fn check_root(op: &'static str, root: usize, world: usize) -> Result<()> {
    if root >= world {
        return Err(DistError::BadRoot { op, root, world });
    }
    Ok(())
}

/// The collective timeout: `QUILL_DIST_TIMEOUT` (seconds, fractions allowed) or 60 s.
pub fn default_timeout() -> Duration {
    timeout_from(std::env::var("QUILL_DIST_TIMEOUT").ok().as_deref())
}

/// Parses a timeout in seconds; a missing, unparsable or non-positive value gives 60 s.
pub(crate) fn timeout_from(v: Option<&str>) -> Duration {
    v.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(60), Duration::from_secs_f64)
}
