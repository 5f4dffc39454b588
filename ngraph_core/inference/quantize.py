"""Weight quantization (FP16, INT8 per output channel); calibration and the report are in ``calibrate.py``.

* **FP16**: a ``dot``/``conv`` weight is stored as float16 (half the bytes); it computes as
  the float32 value of that float16.
* **INT8**: a weight is stored as int8 with one float32 scale per output channel,
  ``scale = max|w| / 127`` over the channel (symmetric, zero point 0), so
  ``|w - q * scale| <= scale / 2`` element-wise. The output channels of a ``conv`` filter
  ``[Ci, *k, K]`` are ``K``; those of a ``dot`` weight are its axes the data does not share.
  The data operand of each such op is quantize-dequantized per tensor at a range calibrated
  on sample batches (``calibrate_ranges``: the largest ``|x|`` seen), so the activations carry
  the error an INT8 kernel would see.

NumPy has no INT8 or FP16 matrix multiply, so every op computes in float32 after
dequantization: the stored weights (and the deployed file) are 2x / 4x smaller and the
accuracy effect is real, the speed is float32's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import api
from ..errors import NgraphError
from ..ir import Op

__all__ = ["PRECISIONS", "QuantizationError", "QuantizedWeight", "quantize_dequantize", "quantize_weight"]

PRECISIONS = ("fp32", "fp16", "int8")
STORAGE = {"fp32": "float32", "fp16": "float16", "int8": "int8"}
INT8_MAX = 127


class QuantizationError(NgraphError, ValueError):
    """A weight or a calibration set cannot be quantized as asked."""


@dataclass(frozen=True, eq=False)
class QuantizedWeight:
    """A weight as stored: ``data`` in its storage dtype, and INT8's per-channel ``scale``.

    Attributes:
        data: float32, float16 or int8 array of the weight's shape.
        scale: for int8, float32 scales shaped to broadcast against ``data`` (size 1 on the
            non-channel axes); None otherwise.
        precision: ``"fp32"``, ``"fp16"`` or ``"int8"``.
    """

    data: np.ndarray
    scale: np.ndarray | None
    precision: str

    def dequantize(self) -> np.ndarray:
        """The float32 values the graph computes with.

        Example:
            >>> quantize_weight(w, "int8", (1,)).dequantize()  # w within scale/2
        """
        if self.scale is None:
            return self.data.astype(np.float32)
        return (self.data.astype(np.float32) * self.scale).astype(np.float32)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes + (0 if self.scale is None else self.scale.nbytes))


def quantize_weight(array: np.ndarray, precision: str, channel_axes: Sequence[int] = ()) -> QuantizedWeight:
    """Store ``array`` at ``precision``; INT8 scales per output channel (``channel_axes``).

    Args:
        array: the float weight.
        precision: ``"fp32"``, ``"fp16"`` or ``"int8"``.
        channel_axes: positions of the output-channel axes (INT8: one scale per index over
            them; empty: one scale for the whole tensor).

    Returns:
        a ``QuantizedWeight``.

    Raises:
        QuantizationError: an unknown precision, a non-float array, or a channel axis out of range.

    Example:
        >>> q = quantize_weight(np.array([[1.0, -0.5], [0.2, 0.1]]), "int8", (0,))
        >>> q.data.tolist(), q.scale.ravel().tolist()  # row 0: scale 1/127, row 1: 0.2/127
        ([[127, -64], [127, 64]], [0.007874..., 0.001574...])
    """
    if precision not in PRECISIONS:
        raise QuantizationError(f"quantize_weight: expected precision in {PRECISIONS}, received {precision!r}")
    array = np.asarray(array)
    if array.dtype.kind != "f":
        if precision != "fp32":
            raise QuantizationError(f"quantize_weight: expected a float weight, received dtype {array.dtype}; "
                                    "hint: only dot/conv weights are quantized")
        return QuantizedWeight(array.copy(), None, precision)
    if precision == "fp32":
        return QuantizedWeight(array.astype(np.float32), None, precision)
    if precision == "fp16":
        return QuantizedWeight(array.astype(np.float16), None, precision)
    bad = [a for a in channel_axes if not 0 <= a < array.ndim]
    if bad:
        raise QuantizationError(f"quantize_weight: channel axis {bad[0]} out of range for a weight of shape "
                                f"{array.shape}")
    reduce = tuple(i for i in range(array.ndim) if i not in set(channel_axes))
    peak = np.max(np.abs(array), axis=reduce, keepdims=True) if array.size else np.zeros((1,) * array.ndim)
    scale = np.where(peak > 0, peak / INT8_MAX, 1.0).astype(np.float32)  # an all-zero channel: any scale works
    q = np.clip(np.rint(array / scale), -INT8_MAX, INT8_MAX).astype(np.int8)
    return QuantizedWeight(q, scale, precision)


def quantize_dequantize(x: Op, scale: float) -> Op:
    """``x`` rounded to the INT8 grid of step ``scale`` (clipped to ``±127 * scale``), as float again.

    Rounding is half away from zero: ``cast(q + sign(q) / 2, int32)`` truncates toward zero.

    Args:
        x: a float tensor.
        scale: the quantization step (``range / 127``), > 0.

    Returns:
        an op of ``x``'s axes and dtype.

    Raises:
        QuantizationError: a scale that is not positive.

    Example:
        >>> y = quantize_dequantize(h, 0.05)  # values in {-6.35, ..., -0.05, 0, 0.05, ..., 6.35}
    """
    if not scale > 0:
        raise QuantizationError(f"quantize_dequantize: expected a positive scale, received {scale}; hint: a "
                                "tensor that was always zero in calibration needs no quantization")
    q = api.minimum(api.maximum(x * (1.0 / scale), -float(INT8_MAX)), float(INT8_MAX))
    rounded = api.cast(api.cast(q + api.sign(q) * 0.5, "int32"), x.dtype)
    return rounded * float(scale)
