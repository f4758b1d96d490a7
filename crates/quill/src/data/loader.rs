//! `DataLoader`: splits a `Dataset` into batches in a seeded order and prepares them on a
//! background thread (a bounded channel keeps a few ready) while the caller trains on the last.
//! `Epoch` is the per-epoch iterator; dropping it stops and joins the worker.

use super::{Dataset, Transform};
use crate::NDArray;
use quill_core::{Error, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

const OP: &str = "DataLoader";
/// Keeps the transform stream independent of the shuffle stream for the same seed.
const TRANSFORM_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// Batches of a dataset, in order or shuffled by `seed` and the epoch number.
#[derive(Clone)]
pub struct DataLoader {
    dataset: Arc<dyn Dataset>,
    batch_size: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    prefetch: usize,
    transform: Option<Arc<dyn Transform>>,
}

impl std::fmt::Debug for DataLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("len", &self.dataset.len())
            .field("batch_size", &self.batch_size)
            .field("shuffle", &self.shuffle)
            .field("seed", &self.seed)
            .field("drop_last", &self.drop_last)
            .field("prefetch", &self.prefetch)
            .field("transform", &self.transform.is_some())
            .finish()
    }
}

impl DataLoader {
    /// A loader with no shuffle, seed 0, `drop_last` false, 2 batches prefetched, no transform.
    pub fn new(dataset: impl Dataset + 'static, batch_size: usize) -> Result<DataLoader> {
        DataLoader::from_arc(Arc::new(dataset), batch_size)
    }

    /// As [`DataLoader::new`], for a dataset shared with other loaders.
    pub fn from_arc(dataset: Arc<dyn Dataset>, batch_size: usize) -> Result<DataLoader> {
        if batch_size == 0 {
            return Err(Error::invalid(OP, "batch_size must be at least 1, got 0"));
        }
        Ok(DataLoader {
            dataset,
            batch_size,
            shuffle: false,
            seed: 0,
            drop_last: false,
            prefetch: 2,
            transform: None,
        })
    }

    /// Visit samples in a random order, a different one each epoch, fixed by the seed.
    pub fn shuffle(mut self, on: bool) -> DataLoader {
        self.shuffle = on;
        self
    }

    /// Seeds both the shuffle and the transforms' random choices.
    pub fn seed(mut self, seed: u64) -> DataLoader {
        self.seed = seed;
        self
    }

    /// Skip the last batch when it would be smaller than `batch_size`.
    pub fn drop_last(mut self, on: bool) -> DataLoader {
        self.drop_last = on;
        self
    }

    /// How many prepared batches may wait for the consumer (at least 1).
    pub fn prefetch(mut self, batches: usize) -> DataLoader {
        self.prefetch = batches.max(1);
        self
    }

    /// A transform applied to the inputs of every batch, on the worker thread. Its random stream
    /// is seeded by the seed and the epoch, and consumed batch by batch in order.
    pub fn transform(mut self, t: impl Transform + 'static) -> DataLoader {
        self.transform = Some(Arc::new(t));
        self
    }

    /// The dataset batches are drawn from; cloning the `Arc` shares it with another loader.
    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }

    /// Samples per batch; the last batch of an epoch may hold fewer unless `drop_last` is on.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Number of batches per epoch.
    pub fn len(&self) -> usize {
        let n = self.dataset.len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// Whether an epoch yields no batches (an empty dataset, or fewer samples than `batch_size`
    /// with `drop_last` on).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The order in which epoch `epoch` visits the samples (all of them, even those a
    /// `drop_last` epoch leaves out): 0..n, or a permutation from a ChaCha8 stream seeded by the
    /// seed, with the epoch as the stream number.
    pub fn indices(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.dataset.len()).collect();
        if self.shuffle {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(epoch);
            order.shuffle(&mut rng);
        }
        order
    }

    /// The batches of epoch `epoch`, prepared on a background thread.
    pub fn epoch(&self, epoch: u64) -> Epoch {
        let batches = self.len();
        let order = self.indices(epoch);
        let (tx, rx) = sync_channel(self.prefetch);
        let stop = Arc::new(AtomicBool::new(false));
        let (dataset, transform, bs) = (
            self.dataset.clone(),
            self.transform.clone(),
            self.batch_size,
        );
        let mut trng = ChaCha8Rng::seed_from_u64(self.seed ^ TRANSFORM_SALT);
        trng.set_stream(epoch);
        let worker_stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("quill-data-loader".into())
            .spawn(move || {
                for chunk in order.chunks(bs).take(batches) {
                    if worker_stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let batch = dataset
                        .get_batch(chunk)
                        .and_then(|(x, y)| match &transform {
                            Some(t) => Ok((t.apply(&x, &mut trng)?, y)),
                            None => Ok((x, y)),
                        });
                    let failed = batch.is_err();
                    // A send error means the Epoch was dropped: nobody wants more batches.
                    if tx.send(batch).is_err() || failed {
                        return;
                    }
                }
            });
        match spawned {
            Ok(handle) => Epoch {
                rx: Some(rx),
                worker: Some(handle),
                stop,
                remaining: batches,
                pending: None,
            },
            Err(e) => Epoch {
                rx: None,
                worker: None,
                stop,
                remaining: 0,
                pending: Some(Error::invalid(
                    OP,
                    format!("cannot start the worker thread: {e}"),
                )),
            },
        }
    }
}

/// The batches of one epoch, each `Ok((inputs, targets))` with a leading batch axis. After an
/// error the iterator ends. Dropping it early stops the worker and waits for it (at most the
/// batch it is preparing), so no thread outlives the epoch.
pub struct Epoch {
    rx: Option<Receiver<Result<(NDArray, NDArray)>>>,
    worker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    remaining: usize,
    pending: Option<Error>,
}

impl Epoch {
    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receiver first unblocks a worker waiting in `send`.
        self.rx = None;
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
    }
}

impl Iterator for Epoch {
    type Item = Result<(NDArray, NDArray)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.pending.take() {
            return Some(Err(e));
        }
        if self.remaining == 0 {
            self.shutdown();
            return None;
        }
        let got = self.rx.as_ref().map(|rx| rx.recv());
        match got {
            Some(Ok(Ok(batch))) => {
                self.remaining -= 1;
                Some(Ok(batch))
            }
            Some(Ok(Err(e))) => {
                self.remaining = 0;
                self.shutdown();
                Some(Err(e))
            }
            // The worker hung up before sending every batch: it panicked (a Dataset or
            // Transform implementation did). Say so rather than end the epoch silently short.
            Some(Err(_)) | None => {
                let missing = self.remaining;
                self.remaining = 0;
                let panicked = self
                    .worker
                    .take()
                    .map(|h| h.join().is_err())
                    .unwrap_or(false);
                self.shutdown();
                Some(Err(Error::invalid(
                    OP,
                    format!(
                        "the worker thread stopped with {missing} batches left{}",
                        if panicked { " (it panicked)" } else { "" }
                    ),
                )))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // An error ends the epoch early, so only the upper bound is certain.
        let n = self.remaining + usize::from(self.pending.is_some());
        (n.min(1), Some(n))
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        self.shutdown();
    }
}
