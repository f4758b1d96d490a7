"""``NDArray.flat``: NumPy's flat view of an array, element ``i`` in C order over the shape,
whatever the strides. Reads and writes go through the array's own indexing (Rust), so
``a.flat[i] += eps`` changes ``a``'s buffer in place, as needle's finite-difference gradient
check expects of ``realize_cached_data().flat``."""
import operator

import numpy as np


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
