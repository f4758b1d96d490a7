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

/// `kernels/common.cuh`, prepended to every module.
pub const COMMON: &str = include_str!("../kernels/common.cuh");

/// (module name, source) for every kernel file.
pub const SOURCES: &[(&str, &str)] = &[
    ("copy", include_str!("../kernels/copy.cu")),
    ("elementwise", include_str!("../kernels/elementwise.cu")),
    ("reduce", include_str!("../kernels/reduce.cu")),
    ("softmax", include_str!("../kernels/softmax.cu")),
    ("random", include_str!("../kernels/random.cu")),
    ("optim", include_str!("../kernels/optim.cu")),
];

/// Every dtype tag, in the order the kernels are stamped.
pub const TAGS: [&str; 8] = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"];
/// Floating-point tags (f16/bf16 compute in f32, f64 in f64).
pub const FLOAT_TAGS: [&str; 4] = ["f32", "f64", "f16", "bf16"];
/// Integer tags that have arithmetic kernels (wrapping, as NumPy).
pub const INT_TAGS: [&str; 3] = ["i32", "i64", "u8"];

/// `unary_OP_TAG` for [`FLOAT_TAGS`].
pub const UNARY_FLOAT_OPS: &[&str] = &[
    "neg",
    "abs",
    "sign",
    "exp",
    "exp2",
    "log",
    "log2",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "square",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "tanh",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "sigmoid",
    "relu",
    "gelu",
    "gelu_tanh",
    "erf",
    "floor",
    "ceil",
    "round",
    "trunc",
];
/// `unary_OP_TAG` for [`INT_TAGS`].
pub const UNARY_INT_OPS: &[&str] = &["neg", "abs", "sign", "square", "relu"];
/// `binary_OP_TAG` for [`FLOAT_TAGS`].
pub const BINARY_FLOAT_OPS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "remainder",
    "atan2",
];
/// `binary_OP_TAG` for [`INT_TAGS`] (no integer division: the host promotes to float).
pub const BINARY_INT_OPS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "pow",
    "maximum",
    "minimum",
    "remainder",
];
/// `binary_OP_TAG` for [`INT_TAGS`] only: the bitwise ops.
pub const BINARY_BITWISE_OPS: &[&str] = &[
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
];
/// `binary_OP_bool`.
pub const BINARY_BOOL_OPS: &[&str] = &[
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
];
/// `compare_OP_TAG` for all [`TAGS`]; the output is bool (one byte, 0 or 1).
pub const COMPARE_OPS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge"];
/// `scalar_OP_TAG` (`a OP s`) for [`FLOAT_TAGS`]; 64-bit index only.
pub const SCALAR_OPS: &[&str] = &["add", "sub", "mul", "div", "pow", "maximum", "minimum"];
/// `rscalar_OP_TAG` (`s OP a`) for [`FLOAT_TAGS`]; 64-bit index only.
pub const RSCALAR_OPS: &[&str] = &["sub", "div", "pow"];
/// `reduce_OP_rows_TAG` / `reduce_OP_cols_TAG` for [`REDUCE_TAGS`].
pub const REDUCE_OPS: &[&str] = &["sum", "prod", "max", "min"];
/// Tags of the reductions, arg-reductions and nothing else in `reduce`.
pub const REDUCE_TAGS: [&str; 6] = ["f32", "f64", "f16", "bf16", "i32", "i64"];

/// The full NVRTC translation unit of module `name`: [`COMMON`] followed by its source.
pub fn program(name: &str) -> Option<String> {
    SOURCES.iter().find(|(n, _)| *n == name).map(|(_, src)| {
        let mut s = String::with_capacity(COMMON.len() + src.len() + 1);
        s.push_str(COMMON);
        s.push('\n');
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
        }
        "elementwise" => {
            for t in FLOAT_TAGS {
                for op in UNARY_FLOAT_OPS {
                    pair(&mut v, format!("unary_{op}_{t}"));
                }
                for op in BINARY_FLOAT_OPS {
                    pair(&mut v, format!("binary_{op}_{t}"));
                }
                for op in SCALAR_OPS {
                    v.push(format!("scalar_{op}_{t}"));
                }
                for op in RSCALAR_OPS {
                    v.push(format!("rscalar_{op}_{t}"));
                }
            }
            for t in INT_TAGS {
                for op in UNARY_INT_OPS {
                    pair(&mut v, format!("unary_{op}_{t}"));
                }
                for op in BINARY_INT_OPS.iter().chain(BINARY_BITWISE_OPS) {
                    pair(&mut v, format!("binary_{op}_{t}"));
                }
            }
            for op in BINARY_BOOL_OPS {
                pair(&mut v, format!("binary_{op}_bool"));
            }
            for t in TAGS {
                for op in COMPARE_OPS {
                    pair(&mut v, format!("compare_{op}_{t}"));
                }
                pair(&mut v, format!("where_{t}"));
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
}
