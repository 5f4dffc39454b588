"""Converters: ONNX control flow — ``Scan`` and ``Loop`` onto ``ng.scan``, ``If`` onto a branch or ``ng.where``.

A body (``GraphProto`` attribute) is imported by ``run_graph``: its nodes go through
``convert_nodes`` in a child context that sees every outer value (and shares the outer
import's axis names, so nothing collides), with the body's inputs bound to given values.

* **Scan** (opset 9+): one ``ng.scan`` over a common time axis; each scan input's
  ``scan_input_axes`` dim is renamed to it, reversed ones are read backwards, and each
  stacked output is moved to its ``scan_output_axes`` dim (and reversed if asked). Scan-8
  (a leading batch dim, ``sequence_lens``) runs one ``ng.scan`` per example.
* **Loop**: with a trip count ``M`` known at import time, one ``ng.scan`` of ``M`` steps
  whose sequence is the iteration number. A condition that stays true (``cond_out =
  cond_in``, or a constant) runs every step; a condition computed at run time is carried
  as a ``running`` flag that freezes the loop-carried values once it turns false (only
  without scan outputs: their length would depend on run-time data). A body that needs
  the iteration number or a carried value at import time (``Slice`` by the iteration
  number, shape arithmetic), a carried value that changes shape, or a loop without ``M``
  whose condition can be evaluated is *unrolled* at import time, up to ``MAX_UNROLL``
  iterations; anything else raises ``UnsupportedOnnxOpError``.
* **If**: a condition known at import time imports only the chosen branch; otherwise both
  branches are imported and each output is ``where(cond, then, else)`` (the shapes must
  agree, else the condition is needed at import time).

Example:
    >>> body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), ...], "body", ...)
    >>> helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import api
from ...errors import NgraphError
from ...ir import Axes, Op
from .context import ImportContext, NeedStatic, tensor_to_array
from .errors import OnnxError
from .importer import convert_nodes, safe_name
from .registry import converter
from .tensor import Value, normalize_axis, shape_of

BODY_INPUT = "body input "  # how a body's own inputs are named when a converter needs one statically
MAX_SCAN_TRIPS = 1 << 20  # a larger trip count is a "while" loop's sentinel, not a step count
MAX_UNROLL = 256


class _Unroll(Exception):
    """Internal: the loop cannot be one ``ng.scan``; unroll it at import time instead."""


class _Masked(Exception):
    """Internal: the condition is computed at run time; redo the scan carrying a ``running`` flag."""


def _names_read(graph: Any) -> set[str]:
    """Every value name the nodes of ``graph`` (and of its nested subgraphs) read."""
    names: set[str] = set()
    for node in graph.node:
        names.update(node.input)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                names |= _names_read(sub)
    return names


def run_graph(ctx: ImportContext, graph: Any, bindings: Sequence[Value], who: str) -> list[Value]:
    """Import ``graph``'s nodes with its inputs bound to ``bindings``; return its outputs' values.

    Args:
        ctx: the outer context (the body sees all its values).
        graph: the body ``GraphProto``.
        bindings: one value per body input, in order (ops: body params; arrays: static).
        who: names the owner in errors (``"Loop node 'l0'"``).

    Returns:
        one value per body output (an op, or a NumPy array when known at import time).

    Raises:
        OnnxError: a binding count that differs from the body's inputs, or an output no node makes.
    """
    if len(bindings) != len(graph.input):
        raise OnnxError(f"{who}: the body has {len(graph.input)} inputs, expected {len(bindings)}; "
                        "hint: check the node's inputs against its body graph")
    for name in sorted(_names_read(graph) & set(ctx.pending)):  # outer trainable initializers the body reads
        array = ctx.pending.pop(name)
        ctx.values[name] = api.variable(ctx.fresh(array.shape), initial_value=array, dtype=array.dtype.name,
                                       name=safe_name(name, "initializer"))
    child = ImportContext(ctx.opsets, evaluate=ctx.fold_enabled, budget=ctx.budget)
    child.prefix, child._ids = ctx.prefix, ctx._ids  # one axis-name counter: body axes never collide with outer ones
    child.evaluate = ctx.evaluate  # type: ignore[method-assign] - one evaluation transformer per import
    child.values = dict(ctx.values)
    child.input_names = dict(ctx.input_names)
    for tensor in graph.initializer:
        child.values[tensor.name] = tensor_to_array(tensor, "body initializer")
    for value_info, value in zip(graph.input, bindings):
        child.values[value_info.name] = value
        if isinstance(value, Op) and value.op.name == "PLACEHOLDER" and value not in child.input_names:
            child.input_names[value] = f"{BODY_INPUT}{value_info.name}"
    convert_nodes(child, graph.node)
    missing = [o.name for o in graph.output if o.name not in child.values]
    if missing:
        raise OnnxError(f"{who}: body output {missing[0]!r} is not produced by any body node")
    return [child.values[o.name] for o in graph.output]


def conform(ctx: ImportContext, value: Value, like: Op, who: str) -> Op:
    """``value`` as an op with ``like``'s axes and dtype (same shape), else ``_Unroll``."""
    op = ctx.as_op(value, like.dtype)
    if shape_of(op) != shape_of(like):
        raise _Unroll(f"{who}: a loop-carried value changes shape from {shape_of(like)} to {shape_of(op)}")
    return op if op.axes == like.axes else api.cast_axes(op, like.axes)


def _scalar(ctx: ImportContext, value: Value, dtype: str = "bool") -> Op:
    op = ctx.as_op(value, dtype)
    return ctx.reshape(op, ()) if op.axes else op


def _reverse(op: Op, axis: Any) -> Op:
    return api.slice_along_axis(op, axis, slice(None, None, -1))


def _stacked(ctx: ImportContext, op: Op, time: Any, position: int, reverse: bool) -> Op:
    """A scan output ``op`` (``time`` where ng.scan put it) with ``time`` at ONNX dim ``position``."""
    rest = [a for a in op.axes if a != time]
    order = rest[:position] + [time] + rest[position:]
    op = api.axes_with_order(op, Axes(order))
    return ctx.rename(_reverse(op, time) if reverse else op)


def _check_scan(node: Any, n_inputs: int, m: int) -> tuple[int, int]:
    """(states, scan outputs) counts of a Scan node, or ``OnnxError``."""
    body = node.attr("body")
    n_state = n_inputs - m
    k = len(body.output) - n_state
    if m < 1 or n_state < 0 or k < 0 or len(body.input) != n_inputs:
        raise OnnxError(f"Scan node {node.name!r}: {n_inputs} inputs, num_scan_inputs={m}, and a body of "
                        f"{len(body.input)} inputs and {len(body.output)} outputs do not fit; hint: inputs are the "
                        "states then the scan inputs, body outputs the new states then the scan outputs")
    return n_state, k


def scan_body(ctx: ImportContext, node: Any, states: Sequence[Value], sequences: Sequence[Value],
              in_axes: Sequence[int], in_dirs: Sequence[int], out_axes: Sequence[int],
              out_dirs: Sequence[int]) -> list[Op]:
    """One ``ng.scan`` running the node's body: final states, then stacked scan outputs (ONNX dims)."""
    body, who, m, n_state = node.attr("body"), f"Scan node {node.name!r}", len(sequences), len(states)
    ops, time = [], None
    for j, value in enumerate(sequences):
        op = ctx.as_op(value)
        dim = normalize_axis(in_axes[j], len(op.axes), who)
        time = time or ctx.fresh([op.axes[dim].length])[0]
        if op.axes[dim].length != time.length:
            raise OnnxError(f"{who}: scan input {j} has {op.axes[dim].length} steps along dim {dim}, expected "
                            f"{time.length} like scan input 0; hint: every scan input has the same length")
        op = api.cast_axes(op, Axes([time if i == dim else a for i, a in enumerate(op.axes)]))
        ops.append(_reverse(op, time) if in_dirs[j] else op)

    def step(*params: Op) -> tuple[list[Op], list[Op]]:
        seq_params, state_params = params[:m], params[m:]
        outs = run_graph(ctx, body, [*state_params, *seq_params], who)
        try:
            new_states = [conform(ctx, v, s, who) for v, s in zip(outs[:n_state], state_params)]
        except _Unroll as exc:
            raise node.unsupported(str(exc)) from None
        return [ctx.as_op(v) for v in outs[n_state:]], new_states

    finals, stacked = api.scan(step, ops, [ctx.as_op(v) for v in states], time, name=node.name)
    outputs = [ctx.rename(f) if f.axes else f for f in finals]
    for j, op in enumerate(stacked):
        position = normalize_axis(out_axes[j], len(op.axes), who)
        outputs.append(_stacked(ctx, op, time, position, bool(out_dirs[j])))
    return outputs


@converter("Scan", since=9)
def scan(ctx, node, inputs):
    """ONNX Scan: loop-carried states, then ``num_scan_inputs`` sequences; one ``ng.scan``."""
    m = int(node.attr("num_scan_inputs"))
    n_state, k = _check_scan(node, len(inputs), m)
    return scan_body(ctx, node, inputs[:n_state], inputs[n_state:],
                     node.attr("scan_input_axes", [0] * m), node.attr("scan_input_directions", [0] * m),
                     node.attr("scan_output_axes", [0] * k), node.attr("scan_output_directions", [0] * k))


@converter("Scan", since=8)
def scan_batched(ctx, node, inputs):
    """ONNX Scan-8: a leading batch dim on states and scan inputs, optional ``sequence_lens``.

    The body is written for one example (its ops may read dims by position), so each example
    gets its own ``ng.scan`` over its first ``sequence_lens[b]`` steps (known at import time);
    scan outputs are zero past an example's length, as onnxruntime writes them.
    """
    m, values = int(node.attr("num_scan_inputs")), [ctx.as_op(v) if v is not None else None for v in inputs[1:]]
    n_state, k = _check_scan(node, len(values), m)
    states, sequences = values[:n_state], values[n_state:]
    if any(v is None for v in values) or not sequences:
        raise OnnxError(f"Scan node {node.name!r}: omitted state or scan input; hint: only sequence_lens is optional")
    batch, steps = shape_of(sequences[0])[:2]
    lens = ctx.static(inputs[0], "Scan-8's sequence_lens", default=np.full(batch, steps, "int64"))
    dirs = node.attr("directions", [0] * m)
    per_example = []
    for b in range(batch):
        length = int(lens[b])
        if not 0 < length <= steps:
            raise node.unsupported(f"example {b} has sequence length {length}; expected 1..{steps}")
        outs = scan_body(ctx, node, [api.tensor_slice(s, [b]) for s in states],
                         [api.tensor_slice(s, [b, slice(0, length)]) for s in sequences],
                         [0] * m, dirs, [0] * k, [0] * k)
        outs[n_state:] = [api.pad(o, [(0, steps - length)] + [0] * (len(o.axes) - 1)) for o in outs[n_state:]]
        per_example.append(outs)
    results = []
    for j in range(n_state + k):
        first = ctx.as_op(per_example[0][j])
        items = [first] + [api.cast_axes(ctx.as_op(e[j]), first.axes) for e in per_example[1:]]
        results.append(ctx.rename(api.stack(items, ctx.fresh([batch])[0], pos=0)))
    return results


def _loop_scan(ctx: ImportContext, node: Any, trips: int, cond: Value | None, carried: list[Value],
               masked: bool) -> list[Op]:
    """The Loop as one ``ng.scan`` of ``trips`` steps (``masked``: carry a ``running`` flag)."""
    body, who = node.attr("body"), f"Loop node {node.name!r}"
    n_carried = len(carried)
    time = ctx.fresh([trips])[0]
    iterations = api.constant(np.arange(trips, dtype="int64"), axes=Axes([time]), dtype="int64")
    initial = [ctx.as_op(v) for v in carried]
    if masked:
        initial = [_scalar(ctx, True if cond is None else cond), *initial]

    def step(iteration: Op, *states: Op) -> tuple[list[Op], list[Op]]:
        running = states[0] if masked else np.array(True)
        values = states[1:] if masked else states
        try:
            outs = run_graph(ctx, body, [iteration, running, *values], who)
        except NeedStatic as exc:
            if any(name.startswith(BODY_INPUT) for name in exc.inputs):
                raise _Unroll(str(exc)) from None
            raise
        cond_out, news = outs[0], [conform(ctx, v, s, who) for v, s in zip(outs[1:1 + n_carried], values)]
        scans = [ctx.as_op(v) for v in outs[1 + n_carried:]]
        if not masked:
            if not (isinstance(cond_out, np.ndarray) and np.all(cond_out)):
                raise _Unroll("the condition changes at run time") if scans else _Masked()
            return scans, news
        news = [api.where(running, new, old) for new, old in zip(news, values)]  # frozen once stopped
        return scans, [api.logical_and(running, _scalar(ctx, cond_out)), *news]

    finals, stacked = api.scan(step, [iterations], initial, time, name=node.name)
    finals = finals[1:] if masked else finals
    return [ctx.rename(f) if f.axes else f for f in finals] + [_stacked(ctx, op, time, 0, False) for op in stacked]


def _loop_unroll(ctx: ImportContext, node: Any, trips: int | None, cond: Value | None,
                 carried: list[Value], reason: str) -> list[Value]:
    """The Loop unrolled at import time (the body needs its iteration number or carried values statically)."""
    body, who = node.attr("body"), f"Loop node {node.name!r}"
    running = True if cond is None else bool(np.all(ctx.static(cond, "Loop's initial condition")))
    values, scans, i = list(carried), [], 0
    while running and (trips is None or i < trips):
        if i == MAX_UNROLL:
            raise node.unsupported(f"the loop cannot be one scan ({reason}) and runs more than {MAX_UNROLL} "
                                   "iterations, the limit for unrolling it at import time")
        outs = run_graph(ctx, body, [np.array(i, "int64"), np.array(running), *values], who)
        try:
            running = bool(np.all(ctx.static(outs[0], "Loop's condition")))
        except NeedStatic:
            if trips is None:
                raise node.unsupported("the condition depends on run-time values and there is no trip count "
                                       "M") from None
            raise
        values = outs[1:1 + len(values)]
        scans.append(outs[1 + len(values):])
        i += 1
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan and not scans:
        raise node.unsupported("the loop runs no iteration, so its scan outputs' shapes are unknown")
    stacked = []
    for j in range(n_scan):
        items = [s[j] for s in scans]
        if all(isinstance(v, np.ndarray) for v in items) and len({v.shape for v in items}) == 1:
            stacked.append(np.stack(items))
            continue
        first = ctx.as_op(items[0])
        try:
            ops = [conform(ctx, v, first, who) for v in items]
        except _Unroll as exc:
            raise node.unsupported(f"scan output {j} changes shape between iterations ({exc})") from None
        stacked.append(ctx.rename(api.stack(ops, ctx.fresh([len(ops)])[0], pos=0)))
    return values + stacked


@converter("Loop", since=1)
def loop(ctx, node, inputs):
    """ONNX Loop (trip count ``M``, condition, loop-carried values): ``ng.scan`` when it can, else unrolled."""
    inputs = list(inputs) + [None] * max(0, 2 - len(inputs))
    trip, cond, carried = inputs[0], inputs[1], list(inputs[2:])
    body = node.attr("body")
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan < 0 or len(body.input) != 2 + len(carried):
        raise OnnxError(f"Loop node {node.name!r}: {len(carried)} loop-carried values, but the body has "
                        f"{len(body.input)} inputs and {len(body.output)} outputs; hint: body inputs are "
                        "(iteration, cond, carried...), outputs (cond, carried..., scan outputs...)")
    trips = None if trip is None else int(np.asarray(ctx.static(trip, "Loop's trip count M")).reshape(()))
    trips = None if trips is not None and trips > MAX_SCAN_TRIPS else trips
    reason = "no trip count M" if trips is None else "no iteration"
    if trips:
        if isinstance(cond, Op) and n_scan:
            cond = ctx.static(cond, "Loop's initial condition (the loop has scan outputs)")
        starts = cond is None or isinstance(cond, Op) or bool(np.all(cond))
        try:
            if starts and not isinstance(cond, Op):
                try:
                    return _loop_scan(ctx, node, trips, cond, carried, masked=False)
                except _Masked:
                    pass
            if starts:
                return _loop_scan(ctx, node, trips, cond, carried, masked=True)
        except _Unroll as exc:
            reason = str(exc)
    return _loop_unroll(ctx, node, trips, cond, carried, reason)


@converter("If", since=1)
def if_(ctx, node, inputs):
    """ONNX If: a static condition imports one branch; a run-time one selects with ``where``."""
    cond, who = inputs[0], f"If node {node.name!r}"
    branches = node.attr("then_branch"), node.attr("else_branch")
    if isinstance(cond, np.ndarray):
        return run_graph(ctx, branches[0] if np.all(cond) else branches[1], [], who)
    try:
        then_out, else_out = (run_graph(ctx, b, [], who) for b in branches)
        if len(then_out) != len(else_out):
            raise OnnxError(f"{who}: the branches have {len(then_out)} and {len(else_out)} outputs; expected "
                            "the same count")
        if any(shape_of(a) != shape_of(b) for a, b in zip(then_out, else_out)):
            raise OnnxError(f"{who}: the branches' outputs differ in shape")
    except NgraphError:  # a run-time choice is impossible (or a branch cannot be imported): need the condition now
        return run_graph(ctx, branches[0] if np.all(ctx.static(cond, "If's condition")) else branches[1], [], who)
    flag, outputs = _scalar(ctx, cond), []
    for a, b in zip(then_out, else_out):
        a = ctx.as_op(a)
        outputs.append(api.where(flag, a, conform(ctx, b, a, who)))
    return outputs
