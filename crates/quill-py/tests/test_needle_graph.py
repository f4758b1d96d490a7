"""needle's graph from Python (issue 49, item 2): ``Tensor.op`` / ``inputs`` over quill's Rust
graph, each built-in op's ``gradient_as_tuple`` against finite differences taken needle's way
(``realize_cached_data().flat[i] += eps``), a user-written ``TensorOp`` mixed with built-in ops
(first and second order, against NumPy's analytic derivatives), ``find_topo_sort`` and
``compute_gradient_of_variables`` against quill's own backward, and ``TENSOR_COUNTER`` flat
over 100 optimizer steps."""
import numpy as np
import pytest

import quill as ndl
from quill.autograd import Op, TensorOp, BuiltinOp, find_topo_sort, compute_gradient_of_variables


def tensor(a, requires_grad=True):
    return ndl.Tensor(np.asarray(a, dtype=np.float64), dtype="float64",
                      requires_grad=requires_grad)


def numeric_grads(f, *args, eps=1e-6):
    """needle's gradient_check: nudge each element of each input in place through ``flat``."""
    out = []
    for a in args:
        g = np.zeros(a.shape)
        for j in range(a.realize_cached_data().size):
            a.realize_cached_data().flat[j] += eps
            f1 = float(f(*args).numpy().sum())
            a.realize_cached_data().flat[j] -= 2 * eps
            f2 = float(f(*args).numpy().sum())
            a.realize_cached_data().flat[j] += eps
            g.flat[j] = (f1 - f2) / (2 * eps)
        out.append(g)
    return out


CASES = [
    ("add", lambda a, b: a + b, [(3, 4), (3, 4)]),
    ("multiply", lambda a, b: a * b, [(3, 4), (3, 4)]),
    ("divide", lambda a, b: a / b, [(2, 5), (2, 5)]),
    ("matmul", lambda a, b: a @ b, [(3, 4), (4, 2)]),
    ("summation", lambda a: ndl.ops.summation(a, axes=(1,)), [(3, 4)]),
    ("broadcast_to", lambda a: ndl.ops.broadcast_to(a, (3, 4)), [(1, 4)]),
    ("reshape", lambda a: ndl.ops.reshape(a, (2, 6)), [(3, 4)]),
    ("transpose", lambda a: ndl.ops.transpose(a), [(3, 4)]),
    ("power_scalar", lambda a: ndl.ops.power_scalar(a, 3), [(2, 3)]),
    ("log", lambda a: ndl.ops.log(a), [(2, 3)]),
    ("exp", lambda a: ndl.ops.exp(a), [(2, 3)]),
    ("negate", lambda a: ndl.ops.negate(a), [(2, 3)]),
]


@pytest.mark.parametrize("name, f, shapes", CASES, ids=[c[0] for c in CASES])
def test_builtin_op_gradient_as_tuple_matches_finite_differences(name, f, shapes):
    rng = np.random.default_rng(len(name))
    args = [tensor(rng.uniform(0.5, 2.0, s)) for s in shapes]
    out = f(*args)
    assert isinstance(out.op, Op) and not out.is_leaf()
    want_cls = {"matmul": "MatMul", "summation": "Summation", "reshape": "Reshape",
                "transpose": "Transpose", "broadcast_to": "BroadcastTo"}.get(name)
    if want_cls:
        assert type(out.op) is getattr(ndl.ops, want_cls)
    else:
        assert isinstance(out.op, BuiltinOp)
    assert [x._node_id for x in out.inputs] == [a._node_id for a in args]
    got = out.op.gradient_as_tuple(ndl.Tensor(np.ones(out.shape), dtype="float64"), out)
    want = numeric_grads(f, *args)
    assert len(got) == len(args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)


def test_leaves_have_no_op_and_no_inputs():
    a = tensor([1.0, 2.0])
    assert a.op is None and a.inputs == [] and a.is_leaf()
    with pytest.raises(ValueError, match="leaf"):
        a._input_grads(tensor([1.0, 1.0]))


class Sin(TensorOp):
    """A user op: sin on NDArrays, its gradient in Tensor ops (so differentiable again)."""

    def compute(self, a):
        return a.sin()

    def gradient(self, out_grad, node):
        (x,) = node.inputs
        return out_grad * ndl.ops.cos(x)


class MulAdd(TensorOp):
    """A user op of two inputs returning a tuple of gradients: a * b + a."""

    def compute(self, a, b):
        return a * b + a

    def gradient(self, out_grad, node):
        a, b = node.inputs
        return out_grad * (b + 1.0), out_grad * a


def test_user_tensor_op_joins_the_graph_first_order():
    rng = np.random.default_rng(0)
    xn, wn, bn = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 4))
    x, w, b = tensor(xn), tensor(wn), tensor(bn)
    h = MulAdd()(Sin()(x), b)              # user ops
    y = ndl.ops.summation(ndl.ops.exp(h @ w * 0.1))  # built-in ops after them
    assert isinstance(h.op, MulAdd) and isinstance(h.inputs[0].op, Sin)
    y.backward()
    # NumPy's analytic gradients.
    s = np.sin(xn)
    hn = s * bn + s
    e = np.exp(hn @ wn * 0.1)
    gh = (e * 0.1) @ wn.T
    np.testing.assert_allclose(w.grad.numpy(), hn.T @ (e * 0.1), rtol=1e-10)
    np.testing.assert_allclose(b.grad.numpy(), gh * s, rtol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), gh * (bn + 1) * np.cos(xn), rtol=1e-10)
    # needle's check through the op itself.
    f = lambda x, b: MulAdd()(Sin()(x), b)  # noqa: E731
    out = f(x, b)
    got = out.op.gradient_as_tuple(ndl.Tensor(np.ones(out.shape), dtype="float64"), out)
    want_b = numeric_grads(f, x, b)[1]
    np.testing.assert_allclose(got[1].numpy(), want_b, rtol=1e-5, atol=1e-7)


def test_user_tensor_op_second_order():
    xn = np.array([0.3, -1.2, 2.0])
    x = tensor(xn)
    y = ndl.ops.summation(Sin()(x) * x)   # d/dx = cos(x) x + sin(x)
    y.backward(create_graph=True)
    g = x.grad
    np.testing.assert_allclose(g.numpy(), np.cos(xn) * xn + np.sin(xn), rtol=1e-12)
    x.grad = None
    ndl.ops.summation(g).backward()       # d2/dx2 = -sin(x) x + 2 cos(x)
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(xn) * xn + 2 * np.cos(xn), rtol=1e-12)


def test_user_op_errors_are_typed_and_name_the_op():
    class Wrong(TensorOp):
        def compute(self, a):
            return a * 2.0

        def gradient(self, out_grad, node):
            return out_grad, out_grad       # two gradients for one input

    class Raises(TensorOp):
        def compute(self, a):
            return a * 2.0

        def gradient(self, out_grad, node):
            raise RuntimeError("boom")

    x = tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="Wrong.*2 gradients for 1 inputs"):
        ndl.ops.summation(Wrong()(x)).backward()
    with pytest.raises(ValueError, match="Raises.*boom"):
        ndl.ops.summation(Raises()(x)).backward()
    with pytest.raises(TypeError, match="gradient_as_tuple"):
        ndl._native._make_from_op(object(), x.realize_cached_data(), [x])


def test_topo_sort_and_reference_pass_agree_with_backward():
    rng = np.random.default_rng(1)
    a, b = tensor(rng.normal(size=(2, 3))), tensor(rng.normal(size=(3, 3)))
    c = a @ b
    d = Sin()(c) + c                       # c used twice
    out = ndl.ops.summation(d * d)
    order = find_topo_sort([out])
    pos = {t._node_id: i for i, t in enumerate(order)}
    assert pos[out._node_id] == len(order) - 1
    for t in order:
        for x in t.inputs:
            assert pos[x._node_id] < pos[t._node_id]
    assert len(pos) == len(order)          # each node once
    compute_gradient_of_variables(out, tensor(1.0, requires_grad=False))
    ref_a, ref_b = a.grad.numpy(), b.grad.numpy()
    a.grad, b.grad = None, None
    out.backward()
    np.testing.assert_allclose(ref_a, a.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ref_b, b.grad.numpy(), rtol=1e-12)


def test_tensor_counter_is_flat_over_100_optimizer_steps():
    np.random.seed(0)
    model = ndl.nn.Sequential(ndl.nn.Linear(8, 16), ndl.nn.ReLU(), ndl.nn.Linear(16, 4))
    opt = ndl.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = ndl.Tensor(np.random.randn(32, 8).astype(np.float32))
    y = ndl.Tensor(np.random.randint(0, 4, size=32).astype(np.float32))
    loss_fn = ndl.nn.SoftmaxLoss()

    def step():
        opt.reset_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    before = ndl.autograd.TENSOR_COUNTER
    for _ in range(100):
        step()
    assert ndl.autograd.TENSOR_COUNTER == before
    assert before > 0
    t = ndl.Tensor([1.0])
    assert ndl.autograd.TENSOR_COUNTER == before + 1
    del t
    assert ndl.autograd.TENSOR_COUNTER == before


def test_op_base_class_and_make_const():
    assert issubclass(TensorOp, Op)
    with pytest.raises(NotImplementedError):
        Op().compute(None)
    c = ndl.Tensor.make_const(tensor([1.0, 2.0]))
    assert c.is_leaf() and not c.requires_grad
    assert ndl.autograd.LAZY_MODE is False


@pytest.mark.parametrize("cls, params, f, shapes", [
    ("EWiseAdd", (), lambda a, b: a + b, [(2, 3), (2, 3)]),
    ("MulScalar", (2.5,), lambda a: a * 2.5, [(2, 3)]),
    ("PowerScalar", (3,), lambda a: a ** 3, [(2, 3)]),
    ("DivScalar", (4.0,), lambda a: a / 4.0, [(2, 3)]),
    ("Summation", ((1,),), lambda a: a.sum(axis=1), [(2, 3)]),
    ("Transpose", (None,), lambda a: np.swapaxes(a, -1, -2), [(2, 3)]),
    ("Reshape", ((3, 2),), lambda a: a.reshape(3, 2), [(2, 3)]),
    ("BroadcastTo", ((4, 3),), lambda a: np.broadcast_to(a, (4, 3)), [(1, 3)]),
    ("MatMul", (), lambda a, b: a @ b, [(2, 3), (3, 4)]),
    ("Exp", (), np.exp, [(2, 3)]),
    ("LogSumExp", ((1,),), lambda a: np.log(np.exp(a).sum(axis=1)), [(2, 3)]),
])
def test_needle_op_classes_call_compute_and_gradient(cls, params, f, shapes):
    rng = np.random.default_rng(5)
    ns = [rng.uniform(0.5, 1.5, s) for s in shapes]
    op = getattr(ndl.ops, cls)(*params)
    assert isinstance(op, TensorOp)
    args = [tensor(n) for n in ns]
    out = op(*args)
    np.testing.assert_allclose(out.numpy(), f(*ns), rtol=1e-12)
    arrays = [a.realize_cached_data() for a in args]
    np.testing.assert_allclose(op.compute(*arrays).numpy(), f(*ns), rtol=1e-12)
    grads = op.gradient_as_tuple(ndl.Tensor(np.ones(out.shape), dtype="float64"), out)
    want = numeric_grads(lambda *xs: op(*xs), *args)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="parameter"):
        getattr(ndl.ops, cls)(*params, 1, 2, 3)


class Halves(ndl.autograd.TensorTupleOp):
    """A user tuple op: the two halves of a vector; its gradient joins the halves' grads."""

    def compute(self, a):
        n = a.shape[0] // 2
        return a[:n].compact(), a[n:].compact()

    def gradient(self, out_grads, node):
        lo, hi = out_grads
        return ndl.ops.reshape(ndl.ops.stack([lo, hi], 0), node.inputs[0].shape)


def test_tensor_tuples_and_a_user_tuple_op():
    xn = np.array([0.5, -1.0, 2.0, 3.0])
    x = tensor(xn)
    lo, hi = Halves()(x)
    assert isinstance(Halves()(x), ndl.autograd.TensorTuple)
    np.testing.assert_array_equal(lo.numpy(), xn[:2])
    # Only `lo` is used twice, `hi` once: each element's gradient reaches x through the op.
    y = ndl.ops.summation(lo * lo) + ndl.ops.summation(hi * 3.0)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -2.0, 3.0, 3.0])
    # needle's split / make_tuple / tuple_get_item / TensorTuple arithmetic.
    a = tensor(np.arange(6.0).reshape(2, 3))
    parts = ndl.ops.split(a, 1)
    assert isinstance(parts, ndl.autograd.TensorTuple) and len(parts) == 3
    np.testing.assert_array_equal(ndl.ops.tuple_get_item(parts, 2).numpy(), [2.0, 5.0])
    both = parts + ndl.ops.make_tuple(*parts)
    np.testing.assert_array_equal(both[1].numpy(), [2.0, 8.0])
    back = ndl.ops.stack(parts, 1)
    np.testing.assert_array_equal(back.numpy(), a.numpy())
    with pytest.raises(ValueError, match="TensorTuple"):
        parts + (a,)
