"""needle's ``data``: datasets, a batching DataLoader and MNIST from gzip IDX files."""
import gzip
import struct

import numpy as np

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


def _read_idx(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4:
        raise ValueError(f"{path}: {len(raw)} bytes is too short for an IDX header")
    zero, kind, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes (magic {raw[:4].hex()})")
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise ValueError(f"{path}: truncated IDX header")
    dims = struct.unpack(">" + "I" * ndim, raw[4:head])
    n = int(np.prod(dims))
    if len(raw) - head != n:
        raise ValueError(f"{path}: header says {dims} ({n} bytes) but {len(raw) - head} follow")
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(dims)


def parse_mnist(image_filename, label_filename):
    """Images as float32 in [0, 1], shape (N, 784); labels as uint8 (N,)."""
    x = _read_idx(image_filename)
    y = _read_idx(label_filename)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{x.shape[0]} images but {y.shape[0]} labels")
    return x.reshape(x.shape[0], -1).astype(np.float32) / 255.0, y


class MNISTDataset(Dataset):
    def __init__(self, image_filename, label_filename, transforms=None):
        super().__init__(transforms)
        self.images, self.labels = parse_mnist(image_filename, label_filename)

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, index):
        x = self.images[index]
        if self.transforms:
            if np.ndim(index) == 0:
                x = self.apply_transforms(x.reshape(28, 28, 1)).reshape(784)
            else:
                x = np.stack([self.apply_transforms(r.reshape(28, 28, 1)).reshape(784) for r in x])
        return x, self.labels[index]


class DataLoader:
    """Batches of ``dataset`` as Tensors (shuffled each epoch with NumPy's RNG)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, device=None):
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
