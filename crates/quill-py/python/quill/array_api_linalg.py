"""The Array API standard's `linalg` extension (`quill.array_api.linalg`): each function a thin
call into quill's Rust `linalg` module (faer's factorizations, batched over leading dims, any
strides), with the standard's names, keyword arguments and named-tuple results."""
from collections import namedtuple

from ._native import NDArray, _linalg as _n

__all__ = ["cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
           "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]

EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


def _arr(x):
    from .array_api import asarray
    return x if isinstance(x, NDArray) else asarray(x)


def _rtol(rtol):
    """None, a Python number, or an array broadcast against the batch dims (one per matrix)."""
    if rtol is None or isinstance(rtol, (int, float, NDArray)):
        return rtol
    from .array_api import asarray
    return asarray(rtol)


def cholesky(x, /, *, upper=False):
    return _n._cholesky(_arr(x), bool(upper))


def cross(x1, x2, /, *, axis=-1):
    return _n._cross(_arr(x1), _arr(x2), axis)


def det(x, /):
    return _n._det(_arr(x))


def diagonal(x, /, *, offset=0):
    return _n._diagonal(_arr(x), offset)


def eig(x, /):
    """Eigenvalues and right eigenvectors (unit columns) of general square matrices; both
    complex whatever the input, as the 2025.12 standard says."""
    return EigResult(*_n._eig(_arr(x)))


def eigvals(x, /):
    return _n._eigvals(_arr(x))


def eigh(x, /):
    return EighResult(*_n._eigh(_arr(x)))


def eigvalsh(x, /):
    return _n._eigh(_arr(x))[0]


def inv(x, /):
    return _n._inv(_arr(x))


def matmul(x1, x2, /):
    return _arr(x1) @ _arr(x2)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002 - the standard's name
    return _n._matrix_norm(_arr(x), keepdims, ord)


def matrix_power(x, n, /):
    if not isinstance(n, int):
        raise TypeError(f"matrix_power: n must be an int, got {type(n).__name__}")
    return _n._matrix_power(_arr(x), n)


def matrix_rank(x, /, *, rtol=None):
    return _n._matrix_rank(_arr(x), _rtol(rtol))


def matrix_transpose(x, /):
    from .array_api import matrix_transpose as mt
    return mt(_arr(x))


def outer(x1, x2, /):
    return _n._outer(_arr(x1), _arr(x2))


def pinv(x, /, *, rtol=None):
    return _n._pinv(_arr(x), _rtol(rtol))


def qr(x, /, *, mode="reduced"):
    return QRResult(*_n._qr(_arr(x), mode))


def slogdet(x, /):
    return SlogdetResult(*_n._slogdet(_arr(x)))


def solve(x1, x2, /):
    return _n._solve(_arr(x1), _arr(x2))


def svd(x, /, *, full_matrices=True):
    return SVDResult(*_n._svd(_arr(x), bool(full_matrices)))


def svdvals(x, /):
    return _n._svdvals(_arr(x))


def tensordot(x1, x2, /, *, axes=2):
    x1, x2 = _arr(x1), _arr(x2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(x1.ndim, x2.ndim):
            raise ValueError(f"tensordot: axes={axes} must lie in [0, {min(x1.ndim, x2.ndim)}]")
        a = list(range(x1.ndim - axes, x1.ndim))
        b = list(range(axes))
    else:
        a, b = axes
        a = [a] if isinstance(a, int) else list(a)
        b = [b] if isinstance(b, int) else list(b)
    return _n._tensordot(x1, x2, a, b)


def trace(x, /, *, offset=0, dtype=None):
    from .array_api import sum as _sum
    return _sum(_n._diagonal(_arr(x), offset), axis=-1, dtype=dtype)


def vecdot(x1, x2, /, *, axis=-1):
    from .array_api import vecdot as vd
    return vd(x1, x2, axis=axis)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002 - the standard's name
    if isinstance(axis, int):
        axis = [axis]
    elif axis is not None:
        axis = list(axis)
    return _n._vector_norm(_arr(x), axis, keepdims, ord)
