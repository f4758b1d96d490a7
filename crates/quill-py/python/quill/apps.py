"""needle's ``apps`` (``mlp_resnet.py``, ``models.py``, ``simple_ml.py``): the course's models
and training loops, importable as ``quill.apps``, over quill's nn, optim and data (each layer,
loss and optimizer step runs in Rust).

- ``parse_mnist``, ``softmax_loss``, ``nn_epoch``, ``loss_err``: hw1's two-layer network
  trained by hand (Tensor ops, ``backward``, an SGD step on the weights' values).
- ``ResidualBlock``, ``MLPResNet``, ``epoch``, ``train_mnist``: hw2's MLP ResNet on MNIST.
- ``ResNet9``, ``LanguageModel`` (from ``quill.models``), ``epoch_general_cifar10``,
  ``train_cifar10``, ``evaluate_cifar10``, ``epoch_general_ptb``, ``train_ptb``,
  ``evaluate_ptb``: hw4's CIFAR-10 and Penn Treebank loops.

Error rates and losses are averaged per sample, as needle's are. Each training or evaluation
loop (``epoch``, ``train_mnist`` and the hw4 loops) first seeds NumPy's global RNG with 4, as
the course's skeletons do, so that seeded needle code reproduces needle's published numbers
(dropout masks, shuffles); ``seed=None`` leaves the RNG alone."""
import functools
import os

import numpy as np

from . import data, nn, ops, optim
from ._native import Tensor, clip_grad_norm
from .data import parse_mnist
from .models import LanguageModel, ResNet9

__all__ = [
    "parse_mnist", "softmax_loss", "nn_epoch", "loss_err", "ResidualBlock", "MLPResNet", "epoch", "train_mnist", "ResNet9", "LanguageModel",
    "epoch_general_cifar10", "train_cifar10", "evaluate_cifar10", "epoch_general_ptb",
    "train_ptb", "evaluate_ptb",
]


def softmax_loss(Z, y_one_hot):
    """Mean softmax cross-entropy of logits ``Z`` (batch, classes) against one-hot
    ``y_one_hot`` (same shape): ``mean(logsumexp(Z) - sum(Z * y))``, a Tensor (hw1's)."""
    batch = Z.shape[0]
    return (ops.logsumexp(Z, axes=(1,)).sum() - (Z * y_one_hot).sum()) / batch


def nn_epoch(X, y, W1, W2, lr=0.1, batch=100):
    """One epoch of minibatch SGD, in order, for ``logits = ReLU(X @ W1) @ W2`` (hw1's
    two-layer network without biases): ``X`` (n, d) and ``y`` (n,) NumPy arrays, ``W1``,
    ``W2`` Tensors. Returns the new ``(W1, W2)``, fresh leaf Tensors of the same dtypes."""
    X = np.asarray(X)
    y = np.asarray(y).reshape(-1)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"nn_epoch: X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    if batch < 1:
        raise ValueError(f"nn_epoch: batch must be >= 1, got {batch}")
    k = W2.shape[1]
    for start in range(0, X.shape[0], batch):
        xb, yb = X[start:start + batch], y[start:start + batch]
        onehot = np.zeros((yb.shape[0], k), dtype=X.dtype)
        onehot[np.arange(yb.shape[0]), yb] = 1
        loss = softmax_loss(ops.relu(Tensor(xb) @ W1) @ W2, Tensor(onehot))
        loss.backward()
        W1 = Tensor((W1 - lr * W1.grad).realize_cached_data())
        W2 = Tensor((W2 - lr * W2.grad).realize_cached_data())
    return W1, W2


def loss_err(h, y):
    """``(softmax loss, error rate)`` of logits ``h`` (a Tensor) against labels ``y`` (a
    NumPy array), as NumPy values."""
    y = np.asarray(y).reshape(-1)
    onehot = np.zeros((y.shape[0], h.shape[-1]), dtype=np.float32)
    onehot[np.arange(y.size), y] = 1
    return softmax_loss(h, Tensor(onehot)).numpy(), np.mean(h.numpy().argmax(axis=1) != y)


def _needle_seeded(f):
    """Runs ``f`` after ``np.random.seed(seed)``, ``seed=4`` unless given (None: no seeding),
    as needle's skeleton functions begin."""

    @functools.wraps(f)
    def run(*args, seed=4, **kwargs):
        if seed is not None:
            np.random.seed(seed)
        return f(*args, **kwargs)

    return run


def ResidualBlock(dim, hidden_dim, norm=nn.BatchNorm1d, drop_prob=0.1):
    """``ReLU(x + norm(Linear(Dropout(ReLU(norm(Linear(x)))))))`` (needle's hw2 block)."""
    return nn.Sequential(
        nn.Residual(nn.Sequential(
            nn.Linear(dim, hidden_dim),
            norm(hidden_dim),
            nn.ReLU(),
            nn.Dropout(drop_prob),
            nn.Linear(hidden_dim, dim),
            norm(dim),
        )),
        nn.ReLU(),
    )


def MLPResNet(dim, hidden_dim=100, num_blocks=3, num_classes=10, norm=nn.BatchNorm1d,
              drop_prob=0.1):
    """``Linear(dim, hidden) -> ReLU -> num_blocks x ResidualBlock(hidden, hidden // 2) ->
    Linear(hidden, num_classes)`` (needle's hw2 model)."""
    return nn.Sequential(
        nn.Linear(dim, hidden_dim),
        nn.ReLU(),
        *[ResidualBlock(hidden_dim, hidden_dim // 2, norm, drop_prob) for _ in range(num_blocks)],
        nn.Linear(hidden_dim, num_classes),
    )


def _labels(y):
    return y.numpy().astype(np.int64).reshape(-1)


def _detach_state(h):
    if h is None:
        return None
    if isinstance(h, tuple):
        return tuple(t.detach() for t in h)
    return h.detach()


def _run(batches, model, loss_fn, opt=None, clip=None, flatten=False, state=False):
    """The loop every needle app shares: trains when ``opt`` is given (``model.train()``),
    else evaluates (``model.eval()``). ``flatten`` reshapes images to (N, -1); ``state``
    carries a recurrent state across batches, detached (truncated backpropagation); ``clip``
    bounds the gradients' global norm (quill's Rust ``clip_grad_norm``). Returns
    ``(errors, correct, loss summed over samples, samples)``."""
    model.train() if opt is not None else model.eval()
    correct = n = 0
    loss_sum, h = 0.0, None
    for x, y in batches:
        if flatten:
            x = x.reshape((x.shape[0], -1))
        if state:
            logits, h = model(x, h)
            h = _detach_state(h)
        else:
            logits = model(x)
        loss = loss_fn(logits, y)
        if opt is not None:
            opt.reset_grad()
            loss.backward()
            if clip is not None:
                clip_grad_norm(model.parameters(), clip)
            opt.step()
        b = y.shape[0]
        correct += int((logits.numpy().argmax(1) == _labels(y)).sum())
        loss_sum += float(loss.numpy()) * b
        n += b
    return n - correct, correct, loss_sum, n


@_needle_seeded
def epoch(dataloader, model, opt=None):
    """One pass over ``dataloader``: trains when ``opt`` is given (``model.train()``), else
    evaluates (``model.eval()``). Returns ``(error rate, mean loss)`` per sample."""
    errors, _, loss_sum, n = _run(dataloader, model, nn.SoftmaxLoss(), opt, flatten=True)
    return errors / max(n, 1), loss_sum / max(n, 1)


@_needle_seeded
def train_mnist(batch_size=100, epochs=10, optimizer=optim.Adam, lr=0.001, weight_decay=0.001,
                hidden_dim=100, data_dir="data"):
    """Trains ``MLPResNet(784, hidden_dim)`` on MNIST in ``data_dir`` (needle's file names,
    read by quill's Rust reader) and returns ``(train error, train loss, test error, test
    loss)`` of the last epoch."""
    path = lambda name: os.path.join(data_dir, name)  # noqa: E731
    train = data.MNISTDataset(path("train-images-idx3-ubyte.gz"),
                              path("train-labels-idx1-ubyte.gz"))
    test = data.MNISTDataset(path("t10k-images-idx3-ubyte.gz"),
                             path("t10k-labels-idx1-ubyte.gz"))
    train_loader = data.DataLoader(train, batch_size, shuffle=True)
    test_loader = data.DataLoader(test, batch_size)
    model = MLPResNet(784, hidden_dim)
    opt = optimizer(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        train_err, train_loss = epoch(train_loader, model, opt)
    test_err, test_loss = epoch(test_loader, model)
    return train_err, train_loss, test_err, test_loss


@_needle_seeded
def epoch_general_cifar10(dataloader, model, loss_fn=nn.SoftmaxLoss, opt=None):
    """One pass of image classification (NCHW batches): ``(accuracy, mean loss)``."""
    _, correct, loss_sum, n = _run(dataloader, model, loss_fn(), opt)
    return correct / max(n, 1), loss_sum / max(n, 1)


@_needle_seeded
def train_cifar10(model, dataloader, n_epochs=1, optimizer=optim.Adam, lr=0.001,
                  weight_decay=0.001, loss_fn=nn.SoftmaxLoss):
    """Trains ``model`` for ``n_epochs``; returns the last epoch's ``(accuracy, loss)``."""
    opt = optimizer(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(n_epochs):
        acc, loss = epoch_general_cifar10(dataloader, model, loss_fn, opt)
    return acc, loss


@_needle_seeded
def evaluate_cifar10(model, dataloader, loss_fn=nn.SoftmaxLoss):
    """``(accuracy, mean loss)`` of ``model`` over ``dataloader``, without training."""
    return epoch_general_cifar10(dataloader, model, loss_fn)


@_needle_seeded
def epoch_general_ptb(data_batches, model, seq_len=40, loss_fn=nn.SoftmaxLoss, opt=None,
                      clip=None, device=None, dtype="float32"):
    """One pass of language modelling over ``data_batches`` (``batchify``'s (nbatch, bs)
    ids), windows of ``seq_len``, the state carried and detached between windows. Returns
    ``(accuracy, mean loss)`` per token."""
    windows = (data.get_batch(data_batches, i, seq_len, device=device, dtype=dtype)
               for i in range(0, data_batches.shape[0] - 1, seq_len))
    _, correct, loss_sum, n = _run(windows, model, loss_fn(), opt, clip=clip, state=True)
    return correct / max(n, 1), loss_sum / max(n, 1)


@_needle_seeded
def train_ptb(model, data_batches, seq_len=40, n_epochs=1, optimizer=optim.SGD, lr=4.0,
              weight_decay=0.0, loss_fn=nn.SoftmaxLoss, clip=None, device=None,
              dtype="float32"):
    """Trains the language model for ``n_epochs``; returns the last ``(accuracy, loss)``."""
    opt = optimizer(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(n_epochs):
        acc, loss = epoch_general_ptb(data_batches, model, seq_len, loss_fn, opt, clip, device,
                                      dtype)
    return acc, loss


@_needle_seeded
def evaluate_ptb(model, data_batches, seq_len=40, loss_fn=nn.SoftmaxLoss, device=None,
                 dtype="float32"):
    """``(accuracy, mean loss)`` of the language model over ``data_batches``."""
    return epoch_general_ptb(data_batches, model, seq_len, loss_fn, None, None, device, dtype)

