//! `quill.backend_ndarray.NDArray`: needle's NDArray over quill's (views share the buffer,
//! any strides, negative steps), with NumPy semantics where needle is silent (integer indices
//! drop their dim, comparisons give bool arrays, dtype promotion).

use crate::convert::{
    big_int_of, dtype_of, fill_scalar, from_numpy_like, index_of, np_name, scalar_of, shape_args,
    to_numpy, Q,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::IntoPyObjectExt;
use quill::{BinaryOp, DType, Device, NDArray as Core, Scalar, UnaryOp};

/// A device as needle names it: `quill.cpu()`, `quill.cuda()`.
#[pyclass(name = "BackendDevice", module = "quill.backend_ndarray", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyDevice {
    pub device: Device,
}

#[quill_py_guard::guard("Device")]
#[pymethods]
impl PyDevice {
    /// The device kind as a string: 'cpu' or 'cuda' (without the index).
    #[getter]
    fn name(&self) -> String {
        match self.device {
            Device::Cpu => "cpu".into(),
            Device::Cuda(_) => "cuda".into(),
        }
    }
    /// Whether arrays can live on this device in this build, on this machine.
    fn enabled(&self) -> bool {
        match self.device {
            Device::Cpu => true,
            Device::Cuda(i) => Device::cuda_device_count() > i,
        }
    }
    /// repr(d): the call that makes this device: 'cpu()', 'cuda()' or 'cuda(i)'.
    fn __repr__(&self) -> String {
        match self.device {
            Device::Cpu => "cpu()".into(),
            Device::Cuda(0) => "cuda()".into(),
            Device::Cuda(i) => format!("cuda({i})"),
        }
    }
    /// hash(d), consistent with ==, so devices work as dict keys and in sets.
    fn __hash__(&self) -> u64 {
        match self.device {
            Device::Cpu => 0,
            Device::Cuda(i) => 1 + i as u64,
        }
    }
    /// needle's `BackendDevice.__getattr__`: a name this class does not define is looked up
    /// in the lower seam (`quill._needle_backend`, needle's `ndarray_backend_cpu` surface),
    /// so `cpu().matmul_tiled(...)`, `cpu().__tile_size__` and `cpu().Array(n)` work; `Array`
    /// allocates on this device. Other names are an AttributeError.
    fn __getattr__<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("quill._needle_backend")?
            .getattr("device_attribute")?
            .call1((slf, name))
    }
}

/// The CPU device (a BackendDevice), where arrays live unless a device is given.
#[quill_py_guard::guard]
#[pyfunction]
pub fn cpu() -> PyDevice {
    PyDevice {
        device: Device::Cpu,
    }
}

/// The CUDA device with ordinal `index` (0: the first GPU). Making it checks nothing, so call
/// `.enabled()` before putting arrays on it.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (index = 0))]
pub fn cuda(index: usize) -> PyDevice {
    PyDevice {
        device: Device::Cuda(index),
    }
}

/// A quill array over the memory of any DLPack producer (NumPy, PyTorch, JAX, quill): shared
/// where it can be (writes show on both sides), copied when `copy=True`, for read-only, bool
/// or misaligned memory, or when `device` is another device.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (x, /, *, device = None, copy = None))]
pub fn from_dlpack(
    x: &Bound<'_, PyAny>,
    device: Option<PyRef<PyDevice>>,
    copy: Option<bool>,
) -> PyResult<PyNDArray> {
    let a = crate::export::from_dlpack(x, copy)?;
    let a = match device {
        Some(d) => a.to_device(d.device).q()?,
        None => a,
    };
    Ok(PyNDArray::wrap(a))
}

/// The device new arrays get when none is given: always `cpu()`.
#[quill_py_guard::guard]
#[pyfunction]
pub fn default_device() -> PyResult<PyDevice> {
    cpu()
}

#[pyclass(name = "NDArray", module = "quill.backend_ndarray", subclass)]
#[derive(Clone)]
pub struct PyNDArray {
    pub inner: Core,
}

impl PyNDArray {
    pub fn wrap(inner: Core) -> PyNDArray {
        PyNDArray { inner }
    }
}

/// The other operand of a binary op: an NDArray, a Python number (weak, as NumPy 2), or
/// anything NumPy can make an array of.
enum Operand {
    Array(Core),
    Scalar(Scalar),
    /// A Python int beyond i64 (its float value): weak like any Python int.
    BigInt(f64),
}

fn operand(x: &Bound<'_, PyAny>) -> PyResult<Operand> {
    if let Ok(a) = x.extract::<PyRef<PyNDArray>>() {
        return Ok(Operand::Array(a.inner.clone()));
    }
    if let Some(s) = scalar_of(x) {
        return Ok(Operand::Scalar(s));
    }
    if let Some(v) = big_int_of(x)? {
        return Ok(Operand::BigInt(v));
    }
    Ok(Operand::Array(from_numpy_like(x, None)?))
}

/// `a op v` for a Python int `v` beyond i64, as NumPy 2: a float array takes it as a float,
/// a comparison is decided by its sign (it lies past every value of an integer dtype), any
/// other op with an integer or bool array is an OverflowError.
fn big_int_scalar(a: &Core, op: BinaryOp, v: f64, reversed: bool) -> PyResult<Scalar> {
    // Float ops (true divide, atan2) take integers as floats, as NumPy.
    let compare = op.is_comparison() && a.dtype() != DType::Bool;
    if a.dtype().is_float() || compare || matches!(op, BinaryOp::Div | BinaryOp::Atan2) {
        return Ok(Scalar::F(v));
    }
    let _ = reversed;
    Err(pyo3::exceptions::PyOverflowError::new_err(format!(
        "{}: Python integer {v:e} out of bounds for {} (NumPy 2 rule); astype the array to a \
         float dtype first",
        op.name(),
        a.dtype()
    )))
}

fn binary(a: &Core, op: BinaryOp, other: &Bound<'_, PyAny>, reversed: bool) -> PyResult<Core> {
    match operand(other)? {
        Operand::Scalar(s) => a.binary_scalar(op, s, reversed).q(),
        // An integer array against it: NumPy decides by the sign. (A bool array has no such
        // rule: the int becomes int64 and overflows, below.)
        Operand::BigInt(v) if op.is_comparison() && a.dtype().is_int() => {
            // Every element is nearer zero than v: the answer is that of 0 against v.
            let (l, r) = if reversed { (v, 0.0) } else { (0.0, v) };
            let truth = op.eval_f64(l, r) != 0.0;
            Core::full(a.shape(), truth, DType::Bool)
                .and_then(|t| t.to_device(a.device()))
                .q()
        }
        Operand::BigInt(v) => {
            let s = big_int_scalar(a, op, v, reversed)?;
            a.binary_scalar(op, s, reversed).q()
        }
        Operand::Array(b) if reversed => b.binary(op, a).q(),
        Operand::Array(b) => a.binary(op, &b).q(),
    }
}

fn in_place(a: &Core, op: BinaryOp, other: &Bound<'_, PyAny>) -> PyResult<()> {
    a.check_writable(op.name()).q()?;
    match operand(other)? {
        Operand::Scalar(s) => a.binary_scalar_assign(op, s).q(),
        Operand::BigInt(v) => {
            let s = big_int_scalar(a, op, v, false)?;
            a.binary_scalar_assign(op, s).q()
        }
        Operand::Array(b) => a.binary_assign(op, &b).q(),
    }
}

/// The value of `a[...] = value`: a Python number (range-checked against `dtype` where it is
/// written) or an array.
enum Fill {
    Scalar(Scalar),
    Array(Core),
}

fn fill_value(value: &Bound<'_, PyAny>, dtype: DType) -> PyResult<Fill> {
    if let Ok(a) = value.extract::<PyRef<PyNDArray>>() {
        return Ok(Fill::Array(a.inner.clone()));
    }
    match fill_scalar(value, dtype)? {
        Some(s) => Ok(Fill::Scalar(s)),
        None => Ok(Fill::Array(from_numpy_like(value, None)?)),
    }
}

/// A boolean NDArray used as an index (NumPy's mask indexing).
fn bool_mask(idx: &Bound<'_, PyAny>) -> Option<Core> {
    let a = idx.extract::<PyRef<PyNDArray>>().ok()?;
    (a.inner.dtype() == DType::Bool).then(|| a.inner.clone())
}

/// Mask shape errors are IndexErrors, as NumPy's.
fn index_err(e: quill::Error) -> PyErr {
    match e {
        quill::Error::InvalidArgument { .. } => {
            pyo3::exceptions::PyIndexError::new_err(e.to_string())
        }
        e => crate::convert::err(e),
    }
}

fn axes_of(axis: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<isize>>> {
    match axis {
        None => Ok(None),
        Some(a) if a.is_none() => Ok(None),
        Some(a) => match a.extract::<isize>() {
            Ok(i) => Ok(Some(vec![i])),
            Err(_) => a.extract::<Vec<isize>>().map(Some),
        },
    }
}

fn usize_shape(v: &[isize], op: &str) -> PyResult<Vec<usize>> {
    v.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| PyValueError::new_err(format!("{op}: negative dimension {d}")))
        })
        .collect()
}

#[quill_py_guard::guard("NDArray")]
#[pymethods]
impl PyNDArray {
    /// `NDArray(data, device=None, dtype=None)`: a new array, always a copy, from an NDArray or
    /// anything `numpy.asarray` takes. Python floats become float32 (needle's default), NumPy
    /// arrays and scalars keep their dtype, `dtype` converts; the array is put on `device`, the CPU
    /// when None (even when `data` is a GPU NDArray).
    #[new]
    #[pyo3(signature = (data, device = None, dtype = None))]
    fn new(
        data: &Bound<'_, PyAny>,
        device: Option<PyRef<PyDevice>>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dtype = dtype.map(dtype_of).transpose()?;
        let a = match data.extract::<PyRef<PyNDArray>>() {
            Ok(o) => o.inner.astype(dtype.unwrap_or(o.inner.dtype())).q()?,
            Err(_) => from_numpy_like(data, dtype)?,
        };
        let dev = device.map_or(Device::Cpu, |d| d.device);
        Ok(PyNDArray::wrap(a.to_device(dev).q()?))
    }

    /// needle's `make`: a view of `shape` / `strides` / `offset` over `handle`'s buffer, or a
    /// new zero-filled buffer just large enough for them.
    #[staticmethod]
    #[pyo3(signature = (shape, strides = None, device = None, handle = None, offset = 0, dtype = None))]
    fn make(
        shape: Vec<usize>,
        strides: Option<Vec<isize>>,
        device: Option<PyRef<PyDevice>>,
        handle: Option<PyRef<PyNDArray>>,
        offset: usize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dtype = dtype.map(dtype_of).transpose()?.unwrap_or(DType::F32);
        let too_big = || PyValueError::new_err(format!("make: shape {shape:?} is too large"));
        let strides = match strides {
            Some(s) => s,
            None => {
                let mut s = vec![1isize; shape.len()];
                for i in (0..shape.len().saturating_sub(1)).rev() {
                    let d = isize::try_from(shape[i + 1].max(1)).map_err(|_| too_big())?;
                    s[i] = s[i + 1].checked_mul(d).ok_or_else(too_big)?;
                }
                s
            }
        };
        let base = match handle {
            Some(h) => h.inner.clone(),
            None => {
                if strides.iter().any(|&s| s < 0) {
                    return Err(PyValueError::new_err(
                        "make: negative strides need a handle (a buffer to view)",
                    ));
                }
                let mut reach = 0usize;
                for (&d, &s) in shape.iter().zip(&strides) {
                    let r = d
                        .saturating_sub(1)
                        .checked_mul(s as usize)
                        .ok_or_else(too_big)?;
                    reach = reach.checked_add(r).ok_or_else(too_big)?;
                }
                let len = if shape.contains(&0) {
                    0
                } else {
                    offset
                        .checked_add(reach)
                        .and_then(|v| v.checked_add(1))
                        .ok_or_else(too_big)?
                };
                Core::zeros(&[len], dtype).q()?
            }
        };
        let v = base.as_strided(&shape, &strides, offset).q()?;
        let dev = device.map_or(v.device(), |d| d.device);
        Ok(PyNDArray::wrap(v.to_device(dev).q()?))
    }

    /// The dimensions as a tuple of ints, as NumPy's `.shape` (`()` for a 0-d array).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape())
    }
    /// The step between neighbours along each axis, a tuple of ints counted in elements (needle's
    /// convention; NumPy's `.strides` counts bytes). A stride is 0 along a broadcast axis and
    /// negative along a flipped one.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.strides())
    }
    /// Where this view's first element sits in its buffer, in elements (needle's `_offset`).
    #[getter]
    fn offset(&self) -> usize {
        self.inner.offset()
    }
    /// The number of elements, the product of `shape` (1 for a 0-d array).
    #[getter]
    fn size(&self) -> usize {
        self.inner.numel()
    }
    /// The number of axes, `len(shape)`.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.ndim()
    }
    /// The element type as NumPy's name: 'float32', 'int64', 'bool', 'bfloat16', ...
    #[getter]
    fn dtype(&self) -> &'static str {
        np_name(self.inner.dtype())
    }
    /// The BackendDevice that holds this array's buffer.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.inner.device(),
        }
    }
    /// len(a): the length of the first axis; a 0-d array raises TypeError.
    fn __len__(&self) -> PyResult<usize> {
        self.inner
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d array"))
    }

    /// Length in elements of the buffer this array views (every view of it gives the same):
    /// the `.size` of needle's `_handle`.
    #[getter]
    fn _buffer_size(&self) -> usize {
        self.inner.buffer_len()
    }
    /// Address of element 0 of the buffer this array views, not of the view's first element,
    /// so every view of one buffer gives the same number, and writes into the buffer leave it
    /// as it is: the `.ptr()` of needle's `_handle`. A host address for CPU arrays, a device
    /// address for GPU ones; an identity to compare, never dereferenced by quill's Python.
    fn _buffer_address(&self) -> PyResult<usize> {
        let pinned = self.inner.pin().q()?;
        let before = self.inner.offset() * self.inner.dtype().size_in_bytes();
        Ok(pinned.address().wrapping_sub(before))
    }
    /// needle's `is_compact`: contiguous and covering its whole buffer.
    fn is_compact(&self) -> bool {
        let a = &self.inner;
        a.is_contiguous() && a.offset() == 0 && a.numel() == a.buffer_len()
    }
    /// A compact array: this one when it already is (and is writable), else a copy.
    fn compact(&self) -> PyResult<Self> {
        Ok(if self.is_compact()? && !self.inner.is_readonly() {
            self.clone()
        } else {
            let c = if self.inner.is_contiguous() {
                self.inner.deep_copy().q()?
            } else {
                self.inner.compact().q()?
            };
            PyNDArray::wrap(c)
        })
    }
    /// The array with a new shape, given as ints or one tuple (one dim may be -1): a view of the
    /// same buffer when the strides allow one, else a C-order copy, as NumPy. A shape of another
    /// size is a ValueError.
    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<'_, PyTuple>) -> PyResult<Self> {
        Ok(PyNDArray::wrap(
            self.inner.reshape(&shape_args(shape)?).q()?,
        ))
    }
    /// The axes reordered, given as ints or one tuple (`axes[i]` is the source of result axis i, as
    /// `np.transpose(a, axes)`): a view of the same buffer, no copy.
    #[pyo3(signature = (*axes))]
    fn permute(&self, axes: &Bound<'_, PyTuple>) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.permute(&shape_args(axes)?).q()?))
    }
    /// A read-only view of `shape` (ints or one tuple) under NumPy's broadcasting rules, stride 0
    /// along repeated axes, as `np.broadcast_to`. Incompatible shapes and negative dims are a
    /// ValueError.
    #[pyo3(signature = (*shape))]
    fn broadcast_to(&self, shape: &Bound<'_, PyTuple>) -> PyResult<Self> {
        let s = usize_shape(&shape_args(shape)?, "broadcast_to")?;
        // Read-only as NumPy's, also where no dim is repeated.
        Ok(PyNDArray::wrap(
            self.inner.broadcast_to(&s).q()?.into_readonly(),
        ))
    }
    /// The order reversed along `axes` (an int, a tuple, or None for every axis), as `np.flip`: a
    /// view with negative strides, no copy.
    #[pyo3(signature = (axes = None))]
    fn flip(&self, axes: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let ax = axes_of(axes)?.unwrap_or_else(|| (0..self.inner.ndim() as isize).collect());
        Ok(PyNDArray::wrap(self.inner.flip(&ax).q()?))
    }
    /// needle's `pad(axes)`: zeros around each axis, `axes` one `(before, after)` pair per
    /// axis; a new compact array.
    fn pad(&self, axes: Vec<(usize, usize)>) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.pad(&axes).q()?))
    }
    /// The real part: a new real array for a complex one (float32 for complex64), the array
    /// itself for a real one (as NumPy's `.real`).
    #[getter]
    fn real(&self) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.real().q()?))
    }
    /// The imaginary part: a new real array for a complex one, zeros for a real one.
    #[getter]
    fn imag(&self) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.imag().q()?))
    }
    /// The complex conjugate (a real array is returned as is).
    fn conj(&self) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.conj().q()?))
    }
    /// NumPy's name for `conj`.
    fn conjugate(&self) -> PyResult<Self> {
        self.conj()
    }
    /// The argument `atan2(imag, real)` in radians (NumPy's `angle`).
    fn angle(&self) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.angle().q()?))
    }
    /// A new contiguous array converted to `dtype` (a name such as 'float16' or a NumPy dtype) with
    /// NumPy's cast rules; a copy even when the dtype is unchanged. An unsupported dtype is a
    /// TypeError.
    fn astype(&self, dtype: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.astype(dtype_of(dtype)?).q()?))
    }
    /// This array on `device`: the same array (no copy) when it is there already, else a contiguous
    /// copy there.
    fn to(&self, device: PyRef<PyDevice>) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.to_device(device.device).q()?))
    }
    /// Sets every element to the Python number `value`, in place (every view of the buffer sees
    /// it), and returns None. An integer the dtype cannot hold raises OverflowError, a non-number
    /// TypeError, a read-only (broadcast) array ValueError.
    fn fill(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.check_writable("fill").q()?;
        let s = fill_scalar(value, self.inner.dtype())?
            .ok_or_else(|| PyTypeError::new_err("fill takes a number"))?;
        self.inner.assign_scalar(s).q()
    }
    /// A NumPy array with this array's values: always a C-order copy (bfloat16 comes out as
    /// float32). `np.asarray(a)` shares the memory instead where it can.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy(py, &self.inner)
    }
    /// NumPy's conversion hook: the same memory where it can be shared (a CPU array of a
    /// dtype NumPy has), a copy otherwise, and an error when `copy=False` forbids the copy.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let np = py.import("numpy")?;
        let inner = slf.borrow().inner.clone();
        let shareable = inner.device() == Device::Cpu && inner.dtype() != DType::BF16;
        let a = if shareable {
            let shared =
                np.call_method1("asarray", (pyo3::types::PyMemoryView::from(slf.as_any())?,))?;
            if copy == Some(true) {
                shared.call_method0("copy")?
            } else {
                shared
            }
        } else if copy == Some(false) {
            return Err(PyValueError::new_err(format!(
                "__array__: a {} array on {} cannot be shared with NumPy without a copy, and \
                 copy=False forbids one",
                inner.dtype(),
                inner.device()
            )));
        } else {
            to_numpy(py, &inner)?
        };
        match dtype {
            Some(d) if !d.is_none() => {
                let kw = pyo3::types::PyDict::new(py);
                kw.set_item("copy", copy != Some(false))?;
                a.call_method("astype", (d,), Some(&kw))
            }
            _ => Ok(a),
        }
    }
    /// The buffer protocol: NumPy, `memoryview` and friends see this array's own memory.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let inner = slf.borrow().inner.clone();
        // SAFETY: CPython passes its view struct; get_buffer fills it for `slf`.
        unsafe { crate::export::get_buffer(&inner, slf.into_any(), view, flags) }
    }
    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: CPython passes a view __getbuffer__ filled.
        unsafe { crate::export::release_buffer(view) }
    }
    /// DLPack export (zero-copy unless `copy=True` or `dl_device` names another device).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // quill waits for its own GPU work before exporting, so any consumer stream is safe.
        let _ = stream;
        crate::export::export_dlpack(py, &self.inner, max_version, dl_device, copy)
    }
    /// DLPack's `(device_type, device_id)` of this array's buffer: `(1, 0)` on the CPU, `(2, i)` on
    /// CUDA device i.
    fn __dlpack_device__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::export::dlpack_device(py, &self.inner)
    }
    /// The one element as a Python int, float or bool (NumPy's `.item()`); an array of any other
    /// size raises ValueError.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = to_numpy(py, &self.inner)?;
        v.call_method0("item")
    }
    /// The elements as nested Python lists of Python scalars (NumPy's `.tolist()`); a 0-d array
    /// gives a bare scalar.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy(py, &self.inner)?.call_method0("tolist")
    }

    /// a[idx] with NumPy basic indexing (ints, slices of any step, None, ...): a view of the same
    /// buffer, each int dropping its axis. Integer arrays (quill, NumPy or lists) index as
    /// NumPy's advanced indexing and give a copy. A bool NDArray mask over the leading axes gives
    /// a copy of the selected elements (shape `(count,) + rest`); other index types and
    /// out-of-range indices raise IndexError.
    fn __getitem__(&self, idx: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Some(mask) = bool_mask(idx) {
            return Ok(PyNDArray::wrap(
                self.inner.select_mask(&mask).map_err(index_err)?,
            ));
        }
        let args = crate::convert::index_args(idx)?;
        Ok(PyNDArray::wrap(self.inner.index(&args).map_err(index_err)?))
    }
    /// a[idx] = value, written into this array's buffer (views of it see the change); `idx` as in
    /// `a[idx]`, a bool NDArray mask included. `value` (a Python number, an NDArray or anything
    /// NumPy takes) is broadcast and cast to a's dtype; an integer the dtype cannot hold raises
    /// OverflowError, a read-only (broadcast) array ValueError.
    fn __setitem__(&self, idx: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let dtype = self.inner.dtype();
        if let Some(mask) = bool_mask(idx) {
            // Read-only before the value's range, as NumPy.
            self.inner.check_writable("boolean index assignment").q()?;
            let v = match fill_value(value, dtype)? {
                Fill::Scalar(s) => {
                    self.inner.check_fits("boolean index assignment", s).q()?;
                    Core::full(&[], s, dtype).q()?
                }
                Fill::Array(a) => a,
            };
            return self.inner.assign_mask(&mask, &v).map_err(index_err);
        }
        let view = self.inner.slice(&index_of(idx)?).q()?;
        view.check_writable("assign").q()?;
        match fill_value(value, dtype)? {
            Fill::Scalar(s) => view.assign_scalar(s).q(),
            Fill::Array(a) => view.assign(&a).q(),
        }
    }

    /// a + b elementwise with NumPy broadcasting and type promotion; Python scalars are weak
    /// (NEP 50), other non-NDArray operands go through `numpy.asarray`.
    fn __add__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Add, o, false).map(PyNDArray::wrap)
    }
    /// b + a with this array on the right; rules as `a + b`.
    fn __radd__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Add, o, true).map(PyNDArray::wrap)
    }
    /// a - b elementwise with NumPy broadcasting and type promotion; Python scalars are weak
    /// (NEP 50). bool - bool is a TypeError, as NumPy.
    fn __sub__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Sub, o, false).map(PyNDArray::wrap)
    }
    /// b - a with this array on the right; rules as `a - b`.
    fn __rsub__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Sub, o, true).map(PyNDArray::wrap)
    }
    /// a * b elementwise with NumPy broadcasting and type promotion; Python scalars are weak
    /// (NEP 50).
    fn __mul__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Mul, o, false).map(PyNDArray::wrap)
    }
    /// b * a with this array on the right; rules as `a * b`.
    fn __rmul__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Mul, o, true).map(PyNDArray::wrap)
    }
    /// a / b, true division elementwise with NumPy broadcasting and type promotion: integer and
    /// bool operands give float64; Python scalars are weak (NEP 50).
    fn __truediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Div, o, false).map(PyNDArray::wrap)
    }
    /// b / a with this array on the right; rules as `a / b`.
    fn __rtruediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Div, o, true).map(PyNDArray::wrap)
    }
    /// a % b elementwise, Python's remainder (the sign of the divisor, NumPy's `remainder`), with
    /// NumPy broadcasting and type promotion; Python scalars are weak (NEP 50).
    fn __mod__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Remainder, o, false).map(PyNDArray::wrap)
    }
    /// b % a with this array on the right; rules as `a % b`.
    fn __rmod__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Remainder, o, true).map(PyNDArray::wrap)
    }
    /// a ** b elementwise with NumPy broadcasting and type promotion; Python scalars are weak
    /// (NEP 50). An integer base with a negative integer exponent is a ValueError, and `pow` with a
    /// modulus a TypeError.
    fn __pow__(&self, o: &Bound<'_, PyAny>, modulo: &Bound<'_, PyAny>) -> PyResult<Self> {
        if !modulo.is_none() {
            return Err(PyTypeError::new_err(
                "pow() with a modulus is not supported",
            ));
        }
        binary(&self.inner, BinaryOp::Pow, o, false).map(PyNDArray::wrap)
    }
    /// b ** a with this array as the exponent; rules as `a ** b`.
    fn __rpow__(&self, o: &Bound<'_, PyAny>, _modulo: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Pow, o, true).map(PyNDArray::wrap)
    }
    /// a @ b, NumPy's matmul: a 1-D operand is a row (left) or column (right) vector whose axis is
    /// dropped from the result, higher ranks are stacks of matrices whose batch dims broadcast;
    /// dtypes promote. A 0-d operand or a Python number is a ValueError (use `*`).
    fn __matmul__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        match operand(o)? {
            Operand::Array(b) => Ok(PyNDArray::wrap(self.inner.matmul(&b).q()?)),
            Operand::Scalar(_) | Operand::BigInt(_) => Err(PyValueError::new_err(
                "matmul: operands must have at least one dim (multiply by a scalar with *)",
            )),
        }
    }
    /// b @ a with this array on the right; rules as `a @ b`.
    fn __rmatmul__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        match operand(o)? {
            Operand::Array(b) => Ok(PyNDArray::wrap(b.matmul(&self.inner).q()?)),
            Operand::Scalar(_) | Operand::BigInt(_) => Err(PyValueError::new_err(
                "matmul: operands must have at least one dim (multiply by a scalar with *)",
            )),
        }
    }
    /// a & b elementwise: bitwise AND of integers, logical AND of bools, with NumPy broadcasting
    /// and promotion; float operands raise TypeError.
    fn __and__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::BitAnd, o, false).map(PyNDArray::wrap)
    }
    /// b & a with this array on the right; rules as `a & b`.
    fn __rand__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::BitAnd, o, true).map(PyNDArray::wrap)
    }
    /// a | b elementwise: bitwise OR of integers, logical OR of bools, with NumPy broadcasting and
    /// promotion; float operands raise TypeError.
    fn __or__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::BitOr, o, false).map(PyNDArray::wrap)
    }
    /// b | a with this array on the right; rules as `a | b`.
    fn __ror__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::BitOr, o, true).map(PyNDArray::wrap)
    }
    /// a ^ b elementwise: bitwise XOR of integers, logical XOR of bools, with NumPy broadcasting
    /// and promotion; float operands raise TypeError.
    fn __xor__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::BitXor, o, false).map(PyNDArray::wrap)
    }
    /// b ^ a with this array on the right; rules as `a ^ b`.
    fn __rxor__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::BitXor, o, true).map(PyNDArray::wrap)
    }
    /// a << b elementwise on integers, with NumPy broadcasting and promotion; a shift by the bit
    /// width or more gives 0. Float and bool operands raise TypeError.
    fn __lshift__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Shl, o, false).map(PyNDArray::wrap)
    }
    /// b << a with this array on the right; rules as `a << b`.
    fn __rlshift__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Shl, o, true).map(PyNDArray::wrap)
    }
    /// a >> b elementwise on integers (arithmetic for signed dtypes), with NumPy broadcasting and
    /// promotion. Float and bool operands raise TypeError.
    fn __rshift__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Shr, o, false).map(PyNDArray::wrap)
    }
    /// b >> a with this array on the right; rules as `a >> b`.
    fn __rrshift__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Shr, o, true).map(PyNDArray::wrap)
    }
    /// `~x`: bitwise not of integers (two's complement: -x - 1), logical not of bools.
    fn __invert__(&self) -> PyResult<Self> {
        let r = match self.inner.dtype() {
            DType::Bool => self.inner.unary(UnaryOp::LogicalNot),
            d if d.is_float() => Err(quill::Error::invalid(
                "bitwise_invert",
                format!("not defined for dtype {d}: bitwise ops take integers and bool"),
            )),
            _ => self
                .inner
                .unary(UnaryOp::Neg)
                .and_then(|n| n.binary_scalar(BinaryOp::Sub, quill::Scalar::I(1), false)),
        };
        Ok(PyNDArray::wrap(r.q()?))
    }
    // In-place operators write through the view (NumPy's `a += b`); the result must keep the
    // destination's dtype kind and shape.
    /// a += b in place: the result is written into a's buffer, so every view of that buffer sees
    /// it. b broadcasts to a's shape, which cannot change, and the result must cast to a's dtype
    /// within its kind (int += float is a TypeError); a read-only (broadcast) array raises
    /// ValueError.
    fn __iadd__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Add, o)
    }
    /// a -= b in place, written through to every view of a's buffer; rules as `a += b`.
    fn __isub__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Sub, o)
    }
    /// a *= b in place, written through to every view of a's buffer; rules as `a += b`.
    fn __imul__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Mul, o)
    }
    /// a /= b in place, written through to every view of a's buffer; for float arrays (an integer
    /// or bool array raises TypeError, the quotient being float), other rules as `a += b`.
    fn __itruediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Div, o)
    }
    /// a %= b in place (Python's remainder), written through to every view of a's buffer; rules as
    /// `a += b`.
    fn __imod__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Remainder, o)
    }
    /// a **= b in place, written through to every view of a's buffer; rules as `a += b`, and a
    /// negative integer exponent of an integer array is a ValueError.
    fn __ipow__(&self, o: &Bound<'_, PyAny>, _modulo: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Pow, o)
    }
    /// a &= b in place on integers or bools, written through to every view of a's buffer; rules as
    /// `a += b`.
    fn __iand__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::BitAnd, o)
    }
    /// a |= b in place on integers or bools, written through to every view of a's buffer; rules as
    /// `a += b`.
    fn __ior__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::BitOr, o)
    }
    /// a ^= b in place on integers or bools, written through to every view of a's buffer; rules as
    /// `a += b`.
    fn __ixor__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::BitXor, o)
    }
    /// a <<= b in place on integers, written through to every view of a's buffer; rules as
    /// `a += b`.
    fn __ilshift__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Shl, o)
    }
    /// a >>= b in place on integers, written through to every view of a's buffer; rules as
    /// `a += b`.
    fn __irshift__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::Shr, o)
    }
    /// -a elementwise in a's dtype (integers wrap, as NumPy); a bool array raises TypeError.
    fn __neg__(&self) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.unary(UnaryOp::Neg).q()?))
    }
    /// abs(a) elementwise in a's dtype (the signed integer minimum wraps to itself); a bool array
    /// comes back as a copy.
    fn __abs__(&self) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.unary(UnaryOp::Abs).q()?))
    }
    /// a == b elementwise: a bool array, with NumPy broadcasting and type promotion; Python scalars
    /// are weak (NEP 50).
    fn __eq__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Eq, o, false).map(PyNDArray::wrap)
    }
    /// a != b elementwise: a bool array (True where either is NaN), with NumPy broadcasting and
    /// type promotion; Python scalars are weak (NEP 50).
    fn __ne__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Ne, o, false).map(PyNDArray::wrap)
    }
    /// a < b elementwise: a bool array, with NumPy broadcasting and type promotion; Python scalars
    /// are weak (NEP 50).
    fn __lt__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Lt, o, false).map(PyNDArray::wrap)
    }
    /// a <= b elementwise: a bool array, with NumPy broadcasting and type promotion; Python scalars
    /// are weak (NEP 50).
    fn __le__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Le, o, false).map(PyNDArray::wrap)
    }
    /// a > b elementwise: a bool array, with NumPy broadcasting and type promotion; Python scalars
    /// are weak (NEP 50).
    fn __gt__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Gt, o, false).map(PyNDArray::wrap)
    }
    /// a >= b elementwise: a bool array, with NumPy broadcasting and type promotion; Python scalars
    /// are weak (NEP 50).
    fn __ge__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::Ge, o, false).map(PyNDArray::wrap)
    }
    /// Sum over `axis` (an int, a tuple, or None for all; `keepdims` keeps them as size 1): bool
    /// and signed integers give int64, unsigned uint64, floats keep their dtype (float16 and
    /// bfloat16 accumulate in float32). An out-of-range axis raises IndexError.
    #[pyo3(signature = (axis = None, keepdims = false))]
    fn sum(&self, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<Self> {
        let ax = axes_of(axis)?;
        Ok(PyNDArray::wrap(
            self.inner.sum(ax.as_deref(), keepdims).q()?,
        ))
    }
    /// Maximum over `axis` (an int, a tuple, or None for all; `keepdims` keeps them as size 1), in
    /// the array's dtype; NaN propagates. An empty reduction is a ValueError, as NumPy.
    #[pyo3(signature = (axis = None, keepdims = false))]
    fn max(&self, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<Self> {
        let ax = axes_of(axis)?;
        Ok(PyNDArray::wrap(
            self.inner.max(ax.as_deref(), keepdims).q()?,
        ))
    }
    /// Minimum over `axis` (an int, a tuple, or None for all; `keepdims` keeps them as size 1), in
    /// the array's dtype; NaN propagates. An empty reduction is a ValueError, as NumPy.
    #[pyo3(signature = (axis = None, keepdims = false))]
    fn min(&self, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<Self> {
        let ax = axes_of(axis)?;
        Ok(PyNDArray::wrap(
            self.inner.min(ax.as_deref(), keepdims).q()?,
        ))
    }
    /// Mean over `axis` (an int, a tuple, or None for all; `keepdims` keeps them as size 1): bool
    /// and integers give float64, floats keep their dtype; the mean of nothing is NaN.
    #[pyo3(signature = (axis = None, keepdims = false))]
    fn mean(&self, axis: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<Self> {
        let ax = axes_of(axis)?;
        Ok(PyNDArray::wrap(
            self.inner.mean(ax.as_deref(), keepdims).q()?,
        ))
    }
    /// Index (int64) of the first maximum along `axis` (an int), or into the flattened array for
    /// None; `keepdims` keeps the reduced axes as size 1. NaN counts as the maximum; an empty
    /// reduction is a ValueError.
    #[pyo3(signature = (axis = None, keepdims = false))]
    fn argmax(&self, axis: Option<isize>, keepdims: bool) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.argmax(axis, keepdims).q()?))
    }

    /// Elementwise op by its name in quill's vocabulary (`sin`, `floor`, `isnan`, ...).
    fn _unary(&self, op: &str) -> PyResult<Self> {
        let u = UnaryOp::from_name(op)
            .ok_or_else(|| PyValueError::new_err(format!("unknown unary op '{op}'")))?;
        Ok(PyNDArray::wrap(self.inner.unary(u).q()?))
    }
    /// Binary op by name (`add`, `atan2`, `logical_xor`, ...), the other operand an array or a
    /// Python number.
    #[pyo3(signature = (op, other, reversed = false))]
    fn _binary(&self, op: &str, other: &Bound<'_, PyAny>, reversed: bool) -> PyResult<Self> {
        let b = BinaryOp::from_name(op)
            .ok_or_else(|| PyValueError::new_err(format!("unknown binary op '{op}'")))?;
        binary(&self.inner, b, other, reversed).map(PyNDArray::wrap)
    }
    /// The next representable value after each element toward `other` (broadcast), in the
    /// promoted float dtype: NumPy's `nextafter`.
    fn _nextafter(&self, other: PyRef<PyNDArray>) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.nextafter(&other.inner).q()?))
    }
    /// Reduction by name: sum prod max min mean var std any all.
    #[pyo3(signature = (op, axis = None, keepdims = false, correction = 0))]
    fn _reduce(
        &self,
        op: &str,
        axis: Option<&Bound<'_, PyAny>>,
        keepdims: bool,
        correction: usize,
    ) -> PyResult<Self> {
        let ax = axes_of(axis)?;
        let ax = ax.as_deref();
        let a = &self.inner;
        let r = match op {
            "sum" => a.sum(ax, keepdims),
            "prod" => a.prod(ax, keepdims),
            "max" => a.max(ax, keepdims),
            "min" => a.min(ax, keepdims),
            "mean" => a.mean(ax, keepdims),
            "var" => a.var(ax, correction, keepdims),
            "std" => a.std(ax, correction, keepdims),
            "any" => a.any(ax, keepdims),
            "all" => a.all(ax, keepdims),
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown reduction '{other}'"
                )))
            }
        };
        Ok(PyNDArray::wrap(r.q()?))
    }
    /// Index (int64) of the first minimum along `axis` (an int), or into the flattened array for
    /// None; `keepdims` keeps the reduced axes as size 1. An empty reduction is a ValueError.
    #[pyo3(signature = (axis = None, keepdims = false))]
    fn argmin(&self, axis: Option<isize>, keepdims: bool) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.argmin(axis, keepdims).q()?))
    }
    /// The size-1 axes `axis` (an int or a tuple) removed: a view. An axis whose size is not 1 is a
    /// ValueError.
    fn squeeze(&self, axis: &Bound<'_, PyAny>) -> PyResult<Self> {
        let ax = axes_of(Some(axis))?.unwrap_or_default();
        Ok(PyNDArray::wrap(self.inner.squeeze(&ax).q()?))
    }
    /// A size-1 axis inserted at `axis` (negative counts from the end of the result): a view.
    fn expand_dims(&self, axis: isize) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.unsqueeze(axis).q()?))
    }
    /// `sort` (values) or `argsort` (int64 indices) along `axis`; stable.
    #[pyo3(signature = (axis = -1, descending = false, values = true))]
    fn _sort(&self, axis: isize, descending: bool, values: bool) -> PyResult<Self> {
        let r = if values {
            self.inner.sort(axis, descending)
        } else {
            self.inner.argsort(axis, descending)
        };
        Ok(PyNDArray::wrap(r.q()?))
    }
    /// Running sums along `axis` into a new array (the Array API's `cumulative_sum`): integers and
    /// bool sum in int64, float16 and bfloat16 in float32 and are cast back; with `include_initial`
    /// each lane starts with a 0 and is one longer.
    #[pyo3(signature = (axis, include_initial = false))]
    fn _cumsum(&self, axis: isize, include_initial: bool) -> PyResult<Self> {
        Ok(PyNDArray::wrap(
            self.inner.cumsum(axis, include_initial).q()?,
        ))
    }
    /// Running products along `axis` into a new array (the Array API's `cumulative_prod`), in the
    /// dtypes `_cumsum` uses; with `include_initial` each lane starts with a 1.
    #[pyo3(signature = (axis, include_initial = false))]
    fn _cumprod(&self, axis: isize, include_initial: bool) -> PyResult<Self> {
        Ok(PyNDArray::wrap(
            self.inner.cumprod(axis, include_initial).q()?,
        ))
    }
    /// NumPy's `take_along_axis`: `indices` (an integer array of this array's rank) picks along
    /// `axis` and broadcasts against this array on the other axes.
    fn _take_along(&self, indices: PyRef<PyNDArray>, axis: isize) -> PyResult<Self> {
        Ok(PyNDArray::wrap(
            self.inner.take_along_axis(&indices.inner, axis).q()?,
        ))
    }
    /// The indices of the nonzero (True) elements, a tuple of int64 arrays, one per axis, in C
    /// order (`np.nonzero`); a 0-d array is a ValueError.
    fn _nonzero<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let v: Vec<PyNDArray> = self
            .inner
            .nonzero()
            .q()?
            .into_iter()
            .map(PyNDArray::wrap)
            .collect();
        PyTuple::new(py, v)
    }
    /// Where each of `values` would go in this sorted 1-D array to keep it sorted: int64 indices
    /// shaped as `values`, before equal elements, or after them with `right` (`np.searchsorted`).
    /// NaN sorts last; an array that is not 1-D is a ValueError.
    #[pyo3(signature = (values, right = false))]
    fn _searchsorted(&self, values: PyRef<PyNDArray>, right: bool) -> PyResult<Self> {
        Ok(PyNDArray::wrap(
            self.inner.searchsorted(&values.inner, right).q()?,
        ))
    }
    /// Elements at `indices` (an int array) along `axis`, as NumPy's `take`.
    fn _take(&self, indices: PyRef<PyNDArray>, axis: isize) -> PyResult<Self> {
        Ok(PyNDArray::wrap(
            self.inner.index_select(axis, &indices.inner).q()?,
        ))
    }
    /// `arrays` joined along `axis` into a new array: `kind="concat"` along an existing axis
    /// (`np.concatenate`), any other kind along a new one (`np.stack`); dtypes promote.
    #[staticmethod]
    fn _join(kind: &str, arrays: Vec<PyRef<PyNDArray>>, axis: isize) -> PyResult<Self> {
        let v: Vec<&Core> = arrays.iter().map(|a| &a.inner).collect();
        let r = match kind {
            "concat" => Core::concat(&v, axis),
            _ => Core::stack(&v, axis),
        };
        Ok(PyNDArray::wrap(r.q()?))
    }
    /// Constructors for the Array API namespace: `arange`, `linspace`, `eye`, `full`.
    #[staticmethod]
    #[pyo3(signature = (kind, dtype, a = 0.0, b = 0.0, c = 0.0, shape = None, k = 0))]
    #[allow(clippy::too_many_arguments)]
    fn _create(
        kind: &str,
        dtype: &Bound<'_, PyAny>,
        a: f64,
        b: f64,
        c: f64,
        shape: Option<Vec<usize>>,
        k: isize,
    ) -> PyResult<Self> {
        let d = dtype_of(dtype)?;
        let r = match kind {
            "arange" => Core::arange(a, b, c, d),
            "linspace" => Core::linspace(a, b, c as usize, d),
            "eye" => Core::eye(a as usize, b as usize, k, d),
            _ => Core::full(&shape.unwrap_or_default(), a, d),
        };
        Ok(PyNDArray::wrap(r.q()?))
    }
    /// Elements of `a` where `c` is true, else of `b` (broadcast together).
    #[staticmethod]
    fn _where(c: PyRef<PyNDArray>, a: PyRef<PyNDArray>, b: PyRef<PyNDArray>) -> PyResult<Self> {
        Ok(PyNDArray::wrap(
            Core::where_(&c.inner, &a.inner, &b.inner).q()?,
        ))
    }
    /// The Array API namespace for this array: the `quill.array_api` module (`api_version` is
    /// accepted and not checked).
    #[pyo3(signature = (api_version = None))]
    fn __array_namespace__<'py>(
        &self,
        py: Python<'py>,
        api_version: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = api_version;
        Ok(py.import("quill.array_api")?.into_any())
    }

    /// repr(a): the values and the device, as `NDArray(..., device=cpu())`.
    fn __repr__(&self) -> String {
        let dev = match self.inner.device() {
            Device::Cpu => "cpu()".to_string(),
            d => d.to_string(),
        };
        format!("NDArray({}, device={dev})", self.inner)
    }
    /// str(a): the values, without the device.
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    /// bool(a) for a one-element array; any other size is a ValueError (use any() or all()), as
    /// NumPy.
    fn __bool__(&self) -> PyResult<bool> {
        if self.inner.numel() != 1 {
            return Err(PyValueError::new_err(format!(
                "the truth value of an array with {} elements is ambiguous; use any() or all()",
                self.inner.numel()
            )));
        }
        self.inner.item::<bool>().q()
    }
    /// float(a) for a one-element array of any dtype; any other size raises TypeError.
    fn __float__(&self) -> PyResult<f64> {
        self.one("float")?;
        self.inner.item::<f64>().q()
    }
    /// complex(a): the one element as a Python complex (both parts of a complex array);
    /// one-element arrays only (TypeError otherwise).
    fn __complex__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.one("complex")?;
        let z = self.inner.item::<quill::C128>().q()?;
        py.import("builtins")?
            .getattr("complex")?
            .call1((z.re, z.im))
    }
    /// `int(x)`: Python's rules (truncation; NaN is a ValueError, inf an OverflowError).
    fn __int__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.one("int")?;
        if self.inner.dtype().is_float() {
            let v = self.inner.item::<f64>().q()?;
            return pyo3::types::PyFloat::new(py, v).call_method0("__int__");
        }
        self.int_item()?.into_bound_py_any(py)
    }
    /// `operator.index(x)`: integer arrays only, as NumPy.
    fn __index__(&self) -> PyResult<i128> {
        if !self.inner.dtype().is_int() {
            return Err(PyTypeError::new_err(format!(
                "only integer arrays can be used as an index, not {}",
                self.inner.dtype()
            )));
        }
        self.one("index")?;
        self.int_item()
    }
    /// +a: a new copy of a, same dtype and values.
    fn __pos__(&self) -> PyResult<Self> {
        Ok(PyNDArray::wrap(self.inner.deep_copy().q()?))
    }
    /// a // b elementwise, NumPy's `floor_divide` (integer division by zero gives 0), with NumPy
    /// broadcasting and type promotion; Python scalars are weak (NEP 50).
    fn __floordiv__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::FloorDiv, o, false).map(PyNDArray::wrap)
    }
    /// b // a with this array on the right; rules as `a // b`.
    fn __rfloordiv__(&self, o: &Bound<'_, PyAny>) -> PyResult<Self> {
        binary(&self.inner, BinaryOp::FloorDiv, o, true).map(PyNDArray::wrap)
    }
    /// a //= b in place, written through to every view of a's buffer; rules as `a += b`.
    fn __ifloordiv__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        in_place(&self.inner, BinaryOp::FloorDiv, o)
    }
    /// The array on `device` (the Array API's name for `.to`).
    #[pyo3(signature = (device, /, *, stream = None))]
    fn to_device(
        &self,
        device: PyRef<PyDevice>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let _ = stream;
        Ok(PyNDArray::wrap(self.inner.to_device(device.device).q()?))
    }
    /// The transpose of a 2-D array (all axes reversed, as NumPy, for other ranks).
    #[getter(T)]
    fn transpose_all(&self) -> PyResult<Self> {
        let axes: Vec<isize> = (0..self.inner.ndim() as isize).rev().collect();
        Ok(PyNDArray::wrap(self.inner.permute(&axes).q()?))
    }
    /// The last two axes swapped (a stack of matrices transposed).
    #[getter(mT)]
    fn matrix_transpose(&self) -> PyResult<Self> {
        let n = self.inner.ndim() as isize;
        if n < 2 {
            return Err(PyValueError::new_err(format!(
                "mT needs an array of rank 2 or more; this one has shape {:?}",
                self.inner.shape()
            )));
        }
        let mut axes: Vec<isize> = (0..n).collect();
        axes.swap((n - 2) as usize, (n - 1) as usize);
        Ok(PyNDArray::wrap(self.inner.permute(&axes).q()?))
    }
}

impl PyNDArray {
    fn one(&self, what: &str) -> PyResult<()> {
        if self.inner.numel() != 1 {
            return Err(PyTypeError::new_err(format!(
                "only arrays with one element convert to Python {what}; this one has shape {:?}",
                self.inner.shape()
            )));
        }
        Ok(())
    }

    /// The one element of an integer (or bool) array as an exact integer: u64 values past
    /// i64's range included.
    fn int_item(&self) -> PyResult<i128> {
        if self.inner.dtype() == quill::DType::U64 {
            return Ok(self.inner.item::<u64>().q()? as i128);
        }
        Ok(self.inner.item::<i64>().q()? as i128)
    }
}
