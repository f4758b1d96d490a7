//! Order-dependent ops: `sort` / `argsort` (stable, NaN last as NumPy), `cumsum`, `nonzero`
//! and `searchsorted`. Sort and cumsum are the backend's lane kernels; `nonzero` and
//! `searchsorted` read their (small) inputs on the host.

use super::NDArray;
use crate::device::Device;
use quill_core::shape::normalize_axis;
use quill_core::{DType, Error, Result};
use quill_cpu::dispatch_dtype;
use quill_cpu::order::total;
use std::cmp::Ordering;

fn lane_axis(op: &'static str, a: &NDArray, axis: isize) -> Result<usize> {
    if a.ndim() == 0 {
        return Err(Error::invalid(
            op,
            "needs an array of rank 1 or more; a rank-0 array has no axis to order",
        ));
    }
    normalize_axis(op, axis, a.ndim(), 0)
}

impl NDArray {
    /// The elements sorted along `axis` (stable; NaN last ascending, first descending).
    pub fn sort(&self, axis: isize, descending: bool) -> Result<NDArray> {
        self.order("sort", axis, descending, true)
    }

    /// Indices (int64) that sort each lane along `axis`, stable as `sort`.
    pub fn argsort(&self, axis: isize, descending: bool) -> Result<NDArray> {
        self.order("argsort", axis, descending, false)
    }

    fn order(&self, op: &'static str, axis: isize, desc: bool, values: bool) -> Result<NDArray> {
        let ax = lane_axis(op, self, axis)?;
        super::check_alloc(op, self.numel(), self.dtype())?;
        let out = self.read().sort(&self.layout, ax, desc, !values)?;
        NDArray::fresh(out, self.shape())
    }

    /// Running sums along `axis`; with `include_initial` each lane starts with a 0 (one
    /// longer). Integers and bool sum in int64, float16 / bfloat16 in float32 (cast back).
    pub fn cumsum(&self, axis: isize, include_initial: bool) -> Result<NDArray> {
        let ax = lane_axis("cumsum", self, axis)?;
        let (compute, result) = match self.dtype() {
            DType::F32 | DType::F64 | DType::C64 | DType::C128 => (self.dtype(), self.dtype()),
            DType::F16 | DType::BF16 => (DType::F32, self.dtype()),
            _ => (DType::I64, DType::I64),
        };
        let x = if self.dtype() == compute {
            self.clone()
        } else {
            self.astype(compute)?
        };
        let mut shape = self.shape().to_vec();
        shape[ax] += include_initial as usize;
        super::check_alloc("cumsum", shape.iter().product(), compute)?;
        let out = NDArray::fresh(x.read().cumsum(&x.layout, ax, include_initial)?, &shape)?;
        if result == compute {
            Ok(out)
        } else {
            out.astype(result)
        }
    }

    /// Running products along `axis`, in the dtype `cumsum` sums in (int64 for integers and
    /// bool, float32 for float16 / bfloat16, cast back); with `include_initial` each lane starts
    /// with a 1. Built from array ops, so on every device: a log-step scan (after the step of
    /// width d, each element holds the product of the d before it and itself), ceil(log2 n)
    /// multiplies of shifted views.
    pub fn cumprod(&self, axis: isize, include_initial: bool) -> Result<NDArray> {
        const OP: &str = "cumprod";
        let ax = lane_axis(OP, self, axis)?;
        let (compute, result) = match self.dtype() {
            DType::F32 | DType::F64 | DType::C64 | DType::C128 => (self.dtype(), self.dtype()),
            DType::F16 | DType::BF16 => (DType::F32, self.dtype()),
            _ => (DType::I64, DType::I64),
        };
        let n = self.shape()[ax];
        let mut shape = self.shape().to_vec();
        shape[ax] = n + include_initial as usize;
        super::check_alloc(OP, shape.iter().product(), compute)?;
        let out = NDArray::ones(&shape, compute)?.to_device(self.device())?;
        let lane = |a: &NDArray, from: usize, to: usize| {
            a.slice(&super::join::axis_range(a.ndim(), ax, from, to - from))
        };
        let first = include_initial as usize;
        lane(&out, first, first + n)?.assign(&self.astype(compute)?)?;
        let mut d = 1;
        while d < n {
            // Read the shifted operand before writing: the product of the two uses old values.
            let shifted = lane(&out, first, first + n - d)?.deep_copy()?;
            lane(&out, first + d, first + n)?.mul_assign(&shifted)?;
            d *= 2;
        }
        if result == compute {
            Ok(out)
        } else {
            out.astype(result)
        }
    }

    /// The indices of the non-zero (true) elements: one int64 array per axis, in C order, as
    /// NumPy's `nonzero`. A rank-0 array is an error, as in NumPy 2.
    pub fn nonzero(&self) -> Result<Vec<NDArray>> {
        if self.ndim() == 0 {
            return Err(Error::invalid(
                "nonzero",
                "a rank-0 array has no coordinates to list; use reshape(1) (or atleast_1d) first",
            ));
        }
        crate::fallback::note_off_host("nonzero", self.device());
        let mask = self
            .to_device(Device::Cpu)?
            .astype(DType::Bool)?
            .to_vec::<bool>()?;
        let shape = self.shape();
        let hits: Vec<usize> = (0..mask.len()).filter(|&i| mask[i]).collect();
        let mut out = Vec::with_capacity(shape.len());
        for d in 0..shape.len() {
            let inner: usize = shape[d + 1..].iter().product();
            let coords: Vec<i64> = hits
                .iter()
                .map(|&i| ((i / inner.max(1)) % shape[d]) as i64)
                .collect();
            out.push(NDArray::from_vec(coords, &[hits.len()])?.to_device(self.device())?);
        }
        Ok(out)
    }

    /// For each of `values`, where it would go in this sorted 1-D array to keep it sorted:
    /// before equal elements (`right = false`) or after them. NaN sorts last, as `sort`.
    pub fn searchsorted(&self, values: &NDArray, right: bool) -> Result<NDArray> {
        const OP: &str = "searchsorted";
        if self.ndim() != 1 {
            return Err(Error::invalid(
                OP,
                format!("the sorted array must be 1-D; got shape {:?}", self.shape()),
            ));
        }
        let common = quill_core::promote::promote_types(self.dtype(), values.dtype());
        crate::fallback::note_off_host(OP, self.device());
        let s = self.to_device(Device::Cpu)?.astype(common)?;
        let v = values.to_device(Device::Cpu)?.astype(common)?;
        let out = dispatch_dtype!(common, T => {
            let sorted = s.to_vec::<T>()?;
            let idx: Vec<i64> = v
                .to_vec::<T>()?
                .iter()
                .map(|x| {
                    sorted.partition_point(|y| match total(y, x) {
                        Ordering::Less => true,
                        Ordering::Equal => right,
                        Ordering::Greater => false,
                    }) as i64
                })
                .collect();
            NDArray::from_vec(idx, values.shape())
        }, complex => Err(Error::invalid(
            OP,
            format!("not defined for complex dtype {common} (complex numbers have no order)"),
        )))?;
        out.to_device(values.device())
    }
}
