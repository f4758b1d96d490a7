"""Zero-copy exchange with NumPy: the buffer protocol (``memoryview``, ``np.asarray``) and DLPack
(``np.from_dlpack(quill_array)``, ``quill.from_dlpack(numpy_array)``) on random strided views
(negative steps, permutes, broadcasts, offsets, empty and 0-d arrays). The oracle is NumPy's
own view of the same values; sharing is checked with ``np.shares_memory`` and with writes."""
import gc
import hashlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import quill
from quill.backend_ndarray import NDArray

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"]
STEPS = [-3, -2, -1, 1, 2, 3]


@st.composite
def strided_pair(draw):
    """(quill view, NumPy view of the same values, quill base, NumPy base)."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=5))
    n = (np.arange(int(np.prod(shape)), dtype=np.int64) % 97).astype(dtype).reshape(shape)
    q = NDArray(n)
    qv, nv = q, n
    if n.ndim:
        idx = tuple(slice(None, None, draw(st.sampled_from(STEPS))) for _ in shape)
        qv, nv = qv[idx], nv[idx]
        perm = draw(st.permutations(range(n.ndim)))
        qv, nv = qv.permute(*perm), nv.transpose(perm)
    if draw(st.booleans()):
        # broadcast: a new leading axis of stride 0
        target = (draw(st.integers(0, 3)),) + nv.shape
        qv, nv = qv.broadcast_to(*target), np.broadcast_to(nv, target)
    return qv, nv, q, n


@SETTINGS
@given(strided_pair())
def test_asarray_shares_the_buffer_of_any_view(pair):
    qv, nv, q, _ = pair
    m = np.asarray(qv)
    assert m.dtype == nv.dtype and m.shape == nv.shape
    np.testing.assert_array_equal(m, nv)
    if qv.size:
        assert np.shares_memory(m, np.asarray(q))
    # strides in bytes, sign and zeros included, as quill's in elements
    assert m.strides == tuple(s * m.itemsize for s in qv.strides)


@SETTINGS
@given(strided_pair())
def test_dlpack_export_is_zero_copy_and_matches(pair):
    qv, nv, q, _ = pair
    d = np.from_dlpack(qv)
    assert d.dtype == nv.dtype and d.shape == nv.shape
    np.testing.assert_array_equal(d, nv)
    if qv.size:
        assert np.shares_memory(d, np.asarray(q))


@SETTINGS
@given(strided_pair())
def test_dlpack_import_shares_writable_numpy_views(pair):
    _, nv, _, _ = pair
    got = quill.from_dlpack(nv)
    assert got.dtype == nv.dtype.name and got.shape == nv.shape
    np.testing.assert_array_equal(got.numpy(), nv)
    shareable = nv.flags.writeable and nv.dtype != np.bool_ and nv.size
    assert np.shares_memory(np.asarray(got), nv) == bool(shareable)
    assert got.strides == (tuple(s // nv.itemsize for s in nv.strides) if shareable
                           else got.strides)
    copied = quill.from_dlpack(nv, copy=True)
    np.testing.assert_array_equal(copied.numpy(), nv)
    assert not np.shares_memory(np.asarray(copied), nv)


def test_writes_through_numpy_are_seen_by_quill_and_back():
    q = NDArray(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    v = q[:, ::-2, 1:]
    m = np.asarray(v)
    m[0, 0, 0] = 100.0  # q[0, 2, 1]
    assert q.numpy()[0, 2, 1] == 100.0
    v[1, 1, 2] = -7.0  # q[1, 0, 3]
    assert m[1, 1, 2] == -7.0
    d = np.from_dlpack(v)
    d[...] = 1.5
    assert (q.numpy()[:, ::-2, 1:] == 1.5).all()
    assert q.numpy()[0, 1, 0] == 4.0  # outside the view: untouched


def test_exported_memory_outlives_the_quill_array():
    n = np.arange(1000, dtype=np.float64)
    q = NDArray(n)
    m = np.asarray(q[::-3])
    d = np.from_dlpack(q[5:10])
    del q
    gc.collect()
    # recycle freed buffers of that size class: a dangling view would now see other values
    junk = [NDArray(np.full(1000, -1.0)) * 2.0 for _ in range(20)]
    np.testing.assert_array_equal(m, n[::-3])
    np.testing.assert_array_equal(d, n[5:10])
    del junk


def test_memoryview_format_shape_strides():
    q = NDArray(np.zeros((3, 4), dtype=np.int64)).permute(1, 0)
    mv = memoryview(q)
    assert (mv.format, mv.itemsize, mv.ndim) == ("q", 8, 2)
    assert mv.shape == (4, 3) and mv.strides == (8, 32)
    assert not mv.readonly
    assert not mv.c_contiguous and mv.f_contiguous
    for dtype, fmt in [("float32", "f"), ("float64", "d"), ("float16", "e"), ("int32", "i"),
                       ("uint8", "B"), ("bool", "?")]:
        assert memoryview(NDArray(np.zeros(2, dtype=dtype))).format == fmt


def test_contiguous_requests_refuse_strided_views():
    q = NDArray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(np.frombuffer(q, dtype=np.float32), np.arange(12))
    with pytest.raises(BufferError):
        np.frombuffer(q[:, ::2], dtype=np.float32)
    # hashlib asks for a simple (C-contiguous) buffer: quill's own refusal
    with pytest.raises(BufferError, match="compact"):
        hashlib.sha256(q[:, ::2])
    assert hashlib.sha256(q.reshape(12)).digest() == hashlib.sha256(np.arange(12, dtype=np.float32)).digest()
    with pytest.raises(TypeError):
        memoryview(q[:, ::2]).cast("B")
    assert bytes(q[::-1]) == np.arange(12, dtype=np.float32).reshape(3, 4)[::-1].tobytes()


def test_bfloat16_has_no_buffer_format_but_converts():
    b = NDArray(np.array([1.5, -2.0], dtype=np.float32)).astype("bfloat16")
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(b)
    np.testing.assert_array_equal(np.asarray(b), [1.5, -2.0])
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(b, copy=False)
    # DLPack carries bfloat16 (type code 4): a quill round trip keeps it
    back = quill.from_dlpack(b)
    assert back.dtype == "bfloat16"
    np.testing.assert_array_equal(back.astype("float32").numpy(), [1.5, -2.0])


def test_array_protocol_copy_flags():
    q = NDArray(np.arange(6, dtype=np.float32))
    assert np.shares_memory(np.asarray(q), np.asarray(q))
    c = np.array(q, copy=True)
    assert not np.shares_memory(c, np.asarray(q))
    assert np.asarray(q, dtype=np.float64).dtype == np.float64
    assert np.shares_memory(q.__array__(copy=False), np.asarray(q))


def test_dlpack_copy_and_device_arguments():
    q = NDArray(np.arange(6, dtype=np.float32))
    c = np.from_dlpack(q, copy=True)
    assert not np.shares_memory(c, np.asarray(q))
    np.testing.assert_array_equal(c, np.arange(6))
    assert q.__dlpack_device__() == (1, 0)
    assert np.from_dlpack(q, device="cpu").shape == (6,)
    with pytest.raises(BufferError, match="device type"):
        q.__dlpack__(dl_device=(14, 0))
    ro = np.arange(3.0)
    ro.setflags(write=False)
    with pytest.raises(BufferError, match="read-only"):
        quill.from_dlpack(ro, copy=False)
    np.testing.assert_array_equal(quill.from_dlpack(ro).numpy(), ro)  # copied
    with pytest.raises(BufferError, match="bool"):
        quill.from_dlpack(np.ones(2, bool), copy=False)


def test_imported_memory_is_shared_both_ways_and_outlives_numpy():
    n = np.arange(12.0).reshape(3, 4)
    q = quill.from_dlpack(n[:, ::-2])
    n[0, 3] = -1.0
    assert q.numpy()[0, 0] == -1.0
    q[2, 1] = 50.0  # n[2, 1]
    assert n[2, 1] == 50.0
    (q * 2).numpy()  # kernels read foreign memory
    q += 1  # and write it in place
    assert n[1, 3] == 8.0
    ref = n.copy()
    del n
    gc.collect()
    junk = [np.full((3, 4), -9.0) for _ in range(20)]
    np.testing.assert_array_equal(q.numpy(), ref[:, ::-2])
    del junk


class LegacyProducer:
    """A DLPack 0.x producer: its __dlpack__ takes no max_version and gives "dltensor"."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, stream=None):
        return self.x.__dlpack__()

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_legacy_capsules_both_ways():
    q = NDArray(np.arange(10, dtype=np.int32))[::-2]
    cap = q.__dlpack__()
    assert "dltensor" in repr(cap) and "versioned" not in repr(cap)
    d = np.from_dlpack(LegacyProducer(q))
    np.testing.assert_array_equal(d, np.arange(10, dtype=np.int32)[::-2])
    assert np.shares_memory(d, np.asarray(q))
    got = quill.from_dlpack(LegacyProducer(np.arange(12.0).reshape(3, 4).T))
    np.testing.assert_array_equal(got.numpy(), np.arange(12.0).reshape(3, 4).T)
    assert "versioned" in repr(q.__dlpack__(max_version=(1, 0)))


def test_unconsumed_capsules_free_themselves():
    q = NDArray(np.ones(100, dtype=np.float32))
    for _ in range(100):
        q.__dlpack__()
        q.__dlpack__(max_version=(1, 1))
    gc.collect()
    np.testing.assert_array_equal(q.numpy(), np.ones(100))


def test_tensors_export_their_values():
    t = quill.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    d = np.from_dlpack(t)
    np.testing.assert_array_equal(d, np.arange(6).reshape(2, 3))
    assert t.__dlpack_device__() == (1, 0)


def test_from_dlpack_shares_complex_and_rejects_non_arrays():
    for dt in [np.complex64, np.complex128]:
        x = (np.arange(6) + 1j * np.arange(6, 12)).astype(dt).reshape(2, 3)[:, ::-1]
        q = quill.from_dlpack(x)
        assert q.dtype == np.dtype(dt).name
        np.testing.assert_array_equal(q.numpy(), x)
        x[0, 0] = 5 - 5j  # shared memory: the write shows through
        assert q.numpy()[0, 0] == 5 - 5j
        back = np.from_dlpack(q)
        np.testing.assert_array_equal(back, x)
    with pytest.raises(AttributeError):
        quill.from_dlpack([1, 2, 3])


def test_array_api_from_dlpack():
    import quill.array_api as xp
    a = xp.from_dlpack(np.arange(5, dtype=np.float64)[::-1])
    assert a.dtype == xp.float64
    np.testing.assert_array_equal(np.asarray(a), [4, 3, 2, 1, 0])


def test_in_place_operators_write_through_views():
    base = NDArray(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = base[::2, 1:]
    before = v
    v += NDArray(np.ones(3, dtype=np.float32))
    v *= 2
    assert v is before
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    want[::2, 1:] = (want[::2, 1:] + 1) * 2
    np.testing.assert_array_equal(base.numpy(), want)
    i = NDArray(np.array([1, 6], dtype=np.int32))
    i <<= 2
    i |= 1
    np.testing.assert_array_equal(i.numpy(), [5, 25])
    with pytest.raises(TypeError, match="same_kind"):
        i += 0.5  # a float result cannot go into an int array (NumPy's casting rule and class)
    with pytest.raises(ValueError, match="shape"):
        v += NDArray(np.ones((2, 2, 3), dtype=np.float32))
