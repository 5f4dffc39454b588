"""The CuPy transformer: the same plans and kernels on a GPU.

Importing this module never needs CuPy; constructing the transformer does, and
without CuPy or a GPU it raises ``BackendUnavailableError`` saying which.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, UnsupportedOpError
from ..ir import OpType
from .base import Transformer, register_transformer
from .kernels.fused import unblocked


def load_cupy() -> Any:
    """The cupy module, checked to see a GPU; raises ``BackendUnavailableError`` otherwise."""
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError as exc:
        raise BackendUnavailableError(
            f"cupy transformer: CuPy is not installed ({exc}); hint: pip install cupy-cuda12x on a machine "
            "with an NVIDIA GPU, or use make_transformer('numpy')"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA raises its own error types when no driver is present
        raise BackendUnavailableError(
            f"cupy transformer: no usable GPU ({exc}); hint: use make_transformer('numpy')"
        ) from None
    if count == 0:
        raise BackendUnavailableError("cupy transformer: no GPU found; hint: use make_transformer('numpy')")
    return cupy


class CupyTransformer(Transformer):
    """Runs compiled plans with CuPy on the current GPU; results come back as NumPy arrays."""

    name = "cupy"
    # a GPU has no cache hierarchy worth blocking for: evaluate fused programs on whole arrays
    kernel_overrides = {OpType.FUSED: unblocked}

    def __init__(self, **options: Any) -> None:
        self.xp = load_cupy()
        super().__init__(**options)

    def to_numpy(self, value: Any) -> np.ndarray:
        return value.get() if hasattr(value, "get") else np.asarray(value)

    def _generator_state(self, gen: Any) -> Any:
        # CuPy's generators (XORWOW on the device) expose no state to save: say so instead of
        # writing a checkpoint that would not resume exactly
        raise UnsupportedOpError(
            "cupy transformer: random_state is not supported (CuPy's device generators expose no state); "
            "hint: resume on the numpy backend for bit-exact random streams, or accept fresh streams"
        )


register_transformer("cupy", CupyTransformer)
