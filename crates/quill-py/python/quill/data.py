"""needle's ``data``: datasets, a batching DataLoader, MNIST (IDX files) and CIFAR-10 (pickled
batches) read by quill's Rust readers (no file is parsed, let alone unpickled, in Python), and
text corpora."""
import numbers

import numpy as np

from . import _native
from ._native import Tensor


class Transform:
    def __call__(self, x):
        raise NotImplementedError


class RandomFlipHorizontal(Transform):
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        """``img`` H x W x C NumPy array."""
        return img[:, ::-1, :] if np.random.rand() < self.p else img


class RandomCrop(Transform):
    def __init__(self, padding=3):
        self.padding = padding

    def __call__(self, img):
        p = self.padding
        dx, dy = np.random.randint(low=-p, high=p + 1, size=2)
        h, w = img.shape[0], img.shape[1]
        padded = np.pad(img, ((p, p), (p, p), (0, 0)))
        return padded[p + dx : p + dx + h, p + dy : p + dy + w, :]


class Dataset:
    def __init__(self, transforms=None):
        self.transforms = transforms

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def apply_transforms(self, x):
        for t in self.transforms or []:
            x = t(x)
        return x


class NDArrayDataset(Dataset):
    def __init__(self, *arrays):
        super().__init__()
        self.arrays = arrays

    def __len__(self):
        return self.arrays[0].shape[0]

    def __getitem__(self, i):
        return tuple(a[i] for a in self.arrays)


def parse_mnist(image_filename, label_filename):
    """Images as float32 in [0, 1], shape (N, rows * cols); labels as uint8 (N,), each < 10.
    The IDX files (raw or gzip) are parsed and checked by the Rust reader: a malformed file or
    a label >= 10 is a ValueError naming the file, a missing one a FileNotFoundError."""
    pixels, (n, rows, cols), labels = _native.read_mnist(str(image_filename), str(label_filename))
    x = np.frombuffer(pixels, dtype=np.uint8).reshape(n, rows * cols)
    return x.astype(np.float32) / 255.0, np.frombuffer(labels, dtype=np.uint8).copy()


class MNISTDataset(Dataset):
    def __init__(self, image_filename, label_filename, transforms=None):
        super().__init__(transforms)
        self.images, self.labels = parse_mnist(image_filename, label_filename)

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, index):
        """Image(s) as (28, 28, 1) height-width-channel arrays (a batch (n, 28, 28, 1) for a
        slice or index array), after the transforms, and the label(s): needle's hw2 shape,
        which its transforms (flip, crop) take. Models flatten them (``x.reshape((n, -1))``)."""
        x = self.images[index]
        if isinstance(index, numbers.Integral):
            x = x.reshape(28, 28, 1)
            if self.transforms:
                x = self.apply_transforms(x)
        else:
            x = x.reshape(-1, 28, 28, 1)
            if self.transforms:
                x = np.stack([self.apply_transforms(r) for r in x])
        return x, self.labels[index]


class DataLoader:
    """Batches of ``dataset`` as Tensors (shuffled each epoch with NumPy's RNG)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, device=None):
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
            raise TypeError(f"DataLoader: batch_size must be an int, got {batch_size!r}")
        if batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be at least 1, got {batch_size}")
        batch_size = int(batch_size)
        self.dataset, self.batch_size, self.shuffle, self.device = (
            dataset, batch_size, shuffle, device,
        )

    def __len__(self):
        return (len(self.dataset) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        order = np.arange(len(self.dataset))
        if self.shuffle:
            order = np.random.permutation(len(self.dataset))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            parts = self.dataset[idx]
            yield tuple(
                Tensor(np.asarray(p), device=self.device,
                       dtype=None if np.asarray(p).dtype.kind in "iub" else "float32",
                       requires_grad=False)
                for p in parts
            )


class CIFAR10Dataset(Dataset):
    """CIFAR-10's python-version batches (``data_batch_1`` .. ``_5`` or ``test_batch`` in
    ``base_folder``, each optionally gzipped). Images are float32 in [0, 1] of shape
    (3, 32, 32) (``p`` scales the pixel values, as needle's ``p``); labels int64 in 0..10.
    The batches are read by quill's data-only unpickler, which runs no code: a batch that
    names any global besides NumPy's array constructors, or holds a label outside 0..10, is a
    ValueError naming the file."""

    def __init__(self, base_folder, train, p=0.5, transforms=None):
        super().__init__(transforms)
        pixels, labels = _native.read_cifar10(str(base_folder), bool(train))
        x = np.frombuffer(pixels, dtype=np.uint8).reshape(-1, 3, 32, 32)
        self.X = (x.astype(np.float32) / 255.0) * (2 * p)
        self.y = np.frombuffer(labels, dtype="<i8").astype(np.int64)

    def __len__(self):
        return self.X.shape[0]

    def __getitem__(self, index):
        x = self.X[index]
        if self.transforms:
            if np.ndim(index) == 0:
                x = self.apply_transforms(x)
            else:
                x = np.stack([self.apply_transforms(r) for r in x])
        return x, self.y[index]


class Dictionary:
    """Token <-> id, ids handed out in first-seen order (needle's ``Dictionary``)."""

    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.word2idx[word] = len(self.idx2word)
            self.idx2word.append(word)
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    """needle's ``Corpus``: ``train.txt`` and ``test.txt`` (and ``valid.txt`` when present; each
    may be ``.gz``) in ``base_dir``, tokenised by whitespace with ``<eos>`` per line, or by
    character (``tokens="char"``, ``"\\n"`` per line); at most ``max_lines`` lines of each. Read
    and tokenised by quill's Rust reader (``quill::data::Corpus``), the one the CLI trains on."""

    def __init__(self, base_dir, max_lines=None, tokens="word"):
        if tokens not in ("word", "char"):
            raise ValueError(f"tokens must be 'word' or 'char', got {tokens!r}")
        self.tokens = tokens
        self.dictionary = Dictionary()
        words, self.train, self.valid, self.test = _native.read_corpus(
            str(base_dir), tokens, max_lines)
        for w in words:
            self.dictionary.add_word(w)

    def tokenize(self, path, max_lines=None):
        """The ids of the first ``max_lines`` lines of ``path``, adding new tokens to
        ``self.dictionary`` (quill's Rust tokenizer)."""
        ids, new = _native.tokenize_file(str(path), list(self.dictionary.idx2word),
                                         self.tokens, max_lines)
        for w in new:
            self.dictionary.add_word(w)
        return ids


def batchify(data, batch_size, device=None, dtype=None):
    """needle's ``batchify``: a (nbatch, batch_size) NumPy array whose column j is the j-th
    consecutive run of ``nbatch = len(data) // batch_size`` tokens (the rest dropped), made by
    quill's Rust ``batchify``."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise TypeError(f"batchify: batch_size must be an int, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    ids = _native.NDArray(np.asarray(data, dtype=np.int64).reshape(-1))
    out = _native.batchify(ids, int(batch_size)).numpy()
    return out if dtype is None else out.astype(dtype)


def get_batch(batches, i, bptt, device=None, dtype=None):
    """needle's ``get_batch``: rows ``i .. i+s`` as a Tensor (s, batch_size) and rows
    ``i+1 .. i+1+s`` flattened as the target, ``s = min(bptt, len(batches) - 1 - i)``."""
    if bptt < 1 or i + 1 >= len(batches):
        raise IndexError(f"no window at row {i} with bptt {bptt} in {len(batches)} rows")
    s = min(bptt, len(batches) - 1 - i)
    data = batches[i : i + s]
    target = batches[i + 1 : i + 1 + s].reshape(-1)
    as_t = lambda a: Tensor(np.ascontiguousarray(a), device=device, dtype=dtype, requires_grad=False)
    return as_t(data), as_t(target)
