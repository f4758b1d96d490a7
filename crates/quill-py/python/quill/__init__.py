"""quill for Python: needle's API (``import quill as ndl``) over quill's Rust core.

``quill.backend_ndarray`` is the strided NDArray level; ``quill.Tensor`` with ``quill.ops``,
``quill.nn``, ``quill.init``, ``quill.optim``, ``quill.data`` and ``quill.models`` is the
autograd level. Every op runs in Rust; the Python here only arranges needle's names around it.
"""
from . import _native
from . import _optable  # per-op methods of NDArray and Tensor, before anything uses them
from ._native import InternalError, Tensor, cpu, cuda, default_device, from_dlpack
from ._native import fused_kernel, fused_ops, host_round_trips, reset_host_round_trips, supported_ops, supports
from ._autocast import autocast, get_autocast_dtype, is_autocast_enabled
from . import backend_ndarray
from . import autograd
from . import ops
from .ops import *  # noqa: F401,F403 - needle exposes its ops at the top level
from . import init
from . import nn
from . import optim
from . import data
from . import models
from . import apps
from . import infer
from . import array_api

__all__ = [
    "InternalError", "Tensor", "cpu", "cuda", "default_device", "from_dlpack",
    "host_round_trips", "reset_host_round_trips", "supports", "supported_ops", "fused_ops", "fused_kernel", "backend_ndarray", "autograd", "ops", "init",
    "nn", "optim", "data", "models", "apps", "array_api",
    "autocast", "is_autocast_enabled", "get_autocast_dtype",
]
