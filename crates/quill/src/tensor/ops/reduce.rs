//! Reductions: sum, prod, max and min are primitives (max / min share the gradient among ties,
//! as PyTorch's); mean, var, std and logsumexp are composites in `composite.rs`. argmax /
//! argmin and any / all give constant tensors.

use super::{keep_shape, mul_mask, norm_axes, to_isize};
use crate::tensor::{autocast, Backward, Tensor};
use crate::NDArray;
use quill_core::Result;

/// The gradient of an output reduced over `axes` (kept or not), spread back over the input.
fn expand(g: &Tensor, in_shape: &[usize], axes: &[usize], keepdims: bool) -> Result<Tensor> {
    let g = if keepdims {
        g.clone()
    } else {
        g.reshape(&to_isize(&keep_shape(in_shape, axes)))?
    };
    g.broadcast_to(in_shape)
}

struct Sum {
    in_shape: Vec<usize>,
    axes: Vec<usize>,
    keepdims: bool,
}

impl Backward for Sum {
    fn name(&self) -> &'static str {
        "SumBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(expand(
            g,
            &self.in_shape,
            &self.axes,
            self.keepdims,
        )?)])
    }
}

struct Prod {
    axes: Vec<usize>,
    keepdims: bool,
}

impl Backward for Prod {
    fn name(&self) -> &'static str {
        "ProdBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        // d prod / d x_i is the product of the others. out / x_i gives it only where the group
        // has no zero; with exactly one zero, the zero's slot gets the product of the nonzero
        // others and every other slot 0; with two or more zeros, every slot gets 0.
        let x = &inputs[0];
        let ax: Vec<isize> = self.axes.iter().map(|&a| a as isize).collect();
        let g = expand(g, x.shape(), &self.axes, self.keepdims)?;
        let zero = x.array().eq_scalar(0.0)?;
        let ones = Tensor::new(NDArray::ones(&[], x.dtype())?);
        let x1 = Tensor::where_(&zero, &ones, x)?;
        let p1 = x1.prod(Some(&ax), true)?;
        let nz = zero.astype(x.dtype())?.sum(Some(&ax), true)?;
        let only = nz.eq_scalar(0.0)?;
        let one_zero = nz.eq_scalar(1.0)?;
        let by_div = p1.div(&x1)?;
        let at_zero = Tensor::where_(
            &one_zero.broadcast_to(x.shape())?.logical_and(&zero)?,
            &p1.broadcast_to(x.shape())?,
            &Tensor::new(NDArray::zeros(&[], x.dtype())?),
        )?;
        let keep = only.broadcast_to(x.shape())?;
        let d = Tensor::where_(&keep, &by_div, &at_zero)?;
        Ok(vec![Some(g.mul(&d)?)])
    }
}

struct Extreme {
    axes: Vec<usize>,
    keepdims: bool,
    out: NDArray,
}

impl Backward for Extreme {
    fn name(&self) -> &'static str {
        "MaxMinBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let x = &inputs[0];
        let ks = keep_shape(x.shape(), &self.axes);
        let out = self.out.reshape(&to_isize(&ks))?;
        let hit = x.array().eq(&out)?;
        let ax: Vec<isize> = self.axes.iter().map(|&a| a as isize).collect();
        let count = hit.astype(x.dtype())?.sum(Some(&ax), true)?;
        let share = hit.astype(x.dtype())?.div(&count)?;
        let g = expand(g, x.shape(), &self.axes, self.keepdims)?;
        Ok(vec![Some(mul_mask(&g, &share)?)])
    }
}

impl Tensor {
    /// Sum over `axes` (None = all; negative axes count from the end). Under
    /// [`autocast`](crate::autocast()) a bf16 / f16 operand is widened and the sum is f32.
    pub fn sum(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let x = autocast::widen(self)?;
        if !x.same_node(self) {
            return x.sum(axes, keepdims);
        }
        let out = self.array().sum(axes, keepdims)?;
        let axes = norm_axes(axes, self.ndim());
        let op = Sum {
            in_shape: self.shape().to_vec(),
            axes,
            keepdims,
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Product over `axes`; the gradient is exact where inputs are zero. Under
    /// [`autocast`](crate::autocast()) a bf16 / f16 operand is widened and the product is f32.
    pub fn prod(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let x = autocast::widen(self)?;
        if !x.same_node(self) {
            return x.prod(axes, keepdims);
        }
        let out = self.array().prod(axes, keepdims)?;
        let op = Prod {
            axes: norm_axes(axes, self.ndim()),
            keepdims,
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Maximum over `axes`; tied maxima share the gradient equally.
    pub fn max(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let out = self.array().max(axes, keepdims)?;
        self.extreme(out, axes, keepdims)
    }

    /// Minimum over `axes`; tied minima share the gradient equally.
    pub fn min(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let out = self.array().min(axes, keepdims)?;
        self.extreme(out, axes, keepdims)
    }

    fn extreme(&self, out: NDArray, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        let op = Extreme {
            axes: norm_axes(axes, self.ndim()),
            keepdims,
            out: out.clone(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Index of the first maximum (a constant i64 tensor).
    pub fn argmax(&self, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
        Ok(Tensor::new(self.array().argmax(axis, keepdims)?))
    }
    /// Index of the first minimum (a constant i64 tensor).
    pub fn argmin(&self, axis: Option<isize>, keepdims: bool) -> Result<Tensor> {
        Ok(Tensor::new(self.array().argmin(axis, keepdims)?))
    }
    /// Logical any (a constant bool tensor).
    pub fn any(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        Ok(Tensor::new(self.array().any(axes, keepdims)?))
    }
    /// Logical all (a constant bool tensor).
    pub fn all(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        Ok(Tensor::new(self.array().all(axes, keepdims)?))
    }
}
