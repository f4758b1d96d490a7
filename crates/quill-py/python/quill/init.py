"""needle's ``init``: tensors from NumPy's global RNG (so ``np.random.seed`` reproduces a
run, as in needle) and the Xavier / Kaiming initialisers with PyTorch's gains."""
import math

import numpy as np

from ._native import Tensor


def _t(a, device=None, dtype="float32", requires_grad=False):
    return Tensor(np.asarray(a), device=device, dtype=dtype, requires_grad=requires_grad)


def rand(*shape, low=0.0, high=1.0, device=None, dtype="float32", requires_grad=False):
    return _t(np.random.rand(*shape) * (high - low) + low, device, dtype, requires_grad)


def randn(*shape, mean=0.0, std=1.0, device=None, dtype="float32", requires_grad=False):
    return _t(np.random.randn(*shape) * std + mean, device, dtype, requires_grad)


def constant(*shape, c=1.0, device=None, dtype="float32", requires_grad=False):
    return _t(np.full(shape, c), device, dtype, requires_grad)


def ones(*shape, device=None, dtype="float32", requires_grad=False):
    return constant(*shape, c=1.0, device=device, dtype=dtype, requires_grad=requires_grad)


def zeros(*shape, device=None, dtype="float32", requires_grad=False):
    return constant(*shape, c=0.0, device=device, dtype=dtype, requires_grad=requires_grad)


def randb(*shape, p=0.5, device=None, dtype="bool", requires_grad=False):
    return _t(np.random.rand(*shape) <= p, device, dtype, requires_grad)


def one_hot(n, i, device=None, dtype="float32", requires_grad=False):
    idx = np.asarray(i.numpy() if isinstance(i, Tensor) else i).astype(np.int64)
    return _t(np.eye(n)[idx], device, dtype, requires_grad)


def zeros_like(array, *, device=None, requires_grad=False):
    return zeros(*array.shape, dtype=array.dtype, device=device, requires_grad=requires_grad)


def ones_like(array, *, device=None, requires_grad=False):
    return ones(*array.shape, dtype=array.dtype, device=device, requires_grad=requires_grad)


def xavier_uniform(fan_in, fan_out, gain=1.0, **kwargs):
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return rand(fan_in, fan_out, low=-a, high=a, **kwargs)


def xavier_normal(fan_in, fan_out, gain=1.0, **kwargs):
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return randn(fan_in, fan_out, std=std, **kwargs)


def kaiming_uniform(fan_in, fan_out, shape=None, nonlinearity="relu", **kwargs):
    assert nonlinearity == "relu", "only relu is supported"
    bound = math.sqrt(2.0) * math.sqrt(3.0 / fan_in)
    shape = shape if shape is not None else (fan_in, fan_out)
    return rand(*shape, low=-bound, high=bound, **kwargs)


def kaiming_normal(fan_in, fan_out, nonlinearity="relu", **kwargs):
    assert nonlinearity == "relu", "only relu is supported"
    return randn(fan_in, fan_out, std=math.sqrt(2.0) / math.sqrt(fan_in), **kwargs)
