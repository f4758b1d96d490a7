//! Indexing ops: gather (and index_select / take_along_axis through it) and scatter_add, each
//! the other's gradient.

use crate::tensor::{Backward, Tensor};
use crate::NDArray;
use quill_core::{Error, Result};

struct Gather {
    axis: isize,
    index: NDArray,
    in_shape: Vec<usize>,
}

impl Backward for Gather {
    fn name(&self) -> &'static str {
        "GatherBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let base = Tensor::zeros_on(&self.in_shape, g.dtype(), g.device())?;
        Ok(vec![Some(base.scatter_add(self.axis, &self.index, g)?)])
    }
}

struct ScatterAdd {
    axis: isize,
    index: NDArray,
}

impl Backward for ScatterAdd {
    fn name(&self) -> &'static str {
        "ScatterAddBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let gs = inputs[1]
            .requires_grad()
            .then(|| g.gather(self.axis, &self.index))
            .transpose()?;
        Ok(vec![Some(g.clone()), gs])
    }
}

impl Tensor {
    /// `torch.gather`: `out[i][j][k] = self[i][index[i][j][k]][k]` for `axis = 1`.
    pub fn gather(&self, axis: isize, index: &NDArray) -> Result<Tensor> {
        let out = self.array().gather(axis, index)?;
        let op = Gather {
            axis,
            index: index.clone(),
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Out-of-place `torch.scatter_add`: a copy of `self` with `src` added at `index` along
    /// `axis`. Gradients reach `self` and `src`.
    pub fn scatter_add(&self, axis: isize, index: &NDArray, src: &Tensor) -> Result<Tensor> {
        let out = self.array().scatter_add(axis, index, src.array())?;
        let op = ScatterAdd {
            axis,
            index: index.clone(),
        };
        Ok(Tensor::make(out, &[self, src], op))
    }

    /// `torch.index_select`: the slices at the 1-D `index` along `axis`.
    pub fn index_select(&self, axis: isize, index: &NDArray) -> Result<Tensor> {
        let ax = norm_axis("index_select", axis, self.ndim())?;
        if index.ndim() != 1 {
            return Err(Error::InvalidArgument {
                op: "index_select",
                msg: format!("the index must be 1-D, got shape {:?}", index.shape()),
            });
        }
        // The index as a broadcast view of the output's shape: no copy of it.
        let mut view = vec![1isize; self.ndim()];
        view[ax] = index.numel() as isize;
        let mut shape = self.shape().to_vec();
        shape[ax] = index.numel();
        let idx = index.reshape(&view)?.broadcast_to(&shape)?;
        self.gather(axis, &idx)
    }

    /// NumPy `take_along_axis`: `index` broadcasts against `self` on the other dims.
    pub fn take_along_axis(&self, index: &NDArray, axis: isize) -> Result<Tensor> {
        let ax = norm_axis("take_along_axis", axis, self.ndim())?;
        if index.ndim() != self.ndim() {
            return Err(Error::ShapeMismatch {
                op: "take_along_axis",
                lhs: self.shape().into(),
                rhs: index.shape().into(),
                hint: " (the index needs the array's rank)".into(),
            });
        }
        let mut shape = self.shape().to_vec();
        shape[ax] = index.shape()[ax];
        let idx = index.broadcast_to(&shape)?;
        self.gather(axis, &idx)
    }
}

fn norm_axis(op: &'static str, axis: isize, ndim: usize) -> Result<usize> {
    let n = ndim as isize;
    if axis < -n || axis >= n {
        return Err(Error::AxisOutOfRange {
            op,
            axis,
            ndim,
            extra: 0,
        });
    }
    Ok(if axis < 0 { axis + n } else { axis } as usize)
}
