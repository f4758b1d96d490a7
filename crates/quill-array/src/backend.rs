//! The one dispatch point between arrays and devices. `Storage` has one arm per backend; each
//! op matches on it here, once, and calls that backend's `quill_core::Backend` method. Nothing
//! else in this crate names a backend crate's kernels, and no other file calls `quill_cuda`.
//!
//! The host fallback is decided here and only here: when a GPU backend answers
//! `Error::Unsupported` (no kernel for that op or dtype), the operands' whole buffers are copied
//! to the host, the CPU kernel runs with the same layouts, and the result is copied back to the
//! operands' GPU (an op that writes in place writes the host result back into its GPU buffer).
//! Correct on every device, fast where kernels exist; each such round trip is counted
//! (`fallback::host_round_trips`).
//!
//! Operands of one op must share a device; the array layer calls `colocate` first, which lets
//! a one-element CPU array (a scalar) join a GPU op, as PyTorch does.

use crate::device::Device;
use crate::NDArray;
use quill_core::{
    Along, Backend, BinaryOp, DType, Error, Layout, ReduceOp, Result, Scalar, Stat, UnaryOp, Update,
};
use quill_cpu::CpuStorage;
#[cfg(feature = "cuda")]
use quill_cuda::CudaStorage;

/// A buffer on some device. One arm per backend.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
    #[cfg(feature = "cuda")]
    Cuda(CudaStorage),
}

/// Runs `$call` on the backend that every storage in `$s..` lives on, with each `$s` rebound
/// to that backend's storage; on a GPU, `Unsupported` re-runs `$call` on host copies and moves
/// the result back. Storages on different devices are an error naming both.
macro_rules! dispatch {
    ($op:expr; $($s:ident),+ => $call:expr) => {
        match ($($s,)+) {
            ($(Storage::Cpu($s),)+) => $call.map(Storage::Cpu),
            #[cfg(feature = "cuda")]
            ($(Storage::Cuda($s),)+) => {
                let ordinal = [$($s.ordinal()),+][0];
                match $call {
                    Err(e @ Error::Unsupported { .. }) => {
                        crate::fallback::note($op, &e);
                        $(let $s = to_host($s)?; let $s = &$s;)+
                        upload($call?, ordinal)
                    }
                    r => r.map(Storage::Cuda),
                }
            }
            // Unreachable for one operand; the mixed cases for two or more.
            #[cfg(feature = "cuda")]
            #[allow(unreachable_patterns)]
            _ => Err(mismatch($op, &[$($s.device()),+])),
        }
    };
}

/// `dispatch` for an op that writes into `$d` (and reads `$s..`): the fallback writes the host
/// result back into `$d`'s GPU buffer.
macro_rules! dispatch_mut {
    ($op:expr; $d:ident $(, $s:ident)* => $call:expr) => {
        match ($d, $($s,)*) {
            (Storage::Cpu($d), $(Storage::Cpu($s),)*) => $call,
            #[cfg(feature = "cuda")]
            (Storage::Cuda($d), $(Storage::Cuda($s),)*) => match $call {
                Err(e @ Error::Unsupported { .. }) => {
                        crate::fallback::note($op, &e);
                    let back: &mut CudaStorage = $d;
                    let mut host_dst = to_host(back)?;
                    {
                        let $d = &mut host_dst;
                        $(let $s = to_host($s)?; let $s = &$s;)*
                        $call?;
                    }
                    *back = to_cuda(&host_dst, back.ordinal())?;
                    Ok(())
                }
                r => r,
            },
            #[cfg(feature = "cuda")]
            #[allow(unreachable_patterns)]
            (d, $($s,)*) => Err(mismatch($op, &[d.device() $(, $s.device())*])),
        }
    };
}

#[cfg(feature = "cuda")]
fn mismatch(op: &'static str, devices: &[Device]) -> Error {
    let lhs = devices[0];
    let rhs = devices.iter().copied().find(|d| *d != lhs).unwrap_or(lhs);
    Error::DeviceMismatch {
        op,
        lhs: lhs.to_string(),
        rhs: rhs.to_string(),
    }
}

#[cfg(feature = "cuda")]
fn to_host(s: &CudaStorage) -> Result<CpuStorage> {
    Ok(crate::ndarray::cpu_from_bytes(
        &s.to_host_bytes()?,
        s.dtype(),
    ))
}

#[cfg(feature = "cuda")]
fn to_cuda(s: &CpuStorage, ordinal: usize) -> Result<CudaStorage> {
    CudaStorage::from_host_bytes(ordinal, &crate::ndarray::cpu_bytes(s), s.dtype())
}

#[cfg(feature = "cuda")]
fn upload(s: CpuStorage, ordinal: usize) -> Result<Storage> {
    to_cuda(&s, ordinal).map(Storage::Cuda)
}

impl Storage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.dtype(),
        }
    }
    pub(crate) fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.len(),
        }
    }
    pub(crate) fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Device::Cuda(s.ordinal()),
        }
    }

    /// The CPU buffer, for host-side reads (`to_vec`, checkpoints, the data loader). Callers
    /// move GPU arrays to the host first; a GPU storage here is a quill bug.
    /// The host buffer, or an error naming `op` for a GPU one (for code that reaches a CPU
    /// kernel by a policy that already chose the CPU).
    pub(crate) fn try_cpu(&self, op: &'static str) -> Result<&CpuStorage> {
        let _ = op;
        match self {
            Storage::Cpu(s) => Ok(s),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => Err(Error::invalid(
                op,
                "internal: the CPU kernel was handed a GPU buffer",
            )),
        }
    }

    /// The GPU buffer, or an error naming `op` for a host one (for a fused op's CUDA kernel,
    /// which the policy calls only for operands on one GPU).
    #[cfg(feature = "cuda")]
    pub(crate) fn try_cuda(&self, op: &'static str) -> Result<&CudaStorage> {
        match self {
            Storage::Cuda(s) => Ok(s),
            Storage::Cpu(_) => Err(Error::invalid(
                op,
                "internal: the CUDA kernel was handed a host buffer",
            )),
        }
    }

    pub(crate) fn cpu(&self) -> &CpuStorage {
        match self {
            Storage::Cpu(s) => s,
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => unreachable_cuda(s.ordinal()),
        }
    }

    /// The address of the buffer's first element, for a foreign holder (buffer protocol,
    /// DLPack); the caller pins the buffer so that nothing moves it meanwhile.
    pub(crate) fn export_address(&mut self) -> Result<usize> {
        match self {
            Storage::Cpu(s) => Ok(quill_cpu::with_storage!(s, v => v.as_mut_ptr() as usize)),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Ok(s.export_address()? as usize),
        }
    }

    /// True when the buffer is memory another library owns (imported through DLPack).
    pub(crate) fn is_foreign(&self) -> bool {
        match self {
            Storage::Cpu(s) => quill_cpu::with_storage!(s, v => v.is_foreign()),
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => false,
        }
    }

    /// `n` elements of `dtype` on `device` that the caller overwrites before reading.
    pub(crate) fn for_overwrite(device: Device, dtype: DType, n: usize) -> Result<Storage> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(CpuStorage::for_overwrite("alloc", dtype, n)?)),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => CudaStorage::for_overwrite(i, n, dtype).map(Storage::Cuda),
            #[cfg(not(feature = "cuda"))]
            d => Err(no_cuda("alloc", d)),
        }
    }

    /// This whole buffer on `device` (same elements, same length).
    pub(crate) fn moved_to(&self, device: Device) -> Result<Storage> {
        match (self, device) {
            (Storage::Cpu(s), Device::Cpu) => Ok(Storage::Cpu(crate::ndarray::cpu_from_bytes(
                &crate::ndarray::cpu_bytes(s),
                s.dtype(),
            ))),
            #[cfg(feature = "cuda")]
            (Storage::Cpu(s), Device::Cuda(i)) => to_cuda(s, i).map(Storage::Cuda),
            #[cfg(feature = "cuda")]
            (Storage::Cuda(s), Device::Cpu) => to_host(s).map(Storage::Cpu),
            #[cfg(feature = "cuda")]
            (Storage::Cuda(s), Device::Cuda(i)) => to_cuda(&to_host(s)?, i).map(Storage::Cuda),
            #[cfg(not(feature = "cuda"))]
            (_, d) => Err(no_cuda("to_device", d)),
        }
    }

    pub(crate) fn compact(&self, l: &Layout) -> Result<Storage> {
        let s = self;
        dispatch!("compact"; s => s.compact(l))
    }
    pub(crate) fn copy_from(&mut self, ld: &Layout, src: &Storage, ls: &Layout) -> Result<()> {
        let d = self;
        dispatch_mut!("assign"; d, src => d.copy_from(ld, src, ls))
    }
    pub(crate) fn cast(&self, l: &Layout, dtype: DType) -> Result<Storage> {
        let s = self;
        dispatch!("astype"; s => s.cast(l, dtype))
    }
    pub(crate) fn fill(&mut self, l: &Layout, value: Scalar) -> Result<()> {
        let d = self;
        dispatch_mut!("fill"; d => d.fill(l, value))
    }
    pub(crate) fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Storage> {
        let s = self;
        dispatch!(op.name(); s => s.unary(op, l))
    }
    pub(crate) fn binary(
        op: BinaryOp,
        (a, la): (&Storage, &Layout),
        (b, lb): (&Storage, &Layout),
    ) -> Result<Storage> {
        dispatch!(op.name(); a, b => Backend::binary(op, (a, la), (b, lb)))
    }
    pub(crate) fn binary_inplace(
        op: BinaryOp,
        d: &mut Storage,
        ld: &Layout,
        (b, lb): (&Storage, &Layout),
    ) -> Result<()> {
        dispatch_mut!(op.name(); d, b => Backend::binary_inplace(op, d, ld, (b, lb)))
    }
    pub(crate) fn where_(
        (c, lc): (&Storage, &Layout),
        (a, la): (&Storage, &Layout),
        (b, lb): (&Storage, &Layout),
    ) -> Result<Storage> {
        dispatch!("where"; c, a, b => Backend::where_((c, lc), (a, la), (b, lb)))
    }
    pub(crate) fn reduce(&self, op: ReduceOp, l: &Layout, axes: &[usize]) -> Result<Storage> {
        let s = self;
        dispatch!(op.name(); s => s.reduce(op, l, axes))
    }
    pub(crate) fn stat(&self, stat: Stat, l: &Layout, axes: &[usize]) -> Result<Storage> {
        let s = self;
        dispatch!(stat.name(); s => s.stat(stat, l, axes))
    }
    pub(crate) fn matmul(
        (a, la): (&Storage, &Layout),
        (b, lb): (&Storage, &Layout),
    ) -> Result<Storage> {
        dispatch!("matmul"; a, b => Backend::matmul((a, la), (b, lb)))
    }
    pub(crate) fn gather(
        op: &'static str,
        (s, ls): (&Storage, &Layout),
        (i, li): (&Storage, &Layout),
        along: Along,
    ) -> Result<Storage> {
        dispatch!(op; s, i => Backend::gather(op, (s, ls), (i, li), along))
    }
    pub(crate) fn scatter_add(
        op: &'static str,
        (d, ld): (&mut Storage, &Layout),
        (s, ls): (&Storage, &Layout),
        (i, li): (&Storage, &Layout),
        along: Along,
    ) -> Result<()> {
        dispatch_mut!(op; d, s, i => Backend::scatter_add(op, (d, ld), (s, ls), (i, li), along))
    }
    pub(crate) fn sort(
        &self,
        l: &Layout,
        axis: usize,
        desc: bool,
        indices: bool,
    ) -> Result<Storage> {
        let s = self;
        dispatch!("sort"; s => s.sort(l, axis, desc, indices))
    }
    pub(crate) fn cumsum(&self, l: &Layout, axis: usize, include_initial: bool) -> Result<Storage> {
        let s = self;
        dispatch!("cumsum"; s => s.cumsum(l, axis, include_initial))
    }
    /// One fused optimizer step (see `Backend::update`); every buffer on one device.
    pub(crate) fn update(
        rule: &Update,
        (p, po): (&mut Storage, usize),
        (g, go): (&Storage, usize),
        state: &mut [(&mut Storage, usize)],
        n: usize,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        let op = rule.name();
        match (p, g) {
            (Storage::Cpu(p), Storage::Cpu(g)) => {
                let mut st = Vec::with_capacity(state.len());
                for (s, o) in state.iter_mut() {
                    match &mut **s {
                        Storage::Cpu(c) => st.push((c, *o)),
                        #[cfg(feature = "cuda")]
                        other => return Err(mismatch(op, &[Device::Cpu, other.device()])),
                    }
                }
                Backend::update(rule, (p, po), (g, go), &mut st, n)
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(p), Storage::Cuda(g)) => {
                let dev = Device::Cuda(p.ordinal());
                let mut st = Vec::with_capacity(state.len());
                for (s, o) in state.iter_mut() {
                    match &mut **s {
                        Storage::Cuda(c) => st.push((c, *o)),
                        other => return Err(mismatch(op, &[dev, other.device()])),
                    }
                }
                match Backend::update(rule, (&mut *p, po), (g, go), &mut st, n) {
                    Err(e @ Error::Unsupported { .. }) => {
                        crate::fallback::note(op, &e);
                    }
                    r => return r,
                }
                // Host fallback: every buffer down, the CPU rule, the written ones back up.
                let mut hp = to_host(p)?;
                let hg = to_host(g)?;
                let mut hs: Vec<CpuStorage> =
                    st.iter().map(|(c, _)| to_host(c)).collect::<Result<_>>()?;
                let mut refs: Vec<(&mut CpuStorage, usize)> =
                    hs.iter_mut().zip(&st).map(|(h, (_, o))| (h, *o)).collect();
                Backend::update(rule, (&mut hp, po), (&hg, go), &mut refs, n)?;
                *p = to_cuda(&hp, p.ordinal())?;
                for ((c, _), h) in st.iter_mut().zip(&hs) {
                    **c = to_cuda(h, c.ordinal())?;
                }
                Ok(())
            }
            #[cfg(feature = "cuda")]
            (p, g) => Err(mismatch(op, &[p.device(), g.device()])),
        }
    }
}

/// `shape` random numbers of a float `dtype` made on `device`: on a GPU by the Philox kernels
/// (no host work, no transfer); `None` for the CPU, whose generator the caller runs.
pub(crate) fn random_on(
    device: Device,
    normal: bool,
    shape: &[usize],
    seed: u64,
    dtype: DType,
) -> Result<Option<NDArray>> {
    match device {
        Device::Cpu => Ok(None),
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => {
            if !dtype.is_float() {
                return Err(Error::invalid(
                    "rand",
                    format!("random numbers are float: {dtype} is not; astype after"),
                ));
            }
            let l = Layout::contiguous(shape)?;
            let dev = quill_cuda::device(i)?;
            let dist = if normal { "normal" } else { "uniform" };
            let s = quill_cuda::ops::random(&dev, dist, l.numel(), dtype, seed, 0)?;
            Ok(Some(NDArray::from_storage(Storage::Cuda(s), l)))
        }
        #[cfg(not(feature = "cuda"))]
        d => {
            let _ = (normal, shape, seed, dtype);
            Err(no_cuda("rand", d))
        }
    }
}

/// The arrays of one op on one device: the first array's off-CPU device when there is one;
/// a one-element CPU array (a scalar operand) moves there, any other array on another device
/// is an error naming both.
pub(crate) fn colocate<const N: usize>(
    op: &'static str,
    arrays: [&NDArray; N],
) -> Result<[NDArray; N]> {
    #[cfg(feature = "cuda")]
    {
        let devices: [Device; N] = std::array::from_fn(|i| arrays[i].device());
        if let Some(dev) = devices.iter().copied().find(|d| *d != Device::Cpu) {
            let mut out = Vec::with_capacity(N);
            for (a, d) in arrays.iter().zip(devices) {
                out.push(if d == dev {
                    (*a).clone()
                } else if d == Device::Cpu && a.numel() == 1 {
                    a.to_device(dev)?
                } else {
                    return Err(mismatch(op, &[dev, d]));
                });
            }
            return Ok(out
                .try_into()
                .unwrap_or_else(|_| unreachable!("N arrays in")));
        }
    }
    let _ = op;
    Ok(arrays.map(|a| a.clone()))
}

/// The one device of a list of arrays (as `colocate`, for ops that move each array in
/// themselves): the first off-CPU device, else the CPU; an array elsewhere that is not a
/// one-element CPU array is an error naming both devices.
pub(crate) fn colocate_all(op: &'static str, arrays: &[&NDArray]) -> Result<Device> {
    let devices: Vec<Device> = arrays.iter().map(|a| a.device()).collect();
    let dev = devices
        .iter()
        .copied()
        .find(|d| *d != Device::Cpu)
        .unwrap_or(Device::Cpu);
    for (a, d) in arrays.iter().zip(&devices) {
        if *d != dev && !(*d == Device::Cpu && a.numel() == 1) {
            return Err(Error::DeviceMismatch {
                op,
                lhs: dev.to_string(),
                rhs: d.to_string(),
            });
        }
    }
    Ok(dev)
}

/// The number of usable CUDA GPUs (0 without the `cuda` feature or a driver).
pub(crate) fn cuda_device_count() -> usize {
    #[cfg(feature = "cuda")]
    {
        quill_cuda::device_count()
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

/// The CUDA backend's device-wide controls: memory statistics (`memory_allocated`,
/// `max_memory_allocated`, `memory_stats`), `empty_cache`, `device_count`.
#[cfg(feature = "cuda")]
pub mod cuda {
    pub use quill_cuda::{
        device_count, empty_cache, is_available, max_memory_allocated, memory_allocated,
        memory_stats, MemoryStats,
    };

    /// Waits until every queued kernel and copy on GPU `ordinal` has finished (for timing).
    pub fn synchronize(ordinal: usize) -> quill_core::Result<()> {
        quill_cuda::device(ordinal)?.synchronize()
    }
}

#[cfg(feature = "cuda")]
#[cold]
fn unreachable_cuda(ordinal: usize) -> ! {
    // Not user input: every public op moves GPU arrays to the host before host reads; reaching
    // this is a quill bug, and a wrong result would be worse.
    panic!("quill internal error: a host read was handed an array on cuda:{ordinal}")
}

/// The error for a device this build cannot use.
#[cfg(not(feature = "cuda"))]
pub(crate) fn no_cuda(op: &'static str, d: Device) -> Error {
    Error::device(
        op,
        d.to_string(),
        "this build of quill has no CUDA support; build with `--features cuda`",
    )
}
