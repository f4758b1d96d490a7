//! The globals a data pickle may name, and what "calling" them means here: each builds a value
//! from its arguments (bytes, a dtype, an array) and none runs code. A global outside this list
//! is refused as soon as the pickle names it.

use super::machine::bad;
use super::{describe, preview_str, PickledArray, Ref, Value};
use quill_core::{DType, Result};

/// The accepted globals: NumPy's array and dtype reconstructors (NumPy 1's `numpy.core` and
/// NumPy 2's `numpy._core`), and the spellings of `bytes` that protocol 2 uses.
const ALLOWED: &[&str] = &[
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    "numpy.core.numeric._frombuffer",
    "numpy._core.numeric._frombuffer",
    "numpy.ndarray",
    "numpy.dtype",
    "_codecs.encode",
    "__builtin__.bytes",
    "builtins.bytes",
    "__builtin__.bytearray",
    "builtins.bytearray",
];

/// `module.name` when it is an accepted global, else an error that names it.
pub(super) fn check_global(module: &str, name: &str) -> Result<String> {
    let g = format!("{module}.{name}");
    if ALLOWED.contains(&g.as_str()) {
        return Ok(g);
    }
    Err(bad(format!(
        "the pickle names the global {}, which this reader refuses: it runs no code and \
         accepts only NumPy's array and dtype constructors and bytes",
        preview_str(&g)
    )))
}

fn is(global: &str, tail: &str) -> bool {
    global
        .strip_prefix("numpy.core.")
        .or_else(|| global.strip_prefix("numpy._core."))
        == Some(tail)
}

/// REDUCE: the value an accepted global builds from `args`.
pub(super) fn reduce(values: &[Value], func: Ref, args: Ref) -> Result<Value> {
    let Value::Global(g) = &values[func.0] else {
        return Err(bad(format!(
            "REDUCE of a {}, not a global",
            describe(&values[func.0])
        )));
    };
    let Value::Tuple(arg_refs) = &values[args.0] else {
        return Err(bad(format!(
            "REDUCE of {g} with a {} for arguments, not a tuple",
            describe(&values[args.0])
        )));
    };
    let a: Vec<&Value> = arg_refs.iter().map(|r| &values[r.0]).collect();
    let unexpected = || {
        let shown: Vec<String> = a.iter().map(|v| describe(v)).collect();
        bad(format!(
            "{g} called with unexpected arguments ({})",
            shown.join(", ")
        ))
    };
    match (g.as_str(), a.as_slice()) {
        // Protocol 2's spelling of non-empty `bytes`: `_codecs.encode(text, "latin1")`.
        ("_codecs.encode", [Value::Str(s), Value::Str(enc)]) if is_latin1(enc) => latin1(s),
        // Protocol 2's spelling of empty `bytes` (NumPy's data for an empty array), and
        // `bytearray`'s: a copy of bytes, or latin-1 text.
        (
            "__builtin__.bytes" | "builtins.bytes" | "__builtin__.bytearray" | "builtins.bytearray",
            args,
        ) => match args {
            [] => Ok(Value::Bytes(Vec::new())),
            [Value::Bytes(b)] => Ok(Value::Bytes(b.clone())),
            [Value::Str(s), Value::Str(enc)] if is_latin1(enc) => latin1(s),
            _ => Err(unexpected()),
        },
        ("numpy.dtype", [Value::Str(name), ..]) => Ok(Value::DType(name.clone())),
        ("numpy.dtype", [Value::Bytes(name), ..]) => {
            Ok(Value::DType(String::from_utf8_lossy(name).into_owned()))
        }
        (g, [Value::Global(cls), ..]) if is(g, "multiarray._reconstruct") => {
            if cls != "numpy.ndarray" {
                return Err(bad(format!("_reconstruct of {cls}, not numpy.ndarray")));
            }
            Ok(Value::PendingArray)
        }
        (g, [Value::Bytes(buf), Value::DType(dt), Value::Tuple(shape), Value::Str(order)])
            if is(g, "numeric._frombuffer") =>
        {
            let dims = shape_of(values, shape)?;
            array(dt, dims, order == "F", buf.clone())
        }
        (g, [Value::DType(dt), Value::Bytes(raw)]) if is(g, "multiarray.scalar") => scalar(dt, raw),
        _ => Err(unexpected()),
    }
}

/// BUILD: `obj` given `state` (only arrays and dtypes take state).
pub(super) fn build(values: &[Value], obj: Ref, state: Ref) -> Result<Value> {
    let state_items: Vec<&Value> = match &values[state.0] {
        Value::Tuple(items) => items.iter().map(|r| &values[r.0]).collect(),
        other => {
            return Err(bad(format!(
                "BUILD of a {} with a {} state",
                describe(&values[obj.0]),
                describe(other)
            )))
        }
    };
    match &values[obj.0] {
        Value::PendingArray => match state_items.as_slice() {
            [Value::Int(_), Value::Tuple(shape), Value::DType(dt), Value::Bool(fortran), Value::Bytes(raw)] => {
                array(dt, shape_of(values, shape)?, *fortran, raw.clone())
            }
            [Value::Int(_), Value::Tuple(shape), Value::DType(dt), Value::Bool(fortran), Value::Str(raw)] =>
            {
                // Python 2's pickles of arrays in protocol 0 keep the data as latin-1 text.
                let Value::Bytes(raw) = latin1(raw)? else {
                    return Err(bad("latin-1 data did not decode to bytes"));
                };
                array(dt, shape_of(values, shape)?, *fortran, raw)
            }
            _ => Err(bad(
                "ndarray state is not (version, shape, dtype, fortran, bytes); object arrays \
                 are not read",
            )),
        },
        Value::DType(name) => {
            let big = match state_items.get(1) {
                Some(Value::Str(o)) => o == ">",
                Some(Value::Bytes(o)) => o == b">",
                _ => false,
            };
            if big {
                return Err(bad(format!(
                    "big-endian dtype >{} is not supported",
                    preview_str(name)
                )));
            }
            Ok(Value::DType(name.clone()))
        }
        other => Err(bad(format!(
            "BUILD of a {}: only NumPy arrays and dtypes take state",
            describe(other)
        ))),
    }
}

fn is_latin1(enc: &str) -> bool {
    matches!(enc, "latin1" | "latin-1" | "iso-8859-1")
}

fn latin1(s: &str) -> Result<Value> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).map_err(|_| bad("latin-1 text above U+00FF")))
        .collect::<Result<Vec<u8>>>()
        .map(Value::Bytes)
}

/// NumPy's limit on the number of dimensions (`NPY_MAXDIMS`); it also keeps the shapes that
/// error messages print short.
const MAX_NDIM: usize = 64;

fn shape_of(values: &[Value], shape: &[Ref]) -> Result<Vec<usize>> {
    if shape.len() > MAX_NDIM {
        return Err(bad(format!(
            "ndarray of {} dimensions (NumPy allows at most {MAX_NDIM})",
            shape.len()
        )));
    }
    shape
        .iter()
        .map(|r| match &values[r.0] {
            Value::Int(n) if *n >= 0 => usize::try_from(*n).map_err(|_| bad("dimension overflows")),
            other => Err(bad(format!(
                "ndarray shape entries must be non-negative ints, got {}",
                describe(other)
            ))),
        })
        .collect()
}

fn dtype_of(dt: &str) -> Result<DType> {
    Ok(match dt {
        "u1" => DType::U8,
        "b1" => DType::Bool,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        other => {
            return Err(bad(format!(
                "NumPy dtype {} is not supported",
                preview_str(other)
            )))
        }
    })
}

/// A NumPy scalar (`numpy.int64(3)` and friends in a list of labels) as an int, float or bool.
fn scalar(dt: &str, raw: &[u8]) -> Result<Value> {
    let dtype = dtype_of(dt)?;
    if raw.len() != dtype.size_in_bytes() {
        return Err(bad(format!(
            "a {dt} scalar needs {} bytes, the pickle holds {}",
            dtype.size_in_bytes(),
            raw.len()
        )));
    }
    let le = |n: usize| {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&raw[..n]);
        a
    };
    Ok(match dtype {
        DType::U8 => Value::Int(i64::from(raw[0])),
        DType::Bool => Value::Bool(raw[0] != 0),
        DType::I32 => Value::Int(i64::from(i32::from_le_bytes([
            raw[0], raw[1], raw[2], raw[3],
        ]))),
        DType::I64 => Value::Int(i64::from_le_bytes(le(8))),
        DType::F32 => Value::Float(f64::from(f32::from_le_bytes([
            raw[0], raw[1], raw[2], raw[3],
        ]))),
        DType::F64 => Value::Float(f64::from_le_bytes(le(8))),
        other => return Err(bad(format!("a {other} scalar is not read"))),
    })
}

/// An array of `dims` and dtype `dt` over `data`, whose length must match exactly.
fn array(dt: &str, dims: Vec<usize>, fortran: bool, data: Vec<u8>) -> Result<Value> {
    let dtype = dtype_of(dt)?;
    let count = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(dtype.size_in_bytes()))
        .ok_or_else(|| bad(format!("ndarray shape {dims:?} overflows")))?;
    if count != data.len() {
        return Err(bad(format!(
            "ndarray of shape {dims:?} and dtype {dt} needs {count} bytes, the pickle holds {}",
            data.len()
        )));
    }
    let data = if fortran && dims.len() > 1 {
        to_c_order(&dims, dtype.size_in_bytes(), &data)
    } else {
        data
    };
    Ok(Value::Array(PickledArray {
        dtype,
        shape: dims,
        data,
    }))
}

/// Reorders a Fortran-order buffer (first index fastest) into C order.
fn to_c_order(dims: &[usize], elem: usize, data: &[u8]) -> Vec<u8> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(data.len());
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let mut f = 0;
        for k in (0..dims.len()).rev() {
            f = f * dims[k] + idx[k];
        }
        out.extend_from_slice(&data[f * elem..(f + 1) * elem]);
        for k in (0..dims.len()).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}
