"""Modules and optimizers refuse nonsense arguments by quill's rules (`quill::check`, through
`_native.check_arg`), naming the argument; an empty batch cannot poison BatchNorm; an id
outside an Embedding's table is an IndexError, never a wrapped row."""
import math

import numpy as np
import pytest

import quill as ndl
from quill import nn, optim


def params():
    return [nn.Parameter(ndl.Tensor(np.ones((2, 2), np.float32)))]


@pytest.mark.parametrize("p", [1.5, -1, -1e-9, 1.000001, math.nan])
def test_dropout_probability_outside_0_1(p):
    with pytest.raises(ValueError, match=r"Dropout: p must be a probability in \[0, 1\]"):
        nn.Dropout(p)


def test_dropout_bounds_work():
    x = ndl.Tensor(np.ones((4, 5), np.float32))
    assert np.all(nn.Dropout(1.0)(x).numpy() == 0)
    assert np.all(nn.Dropout(0.0)(x).numpy() == 1)
    with pytest.raises(TypeError, match="Dropout: p must be a number"):
        nn.Dropout("half")


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda: optim.SGD(params(), lr=math.nan), "lr"),
        (lambda: optim.SGD(params(), lr=-0.1), "lr"),
        (lambda: optim.SGD(params(), lr=math.inf), "lr"),
        (lambda: optim.SGD(params(), lr=0.1, momentum=-0.5), "momentum"),
        (lambda: optim.SGD(params(), lr=0.1, weight_decay=-1), "weight_decay"),
        (lambda: optim.Adam(params(), lr=-1), "lr"),
        (lambda: optim.Adam(params(), lr=0.1, beta1=1.0), "beta1"),
        (lambda: optim.Adam(params(), lr=0.1, beta2=-0.1), "beta2"),
        (lambda: optim.Adam(params(), lr=0.1, eps=-1e-8), "eps"),
        (lambda: optim.Adam(params(), lr=0.1, weight_decay=math.nan), "weight_decay"),
    ],
)
def test_optimizer_arguments(make, arg):
    with pytest.raises(ValueError, match=rf"(SGD|Adam): {arg} must be"):
        make()


def test_optimizers_accept_the_edges():
    optim.SGD(params(), lr=0.0, momentum=0.0)
    optim.Adam(params(), lr=0.0, beta1=0.0, beta2=0.0, eps=0.0)


@pytest.mark.parametrize(
    "make, arg",
    [
        (lambda: nn.BatchNorm1d(0), "dim"),
        (lambda: nn.BatchNorm1d(-3), "dim"),
        (lambda: nn.BatchNorm1d(4, eps=0), "eps"),
        (lambda: nn.BatchNorm1d(4, momentum=2), "momentum"),
        (lambda: nn.BatchNorm2d(4, eps=math.nan), "eps"),
        (lambda: nn.LayerNorm1d(4, eps=-1), "eps"),
    ],
)
def test_norm_arguments(make, arg):
    with pytest.raises(ValueError, match=rf"Norm\w*: {arg} must be"):
        make()


def test_batchnorm_empty_batch_is_an_error_and_state_survives():
    bn = nn.BatchNorm1d(3)
    x = ndl.Tensor(np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32))
    bn(x)
    before = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    with pytest.raises(ValueError, match="BatchNorm1d: cannot train on an empty batch"):
        bn(ndl.Tensor(np.zeros((0, 3), np.float32)))
    assert np.all(np.isfinite(bn.running_mean.numpy()))
    np.testing.assert_array_equal(bn.running_mean.numpy(), before[0])
    np.testing.assert_array_equal(bn.running_var.numpy(), before[1])
    bn.eval()
    assert np.all(np.isfinite(bn(x).numpy()))


def test_embedding_ids_outside_the_table():
    emb = nn.Embedding(5, 3)
    ok = emb(ndl.Tensor(np.array([[0, 4]], np.float32))).numpy()
    np.testing.assert_array_equal(ok[0, 1], emb.weight.numpy()[4])
    for bad in (-1, 5, 99):
        with pytest.raises(IndexError, match=rf"Embedding: index {bad} is out of range"):
            emb(ndl.Tensor(np.array([[0, bad]], np.float32)))
