//! The pickle virtual machine: reads opcodes into the arena of a [`Pickle`] with an explicit
//! stack and mark stack (no recursion), tracks each container's nesting depth as it grows, and
//! checks the result for cycles and depth without recursion before handing it out.

use super::globals::{self, check_global};
use super::graph::check_graph;
use super::reader::{long_le, parse_int, parse_key, raw_unicode_escape, Reader};
use super::{describe, preview_str, Pickle, Ref, Value, MAX_DEPTH};
use quill_core::{Error, Result};
use std::collections::HashMap;

const OP: &str = "unpickle";

/// An error from decoding a pickle.
pub(super) fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(OP, msg)
}

/// The machine's state: the arena, each value's nesting depth (a lower bound while decoding:
/// a list's depth is raised when something is appended to it, not its parents'), the stack,
/// the stack lengths at each MARK, and the memo.
struct Machine {
    values: Vec<Value>,
    depth: Vec<u32>,
    stack: Vec<Ref>,
    marks: Vec<usize>,
    memo: HashMap<usize, Ref>,
}

/// Decodes one pickle. Nothing in it is executed; see the module docs for what is accepted.
pub fn unpickle(bytes: &[u8]) -> Result<Pickle> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let mut m = Machine {
        values: Vec::new(),
        depth: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    loop {
        let at = r.pos;
        let op = r.u8()?;
        if op == b'.' {
            let root = m.pop()?;
            check_graph(&m.values, root)?;
            return Ok(Pickle {
                values: m.values,
                root,
            });
        }
        m.step(&mut r, op)
            .map_err(|e| bad(format!("{} (opcode 0x{op:02x} at offset {at})", strip(e))))?;
    }
}

/// The message of an error from this module, without its `unpickle: ` prefix.
fn strip(e: Error) -> String {
    match e {
        Error::InvalidArgument { msg, .. } => msg,
        other => other.to_string(),
    }
}

impl Machine {
    /// Adds a value with no children (an empty container is one level deep).
    fn push(&mut self, v: Value) {
        let r = Ref(self.values.len());
        let d = u32::from(matches!(
            v,
            Value::List(_) | Value::Tuple(_) | Value::Dict(_)
        ));
        self.values.push(v);
        self.depth.push(d);
        self.stack.push(r);
    }

    /// Adds a container built from `children` (already in the arena).
    fn push_container(&mut self, v: Value, children: &[Ref]) -> Result<()> {
        let d = children.iter().map(|c| self.depth[c.0]).max().unwrap_or(0) + 1;
        if d > MAX_DEPTH {
            return Err(too_deep());
        }
        self.push(v);
        if let Some(last) = self.depth.last_mut() {
            *last = d;
        }
        Ok(())
    }

    /// Records that `parent` now holds `child`.
    fn grew(&mut self, parent: Ref, child: Ref) -> Result<()> {
        let d = self.depth[child.0].saturating_add(1);
        if d > MAX_DEPTH {
            return Err(too_deep());
        }
        let p = &mut self.depth[parent.0];
        *p = (*p).max(d);
        Ok(())
    }

    /// The lowest stack index usable now: nothing is popped from below the last MARK.
    fn fence(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Result<Ref> {
        if self.stack.len() <= self.fence() {
            return Err(bad("stack underflow"));
        }
        self.stack.pop().ok_or_else(|| bad("stack underflow"))
    }

    fn top(&self) -> Result<Ref> {
        if self.stack.len() <= self.fence() {
            return Err(bad("stack underflow"));
        }
        self.stack
            .last()
            .copied()
            .ok_or_else(|| bad("stack underflow"))
    }

    /// The items pushed since the last MARK, and the MARK itself removed.
    fn pop_mark(&mut self) -> Result<Vec<Ref>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| bad("no MARK on the stack"))?;
        Ok(self.stack.split_off(m.min(self.stack.len())))
    }

    fn memo_get(&self, key: usize) -> Result<Ref> {
        self.memo
            .get(&key)
            .copied()
            .ok_or_else(|| bad(format!("memo key {key} was never stored")))
    }

    fn memo_put(&mut self, key: usize) -> Result<()> {
        let top = self.top()?;
        self.memo.insert(key, top);
        Ok(())
    }

    fn int(&mut self, n: i64) {
        self.push(Value::Int(n));
    }

    /// Appends `items` to the list on top of the stack.
    fn extend_list(&mut self, items: Vec<Ref>, what: &str) -> Result<()> {
        let list = self.top()?;
        for &c in &items {
            self.grew(list, c)?;
        }
        match &mut self.values[list.0] {
            Value::List(l) => {
                l.extend(items);
                Ok(())
            }
            other => Err(bad(format!("{what} to a {}, not a list", describe(other)))),
        }
    }

    /// Adds `items` (key, value, key, value, ...) to the dict on top of the stack.
    fn extend_dict(&mut self, items: Vec<Ref>, what: &str) -> Result<()> {
        if !items.len().is_multiple_of(2) {
            return Err(bad(format!("{what} needs key, value pairs")));
        }
        let dict = self.top()?;
        for &c in &items {
            self.grew(dict, c)?;
        }
        match &mut self.values[dict.0] {
            Value::Dict(d) => {
                d.extend(items.chunks_exact(2).map(|kv| (kv[0], kv[1])));
                Ok(())
            }
            other => Err(bad(format!("{what} to a {}, not a dict", describe(other)))),
        }
    }

    /// Refuses an opcode that would instantiate a class, naming what it would call.
    fn refuse_call(&self, how: &str, callee: Ref) -> Error {
        let what = match &self.values[callee.0] {
            Value::Global(g) => g.clone(),
            other => describe(other),
        };
        bad(format!(
            "{how} of {what} refused: this reader runs no code (it builds dicts, lists, \
             numbers, strings and NumPy arrays only)"
        ))
    }

    /// Executes one opcode (not STOP).
    fn step(&mut self, r: &mut Reader<'_>, op: u8) -> Result<()> {
        match op {
            0x80 => {
                let proto = r.u8()?;
                if proto > 5 {
                    return Err(bad(format!(
                        "pickle protocol {proto} is not supported (0..=5)"
                    )));
                }
            }
            0x95 => {
                r.le::<8>()?; // FRAME: a length hint only
            }
            b'(' => self.marks.push(self.stack.len()),
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let t = self.top()?;
                self.stack.push(t);
            }
            b'}' => self.push(Value::Dict(Vec::new())),
            b']' => self.push(Value::List(Vec::new())),
            b')' => self.push(Value::Tuple(Vec::new())),
            b'N' => self.push(Value::None),
            0x88 => self.push(Value::Bool(true)),
            0x89 => self.push(Value::Bool(false)),
            b'K' => self.int(i64::from(r.u8()?)),
            b'M' => self.int(i64::from(u16::from_le_bytes(r.le()?))),
            b'J' => self.int(i64::from(i32::from_le_bytes(r.le()?))),
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    usize::from(r.u8()?)
                } else {
                    r.len4()?
                };
                let b = r.take(n)?;
                self.int(long_le(b)?);
            }
            b'I' => {
                let s = r.line("INT")?;
                match s {
                    "01" => self.push(Value::Bool(true)),
                    "00" => self.push(Value::Bool(false)),
                    _ => self.int(parse_int(s)?),
                }
            }
            b'L' => {
                let s = r.line("LONG")?;
                self.int(parse_int(s.strip_suffix('L').unwrap_or(s))?);
            }
            b'F' => {
                let s = r.line("FLOAT")?;
                let x = s
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| bad(format!("FLOAT {} is not a number", preview_str(s))))?;
                self.push(Value::Float(x));
            }
            b'G' => self.push(Value::Float(f64::from_be_bytes(r.le()?))),
            b'U' | b'C' => {
                let n = usize::from(r.u8()?);
                self.push(Value::Bytes(r.take(n)?.to_vec()));
            }
            b'T' | b'B' => {
                let n = r.len4()?;
                self.push(Value::Bytes(r.take(n)?.to_vec()));
            }
            0x8e | 0x96 => {
                let n = r.len8()?;
                self.push(Value::Bytes(r.take(n)?.to_vec()));
            }
            0x98 => {} // READONLY_BUFFER: an in-band buffer is already plain bytes here
            0x8c | b'X' | 0x8d => {
                let n = match op {
                    0x8c => usize::from(r.u8()?),
                    b'X' => r.len4()?,
                    _ => r.len8()?,
                };
                let s = String::from_utf8(r.take(n)?.to_vec())
                    .map_err(|_| bad("invalid UTF-8 in a string"))?;
                self.push(Value::Str(s));
            }
            b'V' => {
                let s = raw_unicode_escape(r.line_bytes("UNICODE")?)?;
                self.push(Value::Str(s));
            }
            b'p' => {
                let key = parse_key(r.line("PUT")?)?;
                self.memo_put(key)?;
            }
            b'q' => {
                let key = usize::from(r.u8()?);
                self.memo_put(key)?;
            }
            b'r' => {
                let key = r.len4()?;
                self.memo_put(key)?;
            }
            0x94 => self.memo_put(self.memo.len())?,
            b'g' => {
                let key = parse_key(r.line("GET")?)?;
                self.stack.push(self.memo_get(key)?);
            }
            b'h' => {
                let key = usize::from(r.u8()?);
                self.stack.push(self.memo_get(key)?);
            }
            b'j' => {
                let key = r.len4()?;
                self.stack.push(self.memo_get(key)?);
            }
            b'c' => {
                let module = r.line("GLOBAL module")?;
                let name = r.line("GLOBAL name")?;
                let g = check_global(module, name)?;
                self.push(Value::Global(g));
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                match (&self.values[module.0], &self.values[name.0]) {
                    (Value::Str(m), Value::Str(n)) => {
                        let g = check_global(m, n)?;
                        self.push(Value::Global(g));
                    }
                    (m, n) => {
                        return Err(bad(format!(
                            "STACK_GLOBAL needs two strings, got {} and {}",
                            describe(m),
                            describe(n)
                        )))
                    }
                }
            }
            b'i' => {
                let module = r.line("INST module")?;
                let name = r.line("INST name")?;
                return Err(bad(format!(
                    "INST of {} refused: this reader runs no code",
                    preview_str(&format!("{module}.{name}"))
                )));
            }
            b'o' => {
                let items = self.pop_mark()?;
                return Err(match items.first() {
                    Some(&cls) => self.refuse_call("OBJ", cls),
                    None => bad("OBJ without a class"),
                });
            }
            0x81 | 0x92 => {
                if op == 0x92 {
                    self.pop()?; // NEWOBJ_EX's keyword arguments
                }
                self.pop()?;
                let cls = self.pop()?;
                return Err(self.refuse_call("NEWOBJ", cls));
            }
            b'P' | b'Q' => return Err(bad("persistent ids are not supported")),
            0x82..=0x84 => return Err(bad("extension-registry globals are not supported")),
            0x97 => return Err(bad("out-of-band buffers are not supported")),
            b't' | b'l' => {
                let items = self.pop_mark()?;
                let v = if op == b't' {
                    Value::Tuple(items.clone())
                } else {
                    Value::List(items.clone())
                };
                self.push_container(v, &items)?;
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if self.stack.len() < self.fence() + n {
                    return Err(bad("stack underflow"));
                }
                let items = self.stack.split_off(self.stack.len() - n);
                self.push_container(Value::Tuple(items.clone()), &items)?;
            }
            b'd' => {
                let items = self.pop_mark()?;
                self.push(Value::Dict(Vec::new()));
                self.extend_dict(items, "DICT")?;
            }
            b'a' => {
                let v = self.pop()?;
                self.extend_list(vec![v], "APPEND")?;
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.extend_list(items, "APPENDS")?;
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.extend_dict(vec![k, v], "SETITEM")?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.extend_dict(items, "SETITEMS")?;
            }
            b'R' => {
                let args = self.pop()?;
                let func = self.pop()?;
                let v = globals::reduce(&self.values, func, args)?;
                self.push(v);
            }
            b'b' => {
                let state = self.pop()?;
                let obj = self.top()?;
                let built = globals::build(&self.values, obj, state)?;
                self.values[obj.0] = built;
            }
            other => {
                return Err(bad(format!(
                    "unsupported pickle opcode 0x{other:02x} (only data pickles of dicts, \
                     lists, numbers, strings and NumPy arrays are read)"
                )))
            }
        }
        Ok(())
    }
}

pub(super) fn too_deep() -> Error {
    bad(format!(
        "values nest deeper than {MAX_DEPTH} levels, the limit of this reader"
    ))
}
