"""``compile_for_inference``: a trained graph frozen, folded, quantized and planned for serving.

The steps, in order:

1. **Read the source**: a neon ``Model`` (through its ``__ngraph_inference__(batch_size)``
   hook, so ``ngraph_core`` never imports ``neon``), ``(inputs, outputs)`` ops with
   ``weights=``, or a graph document from ``ng.serialize``.
2. **Drop training-only ops**: ``stop_gradient`` is removed (dropout is already the identity
   in an inference-mode graph); a graph with an ``assign`` is refused. (Steps 1, 2, 4 and the
   graph half of 5 live in ``freeze.py``.)
3. **Fold batch norm** (``passes/bn_fold.py``) while the weights are still variables.
4. **Freeze**: every array the graph computes from weights alone (a BN-scaled filter, a
   folded bias, a transposed weight) is evaluated once and becomes a *weight slot*; the
   compiled graph then holds only placeholders, slots and scalar constants.
5. **Quantize** the slots that are the weight operand of a ``dot``/``conv`` (``quantize.py``),
   and for INT8 insert quantize-dequantize of those ops' activations at calibrated ranges.
6. **Compile**: the slots become constants of their (dequantized) values and the graph goes
   through the transformer's ``inference`` pipeline (simplify, fold, fuse, memory plan).

``CompiledModel`` and its ``Executor`` (threads, the default executor) are in ``model.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..ir import Op
from ..passes.bn_fold import fold_batch_norm
from .calibrate import calibrate_ranges
from .freeze import (
    InferenceError,
    check_graph,
    drop_training_ops,
    freeze,
    insert_activation_qdq,
    read_source,
    weight_uses,
)
from .model import CompiledModel, Executor, TensorSpec, split_item
from .quantize import PRECISIONS, quantize_weight

__all__ = ["CompiledModel", "Executor", "InferenceError", "TensorSpec", "compile_for_inference"]

def compile_for_inference(source: Any, *, precision: str = "fp32", calibration: Iterable[Any] | None = None,
                          batch_size: int = 1, backend: str = "numpy", weights: Mapping[Op, Any] | None = None,
                          validation: Iterable[Any] | None = None) -> CompiledModel:
    """Compile a trained model or graph for serving, optionally quantized.

    Args:
        source: a neon ``Model`` (built or trained), an ``(inputs, outputs)`` pair of ops, or a
            graph document from ``ng.serialize`` (its placeholders are the inputs, its other
            roots the outputs).
        precision: ``"fp32"``; ``"fp16"`` (dot/conv weights stored in float16); ``"int8"``
            (dot/conv weights per-output-channel symmetric int8, ``scale = max|w| / 127``, and
            their activations quantize-dequantized at ranges calibrated on ``calibration``).
        calibration: INT8 activation ranges are measured on it: one array of samples, batch first
            like ``predict``'s (``X_train[:512]``), or an iterable of batches — arrays in the
            input's axes order, or ``(x, y)`` pairs (a neon ``ArrayIterator``); with labels, the
            accuracy drop is measured.
        batch_size: the batch length of the compiled graph (``predict`` pads to it).
        backend: the transformer backend (``"numpy"`` or ``"cupy"``).
        weights: variable -> value, for an ops or document source (a variable not given keeps
            its initial value).
        validation: labelled ``(x, y)`` batches to measure ``accuracy_drop`` on (default: the
            calibration data, when it has labels).

    Returns:
        a ``CompiledModel``.

    Raises:
        InferenceError: an unknown precision, INT8 without calibration data, a source of the
            wrong kind, or a graph that writes variables.

    Example:
        >>> compiled = compile_for_inference(model, precision="int8", calibration=train_set, batch_size=32)
        >>> compiled.accuracy_drop
        0.002
    """
    if precision not in PRECISIONS:
        raise InferenceError(f"compile_for_inference: expected precision in {PRECISIONS}, received {precision!r}")
    if int(batch_size) < 1:
        raise InferenceError(f"compile_for_inference: expected batch_size >= 1, received {batch_size}")
    if precision == "int8" and calibration is None:
        raise InferenceError("compile_for_inference: precision='int8' needs calibration data for the activation "
                             "ranges, received calibration=None; hint: pass calibration=train_set (a few batches)")
    if calibration is not None and not isinstance(calibration, np.ndarray):  # an array: samples, batch first
        calibration = list(calibration)
    inputs, outputs, values = read_source(source, weights, int(batch_size))
    check_graph(inputs, outputs)
    outputs = drop_training_ops(outputs)
    outputs = fold_batch_norm(outputs)
    outputs, slot_values = freeze(outputs, values, backend)
    channels, data_uses = weight_uses(outputs, slot_values)
    stored = {slot: quantize_weight(value, precision if slot in channels else "fp32", channels.get(slot, ()))
              for slot, value in slot_values.items()}
    fp32 = CompiledModel(inputs, outputs, {s: quantize_weight(v, "fp32", ()) for s, v in slot_values.items()},
                         "fp32", batch_size, backend)
    scales: dict[Op, float] = {}
    if precision == "int8" and data_uses:
        operands = [op.src[i] for op, i in data_uses]
        ranges = calibrate_ranges(fp32, operands, calibration)
        qdq = {(op, i): ranges[op.src[i]] / 127.0 for op, i in data_uses if ranges[op.src[i]] > 0}
        outputs = insert_activation_qdq(outputs, qdq)
        scales = {op.src[i]: s for (op, i), s in qdq.items()}
    compiled = CompiledModel(inputs, outputs, stored, precision, batch_size, backend, scales)
    labelled = validation if validation is not None else calibration
    if precision != "fp32" and labelled is not None and not isinstance(labelled, np.ndarray):  # arrays: no labels
        items = list(labelled)
        if items and all(split_item(item, "compile_for_inference")[1] is not None for item in items):
            compiled.accuracy_drop = fp32.evaluate(items) - compiled.evaluate(items)
    return compiled
