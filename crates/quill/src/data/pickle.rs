//! A reader for the subset of Python's pickle format that datasets use: dicts, lists, tuples,
//! ints, floats, strings, bytes, and NumPy arrays (both `ndarray.__reduce__` forms: protocol
//! 2-4's `_reconstruct` + state and protocol 5's `_frombuffer`, under `numpy.core` and NumPy
//! 2's `numpy._core`). It runs no code: any other global is an error that names it. Every
//! length is checked against the bytes left, so a malformed file is an error, never a panic or
//! a huge allocation.

use quill_core::{DType, Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

const OP: &str = "unpickle";

/// A NumPy array's decoded header and little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct PickledArray {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// C order (a Fortran-order pickle is reordered when read).
    pub data: Vec<u8>,
}

/// A value from a pickle.
#[derive(Clone, Debug)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Rc<RefCell<Vec<Value>>>),
    Tuple(Vec<Value>),
    Dict(Rc<RefCell<Vec<(Value, Value)>>>),
    Array(PickledArray),
    /// `module.name`, as GLOBAL pushed it (only callable through `REDUCE` for the known ones).
    Global(String),
    /// A `numpy.dtype` (its type string, e.g. `"u1"`).
    DTypeName(String),
    /// A `_reconstruct`ed array waiting for its state (`BUILD`).
    PendingArray,
    Mark,
}

impl Value {
    /// The entry of a dict under the key `name`, given as str or bytes (Python 2 pickles use
    /// byte strings for keys).
    pub fn get(&self, name: &str) -> Option<Value> {
        let Value::Dict(d) = self else { return None };
        d.borrow()
            .iter()
            .find(|(k, _)| match k {
                Value::Str(s) => s == name,
                Value::Bytes(b) => b == name.as_bytes(),
                _ => false,
            })
            .map(|(_, v)| v.clone())
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Array(_) => "ndarray",
            Value::Global(_) => "global",
            Value::DTypeName(_) => "dtype",
            Value::PendingArray => "ndarray (no state yet)",
            Value::Mark => "mark",
        }
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(OP, msg)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.buf.len() - self.pos {
            return Err(bad(format!(
                "truncated: {n} bytes wanted at offset {}, {} left",
                self.pos,
                self.buf.len() - self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn le<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn len4(&mut self) -> Result<usize> {
        Ok(u32::from_le_bytes(self.le()?) as usize)
    }
    fn len8(&mut self) -> Result<usize> {
        usize::try_from(u64::from_le_bytes(self.le()?)).map_err(|_| bad("length overflows"))
    }
    fn line(&mut self) -> Result<String> {
        let rest = &self.buf[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("unterminated GLOBAL name"))?;
        self.pos += end + 1;
        String::from_utf8(rest[..end].to_vec()).map_err(|_| bad("GLOBAL name is not UTF-8"))
    }
}

/// Decodes one pickle.
pub fn unpickle(bytes: &[u8]) -> Result<Value> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let mut stack: Vec<Value> = Vec::new();
    let mut memo: HashMap<usize, Value> = HashMap::new();
    let pop = |stack: &mut Vec<Value>| stack.pop().ok_or_else(|| bad("stack underflow"));
    let pop_mark = |stack: &mut Vec<Value>| -> Result<Vec<Value>> {
        let m = stack
            .iter()
            .rposition(|v| matches!(v, Value::Mark))
            .ok_or_else(|| bad("no MARK on the stack"))?;
        let items = stack.split_off(m + 1);
        stack.pop();
        Ok(items)
    };
    loop {
        let at = r.pos;
        let op = r.u8()?;
        match op {
            0x80 => {
                r.u8()?; // PROTO: every protocol's opcodes are handled alike
            }
            0x95 => {
                r.le::<8>()?; // FRAME: a length hint only
            }
            b'.' => return pop(&mut stack),
            b'(' => stack.push(Value::Mark),
            b'}' => stack.push(Value::Dict(Rc::default())),
            b']' => stack.push(Value::List(Rc::default())),
            b')' => stack.push(Value::Tuple(Vec::new())),
            b'N' => stack.push(Value::None),
            0x88 => stack.push(Value::Bool(true)),
            0x89 => stack.push(Value::Bool(false)),
            b'K' => stack.push(Value::Int(i64::from(r.u8()?))),
            b'M' => stack.push(Value::Int(i64::from(u16::from_le_bytes(r.le()?)))),
            b'J' => stack.push(Value::Int(i64::from(i32::from_le_bytes(r.le()?)))),
            0x8a => {
                let n = usize::from(r.u8()?);
                let b = r.take(n)?;
                if n > 8 {
                    return Err(bad(format!("LONG1 of {n} bytes does not fit in i64")));
                }
                let fill = if b.last().is_some_and(|&x| x & 0x80 != 0) {
                    0xff
                } else {
                    0
                };
                let mut a = [fill; 8];
                a[..n].copy_from_slice(b);
                stack.push(Value::Int(i64::from_le_bytes(a)));
            }
            b'G' => stack.push(Value::Float(f64::from_be_bytes(r.le()?))),
            b'U' | b'C' => {
                let n = usize::from(r.u8()?);
                stack.push(Value::Bytes(r.take(n)?.to_vec()));
            }
            b'T' | b'B' => {
                let n = r.len4()?;
                stack.push(Value::Bytes(r.take(n)?.to_vec()));
            }
            0x8e | 0x96 => {
                let n = r.len8()?;
                stack.push(Value::Bytes(r.take(n)?.to_vec()));
            }
            0x8c | b'X' | 0x8d => {
                let n = match op {
                    0x8c => usize::from(r.u8()?),
                    b'X' => r.len4()?,
                    _ => r.len8()?,
                };
                let s = String::from_utf8(r.take(n)?.to_vec())
                    .map_err(|_| bad(format!("invalid UTF-8 string at offset {at}")))?;
                stack.push(Value::Str(s));
            }
            b'q' | b'r' | 0x94 => {
                let key = match op {
                    b'q' => usize::from(r.u8()?),
                    b'r' => r.len4()?,
                    _ => memo.len(),
                };
                let top = stack
                    .last()
                    .ok_or_else(|| bad("memo put on an empty stack"))?;
                memo.insert(key, top.clone());
            }
            b'h' | b'j' => {
                let key = if op == b'h' {
                    usize::from(r.u8()?)
                } else {
                    r.len4()?
                };
                let v = memo
                    .get(&key)
                    .ok_or_else(|| bad(format!("memo key {key} was never stored")))?;
                stack.push(v.clone());
            }
            b'c' => {
                let module = r.line()?;
                let name = r.line()?;
                stack.push(Value::Global(format!("{module}.{name}")));
            }
            0x93 => {
                let name = pop(&mut stack)?;
                let module = pop(&mut stack)?;
                match (module, name) {
                    (Value::Str(m), Value::Str(n)) => stack.push(Value::Global(format!("{m}.{n}"))),
                    _ => return Err(bad("STACK_GLOBAL needs two strings")),
                }
            }
            b't' => {
                let items = pop_mark(&mut stack)?;
                stack.push(Value::Tuple(items));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if stack.len() < n {
                    return Err(bad("stack underflow"));
                }
                let items = stack.split_off(stack.len() - n);
                stack.push(Value::Tuple(items));
            }
            b'a' => {
                let v = pop(&mut stack)?;
                match stack.last() {
                    Some(Value::List(l)) => l.borrow_mut().push(v),
                    _ => return Err(bad("APPEND needs a list")),
                }
            }
            b'e' => {
                let items = pop_mark(&mut stack)?;
                match stack.last() {
                    Some(Value::List(l)) => l.borrow_mut().extend(items),
                    _ => return Err(bad("APPENDS needs a list")),
                }
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let v = pop(&mut stack)?;
                    let k = pop(&mut stack)?;
                    vec![k, v]
                } else {
                    pop_mark(&mut stack)?
                };
                if items.len() % 2 != 0 {
                    return Err(bad("SETITEMS needs key, value pairs"));
                }
                let Some(Value::Dict(d)) = stack.last() else {
                    return Err(bad("SETITEM(S) needs a dict"));
                };
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    d.borrow_mut().push((k, v));
                }
            }
            b'R' => {
                let args = pop(&mut stack)?;
                let func = pop(&mut stack)?;
                stack.push(reduce(func, args)?);
            }
            b'b' => {
                let state = pop(&mut stack)?;
                let obj = pop(&mut stack)?;
                stack.push(build(obj, state)?);
            }
            other => {
                return Err(bad(format!(
                    "unsupported pickle opcode 0x{other:02x} at offset {at} (only data pickles \
                     of dicts, lists, numbers, strings and NumPy arrays are read)"
                )))
            }
        }
    }
}

fn is_numpy(global: &str, module_tail: &str, name: &str) -> bool {
    [
        format!("numpy.core.{module_tail}.{name}"),
        format!("numpy._core.{module_tail}.{name}"),
    ]
    .iter()
    .any(|g| g == global)
}

/// Calls one of the few known constructors.
fn reduce(func: Value, args: Value) -> Result<Value> {
    let Value::Global(g) = func else {
        return Err(bad(format!("REDUCE of a {}", func.kind())));
    };
    let Value::Tuple(args) = args else {
        return Err(bad(format!("REDUCE of {g} with non-tuple arguments")));
    };
    match (g.as_str(), args.as_slice()) {
        // Python 3's protocol-2 spelling of `bytes`.
        ("_codecs.encode", [Value::Str(s), Value::Str(enc)]) if enc == "latin1" => s
            .chars()
            .map(|c| u8::try_from(u32::from(c)).map_err(|_| bad("latin1 text above U+00FF")))
            .collect::<Result<Vec<u8>>>()
            .map(Value::Bytes),
        ("numpy.dtype", [Value::Str(name), ..]) => Ok(Value::DTypeName(name.clone())),
        ("numpy.dtype", [Value::Bytes(name), ..]) => {
            Ok(Value::DTypeName(String::from_utf8_lossy(name).into_owned()))
        }
        _ if is_numpy(&g, "multiarray", "_reconstruct") => Ok(Value::PendingArray),
        _ if is_numpy(&g, "numeric", "_frombuffer") => match args.as_slice() {
            [Value::Bytes(buf), Value::DTypeName(dt), Value::Tuple(shape), Value::Str(order)] => {
                array(dt, shape, order == "F", buf.clone())
            }
            _ => Err(bad("_frombuffer with unexpected arguments")),
        },
        _ => Err(bad(format!(
            "the pickle calls {g}, which this reader does not run (it reads data only)"
        ))),
    }
}

fn build(obj: Value, state: Value) -> Result<Value> {
    match (obj, state) {
        (Value::PendingArray, Value::Tuple(s)) => match s.as_slice() {
            [Value::Int(_), Value::Tuple(shape), Value::DTypeName(dt), Value::Bool(fortran), Value::Bytes(raw)] => {
                array(dt, shape, *fortran, raw.clone())
            }
            _ => Err(bad("ndarray state is not (version, shape, dtype, fortran, bytes); object arrays are not read")),
        },
        (Value::DTypeName(name), Value::Tuple(s)) => {
            let big = match s.get(1) {
                Some(Value::Str(o)) => o == ">",
                Some(Value::Bytes(o)) => o == b">",
                _ => false,
            };
            if big {
                return Err(bad(format!("big-endian dtype >{name} is not supported")));
            }
            Ok(Value::DTypeName(name))
        }
        (obj, state) => Err(bad(format!(
            "BUILD of a {} with a {} state",
            obj.kind(),
            state.kind()
        ))),
    }
}

fn array(dt: &str, shape: &[Value], fortran: bool, data: Vec<u8>) -> Result<Value> {
    let dtype = match dt {
        "u1" => DType::U8,
        "b1" => DType::Bool,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f4" => DType::F32,
        "f8" => DType::F64,
        other => return Err(bad(format!("NumPy dtype {other:?} is not supported"))),
    };
    let mut dims = Vec::with_capacity(shape.len());
    for d in shape {
        match d {
            Value::Int(n) if *n >= 0 => dims.push(*n as usize),
            _ => return Err(bad("ndarray shape entries must be non-negative ints")),
        }
    }
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
