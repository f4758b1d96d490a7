"""quill.Tensor on complex data: gradients in PyTorch's convention (dL/dx + i dL/dy for
z = x + iy), checked against central differences computed with NumPy."""
import numpy as np
import pytest

import quill

RNG = np.random.default_rng(7)


def _numeric(f, z0, eps=1e-6):
    """dL/dx + i dL/dy of the real scalar f(z) at z0, by central differences."""
    g = np.zeros_like(z0)
    for i in np.ndindex(z0.shape):
        for d in (1.0, 1j):
            hi, lo = z0.copy(), z0.copy()
            hi[i] += d * eps
            lo[i] -= d * eps
            g[i] += d * (f(hi) - f(lo)) / (2 * eps)
    return g


CASES = {
    "abs2": (lambda t: (t * t.conj()).real.sum(), lambda z: np.sum(np.abs(z) ** 2)),
    "exp_imag": (lambda t: t.exp().imag.sum(), lambda z: np.sum(np.exp(z).imag)),
    "mul_div": (lambda t: ((t * t) / (t + 3)).real.sum(), lambda z: np.sum((z * z / (z + 3)).real)),
    "matmul_abs": (lambda t: (t @ t).abs().sum(), lambda z: np.sum(np.abs(z @ z))),
    "log_real": (lambda t: t.log().real.sum(), lambda z: np.sum(np.log(z).real)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_gradients_match_central_differences(name):
    f_q, f_np = CASES[name]
    z0 = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    z = quill.Tensor(z0, requires_grad=True)
    assert z.dtype == "complex128"
    f_q(z).backward()
    np.testing.assert_allclose(z.grad.numpy(), _numeric(f_np, z0), rtol=1e-5, atol=1e-6)


def test_a_real_weight_gets_a_real_gradient():
    w0 = RNG.standard_normal(4)
    z0 = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
    w = quill.Tensor(w0, requires_grad=True)
    (w * quill.Tensor(z0)).abs().sum().backward()
    assert w.grad.dtype == "float64"
    np.testing.assert_allclose(w.grad.numpy(), np.abs(z0) * np.sign(w0), rtol=1e-12)
