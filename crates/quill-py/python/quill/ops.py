"""needle's ``ops``: differentiable functions of Tensors, each one quill op (or a few)."""
from ._native import Tensor, stack as _stack, conv2d as _conv2d


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


def log(a):
    return a.log()


def exp(a):
    return a.exp()


def relu(a):
    return a.relu()


def tanh(a):
    return a.tanh()


def sigmoid(a):
    return a.sigmoid()


def sqrt(a):
    return a.sqrt()


def logsumexp(a, axes=None):
    return a.logsumexp(axes)


def stack(args, axis):
    return _stack(list(args), axis)


def split(a, axis):
    return tuple(a.split(axis))


def flip(a, axes):
    return a.flip(list(axes))


def maximum(a, b):
    return a.maximum(b)


def conv(a, b, stride=1, padding=0):
    """needle's conv: ``a`` NHWC, ``b`` (K, K, C_in, C_out); returns NHWC."""
    x = a.permute([0, 3, 1, 2])
    w = b.permute([3, 2, 0, 1])
    return _conv2d(x, w, None, stride, padding).permute([0, 2, 3, 1])
