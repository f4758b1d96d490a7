"""The models app a needle student writes, from quill.apps."""
from quill.apps import LanguageModel, ResNet9  # noqa: F401
