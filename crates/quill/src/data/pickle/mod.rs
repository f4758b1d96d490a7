//! A reader for the subset of Python's pickle format that datasets use: dicts, lists, tuples,
//! ints, floats, strings, bytes, and NumPy arrays (both `ndarray.__reduce__` forms: protocol
//! 2-4's `_reconstruct` + state and protocol 5's `_frombuffer`, under `numpy.core` and NumPy
//! 2's `numpy._core`), from protocols 0 to 5.
//!
//! It runs no code: the only globals it accepts are the data-only constructors listed in
//! `globals`, and any other is refused by name as soon as the pickle names it. Hostile input
//! cannot exhaust the stack or memory:
//! - values live in a flat arena ([`Pickle`]) and refer to each other by index ([`Ref`]), so
//!   dropping, cloning, comparing or printing a value never recurses, however deep the nesting;
//! - nesting deeper than [`MAX_DEPTH`] and cycles (a list that contains itself, built through
//!   the memo) are errors, checked without recursion;
//! - every length is checked against the bytes left before anything is allocated;
//! - error messages describe values shallowly (kind and a bounded prefix).

mod globals;
mod graph;
mod machine;
mod reader;

pub use machine::unpickle;

use quill_core::DType;

/// How deeply containers may nest (a CIFAR batch nests 3 levels): deeper is an error.
pub const MAX_DEPTH: u32 = 1000;
/// How many characters of a string, or bytes of a byte string, an error message shows.
const PREVIEW: usize = 40;

/// A NumPy array's decoded header and little-endian bytes.
#[derive(Clone, PartialEq)]
pub struct PickledArray {
    /// The element type.
    pub dtype: DType,
    /// The dimensions, outermost first.
    pub shape: Vec<usize>,
    /// C order (a Fortran-order pickle is reordered when read).
    pub data: Vec<u8>,
}

impl std::fmt::Debug for PickledArray {
    // The data can be megabytes: show its size, not its bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PickledArray({} {:?}, {} bytes)",
            self.dtype,
            self.shape,
            self.data.len()
        )
    }
}

/// A handle to one value of a [`Pickle`] (an index into its arena).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ref(usize);

/// A value from a pickle. Containers hold [`Ref`]s into the same [`Pickle`], never values, so
/// that no operation on a value recurses into its contents.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Python's `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int` that fits in i64 (larger ones are an error).
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `bytes` or `bytearray` (Python 2 `str`s too, as `pickle.load(encoding="bytes")`).
    Bytes(Vec<u8>),
    /// A `list`.
    List(Vec<Ref>),
    /// A `tuple`.
    Tuple(Vec<Ref>),
    /// A `dict`, as (key, value) pairs in insertion order (a repeated key: the last pair wins).
    Dict(Vec<(Ref, Ref)>),
    /// A NumPy array.
    Array(PickledArray),
    /// One of the accepted data-only constructors (`module.name`), before it is called.
    Global(String),
    /// A `numpy.dtype` (its type string, e.g. `"u1"`).
    DType(String),
    /// A `_reconstruct`ed array waiting for its state (`BUILD`).
    PendingArray,
}

impl Value {
    /// The kind of value, as an error message names it.
    pub fn kind(&self) -> &'static str {
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
            Value::DType(_) => "dtype",
            Value::PendingArray => "ndarray (no state yet)",
        }
    }

    /// The `i`-th value this one refers to (a dict's keys and values alternate).
    fn child(&self, i: usize) -> Option<Ref> {
        match self {
            Value::List(items) | Value::Tuple(items) => items.get(i).copied(),
            Value::Dict(pairs) => pairs
                .get(i / 2)
                .map(|&(k, v)| if i.is_multiple_of(2) { k } else { v }),
            _ => None,
        }
    }
}

/// A decoded pickle: its values in a flat arena and the one the pickle returned.
#[derive(Clone, Debug)]
pub struct Pickle {
    values: Vec<Value>,
    root: Ref,
}

impl Pickle {
    /// The value the pickle returned (its top-level object).
    pub fn root(&self) -> Ref {
        self.root
    }

    /// The value behind `r`; `None` for a `Ref` from another pickle that is out of range here.
    pub fn value(&self, r: Ref) -> Option<&Value> {
        self.values.get(r.0)
    }

    /// The entry of the dict `dict` under the key `name`, given as str or bytes (Python 2
    /// pickles and `encoding="bytes"` use byte strings for keys). `None` when `dict` is not a
    /// dict or has no such key.
    pub fn get(&self, dict: Ref, name: &str) -> Option<Ref> {
        let Some(Value::Dict(pairs)) = self.value(dict) else {
            return None;
        };
        pairs
            .iter()
            .rev()
            .find(|(k, _)| match self.value(*k) {
                Some(Value::Str(s)) => s == name,
                Some(Value::Bytes(b)) => b == name.as_bytes(),
                _ => false,
            })
            .map(|&(_, v)| v)
    }

    /// A short description of `r` for error messages: its kind and a bounded preview, never
    /// its contents in full.
    pub fn describe(&self, r: Ref) -> String {
        self.value(r)
            .map_or_else(|| "a dangling reference".into(), describe)
    }
}

/// A short description of `v` for error messages (see [`Pickle::describe`]).
pub fn describe(v: &Value) -> String {
    match v {
        Value::Int(i) => format!("int {i}"),
        Value::Float(x) => format!("float {x}"),
        Value::Bool(b) => format!("bool {b}"),
        Value::Str(s) => format!("str {}", preview_str(s)),
        Value::Bytes(b) => {
            let shown = String::from_utf8_lossy(&b[..b.len().min(PREVIEW)]).into_owned();
            let more = if b.len() > PREVIEW { "..." } else { "" };
            format!("bytes of length {} ({:?}{more})", b.len(), shown)
        }
        Value::List(items) | Value::Tuple(items) => {
            format!("{} of {} items", v.kind(), items.len())
        }
        Value::Dict(pairs) => format!("dict of {} entries", pairs.len()),
        Value::Array(a) => format!("ndarray {} {:?}", a.dtype, a.shape),
        Value::Global(g) | Value::DType(g) => format!("{} {}", v.kind(), preview_str(g)),
        Value::None | Value::PendingArray => v.kind().to_string(),
    }
}

/// `s` quoted and escaped, cut to a bounded number of characters.
pub(crate) fn preview_str(s: &str) -> String {
    let mut out: String = s.chars().take(PREVIEW).collect();
    if s.chars().nth(PREVIEW).is_some() {
        out.push_str("...");
    }
    format!("{out:?}")
}
