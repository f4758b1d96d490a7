"""The Array API defects the conformance suite found (issue 52, item 4), each against NumPy or
the standard's text: result dtypes of sum / prod / vecdot with integer inputs, vecdot's
contracted axis, copysign's promotion, repeat with a shape-(1,) repeats, the namespace's dtype
listing, and from_dlpack of quill's own bool arrays without a copy."""
import numpy as np
import pytest

import quill.array_api as xp
from quill.backend_ndarray import NDArray


@pytest.mark.parametrize("name", ["sum", "prod"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint32"])
def test_sum_and_prod_keep_an_explicit_integer_dtype(name, dtype):
    n = np.array([[120, 100, 7], [3, 125, 9]]).astype(dtype)[:, ::-1] * 2  # wraps in int8
    q = NDArray(n)[:, ::-1][:, ::-1]  # a stepped view of the same values
    for axis in [None, 0, 1]:
        got = getattr(xp, name)(q, axis=axis, dtype=getattr(xp, dtype))
        want = getattr(np, name)(n, axis=axis, dtype=dtype)
        assert got.dtype == dtype, (name, axis, got.dtype)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_vecdot_dtype_and_contracted_axis():
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4) * 9
    b = np.arange(12, dtype=np.uint8).reshape(3, 4)[::-1]
    got = xp.vecdot(NDArray(a), NDArray(b))
    assert got.dtype == "uint8"
    np.testing.assert_array_equal(np.asarray(got), np.sum(a * b, axis=-1, dtype=np.uint8))
    # Another axis, counted from the end, with broadcasting over the rest.
    got = xp.vecdot(NDArray(a.astype(np.float64)), NDArray(b.astype(np.float64)), axis=-2)
    np.testing.assert_allclose(np.asarray(got), np.sum(a * b.astype(np.float64), axis=-2))
    # The contracted axis is not broadcast: sizes 1 and 3 differ.
    with pytest.raises(ValueError, match="contracted axis"):
        xp.vecdot(xp.ones((2, 1)), xp.ones((2, 3)))
    with pytest.raises(ValueError, match="out of range"):
        xp.vecdot(xp.ones((2, 3)), xp.ones((3,)), axis=-2)


def test_copysign_promotes():
    x1 = xp.asarray([1.5, -2.0, 3.0], dtype=xp.float32)
    x2 = xp.asarray([-0.0, 1.0, -5.0], dtype=xp.float64)
    got = xp.copysign(x1, x2)
    assert got.dtype == xp.float64
    want = np.copysign(np.array([1.5, -2.0, 3.0], np.float32), np.array([-0.0, 1.0, -5.0]))
    assert want.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(got), want)
    assert xp.copysign(x1, x1).dtype == xp.float32


def test_repeat_takes_a_single_repeats_array():
    x = NDArray(np.array([[1, 2, 3], [4, 5, 6]]))[:, ::-1]
    got = xp.repeat(x, xp.asarray([2]), axis=1)
    np.testing.assert_array_equal(np.asarray(got), np.repeat(np.asarray(x), [2], axis=1))
    np.testing.assert_array_equal(np.asarray(xp.repeat(x, xp.asarray([3]))),
                                  np.repeat(np.asarray(x), 3))
    with pytest.raises(ValueError, match=r"\(3,\) or \(1,\)"):
        xp.repeat(x, xp.asarray([1, 2]), axis=1)


def test_dtype_listing_is_the_standards():
    info = xp.__array_namespace_info__()
    listed = info.dtypes()
    assert "float16" not in listed and "float32" in listed and "bool" in listed
    assert "float16" not in info.dtypes(kind="real floating")
    assert all(isinstance(k, str) for k in listed)
    # float16 stays usable as an extension.
    assert xp.isdtype(xp.float16, "real floating")
    assert xp.asarray([1.0], dtype=xp.float16).dtype == xp.float16


def test_from_dlpack_shares_quill_arrays_of_every_dtype():
    for n in [np.array([True, False, True]), np.arange(6.0).reshape(2, 3)]:
        a = NDArray(n)
        view = a[::-1] if a.ndim == 1 else a.permute((1, 0))
        b = xp.from_dlpack(view, copy=False)
        np.testing.assert_array_equal(np.asarray(b), np.asarray(view))
        # Shared: a write through the original shows in the import.
        a[0] = n.flat[1]
        np.testing.assert_array_equal(np.asarray(b), np.asarray(view))
        c = xp.from_dlpack(view, copy=True)
        a[0] = n.flat[0]
        assert not np.array_equal(np.asarray(c), np.asarray(view)) or n.flat[0] == n.flat[1]


def test_2024_12_functions_against_numpy():
    rng = np.random.default_rng(1)
    n = rng.integers(-3, 4, (3, 4, 5))
    q = NDArray(n)[:, ::-1]
    nv = n[:, ::-1]
    for axis in [0, 1, -1]:
        for init in [False, True]:
            got = xp.cumulative_prod(q, axis=axis, include_initial=init)
            want = np.cumprod(nv, axis=axis)
            if init:
                shape = list(want.shape)
                shape[axis] = 1
                want = np.concatenate([np.ones(shape, want.dtype), want], axis=axis)
            np.testing.assert_array_equal(np.asarray(got), want)
    f = rng.standard_normal((4, 7))
    np.testing.assert_allclose(np.asarray(xp.cumulative_prod(NDArray(f)[::-1], axis=1)),
                               np.cumprod(f[::-1], axis=1), rtol=1e-12)
    assert xp.cumulative_prod(xp.asarray([1.0, 2.0], dtype=xp.float32)).dtype == xp.float32
    for axis in [None, 0, (0, 2)]:
        np.testing.assert_array_equal(np.asarray(xp.count_nonzero(q, axis=axis)),
                                      np.count_nonzero(nv, axis=axis))
    assert xp.count_nonzero(q, axis=1, keepdims=True).shape == (3, 1, 5)
    for k in [0, 1, 2]:
        np.testing.assert_array_equal(np.asarray(xp.diff(q, axis=1, n=k)), np.diff(nv, axis=1, n=k))
    np.testing.assert_array_equal(
        np.asarray(xp.diff(q, axis=-1, prepend=NDArray(nv[..., :1]), append=0)),
        np.diff(nv, axis=-1, prepend=nv[..., :1], append=0))
    b = np.array([True, False, False, True])
    np.testing.assert_array_equal(np.asarray(xp.diff(NDArray(b))), np.diff(b))
    idx = np.argsort(nv, axis=1)
    np.testing.assert_array_equal(np.asarray(xp.take_along_axis(q, NDArray(idx), axis=1)),
                                  np.take_along_axis(nv, idx, axis=1))
    assert xp.broadcast_shapes((3, 1), (1, 4), (4,)) == np.broadcast_shapes((3, 1), (1, 4), (4,))
    assert xp.broadcast_shapes() == ()
    with pytest.raises(ValueError, match="do not broadcast"):
        xp.broadcast_shapes((2,), (3,))
    x2 = np.array([2, -1, 7, 2])
    for invert in [False, True]:
        np.testing.assert_array_equal(np.asarray(xp.isin(q, NDArray(x2), invert=invert)),
                                      np.isin(nv, x2, invert=invert))
    fl = np.array([np.nan, 1.0, 2.5])
    np.testing.assert_array_equal(np.asarray(xp.isin(NDArray(fl), NDArray(fl))), np.isin(fl, fl))
    assert not np.asarray(xp.isin(q, xp.asarray([], dtype=xp.int64))).any()
    e = xp.expand_dims(q, axis=(0, -1))
    assert e.shape == np.expand_dims(nv, axis=(0, -1)).shape
    with pytest.raises(ValueError, match="distinct"):
        xp.expand_dims(q, axis=(1, 1))
