//! The complex parts as differentiable ops: `conj`, `real`, `imag`. They are not holomorphic,
//! so their backward gives PyTorch's convention directly (the gradient of a real loss L with
//! respect to z = x + iy is dL/dx + i dL/dy): conj's is conj(g), real's is g, imag's is i g.

use crate::tensor::{Backward, Tensor};
use quill_core::{Result, Scalar};

#[derive(Clone, Copy, PartialEq)]
enum Part {
    Conj,
    Real,
    Imag,
}

struct PartOp {
    part: Part,
}

impl Backward for PartOp {
    fn name(&self) -> &'static str {
        match self.part {
            Part::Conj => "ConjBackward",
            Part::Real => "RealBackward",
            Part::Imag => "ImagBackward",
        }
    }
    fn holomorphic(&self) -> bool {
        false
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let z = inputs[0].dtype();
        let gz = match self.part {
            Part::Conj => g.conj()?,
            Part::Real => g.astype(z)?,
            Part::Imag => g.astype(z)?.mul_scalar(Scalar::C(0.0, 1.0))?,
        };
        Ok(vec![Some(gz)])
    }
}

impl Tensor {
    fn part(&self, part: Part) -> Result<Tensor> {
        let a = self.array();
        let out = match part {
            Part::Conj => a.conj()?,
            Part::Real => a.real()?.compact()?,
            Part::Imag => a.imag()?.compact()?,
        };
        Ok(Tensor::make(out, &[self], PartOp { part }))
    }

    /// The complex conjugate (`self` itself for a real tensor); differentiable, with the
    /// conjugated gradient.
    pub fn conj(&self) -> Result<Tensor> {
        if !self.dtype().is_complex() {
            return Ok(self.clone());
        }
        self.part(Part::Conj)
    }

    /// The real part, real-valued (a copy of `self` for a real tensor); differentiable.
    pub fn real(&self) -> Result<Tensor> {
        if !self.dtype().is_complex() {
            return Ok(self.clone());
        }
        self.part(Part::Real)
    }

    /// The imaginary part, real-valued (zeros for a real tensor); differentiable: the gradient
    /// reaches the input as `i g`.
    pub fn imag(&self) -> Result<Tensor> {
        if !self.dtype().is_complex() {
            return self.zeros_like();
        }
        self.part(Part::Imag)
    }
}
