//! Sharing memory with NumPy and PyTorch: the Python buffer protocol and DLPack export a
//! quill array's own buffer (zero-copy, any strides); `from_dlpack` views another library's
//! array in place (a foreign buffer that calls the producer's deleter when quill drops it). The DLPack structs are written here from the DLPack 1.x
//! specification (`dlpack.h`): plain `repr(C)` data, no code taken from elsewhere.

use crate::convert::Q;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::{ffi, IntoPyObjectExt};
use quill::{DType, Device, NDArray, Pinned};
use std::ffi::{c_char, c_int, c_void, CStr};

/// The struct format character of each dtype; bfloat16 has none.
fn format_of(d: DType) -> Option<&'static CStr> {
    Some(match d {
        DType::F32 => c"f",
        DType::F64 => c"d",
        DType::F16 => c"e",
        DType::I32 => c"i",
        DType::I64 => c"q",
        DType::U8 => c"B",
        DType::Bool => c"?",
        DType::I8 => c"b",
        DType::I16 => c"h",
        DType::U16 => c"H",
        DType::U32 => c"I",
        DType::U64 => c"Q",
        DType::C64 => c"Zf",
        DType::C128 => c"Zd",
        DType::BF16 => return None,
    })
}

/// What a buffer-protocol view points into; freed by `release_buffer`.
struct BufferExport {
    _pinned: Pinned,
    shape: Vec<ffi::Py_ssize_t>,
    strides: Vec<ffi::Py_ssize_t>,
}

fn contiguous(shape: &[usize], strides: &[isize], fortran: bool) -> bool {
    let mut expect = 1isize;
    let dims: Vec<usize> = if fortran {
        (0..shape.len()).collect()
    } else {
        (0..shape.len()).rev().collect()
    };
    for i in dims {
        if shape[i] == 0 {
            return true;
        }
        if shape[i] != 1 && strides[i] != expect {
            return false;
        }
        expect *= shape[i] as isize;
    }
    true
}

/// Fills `view` for `owner` (the Python NDArray) as `PyObject_GetBuffer` asks.
///
/// # Safety
/// `view` must be the buffer struct CPython passes to `bf_getbuffer`.
pub unsafe fn get_buffer(
    a: &NDArray,
    owner: Bound<'_, PyAny>,
    view: *mut ffi::Py_buffer,
    flags: c_int,
) -> PyResult<()> {
    if view.is_null() {
        return Err(PyBufferError::new_err("buffer protocol: view is NULL"));
    }
    if a.device() != Device::Cpu {
        return Err(PyBufferError::new_err(format!(
            "buffer protocol: the array is on {}; only CPU memory can be shared this way (use \
             .to(quill.cpu()) or DLPack)",
            a.device()
        )));
    }
    let format = format_of(a.dtype()).ok_or_else(|| {
        PyBufferError::new_err(
            "buffer protocol: bfloat16 has no struct format; use .astype('float32') or DLPack",
        )
    })?;
    let (shape, strides) = (a.shape(), a.strides());
    let has = |f: c_int| flags & f == f;
    let c_contig = contiguous(shape, strides, false);
    let f_contig = contiguous(shape, strides, true);
    let ok = if has(ffi::PyBUF_C_CONTIGUOUS) {
        c_contig
    } else if has(ffi::PyBUF_F_CONTIGUOUS) {
        f_contig
    } else if has(ffi::PyBUF_ANY_CONTIGUOUS) {
        c_contig || f_contig
    } else {
        // Without PyBUF_STRIDES the consumer assumes C order.
        has(ffi::PyBUF_STRIDES) || c_contig
    };
    if !ok {
        return Err(PyBufferError::new_err(format!(
            "buffer protocol: the consumer asked for contiguous memory but this view (shape \
             {shape:?}, strides {strides:?}) is not; call .compact() first"
        )));
    }
    // A broadcast view (or a view of one) shares its elements between positions: exported
    // read-only, as NumPy's broadcast views are.
    let readonly = a.is_readonly();
    if readonly && has(ffi::PyBUF_WRITABLE) {
        return Err(PyBufferError::new_err(format!(
            "buffer protocol: this view (shape {shape:?}) is read-only (a broadcast view or a \
             view of one) and the consumer asked for writable memory; call .compact() first"
        )));
    }
    let pinned = a.pin().q()?;
    let itemsize = a.dtype().size_in_bytes() as ffi::Py_ssize_t;
    let mut export = Box::new(BufferExport {
        shape: shape.iter().map(|&d| d as ffi::Py_ssize_t).collect(),
        strides: strides
            .iter()
            .map(|&s| s as ffi::Py_ssize_t * itemsize)
            .collect(),
        _pinned: pinned,
    });
    // SAFETY: `view` is CPython's non-NULL view struct (checked above); every pointer stored
    // in it stays valid until `release_buffer` frees `export`: the shape and strides vectors
    // live in the box, the data in the buffer that `Pinned` keeps alive and in place.
    // `format` points into a static C string.
    unsafe {
        (*view).buf = export._pinned.address() as *mut c_void;
        (*view).len = a.numel() as ffi::Py_ssize_t * itemsize;
        (*view).readonly = c_int::from(readonly);
        (*view).itemsize = itemsize;
        (*view).format = if has(ffi::PyBUF_FORMAT) {
            format.as_ptr() as *mut c_char
        } else {
            std::ptr::null_mut()
        };
        (*view).ndim = a.ndim() as c_int;
        (*view).shape = if has(ffi::PyBUF_ND) {
            export.shape.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        (*view).strides = if has(ffi::PyBUF_STRIDES) {
            export.strides.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        (*view).suboffsets = std::ptr::null_mut();
        (*view).internal = Box::into_raw(export) as *mut c_void;
        (*view).obj = owner.into_ptr();
    }
    Ok(())
}

/// # Safety
/// `view` must be a view `get_buffer` filled.
pub unsafe fn release_buffer(view: *mut ffi::Py_buffer) {
    // SAFETY: `internal` is the box `get_buffer` leaked for this view, released once.
    unsafe {
        if !view.is_null() && !(*view).internal.is_null() {
            drop(Box::from_raw((*view).internal as *mut BufferExport));
            (*view).internal = std::ptr::null_mut();
        }
    }
}

// ---- DLPack (dlpack.h, version 1.1) ----

const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_INT: u8 = 0;
const DL_UINT: u8 = 1;
const DL_FLOAT: u8 = 2;
const DL_BFLOAT: u8 = 4;
const DL_COMPLEX: u8 = 5;
const DL_BOOL: u8 = 6;
const FLAG_READ_ONLY: u64 = 1;
const FLAG_IS_COPIED: u64 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::F32 => (DL_FLOAT, 32),
        DType::F64 => (DL_FLOAT, 64),
        DType::F16 => (DL_FLOAT, 16),
        DType::BF16 => (DL_BFLOAT, 16),
        DType::I32 => (DL_INT, 32),
        DType::I64 => (DL_INT, 64),
        DType::U8 => (DL_UINT, 8),
        DType::Bool => (DL_BOOL, 8),
        DType::I8 => (DL_INT, 8),
        DType::I16 => (DL_INT, 16),
        DType::U16 => (DL_UINT, 16),
        DType::U32 => (DL_UINT, 32),
        DType::U64 => (DL_UINT, 64),
        DType::C64 => (DL_COMPLEX, 64),
        DType::C128 => (DL_COMPLEX, 128),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

fn quill_dtype(t: DLDataType) -> PyResult<DType> {
    Ok(match (t.code, t.bits, t.lanes) {
        (DL_COMPLEX, 64, 1) => DType::C64,
        (DL_COMPLEX, 128, 1) => DType::C128,
        (DL_FLOAT, 32, 1) => DType::F32,
        (DL_FLOAT, 64, 1) => DType::F64,
        (DL_FLOAT, 16, 1) => DType::F16,
        (DL_BFLOAT, 16, 1) => DType::BF16,
        (DL_INT, 32, 1) => DType::I32,
        (DL_INT, 64, 1) => DType::I64,
        (DL_UINT, 8, 1) => DType::U8,
        (DL_BOOL, 8, 1) => DType::Bool,
        (DL_INT, 8, 1) => DType::I8,
        (DL_INT, 16, 1) => DType::I16,
        (DL_UINT, 16, 1) => DType::U16,
        (DL_UINT, 32, 1) => DType::U32,
        (DL_UINT, 64, 1) => DType::U64,
        (code, bits, lanes) => {
            return Err(PyTypeError::new_err(format!(
                "from_dlpack: quill has no dtype for DLPack type code {code}, {bits} bits, {lanes} \
                 lane(s); it has float16/32/64, bfloat16, int8/16/32/64, uint8/16/32/64 and bool"
            )))
        }
    })
}

fn dl_device(d: Device) -> DLDevice {
    match d {
        Device::Cpu => DLDevice {
            device_type: DL_CPU,
            device_id: 0,
        },
        Device::Cuda(i) => DLDevice {
            device_type: DL_CUDA,
            device_id: i as i32,
        },
    }
}

/// The two capsule flavours (DLPack 0.x "dltensor", 1.x "dltensor_versioned") behind one
/// interface, so that export, import and the capsule destructor are written once.
trait Managed: Sized + 'static {
    /// The capsule name before and after a consumer takes it.
    const NAME: &'static CStr;
    const USED: &'static CStr;
    fn tensor(&mut self) -> &mut DLTensor;
    fn set_context(&mut self, ctx: *mut c_void);
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

macro_rules! managed {
    ($t:ty, $name:expr, $used:expr) => {
        impl Managed for $t {
            const NAME: &'static CStr = $name;
            const USED: &'static CStr = $used;
            fn tensor(&mut self) -> &mut DLTensor {
                &mut self.dl_tensor
            }
            fn set_context(&mut self, ctx: *mut c_void) {
                self.manager_ctx = ctx;
            }
            fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
                self.deleter
            }
        }
    };
}
managed!(DLManagedTensor, LEGACY, USED_LEGACY);
managed!(DLManagedTensorVersioned, VERSIONED, USED_VERSIONED);

/// Owns what a capsule's DLTensor points at; `managed` comes first so that a pointer to the
/// context is a pointer to the managed tensor.
#[repr(C)]
struct Ctx<M> {
    managed: M,
    _pinned: Pinned,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

/// The deleter quill's exported tensors carry.
unsafe extern "C" fn delete_ctx<M: Managed>(m: *mut M) {
    // SAFETY: `m` is the first field of a `Ctx<M>` boxed by `into_capsule`; the consumer (or
    // the capsule destructor) calls the deleter once.
    unsafe {
        if !m.is_null() {
            drop(Box::from_raw(m as *mut Ctx<M>));
        }
    }
}

/// A capsule nobody consumed (still named "dltensor..."): free its tensor. A consumer renames
/// the capsule to "used_dltensor..." and calls the deleter itself.
unsafe extern "C" fn capsule_destructor<M: Managed>(cap: *mut ffi::PyObject) {
    // SAFETY: CPython calls this with the capsule; `PyCapsule_IsValid` neither raises nor
    // accepts a renamed capsule, so the pointer is the unconsumed managed tensor.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, M::NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, M::NAME.as_ptr()) as *mut M;
            if let Some(d) = (*m).deleter() {
                d(m);
            }
        }
    }
}

/// Boxes `managed` with what its tensor points at and wraps it in a capsule that owns it
/// until a consumer takes it.
fn into_capsule<'py, M: Managed>(
    py: Python<'py>,
    managed: M,
    pinned: Pinned,
    shape: Vec<i64>,
    strides: Vec<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut ctx = Box::new(Ctx {
        managed,
        _pinned: pinned,
        shape,
        strides,
    });
    let (sp, tp) = (ctx.shape.as_mut_ptr(), ctx.strides.as_mut_ptr());
    ctx.managed.tensor().shape = sp;
    ctx.managed.tensor().strides = tp;
    let raw = Box::into_raw(ctx);
    // SAFETY: `raw` is a live box whose first field is the managed tensor; the capsule owns it
    // until a consumer renames the capsule and takes over (then calls the deleter).
    unsafe {
        (*raw).managed.set_context(raw as *mut c_void);
        let c = ffi::PyCapsule_New(
            raw as *mut c_void,
            M::NAME.as_ptr(),
            Some(capsule_destructor::<M>),
        );
        if c.is_null() {
            delete_ctx::<M>(raw as *mut M);
        }
        Bound::from_owned_ptr_or_err(py, c)
    }
}

fn dl_tensor(p: &Pinned, shape: &mut [i64], strides: &mut [i64]) -> DLTensor {
    let a = p.array();
    DLTensor {
        data: p.address() as *mut c_void,
        device: dl_device(p.device()),
        ndim: a.ndim() as i32,
        dtype: dl_dtype(a.dtype()),
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: 0,
    }
}

/// `__dlpack__`: a capsule over this array's buffer (or over a copy, when `copy` is true or
/// `dl_device` names another device). `max_version` >= (1, 0) gives a versioned capsule.
pub fn export_dlpack<'py>(
    py: Python<'py>,
    a: &NDArray,
    max_version: Option<(u32, u32)>,
    dl_device_req: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut a = a.clone();
    let mut copied = false;
    if let Some((t, id)) = dl_device_req {
        let here = dl_device(a.device());
        if (t, id) != (here.device_type, here.device_id) {
            let target = match t {
                DL_CPU => Device::Cpu,
                DL_CUDA => Device::Cuda(id.max(0) as usize),
                _ => {
                    return Err(PyBufferError::new_err(format!(
                        "__dlpack__: quill cannot export to DLPack device type {t}"
                    )))
                }
            };
            if copy == Some(false) {
                return Err(PyBufferError::new_err(format!(
                    "__dlpack__: the array is on {} and copy=False forbids moving it to {target}",
                    a.device()
                )));
            }
            a = a.to_device(target).q()?;
            copied = true;
        }
    }
    if copy == Some(true) && !copied {
        a = a.deep_copy().q()?;
        copied = true;
    }
    let pinned = a.pin().q()?;
    let shape: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
    let strides: Vec<i64> = a.strides().iter().map(|&s| s as i64).collect();
    let versioned = matches!(max_version, Some((major, _)) if major >= 1);
    let tensor = dl_tensor(&pinned, &mut [], &mut []);
    if versioned {
        let m = DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 1 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_ctx::<DLManagedTensorVersioned>),
            flags: if copied { FLAG_IS_COPIED } else { 0 },
            dl_tensor: tensor,
        };
        into_capsule(py, m, pinned, shape, strides)
    } else {
        let m = DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_ctx::<DLManagedTensor>),
        };
        into_capsule(py, m, pinned, shape, strides)
    }
}

pub fn dlpack_device<'py>(py: Python<'py>, a: &NDArray) -> PyResult<Bound<'py, PyAny>> {
    let d = dl_device(a.device());
    (d.device_type, d.device_id).into_bound_py_any(py)
}

/// Calls a consumed capsule's deleter when dropped: once quill no longer views the memory
/// (shared import), or right after the copy.
struct Release {
    managed: *mut c_void,
    delete: unsafe fn(*mut c_void),
}

// SAFETY: DLPack lets a consumer call the deleter from any thread (producers that need the
// GIL, as NumPy and PyTorch, take it inside); nothing else is reached through the pointer.
unsafe impl Send for Release {}
// SAFETY: `&Release` gives no access to the pointer.
unsafe impl Sync for Release {}

impl Drop for Release {
    fn drop(&mut self) {
        // SAFETY: `managed` is the consumed tensor this Release was made for, deleted once.
        unsafe { (self.delete)(self.managed) }
    }
}

unsafe fn release<M: Managed>(m: *mut c_void) {
    let m = m as *mut M;
    // SAFETY: `m` is a live managed tensor of this flavour (Release's contract).
    unsafe {
        if let Some(d) = (*m).deleter() {
            d(m);
        }
    }
}

/// A quill array over the DLTensor `t` (CPU only): the producer's memory itself when `copy`
/// allows and it can be shared (aligned, writable, not bool), else a copy. `owner` frees the
/// producer's tensor: kept by the shared buffer, or dropped after the copy.
///
/// # Safety
/// `t` must describe memory that stays valid until `owner` is dropped.
unsafe fn read_tensor(
    t: &DLTensor,
    owner: Release,
    read_only: bool,
    copy: Option<bool>,
) -> PyResult<NDArray> {
    let dtype = quill_dtype(t.dtype)?;
    if t.device.device_type != DL_CPU {
        return Err(PyBufferError::new_err(format!(
            "from_dlpack: the array is on DLPack device type {} (id {}); quill imports CPU \
             arrays: move it to the CPU first (e.g. torch's .cpu())",
            t.device.device_type, t.device.device_id
        )));
    }
    let ndim = usize::try_from(t.ndim)
        .map_err(|_| PyValueError::new_err(format!("from_dlpack: ndim {} < 0", t.ndim)))?;
    let shape_i: &[i64] = if ndim == 0 {
        &[]
    } else {
        // SAFETY: DLPack guarantees `shape` (and `strides` unless NULL) hold `ndim` entries.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    let shape: Vec<usize> = shape_i
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| PyValueError::new_err(format!("from_dlpack: bad shape {shape_i:?}")))?;
    let strides: Vec<isize> = if t.strides.is_null() || ndim == 0 {
        quill::Layout::contiguous(&shape).q()?.strides().to_vec()
    } else {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(t.strides, ndim) }
            .iter()
            .map(|&s| s as isize)
            .collect()
    };
    let numel: usize = shape.iter().product();
    let size = dtype.size_in_bytes();
    // The span of elements the view touches, relative to its first element.
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&d, &s) in shape.iter().zip(&strides) {
        let reach = (d as isize - 1) * s;
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    let span = if numel == 0 {
        0
    } else {
        (hi - lo + 1) as usize
    };
    let first = (t.data as *mut u8).wrapping_add(t.byte_offset as usize);
    let start = first.wrapping_offset(lo * size as isize);
    let offset = (-lo) as usize;
    let why_not = if read_only {
        Some("the producer marked it read-only")
    } else if dtype == DType::Bool {
        Some("bool bytes are checked by a copy")
    } else if !(start as usize).is_multiple_of(size) {
        Some("it is not aligned")
    } else if numel == 0 {
        Some("it is empty")
    } else {
        None
    };
    match (copy, why_not) {
        (Some(false), Some(why)) => {
            return Err(PyBufferError::new_err(format!(
                "from_dlpack: copy=False, but this array cannot be shared: {why}"
            )))
        }
        (None | Some(false), None) => {
            // SAFETY: a DLPack producer guarantees every element the shape and strides address
            // lies in its allocation; [lo, hi] are the first and last of them, so `span`
            // elements from `start` are the producer's, valid until the deleter `owner` runs.
            return unsafe {
                NDArray::from_foreign(
                    start,
                    span,
                    dtype,
                    &shape,
                    &strides,
                    offset,
                    Box::new(owner),
                )
            }
            .q();
        }
        _ => {}
    }
    if numel == 0 {
        return NDArray::zeros(&shape, dtype).q();
    }
    // SAFETY: as above, read as bytes (no alignment needed) before `owner` drops.
    let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, span * size) };
    let flat = NDArray::from_le_bytes(bytes, &[span], dtype).q()?;
    let out = flat.as_strided(&shape, &strides, offset).q()?.compact().q();
    drop(owner);
    out
}

/// `from_dlpack(x)`: a quill array over `x`'s memory (zero-copy where it can be shared; a
/// copy when `copy` is true or sharing is impossible).
pub fn from_dlpack(x: &Bound<'_, PyAny>, copy: Option<bool>) -> PyResult<NDArray> {
    // A quill array from quill itself: the same buffer, any dtype (bool included, whose bytes
    // quill wrote) and any device, without a capsule round trip.
    if let Ok(a) = x.cast::<crate::ndarray::PyNDArray>() {
        let a = a.borrow().inner.clone();
        return match copy {
            Some(true) => a.deep_copy().q(),
            _ => Ok(a),
        };
    }
    let py = x.py();
    let kw = pyo3::types::PyDict::new(py);
    kw.set_item("max_version", (1, 1))?;
    let cap = match x.call_method("__dlpack__", (), Some(&kw)) {
        Ok(c) => c,
        // A producer older than DLPack 1.0 takes no max_version.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => x.call_method0("__dlpack__")?,
        Err(e) => return Err(e),
    };
    let p = cap.as_ptr();
    // SAFETY: `p` is a live object (`cap` holds it). `PyCapsule_IsValid` checks type and name
    // without raising; the pointer of a valid capsule of that name is the producer's managed
    // tensor. Renaming the capsule makes us its owner (its destructor no longer deletes it);
    // the `Release` made right after deletes it exactly once.
    unsafe {
        if ffi::PyCapsule_IsValid(p, VERSIONED.as_ptr()) == 1 {
            let m =
                ffi::PyCapsule_GetPointer(p, VERSIONED.as_ptr()) as *mut DLManagedTensorVersioned;
            if (*m).version.major != 1 {
                return Err(PyBufferError::new_err(format!(
                    "from_dlpack: DLPack version {}.{} is not supported (quill reads 1.x)",
                    (*m).version.major,
                    (*m).version.minor
                )));
            }
            let read_only = (*m).flags & FLAG_READ_ONLY != 0;
            consume(py, p, m, read_only, copy)
        } else if ffi::PyCapsule_IsValid(p, LEGACY.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(p, LEGACY.as_ptr()) as *mut DLManagedTensor;
            consume(py, p, m, false, copy)
        } else {
            Err(PyTypeError::new_err(
                "from_dlpack: __dlpack__ did not return an unused DLPack capsule",
            ))
        }
    }
}

/// Takes the managed tensor `m` out of capsule `cap` (renaming it, so its destructor leaves
/// `m` alone) and reads it; `m` is deleted exactly once, by the `Release` made here.
///
/// # Safety
/// `cap` must be a valid, unconsumed capsule of flavour `M` whose pointer is `m`.
unsafe fn consume<M: Managed>(
    py: Python<'_>,
    cap: *mut ffi::PyObject,
    m: *mut M,
    read_only: bool,
    copy: Option<bool>,
) -> PyResult<NDArray> {
    // SAFETY: the caller's contract; after the rename we own `m`.
    unsafe {
        if ffi::PyCapsule_SetName(cap, M::USED.as_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        let owner = Release {
            managed: m as *mut c_void,
            delete: release::<M>,
        };
        read_tensor((*m).tensor(), owner, read_only, copy)
    }
}
