"""The 2024.12 and 2025.12 additions of the Array API standard against NumPy: integer-array
indexing (random mixes of ints, slices, None, ... and integer arrays over strided sources),
`nextafter`, the tuples `meshgrid` / `broadcast_arrays` / `devices()` return, and the version."""
import numpy as np
import pytest

import quill.array_api as xp

RNG = np.random.default_rng(2024)


def _source(shape):
    """(quill view, NumPy copy): a reversed, stepped view of a larger array."""
    big = np.arange(np.prod([2 * d + 1 for d in shape])).reshape([2 * d + 1 for d in shape])
    sl = tuple(slice(None, None, -2) if k % 2 else slice(1, None, 2) for k in range(len(shape)))
    n = big[sl]
    return xp.asarray(big)[sl], n


def _random_index(shape):
    """A random NumPy index expression with at least one integer array."""
    entries, dims = [], list(shape)
    batch = tuple(int(d) for d in RNG.integers(1, 3, size=RNG.integers(0, 3)))
    for d in dims:
        kind = RNG.integers(0, 4)
        if kind == 0:
            entries.append(int(RNG.integers(-d, d)))
        elif kind == 1:
            step = int(RNG.choice([-2, -1, 1, 2]))
            entries.append(slice(None, None, step))
        else:
            # An array of positions in [-d, d), its shape broadcastable to the batch.
            s = tuple(b if RNG.random() < 0.7 else 1 for b in batch)
            entries.append(RNG.integers(-d, d, size=s))
    if not any(isinstance(e, np.ndarray) for e in entries):
        entries[RNG.integers(0, len(entries))] = RNG.integers(0, dims[0] if dims else 1, size=batch)
    if RNG.random() < 0.3:
        entries = entries[: RNG.integers(1, len(entries) + 1)]
        entries.append(Ellipsis)
    if RNG.random() < 0.2:
        entries.insert(RNG.integers(0, len(entries) + 1), None)
    return tuple(entries)


def _to_quill(idx, how):
    out = []
    for e in idx:
        if isinstance(e, np.ndarray):
            e = {"quill": xp.asarray(e), "numpy": e, "list": e.tolist() if e.ndim == 1 else xp.asarray(e)}[how]
        out.append(e)
    return tuple(out)


@pytest.mark.parametrize("how", ["quill", "numpy", "list"])
def test_integer_array_indexing_matches_numpy(how):
    checked = 0
    for _ in range(150):
        shape = tuple(int(d) for d in RNG.integers(1, 5, size=RNG.integers(1, 5)))
        q, n = _source(shape)
        idx = _random_index(n.shape)
        try:
            want = n[idx]
        except IndexError:
            continue  # NumPy refuses (e.g. a shape mismatch): checked below on its own
        got = q[_to_quill(idx, how)]
        assert got.shape == want.shape, (shape, idx)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=str(idx))
        checked += 1
    assert checked > 100


def test_integer_array_indexing_errors():
    q = xp.reshape(xp.arange(12), (3, 4))
    with pytest.raises(IndexError, match="out of range for axis 1 with size 4"):
        q[xp.asarray([0, 1]), xp.asarray([4, 0])]
    with pytest.raises(IndexError, match="-4"):
        q[xp.asarray([-4])]
    with pytest.raises(IndexError, match="broadcast"):
        q[xp.asarray([0, 1]), xp.asarray([0, 1, 2])]
    with pytest.raises(IndexError, match="integers"):
        q[xp.asarray([0.5])]
    with pytest.raises(IndexError, match="assignment"):
        q[xp.asarray([0, 1])] = 0
    # A copy: writing to the result leaves the source alone.
    r = q[xp.asarray([0, 0])]
    r[0, 0] = 99
    assert int(q[0, 0]) == 0
    # Empty index arrays and size-0 dims.
    assert q[xp.asarray(np.zeros(0, np.int64))].shape == (0, 4)
    assert xp.zeros((0, 3))[:, xp.asarray([2, 0])].shape == (0, 2)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_nextafter_matches_numpy(dt):
    tiny = np.finfo(dt).smallest_subnormal
    big = np.finfo(dt).max
    a = np.array([0.0, -0.0, 1.0, 1.0, -1.0, tiny, -tiny, big, big, np.inf, -np.inf, np.nan, 1.0, 0.0, 2.0],
                 dtype=dt)
    b = np.array([1.0, -1.0, 2.0, 0.0, -2.0, 0.0, 0.0, np.inf, 0.0, 0.0, 0.0, 1.0, np.nan, -0.0, 2.0],
                 dtype=dt)
    got = np.asarray(xp.nextafter(xp.asarray(a)[::-1], xp.asarray(b)[::-1]))
    with np.errstate(over="ignore"):
        want = np.nextafter(a[::-1], b[::-1])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint64 if dt == "float64" else np.uint32),
                                  want.view(np.uint64 if dt == "float64" else np.uint32))
    # Broadcasting, a Python scalar, and promotion of mixed precisions.
    col = RNG.standard_normal((3, 1)).astype(dt)
    np.testing.assert_array_equal(np.asarray(xp.nextafter(xp.asarray(col), 0.0)), np.nextafter(col, dt == "float32" and np.float32(0) or 0.0))
    np.testing.assert_array_equal(np.asarray(xp.nextafter(xp.asarray(col), xp.asarray(col.T))),
                                  np.nextafter(col, col.T))
    assert xp.nextafter(xp.asarray(np.ones(2, np.float32)), xp.asarray(np.ones(2))).dtype == xp.float64
    # Integers promote to float64, as NumPy's; complex operands are refused by name.
    ints = xp.nextafter(xp.asarray([1, 2]), xp.asarray([2, 1]))
    np.testing.assert_array_equal(np.asarray(ints), np.nextafter([1, 2], [2, 1]))
    with pytest.raises(ValueError, match="nextafter"):
        xp.nextafter(xp.asarray([1j]), xp.asarray([1.0]))


def test_2025_12_tuples_and_version():
    assert xp.__array_api_version__ == "2025.12"
    a, b = xp.arange(3), xp.arange(2)
    m = xp.meshgrid(a, b)
    assert isinstance(m, tuple) and [x.shape for x in m] == [(2, 3), (2, 3)]
    assert isinstance(xp.meshgrid(a, b, indexing="ij"), tuple)
    br = xp.broadcast_arrays(xp.ones((2, 1)), xp.ones(3))
    assert isinstance(br, tuple) and all(x.shape == (2, 3) for x in br)
    assert isinstance(xp.__array_namespace_info__().devices(), tuple)
    assert xp.broadcast_shapes((2, 1), (3,)) == (2, 3)
    np.testing.assert_array_equal(np.asarray(xp.searchsorted(xp.asarray([1.0, 2.0, 3.0]), 2.5)),
                                  np.searchsorted([1.0, 2.0, 3.0], 2.5))
