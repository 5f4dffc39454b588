"""The graph steps of ``compile_for_inference``: read the source, drop training ops, freeze the weights
into slots, find the dot/conv weights and their data, insert INT8 activation quantize-dequantize.

*Freezing*: every array the graph computes from weights alone (a BN-scaled filter, a folded
bias, a transposed weight, a scalar variable) is evaluated once with the backend's kernels and
becomes a *weight slot*: a fresh variable of that shape, labelled ``weight_slot``, whose value
travels beside the graph. The frozen graph holds only placeholders, slots and scalar constants,
so what is stored (and quantized, and saved) is exactly what the plan reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import api
from ..errors import NgraphError
from ..ir import Op, OpType, rebuild, scope_override, substitute, toposort
from ..serialize import deserialize
from ..transformers import make_transformer
from .quantize import quantize_dequantize

__all__ = ["InferenceError", "drop_training_ops", "freeze", "insert_activation_qdq", "read_source", "check_graph",
           "substitute_all", "weight_uses"]

T = OpType
_VOLATILE = frozenset({T.PLACEHOLDER, T.UNIFORM, T.NORMAL})  # ops whose values change per call


class InferenceError(NgraphError, ValueError):
    """A model or graph cannot be compiled for inference, or a compiled model was fed wrongly."""


def substitute_all(roots: Sequence[Op], mapping: Mapping[Op, Op]) -> list[Op]:
    """``roots`` rebuilt with the ops of ``mapping`` replaced (``ir.substitute``; no mapping: unchanged).

    Example:
        >>> (y2,) = substitute_all([y], {w: ng.constant(value, w.axes)})
    """
    return substitute(list(roots), dict(mapping)) if mapping else list(roots)


def read_source(source: Any, weights: Mapping[Op, Any] | None,
                 batch_size: int) -> tuple[list[Op], list[Op], dict[Op, np.ndarray]]:
    """(placeholders, outputs, weights) of a neon model, an ``(inputs, outputs)`` pair or a graph document.

    Args:
        source: an object with ``__ngraph_inference__(batch_size)`` (a neon ``Model``), an
            ``(inputs, outputs)`` pair of ops, or ``ng.serialize`` text.
        weights: variable -> value for the last two kinds.
        batch_size: the batch length a neon model builds its graph for.

    Returns:
        ``(inputs, outputs, {variable: value})``.

    Raises:
        InferenceError: a source of another kind.
        SerializationError: a malformed graph document.

    Example:
        >>> inputs, outputs, values = read_source(model, None, 32)
    """
    if hasattr(source, "__ngraph_inference__"):
        inputs, outputs, values = source.__ngraph_inference__(batch_size)
        return list(inputs), list(outputs), dict(values)
    if isinstance(source, str):
        roots = deserialize(source)
        inputs = [op for op in toposort(roots) if op.op is T.PLACEHOLDER]
        outputs = [r for r in roots if r.op is not T.PLACEHOLDER and r.op is not T.VARIABLE]
        return inputs, outputs, dict(weights or {})
    if isinstance(source, (tuple, list)) and len(source) == 2:
        inputs, outputs = source
        inputs = [inputs] if isinstance(inputs, Op) else list(inputs)
        outputs = [outputs] if isinstance(outputs, Op) else list(outputs)
        if all(isinstance(o, Op) for o in [*inputs, *outputs]):
            return inputs, outputs, dict(weights or {})
    raise InferenceError(f"compile_for_inference: expected a neon Model, an (inputs, outputs) pair of ops or a "
                         f"graph document from ng.serialize, received {type(source).__name__}; hint: "
                         f"compile_for_inference(model) or compile_for_inference(([x], [y]), weights={{W: array}})")


def check_graph(inputs: Sequence[Op], outputs: Sequence[Op]) -> None:
    """Refuse graphs that cannot serve: no output, inputs that are not placeholders, an ``assign``
    (a training step), or an output reading a placeholder that is not an input.

    Raises:
        InferenceError: naming the offending op, with a hint.

    Example:
        >>> check_graph([x], [y])
    """
    if not outputs:
        raise InferenceError("compile_for_inference: expected at least one output op, received none")
    bad = [p for p in inputs if p.op is not T.PLACEHOLDER]
    if bad:
        raise InferenceError(f"compile_for_inference: inputs must be placeholders, received {bad[0].op.value} "
                             f"{bad[0].name}; hint: pass the placeholders the outputs are computed from")
    order = toposort(outputs)
    writes = [op for op in order if op.op is T.ASSIGN]
    if writes:
        raise InferenceError(f"compile_for_inference: the graph writes variables ({writes[0].name}), an inference "
                             "graph must not; hint: build the outputs in inference mode (training_mode(False))")
    given = set(inputs)
    needed = [op for op in order if op.op is T.PLACEHOLDER and op not in given]
    if needed:
        raise InferenceError(f"compile_for_inference: the outputs read placeholder {needed[0].name}, which is not "
                             "among the inputs; hint: list every placeholder the outputs need as an input")


def drop_training_ops(outputs: Sequence[Op]) -> list[Op]:
    """The outputs with ``stop_gradient(x) -> x`` (it only matters to autodiff).

    Each ``stop_gradient`` becomes its *rebuilt* source: replacing it by its original source kept, under a
    later ``stop_gradient``, the earlier ones' whole graph a second time (a 4-layer Transformer's cached
    decoding step ran 42 dots instead of 25: every softmax's max sits under one).

    Example:
        >>> (y,) = drop_training_ops([y])
    """
    outputs = list(outputs)
    new = rebuild(toposort(outputs), lambda op, cur: cur.src[0] if op.op is T.STOP_GRADIENT else cur)
    return [new[r] for r in outputs]


def frozen_boundary(outputs: Sequence[Op]) -> list[Op]:
    """The array ops computed from weights alone that a per-call op reads: they become weight slots.

    A broadcast of such an array keeps its broadcast (a view) and its source becomes the slot;
    scalar constants stay in the graph (constant folding handles them), but a scalar computed
    from a variable is a slot too (its trained value must travel).

    Returns:
        the ops to evaluate once, in graph order.

    Example:
        >>> frozen_boundary([conv(x, W * b(s)) + b(bias)])  # [mul(W, b(s)), bias]
    """
    order = toposort(outputs)
    volatile: set[Op] = set()
    for op in order:
        if op.op in _VOLATILE or any(s in volatile for s in op.src):
            volatile.add(op)
    boundary: dict[Op, None] = {}

    def consider(op: Op) -> None:
        while op.op is T.BROADCAST and op.src[0] not in volatile:
            op = op.src[0]
        if op in volatile or (op.op is T.CONSTANT and op.axes.size <= 1):
            return
        boundary[op] = None

    for op in order:
        if op in volatile:
            for s in op.src:
                consider(s)
    for op in outputs:
        if op not in volatile:
            consider(op)
    return list(boundary)


def freeze(outputs: list[Op], values: Mapping[Op, np.ndarray], backend: str) -> tuple[list[Op], dict[Op, np.ndarray]]:
    """Evaluate the weight-only boundary once with ``backend``'s kernels and put slots in its place.

    Args:
        outputs: the graph's results.
        values: variable -> its trained value (a variable not given uses its initial value).
        backend: the transformer backend that evaluates the boundary.

    Returns:
        the outputs over slot variables, and slot -> its value.

    Example:
        >>> outputs, slot_values = freeze(outputs, model_weights, "numpy")
    """
    boundary = frozen_boundary(outputs)
    if not boundary:
        return outputs, {}
    with make_transformer(backend) as t:
        for var in {op for op in toposort(boundary) if op.op is T.VARIABLE}:
            if var in values:
                t.write_variable(var, values[var])
        computed = t.computation(boundary, mode="inference")()
    slots = {}
    for i, (op, value) in enumerate(zip(boundary, computed, strict=True)):
        name = op.meta.name if op.op is T.VARIABLE and op.meta.name else f"w{i}"
        slot = api.variable(op.axes, 0.0, dtype=op.dtype, name=name, trainable=False, labels=("weight_slot",))
        slots[op] = (slot, np.asarray(value, dtype=op.dtype))
    new_outputs = substitute_all(outputs, {op: slot for op, (slot, _) in slots.items()})
    return new_outputs, {slot: value for slot, value in slots.values()}


def weight_uses(outputs: Sequence[Op], slots: Iterable[Op]) -> tuple[dict[Op, tuple[int, ...]], list[tuple[Op, int]]]:
    """Which slots are ``dot``/``conv`` weights, and the data operands INT8 quantizes.

    A conv filter is ``[Ci, *k, K]``: its output channel is the last axis. A dot weight is the
    slot operand whose other operand is not a slot; its output channels are the axes the data
    does not share (the ones the dot keeps).

    Returns:
        slot -> output-channel axis positions; and ``(dot/conv op, index of its data operand)`` pairs.

    Example:
        >>> channels, data = weight_uses(outputs, slot_values)  # {W: (0,)}, [(dot, 1)]
    """
    slots = set(slots)
    channels: dict[Op, tuple[int, ...]] = {}
    data: list[tuple[Op, int]] = []
    for op in toposort(outputs):
        if op.op is T.CONV and op.src[1] in slots:
            channels.setdefault(op.src[1], (len(op.src[1].axes) - 1,))  # filter [Ci, *k, K]: K is last
            data.append((op, 0))
        elif op.op is T.DOT:
            a, b = op.src
            for w, x, xi in ((a, b, 1), (b, a, 0)):
                if w in slots and x not in slots:
                    shared = set(x.axes)
                    channels.setdefault(w, tuple(i for i, ax in enumerate(w.axes) if ax not in shared))
                    data.append((op, xi))
                    break
    return channels, data


def insert_activation_qdq(outputs: Sequence[Op], scales: Mapping[tuple[Op, int], float]) -> list[Op]:
    """The outputs with each listed dot/conv reading its data operand through ``quantize_dequantize``.

    Args:
        outputs: the graph's results.
        scales: ``(dot/conv op, data operand index)`` -> quantization step.

    Returns:
        the rebuilt outputs (other consumers of the data still read it unquantized). The
        quantize-dequantize ops are made in the consumer's scope, labelled ``quantize``, so
        selectors and the per-layer counters count them with that layer.

    Example:
        >>> (y,) = insert_activation_qdq([y], {(dot, 1): 0.01})
    """
    def fn(op: Op, cur: Op) -> Op:
        indexes = {i: s for (target, i), s in scales.items() if target is op}
        if not indexes:
            return cur
        with scope_override(op.meta.scope, labels=("quantize",)):  # the consumer's layer does the rounding
            src = tuple(quantize_dequantize(s, indexes[i]) if i in indexes else s for i, s in enumerate(cur.src))
        return cur.replace(src=src)

    new = rebuild(toposort(outputs), fn)
    return [new[o] for o in outputs]
