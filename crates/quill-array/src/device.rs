//! Where an array's buffer lives. Without the `cuda` feature `Device::Cuda` still names a
//! device, and moving an array there is an error that says how to build with CUDA. The storage
//! enum, one arm per backend, is in `backend.rs`.

use std::fmt;

/// Where an array's buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// Host memory (the default).
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
        crate::backend::cuda_device_count()
    }

    /// True when `Device::Cuda(0)` can hold arrays.
    pub fn cuda_is_available() -> bool {
        Device::cuda_device_count() > 0
    }
}
