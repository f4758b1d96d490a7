"""quill's op table, from Rust (quill-core's ``unary_ops!`` / ``binary_ops!``): the op names
every per-op list of the package is built from, and one method per op on ``NDArray`` and
``Tensor`` (``a.exp()``, ``t.atan2(u)``, ``a.bitwise_and(b)``). Methods the native classes
define themselves are left as they are."""
from ._native import NDArray, Tensor, binary_op_names, unary_op_names

UNARY = tuple(unary_op_names())
BINARY = tuple(binary_op_names())


def _unary_method(name, call):
    def method(self):
        return getattr(self, call)(name)

    method.__name__ = name
    method.__doc__ = f"Elementwise ``{name}``."
    return method


def _binary_method(name, call):
    def method(self, other):
        return getattr(self, call)(name, other)

    method.__name__ = name
    method.__doc__ = f"Elementwise ``{name}`` with broadcasting; ``other`` an array or a number."
    return method


def _install():
    for cls, unary, binary in ((NDArray, "_unary", "_binary"), (Tensor, "unary", "binary")):
        for name in UNARY:
            if not hasattr(cls, name):
                setattr(cls, name, _unary_method(name, unary))
        for name in BINARY:
            if not hasattr(cls, name):
                setattr(cls, name, _binary_method(name, binary))


_install()
