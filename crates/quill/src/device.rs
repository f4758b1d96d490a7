//! Where an array's buffer lives, and the storage enum with one arm per backend. The CUDA arm
//! exists with the `cuda` feature; without it `Device::Cuda` still names a device, and moving
//! an array there is an error that says how to build with CUDA.

use quill_core::DType;
use quill_cpu::CpuStorage;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    #[default]
    Cpu,
    /// The NVIDIA GPU with this ordinal.
    Cuda(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl Device {
    /// Parses `cpu`, `cuda` (GPU 0) and `cuda:N`.
    pub fn parse(s: &str) -> Option<Device> {
        match s {
            "cpu" => Some(Device::Cpu),
            "cuda" | "gpu" => Some(Device::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda),
        }
    }

    /// The number of usable CUDA GPUs (0 without the `cuda` feature or a driver).
    pub fn cuda_device_count() -> usize {
        #[cfg(feature = "cuda")]
        {
            quill_cuda::device_count()
        }
        #[cfg(not(feature = "cuda"))]
        {
            0
        }
    }

    /// True when `Device::Cuda(0)` can hold arrays.
    pub fn cuda_is_available() -> bool {
        Device::cuda_device_count() > 0
    }
}

/// A buffer on some device. One arm per backend.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
    #[cfg(feature = "cuda")]
    Cuda(quill_cuda::CudaStorage),
}

impl Storage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.dtype(),
        }
    }
    pub(crate) fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => s.len(),
        }
    }
    pub(crate) fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => Device::Cuda(s.ordinal()),
        }
    }
    /// The CPU buffer. Every NDArray op sends arrays on another device to that device's
    /// kernels (or through the host) before it reaches a CPU kernel, so this is only called
    /// on CPU storage; a CUDA storage here is a bug in quill, reported as an error.
    pub(crate) fn cpu(&self) -> &CpuStorage {
        match self {
            Storage::Cpu(s) => s,
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => unreachable_cuda(s.ordinal()),
        }
    }
    pub(crate) fn cpu_mut(&mut self) -> &mut CpuStorage {
        match self {
            Storage::Cpu(s) => s,
            #[cfg(feature = "cuda")]
            Storage::Cuda(s) => unreachable_cuda(s.ordinal()),
        }
    }
}

#[cfg(feature = "cuda")]
#[cold]
fn unreachable_cuda(ordinal: usize) -> ! {
    // Not user input: every public op moves CUDA arrays before touching CPU buffers
    // (ndarray/cuda.rs); reaching this is a quill bug, and a wrong result would be worse.
    panic!("quill internal error: a CPU kernel was handed an array on cuda:{ordinal}")
}

/// The error for a device this build cannot use.
#[cfg(not(feature = "cuda"))]
pub(crate) fn no_cuda(op: &'static str, d: Device) -> quill_core::Error {
    quill_core::Error::device(
        op,
        d.to_string(),
        "this build of quill has no CUDA support; build with `--features cuda`",
    )
}
