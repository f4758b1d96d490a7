//! `Mpi`: the communicator over MPI (rsmpi, Open MPI or any MPI-3 library). A dedicated thread
//! initialises MPI asking for `MPI_THREAD_SERIALIZED` (any thread may call MPI, one at a time),
//! and finalises it when the handle is dropped.
//!
//! Where the library grants `SERIALIZED` or better (Open MPI does), every collective runs on
//! the caller's thread, holding the handle's lock for the whole collective: the lock is what
//! makes the calls serialised, so the handle is `Send + Sync` without unsafe, and it keeps each
//! rank's collectives whole and one at a time, as the queue to one thread did. Small messages
//! then cost what MPI costs, with no hop between threads and back (measured 5-9 us of a 10-13 us
//! 4 KiB all-reduce before; docs/DISTRIBUTED.md). Large ones lose nothing: the caller (DDP's
//! communication thread, overlapping backward) blocked on the answer before as well. Where the
//! library grants only `FUNNELED`, the MPI thread runs each collective the handle sends it,
//! buffers moved there and back, never copied.
//!
//! Faults: each collective is a nonblocking one (`MPI_Iallreduce`, `MPI_Ibcast`,
//! `MPI_Iallgather`, `MPI_Ibarrier`) polled by `MPI_Test` against a deadline
//! (`QUILL_DIST_TIMEOUT`, default 60 s). Past the deadline the caller gets
//! [`DistError::Timeout`]; MPI cannot cancel a collective, so the request and its buffers are
//! leaked (never freed, never touched again), the handle is marked broken, every later
//! collective fails at once, and `abort` or dropping the handle ends the whole job with
//! `MPI_Abort`, so no rank is left hanging. A rank that dies outright is seen by `mpirun`,
//! which ends the others.
//!
//! `broadcast` and `all_gather` first compare the ranks' lengths (one tiny all-gather) and
//! fail with [`DistError::SizeMismatch`]; `all_reduce` does so only in debug builds (it is the
//! hot path), and in release builds unequal lengths there end in MPI's own truncation error.

use crate::communicator::{check_root, default_timeout, Communicator, ReduceOp};
use crate::error::{DistError, Result};
use mpi::collective::SystemOperation;
use mpi::request::{Request, Scope};
use mpi::topology::Communicator as _;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{CommunicatorCollectives, Root};
use mpi::Threading;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
enum Kind {
    AllReduce(ReduceOp),
    Broadcast(usize),
    AllGather,
    Barrier,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce(_) => "all_reduce",
            Kind::Broadcast(_) => "broadcast",
            Kind::AllGather => "all_gather",
            Kind::Barrier => "barrier",
        }
    }
}

enum Job {
    /// Only where MPI is `FUNNELED`: run it on the MPI thread.
    Collective {
        kind: Kind,
        buf: Vec<f32>,
        reply: Sender<Result<Vec<f32>>>,
    },
    Abort(i32),
}

/// What the collectives share, behind the handle's lock (held for a whole collective).
#[derive(Default)]
struct State {
    /// The all-reduce receive buffer, kept between calls.
    spare: Vec<f32>,
    /// The collective that timed out, if one did: the ranks are out of step for good.
    broken: Option<&'static str>,
}

/// A rank of `MPI_COMM_WORLD`; see the module doc.
pub struct Mpi {
    ctx: Ctx,
    processor: String,
    /// Collectives run on the caller's thread (MPI granted `SERIALIZED` or better).
    direct: bool,
    state: Arc<Mutex<State>>,
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The lock, also after a panic elsewhere (the state stays meaningful).
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

struct Ready {
    rank: usize,
    size: usize,
    processor: String,
    direct: bool,
}

impl Mpi {
    /// Initialises MPI on a dedicated thread with the default timeout. Fails when MPI was
    /// already initialised in this process or the library refuses.
    pub fn init() -> Result<Mpi> {
        Mpi::with_timeout(default_timeout())
    }

    /// As [`Mpi::init`], with collectives failing after `timeout`.
    pub fn with_timeout(timeout: Duration) -> Result<Mpi> {
        let (ready_tx, ready_rx) = channel::<Result<Ready>>();
        let (jobs_tx, jobs_rx) = channel::<Job>();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let thread = std::thread::Builder::new()
            .name("quill-mpi".into())
            .spawn(move || mpi_thread(timeout, ready_tx, jobs_rx, shared))
            .map_err(|e| backend("init", 0, format!("cannot start the MPI thread: {e}")))?;
        let ready = ready_rx
            .recv()
            .map_err(|_| backend("init", 0, "the MPI thread died while initialising".into()))??;
        Ok(Mpi {
            ctx: Ctx {
                rank: ready.rank,
                size: ready.size,
                timeout,
            },
            processor: ready.processor,
            direct: ready.direct,
            state,
            jobs: Mutex::new(Some(jobs_tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The host name MPI reports for this process.
    pub fn processor_name(&self) -> &str {
        &self.processor
    }

    fn submit(&self, kind: Kind, buf: Vec<f32>) -> Result<Vec<f32>> {
        let op = kind.name();
        if self.direct {
            // MPI is SERIALIZED: this thread may call it while it holds the lock (no other
            // thread calls MPI then; the MPI thread takes it too, to abort or finalise).
            let mut state = lock(&self.state);
            return self
                .ctx
                .run(&SimpleCommunicator::world(), &mut state, kind, buf);
        }
        let (reply, answer) = channel();
        let sent = self.jobs.lock().ok().and_then(|j| {
            j.as_ref()
                .map(|tx| tx.send(Job::Collective { kind, buf, reply }))
        });
        if !matches!(sent, Some(Ok(()))) {
            return Err(backend(
                op,
                self.ctx.rank,
                "the MPI thread has stopped".into(),
            ));
        }
        answer
            .recv()
            .map_err(|_| backend(op, self.ctx.rank, "the MPI thread has stopped".into()))?
    }
}

fn backend(op: &'static str, rank: usize, msg: String) -> DistError {
    DistError::Backend { op, rank, msg }
}

impl Communicator for Mpi {
    fn rank(&self) -> usize {
        self.ctx.rank
    }
    fn world_size(&self) -> usize {
        self.ctx.size
    }
    fn backend(&self) -> &'static str {
        "mpi"
    }
    fn timeout(&self) -> Duration {
        self.ctx.timeout
    }
    fn all_reduce_vec(&self, buf: Vec<f32>, op: ReduceOp) -> Result<Vec<f32>> {
        self.submit(Kind::AllReduce(op), buf)
    }
    fn broadcast_vec(&self, buf: Vec<f32>, root: usize) -> Result<Vec<f32>> {
        check_root("broadcast", root, self.ctx.size)?;
        self.submit(Kind::Broadcast(root), buf)
    }
    fn all_gather_vec(&self, buf: Vec<f32>) -> Result<Vec<f32>> {
        self.submit(Kind::AllGather, buf)
    }
    fn barrier(&self) -> Result<()> {
        self.submit(Kind::Barrier, Vec::new()).map(|_| ())
    }
    fn abort(&self, code: i32, msg: &str) -> ! {
        eprintln!(
            "rank {} of {}: aborting the MPI job: {msg}",
            self.ctx.rank, self.ctx.size
        );
        if let Ok(j) = self.jobs.lock() {
            if let Some(tx) = j.as_ref() {
                let _ = tx.send(Job::Abort(code));
            }
        }
        // MPI_Abort ends this process from the MPI thread (once no collective holds the lock,
        // at the latest when one times out); this is the fallback if it could not.
        std::thread::sleep(Duration::from_secs(10));
        std::process::exit(code)
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        // Closing the channel lets the thread finalise MPI (or abort, after a timeout).
        if let Ok(mut j) = self.jobs.lock() {
            j.take();
        }
        if let Ok(mut t) = self.thread.lock() {
            if let Some(t) = t.take() {
                let _ = t.join();
            }
        }
    }
}

/// Owns MPI: initialises it, runs jobs until the handle is dropped, finalises it (when the
/// universe drops at the end) or, after a timeout, aborts the job.
fn mpi_thread(
    timeout: Duration,
    ready: Sender<Result<Ready>>,
    jobs: Receiver<Job>,
    state: Arc<Mutex<State>>,
) {
    let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Serialized) else {
        let _ = ready.send(Err(backend(
            "init",
            0,
            "MPI is already initialised in this process (one Mpi per process)".into(),
        )));
        return;
    };
    let world = universe.world();
    let ctx = Ctx {
        rank: world.rank() as usize,
        size: world.size() as usize,
        timeout,
    };
    let processor = mpi::environment::processor_name().unwrap_or_default();
    let up = Ready {
        rank: ctx.rank,
        size: ctx.size,
        processor,
        direct: threading >= Threading::Serialized,
    };
    if ready.send(Ok(up)).is_err() {
        return;
    }
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Abort(code) => {
                let _serial = lock(&state);
                world.abort(code)
            }
            Job::Collective { kind, buf, reply } => {
                let answer = ctx.run(&world, &mut lock(&state), kind, buf);
                let _ = reply.send(answer);
            }
        }
    }
    if let Some(op) = lock(&state).broken {
        eprintln!(
            "rank {}: the communicator was dropped after {op} timed out; aborting the MPI job",
            ctx.rank
        );
        world.abort(3)
    }
    drop(world);
    drop(universe);
}

/// A collective timed out after waiting this long; its request was leaked (see `poll`), so
/// the caller must leak the request's buffers too.
struct Stuck(Duration);

#[derive(Clone, Copy)]
struct Ctx {
    rank: usize,
    size: usize,
    timeout: Duration,
}

impl Ctx {
    /// One collective on `world`, on this thread, which must be allowed to call MPI now.
    fn run(
        &self,
        world: &SimpleCommunicator,
        state: &mut State,
        kind: Kind,
        mut buf: Vec<f32>,
    ) -> Result<Vec<f32>> {
        let op = kind.name();
        let elems = buf.len();
        if let Some(earlier) = state.broken {
            return Err(backend(
                op,
                self.rank,
                format!("an earlier {earlier} timed out; the job must be aborted"),
            ));
        }
        let start = Instant::now();
        let size = self.size;
        let timed_out = |state: &mut State, Stuck(waited)| {
            state.broken = Some(op);
            DistError::Timeout {
                op,
                rank: self.rank,
                world: size,
                elems,
                waited,
                timeout: self.timeout,
            }
        };
        // Length check for broadcast and all_gather; for all_reduce (the hot path) only in debug
        // builds, where a mismatch otherwise ends in MPI's own truncation error.
        let check = match kind {
            Kind::Broadcast(_) | Kind::AllGather => true,
            Kind::AllReduce(_) => cfg!(debug_assertions),
            Kind::Barrier => false,
        };
        if check {
            // On the heap, so a timed-out request's buffers can be leaked.
            let mine = vec![elems as u64];
            let mut all = vec![0u64; size];
            let polled = mpi::request::scope(|scope| {
                let req = world.immediate_all_gather_into(scope, &mine[..], &mut all[..]);
                self.poll(req, start)
            });
            if let Err(stuck) = polled {
                std::mem::forget((mine, all, buf));
                return Err(timed_out(state, stuck));
            }
            if all.iter().any(|&n| n != elems as u64) {
                // Every rank saw the same lengths and fails the same way: the job is still sound.
                return Err(DistError::SizeMismatch {
                    op,
                    rank: self.rank,
                    elems,
                    all: all.iter().map(|&n| n as usize).collect(),
                });
            }
        }
        let polled = match kind {
            Kind::AllReduce(_) => {
                // MPI writes every element: a buffer of the right length needs no zeroing (after
                // the first call `spare` is the previous input, already of this length).
                let spare = &mut state.spare;
                if spare.len() != elems {
                    spare.clear();
                    spare.resize(elems, 0.0);
                }
                mpi::request::scope(|scope| {
                    let req = world.immediate_all_reduce_into(
                        scope,
                        &buf[..],
                        &mut spare[..],
                        SystemOperation::sum(),
                    );
                    self.poll(req, start)
                })
            }
            Kind::Broadcast(root) => {
                let root = world.process_at_rank(root as i32);
                mpi::request::scope(|scope| {
                    let req = root.immediate_broadcast_into(scope, &mut buf[..]);
                    self.poll(req, start)
                })
            }
            Kind::AllGather => {
                let mut out = vec![0.0f32; elems * size];
                let polled = mpi::request::scope(|scope| {
                    let req = world.immediate_all_gather_into(scope, &buf[..], &mut out[..]);
                    self.poll(req, start)
                });
                if polled.is_ok() {
                    return Ok(out);
                }
                std::mem::forget(out);
                polled
            }
            Kind::Barrier => self.poll(world.immediate_barrier(), start),
        };
        if let Err(stuck) = polled {
            std::mem::forget((buf, std::mem::take(&mut state.spare)));
            return Err(timed_out(state, stuck));
        }
        match kind {
            Kind::AllReduce(rop) => {
                let mut out = std::mem::replace(&mut state.spare, buf);
                if rop == ReduceOp::Mean {
                    let inv = 1.0 / size as f32;
                    out.iter_mut().for_each(|x| *x *= inv);
                }
                Ok(out)
            }
            _ => Ok(buf),
        }
    }

    /// Polls `req` until it completes, or until the deadline: then the request is leaked
    /// (MPI cannot cancel a collective) and the caller must leak its buffers.
    fn poll<'a, D: ?Sized, S: Scope<'a>>(
        &self,
        mut req: Request<'a, D, S>,
        start: Instant,
    ) -> std::result::Result<(), Stuck> {
        let mut polls: u64 = 0;
        loop {
            match req.test() {
                Ok(_) => return Ok(()),
                Err(r) => req = r,
            }
            polls += 1;
            let waited = start.elapsed();
            if waited >= self.timeout {
                // SAFETY: `into_raw` only unregisters the request from its scope (whose drop
                // would otherwise abort the process) and gives up the handle, which is never
                // used again. MPI may still write the buffers; the caller leaks them on
                // `Stuck` (`mem::forget` of the owning Vecs, all on the heap), so they outlive
                // the request, and every later collective fails before calling MPI until
                // MPI_Abort ends the job.
                let _ = unsafe { req.into_raw() };
                return Err(Stuck(waited));
            }
            // MPI_Test drives the collective's progress. Spin first (a small message completes
            // in a few us), then yield the core to the training threads, and back off once the
            // wait is long: then the other ranks have not arrived and there is nothing to do.
            if polls < SPIN_POLLS {
                std::hint::spin_loop();
            } else if polls < 100_000 && waited < Duration::from_millis(50) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

/// `MPI_Test` calls before the poll loop starts yielding (about 20-50 us).
const SPIN_POLLS: u64 = 1000;
