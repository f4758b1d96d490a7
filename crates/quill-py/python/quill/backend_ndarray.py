"""needle's ``backend_ndarray``: the strided NDArray and its module-level functions."""
from ._native import NDArray, BackendDevice, cpu, cuda, default_device, from_dlpack
from ._needle_ndarray import attach as _attach

_attach(NDArray)


def all_devices():
    """The devices this build knows (check ``.enabled()`` before use)."""
    return [cpu(), cuda()]


def array(a, dtype="float32", device=None):
    return NDArray(a, device=device, dtype=dtype)


def empty(shape, dtype="float32", device=None):
    return NDArray.make(tuple(shape), device=device, dtype=dtype)


def full(shape, fill_value, dtype="float32", device=None):
    a = empty(shape, dtype=dtype, device=device)
    a.fill(fill_value)
    return a


def broadcast_to(array, new_shape):
    return array.broadcast_to(new_shape)


def reshape(array, new_shape):
    return array.reshape(new_shape)


def maximum(a, b):
    return a.maximum(b)


def log(a):
    return a.log()


def exp(a):
    return a.exp()


def tanh(a):
    return a.tanh()


def sum(a, axis=None, keepdims=False):  # noqa: A001 - needle's name
    return a.sum(axis=axis, keepdims=keepdims)


def flip(a, axes):
    return a.flip(axes)
