//! NDArrays on CUDA GPUs: `to_device` both ways, and the CUDA arm of the ops that have CUDA
//! kernels (copy, cast, fill, elementwise, comparisons, select, reductions, matmul). An op
//! without a CUDA kernel runs on host copies of its operands and moves its result back
//! (`host_args`): correct everywhere, fast where it matters. Without the `cuda` feature this
//! module only knows that no array is on a GPU.

use super::NDArray;
#[cfg(not(feature = "cuda"))]
use crate::device::no_cuda;
use crate::device::Device;
use quill_core::Result;

impl NDArray {
    /// True when the buffer is in GPU memory.
    pub fn is_cuda(&self) -> bool {
        matches!(self.device(), Device::Cuda(_))
    }

    /// This array on `device`: itself when it is there already, else a contiguous copy there
    /// (a view is compacted on its own device first, so only its elements move).
    pub fn to_device(&self, device: Device) -> Result<NDArray> {
        if self.device() == device {
            return Ok(self.clone());
        }
        #[cfg(feature = "cuda")]
        {
            imp::to_device(self, device)
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(no_cuda("to_device", device))
        }
    }
}

impl NDArray {
    /// Moves this array's whole buffer to `device` in place, so that every array sharing it
    /// (views, the clones a model and its optimizer hold) now lives there. The array must be
    /// the whole buffer, contiguous (a parameter, say); a view is an error.
    pub fn relocate(&self, device: Device) -> Result<()> {
        const OP: &str = "relocate";
        if self.device() == device {
            return Ok(());
        }
        if !self.is_contiguous() || self.offset() != 0 || self.numel() != self.buffer_len() {
            return Err(quill_core::Error::invalid(
                OP,
                format!(
                    "only an array that is its whole buffer can move in place; this one is a \
                     view (shape {:?}, strides {:?}, offset {}) of {} elements; use to_device",
                    self.shape(),
                    self.strides(),
                    self.offset(),
                    self.buffer_len()
                ),
            ));
        }
        self.refuse_if_pinned(OP)?;
        let moved = self.to_device(device)?;
        let storage = std::mem::replace(
            &mut *moved.write(),
            crate::device::Storage::Cpu(quill_cpu::CpuStorage::zeros(self.dtype, 0)),
        );
        *self.write() = storage;
        Ok(())
    }
}

/// For an op without CUDA kernels: `None` when every operand is on the CPU (run the CPU
/// kernel); otherwise host copies of the operands (same layouts) and the device to move the
/// result back to. Operands on two devices are an error naming both, except that a
/// one-element CPU array (a scalar) may join a GPU op.
pub(crate) fn host_args(
    op: &'static str,
    arrays: &[&NDArray],
) -> Result<Option<(Device, Vec<NDArray>)>> {
    #[cfg(feature = "cuda")]
    {
        imp::host_args(op, arrays)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (op, arrays);
        Ok(None)
    }
}

#[cfg(feature = "cuda")]
pub(crate) use imp::*;

#[cfg(feature = "cuda")]
mod imp {
    use super::NDArray;
    use crate::device::{Device, Storage};
    use quill_core::{BinaryOp, DType, Error, Layout, ReduceOp, Result, Scalar, UnaryOp};
    use quill_cuda::{ops, CudaStorage};

    fn contiguous(shape: &[usize]) -> Result<Layout> {
        Layout::contiguous(shape)
    }

    fn wrap(s: CudaStorage, shape: &[usize]) -> Result<NDArray> {
        Ok(NDArray::from_storage(Storage::Cuda(s), contiguous(shape)?))
    }

    fn cuda_of(s: &Storage) -> &CudaStorage {
        match s {
            Storage::Cuda(c) => c,
            Storage::Cpu(_) => unreachable!("callers check is_cuda first"),
        }
    }

    pub(super) fn to_device(a: &NDArray, device: Device) -> Result<NDArray> {
        match (a.device(), device) {
            (Device::Cpu, Device::Cuda(i)) => {
                let c = a.compact();
                let bytes = {
                    let g = c.read();
                    let s = g.cpu();
                    let size = c.dtype.size_in_bytes();
                    let all = crate::ndarray::bytes::cpu_bytes(s);
                    let off = c.layout.offset() * size;
                    all[off..off + c.numel() * size].to_vec()
                };
                let s = CudaStorage::from_host_bytes(i, &bytes, c.dtype)?;
                wrap(s, a.shape())
            }
            (Device::Cuda(_), Device::Cpu) => {
                let c = compact(a)?;
                let bytes = cuda_of(&c.read()).to_host_bytes()?;
                Ok(NDArray::from_storage(
                    Storage::Cpu(crate::ndarray::bytes::cpu_from_bytes(&bytes, c.dtype)),
                    contiguous(a.shape())?,
                ))
            }
            (Device::Cuda(_), Device::Cuda(_)) => to_device(&to_device(a, Device::Cpu)?, device),
            (Device::Cpu, Device::Cpu) => Ok(a.clone()),
        }
    }

    /// The whole buffer of `a` on the host with `a`'s layout (an op without CUDA kernels reads
    /// it there).
    fn host_view(a: &NDArray) -> Result<NDArray> {
        if !a.is_cuda() {
            return Ok(a.clone());
        }
        let g = a.read();
        let s = cuda_of(&g);
        let bytes = s.to_host_bytes()?;
        Ok(NDArray::from_storage(
            Storage::Cpu(crate::ndarray::bytes::cpu_from_bytes(&bytes, s.dtype())),
            a.layout.clone(),
        ))
    }

    pub(super) fn host_args(
        op: &'static str,
        arrays: &[&NDArray],
    ) -> Result<Option<(Device, Vec<NDArray>)>> {
        let Some(dev) = arrays
            .iter()
            .map(|a| a.device())
            .find(|d| *d != Device::Cpu)
        else {
            return Ok(None);
        };
        for a in arrays {
            let d = a.device();
            // A one-element CPU array is a scalar operand and may join a GPU op (as PyTorch).
            if d != dev && !(d == Device::Cpu && a.numel() == 1) {
                return Err(Error::DeviceMismatch {
                    op,
                    lhs: dev.to_string(),
                    rhs: d.to_string(),
                });
            }
        }
        let hosts = arrays.iter().map(|a| host_view(a)).collect::<Result<_>>()?;
        Ok(Some((dev, hosts)))
    }

    /// `x` on `dev`: itself when it is there, uploaded when it is a single CPU element (a
    /// scalar operand, as PyTorch allows), else an error naming both devices.
    pub(crate) fn colocate(op: &'static str, dev: Device, x: &NDArray) -> Result<NDArray> {
        let d = x.device();
        if d == dev {
            return Ok(x.clone());
        }
        if d == Device::Cpu && x.numel() == 1 {
            return to_device(x, dev);
        }
        Err(Error::DeviceMismatch {
            op,
            lhs: dev.to_string(),
            rhs: d.to_string(),
        })
    }

    /// Read guards of two arrays, one guard when they share a buffer (a second read lock on
    /// one RwLock from this thread could wait behind a queued writer).
    fn read2<'a>(
        a: &'a NDArray,
        b: &'a NDArray,
    ) -> (
        std::sync::RwLockReadGuard<'a, Storage>,
        Option<std::sync::RwLockReadGuard<'a, Storage>>,
    ) {
        let ga = a.read();
        let gb = (!b.shares_storage_with(a)).then(|| b.read());
        (ga, gb)
    }

    pub(crate) fn compact(a: &NDArray) -> Result<NDArray> {
        if a.is_contiguous() && a.layout.offset() == 0 {
            return Ok(a.clone());
        }
        deep_copy(a)
    }

    pub(crate) fn deep_copy(a: &NDArray) -> Result<NDArray> {
        let s = ops::compact(cuda_of(&a.read()), &a.layout)?;
        wrap(s, a.shape())
    }

    pub(crate) fn astype(a: &NDArray, dtype: DType) -> Result<NDArray> {
        let s = ops::cast(cuda_of(&a.read()), &a.layout, dtype)?;
        wrap(s, a.shape())
    }

    /// `dst = src`, `src` already broadcast to `dst`'s shape, cast to its dtype and not
    /// sharing its buffer.
    pub(crate) fn assign(dst: &NDArray, src: &NDArray) -> Result<()> {
        let src = colocate("assign", dst.device(), src)?;
        let s = src.read();
        let mut d = dst.write();
        match (&mut *d, &*s) {
            (Storage::Cuda(d), Storage::Cuda(s)) => ops::copy(s, &src.layout, d, &dst.layout),
            _ => unreachable!("colocated"),
        }
    }

    pub(crate) fn fill(dst: &NDArray, value: Scalar) -> Result<()> {
        let mut d = dst.write();
        match &mut *d {
            Storage::Cuda(d) => ops::fill(d, &dst.layout, value),
            Storage::Cpu(_) => unreachable!("callers check is_cuda"),
        }
    }

    /// `op` on a GPU array already in its compute dtype; `None` when no kernel exists (the
    /// caller then runs it on the host).
    pub(crate) fn unary(x: &NDArray, op: UnaryOp) -> Result<Option<NDArray>> {
        if !ops::has_unary(op.name(), x.dtype) {
            return Ok(None);
        }
        let s = ops::unary(op.name(), cuda_of(&x.read()), &x.layout)?;
        Ok(Some(wrap(s, x.shape())?))
    }

    /// `op(a, b)` for GPU operands already cast to the compute dtype and broadcast to one
    /// shape; `None` when no kernel exists.
    pub(crate) fn binary(
        op: BinaryOp,
        (a, la): (&NDArray, &Layout),
        (b, lb): (&NDArray, &Layout),
    ) -> Result<Option<NDArray>> {
        use BinaryOp::*;
        if !ops::has_binary(op.name(), a.dtype) {
            return Ok(None);
        }
        let cmp = matches!(op, Eq | Ne | Lt | Le | Gt | Ge);
        let (ga, gb) = read2(a, b);
        let (sa, sb) = (cuda_of(&ga), cuda_of(gb.as_ref().unwrap_or(&ga)));
        let s = if cmp {
            ops::compare(op.name(), (sa, la), (sb, lb))?
        } else {
            ops::binary(op.name(), (sa, la), (sb, lb))?
        };
        Ok(Some(wrap(s, la.shape())?))
    }

    pub(crate) fn where_(
        (c, lc): (&NDArray, &Layout),
        (a, la): (&NDArray, &Layout),
        (b, lb): (&NDArray, &Layout),
    ) -> Result<NDArray> {
        // Distinct copies: the select reads three buffers and one guard each is simplest.
        let c = if c.shares_storage_with(a) || c.shares_storage_with(b) {
            deep_copy(c)?
        } else {
            c.clone()
        };
        let (ga, gb) = read2(a, b);
        let gc = c.read();
        let s = ops::where_(
            (cuda_of(&gc), lc),
            (cuda_of(&ga), la),
            (cuda_of(gb.as_ref().unwrap_or(&ga)), lb),
        )?;
        wrap(s, la.shape())
    }

    /// A reduction over `axes` (sorted, distinct) of a GPU array; `None` when no kernel
    /// exists for the op or dtype.
    pub(crate) fn reduce(x: &NDArray, op: ReduceOp, axes: &[usize]) -> Result<Option<NDArray>> {
        let name = match op {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
            ReduceOp::Any | ReduceOp::All => return Ok(None),
        };
        let arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
        // Accumulate in the result dtype (integer sums in i64, as NumPy).
        let dt = if arg {
            x.dtype
        } else {
            op.result_dtype(x.dtype)
        };
        if !ops::has_reduce(name, dt) {
            return Ok(None);
        }
        if axes.iter().any(|&d| x.shape()[d] == 0) {
            return Ok(None); // empty reductions (identities, errors) stay with the CPU rules
        }
        let x = if x.dtype != dt {
            astype(x, dt)?
        } else {
            x.clone()
        };
        // Kept dims first, reduced dims next: [outer, red] with inner 1, unless the reduced
        // dims already form one contiguous block of a contiguous array.
        let nd = x.ndim();
        let block = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let sh = x.shape().to_vec();
        // The kernel reads the whole buffer: a contiguous prefix view of a longer one is copied.
        let whole = x.is_contiguous() && x.layout.offset() == 0 && x.numel() == x.buffer_len();
        let (src, dims) = if whole && block && !axes.is_empty() {
            let (i, j) = (axes[0], axes[axes.len() - 1] + 1);
            let p = |r: &[usize]| r.iter().product::<usize>();
            (x.clone(), [p(&sh[..i]), p(&sh[i..j]), p(&sh[j..])])
        } else {
            let kept: Vec<usize> = (0..nd).filter(|d| !axes.contains(d)).collect();
            let perm: Vec<isize> = kept.iter().chain(axes).map(|&d| d as isize).collect();
            let p = deep_copy(&x.permute(&perm)?)?;
            let outer: usize = kept.iter().map(|&d| sh[d]).product();
            let red: usize = axes.iter().map(|&d| sh[d]).product();
            (p, [outer, red, 1])
        };
        let s = ops::reduce(name, cuda_of(&src.read()), dims)?;
        let out_shape: Vec<usize> = (0..nd)
            .filter(|d| !axes.contains(d))
            .map(|d| sh[d])
            .collect();
        Ok(Some(wrap(s, &out_shape)?))
    }

    /// `shape` random numbers of a float `dtype` made on GPU `ordinal` by the Philox kernels
    /// (`dist` is "uniform" or "normal"): no host work, no transfer.
    pub(crate) fn random(
        ordinal: usize,
        dist: &str,
        shape: &[usize],
        seed: u64,
        dtype: DType,
    ) -> Result<NDArray> {
        if !dtype.is_float() {
            return Err(Error::invalid(
                "rand",
                format!("random numbers are float: {dtype} is not; astype after"),
            ));
        }
        let n = contiguous(shape)?.numel();
        let dev = quill_cuda::device(ordinal)?;
        wrap(ops::random(&dev, dist, n, dtype, seed, 0)?, shape)
    }

    /// `logsumexp` over `axes` of a GPU float array through the fused row kernel (one read
    /// of each row for max and sum): the reduced dims are made the trailing, contiguous ones
    /// (a copy unless they already are). `None` for integer dtypes and empty reductions,
    /// which keep the CPU rules.
    pub(crate) fn logsumexp(x: &NDArray, axes: &[usize]) -> Result<Option<NDArray>> {
        if !x.dtype.is_float()
            || !ops::has_kernel("softmax", &format!("logsumexp_{}", ops::tag(x.dtype)))
        {
            return Ok(None);
        }
        let sh = x.shape().to_vec();
        if axes.is_empty() || axes.iter().any(|&d| sh[d] == 0) {
            return Ok(None);
        }
        let nd = x.ndim();
        let trailing = axes
            .iter()
            .enumerate()
            .all(|(i, &d)| d == nd - axes.len() + i);
        let kept: Vec<usize> = (0..nd).filter(|d| !axes.contains(d)).collect();
        let src = if trailing && x.is_contiguous() && x.layout.offset() == 0 {
            x.clone()
        } else {
            let perm: Vec<isize> = kept.iter().chain(axes).map(|&d| d as isize).collect();
            deep_copy(&x.permute(&perm)?)?
        };
        let rows: usize = kept.iter().map(|&d| sh[d]).product();
        let cols: usize = axes.iter().map(|&d| sh[d]).product();
        let s = ops::softmax("logsumexp", cuda_of(&src.read()), rows, cols)?;
        let out_shape: Vec<usize> = kept.iter().map(|&d| sh[d]).collect();
        Ok(Some(wrap(s, &out_shape)?))
    }

    /// `a @ b` for GPU operands of one float dtype, broadcast to [batch.., m, k] and
    /// [batch.., k, n]; `None` for dtypes cuBLAS is not used for.
    pub(crate) fn matmul(a: &NDArray, b: &NDArray) -> Result<Option<NDArray>> {
        if !matches!(a.dtype, DType::F32 | DType::F64) {
            return Ok(None);
        }
        let nd = a.ndim();
        let (m, k, n) = (a.shape()[nd - 2], a.shape()[nd - 1], b.shape()[nd - 1]);
        let batch_shape = a.shape()[..nd - 2].to_vec();
        let batch: usize = batch_shape.iter().product();
        // One batch dim: a strided batch needs a single stride per operand; merge or compact.
        let flat = |x: &NDArray, r: usize, c: usize| -> Result<NDArray> {
            match x.reshape(&[batch as isize, r as isize, c as isize]) {
                Ok(v) => Ok(v),
                Err(_) => deep_copy(x)?.reshape(&[batch as isize, r as isize, c as isize]),
            }
        };
        let (a3, b3) = (flat(a, m, k)?, flat(b, k, n)?);
        let (ga, gb) = read2(&a3, &b3);
        let sb = cuda_of(gb.as_ref().unwrap_or(&ga));
        let s = quill_cuda::blas::matmul(cuda_of(&ga), &a3.layout, sb, &b3.layout)?;
        let shape = [batch_shape.as_slice(), &[m, n]].concat();
        Ok(Some(wrap(s, &shape)?))
    }

    /// Runs `f` on the GPU buffers of `param` (written), `grad` (read) and `state` (written),
    /// all distinct buffers on one GPU. `Ok(false)` when some buffer is not on a GPU or `f`
    /// has no kernel (`None`): the caller then updates through the host.
    pub(crate) fn update_in_place(
        param: &NDArray,
        grad: &NDArray,
        state: &[&NDArray],
        f: impl FnOnce(&mut CudaStorage, &CudaStorage, &mut [&mut CudaStorage]) -> Option<Result<()>>,
    ) -> Result<bool> {
        let gg = grad.read();
        let mut gp = param.write();
        let mut gs: Vec<_> = state.iter().map(|s| s.write()).collect();
        let Storage::Cuda(g) = &*gg else {
            return Ok(false);
        };
        let Storage::Cuda(p) = &mut *gp else {
            return Ok(false);
        };
        let mut st: Vec<&mut CudaStorage> = Vec::with_capacity(gs.len());
        for w in gs.iter_mut() {
            match &mut **w {
                Storage::Cuda(c) => st.push(c),
                Storage::Cpu(_) => return Ok(false),
            }
        }
        match f(p, g, &mut st) {
            None => Ok(false),
            Some(r) => r.map(|()| true),
        }
    }
}
