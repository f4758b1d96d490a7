//! The parts of complex arrays: `real`, `imag`, `conj`, `angle` and building one from two real
//! arrays (`NDArray::complex`), and the complex matmul off the CPU, done by the 4M method (four
//! real products, the accuracy of BLAS's `zgemm`; on the CPU quill-gemm's complex product runs
//! the same sums as one real product). The parts are computed by CPU kernels
//! (a GPU array goes through the host); on a GPU complex arrays copy, fill, select, add,
//! subtract, multiply, divide and negate natively, and every other op runs on host copies.

use super::NDArray;
use crate::backend::Storage;
use crate::device::Device;
use quill_core::{DType, Error, Result};
use quill_cpu::elementwise::complex::Part;

/// `p` of the complex array `a`, read through its strides by the CPU kernel; a GPU array goes
/// through the host (counted in `host_round_trips`: the GPU has no part kernels).
fn part_of(a: &NDArray, p: Part) -> Result<NDArray> {
    if a.device() != Device::Cpu {
        let op = match p {
            Part::Real => "real",
            Part::Imag => "imag",
            Part::Conj => "conj",
            Part::Angle => "angle",
        };
        crate::fallback::note_off_host(op, a.device());
        return part_of(&a.to_device(Device::Cpu)?, p)?.to_device(a.device());
    }
    let out = quill_cpu::elementwise::complex::part(p, a.read().cpu(), &a.layout)?;
    NDArray::fresh(Storage::Cpu(out), a.shape())
}

impl NDArray {
    /// The real part: of a complex array a new real array (f32 for complex64, f64 for
    /// complex128); of a real array the array itself (a view, as NumPy's `.real`).
    pub fn real(&self) -> Result<NDArray> {
        if !self.dtype().is_complex() {
            return Ok(self.clone());
        }
        part_of(self, Part::Real)
    }

    /// The imaginary part: of a complex array a new real array; of a real array zeros of its
    /// dtype and shape.
    pub fn imag(&self) -> Result<NDArray> {
        if !self.dtype().is_complex() {
            return NDArray::zeros(self.shape(), self.dtype())?.to_device(self.device());
        }
        part_of(self, Part::Imag)
    }

    /// The complex conjugate `re - i im`; a real array is its own conjugate (returned as is).
    pub fn conj(&self) -> Result<NDArray> {
        if !self.dtype().is_complex() {
            return Ok(self.clone());
        }
        part_of(self, Part::Conj)
    }

    /// The argument `atan2(im, re)` in radians, in (-pi, pi]: of a real array 0 for
    /// non-negative values and pi for negative ones (f64 for integers, as NumPy).
    pub fn angle(&self) -> Result<NDArray> {
        if !self.dtype().is_complex() {
            let x = if self.dtype().is_float() {
                self.clone()
            } else {
                self.astype(DType::F64)?
            };
            return NDArray::zeros(x.shape(), x.dtype())?
                .to_device(x.device())?
                .atan2(&x);
        }
        part_of(self, Part::Angle)
    }

    /// The complex array `re + i im` (both real, broadcast together): complex64 when both fit
    /// f32 (f32, f16, bf16, small integers), else complex128.
    pub fn complex(re: &NDArray, im: &NDArray) -> Result<NDArray> {
        const OP: &str = "complex";
        for (what, x) in [("re", re), ("im", im)] {
            if x.dtype().is_complex() {
                return Err(Error::invalid(
                    OP,
                    format!("{what} must be real, got {}", x.dtype()),
                ));
            }
        }
        let part = quill_core::promote_types(
            quill_core::promote_types(re.dtype(), im.dtype()),
            DType::F16,
        );
        let dtype = part.to_complex().unwrap_or(DType::C128);
        let shape = quill_core::shape::broadcast_shapes(OP, re.shape(), im.shape())?;
        let device = re.device();
        let part_dtype = dtype.real_part();
        let take = |x: &NDArray| -> Result<NDArray> {
            let x = x.to_device(Device::Cpu)?;
            let x = if x.dtype() == part_dtype {
                x
            } else {
                x.astype(part_dtype)?
            };
            x.broadcast_to(&shape)
        };
        let (r, i) = (take(re)?, take(im)?);
        let out = quill_cpu::elementwise::complex::combine(
            (r.read().cpu(), &r.layout),
            (i.read().cpu(), &i.layout),
        )?;
        let out = NDArray::fresh(Storage::Cpu(out), &shape)?;
        if device == Device::Cpu {
            Ok(out)
        } else {
            out.to_device(device)
        }
    }

    /// The matrix product of complex operands (already of one complex dtype) off the CPU, by four
    /// real products; the real matmul handles 1-D operands and batch dims: `(ar br - ai bi) +
    /// i (ar bi + ai br)`. (On the CPU, quill-gemm multiplies complex operands itself.)
    pub(crate) fn matmul_complex(a: &NDArray, b: &NDArray) -> Result<NDArray> {
        let (ar, ai, br, bi) = (a.real()?, a.imag()?, b.real()?, b.imag()?);
        let re = ar.matmul(&br)?.sub(&ai.matmul(&bi)?)?;
        let im = ar.matmul(&bi)?.add(&ai.matmul(&br)?)?;
        NDArray::complex(&re, &im)
    }
}
