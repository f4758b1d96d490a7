//! Printing: `Display` and `Debug` for `NDArray`, both giving NumPy 2.x's `repr` of the same
//! data (its default print options: precision 8, threshold 1000, edgeitems 3, linewidth 75,
//! floatmode `maxprec`), with quill's dtype names:
//!
//! ```text
//! array([[0., 1., 2.],
//!        [3., 4., 5.]], dtype=f32)
//! ```
//!
//! This module owns the whole text form of an array: gathering the elements to show (through
//! `slice` and `to_vec`, so any view prints, and a huge array is never copied in full: only the
//! corners that a summarized print shows), choosing one format per array (NumPy's
//! `FloatingFormat`, `IntegerFormat` and `BoolFormat`), and laying out brackets, separators,
//! `...`, line wrapping and blank lines between blocks (NumPy's `_formatArray`).
//!
//! Floats follow NumPy digit for digit, through a port of its Dragon4: each value prints as
//! the shortest decimal that reads back as the same value in the array's own dtype (f16 and
//! bf16 too: `0.1f32` prints `0.1`), cut to 8 decimals. In positional notation all values share
//! one width, padded with spaces on the right (`[0.5 , 1.25]`, `[1., 2.]`). The whole array
//! switches to scientific notation, with one shared number of digits (`[1.0e-05, 1.5e+00]`),
//! when the largest nonzero magnitude reaches `10^min(8, finfo.precision)` (1e8 for f64, 1e6 for
//! f32, 1e3 for f16, 1e2 for bf16), the smallest is below 1e-4, or their ratio exceeds 1000,
//! compared in the array's own dtype as NumPy does. `nan`, `inf` and `-inf` are right-aligned to
//! the common width. Integers are right-aligned; bools print as `True`/`False` (with a leading
//! space on `True` except at rank 0).
//!
//! Deliberate differences from NumPy's repr:
//! - The dtype is always shown (NumPy omits it for float64, int64 and bool) and uses quill's
//!   names (`f32`, `f64`, `f16`, `bf16`, `i32`, `i64`, `u8`, `bool`), so the decision to move
//!   `dtype=...` to its own line (when it would pass column 75) counts those shorter names.
//! - A shape, where shown (empty arrays other than shape `[0]`, and summarized arrays, as NumPy
//!   2.2+), prints as a Rust slice: `shape=[0, 3]`, `shape=[2000]` for NumPy's `(0, 3)`,
//!   `(2000,)`.
//! - NumPy has no bfloat16; bf16 follows the same rules with `finfo(bfloat16).precision = 2`
//!   (as ml_dtypes defines it).
//! - The print options are fixed at NumPy's defaults, and formatter flags (`{:>20}`, `{:#?}`)
//!   are ignored.

use super::NDArray;
mod dragon4;
mod float;
#[cfg(test)]
mod tests;

use float::{float_cells, FloatKind};
use quill_core::{bf16, f16, Element, Result, Runs, SliceArg};
use quill_cpu::{dispatch_dtype, CpuElement};
use std::fmt;

/// More elements than this and the print is summarized (NumPy's `threshold`).
const THRESHOLD: usize = 1000;
/// Entries shown at each end of a summarized axis (NumPy's `edgeitems`).
const EDGE: usize = 3;
/// Maximum line length (NumPy's `linewidth`).
const LINE_WIDTH: usize = 75;
/// Most fractional digits of a float (NumPy's `precision`).
const PRECISION: usize = 8;
const PREFIX: &str = "array(";
const SEPARATOR: &str = ", ";

impl fmt::Display for NDArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&repr(self))
    }
}

impl fmt::Debug for NDArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&repr(self))
    }
}

/// NumPy's `_array_repr_implementation`: the nested body, then `shape=` / `dtype=`, moved to a
/// new line when they would pass the line width.
fn repr(a: &NDArray) -> String {
    let numel = a.numel();
    let body = if numel == 0 {
        "[]".to_string()
    } else {
        // Reading can only fail on an internal inconsistency; print that rather than panic
        // (`to_string` panics when `Display` returns an error).
        body(a).unwrap_or_else(|e| format!("<unprintable: {e}>"))
    };
    let mut extras = Vec::with_capacity(2);
    if (numel == 0 && a.shape() != [0]) || numel > THRESHOLD {
        extras.push(format!("shape={:?}", a.shape()));
    }
    extras.push(format!("dtype={}", a.dtype().name()));
    let arr_str = format!("{PREFIX}{body},");
    let extra_str = format!("{})", extras.join(", "));
    let last_line_len = arr_str.len() - arr_str.rfind('\n').map_or(0, |i| i + 1);
    let spacer = if last_line_len + extra_str.len() + 1 > LINE_WIDTH {
        format!("\n{}", " ".repeat(PREFIX.len()))
    } else {
        " ".to_string()
    };
    arr_str + &spacer + &extra_str
}

/// The bracketed body of a non-empty array (NumPy's `array2string` with `prefix="array("`,
/// `suffix=")"`).
fn body(a: &NDArray) -> Result<String> {
    dispatch_dtype!(a.dtype(), T => body_typed::<T>(a))
}

fn body_typed<T: Cells>(a: &NDArray) -> Result<String> {
    let shown = gather::<T>(a, a.numel() > THRESHOLD)?;
    let cells = T::cells(&shown.data, a.ndim() == 0);
    let nest = Nest {
        cells: &cells,
        shape: &shown.shape,
        summarized: &shown.summarized,
        strides: c_strides(&shown.shape),
    };
    // The line width less the `)` that follows; continuation lines align under the first `[`.
    let hanging = " ".repeat(PREFIX.len() + 1);
    Ok(nest.recurse(0, 0, &hanging, LINE_WIDTH as isize - 1))
}

/// The elements a print shows (NumPy's `_leading_trailing`): on each summarized axis only the
/// first and last `EDGE` entries, in C order of the reduced shape.
struct Shown<T> {
    shape: Vec<usize>,
    summarized: Vec<bool>,
    data: Vec<T>,
}

fn c_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

fn gather<T: CpuElement>(a: &NDArray, summarize: bool) -> Result<Shown<T>> {
    let full = a.shape();
    let summarized: Vec<bool> = full.iter().map(|&n| summarize && n > 2 * EDGE).collect();
    let shape: Vec<usize> = full
        .iter()
        .zip(&summarized)
        .map(|(&n, &s)| if s { 2 * EDGE } else { n })
        .collect();
    let cut: Vec<usize> = (0..full.len()).filter(|&d| summarized[d]).collect();
    if cut.is_empty() {
        let data = a.to_vec::<T>()?;
        return Ok(Shown {
            shape,
            summarized,
            data,
        });
    }
    // One block per choice of head or tail on each summarized axis; each block is a small view
    // that `to_vec` compacts, scattered into its place in the reduced array.
    let strides = c_strides(&shape);
    let istrides: Vec<isize> = strides.iter().map(|&s| s as isize).collect();
    let mut data = vec![T::default(); shape.iter().product()];
    for mask in 0..1usize << cut.len() {
        let mut args = vec![SliceArg::FULL; full.len()];
        let mut base = 0;
        for (k, &d) in cut.iter().enumerate() {
            args[d] = if mask >> k & 1 == 1 {
                base += EDGE * strides[d];
                SliceArg::range(Some((full[d] - EDGE) as isize), None, 1)
            } else {
                SliceArg::range(None, Some(EDGE as isize), 1)
            };
        }
        let block = a.slice(&args)?;
        let places = Runs::from_parts(block.shape(), [&istrides], [base], 0..block.numel());
        for (v, [pos]) in block.to_vec::<T>()?.into_iter().zip(places.elements()) {
            data[pos] = v;
        }
    }
    Ok(Shown {
        shape,
        summarized,
        data,
    })
}

/// NumPy's `_formatArray` over the formatted cells of the reduced array.
struct Nest<'a> {
    cells: &'a [String],
    shape: &'a [usize],
    summarized: &'a [bool],
    strides: Vec<usize>,
}

impl Nest<'_> {
    /// The text of the sub-array at `axis` starting at cell `base`. `hanging` is the indent of
    /// continuation lines, `width` the room left on a line before the closing brackets.
    fn recurse(&self, axis: usize, base: usize, hanging: &str, width: isize) -> String {
        let ndim = self.shape.len();
        if axis == ndim {
            return self.cells.get(base).cloned().unwrap_or_default();
        }
        let axes_left = ndim - axis;
        let next_hanging = format!("{hanging} ");
        let next_width = width - 1;
        let len = self.shape[axis];
        let stride = self.strides[axis];
        let summary = self.summarized[axis];
        // Reduced indices: the summarized axes hold the head then the tail, EDGE each.
        let (leading, trailing) = if summary { (EDGE, EDGE) } else { (0, len) };
        let child = |i: usize| self.recurse(axis + 1, base + i * stride, &next_hanging, next_width);

        let mut s = String::new();
        if axes_left == 1 {
            // Room up to the separator or bracket that follows an element.
            let elem_width = width - 1;
            let mut line = hanging.to_string();
            for i in 0..leading {
                extend_line(&mut s, &mut line, &child(i), elem_width, hanging);
                line.push_str(SEPARATOR);
            }
            if summary {
                extend_line(&mut s, &mut line, "...", elem_width, hanging);
                line.push_str(SEPARATOR);
            }
            for i in len - trailing..len - 1 {
                extend_line(&mut s, &mut line, &child(i), elem_width, hanging);
                line.push_str(SEPARATOR);
            }
            extend_line(&mut s, &mut line, &child(len - 1), elem_width, hanging);
            s.push_str(&line);
        } else {
            let line_sep = format!("{}{}", SEPARATOR.trim_end(), "\n".repeat(axes_left - 1));
            for i in 0..leading {
                s.push_str(hanging);
                s.push_str(&child(i));
                s.push_str(&line_sep);
            }
            if summary {
                s.push_str(hanging);
                s.push_str("...");
                s.push_str(&line_sep);
            }
            for i in len - trailing..len - 1 {
                s.push_str(hanging);
                s.push_str(&child(i));
                s.push_str(&line_sep);
            }
            s.push_str(hanging);
            s.push_str(&child(len - 1));
        }
        format!("[{}]", &s[hanging.len()..])
    }
}

/// NumPy's `_extendLine`: appends `word`, first breaking the line when it would pass `width`
/// (unless the line holds nothing yet, where breaking would not help).
fn extend_line(s: &mut String, line: &mut String, word: &str, width: isize, hanging: &str) {
    let needs_wrap = (line.len() + word.len()) as isize > width && line.len() > hanging.len();
    if needs_wrap {
        s.push_str(line.trim_end());
        s.push('\n');
        *line = hanging.to_string();
    }
    line.push_str(word);
}

/// An element type's formatter: all cells of one array in one common format.
trait Cells: CpuElement {
    /// `rank0` marks the single element of a rank-0 array.
    fn cells(data: &[Self], rank0: bool) -> Vec<String>;
}

macro_rules! int_cells {
    ($($t:ty),*) => {$(
        impl Cells for $t {
            fn cells(data: &[Self], _rank0: bool) -> Vec<String> {
                let strs: Vec<String> = data.iter().map(|v| v.to_string()).collect();
                let w = strs.iter().map(String::len).max().unwrap_or(0);
                strs.into_iter().map(|s| format!("{s:>w$}")).collect()
            }
        }
    )*};
}
int_cells!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Cells for bool {
    fn cells(data: &[Self], rank0: bool) -> Vec<String> {
        let t = if rank0 { "True" } else { " True" };
        data.iter()
            .map(|&b| if b { t } else { "False" }.to_string())
            .collect()
    }
}

macro_rules! float_cells {
    ($($t:ty => $kind:ident),*) => {$(
        impl Cells for $t {
            fn cells(data: &[Self], _rank0: bool) -> Vec<String> {
                let vals: Vec<f64> = data.iter().map(|v| v.to_f64()).collect();
                float_cells(&vals, FloatKind::$kind)
            }
        }
    )*};
}
float_cells!(f64 => F64, f32 => F32, f16 => F16, bf16 => BF16);

/// Complex cells as NumPy prints them: the real parts in one float format (right-aligned), the
/// imaginary parts in another with their sign always shown, then `j`, left-aligned
/// (`[1. +2.j , 3. -4.5j]`).
macro_rules! complex_cells {
    ($($t:ty => $kind:ident),*) => {$(
        impl Cells for $t {
            fn cells(data: &[Self], _rank0: bool) -> Vec<String> {
                let re: Vec<f64> = data.iter().map(|z| z.re as f64).collect();
                let im: Vec<f64> = data.iter().map(|z| z.im as f64).collect();
                let re = float_cells(&re, FloatKind::$kind);
                let im: Vec<String> = float_cells(&im, FloatKind::$kind)
                    .into_iter()
                    .map(|s| {
                        let s = s.trim();
                        let sign = if s.starts_with('-') { "" } else { "+" };
                        format!("{sign}{s}j")
                    })
                    .collect();
                let w = im.iter().map(String::len).max().unwrap_or(0);
                re.iter().zip(&im).map(|(r, i)| format!("{r}{i:<w$}")).collect()
            }
        }
    )*};
}
complex_cells!(quill_core::C64 => F32, quill_core::C128 => F64);
