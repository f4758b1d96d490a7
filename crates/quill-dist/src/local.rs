//! `Local`: the group of one rank. Every collective is the identity (a mean over one rank is
//! the value itself), so code written for N ranks runs unchanged in a single process.

use crate::communicator::{check_root, default_timeout, Communicator, ReduceOp};
use crate::error::Result;
use std::time::Duration;

/// A single-process group (rank 0 of 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct Local;

impl Communicator for Local {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn backend(&self) -> &'static str {
        "local"
    }
    fn timeout(&self) -> Duration {
        default_timeout()
    }
    fn all_reduce_vec(&self, buf: Vec<f32>, _op: ReduceOp) -> Result<Vec<f32>> {
        Ok(buf)
    }
    fn broadcast_vec(&self, buf: Vec<f32>, root: usize) -> Result<Vec<f32>> {
        check_root("broadcast", root, 1)?;
        Ok(buf)
    }
    fn all_gather_vec(&self, buf: Vec<f32>) -> Result<Vec<f32>> {
        Ok(buf)
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
}
