"""The rest of the Array API namespace, composed from quill core ops (sort, argsort, cumsum,
nonzero, searchsorted, take, where, permute, broadcast, matmul): data-type functions,
``meshgrid`` / ``tril`` / ``triu``, manipulation (``moveaxis``, ``broadcast_arrays``,
``repeat``, ``roll``, ``tile``, ``unstack``), ``take``, sorting, searching, sets,
``cumulative_sum``, ``tensordot`` and the float helpers (``copysign``, ``hypot``,
``logaddexp``, ``signbit``). Imported into ``quill.array_api`` at the end of that module."""
import builtins
import math
from collections import namedtuple

import numpy as _np

from ._native import NDArray
from .array_api import (
    _BY_NAME, _arr, abs, arange, asarray, bool, complex64, complex128, concat, equal, exp,
    float16, float32, float64,
    int8, int16, int32, int64, isinf, log1p, logical_or, matmul, maximum, minimum, multiply,
    not_equal, sqrt, uint8, uint16, uint32, uint64, where, zeros,
)

_SIGNED = (int8, int16, int32, int64)
_UNSIGNED = (uint8, uint16, uint32, uint64)
_KINDS = {
    "bool": (bool,),
    "signed integer": _SIGNED,
    "unsigned integer": _UNSIGNED,
    "integral": _SIGNED + _UNSIGNED,
    "real floating": (float16, float32, float64),
    "complex floating": (complex64, complex128),
    "numeric": _SIGNED + _UNSIGNED + (float16, float32, float64, complex64, complex128),
}


# data-type functions
def isdtype(dtype, kind):
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str) and kind in _KINDS:
        return dtype in _KINDS[kind]
    if isinstance(kind, str) and kind not in _KINDS.get("numeric") + (bool,):
        raise ValueError(f"isdtype: unknown kind {kind!r}; kinds are {sorted(_KINDS)}")
    return dtype == kind


def result_type(*arrays_and_dtypes):
    dtypes = [a.dtype if isinstance(a, NDArray) else a for a in arrays_and_dtypes
              if not isinstance(a, (int, float, complex))]
    if not dtypes:
        raise ValueError("result_type: needs at least one array or dtype")
    out = NDArray._create("full", dtypes[0], 0.0, shape=[])
    for d in dtypes[1:]:
        out = out._binary("add", NDArray._create("full", d, 0.0, shape=[]))
    return _BY_NAME.get(out.dtype, out.dtype)


def can_cast(from_, to, /):
    src = from_.dtype if isinstance(from_, NDArray) else from_
    if src == to:
        return True
    if src == bool or to == bool:
        return False
    return result_type(src, to) == to


_Finfo = namedtuple("finfo_object", "bits eps max min smallest_normal dtype")
_Iinfo = namedtuple("iinfo_object", "bits max min dtype")


def finfo(type, /):  # noqa: A002 - the standard's name
    dt = type.dtype if isinstance(type, NDArray) else type
    if dt == "bfloat16":
        return _Finfo(16, 2.0 ** -7, 3.3895313892515355e38, -3.3895313892515355e38,
                      2.0 ** -126, dt)
    f = _np.finfo(str(dt))
    # A complex dtype's finfo describes its real parts (the standard's rule).
    part = {"complex64": float32, "complex128": float64}.get(str(dt), dt)
    return _Finfo(f.bits, float(f.eps), float(f.max), float(f.min),
                  float(f.smallest_normal), part)


def iinfo(type, /):  # noqa: A002 - the standard's name
    dt = type.dtype if isinstance(type, NDArray) else type
    i = _np.iinfo(str(dt))
    return _Iinfo(i.bits, int(i.max), int(i.min), dt)


# creation
def meshgrid(*arrays, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', not {indexing!r}")
    sizes = [a.size for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and len(arrays) > 1 and i < 2:
            axis = 1 - i
        shape = [1] * len(arrays)
        shape[axis] = a.size
        out.append(a.reshape(tuple(shape)).broadcast_to(tuple(sizes)).compact())
    return tuple(out)  # a tuple since the 2025.12 standard


def _tri(x, k, lower):
    rows = arange(x.shape[-2]).reshape((-1, 1))
    cols = arange(x.shape[-1]).reshape((1, -1))
    keep = (cols - rows) <= k if lower else (cols - rows) >= k
    return where(keep, x, zeros((), dtype=x.dtype))


def tril(x, /, *, k=0):
    return _tri(x, k, True)


def triu(x, /, *, k=0):
    return _tri(x, k, False)


# manipulation
def moveaxis(x, source, destination, /):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    n = x.ndim
    src = [s + n if s < 0 else s for s in src]
    dst = [d + n if d < 0 else d for d in dst]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must be "
                         "unique axes of equal count")
    if builtins.any(not 0 <= a < n for a in src + dst):
        raise IndexError(f"moveaxis: axes {source} -> {destination} out of range for rank {n}")
    order = [a for a in range(n) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.permute(tuple(order))


def broadcast_arrays(*arrays):
    shape = _np.broadcast_shapes(*[a.shape for a in arrays])
    return tuple(a.broadcast_to(shape) for a in arrays)  # a tuple since 2025.12


def take(x, indices, /, *, axis=None):
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for a rank-{x.ndim} array")
        axis = 0
    return x._take(_arr(indices), axis)


def repeat(x, repeats, /, *, axis=None):
    if axis is None:
        x, axis = x.reshape((-1,)), 0
    n = x.shape[axis]
    if isinstance(repeats, int):
        if repeats < 0:
            raise ValueError(f"repeat: repeats must be >= 0, got {repeats}")
        reps = NDArray._create("full", int64, 0.0, shape=[n])
        reps.fill(repeats)
    else:
        reps = _arr(repeats).astype(int64)
        if reps.shape == (1,) and n != 1:
            reps = reps.broadcast_to((n,))
        if reps.shape != (n,):
            raise ValueError(f"repeat: repeats has shape {reps.shape}, needs ({n},) or (1,)")
        if n and reps._reduce("min", None, False, 0).item() < 0:
            raise ValueError("repeat: repeats must be >= 0")
    # Output position p copies element i where ends[i-1] <= p < ends[i].
    ends = reps._cumsum(0) if n else arange(0)
    total = int(ends[-1].item()) if n else 0
    idx = ends._searchsorted(arange(total), True)
    return x._take(idx, axis)


def roll(x, /, shift, *, axis=None):
    if axis is None:
        return roll(x.reshape((-1,)), shift, axis=0).reshape(x.shape)
    shifts = [shift] if isinstance(shift, int) else list(shift)
    axes = [axis] if isinstance(axis, int) else list(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    for s, a in zip(shifts, axes):
        n = x.shape[a]
        if n:
            x = x._take((arange(n) - s)._binary("remainder", n), a)
    return x


def tile(x, repetitions, /):
    reps = tuple(repetitions)
    nd = builtins.max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(v for s in shape for v in (1, s))
    target = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    out = x.reshape(inter).broadcast_to(target).compact()
    return out.reshape(tuple(r * s for r, s in zip(reps, shape)))


def unstack(x, /, *, axis=0):
    m = moveaxis(x, axis, 0)
    return tuple(m[i] for i in range(m.shape[0]))


def tensordot(x1, x2, /, *, axes=2):
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError(f"tensordot: axes must be >= 0, got {axes}")
        a1 = list(range(x1.ndim - axes, x1.ndim))
        a2 = list(range(axes))
    else:
        a1, a2 = [list(a) if not isinstance(a, int) else [a] for a in axes]
    a1 = [a + x1.ndim if a < 0 else a for a in a1]
    a2 = [a + x2.ndim if a < 0 else a for a in a2]
    if [x1.shape[a] for a in a1] != [x2.shape[a] for a in a2]:
        raise ValueError(f"tensordot: contracted dims differ: {x1.shape} axes {a1} vs "
                         f"{x2.shape} axes {a2}")
    free1 = [a for a in range(x1.ndim) if a not in a1]
    free2 = [a for a in range(x2.ndim) if a not in a2]
    k = math.prod(x1.shape[a] for a in a1)
    m = math.prod(x1.shape[a] for a in free1)
    n = math.prod(x2.shape[a] for a in free2)
    p1 = x1.permute(tuple(free1 + a1)).compact().reshape((m, k))
    p2 = x2.permute(tuple(a2 + free2)).compact().reshape((k, n))
    out = matmul(p1, p2)
    return out.reshape(tuple(x1.shape[a] for a in free1) + tuple(x2.shape[a] for a in free2))


# sorting, searching
def sort(x, /, *, axis=-1, descending=False, stable=True):
    return x._sort(axis, descending, True)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    return x._sort(axis, descending, False)


def nonzero(x, /):
    return x._nonzero()


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', not {side!r}")
    if sorter is not None:
        x1 = x1._take(_arr(sorter), 0)
    return x1._searchsorted(_arr(x2), side == "right")


def _cumulative(name, native, x, axis, dtype, include_initial):
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"{name}: axis is required for a rank-{x.ndim} array")
        axis = 0
    if dtype is not None:
        x = x.astype(dtype)
    out = native(x, axis, include_initial)
    return out if dtype is None else out.astype(dtype)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative("cumulative_sum", NDArray._cumsum, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative("cumulative_prod", NDArray._cumprod, x, axis, dtype, include_initial)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """How many elements are non-zero (True), over `axis` (all when None), as int64."""
    x = _arr(x)
    if isinstance(axis, int):
        axis = (axis,)
    return not_equal(x, 0).astype(int64)._reduce("sum", axis, keepdims, 0)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The n-th forward difference along `axis` (`prepend` / `append` joined first, as NumPy);
    bool gives logical xor, as NumPy's."""
    x = _arr(x)
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    if x.ndim == 0:
        raise ValueError("diff: needs an array of rank 1 or more")
    if prepend is not None or append is not None:
        def fit(p):
            p = _arr(p)
            if p.ndim == 0:
                shape = list(x.shape)
                shape[axis] = 1
                p = p.broadcast_to(tuple(shape))
            return p
        pieces = ([fit(prepend)] if prepend is not None else []) + [x] + \
            ([fit(append)] if append is not None else [])
        x = concat(pieces, axis=axis)
    for _ in range(n):
        length = x.shape[axis]
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[axis] = slice(1, None)
        lo[axis] = slice(None, builtins.max(length - 1, 0))
        a, b = x[tuple(hi)], x[tuple(lo)]
        x = not_equal(a, b) if x.dtype == bool else a - b
    return x


def take_along_axis(x, indices, /, *, axis=-1):
    return _arr(x)._take_along(_arr(indices), axis)


def broadcast_shapes(*shapes):
    """The shape that `shapes` broadcast to (NumPy's rule), or a ValueError naming them."""
    nd = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            d = s[i - nd + len(s)] if i - nd + len(s) >= 0 else 1
            if d != 1 and size != 1 and d != size:
                raise ValueError(f"broadcast_shapes: {shapes} do not broadcast (dim {i}: "
                                 f"{size} vs {d})")
            size = d if size == 1 else size
        out.append(size)
    return tuple(out)


def isin(x1, x2, /, *, invert=False):
    """Whether each element of x1 occurs in x2 (by ==, so NaN never does), shaped as x1."""
    x1, x2 = _arr(x1), _arr(x2)
    if x2.size == 0:
        out = zeros(x1.shape, dtype=bool)
    else:
        dt = result_type(x1, x2)
        s = x2.astype(dt).reshape((-1,))
        s = s._take(s._sort(0, False, False), 0)
        v = x1.astype(dt)
        pos = s._searchsorted(v.reshape((-1,)), False)
        pos = minimum(pos, s.shape[0] - 1)
        out = equal(s._take(pos, 0), v.reshape((-1,))).reshape(x1.shape)
    return ~out if invert else out


# sets
UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")


def _groups(x):
    """(flat sorting order, sorted values, start positions of each group, group of each
    sorted position). Each NaN is its own group (NaN != NaN), as the standard asks."""
    flat = x.reshape((-1,)) if x.is_compact() else x.compact().reshape((-1,))
    order = flat._sort(0, False, False)
    s = flat._take(order, 0)
    n = s.shape[0]
    if n == 0:
        return order, s, arange(0), arange(0)
    first = asarray([True])
    new = concat([first, not_equal(s[1:], s[:-1])]) if n > 1 else first
    starts = new._nonzero()[0]
    group = new.astype(int64)._cumsum(0) - 1
    return order, s, starts, group


def unique_values(x, /):
    _, s, starts, _ = _groups(x)
    return s._take(starts, 0)


def unique_counts(x, /):
    _, s, starts, _ = _groups(x)
    ends = concat([starts[1:], asarray([s.shape[0]], dtype=int64)])
    return UniqueCountsResult(s._take(starts, 0), ends - starts)


def unique_inverse(x, /):
    order, s, starts, group = _groups(x)
    inverse = group._take(order._sort(0, False, False), 0) if s.shape[0] else \
        arange(0)
    return UniqueInverseResult(s._take(starts, 0), inverse.reshape(x.shape))


def unique_all(x, /):
    order, s, starts, group = _groups(x)
    inverse = group._take(order._sort(0, False, False), 0) if s.shape[0] else \
        arange(0)
    ends = concat([starts[1:], asarray([s.shape[0]], dtype=int64)])
    return UniqueAllResult(s._take(starts, 0), order._take(starts, 0),
                           inverse.reshape(x.shape), ends - starts)


# float helpers
def signbit(x, /):
    return _arr(x)._unary("signbit")


def copysign(x1, x2, /):
    """|x1| with the sign of x2, in the promoted dtype of the two (float32 with float64 gives
    float64)."""
    x1, x2 = _arr(x1), _arr(x2)
    dt = result_type(x1, x2)
    a = abs(x1)
    a = a if a.dtype == dt else a.astype(dt)
    return where(signbit(x2), -a, a)


def nextafter(x1, x2, /):
    """The next representable value after x1 toward x2, in the promoted float dtype, stepping by
    the dtype's own ulp (quill's Rust `NDArray::nextafter`); a Python float takes the array's
    dtype, as the standard's scalar rule says."""
    if isinstance(x1, (int, float)) and isinstance(x2, NDArray):
        x1 = asarray(float(x1), dtype=x2.dtype if x2.dtype in (float16, float32, float64) else None)
    x1 = _arr(x1)
    if isinstance(x2, (int, float)):
        x2 = asarray(float(x2), dtype=x1.dtype if x1.dtype in (float16, float32, float64) else None)
    return x1._nextafter(_arr(x2))


def hypot(x1, x2, /):
    a, b = abs(_arr(x1)), abs(_arr(x2))
    m, n = maximum(a, b), minimum(a, b)
    safe = where(equal(m, 0), 1.0, m)
    r = multiply(m, sqrt((n / safe) ** 2 + 1))
    r = where(equal(m, 0), 0.0, r)
    return where(logical_or(isinf(a), isinf(b)), math.inf, r)


def logaddexp(x1, x2, /):
    x1, x2 = _arr(x1), _arr(x2)
    m = maximum(x1, x2)
    same = equal(x1, x2)  # both infinite of one sign included: no inf - inf
    d = where(same, 0.0, x1 - x2)
    return where(same, x1 + math.log(2.0), m + log1p(exp(-abs(d))))


__all__ = [
    "isdtype", "result_type", "can_cast", "finfo", "iinfo", "meshgrid", "tril", "triu",
    "moveaxis", "broadcast_arrays", "take", "repeat", "roll", "tile", "unstack", "tensordot",
    "sort", "argsort", "nonzero", "searchsorted", "cumulative_sum", "unique_values",
    "unique_counts", "unique_inverse", "unique_all", "signbit", "copysign", "hypot",
    "logaddexp", "cumulative_prod", "count_nonzero", "diff",
    "take_along_axis", "broadcast_shapes", "isin", "nextafter",
]
