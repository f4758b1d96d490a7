"""needle's ``ops``: differentiable functions of Tensors, each one quill op (or a few). Besides
needle's own names, one function per op of quill's table (``exp``, ``relu``, ``maximum``,
``atan2``, ...), made at the end of this file."""
import numpy as np

from . import _optable
from .autograd import Op, TensorOp, TensorTuple, TensorTupleOp  # noqa: F401 - needle's names
from ._needle_ops import *  # noqa: F401,F403 - needle's op classes (EWiseAdd, ...)
from ._native import Tensor, stack as _stack_native, conv as _conv, dilate as _dilate
from ._native import undilate as _undilate, pad as _pad
from ._native import scaled_dot_product_attention as _sdpa


def add(a, b):
    return a + b


def _scalar(x):
    # needle passes NumPy values as scalars too (``divide_scalar(a, np.random.randn(1))``):
    # a one-element array is that number.
    if isinstance(x, (np.ndarray, np.generic)) and x.size == 1:
        return x.item()
    return x


def add_scalar(a, scalar):
    return a + _scalar(scalar)


def multiply(a, b):
    return a * b


def mul_scalar(a, scalar):
    return a * _scalar(scalar)


def power_scalar(a, scalar):
    return a ** _scalar(scalar)


def elementwise_pow(a, b):
    return a ** b


def power(a, b):
    """needle's ``power``: ``a ** b`` elementwise, both Tensors (``EWisePow``)."""
    return a ** b


def divide(a, b):
    return a / b


def divide_scalar(a, scalar):
    return a / _scalar(scalar)


def negate(a):
    return -a


def transpose(a, axes=None):
    return a.transpose(tuple(axes) if axes is not None else None)


def reshape(a, shape):
    return a.reshape(tuple(shape))


def broadcast_to(a, shape):
    return a.broadcast_to(tuple(shape))


def summation(a, axes=None, keepdims=False):
    return a.sum(axes, keepdims)


def matmul(a, b):
    return a @ b


def _logsumexp(a, axes=None):
    return a.logsumexp(axes)


def logsumexp(a, axes=None):
    """needle's ``logsumexp`` over ``axes`` (all when None): one graph node (``LogSumExp``)
    over quill's stable logsumexp, differentiable to any order."""
    return LogSumExp(axes)(a)


def _logsoftmax(a):
    if len(a.shape) == 0:
        raise ValueError("logsoftmax: needs at least one axis (the classes, last), got a 0-D "
                         "Tensor")
    return a.log_softmax(len(a.shape) - 1)


def logsoftmax(a):
    """needle's ``logsoftmax``: ``a - logsumexp(a)`` over the last axis (the classes: axis 1
    of needle's (batch, classes) Tensor), by quill's fused log_softmax; one graph node
    (``LogSoftmax``), differentiable to any order."""
    if len(a.shape) == 0:
        _logsoftmax(a)  # raises the shape error
    return LogSoftmax()(a)


def get_item(a, idxs):
    """needle's ``get_item``: ``a[idxs]`` (ints and slices; quill also takes index arrays),
    a view whose gradient scatters back into ``a``'s shape."""
    return a[idxs]


def _stack(args, axis):
    return _stack_native(list(args), axis)


def stack(args, axis):
    """needle's ``stack``: one graph node (``Stack``) whose inputs are the stacked Tensors."""
    return Stack(axis)(*args)


def split(a, axis):
    """needle's ``split``: the slices of ``a`` along ``axis`` (axis removed), a TensorTuple."""
    return TensorTuple(a.split(axis))


def make_tuple(*args):
    """needle's ``make_tuple``: a TensorTuple of the given Tensors."""
    return TensorTuple(args)


def tuple_get_item(value, index):
    """needle's ``tuple_get_item``: element ``index`` of a TensorTuple."""
    return value[index]


def flip(a, axes):
    return a.flip(list(axes))


def conv(a, b, stride=1, padding=0):
    """needle's conv: ``a`` NHWC, ``b`` (K, K, C_in, C_out) (kh != kw allowed); returns
    NHWC. One quill op (im2col forward, needle's backward), differentiable to any order."""
    return _conv(a, b, stride, padding)


def dilate(a, axes, dilation):
    """``dilation`` zeros after every element along each of ``axes``."""
    return _dilate(a, axes, dilation)


def undilate(a, axes, dilation):
    """Every ``(dilation + 1)``-th element along each of ``axes``: dilate's inverse."""
    return _undilate(a, axes, dilation)


def pad(a, axes):
    """Zero padding (not a needle op): ``axes`` one ``(before, after)`` pair per axis, as
    ``NDArray.pad``."""
    return _pad(a, [tuple(p) for p in axes])


def scaled_dot_product_attention(q, k, v, causal=False, scale=None):
    """Fused ``softmax(scale * q k^T + mask) v`` (not a needle op): q (..., Lq, D), k
    (..., Lk, D), v (..., Lk, Dv); ``scale`` defaults to 1/sqrt(D); ``causal`` hides key j
    from query i when j > i. The probabilities are never stored (the backward recomputes
    them blockwise)."""
    return _sdpa(q, k, v, causal, scale)


def _unary(name):
    def f(a):
        return a.unary(name)

    f.__name__ = name
    return f


def _binary(name):
    def f(a, b):
        return a.binary(name, b)

    f.__name__ = name
    return f


for _op in _optable.UNARY:
    globals().setdefault(_op, _unary(_op))
for _op in _optable.BINARY:
    globals().setdefault(_op, _binary(_op))


def _needle_gradient(out_grad, node):
    """``f.gradient(out_grad, node)`` for a needle function ``f``: the gradient of each input
    of ``node`` (made by ``f``), as a tuple: the same as ``node.op.gradient_as_tuple``."""
    return tuple(node.op.gradient_as_tuple(out_grad, node))


def _attach_gradients():
    # needle's tests call ``ndl.tanh.gradient(c, out)``: the function stands for its op.
    import types

    for name, f in list(globals().items()):
        if isinstance(f, types.FunctionType) and not name.startswith("_") \
                and f.__module__ == __name__:
            f.gradient = _needle_gradient
            f.gradient_as_tuple = _needle_gradient


_attach_gradients()
