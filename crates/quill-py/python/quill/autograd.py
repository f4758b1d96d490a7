"""needle's ``autograd``: the Tensor (quill's, with its graph and backward in Rust)."""
from ._native import Tensor, cpu, default_device

__all__ = ["Tensor", "cpu", "default_device"]
