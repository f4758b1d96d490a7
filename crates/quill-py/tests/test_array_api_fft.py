"""quill.array_api.fft against numpy.fft: every function, each norm, cropped and padded n,
several axes, real and complex input in both precisions, over transposed and reversed views;
the frequencies and shifts; bad arguments raise."""
import numpy as np
import pytest

import quill.array_api as xp

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fftn", "ifftn", "rfftn", "irfftn"]
REAL_IN = {"rfft", "ihfft", "rfftn"}


def _input(name, dt, rng):
    x = rng.standard_normal((6, 5))
    if name not in REAL_IN:
        x = x + 1j * rng.standard_normal((6, 5))
    if dt == "single":
        x = x.astype(np.float32 if name in REAL_IN else np.complex64)
    return x


def _check(got, want, single):
    got = got.numpy()
    tol = 2e-5 if single else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    # NumPy 2 keeps single precision (hfft / irfft give the real type).
    assert got.dtype == want.dtype, (got.dtype, want.dtype)


@pytest.mark.parametrize("dt", ["single", "double"])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("name", ONE_D)
def test_one_d_matches_numpy(name, norm, dt):
    rng = np.random.default_rng(1)
    x = _input(name, dt, rng)
    q = xp.asarray(x)
    views = [(x, q, -1), (x.T, q.permute((1, 0)), 0), (x[::-1, ::2], q[::-1, ::2], 1)]
    for xn, xq, axis in views:
        for n in (None, 3, 9):
            want = getattr(np.fft, name)(xn, n=n, axis=axis, norm=norm)
            _check(getattr(xp.fft, name)(xq, n=n, axis=axis, norm=norm), want, dt == "single")


@pytest.mark.parametrize("name", N_D)
def test_n_d_matches_numpy(name):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 5))
    if name not in REAL_IN:
        x = x + 1j * rng.standard_normal((3, 4, 5))
    q = xp.asarray(x)
    for s, axes in [(None, None), (None, (0, 2)), ((4, 6), (-1, 0)), ((2, 3, 4), (0, 1, 2))]:
        want = getattr(np.fft, name)(x, s=s, axes=axes)
        _check(getattr(xp.fft, name)(q, s=s, axes=axes), want, False)


def test_frequencies_and_shifts():
    for n in (1, 4, 7):
        np.testing.assert_allclose(xp.fft.fftfreq(n, d=0.1).numpy(), np.fft.fftfreq(n, d=0.1))
        np.testing.assert_allclose(xp.fft.rfftfreq(n, d=2.0).numpy(), np.fft.rfftfreq(n, d=2.0))
    assert xp.fft.fftfreq(4, dtype=xp.float32).dtype == "float32"
    x = np.arange(12.0).reshape(3, 4)
    for axes in (None, 0, (1,), (0, 1)):
        np.testing.assert_array_equal(xp.fft.fftshift(xp.asarray(x), axes=axes).numpy(),
                                      np.fft.fftshift(x, axes=axes))
        np.testing.assert_array_equal(xp.fft.ifftshift(xp.asarray(x), axes=axes).numpy(),
                                      np.fft.ifftshift(x, axes=axes))


def test_bad_arguments_raise():
    q = xp.asarray(np.ones(4, np.complex128))
    with pytest.raises(ValueError, match="at least 1"):
        xp.fft.fft(q, n=0)
    with pytest.raises(ValueError, match="norm must be"):
        xp.fft.fft(q, norm="both")
    with pytest.raises(IndexError, match="axis 3"):
        xp.fft.fft(q, axis=3)
    with pytest.raises(ValueError, match="real signal"):
        xp.fft.rfft(q)
    with pytest.raises(ValueError, match="one size per axis"):
        xp.fft.fftn(xp.asarray(np.ones((2, 2))), s=(2,), axes=(0, 1))
