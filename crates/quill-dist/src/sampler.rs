//! `DistributedSampler`: which samples each rank trains on in an epoch. The epoch's order is the
//! permutation `DataLoader` itself would use (ChaCha8 seeded by the shared seed, the epoch as
//! stream number), so every rank computes the same order without talking and a one-rank sampler
//! visits exactly the single-process order. Rank `r` of `W` takes positions `r, r + W, ...` of
//! that order, which makes its `i`-th batch of `b` and the other ranks' `i`-th batches together
//! the single-process `i`-th batch of `W * b`. `Shard` is the dataset view over one rank's list.
//!
//! Padding (PyTorch's rule, `drop_last = false`): when `W` does not divide the dataset length
//! the order is extended by repeating its first samples until it does, so every rank has
//! `ceil(n / W)` samples and the same number of steps (ranks must run the same collectives); a
//! few samples are then seen twice per epoch. With `drop_last = true` the tail is cut to
//! `floor(n / W) * W` instead.

use crate::error::{DistError, Result};
use quill::data::Dataset;
use quill::NDArray;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Disjoint per-rank shards of `0..len`, reshuffled each epoch from a shared seed.
#[derive(Clone, Debug)]
pub struct DistributedSampler {
    len: usize,
    world: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
}

impl DistributedSampler {
    /// Shards of a dataset of `len` samples for `rank` of `world`, shuffled with seed 0, padded.
    pub fn new(len: usize, world: usize, rank: usize) -> Result<DistributedSampler> {
        if world == 0 || rank >= world {
            return Err(DistError::Backend {
                op: "DistributedSampler::new",
                rank,
                msg: format!("rank {rank} is not a rank of a group of {world}"),
            });
        }
        Ok(DistributedSampler {
            len,
            world,
            rank,
            shuffle: true,
            seed: 0,
            drop_last: false,
        })
    }

    /// Shuffle each epoch (default) or keep `0..len` order.
    pub fn shuffle(mut self, on: bool) -> Self {
        self.shuffle = on;
        self
    }

    /// The seed every rank must share.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Cut the tail instead of padding (see the module doc).
    pub fn drop_last(mut self, on: bool) -> Self {
        self.drop_last = on;
        self
    }

    /// Samples per rank per epoch.
    pub fn num_samples(&self) -> usize {
        if self.drop_last {
            self.len / self.world
        } else {
            self.len.div_ceil(self.world)
        }
    }

    /// This rank's sample indices for `epoch`, in visiting order.
    pub fn indices(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.len).collect();
        if self.shuffle {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(epoch);
            order.shuffle(&mut rng);
        }
        let total = self.num_samples() * self.world;
        if total > order.len() && !order.is_empty() {
            let need = total - order.len();
            let pad: Vec<usize> = order.iter().copied().cycle().take(need).collect();
            order.extend(pad);
        }
        order.truncate(total);
        order
            .into_iter()
            .skip(self.rank)
            .step_by(self.world)
            .collect()
    }
}

/// The samples of `base` at `indices` (in that order), as a dataset of its own.
#[derive(Clone)]
pub struct Shard {
    base: Arc<dyn Dataset>,
    indices: Vec<usize>,
}

impl Shard {
    /// A view of `base` through `indices`; every index must be below `base.len()`.
    pub fn new(base: Arc<dyn Dataset>, indices: Vec<usize>) -> Result<Shard> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= base.len()) {
            return Err(DistError::Quill(quill::Error::IndexOutOfRange {
                op: "Shard::new",
                index: bad as isize,
                axis: 0,
                size: base.len(),
            }));
        }
        Ok(Shard { base, indices })
    }
}

impl Dataset for Shard {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get_batch(&self, indices: &[usize]) -> quill::Result<(NDArray, NDArray)> {
        let mapped = indices
            .iter()
            .map(|&i| {
                self.indices
                    .get(i)
                    .copied()
                    .ok_or(quill::Error::IndexOutOfRange {
                        op: "Shard::get_batch",
                        index: i as isize,
                        axis: 0,
                        size: self.indices.len(),
                    })
            })
            .collect::<quill::Result<Vec<usize>>>()?;
        self.base.get_batch(&mapped)
    }
}
