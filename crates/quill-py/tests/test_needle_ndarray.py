"""needle's NDArray surface over quill's views: ``flat`` against NumPy's on views of every
kind and through needle's finite-difference gradient check (which nudges
``realize_cached_data().flat[i]`` in place), ``as_strided``, ``process_slice`` and the
underscored attributes."""
import numpy as np
import pytest

import quill as ndl
import quill.backend_ndarray as nd

VIEWS = [
    ("contiguous", lambda x: x),
    ("permuted", lambda x: x.transpose(2, 0, 1)),
    ("stepped", lambda x: x[:, ::2, 1:]),
    ("negative steps", lambda x: x[::-1, :, ::-2]),
    ("offset", lambda x: x[1:, 1:, 1:]),
]


def quill_view(name, base):
    q = nd.NDArray(base)
    return {
        "contiguous": lambda: q,
        "permuted": lambda: q.permute((2, 0, 1)),
        "stepped": lambda: q[:, ::2, 1:],
        "negative steps": lambda: q[::-1, :, ::-2],
        "offset": lambda: q[1:, 1:, 1:],
    }[name]()


@pytest.mark.parametrize("name, np_view", VIEWS, ids=[v[0] for v in VIEWS])
def test_flat_reads_and_writes_in_c_order_through_any_view(name, np_view):
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    want_base = base.copy()
    q = quill_view(name, base)
    w = np_view(want_base)
    assert len(q.flat) == w.size
    assert list(q.flat) == list(w.flat)
    for i in (0, 1, w.size // 2, w.size - 1, -1, -w.size):
        assert q.flat[i] == w.flat[i]
        q.flat[i] += 0.25
        w.flat[i] += 0.25
    np.testing.assert_array_equal(q.numpy(), w)
    q.flat[1:7:2] = -1.0
    w.flat[1:7:2] = -1.0
    np.testing.assert_array_equal(q.numpy(), w)
    np.testing.assert_array_equal(q.flat[::3].numpy(), w.flat[::3])


def test_flat_edges():
    z = nd.NDArray(np.array(3.5))
    assert len(z.flat) == 1 and z.flat[0] == 3.5
    z.flat[0] = 1.0
    assert z.numpy() == 1.0
    e = nd.NDArray(np.zeros((2, 0)))
    assert len(e.flat) == 0 and list(e.flat) == []
    a = nd.NDArray(np.arange(4, dtype=np.int64))
    with pytest.raises(IndexError, match="flat: index 4 is out of bounds for size 4"):
        a.flat[4]
    with pytest.raises(TypeError, match="flat: indices must be integers"):
        a.flat[1.5]
    with pytest.raises(ValueError):
        a.broadcast_to((3, 4)).flat[0] = 1  # read-only, as NumPy's broadcast views


def test_needle_style_gradient_check_through_flat():
    """needle's tests nudge each element of the cached data and compare the numerical
    derivative with backward()."""
    rng = np.random.default_rng(3)
    x = ndl.Tensor(rng.normal(size=(3, 4)), dtype="float64", requires_grad=True)
    w = ndl.Tensor(rng.normal(size=(4, 2)), dtype="float64")

    def f(t):
        return (ndl.tanh(t @ w) ** 2).sum()

    eps = 1e-6
    numerical = np.zeros(x.shape)
    data = x.realize_cached_data()
    for j in range(data.size):
        data.flat[j] += eps
        f1 = float(f(x).numpy())
        data.flat[j] -= 2 * eps
        f2 = float(f(x).numpy())
        data.flat[j] += eps
        numerical.flat[j] = (f1 - f2) / (2 * eps)
    f(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), numerical, rtol=1e-6, atol=1e-8)


def test_underscored_attributes_as_strided_and_process_slice():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    a = nd.NDArray(x)[1:, 2:]
    assert (a._shape, a._strides, a._offset) == ((3, 4), (6, 1), 8)
    assert a._device == a.device
    # as_strided: a window from the array's offset, sharing the buffer (NumPy's as_strided on
    # the same bytes as the reference)
    v = a.as_strided((2, 3), (1, 6))
    want = np.lib.stride_tricks.as_strided(x.reshape(-1)[8:], (2, 3), (8, 48))
    np.testing.assert_array_equal(v.numpy(), want)
    v[0, 0] = -1.0
    assert a.numpy()[0, 0] == -1.0
    with pytest.raises(ValueError):
        a.as_strided((100, 100), (6, 1))  # past the buffer: refused in Rust
    # process_slice: resolved bounds that index the same elements as the original slice
    rng = np.random.default_rng(4)
    for _ in range(200):
        dim = int(rng.integers(0, 2))
        n = a.shape[dim]
        pick = [None, *range(-n - 2, n + 3)]
        step = [None, 1, 2, 3, -1, -2][int(rng.integers(0, 6))]
        sl = slice(pick[int(rng.integers(0, len(pick)))], pick[int(rng.integers(0, len(pick)))],
                   step)
        got = a.process_slice(sl, dim)
        assert got.start is not None and got.step is not None
        idx = [slice(None)] * 2
        idx[dim] = sl
        ref = a.numpy()[tuple(idx)]
        idx[dim] = got
        np.testing.assert_array_equal(a.numpy()[tuple(idx)], ref)
        if ref.size:
            np.testing.assert_array_equal(a[tuple(idx)].numpy(), ref)
    with pytest.raises(ValueError, match="step cannot be zero"):
        a.process_slice(slice(0, 2, 0), 0)
