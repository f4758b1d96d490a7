"""needle's ``nn``: modules written over quill Tensors (every op runs in Rust); the sequence
and Transformer modules live in ``nn_sequence`` and are re-exported here."""
import numpy as np

from . import init
from ._native import Tensor, batch_norm2d as _batch_norm2d, check_arg as _check, cross_entropy as _cross_entropy
from ._native import conv2d as _conv2d, layer_norm as _layer_norm, linear as _linear


class Parameter(Tensor):
    """A Tensor that a Module reports from ``parameters()``."""


def _unpack_params(value):
    if isinstance(value, Parameter):
        return [value]
    if isinstance(value, Module):
        return value.parameters()
    if isinstance(value, dict):
        return [p for v in value.values() for p in _unpack_params(v)]
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _unpack_params(v)]
    return []


def _child_modules(value):
    if isinstance(value, Module):
        return [value] + value._children()
    if isinstance(value, dict):
        return [m for v in value.values() for m in _child_modules(v)]
    if isinstance(value, (list, tuple)):
        return [m for v in value for m in _child_modules(v)]
    return []


class Module:
    def __init__(self):
        self.training = True

    def parameters(self):
        return _unpack_params(self.__dict__)

    def _children(self):
        return _child_modules(self.__dict__)

    def eval(self):
        self.training = False
        for m in self._children():
            m.training = False

    def train(self):
        self.training = True
        for m in self._children():
            m.training = True

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class Identity(Module):
    def forward(self, x):
        return x


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype="float32"):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(
            init.kaiming_uniform(in_features, out_features, device=device, dtype=dtype)
        )
        # (out_features,), as PyTorch's and needle's hw2 tests expect; drawn as needle draws
        # it (kaiming_uniform(out_features, 1)), so seeded code gets needle's numbers.
        self.bias = (
            Parameter(
                init.kaiming_uniform(out_features, 1, device=device, dtype=dtype).reshape(
                    (out_features,)
                )
            )
            if bias
            else None
        )

    def forward(self, X):
        # quill's Rust Linear over these very parameters (one matmul and one add in its graph).
        return _linear(X, self.weight, self.bias)


class Flatten(Module):
    def forward(self, X):
        return X.reshape((X.shape[0], -1))


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x):
        return x.sigmoid()


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        self.modules = modules

    def forward(self, x):
        mods, i = self.modules, 0
        while i < len(mods):
            m = mods[i]
            # A batch norm followed by a ReLU runs as quill's fused op (the same values, one
            # pass); every other module is called as it is.
            if (type(m) in (BatchNorm1d, BatchNorm2d) and i + 1 < len(mods)
                    and type(mods[i + 1]) is ReLU):
                x = m._forward(x, relu=True)
                i += 2
                continue
            x = m(x)
            i += 1
        return x


class SoftmaxLoss(Module):
    """Mean cross-entropy of logits (N, C) against integer labels (N): quill's fused loss."""

    def forward(self, logits, y):
        return _cross_entropy(logits, y)


def _check_norm(op, dim, eps, momentum=None):
    _check("size", op, "dim", dim)
    _check("positive", op, "eps", eps)
    if momentum is not None:
        _check("probability", op, "momentum", momentum)


class BatchNorm1d(Module):
    """Batch normalisation of (N, C) input per feature, run by quill's fused op. As needle's,
    the running variance takes the biased batch variance (PyTorch's takes the unbiased one);
    eval normalises with the running statistics."""

    def __init__(self, dim, eps=1e-5, momentum=0.1, device=None, dtype="float32"):
        super().__init__()
        _check_norm("BatchNorm1d", dim, eps, momentum)
        self.dim, self.eps, self.momentum = dim, eps, momentum
        self.weight = Parameter(init.ones(dim, device=device, dtype=dtype))
        self.bias = Parameter(init.zeros(dim, device=device, dtype=dtype))
        self.running_mean = init.zeros(dim, device=device, dtype=dtype)
        self.running_var = init.ones(dim, device=device, dtype=dtype)

    def forward(self, x):
        return self._forward(x)

    def _forward(self, x, relu=False):
        if len(x.shape) != 2 or x.shape[1] != self.dim:
            raise ValueError(f"BatchNorm1d: expected input of shape (N, {self.dim}), got "
                             f"{tuple(x.shape)}")
        if self.training and x.shape[0] == 0:
            # Batch statistics of nothing are NaN, and they would poison the running ones.
            raise ValueError(f"BatchNorm1d: cannot train on an empty batch (input shape "
                             f"{tuple(x.shape)}): batch statistics need at least one value "
                             f"per channel")
        return _batch_norm2d(x, self.weight, self.bias, self.running_mean, self.running_var,
                             self.eps, self.momentum, self.training, False, relu)


class BatchNorm2d(Module):
    """Batch normalisation of NCHW input per channel (needle hw4's BatchNorm2d), run by quill's
    fused op. Unlike this file's BatchNorm1d (needle's biased running variance), the running
    variance is updated with the unbiased batch variance, as PyTorch."""

    def __init__(self, dim, eps=1e-5, momentum=0.1, device=None, dtype="float32"):
        super().__init__()
        _check_norm("BatchNorm2d", dim, eps, momentum)
        self.dim, self.eps, self.momentum = dim, eps, momentum
        self.weight = Parameter(init.ones(dim, device=device, dtype=dtype))
        self.bias = Parameter(init.zeros(dim, device=device, dtype=dtype))
        self.running_mean = init.zeros(dim, device=device, dtype=dtype)
        self.running_var = init.ones(dim, device=device, dtype=dtype)

    def forward(self, x):
        return self._forward(x)

    def _forward(self, x, relu=False):
        return _batch_norm2d(x, self.weight, self.bias, self.running_mean, self.running_var,
                             self.eps, self.momentum, self.training, True, relu)


class LayerNorm1d(Module):
    def __init__(self, dim, eps=1e-5, device=None, dtype="float32"):
        super().__init__()
        _check_norm("LayerNorm1d", dim, eps)
        self.dim, self.eps = dim, eps
        self.weight = Parameter(init.ones(dim, device=device, dtype=dtype))
        self.bias = Parameter(init.zeros(dim, device=device, dtype=dtype))

    def forward(self, x):
        # quill's Rust LayerNorm (its fused kernel) over these very parameters.
        if len(x.shape) != 2 or x.shape[1] != self.dim:
            raise ValueError(f"LayerNorm1d: expected input of shape (N, {self.dim}), got "
                             f"{tuple(x.shape)}")
        return _layer_norm(x, self.weight, self.bias, self.eps)


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        _check("probability", "Dropout", "p", p)
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.p == 1:
            # Every element dropped (PyTorch's p = 1): no mask, no division by 1 - p.
            return x * 0.0
        # needle's draws (np.random.rand over the shape, kept where <= 1 - p), scaled by
        # 1 / (1 - p) in the mask itself: one multiply in the graph instead of two.
        keep = 1 - self.p
        mask = (np.random.rand(*x.shape) <= keep).astype(x.dtype) * np.asarray(1 / keep, x.dtype)
        return x * Tensor(mask, device=x.device, requires_grad=False)


class Residual(Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


class Conv(Module):
    """2-D convolution on NCHW input with 'same' padding for odd kernels (needle's Conv)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, bias=True,
                 device=None, dtype="float32"):
        super().__init__()
        k = kernel_size[0] if isinstance(kernel_size, tuple) else kernel_size
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = k, stride, k // 2
        fan_in, fan_out = in_channels * k * k, out_channels * k * k
        self.weight = Parameter(
            init.kaiming_uniform(fan_in, fan_out, shape=(k, k, in_channels, out_channels),
                                 device=device, dtype=dtype)
        )
        if bias:
            bound = 1.0 / np.sqrt(fan_in)
            self.bias = Parameter(init.rand(out_channels, low=-bound, high=bound,
                                            device=device, dtype=dtype))
        else:
            self.bias = None

    def forward(self, x):
        # quill's Rust Conv2d over these very parameters (the weight read through an
        # (out, in, k, k) view of needle's (k, k, in, out) layout).
        return _conv2d(x, self.weight, self.bias, self.stride, self.padding)


# needle hw4's sequence and Transformer modules (run by quill's Rust layers).
from .nn_sequence import *  # noqa: E402,F401,F403
