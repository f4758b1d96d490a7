//! Where an array's buffer lives, and the storage enum with one arm per backend.

use quill_core::DType;
use quill_cpu::CpuStorage;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    #[default]
    Cpu,
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
        }
    }
}

/// A buffer on some device. One arm per backend; CUDA arrives behind a feature.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
}

impl Storage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
        }
    }
    pub(crate) fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
        }
    }
    pub(crate) fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
        }
    }
    pub(crate) fn cpu(&self) -> &CpuStorage {
        match self {
            Storage::Cpu(s) => s,
        }
    }
    pub(crate) fn cpu_mut(&mut self) -> &mut CpuStorage {
        match self {
            Storage::Cpu(s) => s,
        }
    }
}
