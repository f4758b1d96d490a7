"""needle hw4's ops in ``quill.ops`` (conv, dilate, undilate, pad, flip, stack, split, tanh,
relu, sigmoid, logsumexp) and ``NDArray.pad`` / ``flip``: values against NumPy references
(a direct convolution, ``np.pad``, slicing), gradients against central differences of those
references in float64, on non-contiguous inputs; and the errors bad input raises."""
import numpy as np
import pytest

import quill as ndl
import quill.backend_ndarray as nd
from quill import ops

EPS = 1e-6


def T(x, requires_grad=True):
    return ndl.Tensor(np.asarray(x, np.float64), dtype="float64", requires_grad=requires_grad)


def numeric_grad(f, x):
    """d f(x) / dx by central differences (f returns a scalar)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += EPS
        xm[i] -= EPS
        g[i] = (f(xp) - f(xm)) / (2 * EPS)
    return g


def check_grads(fq, fnp, inputs, views=None, seed=0):
    """fq (on Tensors) equals fnp (on arrays); every input's gradient matches central
    differences of sum(fnp(...) * w). ``views[i]`` maps the leaf Tensor to the operand
    actually passed (a non-contiguous view); the NumPy side gets the same view."""
    inputs = [np.asarray(x, np.float64) for x in inputs]
    views = views or [None] * len(inputs)
    vq = [v[0] if v else (lambda t: t) for v in views]
    vn = [v[1] if v else (lambda a: a) for v in views]
    leaves = [T(x) for x in inputs]
    out = fq(*[v(t) for v, t in zip(vq, leaves)])
    want = fnp(*[v(x) for v, x in zip(vn, inputs)])
    assert out.shape == want.shape
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    w = np.random.default_rng(seed).standard_normal(want.shape)
    (out * T(w, requires_grad=False)).sum().backward()
    for k, (t, x) in enumerate(zip(leaves, inputs)):

        def f(xk, k=k):
            args = list(inputs)
            args[k] = xk
            return float((fnp(*[v(a) for v, a in zip(vn, args)]) * w).sum())

        np.testing.assert_allclose(t.grad.numpy(), numeric_grad(f, x), rtol=1e-5, atol=1e-7)


def np_conv(x, w, stride=1, padding=0):
    """Direct NHWC convolution: for each kernel tap, a strided slice times the weight."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    ho = (h + 2 * padding - kh) // stride + 1
    wo = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, ho, wo, o))
    for i in range(kh):
        for j in range(kw):
            rows = slice(i, i + stride * (ho - 1) + 1, stride)
            cols = slice(j, j + stride * (wo - 1) + 1, stride)
            out += xp[:, rows, cols] @ w[i, j]
    return out


def np_dilate(a, axes, d):
    shape = list(a.shape)
    for ax in axes:
        shape[ax] *= d + 1
    out = np.zeros(shape, a.dtype)
    out[tuple(slice(None, None, d + 1) if i in axes else slice(None) for i in range(a.ndim))] = a
    return out


def np_undilate(a, axes, d):
    return a[tuple(slice(None, None, d + 1) if i in axes else slice(None) for i in range(a.ndim))]


CONV_CASES = [
    ((2, 5, 6, 3), (3, 3, 3, 4), 1, 0),
    ((1, 6, 5, 2), (3, 2, 2, 3), 2, 1),
    ((1, 7, 7, 2), (2, 3, 2, 2), 3, 2),
    ((2, 4, 4, 1), (1, 1, 1, 3), 2, 0),
    ((1, 3, 3, 2), (5, 5, 2, 2), 1, 1),
]


@pytest.mark.parametrize("xs,ws,stride,padding", CONV_CASES)
def test_conv_matches_direct_convolution_and_differences(xs, ws, stride, padding):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    check_grads(
        lambda a, b: ops.conv(a, b, stride=stride, padding=padding),
        lambda a, b: np_conv(a, b, stride, padding),
        [x, w],
    )
    # float32 forward too.
    x32, w32 = ndl.Tensor(x.astype(np.float32)), ndl.Tensor(w.astype(np.float32))
    y32 = ops.conv(x32, w32, stride, padding)
    assert y32.dtype == "float32"
    np.testing.assert_allclose(y32.numpy(), np_conv(x, w, stride, padding), rtol=1e-4, atol=1e-4)


def test_conv_on_non_contiguous_views():
    rng = np.random.default_rng(2)
    # x drawn (W, N, C, 2H) and viewed as (N, 2H, W, C)[:, ::-2]; w drawn (Cout, kw, kh, Cin).
    x = rng.standard_normal((5, 2, 3, 8))
    w = rng.standard_normal((2, 2, 3, 3))
    xv = (lambda t: t.permute([1, 3, 0, 2])[:, ::-2], lambda a: a.transpose(1, 3, 0, 2)[:, ::-2])
    wv = (lambda t: t.permute([2, 1, 3, 0]), lambda a: a.transpose(2, 1, 3, 0))
    check_grads(
        lambda a, b: ops.conv(a, b, stride=2, padding=1),
        lambda a, b: np_conv(a, b, 2, 1),
        [x, w],
        views=[xv, wv],
    )


def test_conv_errors():
    x = ndl.Tensor(np.zeros((2, 5, 5, 3), np.float32))
    with pytest.raises(ValueError, match=r"Cin = 3 .* expects 4"):
        ops.conv(x, ndl.Tensor(np.zeros((3, 3, 4, 2), np.float32)))
    with pytest.raises(ValueError, match="rank 4"):
        ops.conv(x[0], ndl.Tensor(np.zeros((3, 3, 3, 2), np.float32)))
    with pytest.raises(ValueError, match="bigger than the input"):
        ops.conv(x, ndl.Tensor(np.zeros((8, 3, 3, 2), np.float32)), padding=1)
    with pytest.raises(ValueError, match="stride"):
        ops.conv(x, ndl.Tensor(np.zeros((3, 3, 3, 2), np.float32)), stride=0)


@pytest.mark.parametrize(
    "shape,axes,d",
    [((3, 4), (0,), 1), ((3, 4), (1, 0), 2), ((2, 3, 2), (1, 2), 1), ((4,), (0,), 0)],
)
def test_dilate_and_undilate(shape, axes, d):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape)
    check_grads(lambda a: ops.dilate(a, axes, d), lambda a: np_dilate(a, axes, d), [x])
    check_grads(lambda a: ops.undilate(a, axes, d), lambda a: np_undilate(a, axes, d), [x])
    # Through a reversed view.
    rev = (lambda t: t[::-1], lambda a: a[::-1])
    check_grads(lambda a: ops.dilate(a, axes, d), lambda a: np_dilate(a, axes, d), [x], views=[rev])
    np.testing.assert_array_equal(ops.undilate(ops.dilate(T(x), axes, d), axes, d).numpy(), x)


def test_dilate_errors():
    x = ndl.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(IndexError, match="axis 2"):
        ops.dilate(x, (2,), 1)
    with pytest.raises(ValueError, match="repeated"):
        ops.undilate(x, (0, -2), 1)


def test_pad_tensor_and_ndarray():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 2, 4))
    pads = ((1, 0), (2, 2), (0, 3))
    perm = (lambda t: t.permute([2, 0, 1]), lambda a: a.transpose(2, 0, 1))
    check_grads(lambda a: ops.pad(a, pads), lambda a: np.pad(a, pads), [x], views=[perm])
    # needle's NDArray.pad on a strided view.
    a = nd.NDArray(x.astype(np.float32)).permute((2, 0, 1))[::-1, :, ::-1]
    an = x.astype(np.float32).transpose(2, 0, 1)[::-1, :, ::-1]
    got = a.pad(pads)
    assert got.is_compact()
    np.testing.assert_array_equal(got.numpy(), np.pad(an, pads))
    with pytest.raises(ValueError, match="one pair per axis"):
        a.pad(((1, 1),))
    np.testing.assert_array_equal(a.flip((0, 2)).numpy(), np.flip(an, (0, 2)))


def test_flip_stack_split_and_activations():
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_grads(lambda a: ops.flip(a, (0, 1)), lambda a: np.flip(a, (0, 1)), [x])
    check_grads(lambda a, b: ops.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), [x, y])
    check_grads(
        lambda a: ops.split(a, 1)[2] * ops.split(a, 1)[0],
        lambda a: a[:, 2] * a[:, 0],
        [x],
    )
    check_grads(ops.tanh, np.tanh, [x])
    check_grads(ops.sigmoid, lambda a: 1 / (1 + np.exp(-a)), [x])
    check_grads(ops.relu, lambda a: np.maximum(a, 0), [x + np.sign(x) * 0.01])
    lse = lambda a, ax: np.log(np.exp(a).sum(axis=ax))  # noqa: E731
    check_grads(lambda a: ops.logsumexp(a, (1,)), lambda a: lse(a, 1), [x])
    check_grads(lambda a: ops.logsumexp(a), lambda a: lse(a, None), [x])
