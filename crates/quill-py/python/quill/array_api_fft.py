"""The Array API standard's `fft` extension (`quill.array_api.fft`): each transform a call into
quill's Rust `fft` module (rustfft plans over every lane of the axis, any length), with the
standard's names and keyword arguments; `fftshift` / `ifftshift` are rolls."""
from ._native import NDArray, _fft as _n

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _arr(x):
    from .array_api import asarray
    return x if isinstance(x, NDArray) else asarray(x)


def _seq(v):
    return None if v is None else [int(i) for i in v]


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    return _n._fft(_arr(x), n, axis, norm)


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    return _n._ifft(_arr(x), n, axis, norm)


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _n._rfft(_arr(x), n, axis, norm)


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _n._irfft(_arr(x), n, axis, norm)


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _n._hfft(_arr(x), n, axis, norm)


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _n._ihfft(_arr(x), n, axis, norm)


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    return _n._fftn(_arr(x), _seq(s), _seq(axes), norm)


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    return _n._ifftn(_arr(x), _seq(s), _seq(axes), norm)


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    return _n._rfftn(_arr(x), _seq(s), _seq(axes), norm)


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    return _n._irfftn(_arr(x), _seq(s), _seq(axes), norm)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _n._fftfreq(n, float(d), None if dtype is None else str(dtype))


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _n._rfftfreq(n, float(d), None if dtype is None else str(dtype))


def _shift(x, axes, sign):
    from .array_api import roll
    x = _arr(x)
    axes = tuple(range(x.ndim)) if axes is None else (
        (axes,) if isinstance(axes, int) else tuple(axes))
    shifts = tuple(sign * (x.shape[a] // 2) if sign > 0 else -(x.shape[a] // 2) for a in axes)
    return roll(x, shifts, axis=axes)


def fftshift(x, /, *, axes=None):
    """The zero frequency moved to the middle: a roll by n // 2 along each of `axes`."""
    return _shift(x, axes, 1)


def ifftshift(x, /, *, axes=None):
    """The inverse of fftshift: a roll by -(n // 2)."""
    return _shift(x, axes, -1)
