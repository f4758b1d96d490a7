//! The differentiable ops, one struct per op with its forward (a `Tensor` method) and its
//! `Backward` side by side, grouped by kind; plus the helpers every backward needs.

mod attention;
mod complex;
mod composite;
mod conv;
mod conv2d;
mod elementwise;
mod factor;
mod index;
mod layer_norm;
mod linalg;
mod movement;
mod norm;
mod pad;
mod pool2d;
mod reduce;
mod rms_norm;

use super::{Backward, Tensor};
use crate::NDArray;
use quill_core::{DType, Result};

/// Sums `g` down to `shape` over the dims that broadcasting added or stretched: the gradient
/// of `broadcast_to(x, g.shape)` with respect to `x`.
pub(crate) fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let lead = g.ndim() - shape.len();
    let mut axes: Vec<isize> = (0..lead as isize).collect();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 && g.shape()[lead + i] != 1 {
            axes.push((lead + i) as isize);
        }
    }
    let s = g.sum(Some(&axes), true)?;
    s.reshape(&to_isize(shape))
}

pub(crate) fn to_isize(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// `g * mask`, where `mask` (bool or numeric) is a constant of the graph. A bool mask is a
/// select (one pass) rather than a cast to `g`'s dtype and a multiply (two).
pub(crate) fn mul_mask(g: &Tensor, mask: &NDArray) -> Result<Tensor> {
    if mask.dtype() == DType::Bool {
        let zero = Tensor::new(NDArray::zeros(&[], g.dtype())?);
        return Tensor::where_(mask, g, &zero);
    }
    g.mul(&Tensor::new(mask.astype(g.dtype())?))
}

/// Normalises `axes` (None = all) against rank `ndim`; the forward op has validated them.
pub(crate) fn norm_axes(axes: Option<&[isize]>, ndim: usize) -> Vec<usize> {
    match axes {
        None => (0..ndim).collect(),
        Some(a) => {
            let mut v: Vec<usize> = a
                .iter()
                .map(|&x| {
                    if x < 0 {
                        (x + ndim as isize) as usize
                    } else {
                        x as usize
                    }
                })
                .collect();
            v.sort_unstable();
            v
        }
    }
}

/// The shape of a reduction's output with the reduced dims kept as 1.
pub(crate) fn keep_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect()
}

struct AsType {
    from: DType,
}

impl Backward for AsType {
    fn name(&self) -> &'static str {
        "AsTypeBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.astype(self.from)?)])
    }
}

impl Tensor {
    /// A copy converted to `dtype` (NumPy's casting); gradients flow back converted to the
    /// input's dtype. Returns `self` when the dtype already matches.
    pub fn astype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = self.array().astype(dtype)?;
        Ok(Tensor::make(out, &[self], AsType { from: self.dtype() }))
    }
}
