"""quill.data against hostile and careless files (issue 48's reliability suite): CIFAR-10
batches are read by the Rust data-only unpickler, so a batch crafted to run a command (through
REDUCE, GLOBAL, STACK_GLOBAL, INST, OBJ, NEWOBJ or BUILD) is a ValueError naming the global and
a sentinel file proves nothing ran; deep nesting, cycles, truncation and huge declared lengths
are ValueErrors; labels outside 0..10 are refused in CIFAR-10 and MNIST; real NumPy batches
(empty and small, protocols 0-5) load with the values NumPy pickled; DataLoader sizes must be
>= 1."""
import builtins
import gzip
import os
import pickle
import pickletools
import struct
import subprocess

import numpy as np
import pytest

import quill as ndl
from quill.data import CIFAR10Dataset, DataLoader, MNISTDataset, NDArrayDataset

# The callables an attacker reaches for; the pickle names them by their module (`posix` for
# os.system on Linux; protocols <= 2 spell `builtins` as `__builtin__`).
DANGEROUS = [os.system, subprocess.call, subprocess.Popen, builtins.eval, builtins.exec,
             builtins.getattr]


def _first_global(payload):
    """The first global a pickle names, read by Python's own disassembler: the name the
    refusal must show (protocols <= 2 rename some, e.g. subprocess.call to commands.call)."""
    strings = []
    for op, arg, _ in pickletools.genops(payload):
        if op.name in ("GLOBAL", "INST"):
            return arg.replace(" ", ".")
        if op.name == "STACK_GLOBAL":
            return f"{strings[-2]}.{strings[-1]}"
        if isinstance(arg, str):
            strings.append(arg)
    raise AssertionError("no global in the pickle")


def _command(fn, sentinel):
    """Arguments that make ``fn`` create ``sentinel`` if it is ever called."""
    touch = f"import pathlib; pathlib.Path({str(sentinel)!r}).touch()"
    if fn in (os.system,):
        return (f"touch {sentinel}",)
    if fn in (subprocess.call, subprocess.Popen):
        return (["touch", str(sentinel)],)
    if fn is builtins.getattr:
        return ("text", "upper")
    return (touch,)


class _Evil:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def _write(folder, payload, name="data_batch_1"):
    (folder / name).write_bytes(payload)


def _load_error(folder, train=True):
    with pytest.raises(ValueError) as e:
        CIFAR10Dataset(str(folder), train=train)
    return str(e.value)


@pytest.mark.parametrize("protocol", range(0, 6))
@pytest.mark.parametrize("fn", DANGEROUS, ids=lambda f: f.__qualname__)
def test_reduce_of_a_code_running_global_is_refused_and_nothing_runs(tmp_path, fn, protocol):
    sentinel = tmp_path / "ran"
    batch = {"data": _Evil(fn, _command(fn, sentinel)), "labels": [1]}
    payload = pickle.dumps(batch, protocol=protocol)
    _write(tmp_path, payload)
    msg = _load_error(tmp_path)
    name = _first_global(payload)
    assert name.endswith(fn.__qualname__) and name in msg and "data_batch_1" in msg, msg
    assert not sentinel.exists()


def _opcode_variants(module, name, arg):
    """One pickle per opcode that can reach a global, written opcode by opcode."""
    m, n, a = module.encode(), name.encode(), arg.encode()
    short = lambda s: b"\x8c" + bytes([len(s)]) + s
    text = b"X" + struct.pack("<I", len(a)) + a
    glob = b"c" + m + b"\n" + n + b"\n"
    stack_glob = short(m) + short(n) + b"\x93"
    return {
        "GLOBAL": b"\x80\x02" + glob + b".",
        "GLOBAL+REDUCE": b"\x80\x02" + glob + text + b"\x85R.",
        "STACK_GLOBAL+REDUCE": b"\x80\x04" + stack_glob + text + b"\x85R.",
        "INST": b"(" + text + b"i" + m + b"\n" + n + b"\n.",
        "OBJ": b"(" + glob + text + b"o.",
        "NEWOBJ": b"\x80\x02" + glob + text + b"\x85\x81.",
        "NEWOBJ_EX": b"\x80\x04" + stack_glob + text + b"\x85}\x92.",
        "BUILD": b"\x80\x02" + glob + b"}b.",
    }


@pytest.mark.parametrize("module,name", [("os", "system"), ("posix", "system"),
                                         ("subprocess", "Popen"), ("builtins", "eval"),
                                         ("builtins", "exec"), ("__builtin__", "eval")])
def test_every_opcode_that_reaches_a_global_names_it(tmp_path, module, name):
    sentinel = tmp_path / "ran"
    for how, payload in _opcode_variants(module, name, f"touch {sentinel}").items():
        _write(tmp_path, payload)
        msg = _load_error(tmp_path)
        assert f"{module}.{name}" in msg and "refuse" in msg, (how, msg)
    assert not sentinel.exists()
    # Reference: Python's own pickle would run these.
    assert pickle.loads(b"cbuiltins\nlen\n(X\x02\x00\x00\x00abtR.") == 2


def test_build_on_a_non_array_and_objects_of_accepted_classes_are_refused(tmp_path):
    for payload, want in [
        (b"\x80\x02cnumpy\nndarray\n}b.", 'BUILD of a global "numpy.ndarray"'),
        (b"\x80\x02})b.", "BUILD of a dict"),
        (b"\x80\x02cnumpy\nndarray\n)\x81.", "NEWOBJ of numpy.ndarray refused"),
        (pickle.dumps(_Evil(len, ()), protocol=2), "__builtin__.len"),
        (pickle.dumps(_Evil, protocol=4), "_Evil"),
    ]:
        _write(tmp_path, payload)
        msg = _load_error(tmp_path)
        assert want in msg, msg


def test_deep_nesting_and_cycles_are_value_errors(tmp_path):
    deep_tuples = b"\x80\x02N" + b"\x85" * 1_000_000 + b"."
    deep_lists = b"\x80\x02" + b"]" * 200_000 + b"a" * 199_999 + b"."
    deep_dicts = b"\x80\x02}" + b"K\x00}" * 200_000 + b"s" * 200_000 + b"."
    for payload in (deep_tuples, deep_lists, deep_dicts):
        _write(tmp_path, payload)
        assert "deeper than 1000 levels" in _load_error(tmp_path)
    # L = [L] and d = {1: d}, as Python's pickler writes them (memo + APPEND / SETITEM).
    lst = []
    lst.append(lst)
    dct = {}
    dct[1] = dct
    for value in (lst, dct, {"data": lst}):
        for protocol in (2, 4, 5):
            _write(tmp_path, pickle.dumps(value, protocol=protocol))
            assert "cycle" in _load_error(tmp_path)


def _batch(n, seed=0, label_fn=int, order="C"):
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.integers(0, 256, size=(n, 3072), dtype=np.uint8), order=order)
    y = rng.integers(0, 10, size=n)
    # The batch label has latin-1 and non-latin-1 text (protocol 0 writes raw-unicode-escape).
    return x, y, {"data": x, "labels": [label_fn(v) for v in y], "batch_label": "caf\xe9 \u20ac"}


def test_truncated_files_and_huge_lengths_are_value_errors(tmp_path):
    _, _, batch = _batch(2)
    good = pickle.dumps(batch, protocol=4)
    for cut in list(range(0, 200, 7)) + [len(good) - 1, len(good) // 2]:
        _write(tmp_path, good[:cut])
        msg = _load_error(tmp_path)
        assert "data_batch_1" in msg, msg
    for payload in (b"\x80\x04\x8e" + b"\xff" * 7 + b"\x7f", b"\x80\x03B\xff\xff\xff\xff",
                    b"\x80\x05\x96" + b"\xff" * 8, b"\x80\x02\x8b\xff\xff\xff\xff\x01"):
        _write(tmp_path, payload)
        assert "truncated" in _load_error(tmp_path)


@pytest.mark.parametrize("bad", [99, -1, 10])
def test_cifar_labels_outside_0_to_10_are_refused(tmp_path, bad):
    x, y, batch = _batch(3)
    batch["labels"][1] = bad
    _write(tmp_path, pickle.dumps(batch, protocol=2))
    msg = _load_error(tmp_path)
    assert f"label {bad} at index 1" in msg and "data_batch_1" in msg, msg


@pytest.mark.parametrize("protocol", range(0, 6))
def test_real_numpy_batches_load_with_their_values(tmp_path, protocol):
    # An empty batch (protocol 2 writes its data through __builtin__.bytes()).
    empty = {"data": np.zeros((0, 3072), np.uint8), "labels": []}
    _write(tmp_path, pickle.dumps(empty, protocol=protocol), "test_batch")
    ds = CIFAR10Dataset(str(tmp_path), train=False)
    assert len(ds) == 0 and ds.X.shape == (0, 3, 32, 32) and ds.y.shape == (0,)
    # Small batches: str and bytes keys, NumPy-scalar labels, a Fortran-order array, an int64
    # label array; p scales the pixels as needle's CIFAR10Dataset does.
    xs, ys = [], []
    for i, (label_fn, order) in enumerate([(int, "C"), (np.int64, "F"), (int, "C")]):
        x, y, batch = _batch(4 + i, seed=i, label_fn=label_fn, order=order)
        if i == 1:
            batch = {k.encode(): v for k, v in batch.items()}
        if i == 2:
            batch["labels"] = np.asarray(y, dtype=np.int64)
        _write(tmp_path, pickle.dumps(batch, protocol=protocol), f"data_batch_{i + 1}")
        xs.append(x)
        ys.append(y)
    ds = CIFAR10Dataset(str(tmp_path), train=True, p=0.25)
    want_x = np.concatenate(xs).reshape(-1, 3, 32, 32).astype(np.float32) / 255.0 * 0.5
    np.testing.assert_array_equal(ds.X, want_x)
    np.testing.assert_array_equal(ds.y, np.concatenate(ys))
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.int64
    x7, y7 = ds[7]
    np.testing.assert_array_equal(x7, want_x[7])
    assert y7 == np.concatenate(ys)[7]


def _idx(dims, data):
    return struct.pack(">HBB", 0, 8, len(dims)) + struct.pack(f">{len(dims)}I", *dims) + bytes(data)


def test_mnist_reads_through_rust_and_refuses_label_200(tmp_path):
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    labels = np.array([0, 9, 3, 200, 1], dtype=np.uint8)
    img = tmp_path / "img.gz"
    with gzip.open(img, "wb") as f:
        f.write(_idx(pixels.shape, pixels.tobytes()))
    lab = tmp_path / "lab"
    lab.write_bytes(_idx(labels.shape, labels.tobytes()))
    with pytest.raises(ValueError, match="label 200 at index 3") as e:
        MNISTDataset(str(img), str(lab))
    assert str(lab) in str(e.value)
    labels[3] = 7
    lab.write_bytes(_idx(labels.shape, labels.tobytes()))
    ds = MNISTDataset(str(img), str(lab))
    np.testing.assert_array_equal(ds.images, pixels.reshape(5, 784).astype(np.float32) / 255.0)
    np.testing.assert_array_equal(ds.labels, labels)
    assert ds.labels.dtype == np.uint8 and len(ds) == 5
    with pytest.raises(FileNotFoundError):
        MNISTDataset(str(tmp_path / "missing"), str(lab))
    with pytest.raises(OSError, match="cannot read") as e:  # a directory opens but cannot be read
        MNISTDataset(str(tmp_path), str(lab))
    assert not isinstance(e.value, ValueError)
    lab.write_bytes(_idx((4,), labels[:4].tobytes()))
    with pytest.raises(ValueError, match="4 labels but"):
        MNISTDataset(str(img), str(lab))


@pytest.mark.parametrize("bad", [0, -1, -100])
def test_dataloader_batch_size_must_be_at_least_1(bad):
    ds = NDArrayDataset(np.zeros((5, 2), np.float32), np.zeros(5, np.int64))
    with pytest.raises(ValueError, match=f"batch_size must be at least 1, got {bad}"):
        DataLoader(ds, batch_size=bad)
    for wrong in (2.5, "4", True, None):
        with pytest.raises(TypeError, match="batch_size"):
            DataLoader(ds, batch_size=wrong)
    sizes = [b[0].shape[0] for b in DataLoader(ds, batch_size=np.int64(2))]
    assert sizes == [2, 2, 1]
    assert len(ndl.data.DataLoader(ds, batch_size=5)) == 1
