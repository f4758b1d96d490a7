"""The parts of needle's NDArray surface that are naming and index arithmetic over quill's
Rust NDArray: ``flat`` (NumPy's flat view: element ``i`` in C order whatever the strides, read
and written through the array's own indexing, so ``a.flat[i] += eps`` changes ``a``'s buffer in
place, as needle's finite-difference gradient check expects of ``realize_cached_data().flat``),
``as_strided``, ``process_slice``, the underscored attributes ``_shape``, ``_strides``,
``_offset``, ``_device`` and ``_handle`` (the lower seam's ``Array`` over the array's whole
buffer), and ``make`` taking such a handle. ``attach`` puts them on the class."""
import operator

import numpy as np

from ._needle_backend import Array


class FlatView:
    """A 1-D, length ``a.size`` window onto ``a`` in C order (NumPy's ``flatiter``)."""

    __slots__ = ("base",)

    def __init__(self, base):
        self.base = base

    def __len__(self):
        return self.base.size

    def _where(self, i):
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"flat: indices must be integers or slices, got "
                            f"{type(i).__name__}") from None
        n = self.base.size
        if not -n <= i < n:
            raise IndexError(f"flat: index {i} is out of bounds for size {n}")
        return tuple(int(k) for k in np.unravel_index(i % n, self.base.shape))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return type(self.base)(self.base.numpy().reshape(-1)[i], dtype=self.base.dtype)
        return self.base[self._where(i)].item()

    def __setitem__(self, i, value):
        if not isinstance(i, slice):
            self.base[self._where(i)] = value
            return
        where = range(len(self))[i]
        values = np.broadcast_to(np.asarray(value), (len(where),))
        for k, v in zip(where, values):
            self.base[self._where(k)] = v.item()

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        return f"flat({self.base.numpy().reshape(-1)!r})"


def flat(self):
    """NumPy's ``a.flat``: element ``i`` in C order; reads and writes go to ``a`` itself."""
    return FlatView(self)


def as_strided(self, shape, strides):
    """needle's ``as_strided``: a view of the same buffer from this array's offset with
    ``shape`` and element ``strides`` (checked in Rust to stay inside the buffer)."""
    return type(self).make(tuple(shape), tuple(strides), device=self.device, handle=self,
                           offset=self.offset, dtype=self.dtype)


def process_slice(self, sl, dim):
    """needle's ``process_slice``: ``sl`` with ``None`` and negative bounds resolved against
    dim ``dim`` (Python's rules, ``slice.indices``); the step may be negative, as quill's
    views allow."""
    if not isinstance(sl, slice):
        raise TypeError(f"process_slice: expected a slice, got {type(sl).__name__}")
    n = self.shape[dim]
    if sl.step == 0:
        raise ValueError("process_slice: slice step cannot be zero")
    picked = range(*sl.indices(n))
    if not picked:
        return slice(0, 0, picked.step)
    # The bound just past the last element picked; with a negative step that can be -1
    # ("before element 0"), which as a slice bound would mean the last element: None instead.
    stop = picked[-1] + picked.step
    return slice(picked[0], None if stop < 0 else stop, picked.step)


def handle(self):
    """needle's ``_handle``: the lower seam's ``Array`` over this array's whole buffer, with
    ``.size`` (the buffer's length) and ``.ptr()`` (its address: the same for every view of the
    buffer, and unchanged by writes). Seam functions (``device.compact(a._handle, ...)``) read
    and write the array's memory through it."""
    return Array._over(self)


def _make_taking_handles(native_make):
    def make(shape, strides=None, device=None, handle=None, offset=0, dtype=None):
        """needle's ``NDArray.make``: a view of ``shape`` / ``strides`` / ``offset`` over
        ``handle``'s buffer (an NDArray, or a seam ``Array`` such as another array's
        ``_handle``), or a new zero-filled buffer just large enough for them."""
        if isinstance(handle, Array):
            handle = handle._array
        return native_make(shape, strides, device, handle, offset, dtype)

    make._native = native_make
    return make


def attach(cls):
    if not hasattr(cls.make, "_native"):
        cls.make = staticmethod(_make_taking_handles(cls.make))
    cls._handle = property(handle)
    cls.flat = property(flat)
    cls.as_strided = as_strided
    cls.process_slice = process_slice
    cls._shape = property(lambda self: self.shape)
    cls._strides = property(lambda self: self.strides)
    cls._offset = property(lambda self: self.offset)
    cls._device = property(lambda self: self.device)
