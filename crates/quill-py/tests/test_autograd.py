"""quill.Tensor gradients against central finite differences of a NumPy reference, in float64.

Each check runs the op on float64 Tensors, compares the forward value with NumPy, seeds the
backward pass with random weights (loss = sum(out * w)), and compares every input's .grad with
the numerical derivative of sum(f_numpy(x) * w)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quill import Tensor
import quill.backend_ndarray as nd
from quill.backend_ndarray import NDArray
from quill._native import stack

EPS = 1e-6


def T(x, requires_grad=True):
    return Tensor(np.asarray(x, np.float64), dtype="float64", requires_grad=requires_grad)


def numeric_grad(f, x):
    """d sum(f(x)) / dx by central differences (f returns the weighted output)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += EPS
        xm[i] -= EPS
        g[i] = (f(xp) - f(xm)) / (2 * EPS)
    return g


def check(fq, fnp, *inputs, seed=0, rtol=1e-5, atol=1e-7, out_grad=False):
    """fq on Tensors and fnp on NumPy arrays compute the same function of `inputs`; check the
    value and the gradient of every input."""
    inputs = [np.asarray(x, np.float64) for x in inputs]
    ts = [T(x) for x in inputs]
    out = fq(*ts)
    want = np.asarray(fnp(*inputs), np.float64)
    assert out.shape == want.shape
    assert out.dtype == "float64"
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)

    w = np.random.default_rng(seed).standard_normal(want.shape)
    if out_grad:
        out.backward(T(w, requires_grad=False))
    else:
        (out * T(w, requires_grad=False)).sum().backward()

    for i, (t, x) in enumerate(zip(ts, inputs)):
        def weighted(xi, i=i):
            args = list(inputs)
            args[i] = xi
            return np.sum(np.asarray(fnp(*args)) * w)

        assert t.grad is not None, f"input {i} got no gradient"
        g = t.grad
        assert g.shape == x.shape, (g.shape, x.shape)
        assert g.dtype == "float64"
        np.testing.assert_allclose(g.numpy(), numeric_grad(weighted, x), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


def rnd(*shape, seed=1, lo=None):
    x = np.random.default_rng(seed).standard_normal(shape)
    if lo is not None:  # positive, at least lo
        x = np.abs(x) + lo
    return x


def away_from_zero(x, d=0.1):
    return x + d * np.sign(x) + (x == 0) * d


# ----------------------------------------------------------------------------------------------
# arithmetic


@pytest.mark.parametrize("sa, sb", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((4, 1, 3), (2, 1))])
def test_add_sub_broadcasting(sa, sb):
    check(lambda a, b: a + b, lambda a, b: a + b, rnd(*sa, seed=1), rnd(*sb, seed=2))
    check(lambda a, b: a - b, lambda a, b: a - b, rnd(*sa, seed=3), rnd(*sb, seed=4))


@pytest.mark.parametrize("sa, sb", [((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4))])
def test_mul_div(sa, sb):
    check(lambda a, b: a * b, lambda a, b: a * b, rnd(*sa, seed=1), rnd(*sb, seed=2))
    check(lambda a, b: a / b, lambda a, b: a / b, rnd(*sa, seed=3), rnd(*sb, seed=4, lo=0.5))


def test_scalar_arithmetic_both_sides():
    x = rnd(2, 3, seed=5, lo=0.5)
    check(lambda a: a + 2.0, lambda a: a + 2.0, x)
    check(lambda a: 3.0 - a, lambda a: 3.0 - a, x)
    check(lambda a: a * -1.5, lambda a: a * -1.5, x)
    check(lambda a: 2.0 / a, lambda a: 2.0 / a, x)
    check(lambda a: a / 4.0, lambda a: a / 4.0, x)
    check(lambda a: -a, lambda a: -a, x)


@pytest.mark.parametrize("p", [2, 3, 0.5, -1.5, 2.5, 0])
def test_power_scalar(p):
    x = rnd(3, 4, seed=6, lo=0.5)
    check(lambda a: a ** p, lambda a: a ** p, x)


def test_power_integer_exponent_negative_base():
    x = away_from_zero(rnd(3, 4, seed=7))
    check(lambda a: a ** 2, lambda a: a ** 2, x)
    check(lambda a: a ** 3, lambda a: a ** 3, x)


def test_power_elementwise():
    check(lambda a, b: a ** b, lambda a, b: a ** b, rnd(2, 3, seed=8, lo=0.5), rnd(2, 3, seed=9))


def test_input_used_twice_accumulates():
    x = rnd(2, 3, seed=10)
    check(lambda a: a * a + a, lambda a: a * a + a, x)
    check(lambda a, b: (a * b) * a - b / 2.0, lambda a, b: (a * b) * a - b / 2.0, x, rnd(3, seed=11))


# ----------------------------------------------------------------------------------------------
# matmul


@pytest.mark.parametrize(
    "sa, sb",
    [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,))],
)
def test_matmul(sa, sb):
    check(lambda a, b: a @ b, lambda a, b: a @ b, rnd(*sa, seed=1), rnd(*sb, seed=2))


def test_matmul_of_transposed_views():
    check(lambda a, b: a.transpose() @ b[::-1], lambda a, b: a.T @ b[::-1], rnd(4, 3, seed=3), rnd(4, 2, seed=4))


# ----------------------------------------------------------------------------------------------
# reductions and shapes


@pytest.mark.parametrize("axes", [None, 0, 1, -1, (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum(axes, keepdims):
    x = rnd(2, 3, 4, seed=12)
    check(lambda a: a.sum(axes, keepdims), lambda a: np.sum(a, axis=axes, keepdims=keepdims), x)


@pytest.mark.parametrize("axes", [None, 1, (0, 2)])
def test_mean_and_max(axes):
    x = rnd(2, 3, 4, seed=13)  # distinct values: max has one winner
    check(lambda a: a.mean(axes), lambda a: np.mean(a, axis=axes), x)
    check(lambda a: a.max(axes), lambda a: np.max(a, axis=axes), x)


def _logsumexp(x, axes=None, keepdims=False):
    m = np.max(x, axis=axes, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if keepdims:
        return out
    return np.squeeze(out, axis=axes) if axes is not None else out.reshape(())


@pytest.mark.parametrize("axes", [None, 0, 1, (0, 2), (1,)])
def test_logsumexp(axes):
    x = rnd(2, 3, 4, seed=14)
    check(lambda a: a.logsumexp(axes), lambda a: _logsumexp(a, axes), x)


def test_logsumexp_keepdims_and_large_values():
    x = rnd(3, 5, seed=15) * 10 + 1000.0  # exp would overflow without the max shift
    check(lambda a: a.logsumexp((1,), True), lambda a: _logsumexp(a, (1,), True), x)
    t = T(x)
    t.logsumexp(1).sum().backward()
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(t.grad.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-10)


@pytest.mark.parametrize("src, dst", [((3,), (2, 3)), ((2, 1), (2, 3)), ((1, 3, 1), (2, 3, 4)), ((3, 1), (2, 2, 3, 5))])
def test_broadcast_to(src, dst):
    check(lambda a: a.broadcast_to(dst), lambda a: np.broadcast_to(a, dst), rnd(*src, seed=16))


def test_broadcast_from_zero_dim():
    check(lambda a: a.reshape(()).broadcast_to((2, 3)), lambda a: np.broadcast_to(a.reshape(()), (2, 3)), rnd(1, seed=17))


@pytest.mark.parametrize("shape", [(6, 4), (4, -1), (24,), (2, 3, 2, 2), (1, 24, 1)])
def test_reshape(shape):
    check(lambda a: a.reshape(shape), lambda a: a.reshape(shape), rnd(2, 3, 4, seed=18))


def test_reshape_of_a_non_contiguous_view():
    check(lambda a: a.transpose((0, 2)).reshape((4, 6)), lambda a: np.swapaxes(a, 0, 2).reshape(4, 6), rnd(2, 3, 4, seed=19))


@pytest.mark.parametrize("axes", [None, (0, 2), (1, 0), (-1, -3)])
def test_transpose(axes):
    x = rnd(2, 3, 4, seed=20)
    want = (lambda a: np.swapaxes(a, -2, -1)) if axes is None else (lambda a: np.swapaxes(a, *axes))
    check(lambda a: a.transpose(axes), want, x)


def test_permute_and_flip():
    x = rnd(2, 3, 4, seed=21)
    check(lambda a: a.permute([2, 0, 1]), lambda a: np.transpose(a, (2, 0, 1)), x)
    check(lambda a: a.flip([0, 2]), lambda a: np.flip(a, (0, 2)), x)


# ----------------------------------------------------------------------------------------------
# elementwise functions


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize(
    "name, f, positive",
    [
        ("exp", np.exp, False),
        ("log", np.log, True),
        ("tanh", np.tanh, False),
        ("relu", lambda x: np.maximum(x, 0), False),
        ("sigmoid", _sigmoid, False),
        ("sqrt", np.sqrt, True),
    ],
)
def test_unary(name, f, positive):
    x = rnd(3, 4, seed=22, lo=0.2) if positive else away_from_zero(rnd(3, 4, seed=22))
    check(lambda a: getattr(a, name)(), f, x)
    check(lambda a: a.unary(name), f, x)
    # on a strided view
    check(lambda a: getattr(a, name)()[::-1, 1:], lambda a: f(a)[::-1, 1:], x)


def test_relu_gradient_is_a_mask():
    t = T(np.array([-2.0, -0.5, 0.5, 3.0]))
    t.relu().sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 0.0, 1.0, 1.0])


def test_maximum():
    check(lambda a, b: a.maximum(b), np.maximum, rnd(2, 3, seed=23), rnd(2, 3, seed=24))


def test_softmax_and_log_softmax():
    x = rnd(3, 5, seed=25)
    e = lambda a: np.exp(a - a.max(axis=1, keepdims=True))  # noqa: E731
    check(lambda a: a.softmax(1), lambda a: e(a) / e(a).sum(axis=1, keepdims=True), x)
    check(lambda a: a.log_softmax(-1), lambda a: a - _logsumexp(a, (1,), True), x)


# ----------------------------------------------------------------------------------------------
# stack, split, indexing


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack(axis):
    xs = [rnd(2, 3, seed=s) for s in (26, 27, 28)]
    check(lambda a, b, c: stack([a, b, c], axis), lambda a, b, c: np.stack([a, b, c], axis), *xs)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split(axis):
    x = rnd(3, 3, 3, seed=29)

    def fq(a):
        p = a.split(axis)
        assert len(p) == 3 and p[0].shape == (3, 3)
        return p[0] * 2.0 + p[2] * p[1]

    def fnp(a):
        p = [np.take(a, i, axis=axis) for i in range(3)]
        return p[0] * 2.0 + p[2] * p[1]

    check(fq, fnp, x)


def test_split_then_stack_is_identity_with_gradient():
    x = rnd(4, 2, seed=30)
    check(lambda a: stack(list(reversed(a.split(0))), 0), lambda a: a[::-1], x)


INDICES = [
    (slice(1, None), slice(None, None, -2)),
    (slice(None, None, -1), 1),
    (None, Ellipsis, 0),
    (0, 0),
    (slice(None), slice(1, 3), None),
    (Ellipsis, slice(-1, -4, -1)),
    (slice(5, 1),),
    (1,),
]


@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_getitem(idx):
    x = rnd(3, 4, seed=31)
    check(lambda a: a[idx], lambda a: np.asarray(a[idx]), x)


@settings(max_examples=50, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
def test_getitem_random_slices(data, shape):
    """Random start / stop / step (negative too) and ints per dim: the gradient scatters back
    into exactly the selected elements."""
    idx = []
    for n in shape[: data.draw(st.integers(0, len(shape)))]:
        if data.draw(st.booleans()):
            idx.append(data.draw(st.integers(-n, n - 1)))
        else:
            b = st.none() | st.integers(-n - 1, n + 1)
            idx.append(slice(data.draw(b), data.draw(b), data.draw(st.sampled_from([None, -3, -2, -1, 1, 2, 3]))))
    idx = tuple(idx) + (Ellipsis,)
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) + 1.0
    t = T(x)
    out = t[idx]
    want = x[idx]
    assert out.shape == want.shape
    np.testing.assert_array_equal(out.numpy(), want)
    w = np.arange(want.size, dtype=np.float64).reshape(want.shape) + 0.5
    (out * T(w, requires_grad=False)).sum().backward()
    expect = np.zeros_like(x)
    expect[idx] = w  # basic indices select each element at most once
    np.testing.assert_array_equal(t.grad.numpy(), expect)


# ----------------------------------------------------------------------------------------------
# the engine


def test_backward_with_out_grad():
    check(lambda a, b: a @ b + a.sum(1, True), lambda a, b: a @ b + a.sum(1, keepdims=True),
          rnd(3, 4, seed=32), rnd(4, 2, seed=33), out_grad=True)


def test_small_mlp_loss():
    x = rnd(5, 4, seed=34)
    y = np.array([0, 2, 1, 2, 0])

    def fq(w1, b1, w2):
        h = (T(x, requires_grad=False) @ w1 + b1.broadcast_to((5, 3))).relu()
        z = h @ w2
        return (z.logsumexp((1,)) - (z * T(np.eye(3)[y], requires_grad=False)).sum((1,))).sum() / 5.0

    def fnp(w1, b1, w2):
        h = np.maximum(x @ w1 + b1, 0)
        z = h @ w2
        return np.asarray((_logsumexp(z, (1,)) - z[np.arange(5), y]).sum() / 5.0)

    check(fq, fnp, rnd(4, 3, seed=35), rnd(3, seed=36), rnd(3, 3, seed=37))


def test_requires_grad_and_leaves():
    a = T(rnd(2, 2, seed=38))
    c = T(rnd(2, 2, seed=39), requires_grad=False)
    assert a.requires_grad and a.is_leaf()
    assert not c.requires_grad
    out = a * c
    assert out.requires_grad and not out.is_leaf()
    out.sum().backward()
    assert c.grad is None
    np.testing.assert_allclose(a.grad.numpy(), c.numpy())
    # integer tensors never require grad
    assert not Tensor(np.arange(3), dtype="int64").requires_grad
    # detach leaves the graph
    d = (a * 2.0).detach()
    assert not d.requires_grad


def test_tensor_dtype_defaults():
    # needle's rule: the data keeps the dtype NumPy gives it (float64 stays float64, and a
    # list of Python floats is float64, as in the NumPy-backed homeworks); dtype= converts.
    assert Tensor(np.ones(3)).dtype == "float64"
    assert Tensor(np.ones(3, np.float32)).dtype == "float32"
    assert Tensor(np.ones(3), dtype="float32").dtype == "float32"
    assert Tensor([1.0, 2.0]).dtype == "float64"
    assert Tensor([1.0, 2.0], dtype="float32").dtype == "float32"
    assert Tensor(2.5).dtype == "float64"
    # Python integers that require grad (the default) become float64, so that they can
    # (needle differentiates Tensor([6])); without grad, and from NumPy, they stay integers.
    assert Tensor([6]).dtype == "float64" and Tensor([6]).requires_grad
    assert Tensor([6], requires_grad=False).dtype == "int64"
    assert Tensor(np.array([6])).dtype == "int64"
    assert Tensor([True]).dtype == "bool"
    # Weak Python scalars keep the Tensor's dtype.
    assert (Tensor(np.ones(2, np.float32)) * 2.5).dtype == "float32"
    assert Tensor(NDArray(np.ones(2))).dtype == "float64"
    assert Tensor(nd.array(np.ones(2))).dtype == "float32"
    t = Tensor(np.arange(6.0).reshape(2, 3), dtype="float64")
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    np.testing.assert_array_equal(np.asarray(t), np.arange(6.0).reshape(2, 3))
    assert t.sum().item() == 15.0


def test_zero_dim_tensor_from_numpy():
    """Tensor(np.array(2.0)) is 0-d, as in NumPy and needle."""
    t = Tensor(np.array(2.0), dtype="float64")
    assert t.shape == ()
    (t * t).backward()
    assert t.grad.shape == ()
    assert t.grad.item() == 4.0
