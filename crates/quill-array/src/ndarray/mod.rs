//! `NDArray`: a shared buffer plus a `Layout` (shape, signed strides, offset), a dtype and a
//! device. Views share the buffer, so a write through one is seen by all. The buffer sits behind
//! a read-write lock: kernels hold it only while they run, and writes into a buffer that is also
//! being read go through a temporary, so aliasing never gives a wrong answer.

mod advanced;
pub use advanced::IndexArg;
mod assign;
mod bytes;
mod complex;
mod conv;
mod create;
mod display;
mod elementwise;
mod export;
pub use export::Pinned;
mod index;
mod join;
mod mask;
mod matmul;
mod methods;
mod nextafter;
mod operators;
mod pad;
mod reduce;
mod sort;
mod transfer;
mod update;
mod views;

pub(crate) use bytes::{cpu_bytes, cpu_from_bytes};
pub(crate) use conv::{compute_dtype, prepared};
pub(crate) use join::axis_range;

use crate::backend::Storage;
use crate::device::Device;
use quill_core::Element;
use quill_core::{DType, Error, Layout, Result};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// What the views of one buffer share: the buffer, and how many foreign holders (Python's
/// buffer protocol, DLPack) currently have its address, so that nothing moves it meanwhile.
struct Shared {
    lock: RwLock<Storage>,
    pins: AtomicUsize,
}

/// An N-dimensional array: a buffer shared by every view of it (on a device, of one dtype)
/// seen through a [`Layout`] (shape, signed strides in elements, offset). Cloning is cheap and
/// shares the buffer; views (`slice`, `permute`, `broadcast_to`, ...) are new layouts over it.
#[derive(Clone)]
pub struct NDArray {
    storage: Arc<Shared>,
    layout: Layout,
    dtype: DType,
    /// Set on a view made by broadcasting (a dim of stride 0 and size > 1) and kept by every
    /// view of it: an index that drops the broadcast dim must not make the shared elements
    /// writable (NumPy's read-only broadcast views). Copies are writable.
    readonly: bool,
}

/// Refuses a buffer of `numel` elements of `dtype` larger than this machine's memory and swap:
/// such an allocation cannot succeed, and a failed allocation aborts the process.
pub(crate) fn check_alloc(op: &'static str, numel: usize, dtype: DType) -> Result<()> {
    quill_cpu::dispatch_dtype!(dtype, T => quill_cpu::pool::check::<T>(op, numel).map(|_| ()))
}

/// Read guards of the buffers of `N` arrays: one guard per distinct buffer (a second read lock
/// on one RwLock from this thread could wait behind a queued writer), taken in address order
/// as every multi-buffer lock in quill is, so two threads cannot deadlock.
pub(crate) struct Reads<'a, const N: usize> {
    guards: [Option<RwLockReadGuard<'a, Storage>>; N],
    slot: [usize; N],
}

impl<'a, const N: usize> Reads<'a, N> {
    pub(crate) fn new(arrays: [&'a NDArray; N]) -> Reads<'a, N> {
        let mut order: [usize; N] = std::array::from_fn(|i| i);
        order.sort_by_key(|&i| Arc::as_ptr(&arrays[i].storage));
        let mut guards: [Option<RwLockReadGuard<'a, Storage>>; N] = std::array::from_fn(|_| None);
        let mut slot = [0; N];
        let mut held: Option<(*const Shared, usize)> = None;
        for i in order {
            let p = Arc::as_ptr(&arrays[i].storage);
            slot[i] = match held {
                Some((q, g)) if q == p => g,
                _ => {
                    guards[i] = Some(arrays[i].read());
                    held = Some((p, i));
                    i
                }
            };
        }
        Reads { guards, slot }
    }

    /// The storage of array `i`.
    pub(crate) fn get(&self, i: usize) -> &Storage {
        self.guards[self.slot[i]]
            .as_deref()
            .expect("every slot points at a held guard")
    }
}

impl NDArray {
    pub(crate) fn from_storage(storage: Storage, layout: Layout) -> NDArray {
        let dtype = storage.dtype();
        NDArray {
            storage: Arc::new(Shared {
                lock: RwLock::new(storage),
                pins: AtomicUsize::new(0),
            }),
            layout,
            dtype,
            readonly: false,
        }
    }

    /// A new array over the same buffer.
    pub(crate) fn with_layout(&self, layout: Layout) -> NDArray {
        NDArray {
            storage: self.storage.clone(),
            layout,
            dtype: self.dtype,
            readonly: self.readonly,
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Storage> {
        self.storage.lock.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Storage> {
        self.storage.lock.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A contiguous array of `shape` over a fresh storage (a kernel's output).
    pub(crate) fn fresh(storage: Storage, shape: &[usize]) -> Result<NDArray> {
        Ok(NDArray::from_storage(storage, Layout::contiguous(shape)?))
    }

    /// The extent of each dimension.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }
    /// Strides in elements; negative for reversed axes, 0 for broadcast ones.
    pub fn strides(&self) -> &[isize] {
        self.layout.strides()
    }
    /// Position of the first element in the buffer, in elements.
    pub fn offset(&self) -> usize {
        self.layout.offset()
    }
    /// Shape, strides and offset together.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The number of dimensions (0 for a scalar).
    pub fn ndim(&self) -> usize {
        self.layout.ndim()
    }
    /// The number of elements: the product of the shape (1 for rank 0).
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Where the buffer lives.
    pub fn device(&self) -> Device {
        self.read().device()
    }
    /// True for a broadcast view and every view of one: writes through it are refused.
    pub fn is_readonly(&self) -> bool {
        self.readonly || self.layout.broadcast_dim().is_some()
    }
    /// C-contiguous (size-1 dims ignored): the elements are one run of the buffer, in order.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }
    /// Length of the underlying buffer in elements.
    pub fn buffer_len(&self) -> usize {
        self.read().len()
    }
    /// True when both arrays are views of one buffer.
    pub fn shares_storage_with(&self, other: &NDArray) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// The elements in C order, as `T`, which must be the array's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.with_host_slice(|s: &[T]| s.to_vec())
    }

    /// Runs `f` on the elements in C order as one host slice of `T` (the array's dtype),
    /// under a read lock: no copy when the array is contiguous in CPU memory, a compact host
    /// copy otherwise. How the layers above read data without touching buffers.
    pub fn with_host_slice<T: Element, R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch {
                op: "to_vec",
                expected: self.dtype,
                got: T::DTYPE,
            });
        }
        if self.numel() == 0 {
            // An empty view's offset may sit past its buffer's end; there is nothing to read.
            return Ok(f(&[]));
        }
        let c = if self.is_cuda() {
            self.to_device(Device::Cpu)?
        } else {
            self.compact()?
        };
        let guard = c.read();
        let (off, n) = (c.layout.offset(), c.numel());
        match guard.cpu().elements::<T>() {
            Some(s) => Ok(f(&s[off..off + n])),
            // An `Element` defined outside quill, of this dtype: its values converted.
            None => {
                let v: Vec<T> = quill_cpu::with_storage!(guard.cpu(), b => {
                    b[off..off + n].iter().map(|x| T::from_scalar(x.to_scalar())).collect()
                });
                Ok(f(&v))
            }
        }
    }

    /// The one element of a size-1 array, cast to `T` with NumPy's rules.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::invalid(
                "item",
                format!(
                    "only arrays with one element can be read as a scalar; shape {:?} has {}",
                    self.shape(),
                    self.numel()
                ),
            ));
        }
        if self.is_cuda() {
            return self.to_device(Device::Cpu)?.item();
        }
        Ok(quill_cpu::cast::read_as::<T>(
            self.read().cpu(),
            self.layout.offset(),
        ))
    }
}
