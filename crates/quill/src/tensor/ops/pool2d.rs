//! 2-D max pooling as one differentiable op over the backend's kernels: the forward keeps its
//! output; the backward re-reads the input and gives each window's gradient to its maxima
//! (ties share it, as the `max` reduction's gradient does). Under `create_graph` the backward
//! is the composite layer's (windows stacked, `max`), recorded so that it can be
//! differentiated again.

use crate::tensor::{grad, is_grad_enabled, Backward, BackwardOptions, Tensor};
use crate::NDArray;
use quill_core::Result;

struct MaxPool2d {
    kernel: (usize, usize),
    stride: (usize, usize),
    out: NDArray,
}

impl Backward for MaxPool2d {
    fn name(&self) -> &'static str {
        "MaxPool2dBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let x = &inputs[0];
        if !x.requires_grad() {
            return Ok(vec![None]);
        }
        if is_grad_enabled() {
            // The gradient is linear in g with a mask fixed by x: a detached stand-in for x
            // keeps the graph walk inside the composite pooling.
            let z = x.detach().requires_grad_(true)?;
            let y = crate::nn::MaxPool2d::functional_composite(&z, self.kernel, self.stride)?;
            let opts = BackwardOptions {
                retain_graph: false,
                create_graph: true,
                overwrite_grad: false,
            };
            let mut gz = grad(&y, std::slice::from_ref(&z), Some(g), opts)?;
            return Ok(vec![Some(gz.remove(0))]);
        }
        let dx = x
            .array()
            .max_pool2d_backward(&self.out, g.array(), self.kernel, self.stride)?;
        Ok(vec![Some(Tensor::new(dx))])
    }
}

impl Tensor {
    /// 2-D max pooling of this (N, C, H, W) float tensor: windows `kernel` (kh, kw) taken
    /// `stride` apart, no padding, floor output size; (N, C, Ho, Wo). One pass each way over
    /// the backend's kernels; differentiable to any order.
    pub fn max_pool2d(&self, kernel: (usize, usize), stride: (usize, usize)) -> Result<Tensor> {
        let out = self.array().max_pool2d(kernel, stride)?;
        let op = MaxPool2d {
            kernel,
            stride,
            out: out.clone(),
        };
        Ok(Tensor::make(out, &[self], op))
    }
}
