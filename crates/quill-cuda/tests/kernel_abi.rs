//! The host's launches against the kernels' parameter lists: for each launch shape in
//! `src/ops.rs` (pointers, by-value layouts, counts, fill values), the PTX that NVRTC makes of
//! a kernel of that shape must declare exactly those parameters, so a kernel and its launch
//! cannot drift apart unnoticed on machines without a GPU. Skips without NVRTC unless
//! `REQUIRE_NVRTC=1` (see tests/nvrtc_compile.rs).

use cudarc::nvrtc::{compile_ptx_with_opts, sys, CompileOptions};
use quill_cuda::kernels::program;

fn nvrtc() -> bool {
    // SAFETY: the probe only tries to open the library.
    if unsafe { sys::is_culib_present() } {
        return true;
    }
    assert!(
        std::env::var("REQUIRE_NVRTC").as_deref() != Ok("1"),
        "REQUIRE_NVRTC=1 but libnvrtc.so.13 was not found (scripts/nvrtc-env.sh)"
    );
    eprintln!("skipped: libnvrtc not found");
    false
}

fn ptx(module: &str) -> String {
    let opts = CompileOptions {
        arch: Some("compute_90"),
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    compile_ptx_with_opts(program(module).unwrap(), opts)
        .unwrap()
        .to_src()
}

/// The parameter types of kernel `name` in `ptx`: `u64`, `f32`, ..., or `L` for a 144-byte
/// by-value layout.
fn params(ptx: &str, name: &str) -> Vec<String> {
    let head = format!(".entry {name}(");
    let start = ptx
        .find(&head)
        .unwrap_or_else(|| panic!("no kernel {name}"))
        + head.len();
    let end = start + ptx[start..].find(')').unwrap();
    ptx[start..end]
        .split(',')
        .map(|p| {
            let p = p.trim();
            if p.contains(".b8") && p.ends_with("[144]") {
                "L".to_string()
            } else if p.contains(".b8") && (p.ends_with("[8]") || p.ends_with("[16]")) {
                // A complex value by value: a struct of two parts ("B8" / "B16").
                format!("B{}", p.rsplit('[').next().unwrap().trim_end_matches(']'))
            } else {
                p.split_whitespace()
                    .nth(1)
                    .unwrap()
                    .trim_start_matches('.')
                    .to_string()
            }
        })
        .collect()
}

#[test]
fn launches_match_kernel_parameters() {
    if !nvrtc() {
        return;
    }
    let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let copy = ptx("copy");
    for name in ["copy_f32", "copy32_bool", "copy_f16"] {
        assert_eq!(
            params(&copy, name),
            p(&["u64", "L", "u64", "L", "u64"]),
            "{name}"
        );
    }
    // fill passes the value in the dtype's own representation.
    for (t, v) in [
        ("f32", "f32"),
        ("f64", "f64"),
        ("f16", "u16"),
        ("bf16", "u16"),
        ("i32", "u32"),
        ("i64", "u64"),
        ("u8", "u8"),
        ("bool", "u8"),
    ] {
        for name in [format!("fill_{t}"), format!("fill32_{t}")] {
            assert_eq!(params(&copy, &name), p(&["u64", "L", v, "u64"]), "{name}");
        }
    }
    // Complex fills take the two parts as one 8- or 16-byte struct (the host pushes the u64 /
    // u128 of those bytes); copies are the common copy launch.
    for (t, v) in [("c64", "B8"), ("c128", "B16")] {
        for name in [format!("fill_{t}"), format!("fill32_{t}")] {
            assert_eq!(params(&copy, &name), p(&["u64", "L", v, "u64"]), "{name}");
        }
        assert_eq!(
            params(&copy, &format!("copy32_{t}")),
            p(&["u64", "L", "u64", "L", "u64"])
        );
    }
    assert_eq!(
        params(&copy, "cast32_f16_i64"),
        p(&["u64", "L", "u64", "u64"])
    );
    let ew = ptx("elementwise");
    // Predicates write bool through the same launch as every unary kernel.
    for name in [
        "unary32_exp_bf16",
        "unary_isnan_f16",
        "unary32_logical_not_bool",
        "unary_floor_i64",
    ] {
        assert_eq!(params(&ew, name), p(&["u64", "L", "u64", "u64"]), "{name}");
    }
    for name in [
        "binary_add_f32",
        "binary_add_bool",
        "binary32_remainder_i64",
        "compare_lt_u8",
        "binary_logical_or_bool",
    ] {
        assert_eq!(
            params(&ew, name),
            p(&["u64", "L", "u64", "L", "u64", "u64"]),
            "{name}"
        );
    }
    for name in ["binary_div_c64", "binary32_mul_c128"] {
        assert_eq!(
            params(&ew, name),
            p(&["u64", "L", "u64", "L", "u64", "u64"]),
            "{name}"
        );
    }
    assert_eq!(
        params(&ew, "unary_neg_c128"),
        p(&["u64", "L", "u64", "u64"])
    );
    assert_eq!(
        params(&ew, "where32_f64"),
        p(&["u64", "L", "u64", "L", "u64", "L", "u64", "u64"])
    );
    let red = ptx("reduce");
    for name in [
        "reduce_sum_rows_f32",
        "reduce_max_cols_bf16",
        "argmin_rows_i32",
    ] {
        assert_eq!(params(&red, name), p(&["u64"; 5]), "{name}");
    }
    assert_eq!(params(&ptx("softmax"), "log_softmax_f16"), p(&["u64"; 4]));
    // rms_norm: x, w, y, rstd, rows, cols, eps.
    let norm = ptx("norm");
    for t in ["f32", "f64"] {
        let want = p(&["u64", "u64", "u64", "u64", "u64", "u64", "f64"]);
        assert_eq!(params(&norm, &format!("rms_norm_{t}")), want);
    }
    assert_eq!(params(&ptx("random"), "philox_normal_f64"), p(&["u64"; 4]));
    let optim = ptx("optim");
    for (t, f) in [("f32", "f32"), ("f64", "f64")] {
        assert_eq!(
            params(&optim, &format!("adam_step_{t}")),
            p(&["u64", "u64", "u64", "u64", "u64", f, f, f, "u32", f, f, f, f, f, "u32", "u32"]),
            "adam {t}"
        );
        assert_eq!(
            params(&optim, &format!("sgd_step_{t}")),
            p(&["u64", "u64", "u64", "u64", f, f, "u32", f, f, "u32", "u32"]),
            "sgd {t}"
        );
    }
}
