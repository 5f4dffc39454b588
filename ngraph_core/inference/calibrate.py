"""Activation calibration (``calibrate_ranges``) and the accuracy report of a quantized model
(``quantization_report``); the weight quantization itself is ``quantize.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import Op
from ..transformers import make_transformer
from .model import CompiledModel, rows_to_input, split_item
from .quantize import QuantizationError

__all__ = ["QuantizationReport", "calibrate_ranges", "quantization_report"]


def calibrate_ranges(model: CompiledModel, operands: Sequence[Op], calibration: Iterable[Any]) -> dict[Op, float]:
    """The largest ``|value|`` each of ``operands`` (ops of the model's template graph) takes on the batches.

    Args:
        model: a float32 ``CompiledModel`` whose template graph holds ``operands``.
        operands: the tensors to measure.
        calibration: one array of samples batch first (as ``predict`` takes them), or an iterable of
            arrays in the input's axes order (any batch length) or of ``(x, y)`` pairs.

    Returns:
        operand -> max |value| over every calibration sample.

    Raises:
        QuantizationError: no calibration batch.

    Example:
        >>> ranges = calibrate_ranges(fp32_model, [hidden], train_set)
    """
    unique = list(dict.fromkeys(operands))
    roots = model.executable([*model.template_outputs, *unique])[len(model.template_outputs):]
    spec = model.inputs[0]
    peaks = dict.fromkeys(unique, 0.0)
    seen = 0
    if isinstance(calibration, np.ndarray):  # samples batch first, as predict takes them
        calibration = [rows_to_input(calibration, spec, "calibrate_ranges")]
    with make_transformer(model.backend) as t:
        run = t.computation(list(roots), *model.graph_inputs, mode="inference")
        for item in calibration:
            x, _ = split_item(item, "calibrate_ranges")
            x = np.asarray(x, dtype=spec.dtype)
            b = spec.batch_index or 0
            for start in range(0, x.shape[b], model.batch_size):
                chunk = np.take(x, np.arange(start, min(start + model.batch_size, x.shape[b])), axis=b)
                if chunk.shape[b] < model.batch_size:  # pad with copies of the batch's rows (zeros skew no max)
                    pad = [(0, 0)] * chunk.ndim
                    pad[b] = (0, model.batch_size - chunk.shape[b])
                    chunk = np.pad(chunk, pad, mode="edge")
                values = run(*model.order_inputs([chunk], {}))
                for op, value in zip(unique, values, strict=True):
                    peaks[op] = max(peaks[op], float(np.max(np.abs(value))))
                seen += 1
    if not seen:
        raise QuantizationError("calibrate_ranges: the calibration data yielded no batch; hint: pass a few "
                                "batches of representative inputs (e.g. the training set)")
    return peaks


@dataclass(frozen=True)
class QuantizationReport:
    """Accuracy and size of a quantized model against its float32 reference.

    Attributes:
        precision: the quantized model's precision.
        reference_accuracy: the float32 model's top-1 accuracy.
        accuracy: the quantized model's.
        accuracy_drop: ``reference_accuracy - accuracy`` (fraction; 0.01 is one point).
        reference_bytes, weight_bytes: stored weight bytes of each.
    """

    precision: str
    reference_accuracy: float
    accuracy: float
    accuracy_drop: float
    reference_bytes: int
    weight_bytes: int

    @property
    def size_ratio(self) -> float:
        return self.weight_bytes / max(self.reference_bytes, 1)

    def __str__(self) -> str:
        return (f"{self.precision}: accuracy {100 * self.accuracy:.2f}% vs fp32 {100 * self.reference_accuracy:.2f}% "
                f"(drop {100 * self.accuracy_drop:.2f} points); weights {self.weight_bytes} B = "
                f"{self.size_ratio:.2f} x fp32")


def quantization_report(reference: CompiledModel, quantized: CompiledModel,
                        dataset: Iterable[Any]) -> QuantizationReport:
    """Top-1 accuracy of both models on labelled ``dataset``, the drop, and the weights' sizes.

    Args:
        reference: the float32 compiled model.
        quantized: the same model at lower precision.
        dataset: ``(x, y)`` batches (a neon ``ArrayIterator``).

    Returns:
        a ``QuantizationReport``.

    Example:
        >>> print(quantization_report(fp32, int8, test_set))
        int8: accuracy 96.70% vs fp32 96.80% (drop 0.10 points); weights 104074 B = 0.25 x fp32
    """
    items = list(dataset)
    ref, acc = reference.evaluate(items), quantized.evaluate(items)
    return QuantizationReport(quantized.precision, ref, acc, ref - acc, reference.weight_bytes, quantized.weight_bytes)
