"""needle's ``ops``: differentiable functions of Tensors, each one quill op (or a few). Besides
needle's own names, one function per op of quill's table (``exp``, ``relu``, ``maximum``,
``atan2``, ...), made at the end of this file."""
from . import _optable
from .autograd import Op, TensorOp, TensorTuple, TensorTupleOp  # noqa: F401 - needle's names
from ._needle_ops import *  # noqa: F401,F403 - needle's op classes (EWiseAdd, ...)
from ._native import Tensor, stack as _stack_native, conv as _conv, dilate as _dilate
from ._native import undilate as _undilate, pad as _pad
from ._native import scaled_dot_product_attention as _sdpa


def add(a, b):
    return a + b


def add_scalar(a, scalar):
    return a + scalar


def multiply(a, b):
    return a * b


def mul_scalar(a, scalar):
    return a * scalar


def power_scalar(a, scalar):
    return a ** scalar


def elementwise_pow(a, b):
    return a ** b


def power(a, b):
    """needle's ``power``: ``a ** b`` elementwise, both Tensors (``EWisePow``)."""
    return a ** b


def divide(a, b):
    return a / b


def divide_scalar(a, scalar):
    return a / scalar


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
    if len(a.shape) != 2:
        raise ValueError(f"logsoftmax: needle's op takes a 2-D (batch, classes) Tensor, got "
                         f"shape {tuple(a.shape)}; use Tensor.log_softmax(axis) otherwise")
    return a.log_softmax(1)


def logsoftmax(a):
    """needle's ``logsoftmax``: ``a - logsumexp(a)`` over axis 1 of a (batch, classes) Tensor,
    by quill's fused log_softmax; one graph node (``LogSoftmax``), differentiable to any
    order."""
    if len(a.shape) != 2:
        _logsoftmax(a)  # raises the shape error
    return LogSoftmax()(a)


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
