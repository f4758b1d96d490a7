"""complex64 / complex128 arrays against NumPy: every complex unary function of the Array API
over permuted, reversed and stepped views (random values, and the special values on the branch
cuts: signed zeros on the real axis past +-1, the negative real axis), arithmetic with
broadcasting and NumPy's promotion (Python complex scalars included), reductions, matmul, the
parts, the data-type functions, printing, and the refusals of what complex numbers lack."""
import numpy as np
import pytest

import quill
import quill.array_api as xp
from quill.backend_ndarray import NDArray

TOL = {np.complex64: 2e-5, np.complex128: 1e-12}


def _random(rng, shape, dt):
    return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dt)


def _views(x):
    """The array, transposed, reversed and stepped: quill reads each through its strides."""
    yield "plain", x, xp.asarray(x)
    q = xp.asarray(x)
    yield "transposed", x.T, q.permute(tuple(reversed(range(x.ndim))))
    yield "reversed", x[::-1], q[::-1]
    yield "stepped", x[:, ::2], q[:, ::2]


def _same(got, want, dt, what):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    assert got.dtype == want.dtype, f"{what}: {got.dtype} vs {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=TOL[dt], atol=TOL[dt], equal_nan=True,
                               err_msg=what)


UNARY = ["negative", "abs", "sign", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt",
         "square", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh",
         "acosh", "atanh"]
NP_NAME = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
           "acosh": "arccosh", "atanh": "arctanh"}


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_numpy_on_views(name, dt):
    rng = np.random.default_rng(3)
    x = _random(rng, (4, 6), dt)
    ref = getattr(np, NP_NAME.get(name, name))
    for view, xn, xq in _views(x):
        with np.errstate(all="ignore"):
            want = ref(xn)
        _same(getattr(xp, name)(xq), want, dt, f"{name} {view}")


# Points on and beside the branch cuts, with both signs of zero, and where parts overflow.
SPECIAL = np.array([complex(-2.0, 0.0), complex(-2.0, -0.0), complex(2.0, 0.0),
                    complex(2.0, -0.0), complex(0.0, 2.0), complex(-0.0, -2.0),
                    complex(-0.5, 0.0), complex(0.0, 0.0), complex(1e-9, 1e-9),
                    complex(-1.0, 0.0), complex(1.0, 0.0)])


@pytest.mark.parametrize("name", ["sqrt", "log", "log1p", "asin", "acos", "atanh", "acosh",
                                  "asinh", "atan", "expm1", "sign", "abs"])
def test_branch_cuts_and_special_values(name):
    ref = getattr(np, NP_NAME.get(name, name))
    with np.errstate(all="ignore"):
        want = ref(SPECIAL)
    got = getattr(xp, name)(xp.asarray(SPECIAL)).numpy()
    # Signs of zero and infinity matter on a cut: compare the parts' signs as well. Near 0,
    # NumPy's log1p is log(1 + z), which loses the digits quill keeps (checked against the
    # series instead).
    for g, w, z in zip(got, want, SPECIAL):
        if name == "log1p" and abs(z) < 1e-6:
            assert g == pytest.approx(z - z * z / 2, rel=1e-14), g
            continue
        for part in ("real", "imag"):
            gv, wv = getattr(g, part), getattr(w, part)
            if np.isnan(wv):
                assert np.isnan(gv), (name, z, g, w)
                continue
            assert gv == pytest.approx(wv, rel=1e-12, abs=1e-300), (name, z, g, w)
            assert np.signbit(gv) == np.signbit(wv) or gv != 0, (name, z, g, w)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_arithmetic_promotion_and_scalars(dt):
    rng = np.random.default_rng(5)
    a = _random(rng, (3, 1, 4), dt)
    b = _random(rng, (5, 4), np.complex128)[::-1]
    r = rng.uniform(0.5, 2, (5, 1)).astype(np.float32)
    for op in ["add", "subtract", "multiply", "divide", "pow", "equal", "not_equal"]:
        f, g = getattr(xp, op), getattr(np, "power" if op == "pow" else op)
        for other in (b, r):
            with np.errstate(all="ignore"):
                want = g(a, other)
            got = f(xp.asarray(a), xp.asarray(other))
            if want.dtype == bool:
                np.testing.assert_array_equal(got.numpy(), want)
            else:
                _same(got, want, np.complex64 if want.dtype == np.complex64 else np.complex128,
                      f"{op} {other.dtype}")
    # Python complex scalars are weak: they keep complex64, and make float32 complex64.
    q = xp.asarray(a)
    assert (q * 2j).dtype == np.dtype(dt).name
    assert (xp.asarray(r) + 1j).dtype == "complex64"
    np.testing.assert_allclose((xp.asarray(r) + 1j).numpy(), r + np.complex64(1j))
    assert (xp.asarray(np.arange(3)) * 1j).dtype == "complex128"
    # Writing through a view, and fill.
    z = xp.zeros((2, 3), dtype=xp.complex128)
    z.fill(1 - 2j)
    np.testing.assert_array_equal(z.numpy(), np.full((2, 3), 1 - 2j))
    with pytest.raises(TypeError, match="complex"):
        xp.zeros((2,), dtype=xp.float32).fill(1 + 1j)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_reductions_matmul_and_parts(dt):
    rng = np.random.default_rng(9)
    x = _random(rng, (3, 4, 5), dt)
    q = xp.asarray(x)
    for axis in (None, 0, (1, 2), -1):
        _same(xp.sum(q, axis=axis), np.sum(x, axis=axis), dt, f"sum {axis}")
        _same(xp.prod(q, axis=axis), np.prod(x, axis=axis), dt, f"prod {axis}")
        _same(xp.mean(q, axis=axis), np.mean(x, axis=axis), dt, f"mean {axis}")
    y = _random(rng, (5, 2), dt)
    _same(q @ xp.asarray(y), x @ y, dt, "matmul")
    _same(xp.matmul(q.permute((0, 2, 1))[:, ::-1], xp.asarray(x[0])),
          np.matmul(x.transpose(0, 2, 1)[:, ::-1], x[0]), dt, "matmul views")
    _same(xp.vecdot(q, q), np.vecdot(x, x), dt, "vecdot conjugates x1")
    np.testing.assert_array_equal(xp.real(q).numpy(), x.real)
    np.testing.assert_array_equal(xp.imag(q).numpy(), x.imag)
    np.testing.assert_array_equal(xp.conj(q).numpy(), np.conj(x))
    np.testing.assert_allclose(q.angle().numpy(), np.angle(x), rtol=TOL[dt])
    _same(xp.abs(q), np.abs(x), dt, "abs")
    assert xp.abs(q).dtype == ("float32" if dt == np.complex64 else "float64")
    # Casts: to real drops the imaginary part (NumPy's, which warns), to bool by either part.
    with np.errstate(all="ignore"), pytest.warns(np.exceptions.ComplexWarning):
        want = x.astype(np.float64)
    np.testing.assert_array_equal(q.astype("float64").numpy(), want)
    np.testing.assert_array_equal(xp.asarray(np.array([0j, 1j, 0.5])).astype("bool").numpy(),
                                  [False, True, True])


def test_data_type_functions_and_printing():
    assert xp.isdtype(xp.complex64, "complex floating")
    assert xp.isdtype(xp.complex128, "numeric") and not xp.isdtype(xp.complex64, "real floating")
    assert xp.result_type(xp.complex64, xp.float64) == xp.complex128
    assert xp.result_type(xp.complex64, xp.int16) == xp.complex64
    assert xp.can_cast(xp.float32, xp.complex64) and not xp.can_cast(xp.complex64, xp.float64)
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["complex floating"] == xp.complex128
    assert set(info.dtypes(kind="complex floating")) == {"complex64", "complex128"}
    f = xp.finfo(xp.complex64)
    assert f.dtype == xp.float32 and f.eps == np.finfo(np.float32).eps
    text = repr(NDArray(np.array([1 + 2j, 3 - 4.5j])))
    assert "+2." in text and "-4.5j" in text, text


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_var_and_std_are_real(dt):
    x = _random(np.random.default_rng(5), (3, 5), dt)
    q = xp.asarray(x)[:, ::-2]
    for axis in (None, 0, 1):
        for correction in (0, 1):
            got = xp.var(q, axis=axis, correction=correction)
            want = np.var(x[:, ::-2], axis=axis, ddof=correction)
            assert got.dtype == (xp.float32 if dt == np.complex64 else xp.float64)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5 if dt == np.complex64 else 1e-12)
            np.testing.assert_allclose(np.asarray(xp.std(q, axis=axis, correction=correction)),
                                       np.std(x[:, ::-2], axis=axis, ddof=correction),
                                       rtol=1e-5 if dt == np.complex64 else 1e-12)


def test_what_complex_numbers_lack_is_refused_by_name():
    q = xp.asarray(np.array([1 + 2j, 3 - 1j]))
    for call in (lambda: xp.sort(q), lambda: xp.max(q), lambda: xp.floor(q),
                 lambda: xp.less(q, q), lambda: xp.argmax(q)):
        with pytest.raises((TypeError, ValueError), match="complex"):
            call()


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_scans_scalars_and_joins_keep_both_parts(dt):
    rng = np.random.default_rng(13)
    x = _random(rng, (3, 4), dt)
    q = xp.asarray(x)
    for axis in (0, 1):
        _same(xp.cumulative_sum(q, axis=axis), np.cumsum(x, axis=axis), dt, f"cumsum {axis}")
        _same(xp.cumulative_prod(q, axis=axis), np.cumprod(x, axis=axis), dt, f"cumprod {axis}")
    assert complex(q[1, 2]) == complex(x[1, 2])
    assert complex(xp.asarray(np.array([2.5]))) == 2.5 + 0j
    np.testing.assert_array_equal(xp.concat([q, q[::-1]]).numpy(), np.concatenate([x, x[::-1]]))
    np.testing.assert_array_equal(xp.take(q, xp.asarray(np.array([2, 0])), axis=0).numpy(),
                                  x[[2, 0]])
    w = xp.zeros((3, 4), dtype=xp.complex128)
    w[:, ::2] = q[:, 1::2]
    want = np.zeros((3, 4), np.complex128)
    want[:, ::2] = x[:, 1::2]
    np.testing.assert_array_equal(w.numpy(), want)
