"""needle's ``autograd``: the Tensor and its graph, visible and extensible from Python.

The graph is quill's, in Rust: every built-in op records its backward there, and
``Tensor.backward`` walks it. This module shows that graph with needle's vocabulary and lets
Python ops join it:

- ``t.op`` is the op that made ``t`` (``None`` for a leaf) and ``t.inputs`` its inputs.
  A built-in op appears as needle's class where the Rust node is exactly one (``MatMul``,
  ``Summation``, ``Reshape``, ``BroadcastTo``, ``Transpose``, ``Flip``, ``Dilate``,
  ``UnDilate``, ``Conv``), else as a :class:`BuiltinOp` named by its Rust backward; either way
  ``gradient_as_tuple(out_grad, node)`` runs that node's Rust backward alone.
- A user's :class:`TensorOp` subclass (``compute`` on NDArrays, ``gradient`` in Tensor ops)
  joins the Rust graph through :func:`make_from_op`: ``backward`` calls its ``gradient`` back,
  next to the built-in ops, and under ``create_graph`` its gradient is itself differentiable.
- :func:`find_topo_sort` and :func:`compute_gradient_of_variables` are needle's reference
  algorithms over ``op`` / ``inputs``; ``Tensor.backward`` is quill's engine, which gives the
  same gradients.
- ``TENSOR_COUNTER`` is the number of tensors alive now (graph nodes counted in Rust), read
  each time it is looked up.
"""
import numpy as np

from ._native import NDArray, Tensor, cpu, default_device
from ._native import _live_tensors, _make_from_op

__all__ = [
    "Tensor", "Value", "Op", "TensorOp", "TensorTuple", "TensorTupleOp", "make_from_op",
    "make_const", "find_topo_sort",
    "compute_gradient_of_variables", "LAZY_MODE", "TENSOR_COUNTER", "cpu", "default_device",
]

#: needle's lazy mode (build the graph, compute on ``realize_cached_data``); quill computes
#: eagerly, always.
LAZY_MODE = False

#: needle's base class of the graph's values: quill's Tensor is the only kind.
Value = Tensor


def __getattr__(name):
    # PEP 562: TENSOR_COUNTER is read fresh on every lookup, as needle's global is.
    if name == "TENSOR_COUNTER":
        return _live_tensors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Op:
    """An operator of the graph: ``compute`` on NDArrays, ``gradient`` in Tensor ops."""

    def __call__(self, *args):
        raise NotImplementedError(f"{type(self).__name__}.__call__")

    def compute(self, *args):
        """The forward on NDArrays (``realize_cached_data()`` of each input)."""
        raise NotImplementedError(f"{type(self).__name__}.compute")

    def gradient(self, out_grad, node):
        """The gradient of each input given ``out_grad``, the gradient of ``node`` (the
        output): a Tensor, or a tuple of them (``None`` for an input that gets none)."""
        raise NotImplementedError(f"{type(self).__name__}.gradient")

    def gradient_as_tuple(self, out_grad, node):
        """``gradient`` as a tuple, one entry per input."""
        out = self.gradient(out_grad, node)
        if isinstance(out, tuple):
            return out
        if isinstance(out, list):
            return tuple(out)
        return (out,)


class TensorOp(Op):
    """An op whose output is one Tensor. Subclass it, define ``compute`` and ``gradient``,
    and call an instance on Tensors: the result is in quill's graph."""

    def __call__(self, *args):
        return make_from_op(self, args)


class TensorTuple(tuple):
    """needle's TensorTuple: an immutable sequence of Tensors (what ``split`` returns and
    ``stack`` takes). Each element is a node of quill's graph of its own, so gradients reach
    the tuple's source through whichever elements are used."""

    def tuple(self):
        """The elements as a plain tuple."""
        return tuple(self)

    def detach(self):
        """The elements cut from the graph."""
        return TensorTuple(t.detach() for t in self)

    def numpy(self):
        """The elements' values, a tuple of NumPy arrays."""
        return tuple(t.numpy() for t in self)

    def __add__(self, other):
        if not isinstance(other, tuple) or len(other) != len(self):
            raise ValueError(f"TensorTuple +: needs a tuple of {len(self)} Tensors, got "
                             f"{type(other).__name__} of {len(other) if isinstance(other, tuple) else '?'}")
        return TensorTuple(a + b for a, b in zip(self, other))

    def __repr__(self):
        return f"TensorTuple({tuple.__repr__(self)})"


class TensorTupleOp(Op):
    """An op whose output is a TensorTuple: ``compute`` returns a sequence of NDArrays and
    ``gradient(out_grads, node)`` gets the TensorTuple of the elements' gradients (zeros for an
    element that got none). Each output element joins quill's graph as its own node whose
    backward gives that element's share of the op's gradient."""

    def __call__(self, *args):
        inputs = [_as_tensor(x) for x in args]
        outs = self.compute(*[x.realize_cached_data() for x in inputs])
        outs = [o if isinstance(o, NDArray) else NDArray(o) for o in outs]
        return TensorTuple(_make_from_op(_TupleElement(self, i, outs), o, inputs)
                           for i, o in enumerate(outs))


class _TupleElement(Op):
    """Element ``index`` of a TensorTupleOp's output: its gradient is the op's gradient with
    zeros in every other element's place."""

    def __init__(self, op, index, outs):
        self.op, self.index = op, index
        self.shapes = [(o.shape, o.dtype) for o in outs]

    def gradient(self, out_grad, node):
        grads = [out_grad if i == self.index
                 else Tensor(np.zeros(shape, dtype), device=out_grad.device, requires_grad=False)
                 for i, (shape, dtype) in enumerate(self.shapes)]
        return self.op.gradient(TensorTuple(grads), node)


class BuiltinOp(Op):
    """A built-in quill op as it appears on ``t.op``: ``name`` is the Rust backward's name
    (``MatMulBackward``, ``SumBackward``, ...). Its gradient is the node's own backward."""

    def __init__(self, name):
        self.name = name

    def gradient(self, out_grad, node):
        return node._input_grads(out_grad)

    def gradient_as_tuple(self, out_grad, node):
        return tuple(node._input_grads(out_grad))

    def __repr__(self):
        return f"BuiltinOp({self.name!r})"

    def __eq__(self, other):
        return isinstance(other, BuiltinOp) and other.name == self.name

    def __hash__(self):
        return hash(("BuiltinOp", self.name))


def _as_tensor(x):
    return x if isinstance(x, Tensor) else Tensor(x, requires_grad=False)


def make_from_op(op, inputs):
    """needle's ``Tensor.make_from_op``: runs ``op.compute`` on the inputs' NDArrays and puts
    the result in the graph with ``op`` as its backward."""
    inputs = [_as_tensor(x) for x in inputs]
    data = op.compute(*[x.realize_cached_data() for x in inputs])
    if not isinstance(data, NDArray):
        data = NDArray(data)
    return _make_from_op(op, data, inputs)


def make_const(data, requires_grad=False):
    """needle's ``Tensor.make_const``: a leaf over ``data`` (an NDArray or a Tensor's data)."""
    if isinstance(data, Tensor):
        data = data.realize_cached_data()
    return Tensor(data, requires_grad=requires_grad)


# Rust backward names that are exactly one of needle's op classes.
_NEEDLE_CLASS = {
    "MatMulBackward": "MatMul", "SumBackward": "Summation", "ReshapeBackward": "Reshape",
    "BroadcastToBackward": "BroadcastTo", "PermuteBackward": "Transpose",
    "FlipBackward": "Flip", "DilateBackward": "Dilate", "UndilateBackward": "UnDilate",
    "ConvBackward": "Conv",
}


def _op(self):
    py = self._py_op
    if py is not None:
        return py
    name = self._op_name
    if name is None:
        return None
    cls = _NEEDLE_CLASS.get(name)
    if cls is not None:
        # needle's class (its parameters are not recorded in the Rust node: they read None);
        # its gradient is this node's backward, as BuiltinOp's.
        from . import _needle_ops

        return getattr(_needle_ops, cls)()
    return BuiltinOp(name)


def _setitem(self, idxs, value):
    """``t[idxs] = value``: writes ``value`` (a Tensor, NDArray, array or number, broadcast to
    the selected shape) into ``t``'s data in place, outside the graph, as needle code writes
    ``t.realize_cached_data()[idxs] = ...``. Refused on a tensor that an op computed and that
    needs a gradient: its value may already be saved for that op's backward."""
    if self.requires_grad and not self.is_leaf():
        raise RuntimeError(
            "Tensor.__setitem__: this tensor was computed by an op and requires grad; writing "
            "into it would change what its backward saw. Write into a leaf, or into "
            "t.detach() / a copy.")
    if isinstance(value, Tensor):
        value = value.realize_cached_data()
    self.realize_cached_data()[idxs] = value


Tensor.__setitem__ = _setitem
# ``ndarray - tensor`` defers to ``Tensor.__rsub__`` (a Tensor, in the graph), as NumPy does
# for PyTorch's tensors; NumPy functions (``np.exp(t)``) still read the values.
Tensor.__array_priority__ = 1000
Tensor.op = property(_op, doc="The op that made this tensor (``None`` for a leaf).")
Tensor.make_from_op = staticmethod(make_from_op)
Tensor.make_const = staticmethod(make_const)


def find_topo_sort(node_list):
    """The nodes reachable from ``node_list`` through ``inputs``, each after all of its
    inputs (a post-order depth-first search, iterative, so deep graphs do not overflow)."""
    order, seen = [], set()
    for root in node_list:
        if _key(root) in seen:
            continue
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            key = _key(node)
            if expanded:
                if key not in seen:
                    seen.add(key)
                    order.append(node)
                continue
            if key in seen:
                continue
            stack.append((node, True))
            for x in reversed(node.inputs):
                if _key(x) not in seen:
                    stack.append((x, False))
    return order


def _key(t):
    # Two Python objects may wrap one Rust graph node: the node's identity names it.
    return t._node_id


def compute_gradient_of_variables(output_tensor, out_grad):
    """needle's reverse-mode pass: walks the graph from ``output_tensor`` in reverse
    topological order, calls each op's ``gradient_as_tuple`` and sums the contributions; sets
    ``.grad`` on every node it reaches."""
    grads = {_key(output_tensor): [out_grad]}
    nodes = {}
    for node in reversed(find_topo_sort([output_tensor])):
        key = _key(node)
        nodes[key] = node
        parts = grads.get(key)
        if not parts:
            continue
        g = parts[0]
        for p in parts[1:]:
            g = g + p
        node.grad = g
        if node.op is None:
            continue
        for x, gx in zip(node.inputs, node.op.gradient_as_tuple(g, node)):
            if gx is not None:
                grads.setdefault(_key(x), []).append(gx)
