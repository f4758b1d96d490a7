"""The simple_ml app a needle student writes, from quill.apps."""
from quill.apps import *  # noqa: F401,F403
