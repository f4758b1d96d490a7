//! What crosses the boundary: quill errors as the Python exceptions users expect (ValueError
//! for shapes, IndexError for indices and axes, TypeError for dtypes, OverflowError for numbers
//! a dtype cannot hold, RuntimeError for devices), dtype names, index expressions, and values
//! from NumPy (through `tobytes`).

use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyComplex, PyEllipsis, PyFloat, PyInt, PyList, PySlice, PyTuple,
};
use quill::{DType, Error, IndexArg, NDArray, Scalar, SliceArg};

pub fn err(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::IndexOutOfRange { .. } | Error::AxisOutOfRange { .. } => PyIndexError::new_err(msg),
        Error::DTypeMismatch { .. } => PyTypeError::new_err(msg),
        Error::OutOfMemory { .. } => pyo3::exceptions::PyMemoryError::new_err(msg),
        // NumPy raises IndexError for malformed index expressions and TypeError for ops a
        // dtype does not define (bool subtraction, say).
        Error::InvalidArgument { op: "slice", .. } => PyIndexError::new_err(msg),
        // A number a dtype cannot hold: NumPy 2's OverflowError.
        Error::ValueOutOfRange { .. } => pyo3::exceptions::PyOverflowError::new_err(msg),
        Error::InvalidArgument { .. }
            if msg.contains("not defined for") || msg.contains("casting rule same_kind") =>
        {
            PyTypeError::new_err(msg)
        }
        Error::Device { .. } | Error::DeviceMismatch { .. } => PyRuntimeError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

pub trait Q<T> {
    fn q(self) -> PyResult<T>;
}
impl<T> Q<T> for quill::Result<T> {
    fn q(self) -> PyResult<T> {
        self.map_err(err)
    }
}

/// NumPy's name for a dtype.
pub fn np_name(d: DType) -> &'static str {
    d.numpy_name()
}

/// A dtype from a name (`"float32"`, `"f32"`, `"int64"`, ...) or a NumPy dtype / type.
pub fn dtype_of(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let named = || -> Option<String> {
        let n: String = obj.getattr("name").ok()?.extract().ok()?;
        DType::parse(&n).map(|_| n)
    };
    let name: String = match obj.extract::<String>() {
        Ok(s) => s,
        // dtype objects with a `name` (quill.array_api's, NumPy's)
        Err(_) if named().is_some() => named().unwrap_or_default(),
        Err(_) => {
            let np = obj.py().import("numpy")?;
            np.call_method1("dtype", (obj,))?
                .getattr("name")?
                .extract()?
        }
    };
    DType::parse(&name).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "unsupported dtype '{name}': quill has float16/32/64, bfloat16, complex64/128, \
             int8/16/32/64, uint8/16/32/64 and bool"
        ))
    })
}

/// A Python number as a weak scalar. Exact types only: NumPy scalars (`np.float64` subclasses
/// `float`) are strong, as in NumPy 2, and go through `from_numpy_like` with their dtype.
pub fn scalar_of(obj: &Bound<'_, PyAny>) -> Option<Scalar> {
    if obj.is_exact_instance_of::<PyBool>() {
        return obj.extract::<bool>().ok().map(Scalar::B);
    }
    if obj.is_exact_instance_of::<PyInt>() {
        return obj.extract::<i128>().ok().map(Scalar::I);
    }
    if obj.is_exact_instance_of::<PyFloat>() {
        return obj.extract::<f64>().ok().map(Scalar::F);
    }
    if let Ok(z) = obj.cast_exact::<PyComplex>() {
        return Some(Scalar::C(z.real(), z.imag()));
    }
    None
}

/// A Python int beyond i128's range, as the nearest f64 (Python's `float(x)`: an
/// `OverflowError` past f64's range). `None` for anything else.
pub fn big_int_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    if !obj.is_exact_instance_of::<PyInt>() || obj.extract::<i128>().is_ok() {
        return Ok(None);
    }
    let f = obj
        .py()
        .import("builtins")?
        .getattr("float")?
        .call1((obj,))?;
    Ok(Some(f.extract::<f64>()?))
}

/// The number a Python value writes into an array of `dtype` (`a[...] = v`, `fill`): a weak
/// scalar, with ints beyond i64 taken by float and bool arrays only (NumPy 2: OverflowError
/// for an integer dtype). `None` when `obj` is no Python number.
pub fn fill_scalar(obj: &Bound<'_, PyAny>, dtype: DType) -> PyResult<Option<Scalar>> {
    if let Some(s) = scalar_of(obj) {
        return Ok(Some(s));
    }
    match big_int_of(obj)? {
        None => Ok(None),
        Some(_) if dtype == DType::Bool => Ok(Some(Scalar::B(true))),
        Some(v) if dtype.is_float() => Ok(Some(Scalar::F(v))),
        Some(_) => Err(pyo3::exceptions::PyOverflowError::new_err(format!(
            "Python integer {obj} out of bounds for {dtype} (NumPy 2 rule)"
        ))),
    }
}

/// An array from anything NumPy can make an array of. Python floats become float32 (needle's
/// default), a NumPy array keeps its dtype unless `dtype` is given.
pub fn from_numpy_like<'py>(obj: &Bound<'py, PyAny>, dtype: Option<DType>) -> PyResult<NDArray> {
    let py = obj.py();
    let np = py.import("numpy")?;
    // NumPy arrays and NumPy scalars keep their dtype; Python floats become float32.
    let is_ndarray =
        obj.is_instance(&np.getattr("ndarray")?)? || obj.is_instance(&np.getattr("generic")?)?;
    let target = match dtype {
        Some(DType::BF16) => Some("float32"), // NumPy has no bfloat16: cast after.
        Some(d) => Some(np_name(d)),
        None => None,
    };
    // `asarray(order="C")`, not `ascontiguousarray`, which turns 0-d arrays into 1-d ones.
    let c_order = |x: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> {
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("order", "C")?;
        np.call_method("asarray", (x,), Some(&kw))
    };
    let mut arr = c_order(obj)?;
    if let Some(t) = target {
        arr = arr.call_method1("astype", (t,))?;
    } else {
        let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
        let name: String = arr.getattr("dtype")?.getattr("name")?.extract()?;
        let to = match (kind.as_str(), name.as_str(), is_ndarray) {
            ("f", "float64", false) => Some("float32"),
            ("f", "float32" | "float64" | "float16", _) => None,
            // float128 (longdouble) would lose digits silently: say so, and how to opt in.
            ("f", _, _) => {
                return Err(PyTypeError::new_err(format!(
                    "cannot make a quill array from NumPy dtype {name}: quill's widest float is \
                     float64; convert with .astype('float64') first if its precision is enough"
                )))
            }
            // Python complex numbers as complex64, as Python floats become float32.
            ("c", "complex128", false) => Some("complex64"),
            ("c", "complex64" | "complex128", _) => None,
            // Every NumPy integer width and bool has its quill dtype.
            ("i" | "u" | "b", _, _) => None,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "cannot make a quill array from NumPy dtype {name}"
                )))
            }
        };
        if let Some(t) = to {
            arr = arr.call_method1("astype", (t,))?;
        }
    }
    let arr = c_order(&arr)?;
    let name: String = arr.getattr("dtype")?.getattr("name")?.extract()?;
    let d = DType::parse(&name).ok_or_else(|| PyTypeError::new_err(name.clone()))?;
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    // Little-endian bytes: NumPy's native order here (x86_64 / aarch64).
    let bytes = arr.call_method0("tobytes")?;
    let bytes = bytes.cast::<PyBytes>()?;
    let a = NDArray::from_le_bytes(bytes.as_bytes(), &shape, d).q()?;
    Ok(match dtype {
        Some(DType::BF16) => a.astype(DType::BF16).q()?,
        _ => a,
    })
}

/// A NumPy array with `a`'s elements (a copy, C order; bfloat16 comes out as float32).
pub fn to_numpy<'py>(py: Python<'py>, a: &NDArray) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let a = if a.dtype() == DType::BF16 {
        a.astype(DType::F32).q()?
    } else {
        a.clone()
    };
    let bytes = a.to_le_bytes().q()?;
    let buf = pyo3::types::PyByteArray::new(py, &bytes);
    let flat = np.call_method1("frombuffer", (buf, np_name(a.dtype())))?;
    flat.call_method1("reshape", (PyTuple::new(py, a.shape())?,))
}

/// A Python index expression (an int, slice, None, `...`, an integer array, or a tuple of
/// them) as basic entries and integer arrays. Arrays are quill NDArrays, NumPy arrays or
/// lists of ints; a bool entry is refused (a mask goes alone, through `bool_mask`).
pub fn index_args(idx: &Bound<'_, PyAny>) -> PyResult<Vec<IndexArg>> {
    let one = |x: &Bound<'_, PyAny>| -> PyResult<IndexArg> {
        if x.is_none() {
            return Ok(IndexArg::Basic(SliceArg::NewAxis));
        }
        if x.is_instance_of::<PyEllipsis>() {
            return Ok(IndexArg::Basic(SliceArg::Ellipsis));
        }
        if let Ok(s) = x.cast::<PySlice>() {
            let get = |name: &str| -> PyResult<Option<isize>> {
                let v = s.getattr(name)?;
                if v.is_none() {
                    Ok(None)
                } else {
                    v.extract::<isize>().map(Some)
                }
            };
            let step = get("step")?.unwrap_or(1);
            if step == 0 {
                return Err(PyValueError::new_err("slice step cannot be zero"));
            }
            return Ok(IndexArg::Basic(SliceArg::Range {
                start: get("start")?,
                stop: get("stop")?,
                step,
            }));
        }
        if x.is_instance_of::<PyBool>() {
            return Err(PyIndexError::new_err(
                "boolean indices are not supported; use where or a mask multiply",
            ));
        }
        // Before ints: a one-element quill array converts to an int too, but as an index it
        // keeps its dims (NumPy's rule).
        if let Ok(a) = x.extract::<PyRef<crate::ndarray::PyNDArray>>() {
            if a.inner.ndim() > 0 || a.inner.dtype() == DType::Bool {
                return Ok(IndexArg::Array(a.inner.clone()));
            }
        }
        if let Ok(i) = x.extract::<isize>() {
            return Ok(IndexArg::Basic(SliceArg::Index(i)));
        }
        let listish = x.is_instance_of::<PyList>() || x.hasattr("__array_interface__")?;
        if listish {
            if let Ok(a) = from_numpy_like(x, None) {
                if a.dtype().is_int() || (a.numel() == 0 && a.ndim() == 1) {
                    return Ok(IndexArg::Array(a.astype(DType::I64).map_err(err)?));
                }
            }
        }
        Err(PyIndexError::new_err(format!(
            "only integers, slices, None, ... and integer arrays are valid indices, got {}",
            x.get_type().name()?
        )))
    };
    match idx.cast::<PyTuple>() {
        Ok(t) => t.iter().map(|x| one(&x)).collect(),
        Err(_) => Ok(vec![one(idx)?]),
    }
}

/// A basic index expression (ints, slices, None, `...`) as `SliceArg`s: what views and
/// assignment take; an integer array here is an IndexError naming what is supported.
pub fn index_of(idx: &Bound<'_, PyAny>) -> PyResult<Vec<SliceArg>> {
    index_args(idx)?
        .into_iter()
        .map(|a| match a {
            IndexArg::Basic(s) => Ok(s),
            IndexArg::Array(_) => Err(PyIndexError::new_err(
                "integer-array indices select a copy: they work in a[idx] but not in assignment \
                 (a[idx] = v); write through basic indices or a bool mask",
            )),
        })
        .collect()
}

/// A shape given as a tuple / list, or as separate ints (`reshape(2, 3)`).
pub fn shape_args(args: &Bound<'_, PyTuple>) -> PyResult<Vec<isize>> {
    if args.len() == 1 {
        let first = args.get_item(0)?;
        if let Ok(v) = first.extract::<Vec<isize>>() {
            return Ok(v);
        }
    }
    args.extract()
}
