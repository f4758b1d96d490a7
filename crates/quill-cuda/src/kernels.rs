//! The CUDA C kernel sources, compiled at run time by NVRTC.
//!
//! Each module (`kernels/NAME.cu`) is one translation unit: [`COMMON`] (`kernels/common.cuh`:
//! the [`Layout`](COMMON) struct, index math, f16/bf16 conversions, dtype tags) followed by the
//! module's text; sources include no header, so NVRTC needs no include path. [`program`] builds
//! that text and [`expected_kernels`] lists every `extern "C"` kernel a module defines, which is
//! the contract with the host code (and what `tests/nvrtc_compile.rs` checks in the PTX).
//!
//! Naming: `NAME_TAG` with TAG one of [`TAGS`] (`unary_exp_f32`, `cast_f32_f16`). The elementwise
//! kernels (copy, fill, cast, unary, binary, compare, where) also come in a 32-bit-index version
//! named by [`index32_name`]: `32` appended to the family word before the first `_`
//! (`copy32_f32`, `cast32_f32_f16`, `unary32_exp2_f32`, `binary32_add_i64`, `compare32_lt_u8`,
//! `where32_bool`). The host may choose one only when `n <= 2^31 - 1`, every element offset of
//! every layout is below 2^31, and the grid has at most 2^31 threads; the contiguous fast paths
//! are the same in both.
//!
//! The elementwise kernels come from quill-core's op tables: [`elementwise_kernels`] lists every
//! (family, op, dtype) kernel, one for each op of `UnaryOp::ALL` / `BinaryOp::ALL` and each dtype
//! that is its own compute dtype for that op (the dtypes the host runs the op in), and
//! [`elementwise_op_lists`] turns that list into the `#define`s `elementwise.cu` stamps its
//! kernels with, put before the module's source by [`program`]. A new op's CUDA work is its
//! functor line in `elementwise.cu` (`QUILL_UNARY(name, expr)`).

/// `kernels/common.cuh`, prepended to every module.
pub const COMMON: &str = include_str!("../kernels/common.cuh");

use quill_core::{BinaryOp, DType, UnaryOp};

/// (module name, source) for every kernel file.
pub const SOURCES: &[(&str, &str)] = &[
    ("copy", include_str!("../kernels/copy.cu")),
    ("elementwise", include_str!("../kernels/elementwise.cu")),
    ("reduce", include_str!("../kernels/reduce.cu")),
    ("softmax", include_str!("../kernels/softmax.cu")),
    ("random", include_str!("../kernels/random.cu")),
    ("optim", include_str!("../kernels/optim.cu")),
    ("norm", include_str!("../kernels/norm.cu")),
];

/// Every dtype tag, in the order the kernels are stamped.
pub const TAGS: [&str; 13] = [
    "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool", "i8", "i16", "u16", "u32", "u64",
];
/// Floating-point tags (f16/bf16 compute in f32, f64 in f64).
pub const FLOAT_TAGS: [&str; 4] = ["f32", "f64", "f16", "bf16"];
/// complex64 / complex128 tags: copy, fill, where and [`COMPLEX_BINARY_OPS`] /
/// [`COMPLEX_UNARY_OPS`] only (no casts; the host runs every other complex op on the CPU).
pub const COMPLEX_TAGS: [&str; 2] = ["c64", "c128"];
/// The binary ops with complex kernels (`binary_add_c64`, ...).
pub const COMPLEX_BINARY_OPS: [&str; 4] = ["add", "sub", "mul", "div"];
/// The unary ops with complex kernels (`unary_neg_c128`, ...).
pub const COMPLEX_UNARY_OPS: [&str; 1] = ["neg"];
/// Integer tags that have arithmetic kernels (wrapping, as NumPy).
pub const INT_TAGS: [&str; 8] = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"];

/// The elementwise kernel families whose (op, dtype) pairs come from the op tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `unary_OP_TAG`: the result in the input's dtype.
    Unary,
    /// `unary_OP_TAG` of a predicate (`isnan`, `logical_not`, ...): a bool result.
    Predicate,
    /// `binary_OP_TAG`: the result in the operands' dtype.
    Binary,
    /// `compare_OP_TAG`: a bool result.
    Compare,
}

impl Family {
    /// The first word of the kernel names.
    pub fn word(self) -> &'static str {
        match self {
            Family::Unary | Family::Predicate => "unary",
            Family::Binary => "binary",
            Family::Compare => "compare",
        }
    }

    /// The `.cu` list macro of the family (`elementwise.cu` applies it to `QUILL_UNARY_K`, ...).
    fn list_macro(self) -> &'static str {
        match self {
            Family::Unary => "QUILL_UNARY_KERNELS",
            Family::Predicate => "QUILL_PREDICATE_KERNELS",
            Family::Binary => "QUILL_BINARY_KERNELS",
            Family::Compare => "QUILL_COMPARE_KERNELS",
        }
    }
}

/// The `.cu` dtype struct of a tag (`TF32`, `TBool`, ...).
fn tag_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "TF32",
        DType::F64 => "TF64",
        DType::F16 => "TF16",
        DType::BF16 => "TBF16",
        DType::I32 => "TI32",
        DType::I64 => "TI64",
        DType::U8 => "TU8",
        DType::Bool => "TBool",
        DType::I8 => "TI8",
        DType::I16 => "TI16",
        DType::U16 => "TU16",
        DType::U32 => "TU32",
        DType::U64 => "TU64",
        // Not in the table-driven lists (complex kernels are listed by hand: COMPLEX_TAGS).
        DType::C64 => "TC64",
        DType::C128 => "TC128",
    }
}

/// The dtypes, in [`TAGS`] order.
fn tag_dtypes() -> impl Iterator<Item = DType> {
    TAGS.into_iter()
        .map(|t| DType::parse(t).expect("every tag is a dtype name"))
}

/// Every elementwise kernel the op tables call for, as (family, op name, dtype): for each op,
/// the dtypes `d` with `compute_dtype(d) == d` (the host casts every operand to the compute
/// dtype, so those are the only dtypes a kernel ever sees), in table order, then [`TAGS`] order.
pub fn elementwise_kernels() -> Vec<(Family, &'static str, DType)> {
    let mut v = Vec::new();
    for op in UnaryOp::ALL {
        let family = if op.is_predicate() {
            Family::Predicate
        } else {
            Family::Unary
        };
        for d in tag_dtypes() {
            if op.compute_dtype(d).ok() == Some(d) {
                v.push((family, op.name(), d));
            }
        }
    }
    for op in BinaryOp::ALL {
        let family = if op.is_comparison() {
            Family::Compare
        } else {
            Family::Binary
        };
        for d in tag_dtypes() {
            if op.compute_dtype(d, d).ok() == Some(d) {
                v.push((family, op.name(), d));
            }
        }
    }
    v
}

/// The `#define`s that `elementwise.cu` stamps its table-driven kernels with, one list per
/// [`Family`] of `M(OP, TAG, TagType)` entries:
/// `#define QUILL_UNARY_KERNELS(M) M(neg, f32, TF32) M(neg, f64, TF64) ...`.
pub fn elementwise_op_lists() -> String {
    let kernels = elementwise_kernels();
    let mut s = String::from(
        "// ---- generated by quill-cuda's kernels.rs from quill-core's op tables ----\n",
    );
    for family in [
        Family::Unary,
        Family::Predicate,
        Family::Binary,
        Family::Compare,
    ] {
        s.push_str(&format!("#define {}(M)", family.list_macro()));
        for (i, (_, op, d)) in kernels.iter().filter(|k| k.0 == family).enumerate() {
            if i % 4 == 0 {
                s.push_str(" \\\n   ");
            }
            s.push_str(&format!(" M({op}, {}, {})", d.name(), tag_type(*d)));
        }
        s.push('\n');
    }
    s
}

/// `scalar_OP_TAG` (`a OP s`) for [`FLOAT_TAGS`]; 64-bit index only.
pub const SCALAR_OPS: &[&str] = &["add", "sub", "mul", "div", "pow", "maximum", "minimum"];
/// `rscalar_OP_TAG` (`s OP a`) for [`FLOAT_TAGS`]; 64-bit index only.
pub const RSCALAR_OPS: &[&str] = &["sub", "div", "pow"];
/// `reduce_OP_rows_TAG` / `reduce_OP_cols_TAG` for [`REDUCE_TAGS`].
pub const REDUCE_OPS: &[&str] = &["sum", "prod", "max", "min"];
/// Tags of the reductions, arg-reductions and nothing else in `reduce`.
pub const REDUCE_TAGS: [&str; 6] = ["f32", "f64", "f16", "bf16", "i32", "i64"];

/// The full NVRTC translation unit of module `name`: [`COMMON`], then for `elementwise` the
/// op lists of [`elementwise_op_lists`], then its source.
pub fn program(name: &str) -> Option<String> {
    SOURCES.iter().find(|(n, _)| *n == name).map(|(_, src)| {
        let lists = if name == "elementwise" {
            elementwise_op_lists()
        } else {
            String::new()
        };
        let mut s = String::with_capacity(COMMON.len() + lists.len() + src.len() + 1);
        s.push_str(COMMON);
        s.push('\n');
        s.push_str(&lists);
        s.push_str(src);
        s
    })
}

/// The 32-bit-index twin of an elementwise kernel: `32` after the family word
/// (`unary_exp2_f32` -> `unary32_exp2_f32`, `copy_f32` -> `copy32_f32`).
pub fn index32_name(name: &str) -> String {
    match name.split_once('_') {
        Some((family, rest)) => format!("{family}32_{rest}"),
        None => format!("{name}32"),
    }
}

/// Pushes `{name}` and its 32-bit-index twin.
fn pair(out: &mut Vec<String>, name: String) {
    let twin = index32_name(&name);
    out.push(name);
    out.push(twin);
}

/// Every `extern "C"` kernel name the host may request from `module` (empty for an unknown one).
pub fn expected_kernels(module: &str) -> Vec<String> {
    let mut v = Vec::new();
    match module {
        "copy" => {
            for t in TAGS {
                pair(&mut v, format!("copy_{t}"));
                pair(&mut v, format!("fill_{t}"));
            }
            for s in TAGS {
                for d in TAGS {
                    pair(&mut v, format!("cast_{s}_{d}"));
                }
            }
            for t in COMPLEX_TAGS {
                pair(&mut v, format!("copy_{t}"));
                pair(&mut v, format!("fill_{t}"));
            }
        }
        "elementwise" => {
            for (family, op, d) in elementwise_kernels() {
                pair(&mut v, format!("{}_{op}_{}", family.word(), d.name()));
            }
            for t in FLOAT_TAGS {
                for op in SCALAR_OPS {
                    v.push(format!("scalar_{op}_{t}"));
                }
                for op in RSCALAR_OPS {
                    v.push(format!("rscalar_{op}_{t}"));
                }
            }
            for t in TAGS {
                pair(&mut v, format!("where_{t}"));
            }
            for t in COMPLEX_TAGS {
                pair(&mut v, format!("where_{t}"));
                for op in COMPLEX_BINARY_OPS {
                    pair(&mut v, format!("binary_{op}_{t}"));
                }
                for op in COMPLEX_UNARY_OPS {
                    pair(&mut v, format!("unary_{op}_{t}"));
                }
            }
        }
        "reduce" => {
            for t in REDUCE_TAGS {
                for op in REDUCE_OPS {
                    v.push(format!("reduce_{op}_rows_{t}"));
                    v.push(format!("reduce_{op}_cols_{t}"));
                }
                for op in ["argmax", "argmin"] {
                    v.push(format!("{op}_rows_{t}"));
                    v.push(format!("{op}_cols_{t}"));
                }
            }
        }
        "softmax" => {
            for t in FLOAT_TAGS {
                for op in ["softmax", "log_softmax", "logsumexp"] {
                    v.push(format!("{op}_{t}"));
                }
            }
        }
        "random" => {
            for t in FLOAT_TAGS {
                for op in ["philox_uniform", "philox_normal", "dropout_mask"] {
                    v.push(format!("{op}_{t}"));
                }
            }
        }
        "optim" => {
            for t in ["f32", "f64"] {
                v.push(format!("adam_step_{t}"));
                v.push(format!("sgd_step_{t}"));
            }
        }
        "norm" => {
            for t in ["f32", "f64"] {
                v.push(format!("rms_norm_{t}"));
            }
        }
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn programs_start_with_common_and_names_are_unique() {
        for (name, src) in SOURCES {
            let p = program(name).unwrap();
            assert!(p.starts_with(COMMON) && p.ends_with(src));
            let names = expected_kernels(name);
            assert!(!names.is_empty(), "{name}");
            let set: HashSet<_> = names.iter().collect();
            assert_eq!(set.len(), names.len(), "duplicate kernel names in {name}");
        }
        assert!(program("nope").is_none());
        assert!(expected_kernels("nope").is_empty());
        assert!(expected_kernels("copy").contains(&"cast32_f32_f16".to_string()));
        assert!(expected_kernels("elementwise").contains(&"unary32_exp2_bf16".to_string()));
        assert_eq!(
            index32_name("binary_logical_and_bool"),
            "binary32_logical_and_bool"
        );
    }

    /// Every op of the tables has kernels and its functor in `elementwise.cu` (the one line a
    /// new op adds there), and the generated lists name every kernel once.
    #[test]
    fn every_table_op_has_a_functor_and_kernels() {
        let src = SOURCES.iter().find(|(n, _)| *n == "elementwise").unwrap().1;
        let kernels = elementwise_kernels();
        let has = |name: &str| kernels.iter().any(|k| k.1 == name);
        for op in UnaryOp::ALL {
            let found = if op.is_predicate() {
                src.contains(&format!("\nQUILL_PREDICATE({},", op.name()))
            } else {
                src.contains(&format!("\nQUILL_UNARY({},", op.name()))
                    || src.contains(&format!("\nQUILL_UNARY_MATH({},", op.name()))
            };
            assert!(found, "no functor for {op:?} in elementwise.cu");
            assert!(has(op.name()), "{op:?} has no kernel");
        }
        for op in BinaryOp::ALL {
            let m = if op.is_comparison() {
                "QUILL_COMPARE"
            } else {
                "QUILL_BINARY"
            };
            assert!(
                src.contains(&format!("\n{m}({},", op.name())),
                "{m}({op:?})"
            );
            assert!(has(op.name()), "{op:?} has no kernel");
        }
        let lists = elementwise_op_lists();
        let entries = lists.matches(" M(").count();
        assert_eq!(entries, kernels.len());
        assert!(lists.contains("M(isnan, bf16, TBF16)") && lists.contains("M(add, bool, TBool)"));
        assert!(!lists.contains("M(exp, i32,") && !lists.contains("M(sub, bool,"));
        for op in SCALAR_OPS.iter().chain(RSCALAR_OPS) {
            assert!(kernels.contains(&(Family::Binary, op, DType::F32)), "{op}");
        }
    }
}
