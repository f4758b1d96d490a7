"""needle's lower seam (the surface of its ``ndarray_backend_cpu`` / ``ndarray_backend_cuda``
modules) over quill's own NDArray kernels.

needle's pure-Python NDArray keeps a flat buffer (a backend ``Array``) plus shape, strides and
offset, and calls these functions to do the work: ``compact`` and the two setitems move elements
between a strided view and a compact run, the ``ewise_*`` / ``scalar_*`` functions work on
compact runs of equal length, ``matmul`` / ``matmul_tiled`` multiply compact matrices (the tiled
one in needle's tiled layout) and ``reduce_*`` reduce consecutive runs. Here every function views
its buffers as quill NDArrays (zero-copy) and runs quill's Rust kernels; no Python loop touches
an element.

An ``Array`` is a flat buffer of ``size`` elements (float32 when made here; ``NDArray._handle``
of a quill array of another dtype keeps that dtype, and results are written in the destination's
dtype). Every shape, stride, offset and length is checked against the buffers before anything is
read or written: an out-of-bounds request is a ValueError naming the function and the numbers,
never a read outside the buffer. A device object (``quill.backend_ndarray.cpu()``) exposes this
module's names as attributes, as needle's ``BackendDevice`` proxies its backend module;
``device.Array(n)`` allocates on that device.
"""
import operator

import numpy as np

from ._native import NDArray, cpu

__all__ = [
    "Array", "__tile_size__", "to_numpy", "from_numpy", "fill", "compact", "ewise_setitem",
    "scalar_setitem", "ewise_add", "ewise_mul", "ewise_div", "ewise_maximum", "ewise_eq",
    "ewise_ge", "scalar_add", "scalar_mul", "scalar_div", "scalar_power", "scalar_maximum",
    "scalar_eq", "scalar_ge", "ewise_log", "ewise_exp", "ewise_tanh", "matmul", "matmul_tiled",
    "reduce_max", "reduce_sum", "device_attribute",
]

#: The tile edge of ``matmul_tiled``'s layout (needle's ``TILE``): tile ``(i, j)`` of an
#: ``m x n`` matrix is ``TILE * TILE`` consecutive elements starting at
#: ``(i * (n // TILE) + j) * TILE * TILE``, row-major inside the tile.
__tile_size__ = 8

# The raw Rust constructor, saved before `backend_ndarray` wraps `NDArray.make` (the wrapper
# calls back into this module, so it must not call the wrapper).
_make = NDArray.make


class Array:
    """needle's backend ``Array``: a flat buffer of ``size`` elements on a device.

    ``Array(size)`` allocates ``size`` float32 zeros on the CPU (needle leaves them
    uninitialised; zeros are one valid choice); ``device.Array(size)`` allocates on ``device``.
    ``ptr()`` is the buffer's address, the same for every ``Array`` over one buffer (and so for
    every ``_handle`` of every view of a quill NDArray), and unchanged by writes into it.
    """

    __slots__ = ("_array",)

    def __init__(self, size, device=None):
        size = _count("Array", "size", size)
        device = cpu() if device is None else device
        if not device.enabled():
            raise ValueError(f"Array: device {device!r} is not enabled in this build or on this "
                             f"machine; check device.enabled() first")
        self._array = _make((size,), (1,), device=device, offset=0, dtype="float32")

    @classmethod
    def _over(cls, array):
        """The ``Array`` over the whole buffer that the quill NDArray ``array`` views
        (needle's ``NDArray._handle``). A broadcast view's buffer comes back read-only, as
        quill's broadcast views are: writing through it is an error, reading is fine."""
        h = object.__new__(Array)
        h._array = _make((array._buffer_size,), (1,), handle=array, offset=0)
        return h

    @property
    def size(self):
        """The number of elements in the buffer."""
        return self._array.size

    @property
    def device(self):
        """The device the buffer lives on."""
        return self._array.device

    @property
    def dtype(self):
        """The element type (``"float32"`` for every ``Array`` made by ``Array(size)``)."""
        return self._array.dtype

    def ptr(self):
        """The address of the buffer's first element, as an int (a device address for GPU
        buffers): equal for all handles of one buffer, so it identifies the buffer."""
        return self._array._buffer_address()

    def __repr__(self):
        return f"Array(size={self.size}, dtype={self.dtype}, device={self.device!r})"


# ---- argument checks: every number is validated before quill sees it ----


def _count(fn, name, v):
    """``v`` as a non-negative int, else a TypeError / ValueError naming ``fn``."""
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {type(v).__name__}") from None
    if v < 0:
        raise ValueError(f"{fn}: {name} must be >= 0, got {v}")
    return v


def _number(fn, v):
    """``v`` as a Python float (needle's scalars are float32 values)."""
    if isinstance(v, (str, bytes)) or not hasattr(v, "__float__"):
        raise TypeError(f"{fn}: the scalar must be a real number, got {type(v).__name__}")
    return float(v)


def _buf(fn, name, x):
    """The quill NDArray (the whole buffer) behind the handle ``x``."""
    if not isinstance(x, Array):
        raise TypeError(f"{fn}: {name} must be a backend Array (device.Array(size) or an "
                        f"NDArray's _handle), got {type(x).__name__}")
    return x._array


def _layout(fn, shape, strides, offset):
    try:
        shape = tuple(shape)
        strides = tuple(strides)
    except TypeError:
        raise TypeError(f"{fn}: shape and strides must be sequences of integers, got "
                        f"{type(shape).__name__} and {type(strides).__name__}") from None
    shape = tuple(_count(fn, "shape entry", d) for d in shape)
    try:
        strides = tuple(operator.index(s) for s in strides)
    except TypeError:
        raise TypeError(f"{fn}: strides must be integers, got {strides!r}") from None
    if len(shape) != len(strides):
        raise ValueError(f"{fn}: shape {shape} and strides {strides} differ in length")
    return shape, strides, _count(fn, "offset", offset)


def _view(fn, name, x, shape, strides, offset):
    """The strided view ``(shape, strides, offset)`` of handle ``x``; every element it reaches
    must lie inside the buffer (checked in Rust, before anything is read)."""
    a = _buf(fn, name, x)
    shape, strides, offset = _layout(fn, shape, strides, offset)
    try:
        return _make(shape, strides, handle=a, offset=offset)
    except (ValueError, OverflowError) as e:
        raise ValueError(f"{fn}: view shape {shape} strides {strides} offset {offset} of {name} "
                         f"(a buffer of {a.size} elements) is out of bounds: {e}") from None


def _prefix(fn, name, x, n, shape=None):
    """The first ``n`` elements of handle ``x`` (as ``shape`` when given): a ValueError when the
    buffer is shorter."""
    a = _buf(fn, name, x)
    if a.size < n:
        raise ValueError(f"{fn}: {name} has {a.size} elements, {n} needed")
    v = _make((n,), (1,), handle=a, offset=0)
    return v if shape is None else v.reshape(tuple(shape))


def _store(fn, dst, value):
    """``dst[...] = value`` with quill's errors (a read-only destination) naming ``fn``."""
    try:
        dst[...] = value
    except ValueError as e:
        raise ValueError(f"{fn}: cannot write the result: {e}") from None


# ---- moving elements ----


def to_numpy(a, shape, strides, offset):
    """A NumPy copy of the view ``(shape, strides, offset)`` (in elements) of ``a``."""
    return _view("to_numpy", "a", a, shape, strides, offset).numpy()


def from_numpy(a, out):
    """Copies the first ``out.size`` elements of the NumPy array ``a`` (in C order, converted
    to ``out``'s dtype) into ``out``."""
    dst = _buf("from_numpy", "out", out)
    try:
        src = np.asarray(a, dtype=dst.dtype).reshape(-1)
    except (TypeError, ValueError) as e:
        raise TypeError(f"from_numpy: a must be a numeric NumPy array, got "
                        f"{type(a).__name__}: {e}") from None
    if src.size < dst.size:
        raise ValueError(f"from_numpy: a has {src.size} elements, out needs {dst.size}")
    _store("from_numpy", dst, NDArray(src[:dst.size], device=dst.device))


def fill(out, val):
    """Sets every element of ``out`` to ``val``."""
    dst = _buf("fill", "out", out)
    v = _number("fill", val)
    try:
        dst.fill(v)
    except ValueError as e:
        raise ValueError(f"fill: cannot write: {e}") from None


def compact(a, out, shape, strides, offset):
    """Writes the view ``(shape, strides, offset)`` of ``a`` into the first ``prod(shape)``
    elements of ``out`` in C order."""
    src = _view("compact", "a", a, shape, strides, offset)
    dst = _prefix("compact", "out", out, src.size, src.shape)
    _store("compact", dst, src)


def _repeated(view):
    """The dims of ``view`` that revisit one element (stride 0, size > 1), and an index that
    keeps ``which`` (``"first"`` or ``"last"``) position of each of them: quill refuses writes
    through such a view, and writing it in C order, as needle does, leaves each element the
    value its last visit wrote."""
    rep = [i for i, (d, s) in enumerate(zip(view.shape, view.strides)) if s == 0 and d > 1]

    def index(which):
        return tuple((slice(0, 1) if which == "first" else slice(d - 1, d)) if i in rep
                     else slice(None) for i, d in enumerate(view.shape))
    return rep, index


def ewise_setitem(a, out, shape, strides, offset):
    """Writes the first ``prod(shape)`` elements of ``a`` (C order) into the view
    ``(shape, strides, offset)`` of ``out``, in C order: where the view visits one element
    more than once (a stride of 0), the last value written stays."""
    dst = _view("ewise_setitem", "out", out, shape, strides, offset)
    src = _prefix("ewise_setitem", "a", a, dst.size, dst.shape)
    rep, index = _repeated(dst)
    if rep:
        dst, src = dst[index("first")], src[index("last")]
    _store("ewise_setitem", dst, src)


def scalar_setitem(size, val, out, shape, strides, offset):
    """Sets every element of the view ``(shape, strides, offset)`` of ``out`` to ``val``;
    ``size`` must be the view's element count, ``prod(shape)``."""
    size = _count("scalar_setitem", "size", size)
    dst = _view("scalar_setitem", "out", out, shape, strides, offset)
    if size != dst.size:
        raise ValueError(f"scalar_setitem: size {size} is not the view's element count "
                         f"{dst.size} (shape {tuple(dst.shape)})")
    rep, index = _repeated(dst)
    if rep:
        dst = dst[index("first")]
    _store("scalar_setitem", dst, _number("scalar_setitem", val))


# ---- elementwise ----


def _ewise(fn, op, a, b, out):
    x = _buf(fn, "a", a)
    y = _prefix(fn, "b", b, x.size)
    dst = _prefix(fn, "out", out, x.size)
    _store(fn, dst, x._binary(op, y))


def _scalar(fn, op, a, val, out):
    x = _buf(fn, "a", a)
    dst = _prefix(fn, "out", out, x.size)
    _store(fn, dst, x._binary(op, _number(fn, val)))


def _unary(fn, op, a, out):
    x = _buf(fn, "a", a)
    dst = _prefix(fn, "out", out, x.size)
    _store(fn, dst, x._unary(op))


def ewise_add(a, b, out):
    """``out[i] = a[i] + b[i]`` for ``i < a.size``."""
    _ewise("ewise_add", "add", a, b, out)


def ewise_mul(a, b, out):
    """``out[i] = a[i] * b[i]`` for ``i < a.size``."""
    _ewise("ewise_mul", "mul", a, b, out)


def ewise_div(a, b, out):
    """``out[i] = a[i] / b[i]`` for ``i < a.size`` (IEEE: x/0 is inf or nan)."""
    _ewise("ewise_div", "div", a, b, out)


def ewise_maximum(a, b, out):
    """``out[i] = max(a[i], b[i])`` for ``i < a.size``."""
    _ewise("ewise_maximum", "maximum", a, b, out)


def ewise_eq(a, b, out):
    """``out[i] = 1.0 if a[i] == b[i] else 0.0`` for ``i < a.size``."""
    _ewise("ewise_eq", "eq", a, b, out)


def ewise_ge(a, b, out):
    """``out[i] = 1.0 if a[i] >= b[i] else 0.0`` for ``i < a.size``."""
    _ewise("ewise_ge", "ge", a, b, out)


def scalar_add(a, val, out):
    """``out[i] = a[i] + val``."""
    _scalar("scalar_add", "add", a, val, out)


def scalar_mul(a, val, out):
    """``out[i] = a[i] * val``."""
    _scalar("scalar_mul", "mul", a, val, out)


def scalar_div(a, val, out):
    """``out[i] = a[i] / val``."""
    _scalar("scalar_div", "div", a, val, out)


def scalar_power(a, val, out):
    """``out[i] = a[i] ** val``."""
    _scalar("scalar_power", "pow", a, val, out)


def scalar_maximum(a, val, out):
    """``out[i] = max(a[i], val)``."""
    _scalar("scalar_maximum", "maximum", a, val, out)


def scalar_eq(a, val, out):
    """``out[i] = 1.0 if a[i] == val else 0.0``."""
    _scalar("scalar_eq", "eq", a, val, out)


def scalar_ge(a, val, out):
    """``out[i] = 1.0 if a[i] >= val else 0.0``."""
    _scalar("scalar_ge", "ge", a, val, out)


def ewise_log(a, out):
    """``out[i] = log(a[i])``."""
    _unary("ewise_log", "log", a, out)


def ewise_exp(a, out):
    """``out[i] = exp(a[i])``."""
    _unary("ewise_exp", "exp", a, out)


def ewise_tanh(a, out):
    """``out[i] = tanh(a[i])``."""
    _unary("ewise_tanh", "tanh", a, out)


# ---- matrix products and reductions ----


def _dims(fn, m, n, p):
    return tuple(_count(fn, k, v) for k, v in (("m", m), ("n", n), ("p", p)))


def matmul(a, b, out, m, n, p):
    """``out = a @ b`` for the compact row-major matrices ``a`` (``m x n``), ``b`` (``n x p``)
    and ``out`` (``m x p``), each the first elements of its buffer."""
    m, n, p = _dims("matmul", m, n, p)
    x = _prefix("matmul", "a", a, m * n, (m, n))
    y = _prefix("matmul", "b", b, n * p, (n, p))
    dst = _prefix("matmul", "out", out, m * p, (m, p))
    _store("matmul", dst, x @ y)


def _untile(fn, name, h, rows, cols):
    """The ``rows x cols`` matrix stored tile by tile in ``h`` (a view, or a copy where no view
    exists), and the tiled 4-D view it came from."""
    t = __tile_size__
    tiled = _prefix(fn, name, h, rows * cols, (rows // t, cols // t, t, t))
    return tiled.permute((0, 2, 1, 3)).reshape((rows, cols)), tiled


def matmul_tiled(a, b, out, m, n, p):
    """``out = a @ b`` with all three matrices in needle's tiled layout (see
    ``__tile_size__``): ``a`` is ``m x n``, ``b`` ``n x p``, ``out`` ``m x p``, and ``m``, ``n``,
    ``p`` must be multiples of the tile size."""
    fn, t = "matmul_tiled", __tile_size__
    m, n, p = _dims(fn, m, n, p)
    if m % t or n % t or p % t:
        raise ValueError(f"{fn}: m, n, p = {m}, {n}, {p} must all be multiples of the tile "
                         f"size {t}")
    x, _ = _untile(fn, "a", a, m, n)
    y, _ = _untile(fn, "b", b, n, p)
    _, dst = _untile(fn, "out", out, m, p)
    c = (x @ y).reshape((m // t, t, p // t, t)).permute((0, 2, 1, 3))
    _store(fn, dst, c)


def _reduce(fn, op, a, out, reduce_size):
    r = _count(fn, "reduce_size", reduce_size)
    dst = _buf(fn, "out", out)
    k = dst.size
    if r == 0 and op == "max" and k:
        raise ValueError(f"{fn}: reduce_size 0 leaves nothing to take the max of "
                         f"(out has {k} elements)")
    src = _prefix(fn, "a", a, k * r, (k, r))
    _store(fn, dst, src.max(axis=1) if op == "max" else src.sum(axis=1))


def reduce_max(a, out, reduce_size):
    """``out[i] = max(a[i * reduce_size:(i + 1) * reduce_size])`` for ``i < out.size``."""
    _reduce("reduce_max", "max", a, out, reduce_size)


def reduce_sum(a, out, reduce_size):
    """``out[i] = sum(a[i * reduce_size:(i + 1) * reduce_size])`` for ``i < out.size``."""
    _reduce("reduce_sum", "sum", a, out, reduce_size)


# ---- the device proxy ----

_DEVICE_ARRAYS = {}


def _device_array(device):
    """``Array`` bound to ``device``: a subclass whose constructor takes only ``size``."""
    cls = _DEVICE_ARRAYS.get(device)
    if cls is None:
        def __init__(self, size):
            Array.__init__(self, size, device=device)

        cls = type("Array", (Array,), {
            "__slots__": (), "__init__": __init__, "__module__": __name__,
            "__doc__": f"``Array(size)`` on {device!r}: a flat float32 buffer there.",
        })
        _DEVICE_ARRAYS[device] = cls
    return cls


_SEAM = frozenset(__all__) - {"Array", "device_attribute"}


def device_attribute(device, name):
    """What ``device.<name>`` is for a name ``BackendDevice`` does not define (needle's
    ``BackendDevice.__getattr__``): this module's seam functions and ``__tile_size__``,
    ``Array`` allocating on ``device``, and ``mod`` (the seam module itself)."""
    if name == "Array":
        return _device_array(device)
    if name == "mod":
        import sys
        return sys.modules[__name__]
    if name in _SEAM:
        return globals()[name]
    raise AttributeError(f"'BackendDevice' object has no attribute '{name}'")
