"""needle's ``apps`` from ``quill.apps`` (issue 49, item 5): the hw2 MLP ResNet and its loops on
a small MNIST written in the IDX format, hw4's CIFAR-10 and Penn Treebank loops on synthetic
data, each checked for needle's structure and for what a loop must do (losses fall when
training, evaluation leaves the weights alone, the returned rates match a recount)."""
import gzip
import struct

import numpy as np
import pytest

import quill as ndl
from quill import apps, data, nn, optim


def test_mlp_resnet_structure_matches_needle():
    np.random.seed(0)
    model = apps.MLPResNet(784, hidden_dim=100, num_blocks=3, num_classes=10)
    # Linear(784,100), 3 x [Linear(100,50), BN(50), Linear(50,100), BN(100)], Linear(100,10)
    want = (784 * 100 + 100) + 3 * ((100 * 50 + 50) + 2 * 50 + (50 * 100 + 100) + 2 * 100) \
        + (100 * 10 + 10)
    assert sum(int(np.prod(p.shape)) for p in model.parameters()) == want
    block = apps.ResidualBlock(8, 4, norm=nn.LayerNorm1d, drop_prob=0.0)
    x = ndl.Tensor(np.random.randn(5, 8).astype(np.float32))
    y = block(x)
    assert y.shape == (5, 8) and (y.numpy() >= 0).all()    # ReLU last


def write_idx(path, images, labels):
    with gzip.open(path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(images), 28, 28) + images.tobytes())
    with gzip.open(path / "train-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + labels.tobytes())
    with gzip.open(path / "t10k-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(images), 28, 28) + images.tobytes())
    with gzip.open(path / "t10k-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + labels.tobytes())


def separable_mnist(n, rng):
    """Images whose label is written in the brightness of one 28-pixel row."""
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images = rng.integers(0, 30, (n, 28, 28)).astype(np.uint8)
    for i, y in enumerate(labels):
        images[i, 2 * y + 3] = 250
    return images, labels


def test_epoch_trains_and_evaluates_with_needles_rates(tmp_path):
    rng = np.random.default_rng(1)
    np.random.seed(1)
    images, labels = separable_mnist(300, rng)
    write_idx(tmp_path, images, labels)
    ds = data.MNISTDataset(str(tmp_path / "train-images-idx3-ubyte.gz"),
                           str(tmp_path / "train-labels-idx1-ubyte.gz"))
    loader = data.DataLoader(ds, 50, shuffle=True)
    model = apps.MLPResNet(784, 32, num_blocks=1)
    opt = optim.Adam(model.parameters(), lr=0.01)
    losses = [apps.epoch(loader, model, opt)[1] for _ in range(4)]
    assert losses[-1] < losses[0] * 0.5
    before = [p.numpy().copy() for p in model.parameters()]
    err, loss = apps.epoch(data.DataLoader(ds, 64), model)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)      # evaluation does not train
    model.eval()
    logits = model(ndl.Tensor(ds.images))
    recount = float((logits.numpy().argmax(1) != labels).mean())
    assert err == pytest.approx(recount)
    assert err < 0.2


def test_train_mnist_reads_needles_files(tmp_path):
    rng = np.random.default_rng(2)
    np.random.seed(2)
    write_idx(tmp_path, *separable_mnist(200, rng))
    out = apps.train_mnist(batch_size=50, epochs=3, optimizer=optim.Adam, lr=0.01,
                           weight_decay=0.0, hidden_dim=32, data_dir=str(tmp_path))
    train_err, train_loss, test_err, test_loss = out
    assert all(np.isfinite(v) for v in out)
    assert 0 <= train_err <= 1 and test_err < 0.5 and test_loss < 2.3


def test_cifar10_loops_with_resnet9():
    np.random.seed(3)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 3, 32, 32)).astype(np.float32)
    y = (x[:, 0, :16].mean((1, 2)) > 0).astype(np.uint8)   # a learnable label
    loader = data.DataLoader(data.NDArrayDataset(x, y), 8, shuffle=True)
    model = apps.ResNet9()
    acc, loss = apps.train_cifar10(model, loader, n_epochs=2, optimizer=optim.Adam, lr=0.001)
    assert 0 <= acc <= 1 and np.isfinite(loss)
    eacc, eloss = apps.evaluate_cifar10(model, data.DataLoader(data.NDArrayDataset(x, y), 8))
    model.eval()
    recount = float((model(ndl.Tensor(x)).numpy().argmax(1) == y).mean())
    assert eacc == pytest.approx(recount)


@pytest.mark.parametrize("seq_model", ["rnn", "lstm"])
def test_ptb_loops_with_the_language_model(seq_model):
    np.random.seed(4)
    tokens = [i % 7 for i in range(400)]                   # a periodic text: learnable
    batches = data.batchify(tokens, 4)
    model = apps.LanguageModel(16, 7, 32, num_layers=1, seq_model=seq_model)
    acc0, loss0 = apps.evaluate_ptb(model, batches, seq_len=10)
    acc, loss = apps.train_ptb(model, batches, seq_len=10, n_epochs=3, optimizer=optim.Adam,
                               lr=0.01, clip=1.0)
    acc1, loss1 = apps.evaluate_ptb(model, batches, seq_len=10)
    assert loss1 < loss0 and acc1 > acc0 and acc1 > 0.5
