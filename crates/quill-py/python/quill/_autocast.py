"""``quill.autocast``: mixed precision as PyTorch's ``torch.autocast``, over the Rust guard.

Inside ``with quill.autocast("bf16"):`` matmul (and so ``nn.Linear``), convolution and
attention cast their float32 operands to bfloat16 and return bfloat16 (products accumulated in
float32), while softmax, log_softmax, logsumexp, sum, mean, exp / log, the norms and the losses
widen bfloat16 inputs to float32. Parameters stay float32 and their gradients arrive in float32
(the backward of a cast is the cast back). The state is per thread and nests; the Rust crate
holds it (``quill::autocast``), this class only enters and leaves its guard.
"""
import contextlib

from . import _native

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype"]

is_autocast_enabled = _native.is_autocast_enabled
get_autocast_dtype = _native.get_autocast_dtype


class autocast(contextlib.ContextDecorator):
    """Autocast the calling thread's ops to ``dtype`` ("bf16" / "bfloat16", or "f16" /
    "float16") inside a ``with`` block or a decorated function; ``enabled=False`` (or
    ``dtype=None``) turns autocast off inside an enclosing region. Any other dtype raises
    ValueError here."""

    def __init__(self, dtype="bf16", enabled=True):
        self._region = _native._Autocast(dtype, enabled)

    @property
    def dtype(self):
        """The dtype the region autocasts to ("bfloat16", "float16"), or None when off."""
        return self._region.dtype

    def __enter__(self):
        self._region.__enter__()
        return self

    def __exit__(self, *exc):
        return self._region.__exit__(*exc)
