//! `ThreadGroup`: N ranks as threads of one process, meeting at a mutex-and-condvar rendezvous.
//! It makes data-parallel logic testable without MPI (and shows what every backend must do):
//! each collective gathers every rank's buffer, checks that all ranks called the same
//! collective with the same length, and each rank combines the buffers in rank order, so every
//! rank gets bit-identical results. A rank that waits longer than the timeout fails with
//! [`DistError::Timeout`] and breaks the group; a rank whose handle is dropped leaves the group,
//! and the others fail at their next collective instead of waiting.

use crate::communicator::{check_root, default_timeout, Communicator, ReduceOp};
use crate::error::{DistError, Result};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

type Round = Arc<Vec<(&'static str, Vec<f32>)>>;

struct State {
    /// Completed rounds so far; a waiting rank knows its round is done when this moves.
    generation: u64,
    arrived: usize,
    slots: Vec<Option<(&'static str, Vec<f32>)>>,
    /// The last completed round's buffers, by rank.
    result: Option<Round>,
    /// Why the group can no longer be used.
    broken: Option<String>,
}

struct Shared {
    world: usize,
    timeout: Duration,
    state: Mutex<State>,
    cv: Condvar,
}

/// Makes groups of in-process ranks.
pub struct ThreadGroup;

impl ThreadGroup {
    /// `world` ranks with the default timeout ([`crate::default_timeout`]); hand one handle to
    /// each thread. `world` must be at least 1.
    pub fn ranks(world: usize) -> Result<Vec<ThreadComm>> {
        ThreadGroup::with_timeout(world, default_timeout())
    }

    /// `world` ranks whose collectives fail after waiting `timeout`.
    pub fn with_timeout(world: usize, timeout: Duration) -> Result<Vec<ThreadComm>> {
        if world == 0 {
            return Err(DistError::Backend {
                op: "ThreadGroup::ranks",
                rank: 0,
                msg: "a group needs at least one rank, got 0".into(),
            });
        }
        let shared = Arc::new(Shared {
            world,
            timeout,
            state: Mutex::new(State {
                generation: 0,
                arrived: 0,
                slots: vec![None; world],
                result: None,
                broken: None,
            }),
            cv: Condvar::new(),
        });
        Ok((0..world)
            .map(|rank| ThreadComm {
                rank,
                shared: shared.clone(),
            })
            .collect())
    }
}

/// One rank of a [`ThreadGroup`].
pub struct ThreadComm {
    rank: usize,
    shared: Arc<Shared>,
}

impl ThreadComm {
    fn lock(&self, op: &'static str) -> Result<MutexGuard<'_, State>> {
        self.shared.state.lock().map_err(|_| DistError::Backend {
            op,
            rank: self.rank,
            msg: "a rank panicked inside a collective".into(),
        })
    }

    /// Deposits `data` and returns every rank's (op, buffer) once all have arrived.
    fn exchange(&self, op: &'static str, data: Vec<f32>) -> Result<Round> {
        let start = Instant::now();
        let timeout = self.shared.timeout;
        let elems = data.len();
        let mut g = self.lock(op)?;
        if let Some(why) = &g.broken {
            return Err(self.broken(op, why));
        }
        g.slots[self.rank] = Some((op, data));
        g.arrived += 1;
        let generation = g.generation;
        if g.arrived == self.shared.world {
            let round: Vec<_> = g
                .slots
                .iter_mut()
                .map(|s| s.take().unwrap_or(("?", Vec::new())))
                .collect();
            g.result = Some(Arc::new(round));
            g.arrived = 0;
            g.generation += 1;
            self.shared.cv.notify_all();
        } else {
            while g.generation == generation {
                if let Some(why) = &g.broken {
                    return Err(self.broken(op, why));
                }
                let waited = start.elapsed();
                if waited >= timeout {
                    g.broken = Some(format!("rank {} timed out in {op}", self.rank));
                    self.shared.cv.notify_all();
                    return Err(DistError::Timeout {
                        op,
                        rank: self.rank,
                        world: self.shared.world,
                        elems,
                        waited,
                        timeout,
                    });
                }
                g = self
                    .shared
                    .cv
                    .wait_timeout(g, timeout - waited)
                    .map_err(|_| DistError::Backend {
                        op,
                        rank: self.rank,
                        msg: "a rank panicked inside a collective".into(),
                    })?
                    .0;
            }
        }
        let round = g
            .result
            .clone()
            .ok_or_else(|| self.broken(op, "no result"))?;
        drop(g);
        let others: Vec<&'static str> = round.iter().map(|(o, _)| *o).collect();
        if others.iter().any(|o| *o != op) {
            return Err(DistError::Mismatched {
                op,
                rank: self.rank,
                others,
            });
        }
        Ok(round)
    }

    fn broken(&self, op: &'static str, why: &str) -> DistError {
        DistError::Backend {
            op,
            rank: self.rank,
            msg: format!("the thread group is broken: {why}"),
        }
    }

    /// Fails unless every rank passed `elems` elements.
    fn same_len(&self, op: &'static str, round: &Round, elems: usize) -> Result<()> {
        let all: Vec<usize> = round.iter().map(|(_, b)| b.len()).collect();
        if all.iter().any(|&n| n != elems) {
            return Err(DistError::SizeMismatch {
                op,
                rank: self.rank,
                elems,
                all,
            });
        }
        Ok(())
    }
}

impl Drop for ThreadComm {
    fn drop(&mut self) {
        if let Ok(mut g) = self.shared.state.lock() {
            if g.broken.is_none() && self.shared.world > 1 {
                g.broken = Some(format!("rank {} left the group", self.rank));
            }
            self.shared.cv.notify_all();
        }
    }
}

impl Communicator for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.shared.world
    }
    fn backend(&self) -> &'static str {
        "threads"
    }
    fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    fn all_reduce_vec(&self, mut buf: Vec<f32>, op: ReduceOp) -> Result<Vec<f32>> {
        const OP: &str = "all_reduce";
        let round = self.exchange(OP, buf.clone())?;
        self.same_len(OP, &round, buf.len())?;
        for (i, x) in buf.iter_mut().enumerate() {
            let mut s = 0.0f32;
            for (_, b) in round.iter() {
                s += b[i];
            }
            *x = match op {
                ReduceOp::Sum => s,
                ReduceOp::Mean => s / self.shared.world as f32,
            };
        }
        Ok(buf)
    }

    fn broadcast_vec(&self, buf: Vec<f32>, root: usize) -> Result<Vec<f32>> {
        const OP: &str = "broadcast";
        check_root(OP, root, self.shared.world)?;
        let elems = buf.len();
        let round = self.exchange(OP, buf)?;
        self.same_len(OP, &round, elems)?;
        Ok(round[root].1.clone())
    }

    fn all_gather_vec(&self, buf: Vec<f32>) -> Result<Vec<f32>> {
        const OP: &str = "all_gather";
        let elems = buf.len();
        let round = self.exchange(OP, buf)?;
        self.same_len(OP, &round, elems)?;
        Ok(round.iter().flat_map(|(_, b)| b.iter().copied()).collect())
    }

    fn barrier(&self) -> Result<()> {
        self.exchange("barrier", Vec::new()).map(|_| ())
    }
}
