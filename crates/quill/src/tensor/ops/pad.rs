//! Zero padding (`pad`) and needle's `dilate` / `undilate`: forwards are the NDArray
//! methods of the same names; each backward reads the gradient back out (a slice for `pad`,
//! `undilate` for `dilate` and `dilate` for `undilate`).

use crate::tensor::{Backward, Tensor};
use quill_core::shape::normalize_axes;
use quill_core::{Result, SliceArg};

struct Pad {
    pads: Vec<(usize, usize)>,
    in_shape: Vec<usize>,
}

impl Backward for Pad {
    fn name(&self) -> &'static str {
        "PadBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let interior: Vec<SliceArg> = self
            .pads
            .iter()
            .zip(&self.in_shape)
            .map(|(&(b, _), &d)| SliceArg::Range {
                start: Some(b as isize),
                stop: Some((b + d) as isize),
                step: 1,
            })
            .collect();
        Ok(vec![Some(g.slice(&interior)?)])
    }
}

struct Dilate {
    axes: Vec<isize>,
    dilation: usize,
}

impl Backward for Dilate {
    fn name(&self) -> &'static str {
        "DilateBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.undilate(&self.axes, self.dilation)?)])
    }
}

struct Undilate {
    axes: Vec<isize>,
    dilation: usize,
    in_shape: Vec<usize>,
}

impl Backward for Undilate {
    fn name(&self) -> &'static str {
        "UndilateBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let d = g.dilate(&self.axes, self.dilation)?;
        // ceil(n / (dilation + 1)) * (dilation + 1) >= n: the surplus zeros are cut off.
        if d.shape() == self.in_shape.as_slice() {
            return Ok(vec![Some(d)]);
        }
        let keep: Vec<SliceArg> = self
            .in_shape
            .iter()
            .map(|&n| SliceArg::Range {
                start: None,
                stop: Some(n as isize),
                step: 1,
            })
            .collect();
        Ok(vec![Some(d.slice(&keep)?)])
    }
}

impl Tensor {
    /// Zero padding: `pads[i] = (before, after)` zeros around axis `i`, one pair per axis
    /// (`np.pad` with a constant 0). The gradient is the interior slice of the output's.
    pub fn pad(&self, pads: &[(usize, usize)]) -> Result<Tensor> {
        let out = self.array().pad(pads)?;
        let op = Pad {
            pads: pads.to_vec(),
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// needle's `dilate`: `dilation` zeros after every element along each of `axes`, so a
    /// dim of size n becomes `n * (dilation + 1)`. Its gradient is `undilate`.
    pub fn dilate(&self, axes: &[isize], dilation: usize) -> Result<Tensor> {
        let out = self.array().dilate(axes, dilation)?;
        let op = Dilate {
            axes: axes.to_vec(),
            dilation,
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// needle's `undilate`: every `(dilation + 1)`-th element along each of `axes` (a view;
    /// a dim of size n becomes `ceil(n / (dilation + 1))`). Its gradient is `dilate`.
    pub fn undilate(&self, axes: &[isize], dilation: usize) -> Result<Tensor> {
        let out = self.array().undilate(axes, dilation)?;
        let op = Undilate {
            axes: normalize_axes("undilate", axes, self.ndim())?
                .into_iter()
                .map(|a| a as isize)
                .collect(),
            dilation,
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }
}
