//! Matmul with NumPy semantics (1-D operands promoted and the added dim removed, batch dims
//! broadcast). The gradients are matmuls with transposed views (no copies: the kernel reads
//! the strides) summed over the batch dims an operand was broadcast along. Autocast runs it in
//! bf16 / f16 (`tensor/autocast.rs`).

use super::sum_to;
use crate::tensor::{autocast, Backward, Tensor};
use quill_core::Result;

struct MatMul;

impl Backward for MatMul {
    fn name(&self) -> &'static str {
        "MatMulBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        // Work on the >= 2-D forms: a (k) is (1, k), b (k) is (k, 1), and g gets those dims back.
        let a2 = if a.ndim() == 1 {
            a.unsqueeze(0)?
        } else {
            a.clone()
        };
        let b2 = if b.ndim() == 1 {
            b.unsqueeze(-1)?
        } else {
            b.clone()
        };
        let mut g2 = g.clone();
        if a.ndim() == 1 {
            g2 = g2.unsqueeze(if b.ndim() == 1 { 0 } else { -2 })?;
        }
        if b.ndim() == 1 {
            g2 = g2.unsqueeze(-1)?;
        }
        let ga = a
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let full = g2.matmul(&b2.mt()?)?;
                sum_to(&full, a2.shape())?.reshape(&super::to_isize(a.shape()))
            })
            .transpose()?;
        let gb = b
            .requires_grad()
            .then(|| -> Result<Tensor> {
                if b.ndim() == 2 && a.ndim() > 2 {
                    // A matrix shared by the batch (a Linear layer's weight): the batch's
                    // products summed are one product over the stacked rows, one deep GEMM
                    // instead of a batch of shallow ones and a reduction.
                    let (k, n) = (b.shape()[0] as isize, b.shape()[1] as isize);
                    let rows = a.reshape(&[-1, k])?;
                    return rows.mt()?.matmul(&g.reshape(&[-1, n])?);
                }
                let full = a2.mt()?.matmul(&g2)?;
                sum_to(&full, b2.shape())?.reshape(&super::to_isize(b.shape()))
            })
            .transpose()?;
        Ok(vec![ga, gb])
    }
}

impl Tensor {
    /// NumPy `matmul`: 1-D and 2-D operands, batched with broadcast batch dims. Under
    /// [`autocast`](crate::autocast()) its f32 and f16 operands are cast to the autocast dtype
    /// and the product (f32-accumulated) comes back in it.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        if let Some([a, b]) = autocast::lower([self, other])? {
            return a.matmul(&b);
        }
        let out = self.array().matmul(other.array())?;
        Ok(Tensor::make(out, &[self, other], MatMul))
    }
}
