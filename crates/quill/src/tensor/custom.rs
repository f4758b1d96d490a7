//! Ops defined outside quill that join its graph (needle's user `TensorOp`, PyTorch's
//! `autograd.Function`): the forward is computed by the caller, the backward is a
//! [`CustomOp`] written in Tensor ops, so it backpropagates through and alongside the built-in
//! ops and, under `create_graph`, is itself differentiable. Also the graph's introspection
//! (a node's inputs, one node's backward on its own) and the count of live tensors.

use super::{Backward, GradFn, Node, Tensor};
use crate::NDArray;
use quill_core::{Error, Result};
use std::any::Any;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The backward of an op defined outside quill.
pub trait CustomOp {
    /// The op's name, for errors and `grad_fn` reports.
    fn name(&self) -> String;
    /// The gradients of `inputs` given the gradient `g` of `output` (`None` where an input
    /// gets none), in Tensor ops. Each gradient must have its input's shape.
    fn backward(
        &self,
        g: &Tensor,
        output: &Tensor,
        inputs: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>>;
    /// The op itself, for callers that stored their own type (a Python op object).
    fn as_any(&self) -> &dyn Any;
}

/// A [`CustomOp`] in the graph. It holds its output weakly: the output owns this op, so a
/// strong link would be a cycle, and the graph only runs a backward while the output lives.
struct Custom {
    op: Rc<dyn CustomOp>,
    output: Weak<Node>,
}

impl Backward for Custom {
    fn name(&self) -> &'static str {
        "custom_op"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let output = self.output.upgrade().map(Tensor).ok_or_else(|| {
            Error::invalid(
                "custom_op",
                "internal: the output was dropped before its backward",
            )
        })?;
        let gs = self.op.backward(g, &output, inputs)?;
        if gs.len() != inputs.len() {
            return Err(Error::invalid(
                "custom_op",
                format!(
                    "{}: the backward returned {} gradients for {} inputs",
                    self.op.name(),
                    gs.len(),
                    inputs.len()
                ),
            ));
        }
        Ok(gs)
    }
    fn custom(&self) -> Option<Rc<dyn CustomOp>> {
        Some(self.op.clone())
    }
}

/// Tensors alive now, in every thread (nodes made and not yet dropped).
static LIVE: AtomicUsize = AtomicUsize::new(0);

impl Node {
    pub(super) fn counted(node: Node) -> Node {
        LIVE.fetch_add(1, Ordering::Relaxed);
        node
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The number of tensors (graph nodes) alive now: needle's `TENSOR_COUNTER`, to check that a
/// training step leaks none.
pub fn live_tensors() -> usize {
    LIVE.load(Ordering::Relaxed)
}

impl Tensor {
    /// The tensor `data`, made by `op` from `inputs`: recorded in the graph (with `op` as its
    /// backward) when gradients are enabled and an input requires them, else a constant.
    pub fn from_custom_op(data: NDArray, inputs: &[&Tensor], op: Rc<dyn CustomOp>) -> Tensor {
        let record = super::mode::is_grad_enabled()
            && (data.dtype().is_float() || data.dtype().is_complex())
            && inputs.iter().any(|t| t.requires_grad());
        if !record {
            return Tensor::new(data);
        }
        let inputs: Vec<Tensor> = inputs.iter().map(|&t| t.clone()).collect();
        Tensor(Rc::new_cyclic(|me| {
            Node::counted(Node::new(
                data,
                true,
                GradFn::Op {
                    op: Box::new(Custom {
                        op,
                        output: me.clone(),
                    }),
                    inputs,
                },
            ))
        }))
    }

    /// An identity of this tensor's graph node, equal for every handle of it while it lives.
    pub fn node_id(&self) -> usize {
        Rc::as_ptr(&self.0) as usize
    }

    /// The op of a tensor made by [`Tensor::from_custom_op`].
    pub fn custom_op(&self) -> Option<Rc<dyn CustomOp>> {
        match &*self.0.grad_fn.borrow() {
            GradFn::Op { op, .. } => op.custom(),
            _ => None,
        }
    }

    /// True for the constant an op made from a scalar operand (`x * 2.0`, `x ** 3`).
    pub fn is_scalar_operand(&self) -> bool {
        self.0.scalar_operand.get()
    }

    /// The tensors this one was made from (empty for a leaf, and after a backward pass
    /// released the graph); scalar operands included.
    pub fn inputs(&self) -> Vec<Tensor> {
        match &*self.0.grad_fn.borrow() {
            GradFn::Op { inputs, .. } => inputs.clone(),
            _ => Vec::new(),
        }
    }

    /// This node's backward alone: the gradients of its inputs given the gradient `g` of this
    /// tensor (needle's `op.gradient_as_tuple(g, node)`), in Tensor ops.
    pub fn input_grads(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        const OP: &str = "input_grads";
        if g.shape() != self.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().into(),
                rhs: g.shape().into(),
                hint: " (the gradient has the output's shape)".into(),
            });
        }
        match &*self.0.grad_fn.borrow() {
            GradFn::Op { op, inputs } => {
                super::graph::complex_aware_backward(op.as_ref(), g, inputs)
            }
            GradFn::Leaf => Err(Error::invalid(OP, "a leaf tensor was made by no op")),
            GradFn::Freed(name) => Err(Error::invalid(
                OP,
                format!("the graph through {name} was released by a backward pass"),
            )),
        }
    }
}
