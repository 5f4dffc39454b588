"""The CuPy transformer: the same compiled plans on an NVIDIA GPU.

``make_transformer("cupy")`` compiles exactly the plans the NumPy transformer compiles (the same
passes, memory plan and generated source); only the array module differs. Everything a plan
touches lives on the device: the arena of temporaries (one ``cupy.empty`` per computation, carved
into views by the memory plan), the variables (persistent device arrays), the kernels' scratch
workspace and the result buffers (CuPy's memory pool recycles them). Data crosses the bus only at a
computation's boundary: fed NumPy arrays are copied to the device once each call (device arrays
are used as they are), and results come back as NumPy arrays, or stay on the device with
``device_arrays=True``.

Kernels: the shared ``xp`` kernels run unchanged on CuPy (cuBLAS for ``dot`` and the im2col
convolution, CuPy's ufuncs and reductions for the rest; ``tests/.../cupy_surface.py`` keeps them
within CuPy's API on machines without a GPU). What differs is in ``kernel_overrides``: a fused
element-wise program is one generated ``cupy.ElementwiseKernel`` (``cuda_fused.py``) instead of one
launch per step, and CTC's recursions are CUDA kernels with a thread block per example
(``cuda_ctc.py``) instead of a Python loop over frames. Convolution: CuPy 14 removed its cuDNN
bindings (``cupy.cuda.cudnn`` and ``cupyx.cudnn`` are absent from CuPy 14.2 on the H100 machine,
2026-11-25), so convolutions and their gradients run as im2col + a cuBLAS GEMM, the shared
kernel's method.

Random ops draw from CuPy's device generators (``cupy.random.default_rng``): reproducible for a
seed, but a different stream from the NumPy transformer's, and their state cannot be saved
(``random_state`` raises ``UnsupportedOpError``; neon checkpoints then omit it).

Importing this module never needs CuPy; constructing the transformer does, and without CuPy, a
device or a recent enough driver it raises ``BackendUnavailableError`` saying which.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, UnsupportedOpError
from ..ir import Op, OpType, owns_buffer
from . import cuda_ctc, cuda_fused
from .base import Transformer, register_transformer

_NUMPY_HINT = "use make_transformer('numpy') (or backend='auto', which falls back to NumPy)"


def load_cupy() -> Any:
    """The cupy module, checked to see a usable GPU.

    Raises:
        BackendUnavailableError: CuPy is not installed, the CUDA driver is missing or older than
            CuPy's CUDA runtime needs, or no device is visible.
    """
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError as exc:
        raise BackendUnavailableError(
            f"cupy transformer: CuPy is not installed ({exc}); hint: pip install cupy-cuda13x (or the build "
            f"matching your CUDA) on a machine with an NVIDIA GPU, or {_NUMPY_HINT}"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA raises its own error types when no driver is present
        text = str(exc)
        if "InsufficientDriver" in text or "insufficient driver" in text.lower():
            raise BackendUnavailableError(
                f"cupy transformer: the NVIDIA driver is too old for this CuPy's CUDA runtime ({text}); hint: "
                f"update the driver or install the CuPy build for an older CUDA, or {_NUMPY_HINT}"
            ) from None
        raise BackendUnavailableError(
            f"cupy transformer: no usable GPU: the CUDA driver did not answer ({text}); hint: check nvidia-smi, "
            f"or {_NUMPY_HINT}"
        ) from None
    if count == 0:
        raise BackendUnavailableError(f"cupy transformer: CuPy sees no GPU (0 devices); hint: {_NUMPY_HINT}")
    return cupy


class CupyTransformer(Transformer):
    """Runs compiled plans with CuPy on the current GPU.

    Args:
        device_arrays: return results as CuPy device arrays (no copy to the host); default False:
            NumPy arrays, as the NumPy transformer returns.
        **options: the ``Transformer`` options (``float_dtype``, ``seed``, ``optimize``...).

    Raises:
        BackendUnavailableError: no CuPy, no GPU, or a driver too old (``load_cupy``).

    Example:
        >>> with make_transformer("cupy", device_arrays=True) as t:
        ...     y_dev = t.computation(y, x)(cupy.asarray(x_batch))  # stays on the GPU
    """

    name = "cupy"
    # one generated CUDA kernel per fused program (the shared kernel would launch once per step), and
    # CTC as three launches (the shared kernel launches a dozen per frame)
    kernel_overrides = {OpType.FUSED: cuda_fused.fused, OpType.CTC: cuda_ctc.ctc, OpType.CTC_GRAD: cuda_ctc.ctc_grad}

    def __init__(self, device_arrays: bool = False, **options: Any) -> None:
        self.xp = load_cupy()
        self.device_arrays = bool(device_arrays)
        super().__init__(**options)

    def to_numpy(self, value: Any) -> np.ndarray:
        return value.get() if hasattr(value, "get") else np.asarray(value)

    def _result(self, op: Op, on_device: bool = False) -> Any:
        if not self.device_arrays or on_device or op.op is OpType.DOALL:
            return super()._result(op, on_device)
        # a result's buffer is fresh each call (hand it over); views of the arena or of variables are copied
        return (lambda v: v) if owns_buffer(op) else self.xp.copy

    def _generator_state(self, gen: Any) -> Any:
        # CuPy's generators (XORWOW on the device) expose no state to save: say so instead of
        # writing a checkpoint that would not resume exactly
        raise UnsupportedOpError(
            "cupy transformer: random_state is not supported (CuPy's device generators expose no state); "
            "hint: resume on the numpy backend for bit-exact random streams, or accept fresh streams"
        )


register_transformer("cupy", CupyTransformer)
