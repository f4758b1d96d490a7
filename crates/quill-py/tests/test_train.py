"""A short training run from Python with needle's API: an MLP on the first MNIST samples
(data/mnist in the repo) must learn (held-out accuracy far above chance), and the needle-style
modules, losses and optimizers must agree with NumPy on a hand-computed step."""
import os

import numpy as np
import pytest

import quill as ndl
import quill.nn as nn

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
MNIST = os.path.join(ROOT, "data", "mnist")


def test_mlp_learns_mnist_subset():
    np.random.seed(0)
    train = ndl.data.MNISTDataset(
        os.path.join(MNIST, "train-images-idx3-ubyte.gz"),
        os.path.join(MNIST, "train-labels-idx1-ubyte.gz"),
    )
    x_all, y_all = train.images[:3000], train.labels[:3000]
    ds = ndl.data.NDArrayDataset(x_all[:2000], y_all[:2000])
    loader = ndl.data.DataLoader(ds, batch_size=100, shuffle=True)
    model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = ndl.optim.Adam(model.parameters(), lr=0.003)
    loss_fn = nn.SoftmaxLoss()
    losses = []
    for _ in range(3):
        for x, y in loader:
            opt.reset_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.numpy().item())
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses
    model.eval()
    logits = model(ndl.Tensor(x_all[2000:], requires_grad=False)).numpy()
    acc = (logits.argmax(1) == y_all[2000:]).mean()
    assert acc > 0.8, acc


def test_sgd_momentum_step_matches_numpy():
    np.random.seed(1)
    w0 = np.random.randn(3, 2).astype(np.float32)
    x = np.random.randn(4, 3).astype(np.float32)
    w = nn.Parameter(ndl.Tensor(w0))
    opt = ndl.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=0.01)
    u = 0
    wn = w0.copy()
    for _ in range(3):
        opt.reset_grad()
        ((ndl.Tensor(x, requires_grad=False) @ w) ** 2).sum().backward()
        g = 2 * x.T @ (x @ wn) + 0.01 * wn
        u = 0.9 * u + 0.1 * g
        wn = wn - 0.1 * u
        opt.step()
        np.testing.assert_allclose(w.numpy(), wn, rtol=1e-4, atol=1e-5)


def test_batchnorm_layernorm_dropout_modes():
    np.random.seed(2)
    x = np.random.randn(8, 5).astype(np.float32) * 3 + 1
    bn = nn.BatchNorm1d(5)
    y = bn(ndl.Tensor(x)).numpy()
    np.testing.assert_allclose(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.mean(0), rtol=1e-4, atol=1e-5)
    bn.eval()
    rm, rv = 0.1 * x.mean(0), 0.9 + 0.1 * x.var(0)
    np.testing.assert_allclose(bn(ndl.Tensor(x)).numpy(), (x - rm) / np.sqrt(rv + 1e-5), rtol=1e-4, atol=1e-4)
    ln = nn.LayerNorm1d(5)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(ndl.Tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4)
    d = nn.Dropout(0.5)
    out = d(ndl.Tensor(np.ones((200, 50), dtype=np.float32))).numpy()
    assert set(np.unique(out)) <= {0.0, 2.0} and 0.4 < (out == 0).mean() < 0.6
    d.eval()
    assert (d(ndl.Tensor(x)).numpy() == x).all()


def test_conv_matches_numpy():
    np.random.seed(3)
    x = np.random.randn(2, 3, 6, 6).astype(np.float32)
    conv = nn.Conv(3, 4, 3, stride=1, bias=True)
    y = conv(ndl.Tensor(x)).numpy()
    w = conv.weight.numpy()  # (k, k, cin, cout)
    b = conv.bias.numpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 4, 6, 6), dtype=np.float64)
    for i in range(6):
        for j in range(6):
            patch = xp[:, :, i : i + 3, j : j + 3]  # n c kh kw
            want[:, :, i, j] = np.einsum("nchw,hwco->no", patch, w) + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def _conv_reference(x, w, b, s):
    """Naive NCHW convolution with 'same' padding 1, weight (k, k, in, out), and the
    gradients of sum(y * g) (x, w, b), all by loops over output positions in float64."""
    n, c, h, wd = x.shape
    k, o = w.shape[0], w.shape[3]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ho, wo = (h + 2 - k) // s + 1, (wd + 2 - k) // s + 1
    y = np.zeros((n, o, ho, wo))
    for i in range(ho):
        for j in range(wo):
            y[:, :, i, j] = np.einsum("nchw,hwco->no", xp[:, :, i * s:i * s + k, j * s:j * s + k], w)
    y += 0 if b is None else b.reshape(1, o, 1, 1)

    def grads(g):
        gx, gw = np.zeros_like(xp), np.zeros(w.shape)
        for i in range(ho):
            for j in range(wo):
                patch = xp[:, :, i * s:i * s + k, j * s:j * s + k]
                gw += np.einsum("nchw,no->hwco", patch, g[:, :, i, j])
                gx[:, :, i * s:i * s + k, j * s:j * s + k] += np.einsum("hwco,no->nchw", w, g[:, :, i, j])
        return gx[:, :, 1:-1, 1:-1], gw, g.sum((0, 2, 3))

    return y, grads


@pytest.mark.parametrize("stride,bias", [(1, True), (2, False)])
def test_conv_module_is_rust_conv2d_over_needle_layout(stride, bias):
    rng = np.random.default_rng(7)
    # A permuted, stepped view as the input: NHWC data read as NCHW, every other column.
    base = rng.standard_normal((2, 7, 12, 3)).astype(np.float32)
    x = ndl.Tensor(base).permute((0, 3, 1, 2))[:, :, :, ::2]
    xn = base.transpose(0, 3, 1, 2)[:, :, :, ::2]
    conv = nn.Conv(3, 5, 3, stride=stride, bias=bias)
    y = conv(x)
    want, grads = _conv_reference(xn, conv.weight.numpy(), conv.bias.numpy() if bias else None, stride)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(want.shape).astype(np.float32)
    (y * ndl.Tensor(g)).sum().backward()
    gx, gw, gb = grads(g)
    # The gradient lands in needle's (k, k, in, out) Parameter.
    assert conv.weight.grad.shape == (3, 3, 3, 5)
    np.testing.assert_allclose(conv.weight.grad.numpy(), gw, rtol=1e-3, atol=1e-3)
    if bias:
        np.testing.assert_allclose(conv.bias.grad.numpy(), gb, rtol=1e-3, atol=1e-3)
    # A weight assigned by the user (as needle's tests copy PyTorch's in) is the next call's.
    conv.weight = nn.Parameter(np.zeros((3, 3, 3, 5), np.float32))
    const = conv.bias.numpy().reshape(1, 5, 1, 1) if bias else 0
    np.testing.assert_allclose(conv(x).numpy(), np.zeros(want.shape) + const, atol=0)
    with pytest.raises(ValueError, match="Conv"):
        nn.Conv(3, 5, 3)(ndl.Tensor(np.zeros((1, 4, 5, 5), np.float32)))


def test_conv_input_gradient_through_a_view():
    rng = np.random.default_rng(8)
    base = rng.standard_normal((1, 6, 10, 2)).astype(np.float32)
    leaf = ndl.Tensor(base)
    conv = nn.Conv(2, 3, 3, stride=2, bias=True)
    y = conv(leaf.permute((0, 3, 1, 2))[:, :, :, ::-2])
    xn = base.transpose(0, 3, 1, 2)[:, :, :, ::-2]
    want, grads = _conv_reference(xn, conv.weight.numpy(), conv.bias.numpy(), 2)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(want.shape).astype(np.float32)
    (y * ndl.Tensor(g)).sum().backward()
    gx = grads(g)[0]
    expect = np.zeros((1, 2, 6, 10))
    expect[:, :, :, ::-2] = gx
    np.testing.assert_allclose(leaf.grad.numpy(), expect.transpose(0, 2, 3, 1), rtol=1e-3, atol=1e-3)


def test_mnist_reader_rejects_malformed_files(tmp_path):
    bad = tmp_path / "bad.gz"
    import gzip

    with gzip.open(bad, "wb") as f:
        f.write(b"\x00\x00\x08\x03" + (10).to_bytes(4, "big") + b"\x00" * 7)
    with pytest.raises(ValueError, match="truncated|header"):
        ndl.data.MNISTDataset(str(bad), str(bad))
