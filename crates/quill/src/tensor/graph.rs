//! The backward pass: a topological sort of the recorded graph and one reversed loop that
//! hands each node's gradient to its op's `Backward` and sums what flows into each input
//! (micrograd's engine, with PyTorch's options). Leaves (and `retain_grad` tensors)
//! accumulate into `grad()` (or, with `overwrite_grad`, are set to the pass's gradient, as
//! needle's are); `grad()` (the function) returns gradients without touching them.

use super::mode::set_grad_enabled;
use super::{GradFn, Node, Tensor};
use quill_core::{Error, Result};
use std::collections::HashMap;
use std::rc::Rc;

/// PyTorch's `backward` flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct BackwardOptions {
    /// Keep the graph (and the arrays its ops saved) for another backward pass; by default a
    /// pass releases them, and a second pass through the same graph is an error.
    pub retain_graph: bool,
    /// Record the backward pass itself, so that gradients can be differentiated again. Implies
    /// `retain_graph`.
    pub create_graph: bool,
    /// Each leaf's `grad()` becomes this pass's gradient instead of accumulating into it
    /// (needle's `backward`, where every pass sets `.grad`).
    pub overwrite_grad: bool,
}

impl Tensor {
    /// Gradients of this one-element tensor with respect to every leaf that requires them,
    /// accumulated into their `grad()`.
    pub fn backward(&self) -> Result<()> {
        self.backward_opts(None, BackwardOptions::default())
    }

    /// `backward` for a tensor of any shape, seeded with `grad` (the gradient of some scalar
    /// with respect to this tensor).
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        self.backward_opts(Some(grad), BackwardOptions::default())
    }

    /// `backward` with options; `grad` is required unless this tensor has one element.
    pub fn backward_opts(&self, grad: Option<&Tensor>, opts: BackwardOptions) -> Result<()> {
        run(std::slice::from_ref(self), grad, opts, None).map(|_| ())
    }
}

/// `torch.autograd.grad`: the gradients of `output` (seeded with `grad`, or 1 for one
/// element) with respect to `inputs`, returned rather than accumulated; an input the output
/// does not depend on gets zeros.
pub fn grad(
    output: &Tensor,
    inputs: &[Tensor],
    grad: Option<&Tensor>,
    opts: BackwardOptions,
) -> Result<Vec<Tensor>> {
    let got = run(std::slice::from_ref(output), grad, opts, Some(inputs))?;
    got.into_iter()
        .zip(inputs)
        .map(|(g, x)| match g {
            Some(g) => Ok(g),
            None => x.zeros_like(),
        })
        .collect()
}

/// The leaves that a backward pass from `root` reaches (each once): the tensors whose `grad()`
/// it sets.
pub fn grad_leaves(root: &Tensor) -> Vec<Tensor> {
    topo(std::slice::from_ref(root))
        .into_iter()
        .filter(|t| t.is_leaf())
        .collect()
}

fn key(t: &Tensor) -> *const Node {
    Rc::as_ptr(&t.0)
}

/// Nodes reachable from `roots` through recorded ops, each after every node that uses it.
fn topo(roots: &[Tensor]) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // An explicit stack: deep graphs (long recurrences) must not overflow the call stack.
    let mut stack: Vec<(Tensor, bool)> = roots.iter().map(|r| (r.clone(), false)).collect();
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !t.requires_grad() || !seen.insert(key(&t)) {
            continue;
        }
        stack.push((t.clone(), true));
        if let GradFn::Op { inputs, .. } = &*t.0.grad_fn.borrow() {
            // Leaves are pushed first, so they are expanded after the op inputs' subtrees and
            // land right after their last user in the order: a parameter's gradient is final
            // (and its hooks run) as early as possible, which lets data-parallel training send
            // it while the rest of backward runs. The op nodes' relative order, and so every
            // gradient sum, is the same as with any other push order.
            for leaves in [true, false] {
                for i in inputs {
                    if i.requires_grad() && i.is_leaf() == leaves && !seen.contains(&key(i)) {
                        stack.push((i.clone(), false));
                    }
                }
            }
        }
    }
    order.reverse();
    order
}

fn run(
    roots: &[Tensor],
    seed: Option<&Tensor>,
    opts: BackwardOptions,
    wanted: Option<&[Tensor]>,
) -> Result<Vec<Option<Tensor>>> {
    const OP: &str = "backward";
    let root = &roots[0];
    if !root.requires_grad() {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: "the tensor does not require grad and has no grad_fn (did every input have \
                  requires_grad = false, or was it computed under no_grad?)"
                .into(),
        });
    }
    let seed = match seed {
        Some(g) => {
            if g.shape() != root.shape() {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: root.shape().into(),
                    rhs: g.shape().into(),
                    hint: " (the seed gradient must have the output's shape)".into(),
                });
            }
            g.astype(root.dtype())?
        }
        None if root.numel() == 1 => root.ones_like()?,
        None => {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "grad can be implicitly created only for one-element outputs, this one has \
                     shape {:?}; call backward_with(grad)",
                    root.shape()
                ),
            })
        }
    };
    let retain = opts.retain_graph || opts.create_graph;
    let _mode = set_grad_enabled(opts.create_graph);
    // Each backward op runs in the dtype its forward chose (PyTorch's rule): an autocast region
    // around `backward()` must not cast the gradients again.
    let _autocast = super::autocast::no_autocast();
    let want: HashMap<*const Node, usize> = wanted
        .unwrap_or(&[])
        .iter()
        .enumerate()
        .map(|(i, t)| (key(t), i))
        .collect();
    let mut out = vec![None; wanted.map_or(0, |w| w.len())];
    let mut grads: HashMap<*const Node, Tensor> = HashMap::new();
    grads.insert(key(root), seed);
    for node in topo(roots) {
        let Some(g) = grads.remove(&key(&node)) else {
            continue;
        };
        let g = if opts.create_graph { g } else { g.detach() };
        if let Some(&i) = want.get(&key(&node)) {
            out[i] = Some(g.clone());
        } else if wanted.is_none() && (node.is_leaf() || node.0.retains_grad.get()) {
            let acc = match node.grad() {
                Some(old) if !opts.overwrite_grad => old.add(&g)?,
                _ => g.clone(),
            };
            *node.0.grad.borrow_mut() = Some(acc);
            node.run_grad_hooks()?;
        }
        // The op stays in the node while its backward runs (an op defined in Python reads the
        // node's inputs from it), and is released afterwards unless the graph is retained.
        let gf = node.0.grad_fn.borrow();
        match &*gf {
            GradFn::Leaf => {}
            GradFn::Freed(name) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    msg: format!(
                        "trying to backward through the graph a second time (through {name}): \
                         its saved arrays were released; pass retain_graph: true to the first \
                         backward"
                    ),
                })
            }
            GradFn::Op { op, inputs } => {
                let gs = complex_aware_backward(op.as_ref(), &g, inputs)?;
                for (x, gx) in inputs.iter().zip(gs) {
                    let Some(gx) = gx else { continue };
                    if !x.requires_grad() {
                        continue;
                    }
                    if gx.shape() != x.shape() {
                        return Err(Error::ShapeMismatch {
                            op: op.name(),
                            lhs: x.shape().into(),
                            rhs: gx.shape().into(),
                            hint: " (internal: a backward rule returned a gradient of the wrong \
                                   shape)"
                                .into(),
                        });
                    }
                    // A real input of an op with a complex result takes the real part
                    // (dL/dx alone); the cast below would do the same, but as a cast.
                    let gx = if gx.dtype().is_complex() && !x.dtype().is_complex() {
                        gx.real()?
                    } else {
                        gx
                    };
                    let gx = if gx.dtype() != x.dtype() {
                        gx.astype(x.dtype())?
                    } else {
                        gx
                    };
                    let k = key(x);
                    let sum = match grads.remove(&k) {
                        Some(prev) => prev.add(&gx)?,
                        None => gx,
                    };
                    grads.insert(k, sum);
                }
            }
        }
        let is_op = matches!(&*gf, GradFn::Op { .. });
        drop(gf);
        if !retain && is_op {
            let name = node.grad_fn_name().unwrap_or("leaf");
            // A backward that is itself running a pass through this node (a Python op calling
            // backward from its gradient) still holds it: that node is then kept, not freed.
            if let Ok(mut f) = node.0.grad_fn.try_borrow_mut() {
                *f = GradFn::Freed(name);
            }
        }
    }
    Ok(out)
}

/// `op`'s input gradients given `g`, in PyTorch's convention for complex values: a holomorphic
/// op's real-form backward runs on conj(g) and its results are conjugated (see
/// `Backward::holomorphic`); real graphs call it unchanged.
pub(crate) fn complex_aware_backward(
    op: &dyn super::Backward,
    g: &Tensor,
    inputs: &[Tensor],
) -> Result<Vec<Option<Tensor>>> {
    let complex = g.dtype().is_complex() || inputs.iter().any(|x| x.dtype().is_complex());
    if !complex || !op.holomorphic() {
        return op.backward(g, inputs);
    }
    op.backward(&g.conj()?, inputs)?
        .into_iter()
        .map(|gx| gx.map(|t| t.conj()).transpose())
        .collect()
}
