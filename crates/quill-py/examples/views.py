"""Lesson 1 in Python: NDArray views and compact, as needle's backend_ndarray has them, over
quill's Rust arrays. Every view shares the buffer (the same `_handle.ptr()`); `compact()` copies.

    python crates/quill-py/examples/views.py
"""
import numpy as np
import quill as ndl
from quill import backend_ndarray as nd

a = nd.array(np.arange(12, dtype=np.float32).reshape(3, 4))
print("a", a.shape, a.strides)                 # (3, 4) (4, 1)
v = a[::-1, ::2]                               # a view: negative stride, offset
print("a[::-1, ::2]", v.shape, v.strides, v._offset)
t = a.permute((1, 0))                          # a view: strides swapped
assert t.strides == (1, 4) and not t.is_compact()
c = t.compact()                                # a contiguous copy
assert c.is_compact() and c._handle.ptr() != a._handle.ptr()
np.testing.assert_array_equal(c.numpy(), a.numpy().T)
b = a[0:1, :].broadcast_to((3, 4))             # stride 0: one row read three times
assert b.strides[0] == 0
v[:, :] = -1.0                                 # writes through the view into a
print(a)
assert a.numpy()[0, 0] == -1.0 and a.numpy()[0, 1] == 1.0
print("views: ok")
