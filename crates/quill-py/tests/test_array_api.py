"""quill.array_api against NumPy on the functions it covers: values, shapes and dtypes."""
import numpy as np
import pytest

import quill.array_api as xp
from quill.backend_ndarray import NDArray


def q(a):
    return NDArray(np.asarray(a))


def same(got, want, rtol=1e-6):
    want = np.asarray(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype.name, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, equal_nan=True)


def test_namespace_and_creation():
    a = q(np.arange(6.0).reshape(2, 3))
    assert a.__array_namespace__() is xp
    same(xp.arange(5), np.arange(5))
    same(xp.arange(1.0, 2.0, 0.25), np.arange(1.0, 2.0, 0.25))
    same(xp.linspace(0, 1, num=5), np.linspace(0, 1, 5))
    same(xp.linspace(0, 1, num=4, endpoint=False), np.linspace(0, 1, 4, endpoint=False))
    same(xp.eye(3, 4, k=1), np.eye(3, 4, k=1))
    same(xp.full((2, 2), 7), np.full((2, 2), 7))
    same(xp.zeros((3,), dtype=xp.float32), np.zeros(3, np.float32))
    same(xp.ones_like(a), np.ones((2, 3)))
    same(xp.asarray([1.5, 2.5]), np.asarray([1.5, 2.5]))


@pytest.mark.parametrize("name", ["abs", "negative", "exp", "log1p", "sqrt", "sin", "cos",
                                  "tanh", "floor", "ceil", "round", "trunc", "square", "sign",
                                  "isnan", "isfinite", "log10"])
def test_unary(name):
    x = np.array([[0.25, 1.5, 2.5], [3.0, 0.5, 4.75]])
    same(getattr(xp, name)(q(x)), getattr(np, name)(x))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "pow", "maximum",
                                  "minimum", "remainder", "atan2", "equal", "less",
                                  "greater_equal", "floor_divide"])
def test_binary_with_broadcasting(name):
    a = np.array([[1.0, -2.0, 3.5], [4.0, 5.5, -6.0]])
    b = np.array([1.5, 2.0, -0.5])
    same(getattr(xp, name)(q(a), q(b)), getattr(np, name)(a, b))


def test_reductions_and_manipulation():
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    for name in ["sum", "prod", "max", "min", "mean"]:
        for axis in [None, 1, (0, 2)]:
            same(getattr(xp, name)(q(x), axis=axis, keepdims=True),
                 getattr(np, name)(x, axis=axis, keepdims=True), rtol=1e-9)
    same(xp.var(q(x), axis=1, correction=1), np.var(x, axis=1, ddof=1), rtol=1e-9)
    same(xp.std(q(x)), np.std(x), rtol=1e-9)
    same(xp.argmax(q(x), axis=2), np.argmax(x, axis=2))
    same(xp.permute_dims(q(x), (2, 0, 1)), np.transpose(x, (2, 0, 1)))
    same(xp.expand_dims(q(x), axis=1), np.expand_dims(x, 1))
    same(xp.squeeze(q(x[:, :1]), axis=1), np.squeeze(x[:, :1], 1))
    same(xp.flip(q(x), axis=(0, 2)), np.flip(x, (0, 2)))
    same(xp.concat([q(x), q(x)], axis=1), np.concatenate([x, x], 1))
    same(xp.stack([q(x), q(x)], axis=0), np.stack([x, x]))
    same(xp.matmul(q(x), xp.matrix_transpose(q(x))), x @ np.swapaxes(x, -1, -2), rtol=1e-9)
    same(xp.vecdot(q(x), q(x)), (x * x).sum(-1), rtol=1e-9)
    same(xp.where(q(x > 0), q(x), q(np.zeros(1))), np.where(x > 0, x, 0.0))
    same(xp.clip(q(x), min=-0.5, max=0.5), np.clip(x, -0.5, 0.5))
    same(xp.astype(q(x), xp.int32), x.astype(np.int32))
