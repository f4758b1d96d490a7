//! Linear and Embedding.

use super::init;
use super::module::Module;
use crate::tensor::Tensor;
use crate::NDArray;
use quill_core::{DType, Error, Result};

/// `y = x @ weight + bias`, weight stored (in, out). PyTorch's default init: uniform in
/// ±1/sqrt(in) for both weight and bias.
pub struct Linear {
    /// (in_features, out_features): transposed from PyTorch's (out, in), so forward is a plain
    /// `x @ weight` with no transpose. Mind this when loading PyTorch weights.
    pub weight: Tensor,
    /// (out_features), broadcast over the leading dims; `None` for a bias-free layer.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// An f32 layer from `inputs` to `outputs` features, with a bias when `bias`; `seed` fixes
    /// the init. Inputs are (..., inputs); any other last dim is a `ShapeMismatch` in forward.
    pub fn new(inputs: usize, outputs: usize, bias: bool, seed: u64) -> Result<Linear> {
        Linear::with_dtype(inputs, outputs, bias, seed, DType::F32)
    }

    /// As [`Linear::new`] with parameters of `dtype` (f16 or bf16 for mixed-precision models).
    /// Errors for a non-float `dtype`, since parameters must be able to require gradients.
    pub fn with_dtype(
        inputs: usize,
        outputs: usize,
        bias: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<Linear> {
        let bound = 1.0 / (inputs.max(1) as f64).sqrt();
        let weight =
            Tensor::from_array(init::uniform(&[inputs, outputs], bound, seed, dtype)?, true)?;
        let bias = if bias {
            let b = init::uniform(&[outputs], bound, seed ^ 0x5EED, dtype)?;
            Some(Tensor::from_array(b, true)?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let inputs = self.weight.shape()[0];
        if x.ndim() == 0 || x.shape()[x.ndim() - 1] != inputs {
            return Err(Error::ShapeMismatch {
                op: "Linear",
                lhs: x.shape().into(),
                rhs: self.weight.shape().into(),
                hint: format!(" (the input's last dim must be in_features = {inputs})"),
            });
        }
        let y = x.matmul(&self.weight)?;
        match &self.bias {
            Some(b) => y.add(b),
            None => Ok(y),
        }
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![("weight".to_string(), self.weight.clone())];
        if let Some(b) = &self.bias {
            v.push(("bias".into(), b.clone()));
        }
        v
    }
}

/// A lookup table: integer indices of any shape -> their rows of `weight` (num, dim).
pub struct Embedding {
    /// The table, (num, dim): row `i` is the vector of id `i`.
    pub weight: Tensor,
}

impl Embedding {
    /// Rows drawn from N(0, 1), as PyTorch.
    pub fn new(num: usize, dim: usize, seed: u64) -> Result<Embedding> {
        let w = init::normal(&[num, dim], 1.0, seed, DType::F32)?;
        Ok(Embedding {
            weight: Tensor::from_array(w, true)?,
        })
    }

    /// The rows at `indices` (an integer array of any shape): shape `indices.shape + [dim]`.
    pub fn lookup(&self, indices: &NDArray) -> Result<Tensor> {
        let num = self.weight.shape()[0];
        if !indices.dtype().is_int() {
            return Err(Error::DTypeMismatch {
                op: "Embedding",
                expected: DType::I64,
                got: indices.dtype(),
            });
        }
        if indices.numel() > 0 {
            // The gather below would wrap -1 to the last row (NumPy's take): an id is a row
            // number, so a negative one is an error here, as in PyTorch.
            let lo = indices.min(None, false)?.item::<i64>()?;
            let hi = indices.max(None, false)?.item::<i64>()?;
            for id in [lo, hi] {
                if id < 0 || id as u64 >= num as u64 {
                    return Err(Error::IndexOutOfRange {
                        op: "Embedding",
                        index: id as isize,
                        axis: 0,
                        size: num,
                    });
                }
            }
        }
        let flat = indices.reshape(&[-1])?;
        let rows = self.weight.index_select(0, &flat)?;
        let mut shape: Vec<isize> = indices.shape().iter().map(|&d| d as isize).collect();
        shape.push(self.weight.shape()[1] as isize);
        rows.reshape(&shape)
    }
}

impl Module for Embedding {
    /// `x` holds the indices (any integer dtype).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.lookup(x.array())
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![("weight".into(), self.weight.clone())]
    }
}
