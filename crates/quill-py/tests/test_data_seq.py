"""needle's text and CIFAR-10 data API: Corpus / batchify / get_batch against direct index
arithmetic, and CIFAR10Dataset on batch files this test writes with pickle."""
import gzip
import pickle

import numpy as np
import pytest

import quill as ndl
from quill.data import CIFAR10Dataset, Corpus, Dictionary, batchify, get_batch


def test_dictionary_and_word_corpus(tmp_path):
    (tmp_path / "train.txt").write_text("the cat\nthe dog  sat\n")
    with gzip.open(tmp_path / "test.txt.gz", "wt") as f:
        f.write("a cat\nignored line\n")
    c = Corpus(str(tmp_path), max_lines=1)
    w = c.dictionary.word2idx
    assert c.train == [w["the"], w["cat"], w["<eos>"]]
    assert c.test == [w["a"], w["cat"], w["<eos>"]]
    assert c.valid == []
    full = Corpus(str(tmp_path))
    d = full.dictionary
    assert [d.idx2word[i] for i in full.train] == "the cat <eos> the dog sat <eos>".split()
    assert isinstance(d, Dictionary) and len(d) == len(set(d.idx2word))
    ch = Corpus(str(tmp_path), tokens="char")
    assert "".join(ch.dictionary.idx2word[i] for i in ch.train) == "the cat\nthe dog  sat\n"
    with pytest.raises(FileNotFoundError):
        Corpus(str(tmp_path / "missing"))
    with pytest.raises(ValueError):
        Corpus(str(tmp_path), tokens="bytes")


@pytest.mark.parametrize("bs", [1, 3, 8])
def test_batchify_and_get_batch(bs):
    data = [(i * 7) % 23 for i in range(101)]
    b = batchify(data, bs)
    n = len(data) // bs
    assert b.shape == (n, bs)
    for r in range(n):
        for j in range(bs):
            assert b[r, j] == data[j * n + r]
    for bptt in (1, 4, 50):
        for i in range(0, n - 1, bptt):
            x, y = get_batch(b, i, bptt)
            s = min(bptt, n - 1 - i)
            assert x.shape == (s, bs) and y.shape == (s * bs,)
            np.testing.assert_array_equal(x.numpy(), b[i : i + s])
            np.testing.assert_array_equal(y.numpy(), b[i + 1 : i + 1 + s].reshape(-1))
    with pytest.raises(IndexError):
        get_batch(b, n - 1, 4)
    with pytest.raises(ValueError):
        batchify(data[:2], 3)


def _write_batch(path, x, y, protocol, bytes_keys):
    k = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
    with open(path, "wb") as f:
        pickle.dump({k("data"): x, k("labels"): list(map(int, y)), k("batch_label"): "t"}, f,
                    protocol=protocol)


def test_cifar10_dataset_reads_pickled_batches(tmp_path):
    rng = np.random.default_rng(0)
    xs = [rng.integers(0, 256, size=(5, 3072), dtype=np.uint8) for _ in range(2)]
    ys = [rng.integers(0, 10, size=5) for _ in range(2)]
    _write_batch(tmp_path / "data_batch_1", xs[0], ys[0], 2, True)
    _write_batch(tmp_path / "data_batch_2", xs[1], ys[1], 4, False)
    _write_batch(tmp_path / "test_batch", xs[1][:3], ys[1][:3], 5, False)
    train = CIFAR10Dataset(str(tmp_path), train=True, p=0.5)
    assert len(train) == 10
    x, y = train[7]
    assert x.shape == (3, 32, 32) and x.dtype == np.float32
    np.testing.assert_allclose(x, xs[1][2].reshape(3, 32, 32) / 255.0, rtol=1e-6)
    assert y == ys[1][2]
    test = CIFAR10Dataset(str(tmp_path), train=False)
    assert len(test) == 3
    loader = ndl.data.DataLoader(train, batch_size=4)
    bx, by = next(iter(loader))
    assert bx.shape == (4, 3, 32, 32) and by.shape == (4,)
    with pytest.raises(FileNotFoundError):
        CIFAR10Dataset(str(tmp_path / "none"), train=True)


def test_corpus_tokenize_extends_the_dictionary_and_reports_bad_files(tmp_path):
    (tmp_path / "train.txt").write_text("a b\n")
    (tmp_path / "test.txt").write_text("b c\n")
    c = Corpus(str(tmp_path))
    before = list(c.dictionary.idx2word)
    (tmp_path / "more.txt").write_text("c d e\nf g\n")
    ids = c.tokenize(str(tmp_path / "more.txt"), max_lines=1)
    d = c.dictionary
    assert d.idx2word[:len(before)] == before
    assert [d.idx2word[i] for i in ids] == ["c", "d", "e", "<eos>"]
    assert len(d) == len(before) + 2 and d.word2idx["e"] == len(d) - 1
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(ValueError, match="line 2 is not UTF-8"):
        c.tokenize(str(tmp_path / "bad.txt"))
    with pytest.raises(FileNotFoundError):
        c.tokenize(str(tmp_path / "nope.txt"))
    with pytest.raises(ValueError, match="token ids must be >= 0"):
        batchify([1, -2, 3], 1)
