"""quill.backend_ndarray.NDArray against NumPy: random chains of views (indexing, permute,
broadcast_to, flip, reshape, compact), writes through views, make(), elementwise ops with
NumPy 2 promotion, reductions and matmul. Every result is compared with what NumPy gives for
the same input: values, shape and dtype name (and strides / offset while the view still shares
the buffer it started from)."""
import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quill.backend_ndarray import NDArray

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool"]
FLOATS = ["float32", "float64"]
STEPS = [-3, -2, -1, 1, 2, 3]


# ----------------------------------------------------------------------------------------------
# helpers


def elements(dtype, lo=-100, hi=100):
    if dtype == "bool":
        return st.booleans()
    if dtype == "uint8":
        return st.integers(max(lo, 0), min(hi, 255))
    if dtype in ("int32", "int64"):
        return st.integers(lo, hi)
    width = 32 if dtype == "float32" else 64
    return st.floats(lo, hi, width=width, allow_nan=False, allow_infinity=False)


def arrays(dtype, shape, lo=-100, hi=100):
    return hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, lo, hi))


SHAPES = hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=4)
# sides drawn evenly (array_shapes favours 1s): most dims are non-trivial
WIDE_SHAPES = st.lists(st.sampled_from([1, 2, 3, 4]), max_size=5).map(tuple)


def q_of(x):
    """A quill array with x's values, sharing nothing with x."""
    return NDArray(x)


def np_view(n, idx):
    """n[idx] as a NumPy view, also where NumPy would give a scalar (all ints, or a 0-d n)."""
    tup = idx if isinstance(idx, tuple) else (idx,)
    if not any(i is Ellipsis for i in tup):
        tup = tup + (Ellipsis,)
    return n[tup]


def assert_same(q, n):
    """q (a quill NDArray) holds exactly n (a NumPy array): values, shape, dtype."""
    assert isinstance(q, NDArray)
    assert q.shape == n.shape
    assert q.ndim == n.ndim
    assert q.size == n.size
    assert q.dtype == n.dtype.name
    got = q.numpy()
    assert got.dtype == n.dtype
    assert got.shape == n.shape
    np.testing.assert_array_equal(got, n)


def assert_close(q, n, rtol=None, atol=0.0):
    """q holds n up to a tolerance set by the result dtype (exact for integers and bool)."""
    assert q.shape == n.shape
    assert q.dtype == n.dtype.name, (q.dtype, n.dtype.name)
    got = q.numpy()
    if n.dtype.kind in "biu":
        np.testing.assert_array_equal(got, n)
        return
    if rtol is None:
        rtol = 1e-5 if n.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, n, rtol=rtol, atol=atol, equal_nan=True)


def elem_strides(n):
    return tuple(s // n.itemsize for s in n.strides)


def elem_offset(view, base):
    """Where view's first element sits in base's buffer, in elements."""
    d = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return d // base.itemsize


def assert_same_layout(q, n, base):
    """Strides (of dims with more than one element) and offset agree with NumPy's view of the
    same buffer."""
    if n.size == 0:
        return
    want = [s for s, d in zip(elem_strides(n), n.shape) if d > 1]
    got = [s for s, d in zip(q.strides, q.shape) if d > 1]
    assert got == want, (q.strides, elem_strides(n), n.shape)
    assert q.offset == elem_offset(n, base)


@st.composite
def basic_index(draw, shape):
    """A NumPy basic index for an array of `shape`: ints (in range), slices with any start /
    stop (also past the ends) and any non-zero step, None, at most one Ellipsis."""
    ndim = len(shape)
    used = draw(st.integers(0, ndim))
    ellipsis = draw(st.booleans())
    if ellipsis:
        lead = draw(st.integers(0, used))
        dims = list(range(lead)) + list(range(ndim - (used - lead), ndim))
    else:
        dims = list(range(used))
    items = []
    for d in dims:
        n = shape[d]
        if n > 0 and draw(st.integers(0, 3)) == 0:
            items.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.none() | st.integers(-n - 2, n + 2)
            items.append(slice(draw(bound), draw(bound), draw(st.none() | st.sampled_from(STEPS))))
    if ellipsis:
        items.insert(lead, Ellipsis)
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def broadcast_target(draw, shape):
    lead = draw(st.lists(st.integers(0, 3), max_size=max(0, min(2, 6 - len(shape)))))
    rest = [draw(st.sampled_from([0, 1, 2, 3])) if d == 1 else d for d in shape]
    return tuple(lead + rest)


def _factors(n):
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


@st.composite
def reshape_target(draw, shape):
    size = int(np.prod(shape)) if shape else 1
    rank = draw(st.integers(0 if size == 1 else 1, 4))
    if size == 0:
        dims = [draw(st.integers(0, 3)) for _ in range(rank)]
        dims[draw(st.integers(0, rank - 1))] = 0
        return tuple(dims)
    dims = [1] * rank
    for f in _factors(size):
        dims[draw(st.integers(0, rank - 1))] *= f
    if rank and draw(st.booleans()):
        dims[draw(st.integers(0, rank - 1))] = -1
    return tuple(dims)


def views(draw, n, q, steps, ops, base):
    """Applies `steps` random view ops to n (NumPy) and q (quill), checking after each."""
    shares = True  # n and q still view `base`'s buffer (no copying op yet)
    for _ in range(steps):
        op = draw(st.sampled_from(ops))
        if op == "getitem":
            idx = draw(basic_index(n.shape))
            n, q = np_view(n, idx), q[idx]
        elif op == "permute":
            axes = draw(st.permutations(range(n.ndim)))
            axes = [a - n.ndim if draw(st.booleans()) else a for a in axes]
            n = np.transpose(n, axes)
            q = q.permute(*axes) if draw(st.booleans()) else q.permute(tuple(axes))
        elif op == "flip":
            if n.ndim == 0:
                q = q.flip()
            elif draw(st.booleans()):
                n, q = np.flip(n), q.flip()
            else:
                axes = draw(st.lists(st.integers(-n.ndim, n.ndim - 1), unique_by=lambda a: a % n.ndim))
                n, q = np.flip(n, tuple(axes)), q.flip(axes)
        elif op == "broadcast_to":
            target = draw(broadcast_target(n.shape))
            if np.prod(target) > 600:
                continue
            n = np.broadcast_to(n, target)
            q = q.broadcast_to(target) if draw(st.booleans()) else q.broadcast_to(*target)
        elif op == "reshape":
            target = draw(reshape_target(n.shape))
            n = n.reshape(target)
            q = q.reshape(target) if draw(st.booleans()) else q.reshape(*target)
            shares = False  # may copy, in either library
        elif op == "compact":
            q = q.compact()
            assert q.is_compact()
            assert q.offset == 0
            if q.size:
                want = [s for s, d in zip(elem_strides(np.empty(n.shape, n.dtype)), n.shape) if d > 1]
                assert [s for s, d in zip(q.strides, q.shape) if d > 1] == want
            shares = False
        assert_same(q, n)
        if shares:
            assert_same_layout(q, n, base)
    return n, q


# ----------------------------------------------------------------------------------------------
# construction and views


def test_zero_dim_from_numpy():
    """A 0-d NumPy array (and a Python / NumPy scalar) stays 0-d, as in NumPy and needle."""
    for x in [np.array(2.5, np.float32), np.array(7, np.int64), np.array(True), np.float64(1.5)]:
        q = NDArray(x)
        assert q.shape == ()
        assert_same(q, np.asarray(x))


def test_zero_dim_numpy_operands():
    """0-d NumPy arrays as operands and values keep NumPy's shapes."""
    z = q_of(np.array(1.5))
    assert_same(z + np.array(2.0), np.array(3.5))
    assert_same(z * np.float32(2.0), np.array(3.0))
    z[...] = np.array(5.0)
    assert_same(z, np.array(5.0))


@pytest.mark.parametrize(
    "dtype, scalar",
    [("float32", np.float64(2.0)), ("float32", np.float32(2.0)), ("uint8", np.int64(2)), ("int32", np.float64(2.0))],
    ids=["f32*np.float64", "f32*np.float32", "u8*np.int64", "i32*np.float64"],
)
def test_numpy_scalars_are_strong(dtype, scalar):
    """NEP 50: NumPy scalars (unlike Python numbers) take part in promotion with their dtype
    (np.float64 is a subclass of Python float, but is not weak)."""
    x = np.arange(3, dtype=dtype)
    q = NDArray(x)
    assert_same(q * scalar, x * scalar)
    assert_same(q + scalar, x + scalar)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_numpy_keeps_dtype_and_values(dtype):
    x = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    q = NDArray(x)
    assert_same(q, x)
    assert q.strides == (12, 4, 1) and q.offset == 0 and q.is_compact()
    # a non-contiguous source is read in its logical order
    assert_same(NDArray(x[:, ::-2, 1:]), x[:, ::-2, 1:])
    np.testing.assert_array_equal(np.asarray(q), x)
    assert q.tolist() == x.tolist()
    assert len(q) == 2


def test_python_lists_follow_needle_defaults():
    assert_same(NDArray([1.0, 2.5]), np.array([1.0, 2.5], np.float32))  # floats: float32
    assert_same(NDArray([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.int64))
    assert_same(NDArray([True, False]), np.array([True, False]))
    assert_same(NDArray(np.array([1.0, 2.5])), np.array([1.0, 2.5]))  # NumPy keeps float64
    assert_same(NDArray([1.0, 2.5], dtype="float64"), np.array([1.0, 2.5]))
    assert_same(NDArray(np.arange(3), dtype=np.float32), np.arange(3, dtype=np.float32))
    assert_same(NDArray(np.arange(3, dtype=np.int16)), np.arange(3, dtype=np.int16))


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_astype(src, dst):
    x = np.array([0, 1, 3, 100, 2], dtype=src)
    assert_same(NDArray(x).astype(dst), x.astype(dst))
    assert_same(NDArray(x)[::-2].astype(dst), x[::-2].astype(dst))


CHAIN_OPS = ["getitem", "getitem", "permute", "flip", "broadcast_to", "reshape", "compact"]


@SETTINGS
@given(st.data(), st.sampled_from(DTYPES), WIDE_SHAPES)
def test_view_chains_match_numpy(data, dtype, shape):
    base = data.draw(arrays(dtype, shape))
    q = q_of(base)
    assert_same(q, base)
    views(data.draw, base, q, data.draw(st.integers(2, 6)), CHAIN_OPS, base)


@SETTINGS
@given(st.data(), st.sampled_from(DTYPES), SHAPES)
def test_view_chains_with_empty_dims_match_numpy(data, dtype, shape):
    base = data.draw(arrays(dtype, shape))
    views(data.draw, base, q_of(base), data.draw(st.integers(1, 4)), CHAIN_OPS, base)


@SETTINGS
@given(st.data(), st.sampled_from(DTYPES), SHAPES)
def test_getitem_matches_numpy(data, dtype, shape):
    base = data.draw(arrays(dtype, shape))
    q = q_of(base)
    idx = data.draw(basic_index(shape))
    n = np_view(base, idx)
    v = q[idx]
    assert_same(v, n)
    assert_same_layout(v, n, base)


@SETTINGS
@given(st.data(), st.sampled_from(DTYPES), st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=4).map(tuple))
def test_flip_and_permute_match_numpy(data, dtype, shape):
    base = data.draw(arrays(dtype, shape))
    q = operand(data.draw, base)
    ndim = len(shape)
    some = st.lists(st.integers(-ndim, ndim - 1), unique_by=lambda a: a % ndim)
    axes = data.draw(st.none() | st.integers(-ndim, ndim - 1) | some | some.filter(lambda a: len(a) >= 2))
    n = np.flip(base, axes if not isinstance(axes, list) else tuple(axes))
    assert_same(q.flip(axes), n)
    perm = data.draw(st.permutations(range(ndim)))
    assert_same(q.flip(axes).permute(*perm), np.transpose(n, perm))


def test_view_layout_examples():
    x = np.arange(24).reshape(2, 3, 4)
    q = NDArray(x)
    v = q[1:2, ::-2, None, ...]
    assert v.shape == (1, 2, 1, 4) and v.strides == (12, -8, 0, 1) and v.offset == 20
    assert_same(v, x[1:2, ::-2, None, ...])
    f = q.flip((0, -1))
    assert f.strides == (-12, 4, -1) and f.offset == 15
    assert_same(f, x[::-1, :, ::-1])
    p = q.permute(2, 0, 1)
    assert p.strides == (1, 12, 4) and p.offset == 0 and not p.is_compact()
    b = q[0].broadcast_to((5, 3, 4))
    assert b.strides == (0, 4, 1)
    assert_same(b, np.broadcast_to(x[0], (5, 3, 4)))
    assert_same(q[1, 2, 3], np.array(23))
    assert q[1, 2, 3].shape == () and q[1, 2, 3].item() == 23
    assert_same(q[()], x)
    assert_same(q[...], x)
    assert_same(q[5:1], x[5:1])
    assert_same(q[:, 10:-10:-1], x[:, 10:-10:-1])


def test_is_compact_and_compact():
    q = NDArray(np.arange(12.0).reshape(3, 4))
    assert q.is_compact()
    assert q[:].is_compact()
    for v in [q[1:], q[:, :2], q.permute(1, 0), q[::-1], q[0].broadcast_to((2, 4))]:
        assert not v.is_compact()
        c = v.compact()
        assert c.is_compact() and c.offset == 0
        assert_same(c, v.numpy())
        c[...] = -1.0  # a copy: the original is untouched
    assert_same(q, np.arange(12.0).reshape(3, 4))
    # compacting a compact array shares its buffer
    c = q.compact()
    c[0, 0] = 42.0
    assert q[0, 0].item() == 42.0


# ----------------------------------------------------------------------------------------------
# make


def _reach(shape, strides):
    lo = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0)
    hi = sum((d - 1) * s for d, s in zip(shape, strides) if s > 0)
    return lo, hi


def _expected_make(flat, shape, strides, offset):
    idx = np.full(shape, offset, dtype=np.int64)
    for ax, s in enumerate(strides):
        sh = [1] * len(shape)
        sh[ax] = shape[ax]
        idx = idx + (np.arange(shape[ax]) * s).reshape(sh)
    return flat[idx]


@SETTINGS
@given(st.data(), st.sampled_from(DTYPES))
def test_make_views_a_handle(data, dtype):
    length = data.draw(st.integers(1, 30))
    flat = data.draw(arrays(dtype, (length,)))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), max_size=3)))
    strides = tuple(data.draw(st.lists(st.integers(-4, 4), min_size=len(shape), max_size=len(shape))))
    lo, hi = _reach(shape, strides)
    assume(hi - lo <= length - 1)
    offset = data.draw(st.integers(-lo, length - 1 - hi))
    h = NDArray(flat)
    v = NDArray.make(shape, strides, handle=h, offset=offset)
    assert v.shape == shape
    assert v.strides == strides
    assert v.offset == offset
    assert v.dtype == dtype
    assert_same(v, _expected_make(flat, shape, strides, offset))
    assert_same(v.compact(), _expected_make(flat, shape, strides, offset))


def test_make_shares_the_handle_buffer():
    h = NDArray(np.arange(12.0))
    v = NDArray.make((2, 3), (-1, -2), handle=h, offset=10)
    assert_same(v, np.array([[10.0, 8.0, 6.0], [9.0, 7.0, 5.0]]))
    v[0] = np.array([-1.0, -2.0, -3.0])
    want = np.arange(12.0)
    want[[10, 8, 6]] = [-1.0, -2.0, -3.0]
    assert_same(h, want)


def test_make_new_buffer():
    v = NDArray.make((2, 3))
    assert v.dtype == "float32" and v.strides == (3, 1) and v.is_compact()
    assert_same(v, np.zeros((2, 3), np.float32))
    v = NDArray.make((2, 3), (1, 2), dtype="int32")
    assert v.strides == (1, 2) and v.offset == 0
    assert_same(v, np.zeros((2, 3), np.int32))
    v[1, 2] = 9
    assert v.numpy()[1, 2] == 9
    v = NDArray.make((4,), (2,), offset=3, dtype="float64")
    assert v.offset == 3 and v.strides == (2,)
    assert_same(v, np.zeros(4))


# ----------------------------------------------------------------------------------------------
# writes through views


def scalar_for(dtype):
    if dtype == "bool":
        return st.booleans()
    if dtype == "uint8":
        return st.integers(0, 255)
    if dtype in ("int32", "int64"):
        return st.integers(-1000, 1000)
    return st.floats(-100, 100, width=32) | st.integers(-100, 100)


@st.composite
def value_shape(draw, target):
    """A shape that broadcasts to target."""
    drop = draw(st.integers(0, len(target)))
    return tuple(1 if draw(st.integers(0, 2)) == 0 else d for d in target[drop:])


@SETTINGS
@given(st.data(), st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
def test_setitem_through_views_matches_numpy(data, dtype, shape):
    base = data.draw(arrays(dtype, shape))
    q_base = q_of(base)
    n = base.copy()
    # views of views: both sides write into their base's buffer
    nv, qv = views(data.draw, n, q_base, data.draw(st.integers(0, 2)), ["getitem", "permute", "flip"], n)
    idx = data.draw(basic_index(nv.shape))
    kind = data.draw(st.sampled_from(["scalar", "numpy", "ndarray", "ndarray_view"]))
    if kind == "scalar":
        value = data.draw(scalar_for(dtype))
        nv[idx] = value
        qv[idx] = value
    else:
        target = np_view(nv, idx).shape
        value = data.draw(arrays(dtype, data.draw(value_shape(target))))
        nv[idx] = value
        if kind == "numpy":
            qv[idx] = value
        elif kind == "ndarray":
            qv[idx] = NDArray(value)
        else:  # a view with negative strides holding the same values
            qv[idx] = NDArray(np.flip(value).copy()).flip()
    assert_same(q_base, n)
    assert_same(qv, nv)


@pytest.mark.parametrize(
    "dst, src",
    [
        ((slice(1, None),), (slice(None, -1),)),
        ((slice(None, -1),), (slice(1, None),)),
        ((slice(None, None, -1),), (slice(None),)),
        ((slice(None, None, 2),), (slice(None, None, -2),)),
    ],
)
def test_setitem_from_overlapping_view(dst, src):
    n = np.arange(10.0)
    q = NDArray(n.copy())
    n[dst] = n[src].copy()  # NumPy's semantics: as if the source were read first
    q[dst] = q[src]
    assert_same(q, n)


def test_setitem_transpose_of_itself():
    n = np.arange(16).reshape(4, 4)
    q = NDArray(n)
    q[...] = q.permute(1, 0)
    assert_same(q, n.T.copy())


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_setitem_float_into_int_truncates_like_numpy(dtype):
    n = np.zeros(4, dtype)
    q = NDArray(n.copy())
    n[:] = 2.7
    q[:] = 2.7
    assert_same(q, n)
    n[::-1] = np.array([1.9, 2.1, 0.5, 3.99])
    q[::-1] = np.array([1.9, 2.1, 0.5, 3.99])
    assert_same(q, n)


def test_fill():
    n = np.arange(12.0).reshape(3, 4)
    q = NDArray(n.copy())
    q[:, ::-2].fill(7)
    n[:, ::-2] = 7
    assert_same(q, n)


# ----------------------------------------------------------------------------------------------
# elementwise


BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


def operand(draw, x):
    """x as a quill array, plain or as a view with other strides (flipped / transposed)."""
    kind = draw(st.sampled_from(["plain", "flipped", "transposed"]))
    if kind == "flipped" and x.ndim:
        return NDArray(np.flip(x).copy()).flip()
    if kind == "transposed" and x.ndim >= 2:
        return NDArray(np.ascontiguousarray(x.T)).permute(*reversed(range(x.ndim)))
    return q_of(x)


@SETTINGS
@given(
    st.data(),
    st.sampled_from(DTYPES),
    st.sampled_from(DTYPES),
    st.sampled_from(sorted(BINARY) + ["maximum", "minimum"]),
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4),
)
def test_binary_arrays_match_numpy(data, da, db, op, shapes):
    assume(not (op == "sub" and da == db == "bool"))  # NumPy and quill refuse it
    a = data.draw(arrays(da, shapes.input_shapes[0]))
    b = data.draw(arrays(db, shapes.input_shapes[1]))
    qa, qb = operand(data.draw, a), operand(data.draw, b)
    with np.errstate(all="ignore"):
        if op in BINARY:
            want = BINARY[op](a, b)
            got = BINARY[op](qa, qb)
            # a NumPy array as the right operand keeps its dtype
            got_np = BINARY[op](qa, b)
        else:
            want = getattr(np, op)(a, b)
            got = getattr(qa, op)(qb)
            got_np = getattr(qa, op)(b)
    want = np.asarray(want)
    assert_close(got, want)
    assert_close(got_np, want)


def py_scalar(dtype_for_array):
    ints = st.integers(0, 50) if dtype_for_array == "uint8" else st.integers(-50, 50)
    return ints | st.floats(-50, 50, width=32) | st.booleans()


@SETTINGS
@given(
    st.data(),
    st.sampled_from(DTYPES),
    st.sampled_from(sorted(BINARY)),
    st.booleans(),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)
def test_binary_python_scalars_match_numpy_2(data, dtype, op, reflected, shape):
    """Python scalars are weak (NEP 50): float32 * 2.0 stays float32, uint8 + 1 stays uint8,
    an int array with a float gives float64."""
    s = data.draw(py_scalar(dtype))
    assume(not (op == "sub" and dtype == "bool" and isinstance(s, bool)))
    a = data.draw(arrays(dtype, shape))
    qa = operand(data.draw, a)
    f = BINARY[op]
    with np.errstate(all="ignore"):
        if reflected:
            want, got = f(s, a), f(s, qa)
        else:
            want, got = f(a, s), f(qa, s)
    assert_close(got, np.asarray(want))


@pytest.mark.parametrize(
    "dtype, scalar, want_dtype",
    [
        ("float32", 2.0, "float32"),
        ("float32", 2, "float32"),
        ("float64", 2.0, "float64"),
        ("uint8", 2, "uint8"),
        ("int32", 2, "int32"),
        ("int32", 2.0, "float64"),
        ("uint8", 0.5, "float64"),
        ("bool", 1, "int64"),
        ("bool", True, "bool"),
        ("bool", 1.5, "float64"),
    ],
)
def test_weak_scalar_promotion(dtype, scalar, want_dtype):
    q = NDArray(np.ones(3, dtype))
    assert (q * scalar).dtype == want_dtype
    assert (scalar * q).dtype == want_dtype
    assert (q + scalar).dtype == want_dtype
    assert (np.ones(3, dtype) * scalar).dtype.name == want_dtype  # the NumPy 2 rule itself


def test_integer_overflow_wraps_like_numpy():
    a = np.array([200, 3, 255], np.uint8)
    q = NDArray(a)
    assert_same(q + q, a + a)
    assert_same(q * q, a * a)
    assert_same(q - 5, a - 5)
    assert_same(5 - q, 5 - a)
    assert_same(-q, -a)


@SETTINGS
@given(
    st.data(),
    st.sampled_from(["float32", "float64", "int32", "int64", "uint8"]),
    st.booleans(),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)
def test_pow_matches_numpy(data, dtype, reflected, shape):
    if dtype in FLOATS:
        a = data.draw(arrays(dtype, shape, 0, 5).map(lambda x: x + 0.5))
        s = data.draw(st.integers(0, 3) | st.floats(0.5, 2.5, width=32))
    else:
        a = data.draw(arrays(dtype, shape, 0, 5))
        s = data.draw(st.integers(0, 3) | st.floats(0.5, 2.5, width=32))
    qa = operand(data.draw, a)
    if reflected:
        s = abs(s) + 1
        want, got = s ** a, s ** qa
    else:
        want, got = a ** s, qa ** s
    assert_close(got, np.asarray(want))
    # array ** array
    b = data.draw(arrays(dtype, shape, 0, 3))
    assert_close(qa ** q_of(b), a ** b)


@SETTINGS
@given(
    st.data(),
    st.sampled_from(["float32", "float64", "int32", "int64"]),
    st.sampled_from(["log", "exp", "tanh", "sqrt"]),
    hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
)
def test_unary_matches_numpy(data, dtype, op, shape):
    lo, hi = (1, 10) if dtype.startswith("int") else (0.125, 10)
    a = data.draw(arrays(dtype, shape, lo, hi))
    if dtype in FLOATS:
        a = np.maximum(a, np.asarray(0.01, dtype))
    qa = operand(data.draw, a)
    assert_close(getattr(qa, op)(), getattr(np, op)(a))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
def test_neg_and_abs(dtype):
    a = np.array([[0, 3, 100], [7, 1, 2]], dtype)
    if dtype not in ("uint8",):
        a[0, 1] = -a[0, 1]
    q = NDArray(a)[:, ::-1]
    assert_same(-q, -a[:, ::-1])
    assert_same(abs(q), abs(a[:, ::-1]))


# ----------------------------------------------------------------------------------------------
# reductions


@st.composite
def reduce_axes(draw, ndim):
    kind = draw(st.sampled_from(["none", "int", "tuple", "tuple", "empty"]))
    if kind == "empty":
        return ()
    if kind == "none" or ndim == 0:
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)


@SETTINGS
@given(
    st.data(),
    st.sampled_from(DTYPES),
    st.sampled_from(["sum", "max"]),
    st.booleans(),
    hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
)
def test_reductions_match_numpy(data, dtype, op, keepdims, shape):
    a = data.draw(arrays(dtype, shape))
    axis = data.draw(reduce_axes(a.ndim))
    if op == "max":
        reduced = range(a.ndim) if axis is None else np.atleast_1d(np.array(axis)) % max(a.ndim, 1)
        assume(all(a.shape[i] > 0 for i in reduced))  # max of nothing is an error
    # reduce a strided view (flipped, transposed) of the same values
    qa = operand(data.draw, a)
    want = np.asarray(getattr(np, op)(a, axis=axis, keepdims=keepdims))
    got = getattr(qa, op)(axis=axis, keepdims=keepdims)
    if want.dtype.kind == "f":
        bound = 1e-5 if want.dtype == np.float32 else 1e-12
        scale = np.sum(np.abs(a), axis=axis, keepdims=keepdims) if op == "sum" else np.abs(want)
        assert got.shape == want.shape and got.dtype == want.dtype.name
        assert np.all(np.abs(got.numpy() - want) <= bound * scale + 1e-30)
    else:
        assert_same(got, want)


def test_reduction_examples():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    q = NDArray(x)
    assert_same(q.sum(), np.array(276.0, np.float32))
    assert_same(q.sum(axis=(0, 2)), x.sum(axis=(0, 2)))
    assert_same(q.sum(axis=-1, keepdims=True), x.sum(axis=-1, keepdims=True))
    assert_same(q.max(axis=1), x.max(axis=1))
    assert_same(q[:, ::-1].max(axis=(1, 2), keepdims=True), x[:, ::-1].max(axis=(1, 2), keepdims=True))
    assert_same(q.permute(2, 0, 1).sum(axis=0), x.transpose(2, 0, 1).sum(axis=0))
    assert_same(NDArray(np.zeros((0, 3), np.float32)).sum(axis=0), np.zeros(3, np.float32))
    assert_same(NDArray(np.array([1, 2], np.int32)).sum(), np.array(3, np.int64))
    assert_same(NDArray(np.array([True, True, False])).sum(), np.array(2, np.int64))


# ----------------------------------------------------------------------------------------------
# matmul


@SETTINGS
@given(
    st.data(),
    st.sampled_from(DTYPES),
    st.sampled_from(DTYPES),
    hnp.mutually_broadcastable_shapes(signature="(m?,n),(n,p?)->(m?,p?)", max_dims=4, max_side=4),
)
def test_matmul_matches_numpy(data, da, db, shapes):
    sa, sb = shapes.input_shapes
    a = data.draw(arrays(da, sa, -10, 10))
    b = data.draw(arrays(db, sb, -10, 10))
    qa, qb = operand(data.draw, a), operand(data.draw, b)
    want = np.asarray(a @ b)
    got = qa @ qb
    assert got.shape == want.shape
    assert got.dtype == want.dtype.name
    if want.dtype.kind == "f":
        bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        eps = 1e-5 if want.dtype == np.float32 else 1e-12
        assert np.all(np.abs(got.numpy() - want) <= eps * bound + 1e-30)
    else:
        np.testing.assert_array_equal(got.numpy(), want)
    # a NumPy array on the right
    assert (qa @ b).shape == want.shape


def test_matmul_examples():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    v = rng.standard_normal(4).astype(np.float32)
    c = rng.standard_normal((2, 1, 3, 4))
    d = rng.standard_normal((5, 4, 2))
    assert_close(NDArray(a) @ NDArray(b), a @ b)
    assert_close(NDArray(a) @ NDArray(v), a @ v)
    assert_close(NDArray(v) @ NDArray(b), v @ b)
    assert_close(NDArray(v) @ NDArray(v), np.asarray(v @ v))
    assert_close(NDArray(c) @ NDArray(d), c @ d)
    # transposed and reversed views
    assert_close(NDArray(b).permute(1, 0) @ NDArray(a).permute(1, 0), b.T @ a.T)
    assert_close(NDArray(a)[::-1, ::2] @ NDArray(b)[::2, ::-1], a[::-1, ::2] @ b[::2, ::-1])
    # K = 0: zeros
    assert_same(NDArray(np.ones((2, 0))) @ NDArray(np.ones((0, 3))), np.zeros((2, 3)))
