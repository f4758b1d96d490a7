//! `Mpi`: the communicator over MPI (rsmpi, Open MPI or any MPI-3 library). One dedicated thread
//! initialises MPI (`MPI_THREAD_FUNNELED`: that thread is the only one that ever calls MPI) and
//! runs every collective the handle sends it, so the handle is `Send + Sync` without unsafe and
//! the training thread and DDP's communication thread can both use it. Buffers move to that
//! thread and back, never copied.
//!
//! Faults: each collective is a nonblocking one (`MPI_Iallreduce`, `MPI_Ibcast`,
//! `MPI_Iallgather`, `MPI_Ibarrier`) polled against a deadline (`QUILL_DIST_TIMEOUT`, default
//! 60 s). Past the deadline the caller gets [`DistError::Timeout`] at once; the MPI thread keeps
//! the request (and its buffers) alive, since MPI cannot cancel a collective, and the next thing
//! the handle does, `abort` or being dropped, ends the whole job with `MPI_Abort`, so no rank is
//! left hanging. A rank that dies outright is seen by `mpirun`, which ends the others.
//!
//! `broadcast` and `all_gather` first compare the ranks' lengths (one tiny all-gather) and
//! fail with [`DistError::SizeMismatch`]; `all_reduce` does so only in debug builds (it is the
//! hot path), and in release builds unequal lengths there end in MPI's own truncation error.
//!
//! Latency (measured, README): most of the gap to Open MPI's blocking `MPI_Allreduce` on small
//! and mid-size messages is Open MPI's nonblocking collective itself (libnbc, driven by
//! `MPI_Test`), which the deadline needs; the hop to this thread adds a few us. Spinning on the
//! channels before parking was tried and gained nothing measurable on this 2-core machine.

use crate::communicator::{check_root, default_timeout, Communicator, ReduceOp};
use crate::error::{DistError, Result};
use mpi::collective::SystemOperation;
use mpi::request::{Request, Scope};
use mpi::topology::Communicator as _;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{CommunicatorCollectives, Root};
use mpi::Threading;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
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
    Collective {
        kind: Kind,
        buf: Vec<f32>,
        reply: Sender<Result<Vec<f32>>>,
    },
    Abort(i32),
}

/// A rank of `MPI_COMM_WORLD`; see the module doc.
pub struct Mpi {
    rank: usize,
    world: usize,
    timeout: Duration,
    processor: String,
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Mpi {
    /// Initialises MPI on a dedicated thread with the default timeout. Fails when MPI was
    /// already initialised in this process or the library refuses.
    pub fn init() -> Result<Mpi> {
        Mpi::with_timeout(default_timeout())
    }

    /// As [`Mpi::init`], with collectives failing after `timeout`.
    pub fn with_timeout(timeout: Duration) -> Result<Mpi> {
        let (ready_tx, ready_rx) = channel::<Result<(usize, usize, String)>>();
        let (jobs_tx, jobs_rx) = channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("quill-mpi".into())
            .spawn(move || mpi_thread(timeout, ready_tx, jobs_rx))
            .map_err(|e| backend("init", 0, format!("cannot start the MPI thread: {e}")))?;
        let (rank, world, processor) = ready_rx
            .recv()
            .map_err(|_| backend("init", 0, "the MPI thread died while initialising".into()))??;
        Ok(Mpi {
            rank,
            world,
            timeout,
            processor,
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
        let (reply, answer) = channel();
        let sent = self.jobs.lock().ok().and_then(|j| {
            j.as_ref()
                .map(|tx| tx.send(Job::Collective { kind, buf, reply }))
        });
        if !matches!(sent, Some(Ok(()))) {
            return Err(backend(op, self.rank, "the MPI thread has stopped".into()));
        }
        answer
            .recv()
            .map_err(|_| backend(op, self.rank, "the MPI thread has stopped".into()))?
    }
}

fn backend(op: &'static str, rank: usize, msg: String) -> DistError {
    DistError::Backend { op, rank, msg }
}

impl Communicator for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }
    fn backend(&self) -> &'static str {
        "mpi"
    }
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn all_reduce_vec(&self, buf: Vec<f32>, op: ReduceOp) -> Result<Vec<f32>> {
        self.submit(Kind::AllReduce(op), buf)
    }
    fn broadcast_vec(&self, buf: Vec<f32>, root: usize) -> Result<Vec<f32>> {
        check_root("broadcast", root, self.world)?;
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
            self.rank, self.world
        );
        if let Ok(j) = self.jobs.lock() {
            if let Some(tx) = j.as_ref() {
                let _ = tx.send(Job::Abort(code));
            }
        }
        // MPI_Abort ends this process from the MPI thread; this is the fallback if it could not.
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
/// universe drops at the end).
fn mpi_thread(
    timeout: Duration,
    ready: Sender<Result<(usize, usize, String)>>,
    jobs: Receiver<Job>,
) {
    let Some((universe, _threading)) = mpi::initialize_with_threading(Threading::Funneled) else {
        let _ = ready.send(Err(backend(
            "init",
            0,
            "MPI is already initialised in this process (one Mpi per process)".into(),
        )));
        return;
    };
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let processor = mpi::environment::processor_name().unwrap_or_default();
    if ready.send(Ok((rank, size, processor))).is_err() {
        return;
    }
    let mut spare: Vec<f32> = Vec::new();
    let ctx = Ctx {
        world: &world,
        jobs: &jobs,
        rank,
        size,
        timeout,
    };
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Abort(code) => world.abort(code),
            Job::Collective { kind, buf, reply } => {
                match ctx.run(kind, buf, &mut spare, &reply) {
                    Ok(answer) => {
                        let _ = reply.send(answer);
                    }
                    // The caller already has its answer; the job is broken now.
                    Err(Stuck) => ctx.stuck_forever(),
                }
            }
        }
    }
    drop(world);
    drop(universe);
}

/// A collective timed out, the caller was told, and the request completed (late) or not.
struct Stuck;

struct Ctx<'a> {
    world: &'a SimpleCommunicator,
    jobs: &'a Receiver<Job>,
    rank: usize,
    size: usize,
    timeout: Duration,
}

impl Ctx<'_> {
    /// One collective: `Ok(answer for the caller)`, or `Err(Stuck)` after a timeout (the caller
    /// has had its error). `spare` is a receive buffer kept between calls.
    fn run(
        &self,
        kind: Kind,
        mut buf: Vec<f32>,
        spare: &mut Vec<f32>,
        reply: &Sender<Result<Vec<f32>>>,
    ) -> std::result::Result<Result<Vec<f32>>, Stuck> {
        let op = kind.name();
        let elems = buf.len();
        let start = Instant::now();
        let size = self.size;
        // Length check for broadcast and all_gather; for all_reduce (the hot path) only in debug
        // builds, where a mismatch otherwise ends in MPI's own truncation error.
        let check = match kind {
            Kind::Broadcast(_) | Kind::AllGather => true,
            Kind::AllReduce(_) => cfg!(debug_assertions),
            Kind::Barrier => false,
        };
        if check {
            let mine = [elems as u64];
            let mut all = vec![0u64; size];
            mpi::request::scope(|scope| {
                let req = self
                    .world
                    .immediate_all_gather_into(scope, &mine[..], &mut all[..]);
                self.poll(req, op, elems, start, reply)
            })?;
            if all.iter().any(|&n| n != elems as u64) {
                // Every rank saw the same lengths and fails the same way: the job is still sound.
                return Ok(Err(DistError::SizeMismatch {
                    op,
                    rank: self.rank,
                    elems,
                    all: all.iter().map(|&n| n as usize).collect(),
                }));
            }
        }
        match kind {
            Kind::AllReduce(rop) => {
                // MPI writes every element: a buffer of the right length needs no zeroing (after
                // the first call `spare` is the previous input, already of this length).
                if spare.len() != elems {
                    spare.clear();
                    spare.resize(elems, 0.0);
                }
                mpi::request::scope(|scope| {
                    let req = self.world.immediate_all_reduce_into(
                        scope,
                        &buf[..],
                        &mut spare[..],
                        SystemOperation::sum(),
                    );
                    self.poll(req, op, elems, start, reply)
                })?;
                let mut out = std::mem::replace(spare, buf);
                if rop == ReduceOp::Mean {
                    let inv = 1.0 / size as f32;
                    out.iter_mut().for_each(|x| *x *= inv);
                }
                Ok(Ok(out))
            }
            Kind::Broadcast(root) => {
                let root = self.world.process_at_rank(root as i32);
                mpi::request::scope(|scope| {
                    let req = root.immediate_broadcast_into(scope, &mut buf[..]);
                    self.poll(req, op, elems, start, reply)
                })?;
                Ok(Ok(buf))
            }
            Kind::AllGather => {
                let mut out = vec![0.0f32; elems * size];
                mpi::request::scope(|scope| {
                    let req = self
                        .world
                        .immediate_all_gather_into(scope, &buf[..], &mut out[..]);
                    self.poll(req, op, elems, start, reply)
                })?;
                Ok(Ok(out))
            }
            Kind::Barrier => {
                let req = self.world.immediate_barrier();
                self.poll(req, op, elems, start, reply)?;
                Ok(Ok(buf))
            }
        }
    }

    /// Polls `req` until it completes. Past the deadline: tells the caller (`reply`), then
    /// keeps polling (the buffers must outlive the request) while watching for an abort or
    /// the handle's drop, either of which ends the job with MPI_Abort.
    fn poll<'a, D: ?Sized, S: Scope<'a>>(
        &self,
        mut req: Request<'a, D, S>,
        op: &'static str,
        elems: usize,
        start: Instant,
        reply: &Sender<Result<Vec<f32>>>,
    ) -> std::result::Result<(), Stuck> {
        let mut polls: u64 = 0;
        let mut timed_out = false;
        loop {
            match req.test() {
                Ok(_) if timed_out => return Err(Stuck),
                Ok(_) => return Ok(()),
                Err(r) => req = r,
            }
            polls += 1;
            let waited = start.elapsed();
            if !timed_out && waited >= self.timeout {
                timed_out = true;
                let _ = reply.send(Err(DistError::Timeout {
                    op,
                    rank: self.rank,
                    world: self.size,
                    elems,
                    waited,
                    timeout: self.timeout,
                }));
            }
            if timed_out {
                self.watch_jobs(op);
            }
            // MPI_Test drives the collective's progress, so poll hot at first (yielding the
            // core to the training threads), and back off once the wait is long: then the
            // other ranks have not arrived and there is nothing to progress.
            if polls < 100_000 && waited < Duration::from_millis(50) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// After a timeout: aborts the job on request, when the handle is dropped, and fails any
    /// other collective at once.
    fn watch_jobs(&self, op: &'static str) {
        loop {
            match self.jobs.try_recv() {
                Ok(Job::Abort(code)) => self.world.abort(code),
                Ok(Job::Collective { kind, reply, .. }) => {
                    let _ = reply.send(Err(backend(
                        kind.name(),
                        self.rank,
                        format!("an earlier {op} timed out; the job must be aborted"),
                    )));
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => return,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    eprintln!(
                        "rank {}: the communicator was dropped after {op} timed out; aborting the MPI job",
                        self.rank
                    );
                    self.world.abort(3)
                }
            }
        }
    }

    /// After a late completion of a timed-out collective: the ranks are out of step for good,
    /// so only abort or drop remain.
    fn stuck_forever(&self) -> ! {
        loop {
            self.watch_jobs("a collective");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
