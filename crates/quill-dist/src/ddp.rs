//! `DistributedDataParallel`: wraps a `Module` so that N ranks train one model. At construction
//! every parameter and buffer is broadcast from rank 0 (all ranks start equal); in each backward
//! pass, a post-accumulate hook on every parameter marks its gradient ready, and when a bucket's
//! parameters are all ready (and every bucket before it has been launched, so all ranks launch
//! the same all-reduces in the same order) their gradients are copied into the bucket and it goes
//! to a communication thread that averages it across the ranks while backward goes on producing
//! the next gradients. `finish_gradient_sync` (called by [`DistributedDataParallel::backward`])
//! launches what is left, waits, and writes the averaged gradients back, so `optimizer.step()`
//! sees the same gradients on every rank: the gradient of the mean loss over the union of the
//! ranks' batches.
//!
//! Gradient accumulation (PyTorch's `no_sync`): backward passes run while a
//! [`DistributedDataParallel::no_sync`] guard lives only accumulate into each parameter's local
//! `grad()` (the hooks do nothing, no collective runs); the next backward outside it all-reduces
//! what has accumulated. After k micro-batches (k - 1 under `no_sync`, the last one synced)
//! every rank holds the average over the ranks of its k-micro-batch sum; a loss scaled by each
//! micro-batch's share of the step's samples (1 / k for equal micro-batches) then gives the
//! gradient of the k-times larger batch, up to float rounding. Buffer broadcasts before a
//! training forward still happen under `no_sync`, as in PyTorch.
//!
//! Buckets hold parameters in reverse registration order (backward produces the last layers'
//! gradients first), up to `bucket_elems` f32 each. Gradients travel as f32 whatever the
//! parameters' dtype. A parameter that got no gradient in the synchronised backward contributes
//! whatever it accumulated before (under `no_sync`), or zeros, and after the sync every parameter
//! has a gradient. In training mode the buffers (BatchNorm running statistics) are broadcast from
//! rank 0 before each forward, as PyTorch's `broadcast_buffers`; batch statistics stay per rank
//! (no SyncBatchNorm), so a model with BatchNorm matches the single-process run only
//! approximately.

use crate::communicator::{Communicator, ReduceOp};
use crate::error::{DistError, Result};
use quill::nn::Module;
use quill::tensor::{GradHook, Tensor};
use quill::{DType, NDArray};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

const OP: &str = "DistributedDataParallel";

/// Tuning of [`DistributedDataParallel`].
#[derive(Clone, Copy, Debug)]
pub struct DdpOptions {
    /// Largest bucket, in f32 elements (a single larger parameter gets a bucket of its own).
    /// Default 262144 (1 MiB): small enough that the first buckets leave while backward runs.
    pub bucket_elems: usize,
    /// Broadcast the buffers from rank 0 before each training-mode forward (default true).
    pub broadcast_buffers: bool,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            bucket_elems: 1 << 18,
            broadcast_buffers: true,
        }
    }
}

struct Bucket {
    /// Indices into the parameter list, with each one's offset in the bucket.
    members: Vec<(usize, usize)>,
    len: usize,
}

/// What one step's backward has produced so far.
struct SyncState {
    rank: usize,
    params: Vec<Tensor>,
    buckets: Vec<Bucket>,
    /// The bucket of each parameter.
    place: Vec<usize>,
    ready: Vec<bool>,
    missing: Vec<usize>,
    /// Buckets handed to the communication thread this step (always a prefix).
    launched: usize,
    to_comm: Sender<(usize, Vec<f32>)>,
}

impl SyncState {
    fn on_grad(&mut self, i: usize) -> Result<()> {
        if self.ready[i] {
            return Err(DistError::Backend {
                op: OP,
                rank: self.rank,
                msg: format!(
                    "parameter {i} got a second gradient before the gradients were synchronised: \
                     call ddp.backward(loss) (or finish_gradient_sync) once per backward, and run \
                     the backward passes that only accumulate under ddp.no_sync()"
                ),
            });
        }
        if self.params[i].grad().is_none() {
            return Err(DistError::Backend {
                op: OP,
                rank: self.rank,
                msg: format!("parameter {i}'s hook ran without a gradient"),
            });
        }
        let b = self.place[i];
        self.ready[i] = true;
        self.missing[b] -= 1;
        self.launch(false)
    }

    /// The bucket `b` as one f32 buffer: each member's current gradient (what this backward
    /// produced plus what accumulated before it), zeros for a member without one.
    fn gather(&self, b: usize) -> Result<Vec<f32>> {
        let bucket = &self.buckets[b];
        let mut data = vec![0.0f32; bucket.len];
        for &(i, off) in &bucket.members {
            if let Some(g) = self.params[i].grad() {
                let v = f32_vec(g.array())?;
                data[off..off + v.len()].copy_from_slice(&v);
            }
        }
        Ok(data)
    }

    /// Hands every complete bucket after the launched prefix to the communication thread (all of
    /// them, whatever their members' readiness, when `all`).
    fn launch(&mut self, all: bool) -> Result<()> {
        while self.launched < self.buckets.len() && (all || self.missing[self.launched] == 0) {
            let b = self.launched;
            let data = self.gather(b)?;
            self.to_comm
                .send((b, data))
                .map_err(|_| DistError::Backend {
                    op: OP,
                    rank: self.rank,
                    msg: "the communication thread has stopped".into(),
                })?;
            self.launched += 1;
        }
        Ok(())
    }
}

fn f32_vec(a: &NDArray) -> Result<Vec<f32>> {
    Ok(if a.dtype() == DType::F32 {
        a.to_vec::<f32>()?
    } else {
        a.astype(DType::F32)?.to_vec::<f32>()?
    })
}

/// A module trained by every rank of a [`Communicator`] group; see the module doc.
pub struct DistributedDataParallel<M: Module> {
    module: M,
    comm: Arc<dyn Communicator>,
    opts: DdpOptions,
    state: Rc<RefCell<SyncState>>,
    from_comm: Receiver<(usize, Result<Vec<f32>>)>,
    hooks: Vec<(Tensor, u64)>,
    worker: Option<JoinHandle<()>>,
    training: Cell<bool>,
    /// False while a [`NoSync`] guard lives: backward passes only accumulate locally.
    sync: Rc<Cell<bool>>,
}

/// The scope of [`DistributedDataParallel::no_sync`]: while it lives, backward passes through
/// the wrapped module accumulate gradients locally without any communication; dropping it
/// restores the mode it found (guards nest).
#[must_use = "no_sync lasts as long as the guard: bind it with `let _g = ddp.no_sync();`"]
pub struct NoSync<'a> {
    sync: &'a Cell<bool>,
    prev: bool,
}

impl Drop for NoSync<'_> {
    fn drop(&mut self) {
        self.sync.set(self.prev);
    }
}

impl<M: Module> DistributedDataParallel<M> {
    /// Wraps `module`: checks that every rank has the same parameter sizes, broadcasts
    /// parameters and buffers from rank 0, and hooks every parameter. Every rank must call it.
    pub fn new(module: M, comm: Arc<dyn Communicator>, opts: DdpOptions) -> Result<Self> {
        let params = module.parameters();
        let rank = comm.rank();
        // Same model everywhere: compare (number of tensors, elements) across ranks.
        let sizes: Vec<usize> = params.iter().map(|p| p.numel()).collect();
        let mine = [sizes.len() as f32, sizes.iter().sum::<usize>() as f32];
        let all = comm.all_gather(&mine)?;
        if all.chunks(2).any(|c| c != mine) {
            return Err(DistError::SizeMismatch {
                op: OP,
                rank,
                elems: sizes.iter().sum(),
                all: all.chunks(2).map(|c| c[1] as usize).collect(),
            });
        }
        let everything: Vec<Tensor> = params
            .iter()
            .cloned()
            .chain(module.named_buffers().into_iter().map(|(_, t)| t))
            .collect();
        broadcast_tensors(comm.as_ref(), &everything)?;

        let mut buckets: Vec<Bucket> = Vec::new();
        let mut place = vec![0; params.len()];
        for i in (0..params.len()).rev() {
            let n = params[i].numel();
            let fits = buckets
                .last()
                .is_some_and(|b| b.len + n <= opts.bucket_elems || b.len == 0);
            if !fits {
                buckets.push(Bucket {
                    members: Vec::new(),
                    len: 0,
                });
            }
            let b = buckets.len() - 1;
            let bucket = &mut buckets[b];
            place[i] = b;
            bucket.members.push((i, bucket.len));
            bucket.len += n;
        }
        let (to_comm, jobs) = channel::<(usize, Vec<f32>)>();
        let (done, from_comm) = channel();
        let worker_comm = comm.clone();
        let worker = std::thread::Builder::new()
            .name("quill-ddp-comm".into())
            .spawn(move || {
                for (b, data) in jobs {
                    let r = worker_comm.all_reduce_vec(data, ReduceOp::Mean);
                    if done.send((b, r)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| DistError::Backend {
                op: OP,
                rank,
                msg: format!("cannot start the communication thread: {e}"),
            })?;
        let missing = buckets.iter().map(|b| b.members.len()).collect();
        let state = Rc::new(RefCell::new(SyncState {
            rank,
            ready: vec![false; params.len()],
            params: params.clone(),
            buckets,
            place,
            missing,
            launched: 0,
            to_comm,
        }));
        let sync = Rc::new(Cell::new(true));
        let hooks = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let st = state.clone();
                let syncing = sync.clone();
                let hook: GradHook = Rc::new(move |_p: &Tensor| {
                    if !syncing.get() {
                        // Under no_sync: the gradient stays in grad(), summed with the next.
                        return Ok(());
                    }
                    st.borrow_mut()
                        .on_grad(i)
                        .map_err(|e| quill::Error::InvalidArgument {
                            op: OP,
                            msg: e.to_string(),
                        })
                });
                (p.clone(), p.register_post_accumulate_grad_hook(hook))
            })
            .collect();
        Ok(DistributedDataParallel {
            module,
            comm,
            opts,
            state,
            from_comm,
            hooks,
            worker: Some(worker),
            training: Cell::new(true),
            sync,
        })
    }

    /// The wrapped module.
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The group.
    pub fn communicator(&self) -> &Arc<dyn Communicator> {
        &self.comm
    }

    /// Number of gradient buckets.
    pub fn bucket_count(&self) -> usize {
        self.state.borrow().buckets.len()
    }

    /// PyTorch's `ddp.no_sync()`: until the returned guard is dropped, backward passes only
    /// accumulate gradients into each parameter's `grad()` on this rank, with no communication
    /// ([`backward`](Self::backward) is then plain `loss.backward()`); the first synchronised
    /// backward after it averages the accumulated gradients across the ranks. Every rank must run
    /// the same number of backward passes under it, so that all join the same all-reduces.
    ///
    /// Gradient accumulation over k micro-batches, the last one synchronised:
    ///
    /// ```no_run
    /// # use quill::tensor::Tensor;
    /// # fn step(ddp: &quill_dist::DistributedDataParallel<quill::nn::Linear>,
    /// #         losses: &[Tensor]) -> quill_dist::Result<()> {
    /// let k = losses.len();
    /// for (j, loss) in losses.iter().enumerate() {
    ///     // Each micro-batch's mean loss weighs 1 / k of the step's.
    ///     let scaled = loss.mul_scalar(1.0 / k as f64)?;
    ///     if j + 1 < k {
    ///         let _g = ddp.no_sync();
    ///         ddp.backward(&scaled)?; // local only
    ///     } else {
    ///         ddp.backward(&scaled)?; // all-reduces the k-micro-batch sums
    ///     }
    /// }
    /// // optimizer.step() here, then zero_grad before the next step.
    /// # Ok(()) }
    /// ```
    ///
    /// Run a backward under `no_sync` only when no synchronised backward is half done (a plain
    /// `loss.backward()` outside it whose [`finish_gradient_sync`](Self::finish_gradient_sync)
    /// has not run yet).
    pub fn no_sync(&self) -> NoSync<'_> {
        NoSync {
            sync: &self.sync,
            prev: self.sync.replace(false),
        }
    }

    /// Whether the next backward pass all-reduces the gradients (false inside
    /// [`no_sync`](Self::no_sync)).
    pub fn syncs_gradients(&self) -> bool {
        self.sync.get()
    }

    /// `loss.backward()` (which launches buckets as gradients appear) followed by
    /// [`finish_gradient_sync`](Self::finish_gradient_sync); inside
    /// [`no_sync`](Self::no_sync), only `loss.backward()` (the gradients accumulate locally).
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        if !self.sync.get() {
            return loss.backward().map_err(Into::into);
        }
        if let Err(e) = loss.backward() {
            // Keep the step state consistent for the caller's next attempt.
            let _ = self.finish_gradient_sync();
            return Err(e.into());
        }
        self.finish_gradient_sync()
    }

    /// Launches the buckets backward did not complete (each parameter's accumulated gradient,
    /// zeros for one without a gradient), waits for every all-reduce, and writes the averaged
    /// gradients into the parameters' `grad()`. Resets the step state. It synchronises even
    /// inside [`no_sync`](Self::no_sync): calling it is asking for the collective.
    pub fn finish_gradient_sync(&self) -> Result<()> {
        let mut st = self.state.borrow_mut();
        st.launch(true)?;
        let n = st.buckets.len();
        let mut first_err = None;
        for _ in 0..n {
            let (b, r) = self.from_comm.recv().map_err(|_| DistError::Backend {
                op: OP,
                rank: self.comm.rank(),
                msg: "the communication thread has stopped".into(),
            })?;
            match r {
                Ok(avg) => {
                    if let Err(e) = write_back(&st, b, &avg) {
                        first_err.get_or_insert(e);
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        st.launched = 0;
        st.ready.iter_mut().for_each(|r| *r = false);
        let counts: Vec<usize> = st.buckets.iter().map(|b| b.members.len()).collect();
        st.missing = counts;
        first_err.map_or(Ok(()), Err)
    }

    /// Broadcasts the buffers from rank 0 (done before each training forward by default).
    pub fn broadcast_buffers(&self) -> Result<()> {
        let bufs: Vec<Tensor> = self
            .module
            .named_buffers()
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        broadcast_tensors(self.comm.as_ref(), &bufs)
    }
}

fn write_back(st: &SyncState, b: usize, avg: &[f32]) -> Result<()> {
    let bucket = &st.buckets[b];
    if avg.len() != bucket.len {
        return Err(DistError::SizeMismatch {
            op: "all_reduce",
            rank: st.rank,
            elems: bucket.len,
            all: vec![avg.len()],
        });
    }
    for &(i, off) in &bucket.members {
        let p = &st.params[i];
        let g = NDArray::from_vec(avg[off..off + p.numel()].to_vec(), p.shape())?;
        let g = if p.dtype() != DType::F32 {
            g.astype(p.dtype())?
        } else {
            g
        };
        let g = if p.device() != quill::Device::Cpu {
            g.to_device(p.device())?
        } else {
            g
        };
        p.set_grad(Some(Tensor::new(g)))?;
    }
    Ok(())
}

/// Rank 0's values of `tensors` on every rank, in one broadcast.
pub fn broadcast_tensors(comm: &dyn Communicator, tensors: &[Tensor]) -> Result<()> {
    if comm.world_size() == 1 || tensors.is_empty() {
        return Ok(());
    }
    let mut flat = Vec::with_capacity(tensors.iter().map(|t| t.numel()).sum());
    for t in tensors {
        flat.extend(f32_vec(t.array())?);
    }
    let flat = comm.broadcast_vec(flat, 0)?;
    let mut off = 0;
    for t in tensors {
        let n = t.numel();
        let src = NDArray::from_vec(flat[off..off + n].to_vec(), t.shape())?;
        t.array().assign(&src)?;
        off += n;
    }
    Ok(())
}

impl<M: Module> Module for DistributedDataParallel<M> {
    fn forward(&self, x: &Tensor) -> quill::Result<Tensor> {
        if self.training.get() && self.opts.broadcast_buffers && self.comm.world_size() > 1 {
            self.broadcast_buffers()
                .map_err(|e| quill::Error::InvalidArgument {
                    op: OP,
                    msg: e.to_string(),
                })?;
        }
        self.module.forward(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.module.named_parameters()
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.module.named_buffers()
    }
    fn set_training(&self, training: bool) {
        self.training.set(training);
        self.module.set_training(training)
    }
}

impl<M: Module> Drop for DistributedDataParallel<M> {
    fn drop(&mut self) {
        for (p, id) in &self.hooks {
            p.remove_grad_hook(*id);
        }
        // Closing the job channel ends the worker; the hooks held the only other senders.
        self.hooks.clear();
        let (dead, _) = channel();
        self.state.borrow_mut().to_comm = dead;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
