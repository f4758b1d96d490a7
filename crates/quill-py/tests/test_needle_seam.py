"""needle's lower seam (``ndarray_backend_cpu``'s functions, reached through a device object) and
``NDArray._handle``, against NumPy: every seam function on random data, strided and offset
compact / setitem against an element-by-element reference, ``matmul_tiled`` against a reference
that multiplies tile by tile, views sharing ``_handle.ptr()``, bounds errors. Last, the issue's
acceptance test: a needle-style NDArray written in pure Python here (a handle, a layout, a device,
and nothing else) does all its work through the seam and matches NumPy on views."""
import math

import numpy as np
import pytest

import quill.backend_ndarray as nd
from quill import _needle_backend as seam

DEVICES = [nd.cpu()] + ([nd.cuda()] if nd.cuda().enabled() else [])
DEV_IDS = [repr(d) for d in DEVICES]
TILE = 8


def filled(dev, values):
    """A seam Array on ``dev`` holding ``values`` (flattened, as float32)."""
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    h = dev.Array(values.size)
    dev.from_numpy(values, h)
    return h


def read(dev, h):
    """All of ``h``'s buffer as a 1-D NumPy array."""
    return dev.to_numpy(h, (h.size,), (1,), 0)


def positions(shape, strides, offset):
    """The buffer position of every element of a strided view, in C order (the reference for
    compact and setitem: plain index arithmetic, nothing of quill or NumPy's strides)."""
    return [offset + sum(i * s for i, s in zip(idx, strides)) for idx in np.ndindex(*shape)]


def random_layout(rng, n, allow_zero=True):
    """Shape, strides and offset of a random (possibly overlapping) view inside n elements."""
    while True:
        ndim = int(rng.integers(1, 5))
        shape = tuple(int(d) for d in rng.integers(1, 5, ndim))
        strides = tuple(int(s) for s in rng.integers(0 if allow_zero else 1, 7, ndim))
        reach = sum((d - 1) * s for d, s in zip(shape, strides))
        if reach < n:
            return shape, strides, int(rng.integers(0, n - reach))


def view_layout(rng, n):
    """A view as needle makes them: slices with positive steps of a C-ordered array inside n
    elements, permuted, with some broadcast (stride 0) dims; distinct elements apart from the
    broadcast dims."""
    while True:
        ndim = int(rng.integers(1, 4))
        base = [int(d) for d in rng.integers(1, 6, ndim)]
        if math.prod(base) <= n:
            break
    cstrides = [math.prod(base[i + 1:]) for i in range(ndim)]
    offset = int(rng.integers(0, n - math.prod(base) + 1))
    shape, strides = [], []
    for d, s in zip(base, cstrides):
        start = int(rng.integers(0, d))
        step = int(rng.integers(1, 3))
        offset += start * s
        shape.append(len(range(start, d, step)))
        strides.append(s * step)
    perm = rng.permutation(ndim)
    shape = [shape[i] for i in perm]
    strides = [strides[i] for i in perm]
    for _ in range(int(rng.integers(0, 2))):
        at = int(rng.integers(0, len(shape) + 1))
        shape.insert(at, int(rng.integers(1, 4)))
        strides.insert(at, 0)
    return tuple(shape), tuple(strides), offset


# ---- Array and the device proxy ----


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
def test_array_has_size_ptr_and_lives_on_the_device(dev):
    h = dev.Array(10)
    assert h.size == 10 and h.dtype == "float32" and h.device == dev
    assert isinstance(h, seam.Array) and isinstance(h, dev.Array)
    assert isinstance(h.ptr(), int) and h.ptr() == h.ptr()
    np.testing.assert_array_equal(read(dev, h), np.zeros(10, np.float32))
    assert dev.Array(10).ptr() != h.ptr()
    assert dev.Array(0).size == 0
    assert "Array(size=10" in repr(h)


def test_device_proxies_the_seam_module():
    dev = nd.cpu()
    assert dev.__tile_size__ == 8 == seam.__tile_size__
    for name in ("to_numpy", "from_numpy", "fill", "compact", "ewise_setitem", "scalar_setitem",
                 "ewise_add", "ewise_mul", "ewise_div", "ewise_maximum", "ewise_eq", "ewise_ge",
                 "scalar_add", "scalar_mul", "scalar_div", "scalar_power", "scalar_maximum",
                 "scalar_eq", "scalar_ge", "ewise_log", "ewise_exp", "ewise_tanh", "matmul",
                 "matmul_tiled", "reduce_max", "reduce_sum"):
        assert getattr(dev, name) is getattr(seam, name)
        assert getattr(dev, name).__doc__
    assert dev.mod is seam
    assert dev.Array is dev.Array and dev.Array is not nd.cuda().Array
    # Names the seam does not have stay AttributeErrors, so hasattr and getattr defaults work.
    assert not hasattr(dev, "no_such_function")
    assert getattr(dev, "__deepcopy__", None) is None
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        dev.no_such_function
    # BackendDevice's own attributes are untouched.
    assert dev.name == "cpu" and dev.enabled() and repr(dev) == "cpu()" and dev == nd.cpu()


def test_array_on_a_disabled_device_is_a_clear_error():
    if nd.cuda().enabled():
        h = nd.cuda().Array(4)
        assert h.device == nd.cuda() and h.size == 4
    else:
        with pytest.raises(ValueError, match=r"Array: device cuda\(\) is not enabled"):
            nd.cuda().Array(4)
    # The functions themselves are reachable on every device (needle's proxy).
    assert nd.cuda().matmul is seam.matmul and nd.cuda().__tile_size__ == 8


def test_array_size_is_checked():
    with pytest.raises(ValueError, match="Array: size must be >= 0, got -1"):
        seam.Array(-1)
    with pytest.raises(TypeError, match="Array: size must be an integer, got float"):
        seam.Array(2.5)


# ---- moving elements ----


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
def test_from_numpy_to_numpy_and_fill(dev):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(24)
    h = filled(dev, x)
    np.testing.assert_array_equal(read(dev, h), x.astype(np.float32))
    # float64 and int64 input is stored as float32; a longer source gives its first elements.
    dev.from_numpy(np.arange(30, dtype=np.int64).reshape(5, 6), h)
    np.testing.assert_array_equal(read(dev, h), np.arange(24, dtype=np.float32))
    got = dev.to_numpy(h, (2, 3), (6, 2), 4)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [[4, 6, 8], [10, 12, 14]])
    got[0, 0] = -1.0  # a copy, not the buffer
    assert read(dev, h)[4] == 4.0
    dev.fill(h, 2.5)
    np.testing.assert_array_equal(read(dev, h), np.full(24, 2.5, np.float32))
    dev.fill(h, np.float32(-1))
    np.testing.assert_array_equal(read(dev, h), np.full(24, -1, np.float32))
    with pytest.raises(ValueError, match="from_numpy: a has 3 elements, out needs 24"):
        dev.from_numpy(np.zeros(3), h)
    with pytest.raises(TypeError, match="fill: the scalar must be a real number, got str"):
        dev.fill(h, "x")


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("seed", range(12))
def test_compact_reads_any_strided_view(dev, seed):
    rng = np.random.default_rng(seed)
    n = 97
    x = rng.standard_normal(n).astype(np.float32)
    a = filled(dev, x)
    layout = random_layout(rng, n) if seed % 2 else view_layout(rng, n)
    shape, strides, offset = layout
    size = math.prod(shape)
    out = filled(dev, np.full(size + 3, 7.0))
    dev.compact(a, out, shape, strides, offset)
    want = x[positions(shape, strides, offset)]
    got = read(dev, out)
    np.testing.assert_array_equal(got[:size], want)
    np.testing.assert_array_equal(got[size:], [7.0, 7.0, 7.0])  # only prod(shape) written
    np.testing.assert_array_equal(dev.to_numpy(a, shape, strides, offset).reshape(-1), want)
    np.testing.assert_array_equal(read(dev, a), x)  # the source is untouched


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("seed", range(12))
def test_setitems_write_a_strided_view_in_c_order(dev, seed):
    rng = np.random.default_rng(100 + seed)
    n = 97
    base = rng.standard_normal(n).astype(np.float32)
    shape, strides, offset = view_layout(rng, n)
    size = math.prod(shape)
    src = rng.standard_normal(size + 2).astype(np.float32)  # only the first `size` are used
    out = filled(dev, base)
    dev.ewise_setitem(filled(dev, src), out, shape, strides, offset)
    want = base.copy()
    for k, p in enumerate(positions(shape, strides, offset)):
        want[p] = src[k]  # needle's loop: C order, the last write to an element stays
    np.testing.assert_array_equal(read(dev, out), want)

    out = filled(dev, base)
    dev.scalar_setitem(size, -3.25, out, shape, strides, offset)
    want = base.copy()
    want[positions(shape, strides, offset)] = -3.25
    np.testing.assert_array_equal(read(dev, out), want)


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
def test_setitem_into_the_buffer_it_reads(dev):
    # Source and destination in one buffer (needle's A[0:2] = A[2:4] goes through a compact
    # copy, but the seam itself must also give the sequential answer when they overlap).
    x = np.arange(10, dtype=np.float32)
    h = filled(dev, x)
    dev.ewise_setitem(h, h, (2, 3), (4, 1), 2)
    want = x.copy()
    want[positions((2, 3), (4, 1), 2)] = x[:6]
    np.testing.assert_array_equal(read(dev, h), want)


# ---- elementwise ----

EWISE = {
    "ewise_add": np.add, "ewise_mul": np.multiply, "ewise_div": np.divide,
    "ewise_maximum": np.maximum,
    "ewise_eq": lambda a, b: (a == b).astype(np.float32),
    "ewise_ge": lambda a, b: (a >= b).astype(np.float32),
}
SCALAR = {
    "scalar_add": np.add, "scalar_mul": np.multiply, "scalar_div": np.divide,
    "scalar_power": np.power, "scalar_maximum": np.maximum,
    "scalar_eq": lambda a, v: (a == np.float32(v)).astype(np.float32),
    "scalar_ge": lambda a, v: (a >= np.float32(v)).astype(np.float32),
}
UNARY = {"ewise_log": np.log, "ewise_exp": np.exp, "ewise_tanh": np.tanh}


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("name", sorted(EWISE))
def test_ewise_ops(dev, name):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(50).astype(np.float32)
    b = rng.standard_normal(50).astype(np.float32)
    b[::5] = a[::5]  # some ties for eq / ge / maximum
    out = dev.Array(50)
    getattr(dev, name)(filled(dev, a), filled(dev, b), out)
    np.testing.assert_allclose(read(dev, out), EWISE[name](a, b).astype(np.float32),
                               rtol=1e-6, atol=1e-7)
    # out may be an input (needle's in-place style).
    h = filled(dev, a)
    getattr(dev, name)(h, filled(dev, b), h)
    np.testing.assert_allclose(read(dev, h), EWISE[name](a, b).astype(np.float32),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("name", sorted(SCALAR))
@pytest.mark.parametrize("val", [0.5, 2.0, -1.25, 3])
def test_scalar_ops(dev, name, val):
    rng = np.random.default_rng(2)
    a = rng.uniform(0.1, 3.0, 40).astype(np.float32)  # positive, so that power is real
    a[::7] = np.float32(abs(val))  # ties for eq / ge / maximum when val > 0
    out = dev.Array(40)
    getattr(dev, name)(filled(dev, a), val, out)
    want = SCALAR[name](a, np.float32(val)).astype(np.float32)
    np.testing.assert_allclose(read(dev, out), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops(dev, name):
    rng = np.random.default_rng(3)
    a = rng.uniform(0.05, 4.0, 33).astype(np.float32)
    out = dev.Array(33)
    getattr(dev, name)(filled(dev, a), out)
    np.testing.assert_allclose(read(dev, out), UNARY[name](a), rtol=1e-5, atol=1e-6)


# ---- matmul and reductions ----


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("m,n,p", [(1, 1, 1), (3, 5, 4), (17, 9, 33), (64, 48, 40), (4, 0, 3)])
def test_matmul(dev, m, n, p):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, n)).astype(np.float32)
    b = rng.standard_normal((n, p)).astype(np.float32)
    out = filled(dev, np.full(m * p, 9.0))
    dev.matmul(filled(dev, a), filled(dev, b), out, m, n, p)
    np.testing.assert_allclose(read(dev, out).reshape(m, p), a.astype(np.float64) @ b,
                               rtol=1e-4, atol=1e-4)


def tiles(x):
    """``x`` (rows x cols, multiples of TILE) in needle's tiled layout, tile by tile."""
    r, c = x.shape
    return np.concatenate([x[i:i + TILE, j:j + TILE].reshape(-1)
                           for i in range(0, r, TILE) for j in range(0, c, TILE)])


def tiled_matmul_reference(a_flat, b_flat, m, n, p):
    """The tiled product tile by tile: out tile (i, j) = sum over k of a(i, k) @ b(k, j), each
    tile read from its TILE*TILE block of the flat buffer."""
    def tile(buf, cols, i, j):
        start = (i * (cols // TILE) + j) * TILE * TILE
        return buf[start:start + TILE * TILE].reshape(TILE, TILE).astype(np.float64)

    out = np.zeros(m * p)
    for i in range(m // TILE):
        for j in range(p // TILE):
            acc = sum(tile(a_flat, n, i, k) @ tile(b_flat, p, k, j) for k in range(n // TILE))
            start = (i * (p // TILE) + j) * TILE * TILE
            out[start:start + TILE * TILE] = acc.reshape(-1)
    return out


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("m,n,p", [(8, 8, 8), (16, 24, 8), (32, 16, 48), (8, 40, 24)])
def test_matmul_tiled(dev, m, n, p):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(m * n).astype(np.float32)
    b = rng.standard_normal(n * p).astype(np.float32)
    out = dev.Array(m * p)
    dev.matmul_tiled(filled(dev, a), filled(dev, b), out, m, n, p)
    want = tiled_matmul_reference(a, b, m, n, p)
    np.testing.assert_allclose(read(dev, out), want, rtol=1e-4, atol=1e-4)
    # And read as matrices: the tiled buffers hold a @ b.
    A = rng.standard_normal((m, n)).astype(np.float32)
    B = rng.standard_normal((n, p)).astype(np.float32)
    dev.matmul_tiled(filled(dev, tiles(A)), filled(dev, tiles(B)), out, m, n, p)
    np.testing.assert_allclose(read(dev, out), tiles(A.astype(np.float64) @ B),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
def test_matmul_tiled_over_ndarray_handles(dev):
    # needle's own test of the tiled kernel: 4-D NDArrays (m, n, TILE, TILE) passed by handle.
    t = dev.__tile_size__
    m, n, p = 2, 3, 2
    A = nd.array(np.random.default_rng(6).standard_normal((m, n, t, t)), device=dev)
    B = nd.array(np.random.default_rng(7).standard_normal((n, p, t, t)), device=dev)
    C = nd.NDArray.make((m, p, t, t), device=dev)
    dev.matmul_tiled(A._handle, B._handle, C._handle, m * t, n * t, p * t)
    lhs = A.numpy().transpose(0, 2, 1, 3).reshape(m * t, n * t) @ \
        B.numpy().transpose(0, 2, 1, 3).reshape(n * t, p * t)
    rhs = C.numpy().transpose(0, 2, 1, 3).reshape(m * t, p * t)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
@pytest.mark.parametrize("k,r", [(1, 1), (5, 7), (12, 1), (3, 40), (4, 0)])
def test_reductions(dev, k, r):
    rng = np.random.default_rng(8)
    a = rng.standard_normal(k * r).astype(np.float32)
    out = dev.Array(k)
    dev.reduce_sum(filled(dev, a), out, r)
    np.testing.assert_allclose(read(dev, out), a.reshape(k, r).sum(axis=1), rtol=1e-5,
                               atol=1e-5)
    if r:
        dev.reduce_max(filled(dev, a), out, r)
        np.testing.assert_array_equal(read(dev, out), a.reshape(k, r).max(axis=1))
    else:
        with pytest.raises(ValueError, match="reduce_max: reduce_size 0"):
            dev.reduce_max(filled(dev, a), out, r)


# ---- bounds and argument errors ----


def test_out_of_bounds_layouts_are_value_errors():
    dev = nd.cpu()
    a, out = filled(dev, np.arange(12)), dev.Array(12)
    with pytest.raises(ValueError, match=r"compact: view shape \(3, 2\) strides \(4, 2\) "
                                         r"offset 5 of a \(a buffer of 12 elements\) is out of "
                                         r"bounds"):
        dev.compact(a, out, (3, 2), (4, 2), 5)
    with pytest.raises(ValueError, match="ewise_setitem: .*out of bounds"):
        dev.ewise_setitem(a, out, (4,), (4,), 0)
    with pytest.raises(ValueError, match="scalar_setitem: .*out of bounds"):
        dev.scalar_setitem(1, 1.0, out, (1,), (1,), 12)
    with pytest.raises(ValueError, match="to_numpy: .*out of bounds"):
        dev.to_numpy(a, (13,), (1,), 0)
    with pytest.raises(ValueError, match="to_numpy: offset must be >= 0, got -1"):
        dev.to_numpy(a, (2,), (1,), -1)
    with pytest.raises(ValueError, match="compact: shape entry must be >= 0, got -2"):
        dev.compact(a, out, (-2,), (1,), 0)
    with pytest.raises(ValueError, match=r"compact: shape \(2, 2\) and strides \(1,\) differ"):
        dev.compact(a, out, (2, 2), (1,), 0)
    with pytest.raises(ValueError, match="compact: out has 4 elements, 6 needed"):
        dev.compact(a, dev.Array(4), (2, 3), (3, 1), 0)
    with pytest.raises(ValueError, match="ewise_setitem: a has 2 elements, 4 needed"):
        dev.ewise_setitem(dev.Array(2), out, (4,), (1,), 0)
    with pytest.raises(ValueError, match=r"scalar_setitem: size 5 is not the view's element "
                                         r"count 4"):
        dev.scalar_setitem(5, 1.0, out, (2, 2), (2, 1), 0)
    with pytest.raises(ValueError, match="ewise_add: b has 3 elements, 12 needed"):
        dev.ewise_add(a, dev.Array(3), out)
    with pytest.raises(ValueError, match="scalar_mul: out has 3 elements, 12 needed"):
        dev.scalar_mul(a, 2.0, dev.Array(3))
    with pytest.raises(ValueError, match="ewise_exp: out has 0 elements, 12 needed"):
        dev.ewise_exp(a, dev.Array(0))
    with pytest.raises(ValueError, match="matmul: a has 12 elements, 15 needed"):
        dev.matmul(a, a, out, 3, 5, 2)
    with pytest.raises(ValueError, match="matmul_tiled: m, n, p = 8, 12, 8 must all be "
                                         "multiples of the tile size 8"):
        dev.matmul_tiled(a, a, out, 8, 12, 8)
    with pytest.raises(ValueError, match="matmul_tiled: a has 12 elements, 64 needed"):
        dev.matmul_tiled(a, a, out, 8, 8, 8)
    with pytest.raises(ValueError, match="reduce_sum: a has 12 elements, 15 needed"):
        dev.reduce_sum(a, dev.Array(3), 5)
    # Nothing was written by any refused call.
    np.testing.assert_array_equal(read(dev, out), np.zeros(12))
    np.testing.assert_array_equal(read(dev, a), np.arange(12))


def test_wrong_argument_types_are_type_errors():
    dev = nd.cpu()
    h = dev.Array(4)
    with pytest.raises(TypeError, match=r"ewise_add: b must be a backend Array \(device.Array"
                                        r"\(size\) or an NDArray's _handle\), got NDArray"):
        dev.ewise_add(h, nd.array(np.zeros(4)), h)
    with pytest.raises(TypeError, match="fill: out must be a backend Array.*got list"):
        dev.fill([0.0], 1.0)
    with pytest.raises(TypeError, match="matmul: m must be an integer, got float"):
        dev.matmul(h, h, h, 2.0, 2, 2)
    with pytest.raises(TypeError, match="compact: strides must be integers"):
        dev.compact(h, h, (2,), (0.5,), 0)
    with pytest.raises(TypeError, match="scalar_add: the scalar must be a real number"):
        dev.scalar_add(h, None, h)


# ---- NDArray._handle ----


def test_views_share_the_handle_of_their_buffer():
    x = nd.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    p = x._handle.ptr()
    assert x._handle.size == 24 and isinstance(x._handle, seam.Array)
    views = [x.reshape((6, 4)), x.permute((2, 0, 1)), x[1, 1:3, ::2], x[:, :, 3],
             x.broadcast_to((5, 2, 3, 4)), x.as_strided((2, 2), (1, 5)), x.flat.base,
             nd.NDArray.make((3,), (2,), handle=x, offset=4)]
    for v in views:
        assert v._handle.ptr() == p and v._handle.size == 24
    # In-place writes keep the buffer where it is.
    x[0, 1:3, :] = 4.0
    x[1] = nd.array(np.ones((3, 4)))
    x += 1.0
    x.flat[5] += 0.5
    assert x._handle.ptr() == p
    # Other buffers: other addresses.
    assert x.compact()._handle.ptr() == p  # x is compact: compact() is x itself
    assert x.permute((1, 0, 2)).compact()._handle.ptr() != p
    assert nd.array(np.arange(24.0))._handle.ptr() != p


def test_a_handle_reads_and_writes_the_arrays_memory():
    dev = nd.cpu()
    x = nd.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = x[1:, 1:3]
    # needle's NDArray.compact(): device.compact(handle, out handle, shape, strides, offset)
    out = nd.NDArray.make(v.shape, device=dev)
    dev.compact(v._handle, out._handle, v.shape, v.strides, v._offset)
    np.testing.assert_array_equal(out.numpy(), x.numpy()[1:, 1:3])
    # and setitem through the view's handle shows in x and in every view of it
    dev.scalar_setitem(v.size, -1.0, v._handle, v.shape, v.strides, v._offset)
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    want[1:, 1:3] = -1.0
    np.testing.assert_array_equal(x.numpy(), want)
    np.testing.assert_array_equal(dev.to_numpy(x._handle, (3, 4), (4, 1), 0), want)
    # NDArray.make takes a seam handle (needle: make(shape, strides, device, handle, offset))
    w = nd.NDArray.make((2, 2), (4, 1), device=dev, handle=x._handle, offset=5)
    np.testing.assert_array_equal(w.numpy(), want[1:3, 1:3])
    w[0, 0] = 100.0
    assert x.numpy()[1, 1] == 100.0
    # A broadcast view's buffer reads fine; writing through it is refused, as through the view.
    b = x[0].broadcast_to((2, 4))
    np.testing.assert_array_equal(read(dev, b._handle), x.numpy().reshape(-1))
    with pytest.raises(ValueError, match="fill: cannot write"):
        dev.fill(b._handle, 0.0)


# ---- acceptance: needle's pure-Python NDArray over the seam ----


class SeamArray:
    """A needle-style NDArray: a buffer handle, a shape, element strides, an offset and a
    device, and no other state. Every element operation is a call into the device's seam
    functions; Python only does layout arithmetic (the shape of needle's own NDArray)."""

    def __init__(self, handle, shape, strides, offset, device):
        self._handle, self.shape, self.strides = handle, tuple(shape), tuple(strides)
        self._offset, self.device = offset, device

    @staticmethod
    def c_strides(shape):
        return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))

    @classmethod
    def make(cls, shape, strides=None, device=None, handle=None, offset=0):
        device = device or nd.cpu()
        if handle is None:
            handle = device.Array(math.prod(shape))
        strides = cls.c_strides(shape) if strides is None else strides
        return cls(handle, shape, strides, offset, device)

    @classmethod
    def from_numpy(cls, x, device=None):
        x = np.ascontiguousarray(x, dtype=np.float32)
        a = cls.make(x.shape, device=device)
        a.device.from_numpy(x, a._handle)
        return a

    @property
    def size(self):
        return math.prod(self.shape)

    def numpy(self):
        return self.device.to_numpy(self._handle, self.shape, self.strides, self._offset)

    def is_compact(self):
        return (self.strides == self.c_strides(self.shape) and self._offset == 0
                and self.size == self._handle.size)

    def compact(self):
        if self.is_compact():
            return self
        out = self.make(self.shape, device=self.device)
        self.device.compact(self._handle, out._handle, self.shape, self.strides, self._offset)
        return out

    def view(self, shape, strides, offset=None):
        return SeamArray(self._handle, shape, strides,
                         self._offset if offset is None else offset, self.device)

    def reshape(self, shape):
        assert math.prod(shape) == self.size
        c = self.compact()
        return c.view(shape, self.c_strides(shape))

    def permute(self, axes):
        return self.view([self.shape[i] for i in axes], [self.strides[i] for i in axes])

    def broadcast_to(self, shape):
        lead = len(shape) - len(self.shape)
        strides = [0] * lead + [0 if d == 1 and n != 1 else s for d, n, s in
                                zip(self.shape, shape[lead:], self.strides)]
        return self.view(shape, strides)

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        idx = idx + (slice(None),) * (len(self.shape) - len(idx))
        shape, strides, offset = [], [], self._offset
        for i, n, s in zip(idx, self.shape, self.strides):
            r = range(n)[i] if isinstance(i, slice) else range(i, i + 1)
            assert r.step > 0
            offset += r.start * s if len(r) else 0
            shape.append(len(r))
            strides.append(s * r.step)
        return self.view(shape, strides, offset)  # ints keep their dim, as needle's

    def __setitem__(self, idx, other):
        v = self[idx]
        if isinstance(other, SeamArray):
            assert other.shape == v.shape
            self.device.ewise_setitem(other.compact()._handle, v._handle, v.shape, v.strides,
                                      v._offset)
        else:
            self.device.scalar_setitem(v.size, other, v._handle, v.shape, v.strides, v._offset)

    def _op(self, other, ewise, scalar):
        out = self.make(self.shape, device=self.device)
        if isinstance(other, SeamArray):
            assert other.shape == self.shape
            getattr(self.device, ewise)(self.compact()._handle, other.compact()._handle,
                                        out._handle)
        else:
            getattr(self.device, scalar)(self.compact()._handle, other, out._handle)
        return out

    def _fn(self, name):
        out = self.make(self.shape, device=self.device)
        getattr(self.device, name)(self.compact()._handle, out._handle)
        return out

    def __add__(self, o):
        return self._op(o, "ewise_add", "scalar_add")

    def __mul__(self, o):
        return self._op(o, "ewise_mul", "scalar_mul")

    def __truediv__(self, o):
        return self._op(o, "ewise_div", "scalar_div")

    def __neg__(self):
        return self * -1.0

    def __sub__(self, o):
        return self + (-o)

    def __pow__(self, v):
        return self._op(v, None, "scalar_power")

    def maximum(self, o):
        return self._op(o, "ewise_maximum", "scalar_maximum")

    def __eq__(self, o):
        return self._op(o, "ewise_eq", "scalar_eq")

    def __ge__(self, o):
        return self._op(o, "ewise_ge", "scalar_ge")

    def log(self):
        return self._fn("ewise_log")

    def exp(self):
        return self._fn("ewise_exp")

    def tanh(self):
        return self._fn("ewise_tanh")

    def _reduce(self, name, axis, keepdims):
        if axis is None:
            src = self.compact().reshape((1,) * (len(self.shape) - 1) + (self.size,))
            out_shape = (1,) * len(self.shape)
        else:
            rest = [i for i in range(len(self.shape)) if i != axis]
            src = self.permute(rest + [axis])
            out_shape = tuple(1 if i == axis else n for i, n in enumerate(self.shape))
        out = self.make(out_shape, device=self.device)
        getattr(self.device, name)(src.compact()._handle, out._handle, src.shape[-1])
        if keepdims:
            return out
        return out.reshape(() if axis is None else
                           tuple(n for i, n in enumerate(out_shape) if i != axis))

    def sum(self, axis=None, keepdims=False):
        return self._reduce("reduce_sum", axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return self._reduce("reduce_max", axis, keepdims)

    def __matmul__(self, other):
        (m, n), (n2, p) = self.shape, other.shape
        assert n == n2
        t = self.device.__tile_size__
        if m % t == 0 and n % t == 0 and p % t == 0:
            def tiled(x, r, c):  # (r, c) compact -> (r/t, c/t, t, t), tile by tile
                x = x.compact()
                return x.view((r // t, c // t, t, t), (c * t, t, c, 1)).compact()
            out = self.make((m // t, p // t, t, t), device=self.device)
            self.device.matmul_tiled(tiled(self, m, n)._handle, tiled(other, n, p)._handle,
                                     out._handle, m, n, p)
            return out.permute((0, 2, 1, 3)).compact().reshape((m, p))
        out = self.make((m, p), device=self.device)
        self.device.matmul(self.compact()._handle, other.compact()._handle, out._handle,
                           m, n, p)
        return out


def pair(x, dev):
    return SeamArray.from_numpy(x, dev), x.astype(np.float32)


@pytest.mark.parametrize("dev", DEVICES, ids=DEV_IDS)
def test_needle_style_ndarray_runs_over_the_seam(dev):
    rng = np.random.default_rng(9)
    A, a = pair(rng.standard_normal((4, 5, 6)), dev)
    B, b = pair(rng.standard_normal((4, 5, 6)), dev)
    close = dict(rtol=1e-5, atol=1e-5)

    # views: permute, slices with steps and offsets, broadcast
    views = [
        (A.permute((2, 0, 1)), a.transpose(2, 0, 1)),
        (A[1:4, ::2, 1:5:3], a[1:4, ::2, 1:5:3]),
        (A[2, 1:, :], a[2:3, 1:, :]),
        (A[:, 0:1, :].broadcast_to((4, 3, 6)), np.broadcast_to(a[:, 0:1, :], (4, 3, 6))),
        (A[0:1, 2, 3:4].broadcast_to((2, 4, 1, 1)),
         np.broadcast_to(a[0:1, 2:3, 3:4], (2, 4, 1, 1))),
    ]
    for v, w in views:
        np.testing.assert_array_equal(v.numpy(), w)
        np.testing.assert_array_equal(v.compact().numpy(), w)
        assert v._handle.ptr() == A._handle.ptr()  # views share the buffer

    # elementwise on views (each compacted through the seam first)
    P, p = A.permute((1, 0, 2)), a.transpose(1, 0, 2)
    Q, q = B.permute((1, 0, 2)), b.transpose(1, 0, 2)
    np.testing.assert_allclose((P + Q).numpy(), p + q, **close)
    np.testing.assert_allclose((P * Q).numpy(), p * q, **close)
    np.testing.assert_allclose((P / Q).numpy(), p / q, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose((P - Q).numpy(), p - q, **close)
    np.testing.assert_allclose((P + 2.5).numpy(), p + 2.5, **close)
    np.testing.assert_allclose((P * -3.0).numpy(), p * -3.0, **close)
    np.testing.assert_allclose((P / 4.0).numpy(), p / 4.0, **close)
    np.testing.assert_allclose(P.maximum(Q).numpy(), np.maximum(p, q), **close)
    np.testing.assert_allclose(P.maximum(0.0).numpy(), np.maximum(p, 0), **close)
    np.testing.assert_array_equal((P == P).numpy(), np.ones_like(p))
    np.testing.assert_array_equal((P >= Q).numpy(), (p >= q).astype(np.float32))
    np.testing.assert_array_equal((P >= 0.0).numpy(), (p >= 0).astype(np.float32))
    np.testing.assert_array_equal((P == 0.0).numpy(), (p == 0).astype(np.float32))
    S, s = A[1:3, ::2, 2:], a[1:3, ::2, 2:]
    np.testing.assert_allclose((S.maximum(0.0) + 0.5).log().numpy(),
                               np.log(np.maximum(s, 0) + 0.5), **close)
    np.testing.assert_allclose(S.exp().numpy(), np.exp(s), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(S.tanh().numpy(), np.tanh(s), **close)
    np.testing.assert_allclose(((S * S) ** 0.5).numpy(), np.abs(s), **close)
    W, w = A[:, 0:1, :].broadcast_to((4, 5, 6)), np.broadcast_to(a[:, 0:1, :], (4, 5, 6))
    np.testing.assert_allclose((W * B).numpy(), w * b, **close)

    # reductions over each axis, with and without keepdims, on a view
    for axis in (None, 0, 1, 2):
        for keep in (False, True):
            np.testing.assert_allclose(P.sum(axis, keep).numpy(), p.sum(axis, keepdims=keep),
                                       rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(P.max(axis, keep).numpy(),
                                          p.max(axis, keepdims=keep))

    # matmul: plain sizes, and tile multiples (the tiled path), on transposed views
    for m, n, k in [(3, 7, 5), (16, 24, 8), (8, 8, 32)]:
        X, x = pair(rng.standard_normal((n, m)), dev)
        Y, y = pair(rng.standard_normal((n, k)), dev)
        got = (X.permute((1, 0)) @ Y).numpy()
        np.testing.assert_allclose(got, x.T.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)

    # setitem: slices of a view from arrays, views and scalars; the rest of the buffer stays
    C, c = pair(rng.standard_normal((6, 6)), dev)
    p0 = C._handle.ptr()
    C[1:5:2, 0:6:3] = 4.0
    c[1:5:2, 0:6:3] = 4.0
    C[0, :] = SeamArray.from_numpy(np.arange(6.0).reshape(1, 6), dev)
    c[0:1, :] = np.arange(6.0)
    C[2:4, 1:5] = C[3:5, 0:4].permute((1, 0)).permute((1, 0))
    c[2:4, 1:5] = c[3:5, 0:4].copy()
    C[5, 1:6:2] = C[0, 0:3]
    c[5:6, 1:6:2] = c[0:1, 0:3]
    np.testing.assert_array_equal(C.numpy(), c)
    assert C._handle.ptr() == p0


def test_needle_style_ndarray_over_a_quill_arrays_buffer():
    # The pure-Python NDArray and quill's NDArray can view one buffer: quill's `_handle` is
    # a seam Array, so a write on either side shows on the other.
    dev = nd.cpu()
    x = nd.array(np.arange(20, dtype=np.float32).reshape(4, 5))
    v = x[1:4, 1:5:2]
    S = SeamArray(v._handle, v.shape, v.strides, v._offset, v.device)
    np.testing.assert_array_equal(S.numpy(), x.numpy()[1:4, 1:5:2])
    S[0:2, 0:2] = 0.0
    want = np.arange(20, dtype=np.float32).reshape(4, 5)
    want[1:3, 1:5:2] = 0.0
    np.testing.assert_array_equal(x.numpy(), want)
    np.testing.assert_allclose((S + S).sum(1).numpy(), 2 * want[1:4, 1:5:2].sum(1))
    assert S._handle.ptr() == x._handle.ptr() and dev.Array is S._handle.device.Array
