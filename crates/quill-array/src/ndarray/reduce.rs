//! Reductions on `NDArray`: sum, prod, mean, max, min, argmax, argmin, any, all, var, std and
//! logsumexp over any set of axes (negative allowed, `None` = all), with NumPy's dtype rules and
//! `keepdims`. Axis checks and NumPy's "no identity" errors live here; the loops are the
//! backend's, which read any strided layout in place.

use super::NDArray;
use crate::backend::Storage;
use quill_core::shape::{normalize_axes, normalize_axis};
use quill_core::{Error, Layout, ReduceOp, Result, Stat};

impl NDArray {
    /// Normalised axes, sorted (`None` means every axis).
    fn reduce_axes(&self, op: &'static str, axes: Option<&[isize]>) -> Result<Vec<usize>> {
        let mut ax = match axes {
            None => (0..self.ndim()).collect(),
            Some(a) => normalize_axes(op, a, self.ndim())?,
        };
        ax.sort_unstable();
        Ok(ax)
    }

    /// NumPy raises for a reduction without identity over zero elements, even when the result
    /// itself would be empty.
    fn check_nonempty(&self, op: &'static str, axes: &[usize]) -> Result<()> {
        if axes.iter().any(|&a| self.shape()[a] == 0) {
            return Err(Error::invalid(
                op,
                format!(
                    "zero-size reduction over axes {axes:?} of an array of shape {:?}: {op} has no identity",
                    self.shape()
                ),
            ));
        }
        Ok(())
    }

    /// Wraps a kernel result (contiguous over the kept dims) in the output's shape.
    fn reduced(&self, s: Storage, axes: &[usize], keepdims: bool) -> Result<NDArray> {
        let shape: Vec<usize> = (0..self.ndim())
            .filter_map(|d| match (axes.contains(&d), keepdims) {
                (false, _) => Some(self.shape()[d]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(NDArray::from_storage(s, Layout::contiguous(&shape)?))
    }

    fn stat(&self, stat: Stat, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        let ax = self.reduce_axes(stat.name(), axes)?;
        let s = self.read().stat(stat, &self.layout, &ax)?;
        self.reduced(s, &ax, keepdims)
    }

    fn reduce_op(&self, op: ReduceOp, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        let ax = self.reduce_axes(op.name(), axes)?;
        if matches!(op, ReduceOp::Max | ReduceOp::Min) {
            self.check_nonempty(op.name(), &ax)?;
        }
        let s = self.read().reduce(op, &self.layout, &ax)?;
        self.reduced(s, &ax, keepdims)
    }

    /// Sum; bool and integers give i64, floats keep their dtype (f16 / bf16 accumulate in f32).
    /// Floats are summed pairwise, so the error grows like log n. Empty: 0.
    pub fn sum(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        self.reduce_op(ReduceOp::Sum, axes, keepdims)
    }

    /// Product, with the dtypes of `sum`. Empty: 1.
    pub fn prod(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        self.reduce_op(ReduceOp::Prod, axes, keepdims)
    }

    /// Maximum; NaN propagates. An empty reduction is an error (as NumPy).
    pub fn max(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        self.reduce_op(ReduceOp::Max, axes, keepdims)
    }

    /// Minimum; NaN propagates. An empty reduction is an error (as NumPy).
    pub fn min(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        self.reduce_op(ReduceOp::Min, axes, keepdims)
    }

    /// True where any element is non-zero (NaN counts as non-zero). Empty: false.
    pub fn any(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        self.reduce_op(ReduceOp::Any, axes, keepdims)
    }

    /// True where every element is non-zero. Empty: true.
    pub fn all(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        self.reduce_op(ReduceOp::All, axes, keepdims)
    }

    fn arg_op(&self, op: ReduceOp, axis: Option<isize>, keepdims: bool) -> Result<NDArray> {
        let ax = match axis {
            None => (0..self.ndim()).collect(),
            Some(a) => vec![normalize_axis(op.name(), a, self.ndim(), 0)?],
        };
        self.check_nonempty(op.name(), &ax)?;
        let s = self.read().reduce(op, &self.layout, &ax)?;
        self.reduced(s, &ax, keepdims)
    }

    /// Index (i64) of the first maximum along `axis`, or in the flattened array for `None`
    /// (with `keepdims`, every dim becomes 1, as NumPy). A NaN counts as the maximum.
    pub fn argmax(&self, axis: Option<isize>, keepdims: bool) -> Result<NDArray> {
        self.arg_op(ReduceOp::ArgMax, axis, keepdims)
    }

    /// Index (i64) of the first minimum; as `argmax`.
    pub fn argmin(&self, axis: Option<isize>, keepdims: bool) -> Result<NDArray> {
        self.arg_op(ReduceOp::ArgMin, axis, keepdims)
    }

    /// Mean; bool and integers give f64, floats keep their dtype. Empty: NaN.
    pub fn mean(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        self.stat(Stat::Mean, axes, keepdims)
    }

    /// Variance `sum(|x - mean|^2) / (n - ddof)`, dtypes as `mean` (complex input gives the
    /// real dtype of its parts, as NumPy); `ddof >= n` gives inf or NaN, as NumPy (which also
    /// warns).
    pub fn var(&self, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Result<NDArray> {
        if self.dtype().is_complex() {
            return self.complex_var(axes, ddof, keepdims);
        }
        self.stat(Stat::Var { ddof, std: false }, axes, keepdims)
    }

    /// Standard deviation: the square root of `var`.
    pub fn std(&self, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Result<NDArray> {
        if self.dtype().is_complex() {
            return self.complex_var(axes, ddof, keepdims)?.sqrt();
        }
        self.stat(Stat::Var { ddof, std: true }, axes, keepdims)
    }

    /// The variance of complex values, NumPy's mean of |x - mean|²: the variances of the real
    /// and imaginary parts added (each from the real kernel's two-pass form), real-valued in
    /// the parts' dtype.
    fn complex_var(&self, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Result<NDArray> {
        let stat = Stat::Var { ddof, std: false };
        let re = self.real()?.stat(stat, axes, keepdims)?;
        re.add(&self.imag()?.stat(stat, axes, keepdims)?)
    }

    /// `log(sum(exp(x)))`, computed stably through the max; dtypes as `mean`. All -inf (or
    /// empty): -inf; any +inf: +inf; NaN propagates. Complex input gives PyTorch's complex
    /// logsumexp: shifted by the largest real part, the principal log of the shifted sum.
    pub fn logsumexp(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        if self.dtype().is_complex() {
            return self.complex_logsumexp(axes, keepdims);
        }
        self.stat(Stat::LogSumExp, axes, keepdims)
    }

    /// `logsumexp` of complex values: `m + log(sum(exp(x - m)))` with `m` the largest real
    /// part over the axes (0 where that is not finite, or the axes are empty), so that large
    /// real parts neither overflow nor lose the small terms.
    fn complex_logsumexp(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<NDArray> {
        let ax = self.reduce_axes("logsumexp", axes)?;
        let re = self.real()?;
        let m = if ax.iter().any(|&a| self.shape()[a] == 0) {
            NDArray::zeros(&[], re.dtype())?
        } else {
            let m = re.max(axes, true)?;
            NDArray::where_(&m.isfinite()?, &m, &NDArray::zeros(&[], m.dtype())?)?
        };
        let m = m.astype(self.dtype())?;
        let s = self.sub(&m)?.exp()?.sum(axes, true)?.log()?.add(&m)?;
        if keepdims {
            return Ok(s);
        }
        let shape: Vec<isize> = (0..self.ndim())
            .filter(|d| !ax.contains(d))
            .map(|d| self.shape()[d] as isize)
            .collect();
        s.reshape(&shape)
    }
}
