"""The op table as Python sees it: every op of quill-core's table is a method of NDArray and
Tensor and a function of quill.array_api (under the standard's name) and quill.ops."""
import numpy as np

import quill
import quill.array_api as xp
from quill import _native
from quill.backend_ndarray import NDArray

ALIASES = {"neg": "negative", "sub": "subtract", "mul": "multiply", "div": "divide",
           "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
           "gt": "greater", "ge": "greater_equal"}


def test_every_op_has_its_methods_and_functions():
    unary, binary = _native.unary_op_names(), _native.binary_op_names()
    assert "exp" in unary and "log10" in unary and "atan2" in binary
    for name in unary + binary:
        assert callable(getattr(NDArray, name)), name
        assert callable(getattr(quill.Tensor, name)), name
        assert callable(getattr(xp, ALIASES.get(name, name))), name
        assert callable(getattr(quill.ops, name)), name


def test_generated_methods_match_numpy_on_strided_views():
    base = np.array([[1000.0, 0.01, 1.0], [2.0, 0.5, 7.0], [3.0, 10.0, 1e-300]])
    view = base.T[::-1, ::2]
    a = NDArray(base).permute((1, 0))[::-1, ::2]
    np.testing.assert_allclose(a.log10().numpy(), np.log10(view), rtol=1e-15)
    np.testing.assert_allclose(xp.log10(a).numpy(), np.log10(view), rtol=1e-15)
    np.testing.assert_allclose(a.atan2(a).numpy(), np.arctan2(view, view), rtol=1e-15)
    t = quill.Tensor(base, dtype="float64", requires_grad=True)
    t.log10().sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), 1.0 / (base * np.log(10.0)), rtol=1e-12)
