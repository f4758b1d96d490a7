"""quill.autocast: the context manager and decorator over the Rust guard, which ops come out in
bfloat16 and which in float32, and their values against NumPy on inputs rounded to bfloat16 by
hand (round-to-nearest-even of the float32 bits, below), plus PyTorch's torch.autocast where
torch is importable."""
import threading

import numpy as np
import pytest

import quill
from quill import Tensor, nn, ops


def bf16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even) and widened back."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return r.astype(np.uint32).view(np.float32)


def assert_bf16_close(got, want, slack=1e-6):
    """Within one bfloat16 ulp of the larger magnitude (plus `slack`): a product accumulated in
    float32 and rounded once may land on the other neighbour of a value near a tie."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    big = np.maximum(np.abs(got), np.abs(want))
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(big, 2.0**-126))) - 7)
    bad = np.abs(got - want) > ulp + slack
    assert not bad.any(), f"{bad.sum()} elements off, first {got[bad][:3]} vs {want[bad][:3]}"


def T(x, requires_grad=False):
    return Tensor(np.asarray(x, np.float32), dtype="float32", requires_grad=requires_grad)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_regions_nest_restore_and_are_per_thread():
    assert not quill.is_autocast_enabled() and quill.get_autocast_dtype() is None
    with quill.autocast("bf16") as region:
        assert region.dtype == "bfloat16"
        assert quill.get_autocast_dtype() == "bfloat16"
        with quill.autocast(enabled=False):
            assert not quill.is_autocast_enabled()
            with quill.autocast("float16"):
                assert quill.get_autocast_dtype() == "float16"
            assert quill.get_autocast_dtype() is None
        seen = []
        t = threading.Thread(target=lambda: seen.append(quill.is_autocast_enabled()))
        t.start()
        t.join()
        assert seen == [False], "another thread has its own state"
        assert quill.get_autocast_dtype() == "bfloat16"
    assert not quill.is_autocast_enabled()


def test_an_exception_inside_the_region_restores_the_state():
    with pytest.raises(KeyError):
        with quill.autocast("bfloat16"):
            raise KeyError("inside")
    assert not quill.is_autocast_enabled()


def test_decorator_autocasts_only_the_call():
    @quill.autocast("bf16")
    def product(a, b):
        assert quill.is_autocast_enabled()
        return a @ b

    a, b = T(rand(3, 4)), T(rand(4, 2, seed=1))
    assert product(a, b).dtype == "bfloat16"
    assert (a @ b).dtype == "float32"
    assert not quill.is_autocast_enabled()


@pytest.mark.parametrize("bad", ["float32", "float64", "int32", "bool"])
def test_other_dtypes_are_a_value_error_naming_autocast(bad):
    with pytest.raises(ValueError, match="autocast.*bf16"):
        quill.autocast(bad)
    assert not quill.is_autocast_enabled()


def test_an_unknown_dtype_name_is_a_type_error():
    with pytest.raises(TypeError):
        quill.autocast("bfloat17")


def test_matmul_runs_in_bfloat16_on_rounded_inputs():
    a, b = rand(7, 45), rand(45, 9, seed=1)
    with quill.autocast("bf16"):
        y = T(a) @ T(b)
        # A transposed and a strided view are cast through their layouts.
        yt = T(np.ascontiguousarray(a.T)).transpose() @ T(b)
    assert y.dtype == "bfloat16" and yt.dtype == "bfloat16"
    want = bf16(a).astype(np.float64) @ bf16(b).astype(np.float64)
    assert_bf16_close(y.numpy(), want)
    assert_bf16_close(yt.numpy(), want)


def test_gradients_reach_float32_leaves_in_float32():
    a, b = rand(6, 20, seed=2), rand(20, 5, seed=3)
    # Upstream weights bfloat16 holds exactly (multiples of 1/4).
    w = (np.arange(30).reshape(6, 5) % 9 - 4).astype(np.float32) / 4
    ta, tb = T(a, True), T(b, True)
    with quill.autocast("bf16"):
        loss = ((ta @ tb) * T(w)).sum()
        assert loss.dtype == "float32"
    loss.backward()
    assert ta.grad.dtype == "float32" and tb.grad.dtype == "float32"
    assert_bf16_close(ta.grad.numpy(), w.astype(np.float64) @ bf16(b).T.astype(np.float64))
    assert_bf16_close(tb.grad.numpy(), bf16(a).T.astype(np.float64) @ w.astype(np.float64))


def test_reductions_softmax_and_exp_log_widen_bfloat16_to_float32():
    x = rand(4, 11, seed=4)
    xb = T(x).astype("bfloat16")
    xr = bf16(x).astype(np.float64)
    with quill.autocast("bf16"):
        lse = ops.logsumexp(xb, axes=(1,))
        s = xb.sum()
        e = ops.exp(xb)
        r = ops.relu(xb)
    assert (lse.dtype, s.dtype, e.dtype) == ("float32",) * 3
    assert r.dtype == "bfloat16", "ops outside the float32 list keep their dtype"
    m = xr.max(axis=1, keepdims=True)
    want = (m + np.log(np.exp(xr - m).sum(axis=1, keepdims=True)))[:, 0]
    np.testing.assert_allclose(lse.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(s.numpy(), xr.sum(), rtol=1e-6)
    np.testing.assert_allclose(e.numpy(), np.exp(xr), rtol=1e-6)
    # Without autocast the same bfloat16 sum stays bfloat16.
    assert xb.sum().dtype == "bfloat16"


def test_linear_and_softmax_loss_train_float32_parameters():
    layer = nn.Linear(12, 4)
    x = T(rand(8, 12, seed=5))
    y = Tensor(np.arange(8) % 4, requires_grad=False)
    with quill.autocast("bf16"):
        logits = layer(x)
        loss = nn.SoftmaxLoss()(logits, y)
    # The product is bfloat16, the float32 bias promotes it back; the loss is float32.
    assert logits.dtype == "float32" and loss.dtype == "float32"
    loss.backward()
    for p in layer.parameters():
        assert p.dtype == "float32" and p.grad.dtype == "float32"
    want = bf16(x.numpy()).astype(np.float64) @ bf16(layer.weight.numpy()).astype(np.float64)
    got = logits.numpy() - layer.bias.numpy()
    assert_bf16_close(got, want, slack=1e-5)


def test_conv_runs_in_bfloat16():
    x, w = rand(2, 6, 6, 3, seed=6), rand(3, 3, 3, 4, seed=7)
    with quill.autocast("bf16"):
        out = ops.conv(T(x), T(w), stride=1, padding=1)
    assert out.dtype == "bfloat16"
    xp = np.pad(bf16(x).astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    wr = bf16(w).astype(np.float64)
    want = np.zeros((2, 6, 6, 4))
    for i in range(3):
        for j in range(3):
            want += xp[:, i : i + 6, j : j + 6, :] @ wr[i, j]
    assert_bf16_close(out.numpy(), want)


def test_matches_torch_autocast_where_torch_is_installed():
    torch = pytest.importorskip("torch")
    a, b = rand(16, 64, seed=8), rand(64, 24, seed=9)
    with quill.autocast("bf16"):
        ours = T(a) @ T(b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = torch.from_numpy(a) @ torch.from_numpy(b)
    assert theirs.dtype == torch.bfloat16 and ours.dtype == "bfloat16"
    assert_bf16_close(ours.numpy(), theirs.float().numpy())


def test_nn_conv_stays_float32_and_takes_a_bfloat16_activation():
    # quill's conv2d is on autocast's float32 side (its CPU kernel has no bfloat16 arithmetic).
    layer = nn.Conv(3, 4, 3)
    x = rand(2, 3, 6, 6, seed=10)
    with quill.autocast("bf16"):
        out = layer(T(x).astype("bfloat16"))
    assert out.dtype == "float32"
    with quill.autocast(enabled=False):
        want = layer(T(bf16(x)))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
