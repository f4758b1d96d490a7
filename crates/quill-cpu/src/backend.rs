//! The CPU backend: `CpuStorage` implements quill-core's `Backend` trait with the kernels of
//! this crate. It has a kernel for every op in the trait, so the array layer's host fallback
//! ends here.

use crate::{elementwise, index, matmul, optim, order, reduce, CpuStorage};
use quill_core::{
    Along, Backend, BinaryOp, DType, Layout, ReduceOp, Result, Scalar, Stat, UnaryOp, Update,
};

impl Backend for CpuStorage {
    const NAME: &'static str = "cpu";

    fn dtype(&self) -> DType {
        CpuStorage::dtype(self)
    }
    fn len(&self) -> usize {
        CpuStorage::len(self)
    }

    fn compact(&self, l: &Layout) -> Result<Self> {
        crate::compact(self, l)
    }
    fn copy_from(&mut self, ld: &Layout, src: &Self, ls: &Layout) -> Result<()> {
        crate::copy(self, ld, src, ls)
    }
    fn cast(&self, l: &Layout, dtype: DType) -> Result<Self> {
        crate::cast(self, l, dtype)
    }
    fn fill(&mut self, l: &Layout, value: Scalar) -> Result<()> {
        crate::fill(self, l, value);
        Ok(())
    }

    fn unary(&self, op: UnaryOp, l: &Layout) -> Result<Self> {
        elementwise::unary(op, self, l)
    }
    fn binary(op: BinaryOp, a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self> {
        // Two contiguous runs (most calls): no layouts to merge.
        if a.1.is_contiguous() && b.1.is_contiguous() {
            let n = a.1.numel();
            return elementwise::binary_flat(op, (a.0, a.1.offset()), (b.0, b.1.offset()), n);
        }
        elementwise::binary(op, a, b)
    }
    fn binary_inplace(
        op: BinaryOp,
        dst: &mut Self,
        ld: &Layout,
        b: (&Self, &Layout),
    ) -> Result<()> {
        elementwise::binary_inplace(op, dst, ld, b)
    }
    fn where_(c: (&Self, &Layout), a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self> {
        elementwise::where_(c, a, b)
    }

    fn reduce(&self, op: ReduceOp, l: &Layout, axes: &[usize]) -> Result<Self> {
        reduce::reduce(op, self, l, axes)
    }
    fn stat(&self, stat: Stat, l: &Layout, axes: &[usize]) -> Result<Self> {
        match stat {
            Stat::Mean => reduce::mean(self, l, axes),
            Stat::Var { ddof, std } => reduce::var(self, l, axes, ddof, std),
            Stat::LogSumExp => reduce::logsumexp(self, l, axes),
        }
    }
    fn matmul(a: (&Self, &Layout), b: (&Self, &Layout)) -> Result<Self> {
        matmul::matmul(a.0, a.1, b.0, b.1)
    }

    fn gather(
        op: &'static str,
        src: (&Self, &Layout),
        index: (&Self, &Layout),
        along: Along,
    ) -> Result<Self> {
        index::gather(op, src, index, along)
    }
    fn scatter_add(
        op: &'static str,
        dst: (&mut Self, &Layout),
        src: (&Self, &Layout),
        index: (&Self, &Layout),
        along: Along,
    ) -> Result<()> {
        index::scatter_add(op, dst, src, index, along)
    }
    fn sort(&self, l: &Layout, axis: usize, descending: bool, indices: bool) -> Result<Self> {
        order::sort(self, l, axis, descending, indices)
    }
    fn cumsum(&self, l: &Layout, axis: usize, include_initial: bool) -> Result<Self> {
        order::cumsum(self, l, axis, include_initial)
    }

    fn update(
        rule: &Update,
        param: (&mut Self, usize),
        grad: (&Self, usize),
        state: &mut [(&mut Self, usize)],
        n: usize,
    ) -> Result<()> {
        optim::update(rule, param, grad, state, n)
    }
}
