"""needle's function names that code written for needle calls: ``ops.power`` (EWisePow) and
``ops.logsoftmax`` (LogSoftmax over axis 1), checked against NumPy values and gradients."""
import numpy as np
import pytest

import quill as ndl


def test_power_values_and_gradients():
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2.0, size=(3, 4))
    b = rng.uniform(-1.5, 1.5, size=(3, 4))
    ta = ndl.Tensor(a, dtype="float64", requires_grad=True)
    tb = ndl.Tensor(b, dtype="float64", requires_grad=True)
    out = ndl.power(ta, tb)
    np.testing.assert_allclose(out.numpy(), a ** b, rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), b * a ** (b - 1), rtol=1e-10)
    np.testing.assert_allclose(tb.grad.numpy(), a ** b * np.log(a), rtol=1e-10)
    assert ndl.ops.power is ndl.power


def test_logsoftmax_values_and_gradients():
    rng = np.random.default_rng(2)
    x = rng.normal(scale=3.0, size=(5, 7))
    w = rng.normal(size=(5, 7))
    t = ndl.Tensor(x, dtype="float64", requires_grad=True)
    y = ndl.logsoftmax(t)
    m = x.max(1, keepdims=True)
    want = x - (m + np.log(np.exp(x - m).sum(1, keepdims=True)))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-12)
    (y * ndl.Tensor(w, dtype="float64")).sum().backward()
    soft = np.exp(want)
    np.testing.assert_allclose(t.grad.numpy(), w - soft * w.sum(1, keepdims=True), atol=1e-12)
    # Any rank: over the last axis (hw4's tests compare with torch.log_softmax(axis=-1)),
    # through a permuted (non-contiguous) input.
    x3 = rng.normal(size=(4, 3, 5)).transpose(2, 0, 1)
    t3 = ndl.Tensor(x3, dtype="float64")
    m3 = x3.max(-1, keepdims=True)
    want3 = x3 - (m3 + np.log(np.exp(x3 - m3).sum(-1, keepdims=True)))
    np.testing.assert_allclose(ndl.logsoftmax(t3).numpy(), want3, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ndl.logsoftmax(ndl.Tensor(np.ones(3))).numpy(),
                               np.full(3, -np.log(3.0)), rtol=1e-12)
    with pytest.raises(ValueError, match="logsoftmax: needs at least one axis"):
        ndl.logsoftmax(ndl.Tensor(np.float64(1.0)))
