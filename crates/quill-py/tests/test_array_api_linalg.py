"""quill.array_api.linalg against numpy.linalg on batched, transposed, reversed and broadcast
inputs, f32 and f64: values where they are unique (solve, inv, det, slogdet, cholesky, norms,
eigenvalues, singular values, pinv, rank, the composed functions) and the defining identities
where signs are free (qr, svd, eigh vectors); errors for singular and non-square input."""
import numpy as np
import pytest

import quill.array_api as xp
from quill.backend_ndarray import NDArray

la = xp.linalg
RNG = np.random.default_rng(0)


def strided(shape, dtype="float64", spd=False, dominant=True):
    """(quill view, NumPy copy of its values): the last two dims transposed and rows reversed."""
    n = RNG.standard_normal(shape)
    if dominant and shape[-1] == shape[-2]:
        n = n + shape[-1] * np.eye(shape[-1])
    if spd:
        n = n @ np.swapaxes(n, -1, -2)
    n = n.astype(dtype)
    q = xp.matrix_transpose(NDArray(np.ascontiguousarray(np.swapaxes(n, -1, -2))))
    if spd:
        # Reversing rows would break the symmetry: reverse the batch instead.
        return q[::-1], n[::-1]
    return q[..., ::-1, :], n[..., ::-1, :]


def tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if dtype == "float32" else dict(rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_solve_inv_det_slogdet(dtype):
    q, n = strided((2, 3, 4, 4), dtype)
    qb, nb = strided((3, 4, 2), dtype, dominant=False)
    got = la.solve(q, qb)
    assert got.dtype == dtype and got.shape == (2, 3, 4, 2)
    np.testing.assert_allclose(np.asarray(got), np.linalg.solve(n, nb), **tol(dtype))
    v = RNG.standard_normal(4).astype(dtype)
    np.testing.assert_allclose(np.asarray(la.solve(q, NDArray(v))), np.linalg.solve(n, v), **tol(dtype))
    np.testing.assert_allclose(np.asarray(la.inv(q)), np.linalg.inv(n), **tol(dtype))
    np.testing.assert_allclose(np.asarray(la.det(q)), np.linalg.det(n), **tol(dtype))
    sign, logabs = la.slogdet(q)
    ns, nl = np.linalg.slogdet(n)
    np.testing.assert_array_equal(np.asarray(sign), ns)
    np.testing.assert_allclose(np.asarray(logabs), nl, **tol(dtype))


def test_singular_and_non_square_are_errors():
    s = xp.asarray([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(ValueError, match="singular"):
        la.inv(s)
    with pytest.raises(ValueError, match="singular"):
        la.solve(s, xp.asarray([1.0, 1.0]))
    with pytest.raises(ValueError, match="square"):
        la.det(xp.ones((2, 3)))
    with pytest.raises(ValueError, match="positive definite"):
        la.cholesky(xp.asarray([[1.0, 2.0], [2.0, 1.0]]))
    assert float(la.det(s)) == 0.0
    sign, logabs = la.slogdet(s)
    assert float(sign) == 0.0 and float(logabs) == -np.inf


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cholesky_eigh_svd_qr(dtype):
    q, n = strided((2, 5, 5), dtype, spd=True)
    # NumPy reads the lower triangle; both factor the same symmetric matrix.
    np.testing.assert_allclose(np.asarray(la.cholesky(q)), np.linalg.cholesky(n), **tol(dtype))
    up = np.asarray(la.cholesky(q, upper=True))
    np.testing.assert_allclose(np.swapaxes(up, -1, -2) @ up, n, rtol=1e-3 if dtype == "float32" else 1e-9)
    w, v = la.eigh(q)
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(n), **tol(dtype))
    np.testing.assert_allclose(np.asarray(la.eigvalsh(q)), np.linalg.eigvalsh(n), **tol(dtype))
    vv = np.asarray(v)
    np.testing.assert_allclose(n @ vv, vv * np.asarray(w)[..., None, :], rtol=1e-3, atol=1e-3 * np.abs(n).max())
    for shape in [(2, 3, 5), (2, 6, 4)]:
        q, n = strided(shape, dtype, dominant=False)
        for full in [True, False]:
            u, s, vh = la.svd(q, full_matrices=full)
            nu, ns, nvh = np.linalg.svd(n, full_matrices=full)
            assert (u.shape, s.shape, vh.shape) == (nu.shape, ns.shape, nvh.shape)
            np.testing.assert_allclose(np.asarray(s), ns, **tol(dtype))
            k = ns.shape[-1]
            rebuilt = (np.asarray(u)[..., :, :k] * np.asarray(s)[..., None, :]) @ np.asarray(vh)[..., :k, :]
            np.testing.assert_allclose(rebuilt, n, **tol(dtype))
        np.testing.assert_allclose(np.asarray(la.svdvals(q)), np.linalg.svd(n, compute_uv=False), **tol(dtype))
        for mode in ["reduced", "complete"]:
            qq, rr = la.qr(q, mode=mode)
            nq, nr = np.linalg.qr(n, mode=mode)
            assert (qq.shape, rr.shape) == (nq.shape, nr.shape)
            qq, rr = np.asarray(qq), np.asarray(rr)
            np.testing.assert_allclose(qq @ rr, n, **tol(dtype))
            np.testing.assert_allclose(np.abs(rr), np.abs(nr), **tol(dtype))
            np.testing.assert_allclose(np.triu(rr), rr)


def test_pinv_rank_norms():
    a = RNG.standard_normal((3, 4, 2)) @ RNG.standard_normal((3, 2, 5))  # rank 2
    q = NDArray(a)
    np.testing.assert_allclose(np.asarray(la.pinv(q)), np.linalg.pinv(a), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(la.matrix_rank(q)), np.linalg.matrix_rank(a))
    q, n = strided((2, 3, 4), dominant=False)
    for ord in ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]:
        got = la.matrix_norm(q, ord=ord)
        np.testing.assert_allclose(np.asarray(got), np.linalg.matrix_norm(n, ord=ord), rtol=1e-10)
    assert la.matrix_norm(q, keepdims=True).shape == (2, 1, 1)
    for ord in [1, 2, 3, 0.5, 0, np.inf, -np.inf]:
        for axis in [None, 1, (0, 2), -1]:
            got = la.vector_norm(q, axis=axis, ord=ord)
            np.testing.assert_allclose(np.asarray(got), np.linalg.vector_norm(n, axis=axis, ord=ord),
                                       rtol=1e-10)
    got = la.vector_norm(q, axis=(0, 2), keepdims=True)
    assert got.shape == np.linalg.vector_norm(n, axis=(0, 2), keepdims=True).shape


def test_composed_functions():
    q, n = strided((2, 3, 4), dominant=False)
    for offset in [-3, -1, 0, 2, 4]:
        np.testing.assert_array_equal(np.asarray(la.diagonal(q, offset=offset)),
                                      np.diagonal(n, offset=offset, axis1=-2, axis2=-1))
        np.testing.assert_allclose(np.asarray(la.trace(q, offset=offset)),
                                   np.trace(n, offset=offset, axis1=-2, axis2=-1))
    ints = NDArray(np.arange(9, dtype=np.int32).reshape(3, 3))
    assert la.trace(ints, dtype=xp.int32).dtype == xp.int32
    a, b = RNG.standard_normal(3), RNG.standard_normal(4)
    np.testing.assert_allclose(np.asarray(la.outer(NDArray(a), NDArray(b))), np.outer(a, b))
    c, d = RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))
    np.testing.assert_allclose(np.asarray(la.cross(NDArray(c), NDArray(d))), np.cross(c, d))
    np.testing.assert_allclose(np.asarray(la.cross(NDArray(c.T.copy()), NDArray(d.T.copy()), axis=0)),
                               np.cross(c.T, d.T, axis=0))
    with pytest.raises(ValueError, match="size 3"):
        la.cross(xp.ones((2, 2)), xp.ones((2, 2)))
    x, y = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 3, 5))
    np.testing.assert_allclose(np.asarray(la.tensordot(NDArray(x), NDArray(y), axes=([1, 2], [1, 0]))),
                               np.tensordot(x, y, axes=([1, 2], [1, 0])))
    z = RNG.standard_normal((3, 4, 2))
    np.testing.assert_allclose(np.asarray(la.tensordot(NDArray(x), NDArray(z), axes=2)),
                               np.tensordot(x, z, axes=2))
    sq, ns = strided((2, 3, 3))
    for p in [-2, 0, 1, 3, 5]:
        np.testing.assert_allclose(np.asarray(la.matrix_power(sq, p)), np.linalg.matrix_power(ns, p),
                                   rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(la.vecdot(NDArray(x), NDArray(x))), np.sum(x * x, -1))
    np.testing.assert_allclose(np.asarray(la.matmul(sq, sq)), ns @ ns)


def test_tensor_linalg_gradients_against_closed_forms():
    """quill.Tensor's differentiable linalg: values as numpy.linalg's, gradients of
    sum(w * f(A)) as the closed forms computed here in NumPy."""
    from quill import Tensor
    a = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    w = RNG.standard_normal((2, 3, 3))
    ainv = np.linalg.inv(a)

    def grad_of(f, wt):
        t = Tensor(a, dtype="float64", requires_grad=True)
        out = f(t)
        (out * Tensor(wt, dtype="float64")).sum().backward()
        return out.numpy(), t.grad.numpy()

    val, g = grad_of(lambda t: t.inv(), w)
    np.testing.assert_allclose(val, ainv, rtol=1e-10)
    it = np.swapaxes(ainv, -1, -2)
    np.testing.assert_allclose(g, -it @ w @ it, rtol=1e-9, atol=1e-12)
    wd = RNG.standard_normal(2)
    val, g = grad_of(lambda t: t.det(), wd)
    det = np.linalg.det(a)
    np.testing.assert_allclose(val, det, rtol=1e-10)
    np.testing.assert_allclose(g, (wd * det)[:, None, None] * it, rtol=1e-9)
    b = RNG.standard_normal((3, 2))
    val, g = grad_of(lambda t: t.solve(Tensor(b, dtype="float64")), RNG.standard_normal((2, 3, 2)))
    np.testing.assert_allclose(val, np.linalg.solve(a, b), rtol=1e-10)
    sign, logabs = Tensor(a, dtype="float64").slogdet()
    np.testing.assert_allclose(logabs.numpy(), np.linalg.slogdet(a)[1], rtol=1e-12)
    spd = a @ np.swapaxes(a, -1, -2)
    np.testing.assert_allclose(Tensor(spd, dtype="float64").cholesky().numpy(),
                               np.linalg.cholesky(spd), rtol=1e-10)
    wv, v = Tensor(spd, dtype="float64").eigh()
    np.testing.assert_allclose(wv.numpy(), np.linalg.eigvalsh(spd), rtol=1e-10)
    # d(sum of eigenvalues)/dA = I (the trace), read from the lower triangle's symmetric part.
    t = Tensor(spd, dtype="float64", requires_grad=True)
    t.eigh()[0].sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-10)
    # d(sum of singular values)/dA = U Vᵀ.
    g = RNG.standard_normal((4, 3))
    t = Tensor(g, dtype="float64", requires_grad=True)
    u, s, vh = t.svd()
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(g, compute_uv=False), rtol=1e-10)
    s.sum().backward()
    nu, _, nvh = np.linalg.svd(g, full_matrices=False)
    np.testing.assert_allclose(t.grad.numpy(), nu @ nvh, atol=1e-10)
    q, r = Tensor(g, dtype="float64").qr()
    np.testing.assert_allclose(q.numpy() @ r.numpy(), g, atol=1e-12)
    with pytest.raises(ValueError, match="singular"):
        Tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), dtype="float64").inv()


def cstrided(shape, dtype="complex128", hermitian=False):
    """A complex (quill view, NumPy copy): transposed storage, rows (or the batch) reversed."""
    n = RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)
    if shape[-1] == shape[-2]:
        n = n + shape[-1] * np.eye(shape[-1])
    if hermitian:
        n = n @ np.conj(np.swapaxes(n, -1, -2))
    n = n.astype(dtype)
    q = xp.matrix_transpose(NDArray(np.ascontiguousarray(np.swapaxes(n, -1, -2))))
    return (q[::-1], n[::-1]) if hermitian else (q[..., ::-1, :], n[..., ::-1, :])


def ctol(dtype):
    return dict(rtol=1e-3, atol=1e-3) if dtype == "complex64" else dict(rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_matrices_against_numpy(dtype):
    real = "float32" if dtype == "complex64" else "float64"
    q, n = cstrided((2, 3, 4, 4), dtype)
    qb, nb = cstrided((3, 4, 2), dtype)
    for got, want in [(la.solve(q, qb), np.linalg.solve(n, nb)), (la.inv(q), np.linalg.inv(n)),
                      (la.det(q), np.linalg.det(n)), (la.pinv(q), np.linalg.pinv(n)),
                      (la.matrix_power(q, -2), np.linalg.matrix_power(n, -2)),
                      (la.trace(q), np.trace(n, axis1=-2, axis2=-1))]:
        assert got.dtype == dtype
        np.testing.assert_allclose(np.asarray(got), want, **ctol(dtype))
    # Real by nature: singular values, norms, log |det|; the sign of det is a unit complex.
    for got, want in [(la.svdvals(q), np.linalg.svd(n, compute_uv=False)),
                      (la.matrix_norm(q), np.linalg.norm(n, axis=(-2, -1))),
                      (la.matrix_norm(q, ord="nuc"), np.linalg.norm(n, "nuc", axis=(-2, -1))),
                      (la.matrix_norm(q, ord=2), np.linalg.norm(n, 2, axis=(-2, -1))),
                      (la.vector_norm(q, axis=(-1,)), np.linalg.norm(n, axis=-1))]:
        assert got.dtype == real
        np.testing.assert_allclose(np.asarray(got), want, **ctol(dtype))
    sign, logabs = la.slogdet(q)
    ns, nl = np.linalg.slogdet(n)
    assert sign.dtype == dtype and logabs.dtype == real
    np.testing.assert_allclose(np.asarray(sign), ns, **ctol(dtype))
    np.testing.assert_allclose(np.asarray(logabs), nl, **ctol(dtype))
    np.testing.assert_array_equal(np.asarray(la.matrix_rank(q)), np.linalg.matrix_rank(n))
    # Factorizations whose phases are free: their identities, with Hermitian adjoints.
    h, hn = cstrided((2, 4, 4), dtype, hermitian=True)
    np.testing.assert_allclose(np.asarray(la.cholesky(h)), np.linalg.cholesky(hn), **ctol(dtype))
    up = np.asarray(la.cholesky(h, upper=True))
    np.testing.assert_allclose(np.conj(np.swapaxes(up, -1, -2)) @ up, hn, **ctol(dtype))
    w, v = la.eigh(h)
    assert w.dtype == real and v.dtype == dtype
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(hn), **ctol(dtype))
    vv = np.asarray(v)
    np.testing.assert_allclose(hn @ vv, vv * np.asarray(w)[..., None, :], rtol=1e-3, atol=1e-2)
    r, rn = cstrided((2, 5, 3), dtype)
    u, s, vh = la.svd(r, full_matrices=False)
    assert s.dtype == real
    np.testing.assert_allclose((np.asarray(u) * np.asarray(s)[..., None, :]) @ np.asarray(vh), rn, **ctol(dtype))
    qq, rr = la.qr(r)
    qq, rr = np.asarray(qq), np.asarray(rr)
    np.testing.assert_allclose(qq @ rr, rn, **ctol(dtype))
    np.testing.assert_allclose(np.conj(qq.swapaxes(-1, -2)) @ qq, np.broadcast_to(np.eye(3), (2, 3, 3)), **ctol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_eig_and_eigvals(dtype):
    want = "complex64" if dtype in ("float32", "complex64") else "complex128"
    n = RNG.standard_normal((3, 5, 5))
    if dtype.startswith("complex"):
        n = n + 1j * RNG.standard_normal((3, 5, 5))
    n = n.astype(dtype)
    q = xp.asarray(n)[:, ::-1, :]
    n = n[:, ::-1, :]
    w, v = la.eig(q)
    assert w.dtype == want and v.dtype == want and w.shape == (3, 5) and v.shape == (3, 5, 5)
    ww, vv = np.asarray(w), np.asarray(v)
    tol_ = 1e-3 if want == "complex64" else 1e-9
    np.testing.assert_allclose(n @ vv, vv * ww[..., None, :], atol=tol_ * 10)
    np.testing.assert_allclose(np.linalg.norm(vv, axis=-2), 1.0, rtol=tol_)
    ref = np.sort_complex(np.linalg.eigvals(n).astype(complex))
    np.testing.assert_allclose(np.sort_complex(np.asarray(la.eigvals(q)).astype(complex)), ref, atol=tol_ * 10)
    # A rotation has eigenvalues ±i though its entries are real.
    np.testing.assert_allclose(np.sort_complex(np.asarray(la.eigvals(xp.asarray([[0.0, -1.0], [1.0, 0.0]])))),
                               [-1j, 1j], atol=1e-12)
    with pytest.raises(ValueError, match="square"):
        la.eig(xp.ones((2, 3)))


def test_rtol_as_an_array_is_one_tolerance_per_matrix():
    a = RNG.standard_normal((3, 4, 2)) @ RNG.standard_normal((3, 2, 5))
    a[1] += 1e-4 * RNG.standard_normal((4, 5))  # rank 4, two tiny singular values
    for r in (np.array([1e-1, 1e-6, 0.5]), np.array(1e-3), np.array([[1e-2], [1e-9]])[:, :1].ravel()[:1]):
        np.testing.assert_array_equal(np.asarray(la.matrix_rank(xp.asarray(a), rtol=xp.asarray(r))),
                                      np.linalg.matrix_rank(a, rtol=r))
        np.testing.assert_allclose(np.asarray(la.pinv(xp.asarray(a), rtol=xp.asarray(r))),
                                   np.linalg.pinv(a, rtol=r), rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="does not broadcast to the batch shape"):
        la.pinv(xp.asarray(a), rtol=xp.asarray([1.0, 2.0]))
