//! needle's differentiable `.grad` without reference cycles. In needle every gradient is a
//! graph node, so `x.grad.backward()` gives second derivatives. Recording that graph by default
//! (`create_graph`) would tie each leaf to its gradient's graph, which leads back to the leaf:
//! an `Rc` cycle that never frees. Instead a pass records, for each leaf it reaches, a weak
//! handle to its root and the seed; `.grad` of that leaf, when asked for its own backward,
//! recomputes itself with the graph (`grad(root, [leaf], seed, create_graph)`) and goes on from
//! there. Nothing here keeps a tensor alive: once the root is gone, so is the record.

use quill::tensor::{grad, grad_leaves, BackwardOptions, Tensor, WeakTensor};
use quill::{Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;

struct Source {
    leaf: WeakTensor,
    root: WeakTensor,
    seed: Option<Tensor>,
}

thread_local! {
    /// Keyed by the leaf's node id; `leaf` guards against an id reused after a free.
    static SOURCES: RefCell<HashMap<usize, Source>> = RefCell::new(HashMap::new());
}

/// Notes that a pass from `root` (seeded with `seed`) set the gradient of every leaf it
/// reached, and forgets records whose tensors are gone.
pub fn record(root: &Tensor, seed: Option<&Tensor>) {
    let leaves = grad_leaves(root);
    SOURCES.with(|s| {
        let mut s = s.borrow_mut();
        s.retain(|_, v| v.leaf.upgrade().is_some() && v.root.upgrade().is_some());
        for leaf in leaves {
            s.insert(
                leaf.node_id(),
                Source {
                    leaf: leaf.downgrade(),
                    root: root.downgrade(),
                    seed: seed.map(|g| g.detach()),
                },
            );
        }
    });
}

/// Forgets where `leaf`'s gradient came from (it was set by hand).
pub fn forget(leaf: &Tensor) {
    SOURCES.with(|s| s.borrow_mut().remove(&leaf.node_id()));
}

/// The gradient of `leaf` from the pass that last set it, with its graph recorded, or an
/// error saying why it cannot be had.
pub fn differentiable_grad(leaf: &Tensor) -> Result<Tensor> {
    const OP: &str = "backward";
    let source = SOURCES.with(|s| {
        s.borrow().get(&leaf.node_id()).and_then(|v| {
            let l = v.leaf.upgrade()?;
            (l.node_id() == leaf.node_id()).then(|| (v.root.upgrade(), v.seed.clone()))
        })
    });
    let Some((root, seed)) = source else {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: "this gradient is not in the graph: it was set by hand or by a pass with \
                  create_graph=False; run the first backward again"
                .into(),
        });
    };
    let Some(root) = root else {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: "the output this gradient came from is gone, so its graph is too; keep the \
                  output alive, or pass create_graph=True to its backward"
                .into(),
        });
    };
    let opts = BackwardOptions {
        retain_graph: true,
        create_graph: true,
        overwrite_grad: false,
    };
    let mut g = grad(&root, std::slice::from_ref(leaf), seed.as_ref(), opts)?;
    Ok(g.remove(0))
}
