//! `Nccl`: the communicator over NVIDIA's NCCL (cudarc's bindings, loaded at run time, so the
//! crate builds on a machine without CUDA). One process per GPU; the group is bootstrapped
//! through an existing communicator (MPI in practice): rank 0 makes the 128-byte
//! `ncclUniqueId` and broadcasts it, then every rank joins with `ncclCommInitRank`.
//!
//! The `Communicator` trait works on host `f32` buffers, so each collective copies the buffer
//! to a device buffer kept between calls (grown on demand), runs the NCCL collective on a
//! stream of its own, and copies the result back: correct for any caller, including DDP with a
//! model on the CPU, at the price of two PCIe copies per bucket. A model already on the GPU would
//! want entry points on device buffers; those are not written (see the README).
//!
//! cudarc's `Comm` is not `Send`, so, as with `Mpi`, one dedicated thread owns the CUDA context,
//! the stream, the buffers and the NCCL communicator and runs the jobs the handle sends it.
//!
//! Faults: after launching a collective the thread records an event and polls it against the
//! deadline (`QUILL_DIST_TIMEOUT`, default 60 s) instead of blocking on the stream. Past the
//! deadline the caller gets [`DistError::Timeout`], the NCCL communicator is aborted
//! (`ncclCommAbort`, which is what dropping cudarc's `Comm` does; it stops the stuck kernels),
//! and every later collective fails at once; [`Communicator::abort`] goes through the
//! bootstrap communicator (MPI_Abort ends the whole job). Joining the group (`ncclCommInitRank`
//! blocks until every rank arrives) is bounded by the same deadline. Not covered:
//! `ncclCommGetAsyncError` is not polled, because cudarc's safe `Comm` does not expose its
//! handle; an asynchronous NCCL error (a broken network link) shows up as a timeout.

use crate::communicator::{check_root, default_timeout, Communicator, ReduceOp};
use crate::error::{DistError, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cudarc::nccl::{Comm, Id};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of an `ncclUniqueId`.
const ID_BYTES: usize = 128;

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

struct Job {
    kind: Kind,
    buf: Vec<f32>,
    reply: Sender<Result<Vec<f32>>>,
}

/// One rank of an NCCL group on one GPU; see the module doc.
pub struct Nccl {
    rank: usize,
    world: usize,
    ordinal: usize,
    timeout: Duration,
    bootstrap: Arc<dyn Communicator>,
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

fn backend(op: &'static str, rank: usize, msg: impl Into<String>) -> DistError {
    DistError::Backend {
        op,
        rank,
        msg: msg.into(),
    }
}

/// Runs `f`, turning a cudarc panic (a library or symbol that could not be loaded) into a
/// message.
fn guarded<T>(
    f: impl FnOnce() -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the CUDA or NCCL library failed to load".into())),
    }
}

impl Nccl {
    /// Why NCCL cannot run on this machine (no CUDA driver, no `libnccl`, no GPU), or `None`
    /// when it can. Never panics.
    pub fn unavailable_reason() -> Option<String> {
        // SAFETY: the probes only try to open the libraries; they call nothing in them.
        let driver = catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() });
        if !driver.unwrap_or(false) {
            return Some("the CUDA driver (libcuda.so.1) was not found".into());
        }
        // SAFETY: as above.
        let nccl = catch_unwind(|| unsafe { cudarc::nccl::sys::is_culib_present() });
        if !nccl.unwrap_or(false) {
            return Some("the NCCL library (libnccl.so.2) was not found".into());
        }
        match Nccl::device_count() {
            0 => Some("no CUDA GPU is visible".into()),
            _ => None,
        }
    }

    /// The number of visible CUDA GPUs; 0 without a driver.
    pub fn device_count() -> usize {
        // SAFETY: only opens the library.
        let driver = catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() });
        if !driver.unwrap_or(false) {
            return 0;
        }
        guarded(|| CudaContext::device_count().map_err(|e| e.to_string()))
            .map_or(0, |n| n.max(0) as usize)
    }

    /// The GPU a rank should use on its node: the node-local rank from the launcher
    /// (`OMPI_COMM_WORLD_LOCAL_RANK`, `SLURM_LOCALID`, `LOCAL_RANK`), modulo the visible GPUs;
    /// 0 when none is set.
    pub fn local_device() -> usize {
        let local = ["OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"]
            .iter()
            .find_map(|k| std::env::var(k).ok()?.trim().parse::<usize>().ok())
            .unwrap_or(0);
        local % Nccl::device_count().max(1)
    }

    /// Joins an NCCL group of `bootstrap.world_size()` ranks, this one on GPU `ordinal`, with
    /// the default timeout. Every rank of `bootstrap` must call it. The bootstrap communicator
    /// carries the unique id and is kept for [`Communicator::abort`].
    pub fn from_communicator(bootstrap: Arc<dyn Communicator>, ordinal: usize) -> Result<Nccl> {
        let timeout = default_timeout();
        Nccl::with_timeout(bootstrap, ordinal, timeout)
    }

    /// As [`Nccl::from_communicator`], with collectives (and joining) failing after `timeout`.
    pub fn with_timeout(
        bootstrap: Arc<dyn Communicator>,
        ordinal: usize,
        timeout: Duration,
    ) -> Result<Nccl> {
        const OP: &str = "nccl init";
        let (rank, world) = (bootstrap.rank(), bootstrap.world_size());
        // Every rank says whether it can run NCCL, so all fail together instead of some
        // waiting in ncclCommInitRank for a rank that gave up.
        let mine = match Nccl::unavailable_reason() {
            Some(why) => Err(why),
            None if ordinal >= Nccl::device_count() => Err(format!(
                "no GPU {ordinal}: this machine has {}",
                Nccl::device_count()
            )),
            None => Ok(()),
        };
        let flags = bootstrap.all_gather(&[f32::from(u8::from(mine.is_ok()))])?;
        if let Err(why) = mine {
            return Err(backend(OP, rank, why));
        }
        if let Some(bad) = flags.iter().position(|&f| f != 1.0) {
            return Err(backend(OP, rank, format!("rank {bad} cannot run NCCL")));
        }
        // The id travels as one f32 per byte (exact), with a leading flag: rank 0 may fail to
        // make one, and the others must hear about it rather than wait.
        let mut id_buf = vec![0.0f32; ID_BYTES + 1];
        let mut made = Ok(());
        if rank == 0 {
            match guarded(|| Id::new().map_err(|e| format!("ncclGetUniqueId: {e:?}"))) {
                Ok(id) => {
                    id_buf[0] = 1.0;
                    for (d, &b) in id_buf[1..].iter_mut().zip(id.internal()) {
                        *d = f32::from(b as u8);
                    }
                }
                Err(e) => made = Err(e),
            }
        }
        bootstrap.broadcast(&mut id_buf, 0)?;
        if let Err(e) = made {
            return Err(backend(OP, rank, e));
        }
        if id_buf[0] != 1.0 {
            return Err(backend(OP, rank, "rank 0 could not make an NCCL unique id"));
        }
        let mut internal = [0 as std::ffi::c_char; ID_BYTES];
        for (d, &f) in internal.iter_mut().zip(&id_buf[1..]) {
            *d = f as u8 as std::ffi::c_char;
        }
        let id = Id::uninit(internal);

        let (ready_tx, ready_rx) = channel::<Result<()>>();
        let (jobs_tx, jobs_rx) = channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("quill-nccl".into())
            .spawn(move || {
                let setup = guarded(|| {
                    let ctx =
                        CudaContext::new(ordinal).map_err(|e| format!("cuda:{ordinal}: {e}"))?;
                    let stream = ctx.new_stream().map_err(|e| format!("new stream: {e}"))?;
                    let comm = Comm::from_rank(stream.clone(), rank, world, id)
                        .map_err(|e| format!("ncclCommInitRank: {e:?}"))?;
                    Ok((stream, comm))
                });
                match setup {
                    Ok((stream, comm)) => {
                        if ready_tx.send(Ok(())).is_ok() {
                            Worker::new(rank, world, timeout, stream, comm).run(jobs_rx);
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(backend(OP, rank, e)));
                    }
                }
            })
            .map_err(|e| backend(OP, rank, format!("cannot start the NCCL thread: {e}")))?;
        let start = Instant::now();
        match ready_rx.recv_timeout(timeout) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            // The thread stays blocked in ncclCommInitRank; it is left behind (detached).
            Err(RecvTimeoutError::Timeout) => {
                return Err(DistError::Timeout {
                    op: OP,
                    rank,
                    world,
                    elems: 0,
                    waited: start.elapsed(),
                    timeout,
                })
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(backend(OP, rank, "the NCCL thread died while joining"))
            }
        }
        Ok(Nccl {
            rank,
            world,
            ordinal,
            timeout,
            bootstrap,
            jobs: Mutex::new(Some(jobs_tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The GPU this rank uses.
    pub fn device_ordinal(&self) -> usize {
        self.ordinal
    }

    fn submit(&self, kind: Kind, buf: Vec<f32>) -> Result<Vec<f32>> {
        let op = kind.name();
        let (reply, answer) = channel();
        let sent = self
            .jobs
            .lock()
            .ok()
            .and_then(|j| j.as_ref().map(|tx| tx.send(Job { kind, buf, reply })));
        if !matches!(sent, Some(Ok(()))) {
            return Err(backend(op, self.rank, "the NCCL thread has stopped"));
        }
        answer
            .recv()
            .map_err(|_| backend(op, self.rank, "the NCCL thread has stopped"))?
    }
}

impl Communicator for Nccl {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }
    fn backend(&self) -> &'static str {
        "nccl"
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
        self.bootstrap.abort(code, msg)
    }
}

impl Drop for Nccl {
    fn drop(&mut self) {
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

/// The NCCL thread's state: the communicator (gone once aborted) and device buffers reused
/// across collectives.
struct Worker {
    rank: usize,
    world: usize,
    timeout: Duration,
    stream: Arc<CudaStream>,
    comm: Option<Comm>,
    send: Option<CudaSlice<f32>>,
    recv: Option<CudaSlice<f32>>,
}

type Outcome<T> = std::result::Result<T, DistError>;

impl Worker {
    fn new(
        rank: usize,
        world: usize,
        timeout: Duration,
        stream: Arc<CudaStream>,
        comm: Comm,
    ) -> Self {
        Worker {
            rank,
            world,
            timeout,
            stream,
            comm: Some(comm),
            send: None,
            recv: None,
        }
    }

    fn run(mut self, jobs: Receiver<Job>) {
        for Job { kind, buf, reply } in jobs {
            let op = kind.name();
            let answer = if self.comm.is_none() {
                Err(backend(
                    op,
                    self.rank,
                    "an earlier collective timed out and the NCCL communicator was aborted",
                ))
            } else {
                let start = Instant::now();
                let r = guarded(|| Ok(self.collective(kind, buf, start)))
                    .unwrap_or_else(|e| Err(backend(op, self.rank, e)));
                if matches!(r, Err(DistError::Timeout { .. })) {
                    self.abort_comm();
                }
                r
            };
            let _ = reply.send(answer);
        }
        self.abort_comm();
    }

    /// Aborts the NCCL communicator (cudarc's `Comm` calls `ncclCommAbort` when dropped) before
    /// the buffers a stuck kernel may still use are freed.
    fn abort_comm(&mut self) {
        if let Some(c) = self.comm.take() {
            // cudarc panics if the abort itself fails; nothing more can be done then.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(c)));
        }
        self.send = None;
        self.recv = None;
    }

    fn err(&self, op: &'static str, e: impl std::fmt::Debug) -> DistError {
        backend(op, self.rank, format!("{e:?}"))
    }

    /// Device buffers of at least `send` and `recv` elements.
    fn buffers(&mut self, op: &'static str, send: usize, recv: usize) -> Outcome<()> {
        for (slot, n) in [(&mut self.send, send), (&mut self.recv, recv)] {
            if slot.as_ref().is_none_or(|s| s.len() < n) {
                *slot = None;
                let s = self
                    .stream
                    .alloc_zeros::<f32>(n.max(1))
                    .map_err(|e| backend(op, self.rank, format!("cuda alloc: {e}")))?;
                *slot = Some(s);
            }
        }
        Ok(())
    }

    fn collective(&mut self, kind: Kind, mut buf: Vec<f32>, start: Instant) -> Outcome<Vec<f32>> {
        let op = kind.name();
        let n = buf.len();
        if matches!(kind, Kind::Broadcast(_) | Kind::AllGather) {
            let lens = self.gather_lengths(op, n, start)?;
            if lens.iter().any(|&l| l != n) {
                return Err(DistError::SizeMismatch {
                    op,
                    rank: self.rank,
                    elems: n,
                    all: lens,
                });
            }
        }
        let (send_n, recv_n) = match kind {
            Kind::AllGather => (n, n * self.world),
            Kind::Barrier => (1, 1),
            _ => (n, n),
        };
        if send_n == 0 {
            return Ok(buf);
        }
        self.buffers(op, send_n, recv_n)?;
        let (stream, comm) = (&self.stream, self.comm.as_ref().expect("checked by run"));
        let (send, recv) = (
            self.send.as_mut().expect("allocated"),
            self.recv.as_mut().expect("allocated"),
        );
        let err = |e: &dyn std::fmt::Debug| backend(op, self.rank, format!("{e:?}"));
        if !matches!(kind, Kind::Barrier) {
            stream
                .memcpy_htod(&buf, &mut send.slice_mut(0..n))
                .map_err(|e| err(&e))?;
        }
        {
            let src = send.slice(0..send_n);
            let mut dst = recv.slice_mut(0..recv_n);
            let launched = match kind {
                Kind::AllReduce(ReduceOp::Sum) | Kind::Barrier => {
                    comm.all_reduce(&src, &mut dst, &cudarc::nccl::ReduceOp::Sum)
                }
                Kind::AllReduce(ReduceOp::Mean) => {
                    comm.all_reduce(&src, &mut dst, &cudarc::nccl::ReduceOp::Avg)
                }
                Kind::Broadcast(root) => comm.broadcast(Some(&src), &mut dst, root as i32),
                Kind::AllGather => comm.all_gather(&src, &mut dst),
            };
            launched.map_err(|e| err(&e))?;
        }
        self.wait(op, n, start)?;
        if matches!(kind, Kind::Barrier) {
            return Ok(buf);
        }
        buf.resize(recv_n, 0.0);
        let recv = self.recv.as_ref().expect("allocated");
        self.stream
            .memcpy_dtoh(&recv.slice(0..recv_n), &mut buf[..])
            .map_err(|e| self.err(op, e))?;
        self.stream.synchronize().map_err(|e| self.err(op, e))?;
        Ok(buf)
    }

    /// Every rank's length (an all-gather of one f64 each, exact for any real length).
    fn gather_lengths(
        &mut self,
        op: &'static str,
        n: usize,
        start: Instant,
    ) -> Outcome<Vec<usize>> {
        let comm = self.comm.as_ref().expect("checked by run");
        let mine = self
            .stream
            .clone_htod(&[n as f64])
            .map_err(|e| self.err(op, e))?;
        let mut all = self
            .stream
            .alloc_zeros::<f64>(self.world)
            .map_err(|e| self.err(op, e))?;
        comm.all_gather(&mine, &mut all)
            .map_err(|e| self.err(op, e))?;
        self.wait(op, n, start)?;
        let lens = self.stream.clone_dtoh(&all).map_err(|e| self.err(op, e))?;
        Ok(lens.into_iter().map(|l| l as usize).collect())
    }

    /// Waits for the work queued on the stream by polling an event against the deadline (a
    /// blocking synchronise would wait forever for a rank that never arrives).
    fn wait(&self, op: &'static str, elems: usize, start: Instant) -> Outcome<()> {
        let event = self
            .stream
            .record_event(None)
            .map_err(|e| self.err(op, e))?;
        let mut polls: u64 = 0;
        loop {
            if event.try_is_complete().map_err(|e| self.err(op, e))? {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= self.timeout {
                return Err(DistError::Timeout {
                    op,
                    rank: self.rank,
                    world: self.world,
                    elems,
                    waited,
                    timeout: self.timeout,
                });
            }
            polls += 1;
            if polls < 10_000 && waited < Duration::from_millis(20) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}
