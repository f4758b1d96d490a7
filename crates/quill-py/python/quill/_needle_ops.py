"""needle's op classes (``EWiseAdd``, ``PowerScalar``, ``Summation``, ``Conv``, ...), each a
:class:`~quill.autograd.TensorOp` over the quill op its function already runs.

Calling an instance runs that Rust op (one node of quill's graph, as the function does);
``compute`` runs it on NDArrays without recording anything; ``gradient(out_grad, node)`` is the
node's own Rust backward. The parameters needle's constructors take (``scalar``, ``axes``,
``shape``, ...) are kept as attributes of the same names.
"""
from ._native import NDArray, Tensor, _composite_grad
from .autograd import TensorOp, make_from_op


class _QuillOp(TensorOp):
    """A needle op class over one quill Tensor function ``_fn(*inputs, *params)``."""

    _params = ()

    def __init__(self, *args, **kwargs):
        names = self._params
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} parameter(s) "
                            f"{names}, got {len(args)}")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{type(self).__name__} has no parameter {k!r}; its "
                                f"parameters are {names}")
            values[k] = v
        for k in names:
            setattr(self, k, values.get(k, self._defaults().get(k)))

    @classmethod
    def _defaults(cls):
        return {}

    def _call(self, *inputs):
        raise NotImplementedError

    def __call__(self, *inputs):
        return self._call(*inputs)

    def compute(self, *arrays):
        consts = [Tensor(a, requires_grad=False) if isinstance(a, NDArray) else a
                  for a in arrays]
        out = self._call(*consts)
        return out.realize_cached_data()

    def gradient(self, out_grad, node):
        return node._input_grads(out_grad)

    def gradient_as_tuple(self, out_grad, node):
        return tuple(node._input_grads(out_grad))


class _Composite(_QuillOp):
    """A needle op that quill computes as several of its ops (logsumexp, logsoftmax, stack):
    one node of the graph all the same, as in needle, so that ``node.inputs`` are its
    arguments. The forward runs quill's ops without recording; the gradient re-runs them on
    ``node.inputs`` and differentiates through quill's graph (``_grad`` with
    ``create_graph``), so it is exact and differentiable again."""

    def __call__(self, *inputs):
        return make_from_op(self, inputs)

    def gradient(self, out_grad, node):
        return tuple(_composite_grad(self._call, list(node.inputs), out_grad))

    def gradient_as_tuple(self, out_grad, node):
        return self.gradient(out_grad, node)


def _op(name, params, call, defaults=None, doc="", base=_QuillOp):
    cls = type(name, (base,), {
        "_params": params,
        "_call": lambda self, *xs: call(self, *xs),
        "_defaults": classmethod(lambda cls: dict(defaults or {})),
        "__doc__": doc or f"needle's ``{name}``.",
        "__module__": "quill.ops",
    })
    return cls


def _ops():
    from . import ops

    return ops


EWiseAdd = _op("EWiseAdd", (), lambda s, a, b: a + b, doc="``a + b``.")
AddScalar = _op("AddScalar", ("scalar",), lambda s, a: _ops().add_scalar(a, s.scalar),
                 doc="``a + scalar``.")
EWiseMul = _op("EWiseMul", (), lambda s, a, b: a * b, doc="``a * b``.")
MulScalar = _op("MulScalar", ("scalar",), lambda s, a: _ops().mul_scalar(a, s.scalar),
                 doc="``a * scalar``.")
EWisePow = _op("EWisePow", (), lambda s, a, b: a ** b, doc="``a ** b``, both Tensors.")
PowerScalar = _op("PowerScalar", ("scalar",), lambda s, a: _ops().power_scalar(a, s.scalar),
                  doc="``a ** scalar`` (an integer scalar in needle).")
EWiseDiv = _op("EWiseDiv", (), lambda s, a, b: a / b, doc="``a / b``.")
DivScalar = _op("DivScalar", ("scalar",), lambda s, a: _ops().divide_scalar(a, s.scalar),
                 doc="``a / scalar``.")
Negate = _op("Negate", (), lambda s, a: -a, doc="``-a``.")
MatMul = _op("MatMul", (), lambda s, a, b: a @ b, doc="``a @ b`` (batched, broadcast).")
Transpose = _op("Transpose", ("axes",), lambda s, a: _ops().transpose(a, s.axes),
                doc="Swaps two axes (the last two when ``axes`` is None).")
Reshape = _op("Reshape", ("shape",), lambda s, a: _ops().reshape(a, s.shape))
BroadcastTo = _op("BroadcastTo", ("shape",), lambda s, a: _ops().broadcast_to(a, s.shape))
Summation = _op("Summation", ("axes",), lambda s, a: _ops().summation(a, s.axes),
                doc="Sum over ``axes`` (all when None).")
Log = _op("Log", (), lambda s, a: _ops().log(a))
Exp = _op("Exp", (), lambda s, a: _ops().exp(a))
ReLU = _op("ReLU", (), lambda s, a: _ops().relu(a))
Tanh = _op("Tanh", (), lambda s, a: _ops().tanh(a))
LogSoftmax = _op("LogSoftmax", (), lambda s, a: _ops()._logsoftmax(a),
                 doc="``a - logsumexp(a)`` over the last axis.", base=_Composite)
LogSumExp = _op("LogSumExp", ("axes",), lambda s, a: _ops()._logsumexp(a, s.axes),
                base=_Composite)
Flip = _op("Flip", ("axes",), lambda s, a: _ops().flip(a, s.axes))
Dilate = _op("Dilate", ("axes", "dilation"),
             lambda s, a: _ops().dilate(a, s.axes, s.dilation))
UnDilate = _op("UnDilate", ("axes", "dilation"),
               lambda s, a: _ops().undilate(a, s.axes, s.dilation))
Conv = _op("Conv", ("stride", "padding"),
           lambda s, a, b: _ops().conv(a, b, s.stride, s.padding),
           defaults={"stride": 1, "padding": 0},
           doc="needle's conv: NHWC input, (K, K, C_in, C_out) weight.")
GetItem = _op("GetItem", ("idxs",), lambda s, a: a[s.idxs], doc="``a[idxs]``.")
Stack = _op("Stack", ("axis",), lambda s, *xs: _ops()._stack(list(xs), s.axis),
            doc="Stacks Tensors along a new axis ``axis``.", base=_Composite)

__all__ = [
    "EWiseAdd", "AddScalar", "EWiseMul", "MulScalar", "EWisePow", "PowerScalar", "EWiseDiv",
    "DivScalar", "Negate", "MatMul", "Transpose", "Reshape", "BroadcastTo", "Summation", "Log",
    "Exp", "ReLU", "Tanh", "LogSoftmax", "LogSumExp", "Flip", "Dilate", "UnDilate", "Conv",
    "GetItem", "Stack",
]
