"""Every integer width NumPy has (int8, int16, int32, int64, uint8, uint16, uint32, uint64) beside
bool and the floats, checked against NumPy 2 itself: promotion between every pair of dtypes,
casts of edge values between every pair, the result dtypes NumPy gives (sums of unsigned
integers are uint64, bool ** bool and bool // bool are int8, sqrt of int16 is float32), values
past i64 in uint64, NEP 50 range checks of Python ints, matmul and indexing with narrow ints,
and the ways an array crosses to NumPy (copy, buffer protocol, DLPack)."""
import itertools
import math
import warnings

import numpy as np
import pytest

import quill.array_api as xp
from quill.backend_ndarray import NDArray

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
ALL = ["bool"] + INTS + FLOATS


def q_of(n):
    return NDArray(n)


def edge_values(dtype):
    """Values that sit on the limits of `dtype` and of its neighbours."""
    if dtype == "bool":
        return np.array([False, True])
    if dtype in INTS:
        i = np.iinfo(dtype)
        vals = {0, 1, 2, 7, i.max, i.max - 1, i.min, i.min + 1, 127, 128, 255, 256, 65535,
                2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1}
        if i.min < 0:
            vals |= {-1, -2, -128, -129, -32768, -(2**31), -(2**63)}
        return np.array(sorted(v for v in vals if i.min <= v <= i.max), dtype=dtype)
    specials = [0.0, -0.0, 0.5, -0.5, 1.5, -2.7, 127.9, 128.0, -129.0, 255.5, 300.0, 65504.0,
                70000.0, -70000.0, 2.0**31, -(2.0**31) - 1, 3e9, -3e9, 2.0**32, 1e10, 2.0**63,
                -(2.0**63), 1.8e19, 1e20, -1e20, math.inf, -math.inf, math.nan]
    with np.errstate(all="ignore"):
        return np.array(specials, dtype=dtype)


def quiet(f):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f()


@pytest.mark.parametrize("a, b", list(itertools.product(ALL, ALL)))
def test_promotion_of_every_pair_is_numpys(a, b):
    x, y = np.ones(2, a), np.ones(2, b)
    want = np.result_type(x, y)
    got = q_of(x) + q_of(y) if (a, b) != ("bool", "bool") else q_of(x) & q_of(y)
    assert got.dtype == want.name, f"{a} + {b}: {got.dtype}, NumPy {want}"
    assert xp.result_type(xp.asarray(x), xp.asarray(y)) == want.name


@pytest.mark.parametrize("src", ALL)
def test_casts_of_edge_values_are_numpys(src):
    """astype from `src` to every dtype, on x86-64 (NumPy's undefined float -> int casts are
    what x86's conversion instructions give, which quill reproduces)."""
    n = edge_values(src)
    q = q_of(n)
    for dst in ALL:
        want = quiet(lambda: n.astype(dst))
        got = q.astype(dst).numpy()
        assert got.dtype == want.dtype
        if want.dtype.kind == "f":
            np.testing.assert_array_equal(got, want, err_msg=f"{src} -> {dst}")
            assert (np.signbit(got) == np.signbit(want)).all(), f"{src} -> {dst}"
        else:
            assert got.tolist() == want.tolist(), f"{src} {n.tolist()} -> {dst}"


@pytest.mark.parametrize("dtype", ["bool"] + INTS)
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_sum_and_prod_widen_as_numpy(dtype, name):
    rng = np.random.default_rng(3)
    n = edge_values(dtype)[rng.integers(0, len(edge_values(dtype)), size=(3, 5))]
    q = q_of(n)
    for axis in (None, 0, 1):
        want = quiet(lambda: getattr(np, name)(n, axis=axis))
        got = getattr(q, name)(axis=axis) if name == "sum" else xp.prod(q, axis=axis)
        got = got.numpy()
        assert got.dtype == want.dtype, f"{name} {dtype}: {got.dtype}, NumPy {want.dtype}"
        assert np.array_equal(got.reshape(want.shape), want), f"{name} {dtype} axis={axis}"


@pytest.mark.parametrize("op", ["pow", "floordiv", "mod"])
def test_bool_arithmetic_gives_int8(op):
    n = np.array([[False, True], [True, True]])
    m = np.array([True, True])
    f = {"pow": lambda a, b: a ** b, "floordiv": lambda a, b: a // b,
         "mod": lambda a, b: a % b}[op]
    want = quiet(lambda: f(n, m))
    got = f(q_of(n), q_of(m)).numpy()
    assert want.dtype == np.int8 and got.dtype == np.int8
    assert np.array_equal(got, want)
    # bool ** 2: the weak Python int keeps the int8 loop.
    assert (q_of(n) ** 2).dtype == quiet(lambda: n ** 2).dtype.name


@pytest.mark.parametrize("dtype", ["bool"] + INTS)
def test_float_functions_pick_numpys_float(dtype):
    n = edge_values(dtype)[:4]
    for f in ["sqrt", "exp", "sin"]:
        want = quiet(lambda: getattr(np, f)(n))
        got = getattr(xp, f)(q_of(n))
        assert got.dtype == want.dtype.name, f"{f}({dtype})"
    want = quiet(lambda: np.arctan2(n, n))
    assert xp.atan2(q_of(n), q_of(n)).dtype == want.dtype.name
    want = quiet(lambda: n / n)
    assert (q_of(n) / q_of(n)).dtype == want.dtype.name


@pytest.mark.parametrize("dtype", INTS)
def test_wrapping_arithmetic_matches_numpy(dtype):
    n = edge_values(dtype)
    a, b = np.meshgrid(n, n)
    qa, qb = q_of(a), q_of(b)
    for f in [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y,
              lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x & y, lambda x, y: x ^ y,
              lambda x, y: x < y, lambda x, y: x == y]:
        want = quiet(lambda: f(a, b))
        got = f(qa, qb).numpy()
        assert got.dtype == want.dtype
        assert np.array_equal(got, want), dtype
    want = quiet(lambda: -n)
    assert np.array_equal((-q_of(n)).numpy(), want)
    want = quiet(lambda: np.abs(n))
    assert np.array_equal(xp.abs(q_of(n)).numpy(), want)
    small = n[np.abs(n.astype(np.float64)) <= 9]
    e = np.array([0, 1, 2, 3, 5, 7], dtype=dtype)
    want = quiet(lambda: np.power.outer(small, e))
    got = (q_of(small).reshape((small.size, 1)) ** q_of(e)).numpy()
    assert np.array_equal(got, want)


def test_uint64_keeps_values_past_int64():
    n = np.array([2**64 - 1, 2**63, 2**63 + 5, 3], dtype=np.uint64)
    q = q_of(n)
    assert q.numpy().tolist() == n.tolist()
    assert (q + 1).numpy().tolist() == (n + np.uint64(1)).tolist()
    assert (q.max()).numpy().item() == 2**64 - 1
    assert q.sum().numpy().item() == int(n.sum())
    assert (q > 2**63).numpy().tolist() == (n > 2**63).tolist()
    assert (q + (2**64 - 1)).numpy().tolist() == quiet(lambda: n + (2**64 - 1)).tolist()
    # uint64 with a signed integer: NumPy goes to float64.
    assert (q + q_of(np.array([1], np.int64))).dtype == "float64"


@pytest.mark.parametrize("dtype, value", [("int8", 128), ("int8", -129), ("uint16", -1),
                                          ("uint16", 65536), ("uint32", 2**32),
                                          ("uint64", -1), ("uint64", 2**64), ("int16", 2**15)])
def test_python_ints_out_of_range_raise_overflow(dtype, value):
    n = np.zeros(3, dtype)
    with pytest.raises(OverflowError):
        n + value
    with pytest.raises(OverflowError):
        q_of(n) + value
    with pytest.raises(OverflowError):
        q_of(n)[0] = value
    # In range, the dtype stays (NEP 50: the Python int is weak).
    i = np.iinfo(dtype)
    assert (q_of(n) + int(i.max)).dtype == dtype
    assert (q_of(n) + int(i.max)).numpy().tolist() == (n + i.max).tolist()


@pytest.mark.parametrize("dtype", INTS)
def test_matmul_wraps_like_numpy(dtype):
    rng = np.random.default_rng(7)
    i = np.iinfo(dtype)
    a = rng.integers(max(i.min, -100), min(i.max, 100), size=(5, 7), endpoint=True).astype(dtype)
    b = rng.integers(max(i.min, -100), min(i.max, 100), size=(7, 3), endpoint=True).astype(dtype)
    want = quiet(lambda: a @ b)
    got = (q_of(a) @ q_of(b)).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("index_dtype", INTS)
def test_take_accepts_every_integer_index_dtype(index_dtype):
    n = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    ix = np.array([2, 0, 3], dtype=index_dtype)
    got = xp.take(q_of(n), q_of(ix), axis=1).numpy()
    assert np.array_equal(got, np.take(n, ix, axis=1))
    if index_dtype.startswith("uint"):
        big = np.array([np.iinfo(index_dtype).max], dtype=index_dtype)
        with pytest.raises(IndexError):
            xp.take(q_of(n), q_of(big), axis=1)


@pytest.mark.parametrize("dtype", INTS)
def test_crossing_to_numpy_keeps_dtype_and_bits(dtype):
    n = edge_values(dtype)
    q = q_of(n)
    assert q.dtype == dtype
    assert q.numpy().dtype == n.dtype and q.numpy().tolist() == n.tolist()
    # Buffer protocol and DLPack share quill's own buffer with NumPy.
    assert np.asarray(memoryview(q)).tolist() == n.tolist()
    assert np.asarray(memoryview(q)).dtype == n.dtype
    d = np.from_dlpack(q)
    assert d.dtype == n.dtype and d.tolist() == n.tolist()
    back = xp.from_dlpack(n)
    assert back.dtype == dtype and back.numpy().tolist() == n.tolist()
    # Strided views through every path.
    v = q[::-2]
    assert np.asarray(memoryview(v.compact())).tolist() == n[::-2].tolist()
    assert repr(q)  # printing every width works


def test_dtype_names_and_errors():
    for name in INTS:
        assert xp.asarray([1, 2], dtype=getattr(xp, name)).dtype == name
        assert xp.iinfo(getattr(xp, name)).max == np.iinfo(name).max
    info = xp.__array_namespace_info__()
    assert set(map(str, info.dtypes(kind="integral"))) == set(INTS)
    with pytest.raises(TypeError, match="unsupported dtype"):
        NDArray(np.zeros(2), dtype="int128")
