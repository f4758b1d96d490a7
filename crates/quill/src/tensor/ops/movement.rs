//! Movement ops: views of the input's data (reshape copies only when no view exists), whose
//! gradients are the inverse movement of the output's gradient; and `slice_assign`, the
//! functional setitem.

use super::{sum_to, to_isize};
use crate::tensor::{Backward, Tensor};
use crate::NDArray;
use quill_core::{Error, Result, SliceArg};

/// Reshape, squeeze and unsqueeze: the gradient is reshaped back.
struct Reshape {
    in_shape: Vec<usize>,
}

impl Backward for Reshape {
    fn name(&self) -> &'static str {
        "ReshapeBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.reshape(&to_isize(&self.in_shape))?)])
    }
}

struct Permute {
    inverse: Vec<isize>,
}

impl Backward for Permute {
    fn name(&self) -> &'static str {
        "PermuteBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.permute(&self.inverse)?)])
    }
}

struct BroadcastTo {
    in_shape: Vec<usize>,
}

impl Backward for BroadcastTo {
    fn name(&self) -> &'static str {
        "BroadcastToBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(sum_to(g, &self.in_shape)?)])
    }
}

struct Flip {
    axes: Vec<isize>,
}

impl Backward for Flip {
    fn name(&self) -> &'static str {
        "FlipBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.flip(&self.axes)?)])
    }
}

struct Slice {
    args: Vec<SliceArg>,
    in_shape: Vec<usize>,
}

impl Backward for Slice {
    fn name(&self) -> &'static str {
        "SliceBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let base = Tensor::zeros_on(&self.in_shape, g.dtype(), g.device())?;
        Ok(vec![Some(base.slice_assign(&self.args, g)?)])
    }
}

struct SliceAssign {
    args: Vec<SliceArg>,
}

impl Backward for SliceAssign {
    fn name(&self) -> &'static str {
        "SliceAssignBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (base, value) = (&inputs[0], &inputs[1]);
        let gb = base
            .requires_grad()
            .then(|| {
                let hole = g.slice(&self.args)?.zeros_like()?;
                g.slice_assign(&self.args, &hole)
            })
            .transpose()?;
        let gv = value
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let s = g.slice(&self.args)?;
                // The value was broadcast into the slice: sum it back (leading dims too).
                sum_to(&s, value.shape())
            })
            .transpose()?;
        Ok(vec![gb, gv])
    }
}

impl Tensor {
    /// NumPy reshape (one dim may be -1): a view when one exists, else a copy.
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        let out = self.array().reshape(shape)?;
        let op = Reshape {
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Flattens dims `start..=end` (negative counts from the end) into one.
    pub fn flatten(&self, start: isize, end: isize) -> Result<Tensor> {
        let n = self.ndim() as isize;
        let norm = |a: isize| if a < 0 { a + n } else { a };
        let (s, e) = (norm(start), norm(end));
        if n == 0 {
            return self.reshape(&[1]);
        }
        if s < 0 || e >= n || s > e {
            return Err(Error::InvalidArgument {
                op: "flatten",
                msg: format!("dims {start}..={end} are not a valid range for rank {n}"),
            });
        }
        let sh = self.shape();
        let mut out: Vec<isize> = sh[..s as usize].iter().map(|&d| d as isize).collect();
        out.push(sh[s as usize..=e as usize].iter().product::<usize>() as isize);
        out.extend(sh[e as usize + 1..].iter().map(|&d| d as isize));
        self.reshape(&out)
    }

    /// Reorders the dims (a view).
    pub fn permute(&self, axes: &[isize]) -> Result<Tensor> {
        let out = self.array().permute(axes)?;
        let n = self.ndim() as isize;
        let mut inverse = vec![0isize; axes.len()];
        for (i, &a) in axes.iter().enumerate() {
            inverse[if a < 0 { a + n } else { a } as usize] = i as isize;
        }
        Ok(Tensor::make(out, &[self], Permute { inverse }))
    }

    /// Swaps dims `a` and `b` (a view).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let n = self.ndim() as isize;
        let out = self.array().transpose(a, b)?;
        let (a, b) = (if a < 0 { a + n } else { a }, if b < 0 { b + n } else { b });
        let mut axes: Vec<isize> = (0..n).collect();
        axes.swap(a as usize, b as usize);
        Ok(Tensor::make(out, &[self], Permute { inverse: axes }))
    }

    /// Swaps the last two dims (a view): `x.mT` in PyTorch.
    pub fn mt(&self) -> Result<Tensor> {
        self.transpose(-1, -2)
    }

    /// Broadcasts to `shape` (a view with stride-0 dims); the gradient is summed back.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let out = self.array().broadcast_to(shape)?;
        let op = BroadcastTo {
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Removes the given size-1 dims (a view).
    pub fn squeeze(&self, axes: &[isize]) -> Result<Tensor> {
        let out = self.array().squeeze(axes)?;
        let op = Reshape {
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Inserts a size-1 dim at `axis` (a view).
    pub fn unsqueeze(&self, axis: isize) -> Result<Tensor> {
        let out = self.array().unsqueeze(axis)?;
        let op = Reshape {
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// Reverses the order along `axes` (a view with negative strides).
    pub fn flip(&self, axes: &[isize]) -> Result<Tensor> {
        let out = self.array().flip(axes)?;
        let op = Flip {
            axes: axes.to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// NumPy basic indexing (`s![..]`: indices, ranges with any step, new axes, ellipsis): a
    /// view. The gradient scatters back into zeros of the input's shape.
    pub fn slice(&self, args: &[SliceArg]) -> Result<Tensor> {
        let out = self.array().slice(args)?;
        let op = Slice {
            args: args.to_vec(),
            in_shape: self.shape().to_vec(),
        };
        Ok(Tensor::make(out, &[self], op))
    }

    /// A new tensor equal to `self` except that `self[args] = value` (broadcast and cast as
    /// NDArray::set): the functional setitem. Gradients reach both `self` (outside the slice)
    /// and `value`.
    pub fn slice_assign(&self, args: &[SliceArg], value: &Tensor) -> Result<Tensor> {
        let out = self.array().compact()?;
        let out = if out.shares_storage_with(self.array()) {
            self.array().deep_copy()?
        } else {
            out
        };
        out.set(args, value.array())?;
        let op = SliceAssign {
            args: args.to_vec(),
        };
        Ok(Tensor::make(out, &[self, value], op))
    }

    /// Concatenates along `axis` (all other dims equal); the gradient is split back.
    pub fn concat(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let arrays: Vec<&NDArray> = tensors.iter().map(|t| t.array()).collect();
        let out = NDArray::concat(&arrays, axis)?;
        let n = out.ndim() as isize;
        let axis = if axis < 0 { axis + n } else { axis } as usize;
        let sizes = tensors.iter().map(|t| t.shape()[axis]).collect();
        Ok(Tensor::make(out, tensors, Concat { axis, sizes }))
    }

    /// Stacks equal-shaped tensors along a new `axis`.
    pub fn stack(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(Error::InvalidArgument {
                op: "stack",
                msg: "needs at least one tensor".into(),
            });
        };
        let n = first.ndim() as isize + 1;
        if axis < -n || axis >= n {
            return Err(Error::AxisOutOfRange {
                op: "stack",
                axis,
                ndim: first.ndim(),
                extra: 1,
            });
        }
        for t in tensors {
            if t.shape() != first.shape() {
                return Err(Error::ShapeMismatch {
                    op: "stack",
                    lhs: first.shape().into(),
                    rhs: t.shape().into(),
                    hint: " (every tensor must have the same shape)".into(),
                });
            }
        }
        let parts = tensors
            .iter()
            .map(|t| t.unsqueeze(axis))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = parts.iter().collect();
        Tensor::concat(&refs, axis)
    }

    /// Splits along `axis` into pieces of `sizes` (which must sum to the dim): views.
    pub fn split(&self, sizes: &[usize], axis: isize) -> Result<Vec<Tensor>> {
        let n = self.ndim() as isize;
        if axis < -n || axis >= n {
            return Err(Error::AxisOutOfRange {
                op: "split",
                axis,
                ndim: self.ndim(),
                extra: 0,
            });
        }
        let ax = if axis < 0 { axis + n } else { axis } as usize;
        let total: usize = sizes.iter().sum();
        if total != self.shape()[ax] {
            return Err(Error::InvalidArgument {
                op: "split",
                msg: format!(
                    "sizes {sizes:?} sum to {total}, but axis {axis} of shape {:?} has {}",
                    self.shape(),
                    self.shape()[ax]
                ),
            });
        }
        let mut at = 0;
        let mut out = Vec::with_capacity(sizes.len());
        for &s in sizes {
            out.push(self.slice(&range_on(ax, at, at + s))?);
            at += s;
        }
        Ok(out)
    }
}

/// `[.., .., start..stop]` with the range on dim `axis`.
fn range_on(axis: usize, start: usize, stop: usize) -> Vec<SliceArg> {
    let mut args = vec![SliceArg::FULL; axis];
    args.push(SliceArg::Range {
        start: Some(start as isize),
        stop: Some(stop as isize),
        step: 1,
    });
    args
}

struct Concat {
    axis: usize,
    sizes: Vec<usize>,
}

impl Backward for Concat {
    fn name(&self) -> &'static str {
        "ConcatBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let parts = g.split(&self.sizes, self.axis as isize)?;
        Ok(parts.into_iter().map(Some).collect())
    }
}

/// A copy on another device; the gradient goes back to the input's device.
struct ToDevice {
    from: crate::Device,
}

impl Backward for ToDevice {
    fn name(&self) -> &'static str {
        "ToDeviceBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.to_device(self.from)?)])
    }
}

impl Tensor {
    /// This tensor on `device` (itself when it is there), differentiable: the gradient flows
    /// back to the source device.
    pub fn to_device(&self, device: crate::Device) -> Result<Tensor> {
        if self.device() == device {
            return Ok(self.clone());
        }
        let out = self.array().to_device(device)?;
        Ok(Tensor::make(
            out,
            &[self],
            ToDevice {
                from: self.device(),
            },
        ))
    }
}
