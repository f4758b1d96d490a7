"""``quill.infer`` (generate, predict, evaluate from Python) on checkpoints written by
``quill train``: the text equals the CLI's ``quill generate`` for the same seed, digits drawn
here with NumPy (not from MNIST's files) are classified from an array and from a PNG written
here, and ``evaluate`` agrees with the CLI's ``--json`` result and with an accuracy counted
from ``predict``'s probabilities."""
import glob
import json
import os
import struct
import subprocess
import zlib

import numpy as np
import pytest

import quill
from quill import infer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SMALL_LM = ["--task", "lm", "--limit", "200", "--hidden", "64", "--embedding", "32",
            "--layers", "1", "--bptt", "32", "--batch-size", "16", "--schedule", "none"]


def _binary():
    """The `quill` binary: $QUILL_BIN, else the newest one built in target/, else built now."""
    if os.environ.get("QUILL_BIN"):
        return os.environ["QUILL_BIN"]
    # Files only: `cargo doc` makes a directory target/doc/quill.
    built = [p for p in glob.glob(os.path.join(ROOT, "target", "*", "quill"))
             if os.path.isfile(p) and os.access(p, os.X_OK)]
    if not built:
        subprocess.run(["cargo", "build", "-q", "--release", "-p", "quill-cli"], cwd=ROOT, check=True)
        return os.path.join(ROOT, "target", "release", "quill")
    return max(built, key=os.path.getmtime)


def _quill(*args):
    r = subprocess.run([_binary(), *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def lm_checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm")
    _quill(*SMALL_LM, "--epochs", "1", "--model", "lstm", "--out", str(out), "--quiet")
    return str(out / "checkpoint.safetensors")


@pytest.fixture(scope="module")
def mlp_checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp")
    _quill("--epochs", "1", "--limit", "10000", "--out", str(out), "--quiet")
    return str(out / "checkpoint.safetensors")


def test_generate_matches_the_cli(lm_checkpoint):
    text = infer.generate(lm_checkpoint, "In the", tokens=120, seed=3)
    cli = _quill("generate", "--checkpoint", lm_checkpoint, "--prompt", "In the", "--tokens",
                 "120", "--seed", "3")
    assert text + "\n" == cli
    assert text.startswith("In the") and len(text) == len("In the") + 120
    model = infer.load(lm_checkpoint)
    assert isinstance(model, infer.TextModel) and model.char_level
    assert set(text) <= set(model.vocabulary)
    # Streaming hands over the same text piece by piece; another seed gives other text.
    pieces = []
    assert model.generate("In the", 120, 0.8, 40, 3, pieces.append) == text
    assert "In the" + "".join(pieces) == text and len(pieces) == 120
    assert infer.generate(model, "In the", tokens=120, seed=4) != text
    # Top-k 1 is greedy: the seed no longer matters.
    assert infer.generate(model, "In", 40, top_k=1, seed=1) == infer.generate(model, "In", 40, top_k=1, seed=2)


def test_generate_refuses_bad_input(lm_checkpoint, mlp_checkpoint):
    def stop(piece):
        raise KeyError("enough")
    with pytest.raises(KeyError, match="enough"):
        infer.generate(lm_checkpoint, "In", tokens=50, stream=stop)
    with pytest.raises(ValueError, match="temperature"):
        infer.generate(lm_checkpoint, "In", temperature=0.0)
    with pytest.raises(ValueError, match="not in the model's vocabulary"):
        infer.generate(lm_checkpoint, "In \u2603")
    with pytest.raises(ValueError, match="not a language model|no 'task'"):
        infer.TextModel.load(mlp_checkpoint)
    with pytest.raises(ValueError, match="not of the image job"):
        infer.ImageClassifier.load(lm_checkpoint)
    with pytest.raises(ValueError, match="No such file|not found|os error"):
        infer.load(os.path.join(ROOT, "no-such-checkpoint.safetensors"))


def _canvas(ink, paper, on):
    """A 140 x 140 u8 picture: `ink` where on(y, x), `paper` elsewhere."""
    y, x = np.mgrid[0:140, 0:140].astype(np.float64)
    return np.where(on(y, x), ink, paper).astype(np.uint8)


def _one(y, x):
    return (y >= 25) & (y < 115) & (x >= 62) & (x < 78)


def _zero(y, x):
    r = np.hypot(y - 70, (x - 70) * 1.4)
    return (r > 30) & (r < 44)


def _write_png(path, grey):
    """A greyscale PNG by hand (signature, IHDR, one zlib IDAT, IEND): no imaging library."""
    h, w = grey.shape
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + grey[r].tobytes() for r in range(h))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def test_predict_digits_drawn_with_numpy(mlp_checkpoint, tmp_path):
    one = _canvas(0, 255, _one)          # a dark stroke on light paper
    zero = _canvas(255, 0, _zero)        # a light ring on black
    p = infer.predict(mlp_checkpoint, np.stack([one, zero]))
    assert p.shape == (2, 10) and p.dtype == np.float64
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-6)
    assert list(p.argmax(1)) == [1, 0], p
    # The same pictures as floats in [0, 1], one at a time, and as PNG files written here.
    model = infer.load(mlp_checkpoint)
    assert isinstance(model, infer.ImageClassifier)
    np.testing.assert_allclose(infer.predict(model, one / 255.0)[0], p[0], atol=1e-6)
    for k, pic in enumerate([one, zero]):
        path = tmp_path / f"digit{k}.png"
        _write_png(path, pic)
        np.testing.assert_allclose(infer.predict(model, str(path))[0], p[k], atol=1e-6)
    names, q = model.predict_file(str(tmp_path / "digit0.png"))
    assert names == [str(tmp_path / "digit0.png")] and q.shape == (1, 10)
    # A quill NDArray is read as well as a NumPy array.
    np.testing.assert_allclose(model.predict(quill.backend_ndarray.NDArray(one)), p[:1], atol=1e-6)
    # Bad pictures name the problem.
    with pytest.raises(ValueError, match="pictures must be"):
        model.predict(np.zeros((2, 3, 4, 5), np.uint8))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        model.predict(np.full((28, 28), 2.0, np.float32))
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(ValueError, match="bad.png"):
        infer.predict(model, str(bad))


def test_evaluate_agrees_with_the_cli_and_with_predict(mlp_checkpoint):
    data = os.path.join(ROOT, "data", "mnist")
    s = infer.evaluate(mlp_checkpoint, data)
    cli = json.loads(_quill("--json", "evaluate", "--checkpoint", mlp_checkpoint, "--data", data,
                            "--out", os.path.dirname(mlp_checkpoint)).strip().splitlines()[-1])
    assert s["samples"] == cli["samples"] == 10000
    assert s["correct"] == cli["correct"]
    assert s["confusion"].tolist() == cli["confusion"]
    np.testing.assert_allclose(s["per_class"], cli["per_class_accuracy"])
    assert s["confusion"].sum() == 10000 and np.trace(s["confusion"]) == s["correct"]
    assert 0.85 < s["accuracy"] == s["correct"] / 10000
    # Independently: predict's argmax over the raw test images (u8, as read by needle's
    # parse_mnist), counted here.
    x, y = quill.data.parse_mnist(os.path.join(data, "t10k-images-idx3-ubyte.gz"),
                                  os.path.join(data, "t10k-labels-idx1-ubyte.gz"))
    p = infer.predict(mlp_checkpoint, x.reshape(-1, 28, 28))
    assert (p.argmax(1) == y).sum() == s["correct"]
    idx, pred, conf = s["mistakes"][0]
    assert pred != y[idx] and conf == pytest.approx(p[idx].max(), abs=1e-6)
    assert [m[2] for m in s["mistakes"]] == sorted((m[2] for m in s["mistakes"]), reverse=True)
