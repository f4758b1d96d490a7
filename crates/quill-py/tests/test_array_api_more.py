"""The composed parts of quill.array_api (sorting, searching, sets, cumulative sums,
manipulation, data-type functions, float helpers) against NumPy on random strided inputs with
duplicates, NaNs, signed zeros, empty and size-1 dims."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import quill.array_api as xp
from quill.backend_ndarray import NDArray

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
FLOAT_ELEMS = st.sampled_from([-2.0, -0.5, -0.0, 0.0, 1.0, 1.5, 3.0, np.nan, np.inf, -np.inf])


@st.composite
def strided(draw, dtype="float64", min_dims=1):
    """(quill view, NumPy view of the same values): reversed / stepped / permuted."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=4, min_side=0, max_side=5))
    if dtype == "float64":
        n = draw(hnp.arrays(np.float64, shape, elements=FLOAT_ELEMS))
    else:
        n = draw(hnp.arrays(np.dtype(dtype), shape, elements=st.integers(-5, 5)))
    qv, nv = NDArray(n), n
    if n.ndim:
        idx = tuple(slice(None, None, draw(st.sampled_from([-2, -1, 1, 2]))) for _ in shape)
        qv, nv = qv[idx], nv[idx]
        perm = draw(st.permutations(range(n.ndim)))
        qv, nv = qv.permute(*perm), nv.transpose(perm)
    return qv, np.ascontiguousarray(nv)


def same(got, want):
    want = np.asarray(want)
    got_np = np.asarray(got)
    assert got_np.shape == want.shape, (got_np.shape, want.shape)
    assert got_np.dtype == want.dtype, (got_np.dtype, want.dtype)
    np.testing.assert_array_equal(got_np, want)
    if want.dtype.kind == "f":  # signed zeros too
        np.testing.assert_array_equal(np.signbit(got_np), np.signbit(want))


@SETTINGS
@given(strided(), st.data())
def test_sort_and_argsort_match_numpy_stable(pair, data):
    qv, nv = pair
    axis = data.draw(st.integers(-nv.ndim, nv.ndim - 1))
    np.testing.assert_array_equal(np.asarray(xp.sort(qv, axis=axis)), np.sort(nv, axis=axis))
    same(xp.argsort(qv, axis=axis), np.argsort(nv, axis=axis, kind="stable"))
    # descending and stable: equal elements keep their order (NaN first, as torch)
    flipped = np.flip(nv, axis=axis)
    want = nv.shape[axis] - 1 - np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis=axis)
    got = np.asarray(xp.argsort(qv, axis=axis, descending=True))
    ok = np.take_along_axis(nv, got, axis)
    np.testing.assert_array_equal(ok, np.take_along_axis(nv, want, axis))


@SETTINGS
@given(strided(), st.data())
def test_cumulative_sum_matches_numpy(pair, data):
    qv, nv = pair
    axis = data.draw(st.integers(0, nv.ndim - 1))
    got = xp.cumulative_sum(qv, axis=axis)
    with np.errstate(invalid="ignore"):  # inf + -inf
        want = np.cumsum(nv, axis=axis)
    np.testing.assert_array_equal(np.asarray(got), want)
    init = xp.cumulative_sum(qv, axis=axis, include_initial=True)
    pad = [(0, 0)] * nv.ndim
    pad[axis] = (1, 0)
    np.testing.assert_array_equal(np.asarray(init), np.pad(want, pad))


@SETTINGS
@given(strided("int32"), st.data())
def test_integer_cumsum_is_int64(pair, data):
    qv, nv = pair
    axis = data.draw(st.integers(0, nv.ndim - 1))
    same(xp.cumulative_sum(qv, axis=axis), np.cumsum(nv, axis=axis, dtype=np.int64))


@SETTINGS
@given(strided())
def test_unique_family_matches_numpy(pair):
    qv, nv = pair
    flat = nv.reshape(-1)
    vals, idx, inv, counts = np.unique(flat, return_index=True, return_inverse=True,
                                       return_counts=True, equal_nan=False)
    u = xp.unique_all(qv)
    np.testing.assert_array_equal(np.asarray(u.values), vals)
    same(u.indices, idx.astype(np.int64))
    same(u.inverse_indices, inv.reshape(nv.shape).astype(np.int64))
    same(u.counts, counts.astype(np.int64))
    np.testing.assert_array_equal(np.asarray(xp.unique_values(qv)), vals)
    np.testing.assert_array_equal(np.asarray(xp.unique_counts(qv).counts), counts)
    np.testing.assert_array_equal(np.asarray(xp.unique_inverse(qv).inverse_indices),
                                  inv.reshape(nv.shape))


@SETTINGS
@given(strided(), st.data())
def test_nonzero_take_searchsorted(pair, data):
    qv, nv = pair
    for g, w in zip(xp.nonzero(qv), np.nonzero(nv)):
        same(g, w.astype(np.int64))
    axis = data.draw(st.integers(0, nv.ndim - 1))
    n = nv.shape[axis]
    if n:
        idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=6)), dtype=np.int64)
        np.testing.assert_array_equal(np.asarray(xp.take(qv, NDArray(idx), axis=axis)),
                                      np.take(nv, idx, axis=axis))
    s = np.sort(nv.reshape(-1))
    for side in ["left", "right"]:
        same(xp.searchsorted(NDArray(s), qv, side=side),
             np.searchsorted(s, nv, side=side).astype(np.int64))


@SETTINGS
@given(strided(), st.data())
def test_manipulation_matches_numpy(pair, data):
    qv, nv = pair
    axis = data.draw(st.integers(0, nv.ndim - 1))
    shift = data.draw(st.integers(-7, 7))
    same(xp.roll(qv, shift, axis=axis), np.roll(nv, shift, axis=axis))
    same(xp.roll(qv, shift), np.roll(nv, shift))
    reps = data.draw(st.integers(0, 3))
    same(xp.repeat(qv, reps, axis=axis), np.repeat(nv, reps, axis=axis))
    r = np.array(data.draw(st.lists(st.integers(0, 3), min_size=nv.shape[axis],
                                    max_size=nv.shape[axis])), dtype=np.int64)
    same(xp.repeat(qv, NDArray(r), axis=axis), np.repeat(nv, r, axis=axis))
    t = tuple(data.draw(st.lists(st.integers(0, 2), min_size=1, max_size=3)))
    same(xp.tile(qv, t), np.tile(nv, t))
    dst = data.draw(st.integers(0, nv.ndim - 1))
    same(xp.moveaxis(qv, axis, dst), np.moveaxis(nv, axis, dst))
    for g, w in zip(xp.unstack(qv, axis=axis), [np.take(nv, i, axis) for i in range(nv.shape[axis])]):
        same(g, w)
    if nv.ndim >= 2:
        for k in [-1, 0, 2]:
            same(xp.tril(qv, k=k), np.tril(nv, k))
            same(xp.triu(qv, k=k), np.triu(nv, k))


def test_tensordot_meshgrid_broadcast_arrays():
    a = np.arange(24.0).reshape(2, 3, 4)
    b = np.arange(60.0).reshape(3, 4, 5)
    same(xp.tensordot(NDArray(a), NDArray(b)), np.tensordot(a, b))
    same(xp.tensordot(NDArray(a), NDArray(b.transpose(1, 0, 2)), axes=([1, 2], [1, 0])),
         np.tensordot(a, b.transpose(1, 0, 2), axes=([1, 2], [1, 0])))
    x, y = np.arange(3), np.arange(4.0)
    for ix in ["xy", "ij"]:
        for g, w in zip(xp.meshgrid(NDArray(x), NDArray(y), indexing=ix),
                        np.meshgrid(x, y, indexing=ix)):
            same(g, w)
    for g, w in zip(xp.broadcast_arrays(NDArray(x[:, None]), NDArray(y)),
                    np.broadcast_arrays(x[:, None], y)):
        same(g, w)


def test_float_helpers_and_special_values():
    v = np.array([-2.0, -0.0, 0.0, 1.5, np.inf, -np.inf, np.nan])
    a, b = np.meshgrid(v, v)
    qa, qb = NDArray(a), NDArray(b)
    neg_nan = np.copysign(np.nan, -1.0)
    w = np.append(v, neg_nan)
    for dt in [np.float64, np.float32, np.float16]:
        same(xp.signbit(NDArray(w.astype(dt))), np.signbit(w.astype(dt)))
    same(xp.signbit(NDArray(np.array([-3, 0, 4], np.int32))), np.array([True, False, False]))
    for dt in [np.float64, np.float32, np.float16]:
        same(xp.sign(NDArray(v.astype(dt))), np.sign(v.astype(dt)))  # sign(-0.0) is +0.0
    a2, b2 = np.meshgrid(w, w)
    same(xp.copysign(NDArray(a2), NDArray(b2)), np.copysign(a2, b2))
    np.testing.assert_allclose(np.asarray(xp.hypot(qa, qb)), np.hypot(a, b), rtol=1e-15)
    with np.errstate(invalid="ignore"):
        want = np.logaddexp(a, b)
    np.testing.assert_allclose(np.asarray(xp.logaddexp(qa, qb)), want, rtol=1e-15)
    for name in ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]:
        x = np.array([-0.9, -0.0, 0.0, 0.3, 0.99, 1.5, 100.0, np.inf, np.nan])
        npname = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
                  "acosh": "arccosh", "atanh": "arctanh"}.get(name, name)
        with np.errstate(all="ignore"):
            want = getattr(np, npname)(x)
        np.testing.assert_allclose(np.asarray(getattr(xp, name)(NDArray(x))), want, rtol=1e-14)
        with np.errstate(all="ignore"):
            want32 = getattr(np, npname)(x.astype(np.float32))
        got32 = np.asarray(getattr(xp, name)(NDArray(x.astype(np.float32))))
        assert got32.dtype == np.float32
        np.testing.assert_allclose(got32, want32, rtol=2e-6)


def test_dtype_functions():
    assert xp.result_type(xp.int32, xp.float32) == np.result_type(np.int32, np.float32).name
    assert xp.result_type(xp.uint8, xp.int32, NDArray(np.zeros(2, np.int64))) == "int64"
    assert xp.can_cast(xp.int32, xp.int64) and not xp.can_cast(xp.int64, xp.int32)
    assert not xp.can_cast(xp.bool, xp.int32) and xp.can_cast(xp.float16, xp.float64)
    assert xp.isdtype(xp.int32, "integral") and not xp.isdtype(xp.float32, "integral")
    assert xp.isdtype(xp.float32, ("bool", "real floating"))
    assert xp.finfo(xp.float32).eps == np.finfo(np.float32).eps
    assert xp.iinfo(xp.int32).max == 2 ** 31 - 1
    with pytest.raises(ValueError):
        xp.isdtype(xp.int32, "no such kind")


def test_errors():
    a = NDArray(np.zeros((2, 3)))
    with pytest.raises(IndexError):
        xp.sort(a, axis=2)
    with pytest.raises(ValueError, match="rank-0"):
        xp.nonzero(NDArray(np.float64(1.0)))
    with pytest.raises(ValueError, match="1-D"):
        xp.searchsorted(a, a)
    with pytest.raises(ValueError, match="axis is required"):
        xp.cumulative_sum(a)
    with pytest.raises(ValueError, match="repeats"):
        xp.repeat(a, -1)
    with pytest.raises(ValueError, match="tensordot"):
        xp.tensordot(a, a, axes=1)


@SETTINGS
@given(st.sampled_from(["int32", "int64", "uint8"]), st.data())
def test_bitwise_ops_match_numpy(dtype, data):
    info = np.iinfo(dtype)
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    a = data.draw(hnp.arrays(dtype, shape, elements=st.integers(int(info.min), int(info.max))))
    b = data.draw(hnp.arrays(dtype, shape[1:], elements=st.integers(int(info.min), int(info.max))))
    bits = np.iinfo(dtype).bits
    s = data.draw(hnp.arrays(dtype, shape[1:], elements=st.integers(0, bits - 1)))
    qa, qb, qs = NDArray(a), NDArray(b), NDArray(s)
    same(xp.bitwise_and(qa, qb), a & b)
    same(qa | qb, a | b)
    same(qa ^ qb, a ^ b)
    same(xp.bitwise_invert(qa), ~a)
    same(xp.bitwise_left_shift(qa, qs), np.left_shift(a, s))
    same(qa >> qs, np.right_shift(a, s))
    same(qa & 7, a & np.array(7, dtype))


def test_bitwise_edges_and_errors():
    a = np.array([-8, -1, 5, 2 ** 31 - 1], dtype=np.int32)
    big = np.array([31, 32, 40, 1], dtype=np.int32)
    # shifts of the width or more: 0 for <<, 0 or -1 for >> (NumPy's results on x86)
    same(NDArray(a) << NDArray(np.array([32, 33, 1, 0], np.int32)),
         np.array([0, 0, 10, 2 ** 31 - 1], np.int32))
    same(NDArray(a) >> NDArray(big), np.array([-1, -1, 0, 2 ** 30 - 1], np.int32))
    t, f = np.array([True, True, False]), np.array([True, False, False])
    same(NDArray(t) & NDArray(f), t & f)
    same(NDArray(t) ^ NDArray(f), t ^ f)
    same(~NDArray(t), ~t)
    with pytest.raises(TypeError, match="bitwise"):
        NDArray(np.ones(2)) & NDArray(np.ones(2))
    with pytest.raises(TypeError, match="bitwise_invert"):
        ~NDArray(np.ones(2))
    with pytest.raises(TypeError, match="shift"):
        NDArray(t) << NDArray(f)


@SETTINGS
@given(strided(), st.data())
def test_boolean_mask_get_and_set_match_numpy(pair, data):
    qv, nv = pair
    k = data.draw(st.integers(0, nv.ndim))
    mask = data.draw(hnp.arrays(np.bool_, nv.shape[:k]))
    np.testing.assert_array_equal(np.asarray(qv[NDArray(mask)]), nv[mask])
    # scalar, one row, and one value per selection
    q2, n2 = NDArray(nv.copy()), nv.copy()
    q2[NDArray(mask)] = -5.0
    n2[mask] = -5.0
    np.testing.assert_array_equal(np.asarray(q2), n2)
    per = np.arange(float(n2[mask].size)).reshape(n2[mask].shape)
    q2[NDArray(mask)] = NDArray(per)
    n2[mask] = per
    np.testing.assert_array_equal(np.asarray(q2), n2)
    # writes go through a view into its base
    qv2 = qv.compact()
    qv2[NDArray(mask)] = 9.0
    assert (np.asarray(qv2)[mask] == 9.0).all()


def test_mask_errors_and_scalar_conversions():
    a = NDArray(np.arange(6.0).reshape(2, 3))
    with pytest.raises(IndexError, match="leading dims"):
        a[NDArray(np.array([True, False, True]))]
    with pytest.raises(IndexError, match="fits neither"):
        a[NDArray(np.array([True, True]))] = NDArray(np.ones((3, 3)))
    assert float(a[1, 2]) == 5.0 and int(a[1, 2]) == 5
    assert int(NDArray(np.float64(-2.7))) == -2
    assert [10, 20, 30][NDArray(np.int64(2))] == 30
    assert complex(a[0, 1]) == 1 + 0j
    with pytest.raises(TypeError, match="integer arrays"):
        [1, 2][NDArray(np.float32(1.0))]
    with pytest.raises(TypeError, match="one element"):
        float(a)
    with pytest.raises(ValueError):
        int(NDArray(np.float64(np.nan)))
    with pytest.raises(OverflowError):
        int(NDArray(np.float64(np.inf)))
    assert a.T.shape == (3, 2) and a.mT.shape == (3, 2)
    assert np.array_equal(np.asarray(+a), np.asarray(a)) and not np.shares_memory(np.asarray(+a), np.asarray(a))
    np.testing.assert_array_equal(np.asarray(NDArray(np.array([7, -7], np.int32)) // 2), [3, -4])
    np.testing.assert_array_equal(np.asarray(NDArray(np.array([7, 5], np.uint8)) // NDArray(np.array([0, 2], np.uint8))), [0, 2])
    assert (NDArray(np.array([7, 5], np.uint8)) // 2).dtype == "uint8"
    assert xp.hypot(xp.asarray([3.0], dtype=xp.float32), xp.asarray([4.0], dtype=xp.float32)).dtype == "float32"
    assert xp.where(xp.asarray([True]), 1, xp.asarray([2], dtype=xp.uint8)).dtype == "uint8"
    assert xp.linspace(0, 1, num=0).shape == (0,)
    info = xp.__array_namespace_info__()
    ints = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    assert info.dtypes(kind="integral") == {n: n for n in ints}
    assert info.capabilities()["boolean indexing"]


def test_dtype_objects_are_not_kind_names():
    assert not isinstance(xp.float32, str)
    assert xp.asarray([1.0], dtype=xp.float32).dtype == xp.float32
    assert {xp.float32: 1}["float32"] == 1
    assert xp.isdtype(xp.uint8, xp.uint8) and not xp.isdtype(xp.uint8, xp.int32)
    assert xp.result_type(xp.uint8, xp.int32) is xp.int32
    assert xp.clip(xp.asarray([1, 200], dtype=xp.uint8), max=xp.asarray(100)).dtype == xp.uint8
    a = NDArray(np.zeros((2, 3)))
    assert a[NDArray(np.zeros((2, 0), bool))].shape == (0,)
    assert np.asarray(xp.astype(a, xp.int32)).dtype == np.int32
