"""A reliability fuzz of quill's NDArray against NumPy 2 (issue 48): random view chains (permute,
stepped and negative-step slices, broadcast, reshape, size-0 and size-1 dims, rank 0..6), then
random op arguments: elementwise binary ops with mixed dtypes and hostile Python scalars (inf,
nan, -0.0, huge ints, bools), floor_divide / remainder / power, unary ops, reductions with axes,
keepdims and dtype=, setitem with scalars and arrays (through read-only broadcast views too) and
boolean masks, over every integer width NumPy has (int8..int64, uint8..uint64), bool and the
floats. Each case must give what NumPy gives: the same values and dtype, or an exception of the
same class (NumPy's own exception classes are compared by their builtin base).
Fixed seed (`derandomize=True`), a few thousand cases."""
import math
import operator
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import quill.array_api as xp
from quill.backend_ndarray import NDArray

FUZZ = settings(
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool", "int8", "int16", "uint16",
          "uint32", "uint64"]
STEPS = [-3, -2, -1, 1, 2, 3]
BUILTIN_ERRORS = (OverflowError, ZeroDivisionError, IndexError, TypeError, ValueError)

# Python scalars that have broken array libraries: limits of every dtype, past i64, specials.
HOSTILE = [
    0, 1, -1, 2, 3, 7, -7, 255, 256, -129, 2**31 - 1, -(2**31), 2**31, 2**40, 2**63 - 1, -(2**63),
    2**63, 2**64, 2**70, -(2**70), True, False, 0.0, -0.0, 0.5, -0.5, 2.5, -1.5, 1e300, -1e-300,
    math.inf, -math.inf, math.nan, 3.0,
]
SCALARS = st.one_of(st.sampled_from(HOSTILE), st.integers(-300, 300), st.floats(width=64))


def element_values(dtype):
    """Array elements, specials included for floats (small ints keep powers in range)."""
    if dtype == "bool":
        return st.booleans()
    if dtype == "uint8":
        return st.integers(0, 255)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        small = st.integers(max(-9, int(info.min)), 9)
        return st.one_of(small, st.sampled_from([int(info.min), int(info.max)]))
    width = 32 if dtype == "float32" else 64
    return st.one_of(
        st.floats(-50, 50, width=width),
        st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 0.5, -2.5]),
    )


SHAPES = st.lists(st.sampled_from([0, 1, 1, 2, 3, 4]), max_size=6).map(tuple).filter(
    lambda s: int(np.prod(s)) <= 256
)


def builtin_class(e):
    """The builtin exception class an exception is (NumPy's classes subclass these)."""
    for c in BUILTIN_ERRORS:
        if isinstance(e, c):
            return c
    return type(e)


def run(f):
    """(result, None) or (None, builtin exception class), NumPy's warnings silenced."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return f(), None
        except BUILTIN_ERRORS as e:
            return None, builtin_class(e)


def assert_matches(q_out, n_out, what):
    """q_out (quill result or error class) equals n_out (NumPy's)."""
    (q, qe), (n, ne) = q_out, n_out
    if ne is not None:
        assert qe is ne, f"{what}: NumPy raised {ne.__name__}, quill gave {q if qe is None else qe.__name__}"
        return
    n = np.asarray(n)
    assert qe is None, f"{what}: quill raised {qe.__name__}, NumPy gave {n!r}"
    assert q.dtype == n.dtype.name, f"{what}: dtype {q.dtype}, NumPy {n.dtype.name}"
    got = q.numpy()
    assert got.shape == n.shape, f"{what}: shape {got.shape}, NumPy {n.shape}"
    if n.dtype.kind == "f":
        same = (got == n) | (np.isnan(got) & np.isnan(n))
        assert same.all(), f"{what}: {got!r} vs NumPy {n!r}"
        # Signed zeros too (floor_divide and remainder define them).
        zeros = (n == 0) & (got == 0)
        assert (np.signbit(got[zeros]) == np.signbit(n[zeros])).all(), f"{what}: signed zeros {got!r} vs {n!r}"
    else:
        np.testing.assert_array_equal(got, n, err_msg=what)


def assert_close(q_out, n_out, what, scale=1.0):
    """As assert_matches for results of transcendental kernels and float sums (whose order of
    operations may differ): equal to a few ulps of the result dtype, relative to `scale` (for a
    sum: the sum of the magnitudes, which bounds the rounding of any order)."""
    (q, qe), (n, ne) = q_out, n_out
    if ne is not None or qe is not None or np.asarray(n).dtype.kind != "f":
        return assert_matches(q_out, n_out, what)
    n = np.asarray(n)
    assert q.dtype == n.dtype.name, f"{what}: dtype {q.dtype}, NumPy {n.dtype.name}"
    rtol = 2e-6 if n.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(q.numpy(), n, rtol=rtol, atol=rtol * scale, equal_nan=True,
                               err_msg=what)


def magnitude(n):
    """The sum of |x| over the finite elements (as float64): a bound on summation error."""
    x = np.abs(n.astype(np.float64))
    return max(1.0, float(x[np.isfinite(x)].sum()))


# ----------------------------------------------------------------------------------------------
# view chains


@st.composite
def basic_index(draw, shape):
    """A NumPy basic index: in-range ints, slices with any bounds and non-zero steps, None."""
    items = []
    for n in shape[: draw(st.integers(0, len(shape)))]:
        if n > 0 and draw(st.integers(0, 3)) == 0:
            items.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.none() | st.integers(-n - 2, n + 2)
            items.append(slice(draw(bound), draw(bound), draw(st.none() | st.sampled_from(STEPS))))
    for _ in range(draw(st.integers(0, 1))):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.append(Ellipsis)
    return tuple(items)


def np_index(n, idx):
    """n[idx], as a view also where NumPy would give a scalar."""
    return n[idx if Ellipsis in idx else idx + (Ellipsis,)]


@st.composite
def chain(draw, dtype=None, small=False):
    """(NumPy array, quill array) after 0-4 random view ops on a random array of rank 0..6;
    `small`: elements in -1..1 (and +-0.5 for floats)."""
    dtype = dtype or draw(st.sampled_from(DTYPES))
    values = element_values(dtype)
    if small and dtype != "bool":
        values = st.sampled_from([0, 1] if dtype.startswith("uint") else [0, 1, -1])
        if dtype.startswith("float"):
            values = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -0.5])
    base = draw(hnp.arrays(np.dtype(dtype), draw(SHAPES), elements=values))
    n, q = base, NDArray(base)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["index", "index", "permute", "broadcast", "reshape", "compact"]))
        if op == "index":
            idx = draw(basic_index(n.shape))
            n, q = np_index(n, idx), q[idx]
        elif op == "permute":
            axes = draw(st.permutations(range(n.ndim)))
            n, q = np.transpose(n, axes), q.permute(tuple(axes))
        elif op == "broadcast":
            lead = draw(st.lists(st.sampled_from([0, 1, 2, 3]), max_size=max(0, 6 - n.ndim)))
            target = tuple(lead) + tuple(draw(st.sampled_from([1, 2, 3])) if d == 1 else d for d in n.shape)
            if len(target) > 6 or np.prod(target) > 256:
                continue
            n, q = np.broadcast_to(n, target), q.broadcast_to(target)
        elif op == "reshape":
            target = list(n.shape)
            if draw(st.booleans()):
                target = [int(np.prod(target))] if target else [1]
            if draw(st.booleans()):
                target.insert(draw(st.integers(0, len(target))), 1)
            n, q = n.reshape(target), q.reshape(tuple(target))
        else:
            # quill's compact() copies what is not contiguous or is read-only (copies are
            # writable); NumPy's copy() stands for it.
            if not n.flags.writeable or not n.flags.c_contiguous:
                n = n.copy()
            q = q.compact()
    return n, q


# ----------------------------------------------------------------------------------------------
# elementwise

BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "lt": operator.lt, "eq": operator.eq, "ge": operator.ge,
    "and": operator.and_, "xor": operator.xor,
}


@FUZZ
@given(st.data(), st.sampled_from(sorted(BINARY)))
def test_binary_with_python_scalars(data, name):
    """array op scalar and scalar op array, the scalar weak (NEP 50) and possibly hostile."""
    n, q = data.draw(chain())
    s = data.draw(SCALARS)
    f = BINARY[name]
    what = f"{n.dtype}{n.shape} {name} {s!r}"
    check = assert_close if name == "pow" else assert_matches
    check(run(lambda: f(q, s)), run(lambda: f(n, s)), what)
    check(run(lambda: f(s, q)), run(lambda: f(s, n)), f"reversed {what}")


@FUZZ
@given(st.data(), st.sampled_from(sorted(BINARY)))
def test_binary_arrays_of_mixed_dtypes(data, name):
    """array op array with broadcasting and NumPy 2 promotion over every dtype pair."""
    n1, q1 = data.draw(chain())
    # The second operand broadcasts against the first: trailing dims of n1, some set to 1.
    tail = n1.shape[data.draw(st.integers(0, n1.ndim)):]
    shape = tuple(1 if data.draw(st.booleans()) else d for d in tail)
    dtype = data.draw(st.sampled_from(DTYPES))
    n2 = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=element_values(dtype)))
    q2 = NDArray(n2)
    f = BINARY[name]
    what = f"{n1.dtype}{n1.shape} {name} {n2.dtype}{n2.shape}"
    check = assert_close if name == "pow" else assert_matches
    check(run(lambda: f(q1, q2)), run(lambda: f(n1, n2)), what)


UNARY = {
    "neg": (operator.neg, np.negative), "abs": (abs, np.abs),
    "floor": (lambda a: a.floor(), np.floor), "sqrt": (lambda a: a.sqrt(), np.sqrt),
    "exp": (lambda a: a.exp(), np.exp), "isnan": (lambda a: a.isnan(), np.isnan),
    "sign": (lambda a: a.sign(), np.sign),
}


@FUZZ
@given(st.data(), st.sampled_from(sorted(UNARY)))
def test_unary(data, name):
    n, q = data.draw(chain())
    fq, fn = UNARY[name]
    assert_close(run(lambda: fq(q)), run(lambda: fn(n)), f"{name} {n.dtype}{n.shape}")


# ----------------------------------------------------------------------------------------------
# reductions


@st.composite
def axes(draw, ndim):
    if ndim == 0 or draw(st.integers(0, 3)) == 0:
        return None
    picked = draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique_by=lambda a: a % ndim))
    return picked[0] if len(picked) == 1 and draw(st.booleans()) else tuple(picked)


REDUCE = ["sum", "prod", "max", "min", "mean", "any", "all"]


@FUZZ
@given(st.data(), st.sampled_from(REDUCE), st.booleans())
def test_reductions(data, name, keepdims):
    n, q = data.draw(chain())
    ax = data.draw(axes(n.ndim))
    what = f"{name} {n.dtype}{n.shape} axis={ax} keepdims={keepdims}"
    fn = getattr(np, name)
    n_out = run(lambda: fn(n, axis=ax, keepdims=keepdims))
    q_out = run(lambda: getattr(xp, name)(q, axis=ax, keepdims=keepdims))
    assert_close(q_out, n_out, what, magnitude(n) if name in ("sum", "mean") else 1.0)


@FUZZ
@given(st.data(), st.sampled_from(["sum", "prod"]), st.sampled_from(DTYPES[:5]))
def test_sum_prod_with_dtype(data, name, dtype):
    """The Array API's sum / prod with dtype=: the result has that dtype (NumPy's dtype=).
    Elements of magnitude <= 1 (and halves): a float product of any order is then exact or
    underflows alike, never inf * 0 in one order and not the other."""
    n, q = data.draw(chain(small=True))
    ax = data.draw(axes(n.ndim))
    n_out = run(lambda: getattr(np, name)(n, axis=ax, dtype=dtype))
    q_out = run(lambda: getattr(xp, name)(q, axis=ax, dtype=dtype))
    assert_close(q_out, n_out, f"{name} {n.dtype}{n.shape} axis={ax} dtype={dtype}", magnitude(n))


# ----------------------------------------------------------------------------------------------
# writes


@FUZZ
@given(st.data())
def test_setitem(data):
    """view[index] = value: hostile Python scalars (range and NaN checks), arrays of any dtype
    (cast unsafely, as NumPy), through read-only broadcast views too."""
    n, q = data.draw(chain())
    idx = data.draw(basic_index(n.shape))
    if data.draw(st.booleans()):
        value = data.draw(SCALARS)
        qv = value
    else:
        # Small finite values: NumPy's unsafe casts of NaN or out-of-range floats to integers
        # are platform-defined.
        dtype = data.draw(st.sampled_from(DTYPES))
        shape = np_index(np.empty(n.shape), idx).shape
        shape = shape[data.draw(st.integers(0, len(shape))):]
        value = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=st.integers(0, 100).map(
            lambda v: np.array(v).astype(dtype).item())))
        qv = NDArray(value)
    what = f"{n.dtype}{n.shape} writeable={n.flags.writeable} [{idx}] = {value!r}"

    def np_set():
        n[idx] = value
        return n

    def q_set():
        q[idx] = qv
        return q

    assert_matches(run(q_set), run(np_set), what)


@FUZZ
@given(st.data())
def test_fill(data):
    n, q = data.draw(chain())
    value = data.draw(SCALARS)
    n_out = run(lambda: (n.fill(value), n)[1])
    assert_matches(run(lambda: (q.fill(value), q)[1]), n_out, f"{n.dtype}{n.shape}.fill({value!r})")


@FUZZ
@given(st.data(), st.sampled_from(["+=", "//=", "*="]))
def test_in_place_ops(data, op):
    """In-place ops through views: read-only views refuse, same_kind casting, scalars checked."""
    n, q = data.draw(chain())
    s = data.draw(st.sampled_from([1, 2, -1, 0.5, 300, True]))
    f = {"+=": operator.iadd, "//=": operator.ifloordiv, "*=": operator.imul}[op]
    assert_matches(run(lambda: (f(q, s), q)[1]), run(lambda: f(n, s)), f"{n.dtype}{n.shape} {op} {s!r}")


@FUZZ
@given(st.data())
def test_boolean_masks(data):
    """x[mask] and x[mask] = v, masks of the leading dims' shape or a wrong one."""
    n, q = data.draw(chain())
    k = data.draw(st.integers(0, n.ndim))
    shape = list(n.shape[:k])
    if shape and data.draw(st.integers(0, 3)) == 0:
        shape[data.draw(st.integers(0, k - 1))] = data.draw(st.integers(0, 4))
    mask = data.draw(hnp.arrays(np.bool_, tuple(shape)))
    qm = NDArray(mask)
    assert_matches(run(lambda: q[qm]), run(lambda: n[mask]), f"{n.shape}[mask {mask.shape}]")
    if n.flags.writeable:
        # NumPy may write part of the array before failing; compare only a clean success.
        n2 = n.copy()
        q2 = NDArray(n2.copy())

        def np_set():
            n2[mask] = 1
            return n2

        def q_set():
            q2[qm] = 1
            return q2

        assert_matches(run(q_set), run(np_set), f"{n.shape}[mask {mask.shape}] = 1")


# ----------------------------------------------------------------------------------------------
# the reported cases, spelled out


def test_reported_floor_divide_cases():
    b = np.array([True, False])
    for n, s in [(b, 0.5), (b, -1), (np.array([3, -7], np.int32), 0.5),
                 (np.array([np.inf, -np.inf]), 1), (np.array([-2**31], np.int32), -1),
                 (np.array([5, -5], np.int64), 0), (np.array([1.0, -1.0, 0.0]), 0.0)]:
        assert_matches(run(lambda: NDArray(n) // s), run(lambda: n // s), f"{n!r} // {s!r}")
    inf = np.array([np.inf, -np.inf])
    assert_matches(run(lambda: 1 // NDArray(inf)), run(lambda: 1 // inf), "1 // [inf, -inf]")
    # Float ops convert integer operands to float first: any Python int goes, unchecked.
    u = np.array([0, 3], np.uint8)
    for s in [-1, 300, 2**70]:
        assert_matches(run(lambda: NDArray(u) / s), run(lambda: u / s), f"u8 / {s}")
        assert_matches(run(lambda: s / NDArray(u)), run(lambda: s / u), f"{s} / u8")
    assert_matches(run(lambda: NDArray(u).atan2(-1)), run(lambda: np.arctan2(u, -1)), "atan2")


@pytest.mark.parametrize("dtype, value", [("uint8", -1), ("int32", 2**40), ("int32", math.nan),
                                          ("int32", math.inf), ("int64", 2**70), ("uint8", 300.0)])
def test_reported_setitem_and_fill_cases(dtype, value):
    n = np.zeros(3, dtype)

    def np_set():
        n[:] = value

    q = NDArray(np.zeros(3, dtype))
    _, ne = run(np_set)
    _, qe = run(lambda: q.__setitem__(slice(None), value))
    assert ne is not None and qe is ne, (ne, qe)
    assert run(lambda: q.fill(value))[1] is ne
    assert run(lambda: xp.full((2,), value, dtype=getattr(xp, dtype)))[1] is ne
    np.testing.assert_array_equal(q.numpy(), np.zeros(3, dtype))


def test_reported_negative_integer_powers():
    a = np.array([-1, 2])
    for f in [lambda x: 0 ** x, lambda x: x ** -1, lambda x: x ** x, lambda x: xp.pow(x, -1)]:
        _, qe = run(lambda: f(NDArray(a)))
        assert qe is ValueError
    assert run(lambda: 0 ** a)[1] is ValueError


def test_reported_broadcast_view_writes():
    a = NDArray(np.arange(4))
    b = xp.broadcast_to(a, (3, 4))
    for write in [lambda: b.__setitem__(1, 1), lambda: b[1].fill(1),
                  lambda: b[1].__iadd__(1), lambda: b[:, 1].__setitem__(slice(None), 5)]:
        assert run(write)[1] is ValueError
    np.testing.assert_array_equal(a.numpy(), np.arange(4))
    # Shared with NumPy and memoryview read-only, as NumPy's own broadcast views are.
    assert memoryview(b[1]).readonly and not np.asarray(b).flags.writeable
    assert not memoryview(a).readonly
    c = b[1].compact()
    c[0] = 9
    assert c.numpy().tolist() == [9, 1, 2, 3] and a.numpy().tolist() == [0, 1, 2, 3]
