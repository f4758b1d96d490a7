//! Compiles every kernel module through NVRTC (no GPU needed) for compute_80 and compute_90 PTX,
//! and for sm_90 machine code (which runs ptxas inside NVRTC and so also checks the inline PTX),
//! then checks that the PTX defines exactly the kernels `expected_kernels` promises the host.
//!
//! NVRTC is opened at run time. Without it the tests print "skipped" and pass, unless
//! `REQUIRE_NVRTC=1`, which turns the skip into a failure. To get it without a CUDA toolkit:
//! `export LD_LIBRARY_PATH="$(scripts/nvrtc-env.sh):$LD_LIBRARY_PATH"`.

use cudarc::nvrtc::{result, sys};
use quill_cuda::kernels::{expected_kernels, program, SOURCES};
use std::collections::BTreeSet;
use std::ffi::{CStr, CString};

/// Whether libnvrtc can be opened; panics (fails the test) when it cannot and REQUIRE_NVRTC=1.
fn nvrtc_available() -> bool {
    // The probe only tries to dlopen; cudarc's other entry points panic on a missing library.
    // SAFETY: the probe calls no symbol; it only opens the library if it can.
    if unsafe { sys::is_culib_present() } {
        return true;
    }
    if std::env::var("REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!(
            "REQUIRE_NVRTC=1 but libnvrtc.so.13 was not found; get it with \
             `export LD_LIBRARY_PATH=\"$(scripts/nvrtc-env.sh):$LD_LIBRARY_PATH\"` \
             (a venv .nvrtc-venv with the nvidia-cuda-nvrtc wheel)"
        );
    }
    eprintln!("skipped: libnvrtc not found");
    false
}

/// What one compilation gave: the PTX (when it succeeded) and the log.
struct Compiled {
    ptx: Option<String>,
    log: String,
}

fn c_chars_to_string(v: &[std::ffi::c_char]) -> String {
    // Both buffers are NUL-terminated C strings.
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}

/// Compiles `src` for `arch` with the options the host uses. Goes through cudarc's `result`
/// layer rather than `compile_ptx_with_opts` because that one returns the log only on failure,
/// and a warning in a successful compile must fail this test too.
fn compile(name: &str, src: &str, arch: &str) -> Compiled {
    let csrc = CString::new(src).unwrap();
    let cname = CString::new(format!("{name}.cu")).unwrap();
    let prog = result::create_program(&csrc, Some(&cname)).expect("nvrtcCreateProgram");
    let opts = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
    ];
    // SAFETY: `prog` (here and in the three calls below) is the live program created above,
    // used on this thread only and destroyed last, once.
    let ok = unsafe { result::compile_program(prog, &opts) }.is_ok();
    // SAFETY: as above.
    let log = c_chars_to_string(&unsafe { result::get_program_log(prog) }.expect("log"));
    // SAFETY: as above; called only after a successful compile.
    let ptx = ok.then(|| c_chars_to_string(&unsafe { result::get_ptx(prog) }.expect("ptx")));
    // SAFETY: as above; nothing uses `prog` after this.
    unsafe { result::destroy_program(prog) }.expect("nvrtcDestroyProgram");
    Compiled { ptx, log }
}

/// Names of the `.entry` (kernel) definitions in PTX text.
fn entries(ptx: &str) -> BTreeSet<String> {
    ptx.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix(".visible .entry ")?;
            Some(rest.split('(').next()?.trim().to_string())
        })
        .collect()
}

/// Every problem with module `name` on `arch`; empty when it is clean.
fn check_module(name: &str, arch: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let src = program(name).unwrap();
    let c = compile(name, &src, arch);
    let Some(ptx) = c.ptx else {
        return vec![format!("{name} ({arch}) failed to compile:\n{}", c.log)];
    };
    if c.log.contains("warning") || c.log.contains("error") {
        problems.push(format!(
            "{name} ({arch}) compiled with diagnostics:\n{}",
            c.log
        ));
    }
    let have = entries(&ptx);
    let want: BTreeSet<String> = expected_kernels(name).into_iter().collect();
    for k in want.difference(&have) {
        problems.push(format!("{name} ({arch}): kernel {k} missing from the PTX"));
    }
    for k in have.difference(&want) {
        problems.push(format!(
            "{name} ({arch}): PTX defines {k}, which expected_kernels lacks"
        ));
    }
    // Direct check of the `.entry NAME(` spelling too, as the host would look it up.
    if let Some(k) = want.iter().find(|k| !ptx.contains(&format!(".entry {k}("))) {
        problems.push(format!("{name} ({arch}): no `.entry {k}(` in the PTX"));
    }
    eprintln!(
        "{name:>12} {arch:>10}: {} kernels, {} KiB of PTX",
        have.len(),
        ptx.len() / 1024
    );
    problems
}

#[test]
fn every_kernel_module_compiles() {
    if !nvrtc_available() {
        return;
    }
    // compute_80/90: the PTX the host loads (JIT-compiled by the driver). sm_90: NVRTC also runs
    // ptxas, which rejects invalid inline PTX (f16 conversions) that PTX generation passes through.
    let archs = ["compute_80", "compute_90", "sm_90"];
    let jobs: Vec<(&str, &str)> = SOURCES
        .iter()
        .flat_map(|(n, _)| archs.iter().map(move |a| (*n, *a)))
        .collect();
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(jobs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let problems: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(name, arch)) = jobs.get(i) else {
                            break out;
                        };
                        out.extend(check_module(name, arch));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn broken_source_fails_to_compile() {
    if !nvrtc_available() {
        return;
    }
    // A real module with an error appended: proves compile() reports failures (and the log).
    let src = program("copy").unwrap()
        + "\nextern \"C\" __global__ void broken_f32(float* x) { *x = no_such_fn(); }\n";
    let c = compile("broken", &src, "compute_90");
    assert!(c.ptx.is_none(), "a broken source compiled");
    assert!(
        c.log.contains("no_such_fn"),
        "log does not name the error:\n{}",
        c.log
    );
}

#[test]
fn entries_parser_reads_ptx_entries() {
    let ptx =
        ".visible .entry copy_f32(\n\t.param .u64 copy_f32_param_0\n)\n.visible .entry fill_u8(";
    let e = entries(ptx);
    assert_eq!(e.into_iter().collect::<Vec<_>>(), ["copy_f32", "fill_u8"]);
}
