"""Bad input raises the Python exception NumPy users expect (ValueError for shapes, IndexError
for indices and axes, TypeError for dtypes, RuntimeError for devices), with quill's message,
and never takes the interpreter down."""
import os
import subprocess
import sys

import numpy as np
import pytest

from quill import Tensor
from quill._native import stack
from quill.backend_ndarray import NDArray


@pytest.fixture
def a():
    return NDArray(np.arange(6, dtype=np.float32).reshape(2, 3))


def f64(*shape):
    return Tensor(np.ones(shape), dtype="float64")


# ----------------------------------------------------------------------------------------------
# ValueError: shapes


def test_add_shape_mismatch(a):
    other = NDArray(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"add: shape mismatch: \[2, 3\] vs \[4\]"):
        a + other
    with pytest.raises(ValueError, match=r"add: shape mismatch"):
        other + a
    with pytest.raises(ValueError, match=r"add: shape mismatch: \[2, 3\] vs \[4\]"):
        a + np.ones(4)  # a NumPy operand
    with pytest.raises(ValueError, match=r"mul: shape mismatch"):
        a * NDArray(np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"maximum: shape mismatch"):
        a.maximum(NDArray(np.ones(2, np.float32)))


def test_compare_shape_mismatch(a):
    with pytest.raises(ValueError, match="shape mismatch"):
        a < NDArray(np.ones(2, np.float32))


def test_matmul_mismatch(a):
    with pytest.raises(ValueError, match=r"matmul: shape mismatch: \[2, 3\] vs \[2, 3\] \(contracted dims 3 vs 2\)"):
        a @ a
    with pytest.raises(ValueError, match=r"matmul: shape mismatch: \[2, 3\] vs \[4\]"):
        a @ NDArray(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="matmul: shape mismatch"):
        NDArray(np.ones((2, 2, 3))) @ NDArray(np.ones((3, 3, 2)))  # batch dims 2 vs 3
    with pytest.raises(ValueError, match="matmul: operands must have at least one dim"):
        a @ 2
    with pytest.raises(ValueError, match="matmul: operands must have at least one dim"):
        a[0, 0] @ a


def test_broadcast_to_impossible(a):
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast \[2, 3\] to \[2, 4, 4\]"):
        a.broadcast_to((2, 4, 4))
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast \[2, 3\] to \[3\]"):
        a.broadcast_to((3,))
    with pytest.raises(ValueError, match="broadcast_to: negative dimension -1"):
        a.broadcast_to((-1, 3))


def test_reshape_bad_size(a):
    with pytest.raises(ValueError, match=r"cannot reshape an array of shape \[2, 3\] \(6 elements\) into \[4\]"):
        a.reshape(4)
    with pytest.raises(ValueError, match="only one dim may be -1"):
        a.reshape(-1, -1)
    with pytest.raises(ValueError, match="cannot reshape"):
        a.permute(1, 0).reshape(5, -1)


def test_slice_step_zero(a):
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        a[::0]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        a[:, 0:2:0]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        a[::0] = 1.0


def test_permute_bad_axes(a):
    with pytest.raises(ValueError, match=r"permute: axis 0 is repeated in \[0, 0\]"):
        a.permute(0, 0)
    with pytest.raises(ValueError, match=r"permute: axes \[0\] has 1 entries but the array \[2, 3\] has rank 2"):
        a.permute(0)


def test_repeated_reduction_axis(a):
    with pytest.raises(ValueError, match=r"sum: axis 0 is repeated"):
        a.sum(axis=(0, 0))


def test_max_of_nothing():
    with pytest.raises(ValueError, match="max has no identity"):
        NDArray(np.ones((0, 3), np.float32)).max()
    with pytest.raises(ValueError, match="max has no identity"):
        NDArray(np.ones((0, 3), np.float32)).max(axis=0)


def test_setitem_shape_mismatch(a):
    with pytest.raises(ValueError, match=r"assign: shape mismatch: \[2, 3\] vs \[4\]"):
        a[...] = np.ones(4)
    with pytest.raises(ValueError, match=r"assign: shape mismatch"):
        a[:, ::-1] = NDArray(np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_write_into_broadcast_view_is_refused(a):
    b = a.broadcast_to((4, 2, 3))
    with pytest.raises(ValueError, match="a broadcast view is read-only"):
        b[...] = 1.0
    with pytest.raises(ValueError, match="a broadcast view is read-only"):
        b.fill(1.0)
    with pytest.raises(ValueError, match="a broadcast view is read-only"):
        b[:, 0] = np.ones(3, np.float32)
    np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_make_out_of_bounds(a):
    with pytest.raises(ValueError, match=r"as_strided: layout shape \[2, 3\] strides \[3, 1\] offset 1 .*outside the buffer of 6 elements"):
        NDArray.make((2, 3), (3, 1), handle=a, offset=1)
    with pytest.raises(ValueError, match="outside the buffer"):
        NDArray.make((2, 3), (-1, -2), handle=a, offset=2)
    with pytest.raises(ValueError, match="has 2 dims but strides"):
        NDArray.make((2, 3), (3, 1, 1), handle=a)
    with pytest.raises(ValueError, match="negative strides need a handle"):
        NDArray.make((2, 3), (-1, 1))


def test_truth_value_of_many(a):
    with pytest.raises(ValueError, match="the truth value of an array with 6 elements is ambiguous"):
        bool(a)
    assert bool(a[1, 1]) is True


def test_uint8_scalar_out_of_bounds_is_refused():
    q = NDArray(np.ones(3, np.uint8))
    with pytest.raises((ValueError, OverflowError), match="the integer 300 is out of bounds for u8"):
        q + 300
    with pytest.raises((ValueError, OverflowError), match="out of bounds"):
        q * -1


def test_integer_to_negative_power():
    """NumPy (and PyTorch) refuse it: the result is not an integer."""
    q = NDArray(np.array([1, 2, 7], np.int64))
    with pytest.raises(ValueError):
        q ** -1


# ----------------------------------------------------------------------------------------------
# IndexError: indices and axes


def test_index_out_of_range(a):
    with pytest.raises(IndexError, match=r"slice: index 2 is out of range for axis 0 with size 2"):
        a[2]
    with pytest.raises(IndexError, match=r"slice: index -3 is out of range for axis 0 with size 2"):
        a[-3]
    with pytest.raises(IndexError, match=r"slice: index 3 is out of range for axis 1 with size 3"):
        a[:, 3]
    with pytest.raises(IndexError, match="out of range"):
        a[0, 3] = 1.0


def test_bad_index_types(a):
    with pytest.raises(IndexError, match="only integers, slices, None, ... and integer arrays are valid indices, got float"):
        a[1.5]
    with pytest.raises(IndexError, match="boolean indices are not supported"):
        a[True]
    with pytest.raises(IndexError, match="valid indices"):
        a["x"]


def test_too_many_indices_is_index_error(a):
    """NumPy: IndexError('too many indices for array')."""
    with pytest.raises(IndexError, match="too many indices"):
        a[0, 0, 0]


def test_two_ellipses_is_index_error(a):
    """NumPy: IndexError('an index can only have a single ellipsis')."""
    with pytest.raises(IndexError, match="ellipsis"):
        a[..., 0, ...]


def test_axis_out_of_range(a):
    with pytest.raises(IndexError, match=r"sum: axis 2 is out of range for an array of rank 2 \(valid: -2..=1\)"):
        a.sum(axis=2)
    with pytest.raises(IndexError, match=r"max: axis -3 is out of range for an array of rank 2"):
        a.max(axis=-3)
    with pytest.raises(IndexError, match=r"sum: axis 5 is out of range"):
        a.sum(axis=(0, 5), keepdims=True)
    with pytest.raises(IndexError, match=r"flip: axis 2 is out of range"):
        a.flip(2)
    with pytest.raises(IndexError, match=r"permute: axis 3 is out of range"):
        a.permute(0, 3)
    with pytest.raises(IndexError, match="out of range"):
        a.argmax(axis=4)


def test_len_of_zero_dim(a):
    with pytest.raises(TypeError, match=r"len\(\) of a 0-d array"):
        len(a[0, 0])


# ----------------------------------------------------------------------------------------------
# TypeError: dtypes


def test_unsupported_numpy_dtypes():
    with pytest.raises(TypeError, match="cannot make a quill array from NumPy dtype complex256"):
        NDArray(np.array([1 + 2j], np.clongdouble))
    # float128 would lose digits silently: refused, naming the opt-in cast.
    with pytest.raises(TypeError, match=r"float128: quill's widest float is float64; .*astype"):
        NDArray(np.array([1.0], np.longdouble))
    with pytest.raises(TypeError, match="cannot make a quill array from NumPy dtype str"):
        NDArray(np.array(["a"]))
    with pytest.raises(TypeError, match="cannot make a quill array from NumPy dtype object"):
        NDArray([object()])


def test_unsupported_dtype_names(a):
    with pytest.raises(TypeError, match="unsupported dtype 'complex256': quill has float16/32/64"):
        NDArray(np.ones(2), dtype="complex256")
    with pytest.raises(TypeError, match="unsupported dtype 'float128'"):
        a.astype(np.longdouble)
    with pytest.raises(TypeError, match="unsupported dtype 'int128'"):
        a.astype("int128")
    with pytest.raises(TypeError, match="unsupported dtype"):
        NDArray.make((2,), dtype="complex32")


def test_bad_operands(a):
    with pytest.raises(TypeError, match="cannot make a quill array"):
        a + "x"
    with pytest.raises(TypeError, match="cannot make a quill array"):
        a * None
    with pytest.raises(TypeError, match="fill takes a number"):
        a.fill("x")
    with pytest.raises(TypeError, match="pow\\(\\) with a modulus is not supported"):
        pow(a, 2, 3)
    with pytest.raises(TypeError):
        a.reshape(2, 3.0)


def test_bool_subtract_and_negate_are_type_errors():
    """NumPy raises TypeError for `-` on bools (an op the dtype lacks)."""
    b = NDArray(np.array([True, False]))
    with pytest.raises(TypeError, match="bool subtraction is not supported"):
        b - b
    with pytest.raises(TypeError, match="not defined for bool arrays"):
        -b


def test_tensor_keeps_complex_values():
    """A Tensor holds complex values whole (complex autograd is built): nothing is dropped."""
    t = Tensor(np.array([1 + 2j, 3j]))
    assert t.dtype == "complex128"
    np.testing.assert_array_equal(t.numpy(), [1 + 2j, 3j])
    assert Tensor(np.ones(2), dtype="complex64").dtype == "complex64"


# ----------------------------------------------------------------------------------------------
# Tensor errors


def test_tensor_errors():
    with pytest.raises(ValueError, match=r"add: shape mismatch: \[2, 3\] vs \[4\]"):
        f64(2, 3) + f64(4)
    with pytest.raises(ValueError, match=r"matmul: shape mismatch: \[2, 3\] vs \[2, 3\]"):
        f64(2, 3) @ f64(2, 3)
    with pytest.raises(ValueError, match="cannot reshape"):
        f64(2, 3).reshape((4,))
    with pytest.raises(ValueError, match="cannot broadcast"):
        f64(2, 3).broadcast_to((3, 3))
    with pytest.raises(IndexError, match=r"sum: axis 5 is out of range"):
        f64(2, 3).sum((5,))
    with pytest.raises(IndexError, match=r"split: axis 2 out of range for rank 2"):
        f64(2, 3).split(2)
    with pytest.raises(IndexError, match=r"slice: index 5 is out of range for axis 1 with size 3"):
        f64(2, 3)[0, 5]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        f64(2, 3)[::0]
    with pytest.raises(ValueError, match=r"stack: shape mismatch: \[2, 3\] vs \[3\]"):
        stack([f64(2, 3), f64(3)], 0)
    with pytest.raises(ValueError, match="unknown unary op 'nope'"):
        f64(2).unary("nope")
    with pytest.raises(TypeError, match="unsupported dtype 'complex32'"):
        Tensor(np.ones(2), dtype="complex32")


def test_missing_device_is_runtime_error():
    from quill.backend_ndarray import cuda

    # no machine has a 100th GPU; a build without CUDA refuses every cuda device
    assert not cuda(99).enabled()
    with pytest.raises(RuntimeError, match="cuda"):
        NDArray(np.ones(3), device=cuda(99))
    with pytest.raises(RuntimeError, match="cuda"):
        NDArray(np.ones(3)).to(cuda(99))


# ----------------------------------------------------------------------------------------------
# nothing crashes the interpreter (each script runs in a child process: an abort there fails
# the test instead of killing pytest)


PRELUDE = """
import numpy as np
from quill import Tensor
from quill.backend_ndarray import NDArray, cuda
from quill._native import stack
import quill.array_api as xp
a = NDArray(np.arange(6, dtype=np.float32).reshape(2, 3))
t = Tensor(np.ones((2, 3)), dtype="float64")

def report(calls):
    for src in calls:
        try:
            eval(src)
            print("QUIET", src)
        except Exception as e:
            print("raised", type(e).__name__, src)
        except BaseException as e:  # pyo3's PanicException: a Rust panic
            print("PANIC", type(e).__name__, src, str(e)[:200])
    print("survived")
"""


def run_calls(calls):
    code = PRELUDE + f"\nreport({calls!r})\n"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    assert r.returncode == 0 and "survived" in r.stdout, (
        f"the interpreter died (exit status {r.returncode}):\n{r.stdout}\n{r.stderr[-2000:]}"
    )
    bad = [line for line in r.stdout.splitlines() if line.startswith(("QUIET", "PANIC"))]
    assert not bad, "\n".join(bad)
    return r.stdout


BAD_CALLS = [
    "a + NDArray(np.ones(4))", "a @ a", "a @ 2", "a[9]", "a[::0]", "a[0, 0, 0]", "a[..., ...]",
    "a[1.5]", "a[2**70]", "a.sum(9)", "a.sum((0, 0))", "a.broadcast_to((5,))",
    "a.broadcast_to((-3, 3))", "a.reshape(7)", "a.reshape(-1, -1)", "a.permute(0, 0)",
    "a.permute()", "a.flip(7)", "NDArray(np.array([1j], np.clongdouble))", "a.astype('int128')", "NDArray(np.arange(3)) + 2**70",
    "NDArray.make((2, 3), (3, 1), handle=a, offset=5)", "NDArray.make((3,), (-1,))",
    "NDArray(np.ones(2), device=cuda(7))", "a.broadcast_to((4, 2, 3)).fill(1.0)",
    "a.__setitem__(0, np.ones(5))", "NDArray(np.ones((0, 2))).max()",
    "NDArray(np.ones(2, np.uint8)) + 999", "NDArray(np.array([True])) - NDArray(np.array([True]))",
    "-NDArray(np.array([True]))", "NDArray(np.ones(2)).item()", "t @ t", "t.split(5)",
    "t.transpose((0, 5))", "t.sum().backward(t)", "stack([], 0)", "stack([t, Tensor(np.ones(3))], 0)",
    "t.item()", "t.reshape((7,))", "t.log_softmax(4)", "t.logsumexp((3,))",
    "Tensor(np.ones((2, 3))).backward(Tensor(np.ones(5)))",
]

HUGE_SHAPES = [
    "NDArray.make((2, 2**62))", "NDArray.make((2**62, 2**62))", "NDArray.make((2**33, 2**33))",
    "NDArray.make((2,), (2**62,))", "NDArray.make((2**40, 2**40), (1, 1), handle=a)",
    "a.broadcast_to((2**62, 2**62, 2, 3))", "a.reshape(2**62, 2**62, 0)",
    "NDArray(np.ones(4)).reshape(2**31, 2**31, 2**31, -1)",
    "NDArray(np.ones(1)).broadcast_to((2**40, 2**40)).sum()",
]


def test_bad_calls_raise_and_never_crash():
    run_calls(BAD_CALLS)


def test_huge_shapes_raise_and_never_panic():
    run_calls(HUGE_SHAPES)


@pytest.mark.parametrize(
    "call",
    [
        "NDArray.make((2**50,))",
        "NDArray(np.ones(1)).broadcast_to((2**50,)).compact()",
        "NDArray(np.ones(1, np.float32)).broadcast_to((2**50,)) + 1",
    ],
)
def test_impossible_allocation_is_an_error_not_an_abort(call):
    """4 PiB cannot be had anywhere: NumPy raises MemoryError; quill must raise too, not abort
    the process."""
    out = run_calls([call])
    assert "raised MemoryError" in out or "raised ValueError" in out, out


# The allocations an adversarial run found aborting the interpreter (SIGABRT) or raising a
# PanicException: each must be a MemoryError naming the op, the interpreter alive after all.
OOM_CALLS = [
    "a._take(NDArray(np.zeros(1, np.int64)).broadcast_to((10**12,)), 0)",
    "xp.take(xp.asarray([1.0, 2.0]), xp.broadcast_to(xp.asarray([0]), (10**12,)))",
    "NDArray(NDArray(np.ones(1)).broadcast_to((10**6, 10**6)), dtype='float64')",
    "NDArray(NDArray(np.ones(1)).broadcast_to((10**6, 10**6)))",
    "NDArray(np.ones(1, np.float32)).broadcast_to((10**6, 10**6)).astype('float64')",
    "NDArray(np.ones(1, np.float32)).broadcast_to((10**6, 10**6)).compact()",
    "NDArray(np.ones(1, np.float32)).broadcast_to((10**6, 10**6)) * 2",
    "NDArray(np.arange(3.0)).broadcast_to((10**12, 3)).reshape(3 * 10**12)",
    "Tensor(NDArray(np.ones(1, np.float32)).broadcast_to((10**6, 10**6)), dtype='float64')",
]


def test_huge_copies_casts_and_gathers_are_memory_errors():
    out = run_calls(OOM_CALLS)
    lines = [line for line in out.splitlines() if line.startswith("raised")]
    assert len(lines) == len(OOM_CALLS), out
    for line in lines:
        assert line.startswith("raised MemoryError"), line


def test_a_rust_panic_is_an_internal_error_naming_the_call():
    """Any panic that still escapes Rust reaches Python as quill.InternalError (a RuntimeError,
    so `except Exception` sees it) naming the call, never PyO3's BaseException
    PanicException and never an abort."""
    import quill
    from quill import _native

    assert issubclass(quill.InternalError, RuntimeError)
    with pytest.raises(quill.InternalError, match=r"_debug_panic: quill internal error .*boom"):
        _native._debug_panic("boom")
    out = run_calls(["__import__('quill')._native._debug_panic('x')"])
    assert "raised InternalError" in out, out


def test_every_exported_rust_function_is_guarded():
    """`#[guard]` sits above every #[pyfunction] and #[pymethods] of the extension, so the
    conversion above holds for all of them."""
    import pathlib
    import re

    src = pathlib.Path(__file__).resolve().parents[1] / "src"
    missing = []
    for f in sorted(src.glob("*.rs")):
        lines = f.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s*#\[(pyfunction|pymethods)\]", line):
                if "quill_py_guard::guard" not in lines[i - 1]:
                    missing.append(f"{f.name}:{i + 1}")
    assert not missing, missing


def test_host_round_trips_is_empty_on_the_cpu_and_resets():
    import quill
    from quill import backend_ndarray as nd

    a = nd.NDArray(np.array([[0.0, 1.0], [2.0, 0.0]], dtype=np.float32))
    a.numpy().nonzero()
    (a + a).sum()
    assert quill.host_round_trips() == {}
    quill.reset_host_round_trips()
    assert quill.host_round_trips() == {}


def test_fused_ops_name_their_kernels():
    import quill

    ops = quill.fused_ops()
    for op in ["conv2d", "layer_norm", "rms_norm", "batch_norm", "max_pool2d",
               "scaled_dot_product_attention", "recurrent_layer", "sum_squares"]:
        assert op in ops and op in quill.supported_ops()
    assert quill.fused_kernel("layer_norm", "float32", quill.cpu())
    assert not quill.fused_kernel("layer_norm", "float16", quill.cpu())
    assert not quill.fused_kernel("batch_norm", "int64", quill.cpu())
    with pytest.raises(ValueError, match="unknown fused op"):
        quill.fused_kernel("matmul", "float32", quill.cpu())


def test_supports_answers_for_every_op_on_the_cpu():
    import quill

    ops = quill.supported_ops()
    assert "exp" in ops and "conv2d" in ops and "adam_step" in ops
    for op in ops:
        assert quill.supports(op, "float32", quill.cpu())
    with pytest.raises(ValueError, match="unknown op"):
        quill.supports("frobnicate", "float32", quill.cpu())
