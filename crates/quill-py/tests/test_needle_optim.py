"""needle's optimizers and BatchNorm1d as windows onto quill's Rust ones (issue 49, item 4):
every step against NumPy references written from needle's documented rules (SGD's
``u = m * u + (1 - m) * g`` from zero, Adam's L2 decay and bias correction, BatchNorm1d's
biased running variance), with learning rates changed between steps, parameters without a
gradient skipped and ``.grad`` left untouched."""
import numpy as np
import pytest

import quill as ndl
from quill import nn, optim


def params_and_grads(rng, dtype):
    shapes = [(3, 4), (4,), (2, 2)]
    ps = [nn.Parameter(ndl.Tensor(rng.normal(size=s).astype(dtype))) for s in shapes]
    return ps


def set_grads(ps, rng, skip=None):
    gs = []
    for i, p in enumerate(ps):
        if i == skip:
            p.grad = None
            gs.append(None)
            continue
        g = rng.normal(size=p.shape).astype(p.numpy().dtype)
        p.grad = ndl.Tensor(g, requires_grad=False)
        gs.append(g.astype(np.float64))
    return gs


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("momentum, wd", [(0.0, 0.0), (0.9, 0.0), (0.5, 0.01)])
def test_sgd_is_needles_rule(dtype, tol, momentum, wd):
    rng = np.random.default_rng(0)
    ps = params_and_grads(rng, dtype)
    want = [p.numpy().astype(np.float64) for p in ps]
    u = [np.zeros_like(w) for w in want]
    opt = optim.SGD(ps, lr=0.1, momentum=momentum, weight_decay=wd)
    for step in range(5):
        gs = set_grads(ps, rng, skip=1 if step == 2 else None)
        before = [None if p.grad is None else p.grad.numpy().copy() for p in ps]
        if step == 3:
            opt.lr = 0.05       # a schedule changes lr between steps
        opt.step()
        for i, g in enumerate(gs):
            if g is None:
                continue
            u[i] = momentum * u[i] + (1 - momentum) * (g + wd * want[i])
            want[i] = want[i] - opt.lr * u[i]
        for i, p in enumerate(ps):
            np.testing.assert_allclose(p.numpy(), want[i], rtol=tol, atol=tol)
            if before[i] is not None:
                np.testing.assert_array_equal(p.grad.numpy(), before[i])  # grad untouched


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_adam_is_needles_rule(wd):
    rng = np.random.default_rng(1)
    ps = params_and_grads(rng, np.float64)
    want = [p.numpy() for p in ps]
    m = [np.zeros_like(w) for w in want]
    v = [np.zeros_like(w) for w in want]
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 0.01
    opt = optim.Adam(ps, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    for t in range(1, 6):
        gs = set_grads(ps, rng)
        opt.step()
        assert opt.t == t
        for i, g in enumerate(gs):
            g = g + wd * want[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mh, vh = m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)
            want[i] = want[i] - lr * mh / (vh ** 0.5 + eps)
        for i, p in enumerate(ps):
            np.testing.assert_allclose(p.numpy(), want[i], rtol=1e-12, atol=1e-12)


def test_optimizer_errors():
    p = nn.Parameter(ndl.Tensor(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="lr"):
        optim.SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="momentum"):
        optim.SGD([p], lr=0.1, momentum=1.5)
    with pytest.raises(ValueError):
        optim.SGD([p, p], lr=0.1)    # a parameter listed twice
    with pytest.raises(ValueError, match="beta1"):
        optim.Adam([p], beta1=1.0)


def test_batchnorm1d_uses_the_biased_running_variance():
    rng = np.random.default_rng(2)
    bn = nn.BatchNorm1d(3, dtype="float64")
    bn.weight.data = rng.uniform(0.5, 2.0, 3)
    bn.bias.data = rng.normal(size=3)
    w, b = bn.weight.numpy(), bn.bias.numpy()
    rm, rv = np.zeros(3), np.ones(3)
    for _ in range(3):
        x = rng.normal(size=(8, 3)) * [1.0, 3.0, 0.5] + [0.0, 2.0, -1.0]
        y = bn(ndl.Tensor(x))
        mean, var = x.mean(0), x.var(0)
        np.testing.assert_allclose(y.numpy(), w * (x - mean) / np.sqrt(var + 1e-5) + b,
                                   rtol=1e-10, atol=1e-12)
        rm, rv = 0.9 * rm + 0.1 * mean, 0.9 * rv + 0.1 * var      # biased: needle's
        np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-12)
        np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-12)
    bn.eval()
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(bn(ndl.Tensor(x)).numpy(), w * (x - rm) / np.sqrt(rv + 1e-5) + b,
                               rtol=1e-10, atol=1e-12)


def test_batchnorm1d_gradients_and_mixed_dtypes():
    rng = np.random.default_rng(3)
    bn = nn.BatchNorm1d(4)                      # float32 parameters
    x = ndl.Tensor(rng.normal(size=(6, 4)))     # float64 data: computes in float64
    y = bn(x)
    assert y.dtype == "float64"
    (y * ndl.Tensor(rng.normal(size=(6, 4)))).sum().backward()
    assert bn.weight.grad.shape == (4,) and x.grad.shape == (6, 4)
    # The input gradient of batch norm sums to zero per feature.
    np.testing.assert_allclose(x.grad.numpy().sum(0), 0, atol=1e-10)
    with pytest.raises(ValueError, match="BatchNorm1d"):
        bn(ndl.Tensor(np.ones((2, 3), np.float32)))


def test_clip_grad_norm_is_the_rust_one():
    from quill._native import clip_grad_norm
    rng = np.random.default_rng(4)
    ps = params_and_grads(rng, np.float64)
    gs = set_grads(ps, rng)
    norm = np.sqrt(sum((g ** 2).sum() for g in gs))
    assert clip_grad_norm(ps, 1e9) == pytest.approx(norm)          # nothing to clip
    assert clip_grad_norm(ps, 0.5) == pytest.approx(norm)          # the norm before
    for p, g in zip(ps, gs):
        np.testing.assert_allclose(p.grad.numpy(), g * 0.5 / (norm + 1e-6), rtol=1e-12)
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm(ps, -1.0)
