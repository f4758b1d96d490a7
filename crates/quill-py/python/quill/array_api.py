"""A Python Array API (2025.12) namespace over quill's NDArray: ``xp = x.__array_namespace__()``
or ``import quill.array_api as xp``. Every function is one quill op (or a few). Covered:
dtypes, constants, creation, elementwise, comparisons, reductions, manipulation, ``matmul`` /
``matrix_transpose`` / ``vecdot``, ``where``, ``astype``; and (``_array_api_more``) data-type
functions, sorting, searching, sets, ``take``, ``cumulative_sum``, ``tensordot``, bitwise
functions, ``nextafter``; the ``linalg`` and ``fft`` extensions (``array_api_linalg``,
``array_api_fft``). Integer-array indexing (``x[i, j]``) is the NDArray's own."""
import builtins
import math

import numpy as _np

from . import _optable
from ._native import NDArray, cpu as _cpu, from_dlpack

__array_api_version__ = "2025.12"



class _DType:
    """A dtype object, as the standard asks (distinct from kind names such as "integral").
    It equals and hashes as its name, so ``x.dtype == xp.float32`` holds for quill's string
    dtypes, and quill functions accept it wherever they take a dtype name."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return self.name == (other.name if isinstance(other, _DType) else other)

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"quill.array_api.{self.name}"

    def __str__(self):
        return self.name


bool = _DType("bool")  # noqa: A001 - the standard's names
int8, int16, int32, int64 = _DType("int8"), _DType("int16"), _DType("int32"), _DType("int64")
uint8, uint16, uint32, uint64 = (_DType("uint8"), _DType("uint16"), _DType("uint32"),
                                 _DType("uint64"))
float16, float32, float64 = _DType("float16"), _DType("float32"), _DType("float64")
complex64, complex128 = _DType("complex64"), _DType("complex128")
_BY_NAME = {d.name: d for d in [bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                                float16, float32, float64, complex64, complex128]}
e, pi, inf, nan, newaxis = math.e, math.pi, math.inf, math.nan, None


def _arr(x, dtype=None):
    return x if isinstance(x, NDArray) and dtype is None else asarray(x, dtype=dtype)


# creation
def asarray(obj, /, *, dtype=None, device=None, copy=None):
    if isinstance(obj, NDArray):
        if dtype is None or obj.dtype == dtype:
            # astype always copies; copy=None and copy=False share the buffer.
            return obj.astype(obj.dtype) if copy else obj
        if copy is False:
            raise ValueError(f"asarray: casting {obj.dtype} to {dtype} needs a copy, and "
                             "copy=False forbids one")
        return obj.astype(dtype)
    if dtype is None and isinstance(obj, float):
        dtype = float64
    # NumPy checks Python numbers against the dtype (300 into uint8 is an OverflowError).
    np_dtype = None if dtype is None or str(dtype) == "bfloat16" else str(dtype)
    a = _np.asarray(obj, dtype=np_dtype)
    if dtype is None and a.dtype == _np.float64:
        dtype = float64  # the standard's default float for Python floats here
    return NDArray(a, device=device, dtype=dtype)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        ints = builtins.all(isinstance(v, int) for v in (start, stop, step))
        dtype = int64 if ints else float64
    return NDArray._create("arange", dtype, float(start), float(stop), float(step))


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    if num < 0:
        raise ValueError(f"linspace: num must be >= 0, got {num}")
    if num == 0:
        return zeros((0,), dtype=dtype or float64)
    if not endpoint:
        # The first num points of num + 1, computed in float64 and rounded once (as NumPy).
        full = NDArray._create("linspace", dtype or float64, float(start), float(stop),
                               float(num + 1))
        return full[:num].compact()
    return NDArray._create("linspace", dtype or float64, float(start), float(stop), float(num))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    n_cols = n_rows if n_cols is None else n_cols
    return NDArray._create("eye", dtype or float64, float(n_rows), float(n_cols), k=k)


def full(shape, fill_value, *, dtype=None, device=None):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dtype is None:
        dtype = {type(True): bool, int: int64}.get(type(fill_value), float64)
    a = NDArray._create("full", dtype, 0.0, shape=list(shape))
    a.fill(fill_value)
    return a


def zeros(shape, *, dtype=None, device=None):
    return full(shape, 0, dtype=dtype or float64)


def ones(shape, *, dtype=None, device=None):
    return full(shape, 1, dtype=dtype or float64)


def empty(shape, *, dtype=None, device=None):
    return zeros(shape, dtype=dtype)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return full(x.shape, fill_value, dtype=dtype or x.dtype)


def zeros_like(x, /, *, dtype=None, device=None):
    return full_like(x, 0, dtype=dtype)


def ones_like(x, /, *, dtype=None, device=None):
    return full_like(x, 1, dtype=dtype)


def empty_like(x, /, *, dtype=None, device=None):
    return zeros_like(x, dtype=dtype)


# elementwise
def _u(name, pyname):
    def f(x, /):
        return _arr(x)._unary(name)

    f.__name__ = pyname
    return f


# One function per op of quill's table, under the standard's name where it differs.
_UNARY_NAMES = {"neg": "negative"}
for _op in _optable.UNARY:
    _name = _UNARY_NAMES.get(_op, _op)
    globals()[_name] = _u(_op, _name)


def positive(x, /):
    return _arr(x).compact()


def _b(name, pyname):
    def f(x1, x2, /):
        if isinstance(x1, NDArray):
            return x1._binary(name, x2)
        return _arr(x2)._binary(name, x1, True)

    f.__name__ = pyname
    return f


_BINARY_NAMES = {
    "sub": "subtract", "mul": "multiply", "div": "divide", "eq": "equal", "ne": "not_equal",
    "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
}
for _op in _optable.BINARY:
    _name = _BINARY_NAMES.get(_op, _op)
    globals()[_name] = _b(_op, _name)


def bitwise_invert(x, /):
    return ~_arr(x)


_FLOATS = (float16, float32, float64, "bfloat16")
_COMPLEX = (complex64, complex128)


def real(x, /):
    """The real part (a real array of the parts' precision; a real array itself)."""
    return _arr(x).real


def imag(x, /):
    """The imaginary part (zeros for a real array)."""
    return _arr(x).imag


def conj(x, /):
    """The complex conjugate."""
    return _arr(x).conj()


def _weak(x, like):
    """A Python number as an array of `like`'s dtype (NumPy 2's weak scalars); a float with an
    integer array stays a float64 array."""
    if isinstance(x, NDArray) or not isinstance(like, NDArray):
        return _arr(x)
    if isinstance(x, float) and like.dtype not in _FLOATS + _COMPLEX:
        return asarray(x)
    if isinstance(x, complex) and like.dtype not in _COMPLEX:
        # A complex scalar keeps a float32 / float16 array's precision, else complex128.
        return asarray(x, dtype=complex64 if like.dtype in (float16, float32) else complex128)
    return NDArray(_np.asarray(x), dtype=like.dtype)


def where(condition, x1, x2, /):
    x1 = _weak(x1, x2)
    x2 = _weak(x2, x1)
    return NDArray._where(_arr(condition), _arr(x1), _arr(x2))


def clip(x, /, min=None, max=None):  # noqa: A002 - the standard's names
    x = _arr(x)
    out = x
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    # The standard: the result has x's dtype whatever min and max are.
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def astype(x, dtype, /, *, copy=True, device=None):
    return x.astype(dtype) if copy or x.dtype != dtype else x


# reductions
def _r(name):
    def f(x, /, *, axis=None, keepdims=False):
        return x._reduce(name, axis, keepdims, 0)

    f.__name__ = name
    return f


for _name in ["max", "min", "mean", "any", "all"]:
    globals()[_name] = _r(_name)


def _reduce_as(x, name, axis, dtype, keepdims):
    """sum / prod with the standard's dtype=: the result has that dtype (NumPy accumulates in
    it; integers wrap alike either way, since the i64 accumulation agrees modulo the width)."""
    if dtype is None:
        return x._reduce(name, axis, keepdims, 0)
    out = x.astype(dtype)._reduce(name, axis, keepdims, 0)
    return out if out.dtype == dtype else out.astype(dtype)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001 - the standard's name
    return _reduce_as(x, "sum", axis, dtype, keepdims)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _reduce_as(x, "prod", axis, dtype, keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return x._reduce("var", axis, keepdims, int(correction))


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return x._reduce("std", axis, keepdims, int(correction))


def argmax(x, /, *, axis=None, keepdims=False):
    return x.argmax(axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    return x.argmin(axis, keepdims)


# manipulation
def reshape(x, /, shape, *, copy=None):
    return x.reshape(tuple(shape))


def permute_dims(x, /, axes):
    return x.permute(tuple(axes))


def broadcast_to(x, /, shape):
    return x.broadcast_to(tuple(shape))


def expand_dims(x, /, *, axis=0):
    """A view with new size-1 axes at `axis` (an int, or a tuple of positions in the result,
    negative ones counted from its end, as the 2025.12 standard and NumPy take them)."""
    if isinstance(axis, int):
        return x.expand_dims(axis)
    axes = list(axis)
    nd = x.ndim + len(axes)
    norm = [a + nd if a < 0 else a for a in axes]
    if builtins.any(a < 0 or a >= nd for a in norm) or len(set(norm)) != len(norm):
        raise ValueError(f"expand_dims: axes {tuple(axes)} must be distinct and in [-{nd}, {nd})"
                         f" for a rank-{x.ndim} array")
    for a in sorted(norm):
        x = x.expand_dims(a)
    return x


def squeeze(x, /, axis):
    return x.squeeze(axis)


def flip(x, /, *, axis=None):
    return x.flip(axis)


def concat(arrays, /, *, axis=0):
    if axis is None:
        return NDArray._join("concat", [a.reshape((-1,)) for a in arrays], 0)
    return NDArray._join("concat", list(arrays), axis)


def stack(arrays, /, *, axis=0):
    return NDArray._join("stack", list(arrays), axis)


# linear algebra
def matmul(x1, x2, /):
    return x1 @ x2


def matrix_transpose(x, /):
    axes = list(range(x.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return x.permute(tuple(axes))


def vecdot(x1, x2, /, *, axis=-1):
    """Dot products of the vectors along `axis` (counted from the end, as the standard says),
    the other dims broadcast; the result has the operands' promoted dtype (uint8 stays uint8,
    wrapping as NumPy's does). The contracted axis must have one size in both: it is not
    broadcast."""
    x1, x2 = _arr(x1), _arr(x2)
    n = builtins.min(x1.ndim, x2.ndim)
    if n == 0 or not -n <= axis < n:
        raise ValueError(f"vecdot: axis {axis} is out of range for arrays of rank {x1.ndim} "
                         f"and {x2.ndim} (it must lie in [-{n}, {n}))")
    if axis >= 0:
        axis -= n
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"vecdot: the contracted axis {axis} has size {x1.shape[axis]} in x1 "
                         f"(shape {x1.shape}) but {x2.shape[axis]} in x2 (shape {x2.shape})")
    from ._array_api_more import result_type
    if x1.dtype in _COMPLEX:
        x1 = x1.conj()  # the standard's vecdot conjugates the first operand
    return _reduce_as(x1 * x2, "sum", axis, result_type(x1, x2), False)


def __array_namespace_info__():
    from ._array_api_more import _KINDS as kinds

    class Info:
        def capabilities(self):
            return {"boolean indexing": True, "data-dependent shapes": True,
                    "max dimensions": None}

        def default_device(self):
            return _cpu()

        def devices(self):
            from ._native import cuda
            return (_cpu(),) + tuple(d for d in [cuda()] if d.enabled())

        def default_dtypes(self, *, device=None):
            return {"real floating": float64, "complex floating": complex128,
                    "integral": int64, "indexing": int64}

        def dtypes(self, *, device=None, kind=None):
            if kind is None:
                names = (bool,) + kinds["numeric"]
            else:
                ks = kind if isinstance(kind, tuple) else (kind,)
                names = tuple(n for k in ks for n in kinds[k])
            # float16 is quill's extension: the standard defines no such dtype, so its
            # listing leaves it out (isdtype still knows it as a real floating dtype).
            return {str(n): n for n in names if n is not float16}

    return Info()


from ._array_api_more import *  # noqa: E402,F401,F403 - needs the names above
from . import array_api_linalg as linalg  # noqa: E402 - the standard's linalg extension
from . import array_api_fft as fft  # noqa: E402 - the standard's fft extension
