//! One `CudaDevice` per GPU ordinal, made on first use and shared: its context, the one stream
//! quill's work runs on, the kernels compiled for its architecture (cached per module), cuBLAS
//! and the caching allocator. Opening the driver never panics: cudarc panics when a library
//! is missing, so the libraries are probed first and the context is made inside
//! `catch_unwind`; what fails becomes an `Error::Device` that says what is missing.

use crate::alloc::Allocator;
use crate::kernels;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use quill_core::{Error, Result};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

/// One GPU as quill uses it, shared by every array on it: the CUDA context, the single stream
/// all of quill's work on the device is queued on, the compiled kernel modules, cuBLAS and
/// the caching allocator. Obtained through [`device`].
pub struct CudaDevice {
    ordinal: usize,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// `compute_XY` for this device's compute capability.
    arch: &'static str,
    name: String,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    blas: Mutex<Option<Arc<CudaBlas>>>,
    pub(crate) alloc: Allocator,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cuda:{} ({}, {})", self.ordinal, self.name, self.arch)
    }
}

fn label(ordinal: usize) -> String {
    format!("cuda:{ordinal}")
}

/// Runs `f`, turning a cudarc panic (a library or symbol that is missing) into an error.
fn guarded<T>(op: &'static str, ordinal: usize, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the CUDA libraries failed to load".into());
            Err(Error::device(op, label(ordinal), msg))
        }
    }
}

/// True when the CUDA driver library can be opened (says nothing about GPUs).
pub fn driver_present() -> bool {
    // SAFETY: the probe only tries to open the library; it calls nothing in it.
    catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() }).unwrap_or(false)
}

/// The number of CUDA GPUs; 0 without a driver.
pub fn device_count() -> usize {
    if !driver_present() {
        return 0;
    }
    guarded("device_count", 0, || {
        CudaContext::device_count()
            .map(|n| n.max(0) as usize)
            .map_err(|e| Error::device("device_count", "cuda", e.to_string()))
    })
    .unwrap_or(0)
}

/// True when at least one GPU is usable.
pub fn is_available() -> bool {
    device_count() > 0
}

type Registry = Mutex<HashMap<usize, Arc<CudaDevice>>>;

/// The device with this ordinal, opened on first use.
pub fn device(ordinal: usize) -> Result<Arc<CudaDevice>> {
    const OP: &str = "cuda device";
    static DEVICES: OnceLock<Registry> = OnceLock::new();
    let reg = DEVICES.get_or_init(Default::default);
    let mut map = reg.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = map.get(&ordinal) {
        return Ok(d.clone());
    }
    if !driver_present() {
        return Err(Error::device(
            OP,
            label(ordinal),
            "the CUDA driver (libcuda.so.1) was not found: no NVIDIA driver on this machine",
        ));
    }
    let count = device_count();
    if ordinal >= count {
        return Err(Error::device(
            OP,
            label(ordinal),
            format!("no such GPU: this machine has {count}"),
        ));
    }
    let dev = guarded(OP, ordinal, || {
        let err = |e: cudarc::driver::DriverError| Error::device(OP, label(ordinal), e.to_string());
        let ctx = CudaContext::new(ordinal).map_err(err)?;
        // One stream per device: kernels and copies run in order, so no event tracking.
        // SAFETY: called before any allocation on this context, as the method requires.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let (major, minor) = ctx.compute_capability().map_err(err)?;
        let arch: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        Ok(CudaDevice {
            ordinal,
            alloc: Allocator::new(stream.clone(), label(ordinal)),
            ctx,
            stream,
            arch,
            name,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            blas: Mutex::new(None),
        })
    })?;
    let dev = Arc::new(dev);
    map.insert(ordinal, dev.clone());
    Ok(dev)
}

impl CudaDevice {
    /// The device's CUDA ordinal (the `N` of `cuda:N`).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// The GPU's name as the driver reports it (`"unknown GPU"` if it would not say).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// `cuda:N`, the name error messages give the device.
    pub fn label(&self) -> String {
        label(self.ordinal)
    }

    pub(crate) fn err(&self, op: &'static str, e: impl std::fmt::Display) -> Error {
        Error::device(op, self.label(), e.to_string())
    }

    /// Waits for every queued kernel and copy.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| self.err("synchronize", e))
    }

    /// Kernel `name` of module `module`, compiling the module on first use.
    pub(crate) fn function(&self, module: &'static str, name: &str) -> Result<CudaFunction> {
        const OP: &str = "cuda kernel";
        let mut fns = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = fns.get(name) {
            return Ok(f.clone());
        }
        let m = self.module(module)?;
        let f = guarded(OP, self.ordinal, || {
            m.load_function(name)
                .map_err(|e| self.err(OP, format!("kernel {name} in module {module}: {e}")))
        })?;
        fns.insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn module(&self, module: &'static str) -> Result<Arc<CudaModule>> {
        const OP: &str = "nvrtc";
        let mut mods = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = mods.get(module) {
            return Ok(m.clone());
        }
        let src = kernels::program(module)
            .ok_or_else(|| self.err(OP, format!("no kernel module named {module}")))?;
        // SAFETY: the probe only tries to open the library.
        let present = catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() });
        if !present.unwrap_or(false) {
            return Err(self.err(
                OP,
                "NVRTC (libnvrtc.so.13) was not found; it ships with the CUDA toolkit and in \
                 the pip wheel nvidia-cuda-nvrtc (add its lib directory to LD_LIBRARY_PATH)",
            ));
        }
        let arch = self.arch;
        let m = guarded(OP, self.ordinal, || {
            // The options the NVRTC test compiles every module with (tests/nvrtc_compile.rs).
            let opts = CompileOptions {
                arch: Some(arch),
                options: vec!["--std=c++17".into()],
                ..Default::default()
            };
            let ptx = compile_ptx_with_opts(&src, opts)
                .map_err(|e| self.err(OP, format!("module {module} for {arch}: {e}")))?;
            self.ctx
                .load_module(ptx)
                .map_err(|e| self.err(OP, format!("loading module {module}: {e}")))
        })?;
        mods.insert(module, m.clone());
        Ok(m)
    }

    /// This device's cuBLAS handle, bound to its stream.
    pub(crate) fn blas(&self) -> Result<Arc<CudaBlas>> {
        const OP: &str = "cublas";
        let mut b = self.blas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = b.as_ref() {
            return Ok(h.clone());
        }
        // SAFETY: the probe only tries to open the library.
        let present = catch_unwind(|| unsafe { cudarc::cublas::sys::is_culib_present() });
        if !present.unwrap_or(false) {
            return Err(self.err(OP, "cuBLAS (libcublas.so.13) was not found"));
        }
        let h = guarded(OP, self.ordinal, || {
            CudaBlas::new(self.stream.clone()).map_err(|e| self.err(OP, e))
        })?;
        let h = Arc::new(h);
        *b = Some(h.clone());
        Ok(h)
    }
}

/// Threads per block for the elementwise kernels.
pub(crate) const BLOCK: u32 = 256;

/// A grid-stride launch over `n` elements: enough blocks to fill the GPU, not one per element.
pub(crate) fn grid_for(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as usize).clamp(1, 65_535 * 8) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}
