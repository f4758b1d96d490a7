//! `Tensor`: an NDArray plus its place in a dynamic autograd graph. A tensor made by an op
//! while gradients are recorded keeps the op (`Backward`) and its inputs; `backward()` walks
//! that graph once in reverse topological order (`graph.rs`). Each op's forward and backward
//! live side by side in `ops/`, and every backward is written in Tensor ops, so gradients of
//! gradients work (`create_graph`). Composite ops (mean, var, softmax, ...) are plain functions
//! over the primitives and need no backward of their own.
//!
//! Tensors are `Rc`-shared and so stay on the thread that made them; the grad mode
//! (`no_grad`) and the mixed-precision mode (`autocast`) are per thread, as PyTorch's.

pub(crate) mod autocast;
mod custom;
mod gradcheck;
mod graph;
mod mode;
mod operators;
mod ops;

pub use autocast::{autocast, autocast_dtype, is_autocast_enabled, no_autocast, AutocastGuard};
pub use custom::{live_tensors, CustomOp};
pub use gradcheck::{gradcheck, GradcheckOptions, GradcheckReport};
pub use graph::{grad, grad_leaves, BackwardOptions};
pub use mode::{is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard};

use crate::{Device, NDArray};
use quill_core::{DType, Error, Result};
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

/// A node's link to the graph.
pub(crate) enum GradFn {
    /// Made by the user (or by an op that recorded nothing): gradients stop here.
    Leaf,
    /// Made by `op` from `inputs`.
    Op {
        op: Box<dyn Backward>,
        inputs: Vec<Tensor>,
    },
    /// Was an `Op` whose saved arrays a backward pass without `retain_graph` released.
    Freed(&'static str),
}

/// One op's backward: the gradients of its inputs given the gradient `g` of its output
/// (`None` for an input that gets none). Written in Tensor ops so that, under
/// `create_graph`, the gradients are themselves differentiable.
pub(crate) trait Backward {
    fn name(&self) -> &'static str;
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>>;
    /// Whether the op is holomorphic in its complex inputs (every op but abs and the complex
    /// parts): its `backward` is then written as for reals, g times the derivative, and the
    /// engine turns that into PyTorch's convention for complex values (the gradient with
    /// respect to z = x + iy is dL/dx + i dL/dy) by running it on conj(g) and conjugating
    /// what it returns: g · conj(f'(z)). Non-holomorphic ops return false and give that
    /// convention themselves.
    fn holomorphic(&self) -> bool {
        true
    }
    /// The op defined outside quill behind this backward, if it is one.
    fn custom(&self) -> Option<Rc<dyn CustomOp>> {
        None
    }
}

pub(crate) struct Node {
    data: NDArray,
    requires_grad: bool,
    grad_fn: RefCell<GradFn>,
    grad: RefCell<Option<Tensor>>,
    retains_grad: std::cell::Cell<bool>,
    /// Post-accumulate hooks with their ids (`register_post_accumulate_grad_hook`).
    hooks: RefCell<Vec<(u64, GradHook)>>,
    /// A constant made from a scalar operand (`x * 2.0`): an input of the op, but not one of
    /// needle's (its `MulScalar` has one input).
    scalar_operand: std::cell::Cell<bool>,
}

impl Node {
    fn new(data: NDArray, requires_grad: bool, grad_fn: GradFn) -> Node {
        Node {
            data,
            requires_grad,
            grad_fn: RefCell::new(grad_fn),
            grad: RefCell::new(None),
            retains_grad: std::cell::Cell::new(false),
            hooks: RefCell::new(Vec::new()),
            scalar_operand: std::cell::Cell::new(false),
        }
    }
}

/// A hook run after `backward` accumulated a gradient into a leaf; it receives the leaf.
pub type GradHook = Rc<dyn Fn(&Tensor) -> Result<()>>;

thread_local! {
    static NEXT_HOOK_ID: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// An NDArray in the autograd graph. Cloning shares the same node (a handle, like PyTorch's
/// Python objects), so `a.clone().grad()` is `a.grad()`.
#[derive(Clone)]
pub struct Tensor(pub(crate) Rc<Node>);

/// A handle to a tensor that does not keep it alive (`Rc`'s `Weak`): for records about the
/// graph that must not hold it, or form a cycle with it.
#[derive(Clone)]
pub struct WeakTensor(std::rc::Weak<Node>);

impl WeakTensor {
    /// The tensor, while something else keeps it alive.
    pub fn upgrade(&self) -> Option<Tensor> {
        self.0.upgrade().map(Tensor)
    }
}

impl Tensor {
    /// A handle that does not keep this tensor alive.
    pub fn downgrade(&self) -> WeakTensor {
        WeakTensor(Rc::downgrade(&self.0))
    }

    fn from_node(data: NDArray, requires_grad: bool, grad_fn: GradFn) -> Tensor {
        Tensor(Rc::new(Node::counted(Node::new(
            data,
            requires_grad,
            grad_fn,
        ))))
    }

    /// A leaf tensor over `data` that records no gradient (a constant).
    pub fn new(data: NDArray) -> Tensor {
        Tensor::from_node(data, false, GradFn::Leaf)
    }

    /// A leaf tensor over `data`; with `requires_grad`, `backward` fills its `grad()`. Only
    /// floating dtypes can require gradients.
    pub fn from_array(data: NDArray, requires_grad: bool) -> Result<Tensor> {
        check_float("Tensor::from_array", &data, requires_grad)?;
        Ok(Tensor::from_node(data, requires_grad, GradFn::Leaf))
    }

    /// The result of `op` over `inputs`: recorded in the graph when gradients are enabled and
    /// some input requires them, else a constant.
    pub(crate) fn make(data: NDArray, inputs: &[&Tensor], op: impl Backward + 'static) -> Tensor {
        let record = mode::is_grad_enabled()
            && (data.dtype().is_float() || data.dtype().is_complex())
            && inputs.iter().any(|t| t.requires_grad());
        if !record {
            return Tensor::new(data);
        }
        let inputs = inputs.iter().map(|&t| t.clone()).collect();
        Tensor::from_node(
            data,
            true,
            GradFn::Op {
                op: Box::new(op),
                inputs,
            },
        )
    }

    /// The same tensor with `requires_grad` set: a leaf (`detach`ed from any graph) that
    /// shares this tensor's data.
    pub fn requires_grad_(self, requires_grad: bool) -> Result<Tensor> {
        check_float("requires_grad_", self.array(), requires_grad)?;
        Ok(Tensor::from_node(
            self.array().clone(),
            requires_grad,
            GradFn::Leaf,
        ))
    }

    /// The data, without the graph.
    pub fn array(&self) -> &NDArray {
        &self.0.data
    }
    /// Whether `backward` computes a gradient for this tensor: set on leaves by the user, and
    /// on op results when gradients were recorded and some input required them.
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad
    }
    /// True for tensors made by the user rather than by a recorded op.
    pub fn is_leaf(&self) -> bool {
        matches!(*self.0.grad_fn.borrow(), GradFn::Leaf)
    }
    /// The name of the op that made this tensor (`None` for a leaf).
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        match &*self.0.grad_fn.borrow() {
            GradFn::Leaf => None,
            GradFn::Op { op, .. } => Some(op.name()),
            GradFn::Freed(name) => Some(name),
        }
    }
    /// The gradient accumulated by `backward` (leaves and `retain_grad` tensors only).
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.borrow().clone()
    }
    /// Clears the accumulated gradient.
    pub fn zero_grad(&self) {
        *self.0.grad.borrow_mut() = None;
    }
    /// Replaces the accumulated gradient (for optimisers and gradient clipping).
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        if let Some(g) = &grad {
            if g.shape() != self.shape() {
                return Err(Error::ShapeMismatch {
                    op: "set_grad",
                    lhs: self.shape().into(),
                    rhs: g.shape().into(),
                    hint: String::new(),
                });
            }
        }
        *self.0.grad.borrow_mut() = grad;
        Ok(())
    }
    /// PyTorch's `register_post_accumulate_grad_hook`: `hook` runs each time a backward pass
    /// has accumulated this leaf's gradient (the leaf's gradient is final for that pass by
    /// then, since the pass reaches a node only after every node that uses it). An error from
    /// the hook ends the backward pass with that error. Data-parallel training uses it to send
    /// gradients while the rest of backward still runs. Returns an id for
    /// [`Tensor::remove_grad_hook`].
    pub fn register_post_accumulate_grad_hook(&self, hook: GradHook) -> u64 {
        let id = NEXT_HOOK_ID.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        self.0.hooks.borrow_mut().push((id, hook));
        id
    }
    /// Removes the hook `id`; false when this tensor has no such hook.
    pub fn remove_grad_hook(&self, id: u64) -> bool {
        let mut hooks = self.0.hooks.borrow_mut();
        let before = hooks.len();
        hooks.retain(|(h, _)| *h != id);
        hooks.len() != before
    }
    /// Runs the post-accumulate hooks (from the backward pass). The list is cloned first so a
    /// hook may register or remove hooks.
    pub(crate) fn run_grad_hooks(&self) -> Result<()> {
        let hooks: Vec<GradHook> = self
            .0
            .hooks
            .borrow()
            .iter()
            .map(|(_, h)| h.clone())
            .collect();
        for h in hooks {
            h(self)?;
        }
        Ok(())
    }
    /// Keeps this non-leaf tensor's gradient after `backward` (leaves always keep theirs).
    pub fn retain_grad(&self) {
        self.0.retains_grad.set(true);
    }
    /// The same data, cut from the graph.
    pub fn detach(&self) -> Tensor {
        Tensor::new(self.array().clone())
    }
    /// True when both handles are the same graph node.
    pub fn same_node(&self, other: &Tensor) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }

    /// The extent of each dimension (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        self.array().shape()
    }
    /// The number of dimensions (0 for a scalar).
    pub fn ndim(&self) -> usize {
        self.array().ndim()
    }
    /// The number of elements: the product of the shape (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.array().numel()
    }
    /// The element type; only float tensors can require gradients.
    pub fn dtype(&self) -> DType {
        self.array().dtype()
    }
    /// Where the data lives; ops need their operands on one device.
    pub fn device(&self) -> Device {
        self.array().device()
    }
    /// The single element of a one-element tensor, as f64.
    pub fn item(&self) -> Result<f64> {
        self.array().item::<f64>()
    }
    /// The elements in C order, copied to the host. `T` must be the tensor's dtype (no
    /// conversion), else a `DTypeMismatch`.
    pub fn to_vec<T: quill_core::Element>(&self) -> Result<Vec<T>> {
        self.array().to_vec::<T>()
    }

    // Constructors: leaves that do not require gradients; chain `.requires_grad_(true)`.
    // Each errors, rather than aborting, when the shape is larger than this machine can hold.

    /// Zeros of `shape` and `dtype`, on the CPU.
    pub fn zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
        NDArray::zeros(shape, dtype).map(Tensor::new)
    }
    /// Zeros made on `device` (a gradient's base, a default state next to GPU weights).
    pub fn zeros_on(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        NDArray::zeros_on(shape, dtype, device).map(Tensor::new)
    }
    /// Ones of `shape` and `dtype`, on the CPU.
    pub fn ones(shape: &[usize], dtype: DType) -> Result<Tensor> {
        NDArray::ones(shape, dtype).map(Tensor::new)
    }
    /// Every element `value`, cast to `dtype` by NumPy's rules, on the CPU.
    pub fn full(
        shape: &[usize],
        value: impl Into<quill_core::Scalar>,
        dtype: DType,
    ) -> Result<Tensor> {
        NDArray::full(shape, value, dtype).map(Tensor::new)
    }
    /// `start, start + step, ...` stopping before `stop` (NumPy's arange), 1-D. Errors on a zero
    /// step or a non-finite bound.
    pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        NDArray::arange(start, stop, step, dtype).map(Tensor::new)
    }
    /// `num` evenly spaced values from `start` to `stop`, both included (NumPy's linspace), 1-D.
    pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Result<Tensor> {
        NDArray::linspace(start, stop, num, dtype).map(Tensor::new)
    }
    /// An (n, m) matrix with ones on diagonal `k` (0 the main one, > 0 above, < 0 below) and
    /// zeros elsewhere.
    pub fn eye(n: usize, m: usize, k: isize, dtype: DType) -> Result<Tensor> {
        NDArray::eye(n, m, k, dtype).map(Tensor::new)
    }
    /// Uniform samples in [0, 1) from a ChaCha8 stream seeded by `seed`, so the same seed gives
    /// the same values on every platform. Float dtypes only.
    pub fn rand(shape: &[usize], seed: u64, dtype: DType) -> Result<Tensor> {
        NDArray::rand(shape, seed, dtype).map(Tensor::new)
    }
    /// Standard normal samples from a ChaCha8 stream seeded by `seed` (reproducible as
    /// [`Tensor::rand`]). Float dtypes only.
    pub fn randn(shape: &[usize], seed: u64, dtype: DType) -> Result<Tensor> {
        NDArray::randn(shape, seed, dtype).map(Tensor::new)
    }
    /// A tensor of `shape` over `data` in C order, its dtype `T`'s. Errors (`DataLength`) when
    /// `data.len()` is not the product of `shape`.
    pub fn from_vec<T: quill_core::Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        NDArray::from_vec(data, shape).map(Tensor::new)
    }
    /// A rank-0 tensor holding `value` (shape `[]`), a constant.
    pub fn scalar<T: quill_core::Element>(value: T) -> Tensor {
        Tensor::new(NDArray::scalar(value))
    }
    /// Zeros of this tensor's shape and dtype on its device (a constant).
    pub fn zeros_like(&self) -> Result<Tensor> {
        self.array().full_like(0.0).map(Tensor::new)
    }
    /// Ones of this tensor's shape and dtype on its device (a constant).
    pub fn ones_like(&self) -> Result<Tensor> {
        self.array().full_like(1.0).map(Tensor::new)
    }
}

fn check_float(op: &'static str, data: &NDArray, requires_grad: bool) -> Result<()> {
    if requires_grad && !(data.dtype().is_float() || data.dtype().is_complex()) {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "only floating-point and complex tensors can require gradients, got {}; cast with astype first",
                data.dtype()
            ),
        });
    }
    Ok(())
}

impl From<NDArray> for Tensor {
    fn from(a: NDArray) -> Tensor {
        Tensor::new(a)
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor({}", self.array())?;
        if let Some(name) = self.grad_fn_name() {
            write!(f, ", grad_fn={name}")?;
        } else if self.requires_grad() {
            write!(f, ", requires_grad=true")?;
        }
        write!(f, ")")
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
