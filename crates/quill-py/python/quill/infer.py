"""A trained checkpoint put to use from Python: the other half of ``quill train``.

- ``generate(checkpoint, prompt, ...)``: text from a language model of ``quill train --task
  lm``, streamed to ``stream`` as it is drawn when given.
- ``predict(checkpoint, pictures)``: class probabilities of pictures of digits (a NumPy array
  of one or many, u8 or floats in [0, 1], any size, either background; or the path of a PNG,
  JPEG or IDX file), resized and normalised as in training.
- ``evaluate(checkpoint, data="data/mnist")``: accuracy, per-class accuracy, the confusion
  matrix and the most confident mistakes on the MNIST-format test split.
- ``load(checkpoint)``: the ``TextModel`` or ``ImageClassifier`` itself, to reuse.

Each is a call into ``quill::infer`` in Rust, the code behind the CLI's ``quill generate``,
``quill evaluate`` and ``quill predict``: the same seed gives the same text in both."""
import os

from ._native import _infer

ImageClassifier = _infer.ImageClassifier
TextModel = _infer.TextModel

__all__ = ["ImageClassifier", "TextModel", "evaluate", "generate", "load", "predict"]


def load(checkpoint):
    """The model a checkpoint holds: a ``TextModel`` for a language model (metadata
    ``task = lm``), else an ``ImageClassifier``."""
    try:
        return TextModel.load(os.fspath(checkpoint))
    except ValueError as e:
        if "not a language model" not in str(e) and "no 'task'" not in str(e):
            raise
    return ImageClassifier.load(os.fspath(checkpoint))


def _model(checkpoint, kind):
    if isinstance(checkpoint, kind):
        return checkpoint
    return kind.load(os.fspath(checkpoint))


def generate(checkpoint, prompt="", tokens=200, temperature=0.8, top_k=40, seed=0, stream=None):
    """``prompt`` followed by ``tokens`` tokens sampled from the language model at
    ``checkpoint`` (a path or a loaded ``TextModel``): each drawn from the softmax of the logits
    over ``temperature`` (> 0), among the ``top_k`` most likely (0: all), with a generator
    seeded by ``seed``. ``stream(piece)`` is called with each piece as it comes."""
    return _model(checkpoint, TextModel).generate(prompt, tokens, temperature, top_k, seed,
                                                  stream)


def predict(checkpoint, pictures):
    """Class probabilities, a float64 NumPy array (n, classes), of ``pictures``: an array
    (h, w), (n, h, w) or (n, 1, h, w) of u8 pixels or floats in [0, 1], or the path of a PNG,
    JPEG or IDX file. ``checkpoint`` is a path or a loaded ``ImageClassifier``."""
    model = _model(checkpoint, ImageClassifier)
    if isinstance(pictures, (str, os.PathLike)):
        return model.predict_file(os.fspath(pictures))[1]
    return model.predict(pictures)


def evaluate(checkpoint, data="data/mnist"):
    """Scores the image classifier at ``checkpoint`` on the test split (``t10k-*``) of the
    MNIST-format directory ``data``: a dict of ``accuracy``, ``correct``, ``samples``,
    ``per_class``, ``confusion`` (rows the true class, columns the predicted one) and
    ``mistakes`` (the 16 most confident wrong answers as (index, predicted, probability))."""
    return _model(checkpoint, ImageClassifier).evaluate_split(os.fspath(data))
