"""The ONNX exporter's control ops: ``scan`` as an ONNX Scan with its body as a sub-graph, ``call``
inlined, and the value-forwarding ops (``sequential``, ``custom_gradient``).

A ``scan`` becomes one Scan node. Its states are our carried states (plus a step counter when
the scan has valid lengths), its scan inputs our sequences (``scan_input_axes``: where the
recurrent axis sits), its scan outputs the results the graph reads: stacked step outputs,
pre-step states, kept values (``scan_output_axes``: where ``ir/scan.py`` stacks the recurrent
axis: just before ``N``, and first for kept values). Extras (loop-invariant inputs) are read from the enclosing graph
by name, which ONNX allows for sub-graphs. Reverse scans iterate and stack in reverse.

Valid lengths are our masking rule written out: with the counter ``t`` and ``mask = t <
lengths`` (``[N]``), a new state is ``Where(mask, new, old)`` and an output ``Where(mask, y, 0)``
for every value with the batch axis; values without it are written at every step.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ...ir import Op, OpType
from ...ir.scan import ScanArg
from .export_context import Converter, Emitter, GraphScope, Value, unsupported


def _body_input(em: Emitter, body: GraphScope, param: Op, base: str) -> Value:
    name = em.value_name(f"{base}/{param.name}")
    body.inputs.append(em.tensor_info(name, param))
    value = Value(name, (True,) * len(param.axes))
    em.bind(param, value)
    return value


def _masked(em: Emitter, name: str, op: Op, mask: str | None, other: str) -> str:
    """``Where(mask, name, other)`` with ``mask [N]`` unsqueezed to ``op``'s axes, or ``name`` without N."""
    if mask is None or op.axes.batch_axis is None:
        return name
    at = em.unsqueeze(mask, [i for i, a in enumerate(op.axes) if not a.is_batch])
    return em.node("Where", [at, name, other])


def _body_output(em: Emitter, body: GraphScope, name: str, op: Op) -> None:
    out = em.node("Identity", [name])  # a fresh name: a value may leave the body twice (output and state)
    body.outputs.append(em.tensor_info(out, op))


def _scan(em: Emitter, op: Op) -> Value:
    """One ONNX Scan node; each result the graph reads is recorded for its ``scan_result`` (module docstring)."""
    arg: ScanArg = op.arg
    n_seq, n_state, n_out, n_extra = arg.n_seq, arg.n_state, arg.n_out, arg.n_extra
    params, roots = arg.body.params, arg.body.roots
    used = sorted(em.scan_uses.get(op, set()))
    if n_seq == 0:
        raise unsupported(op, "an ONNX Scan needs at least one scanned sequence; scan over a sequence input")
    # the outer graph: full initial states and sequences, the lengths as int64
    inits = [em.full(s) for s in op.src[n_seq:n_seq + n_state]]
    seqs = [em.full(s) for s in op.src[:n_seq]]
    extras = [Value(em.full(s), (True,) * len(s.axes)) for s in op.src[n_seq + n_state:n_seq + n_state + n_extra]]
    lengths = em.full(op.src[-1], "int64") if arg.has_lengths else None
    steps = arg.axis.length
    base = em.value_name(f"{em.scope_name()}/body")
    with em.subgraph() as body:
        states = [_body_input(em, body, params[n_seq + j], base) for j in range(n_state)]
        counter = mask = None
        if lengths is not None:
            counter = em.value_name(f"{base}/step")
            body.inputs.append(helper.make_tensor_value_info(counter, TensorProto.INT64, []))
        for k in range(n_seq):
            _body_input(em, body, params[k], base)
        for e, value in enumerate(extras):
            em.bind(params[n_seq + n_state + e], value)
        em.convert(roots)
        if counter is not None:
            mask = em.node("Less", [counter, lengths])
        for j, state in enumerate(states):
            new, param = roots[n_out + j], params[n_seq + j]
            _body_output(em, body, _masked(em, em.full(new), param, mask, state.name), param)
        if counter is not None:
            delta = em.const(np.asarray(-1 if arg.reverse else 1, dtype=np.int64), "step")
            following = em.node("Identity", [em.node("Add", [counter, delta])])
            body.outputs.append(helper.make_tensor_value_info(following, TensorProto.INT64, []))
        output_axes = []
        for index in used:
            if index < n_state:
                continue  # final states are the Scan's first outputs
            kind, value_op, name = _stacked(em, arg, index)
            if kind != "saved":
                name = _masked(em, name, value_op, mask, em.const(np.asarray(0, dtype=value_op.dtype), "zero"))
            _body_output(em, body, name, value_op)
            stacked, _ = arg.result_types()[index]
            output_axes.append(stacked.index(arg.axis))
    graph = helper.make_graph(body.nodes, base, body.inputs, body.outputs)
    counter_init = [] if lengths is None else [em.const(np.asarray(steps - 1 if arg.reverse else 0, np.int64),
                                                        "first_step")]
    scan_axes = [s.axes.index(arg.axis.name) for s in op.src[:n_seq]]
    n_finals = n_state + (lengths is not None)
    names = em.node("Scan", [*inits, *counter_init, *seqs], n_out=n_finals + len(output_axes), body=graph,
                    num_scan_inputs=n_seq, scan_input_axes=scan_axes, scan_input_directions=[int(arg.reverse)] * n_seq,
                    scan_output_axes=output_axes, scan_output_directions=[int(arg.reverse)] * len(output_axes))
    names = [names] if isinstance(names, str) else names
    stacked_names = iter(names[n_finals:])
    for index in used:
        em.graph.cache[("scan", op, index)] = names[index] if index < n_state else next(stacked_names)
    return Value("", (True,))  # the pack itself has no tensor: scan_result reads the Scan's outputs


def _stacked(em: Emitter, arg: ScanArg, index: int) -> tuple[str, Op, str]:
    """(kind, the body value stacked as result ``index``, its name in the body) for a stacked result."""
    n_state, n_out = arg.n_state, arg.n_out
    n_saved = n_state if arg.save_states else 0
    params = arg.body.params
    if index < n_state + n_out:
        root = arg.body.roots[index - n_state]
        return "output", root, em.full(root)
    if index < n_state + n_out + n_saved:
        param = params[arg.n_seq + index - n_state - n_out]
        return "saved", param, em.full(param)
    kept = arg.kept()[index - n_state - n_out - n_saved]
    return "kept", kept, em.full(kept)


def _scan_result(em: Emitter, op: Op) -> str:
    """The Scan output recorded for this result, in the pack's dtype (as our view reads it)."""
    (scan_op,) = op.src
    name = em.graph.find("cache", ("scan", scan_op, op.arg))
    result_dtype = scan_op.arg.result_types()[op.arg][1]
    return em.cast(name, result_dtype, op.dtype)


def _call(em: Emitter, op: Op) -> Value:
    """A sub-graph applied to the sources, inlined: its params bound to the sources' values."""
    graph = op.arg.graph
    key = ("call", graph, op.src)
    names = em.graph.find("cache", key)
    if names is None:
        outer = em.graph
        em.graph = GraphScope(outer, nodes=outer.nodes)  # same node list, its own value bindings
        try:
            for param, s in zip(graph.params, op.src):
                em.bind(param, em.lookup(s))
            em.convert(graph.roots)
            names = [(em.lookup(r).name, em.lookup(r).full) for r in graph.roots]
        finally:
            em.graph = outer
        em.graph.cache[key] = names
    name, full = names[op.arg.index]
    return Value(name, full)


def _forward_first(em: Emitter, op: Op) -> Value:
    """``custom_gradient``: the forward value is its first source's."""
    return em.lookup(op.src[0])


def _sequential(em: Emitter, op: Op) -> Value:
    """The value of the last source (an ``assign`` among the others has no converter: it raises first)."""
    return em.lookup(op.src[-1])


CONTROL_CONVERTERS: dict[OpType, Converter] = {
    OpType.SCAN: _scan,
    OpType.SCAN_RESULT: _scan_result,
    OpType.CALL: _call,
    OpType.CUSTOM_GRADIENT: _forward_first,
    OpType.SEQUENTIAL: _sequential,
}
