//! `matmul` with NumPy semantics: the shape rules (1-D operands promoted and their dim dropped
//! again, batch dims broadcast, 0-d refused), dtype promotion, and the call into the CPU kernel
//! (complex operands too), which reads both operands through their strides (no compaction,
//! broadcast batch dims stay stride 0).

use super::{NDArray, Reads};
use crate::backend::{colocate, Storage};
use quill_core::promote::promote_types;
use quill_core::shape::broadcast_shapes;
use quill_core::{Error, Result};

impl NDArray {
    /// The matrix product `self @ other` (NumPy's `matmul`). A 1-D lhs is a row vector and a
    /// 1-D rhs a column vector, whose dim is removed from the result; higher ranks are stacks
    /// of matrices whose batch dims broadcast. Operands of different dtypes are promoted first
    /// (a copy); integers wrap in their own dtype, bool gives the logical or of ands, f16 and
    /// bf16 accumulate in f32 and round once.
    pub fn matmul(&self, other: &NDArray) -> Result<NDArray> {
        const OP: &str = "matmul";
        let (sa, sb) = (self.shape(), other.shape());
        if sa.is_empty() || sb.is_empty() {
            return Err(Error::invalid(
                OP,
                format!(
                    "operands must have at least one dim, got shapes {sa:?} and {sb:?} \
                     (multiply by a scalar with mul instead)"
                ),
            ));
        }
        let mismatch = |hint: String| Error::ShapeMismatch {
            op: OP,
            lhs: sa.into(),
            rhs: sb.into(),
            hint,
        };
        // Cast before broadcasting, so that a cast copies each operand once.
        let dt = promote_types(self.dtype, other.dtype);
        let cast = |x: &NDArray| {
            if x.dtype != dt {
                x.astype(dt)
            } else {
                Ok(x.clone())
            }
        };
        let (a, b) = (cast(self)?, cast(other)?);
        // On the CPU quill-gemm takes complex operands as they are; elsewhere the product runs
        // as four real ones.
        let host = a.device() == crate::Device::Cpu && b.device() == crate::Device::Cpu;
        if dt.is_complex() && !host {
            return NDArray::matmul_complex(&a, &b);
        }
        let a = if sa.len() == 1 { a.unsqueeze(0)? } else { a };
        let b = if sb.len() == 1 { b.unsqueeze(1)? } else { b };
        let (ra, rb) = (a.ndim(), b.ndim());
        let (m, k) = (a.shape()[ra - 2], a.shape()[ra - 1]);
        let (k2, n) = (b.shape()[rb - 2], b.shape()[rb - 1]);
        if k != k2 {
            return Err(mismatch(format!(" (contracted dims {k} vs {k2})")));
        }
        let (ba, bb) = (&a.shape()[..ra - 2], &b.shape()[..rb - 2]);
        let batch = broadcast_shapes(OP, ba, bb)
            .map_err(|_| mismatch(format!(" (batch dims {ba:?} and {bb:?} do not broadcast)")))?;
        let full = |last: [usize; 2]| [batch.as_slice(), &last].concat();
        let a = a.with_layout(a.layout.broadcast_to(&full([m, k]))?);
        let b = b.with_layout(b.layout.broadcast_to(&full([k, n]))?);
        super::check_alloc(OP, batch.iter().product::<usize>() * m * n, dt)?;
        let [a, b] = colocate(OP, [&a, &b])?;
        let g = Reads::new([&a, &b]);
        let out = Storage::matmul((g.get(0), &a.layout), (g.get(1), &b.layout))?;
        let mut shape = batch;
        if sa.len() > 1 {
            shape.push(m);
        }
        if sb.len() > 1 {
            shape.push(n);
        }
        NDArray::fresh(out, &shape)
    }
}
