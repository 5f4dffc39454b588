"""``export``: write an ngraph inference graph (a neon model, a pair of ops, or a compiled computation) as ONNX.

The graph is exported as built (unoptimized: no fused kernels, batch norm as its primitives),
so every op maps through the table in ``export_ops.py``. Named axes become positions (each
tensor's dims in its axes' order) and the batch axis ``N`` becomes the symbolic dim ``"N"``
unless the graph fixes its length (``export_context`` says when; then a static batch and an
``ExportWarning``). Node names are the ops' scope paths and initializer names the variables'
paths, so an exported model keeps its layer names. Inputs and outputs are batch first by default
(``layout="onnx"``: ``[N, F]``, ``[N, C, H, W]``, ``[N, T, F]``, ``[N, T]``; ``export_layout``
says how), or in the graph's batch-last order with ``layout="native"``. The model is checked with
``onnx.checker.check_model(full_check=True)`` before it is returned or written.

Example:
    >>> model = export(neon_model, "mlp.onnx", batch_size=1)       # dynamic batch "N", input [N, 784]
    >>> sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ...ir import Op, OpType
from ...ir.graph import walk
from ...ir.values import ArrayValue
from .export_context import MIN_OPSET, BakedBatch, Emitter, ExportError, Value
from .export_layout import LAYOUT_KEY, LAYOUTS, io_order
from .export_ops import CONVERTERS

__all__ = ["ExportError", "ExportWarning", "export"]

PRODUCER = "ngraph-neon"


class ExportWarning(UserWarning):
    """The export changed what was asked (a static batch instead of a dynamic one) and says why."""


def export(source: Any, path: str | os.PathLike | None = None, opset: int = 17, batch_size: int = 1,
           dynamic_batch: bool = True, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, *, transformer: Any = None,
           layout: str = "onnx") -> onnx.ModelProto:
    """Write an inference graph as an ONNX model (checked by ``onnx.checker``); optionally save it atomically.

    Args:
        source: a neon ``Model`` (anything with ``__ngraph_inference__(batch_size)``), an
            ``(inputs, outputs)`` pair of ops, or a compiled ``Computation`` (its placeholders
            and results, weights from its transformer).
        path: where to write the model: a temporary file beside it, then ``os.replace``, so the
            path holds the old file or the whole new one, never a partial one.
        opset: the ONNX opset to write (13 up to the installed onnx's newest).
        batch_size: the batch length a neon model builds its graph for (the static batch).
        dynamic_batch: export the batch axis ``N`` as the symbolic dim ``"N"``.
        input_names / output_names: ONNX names of the inputs and outputs (default: the ops' names).
        transformer: for an ``(inputs, outputs)`` pair, the transformer whose variable values to
            export (default: the variables' initial values).
        layout: ``"onnx"`` (default): inputs and outputs batch first (``[N, F]``, ``[N, C, H, W]``,
            sequences ``[N, T, F]`` and token ids ``[N, T]``), transposed to and from the graph's
            order inside the model; ``"native"``: the graph's own order, batch last (``[F, N]``).

    Returns:
        the ``onnx.ModelProto``.

    Raises:
        ExportError: an op with no ONNX mapping (named, with its scope), an unknown source kind,
            an opset out of range, a layout other than "onnx" or "native", names that do not fit,
            or a model the checker refuses.

    Example:
        >>> proto = export(([x], [y]), "net.onnx", transformer=t)
        >>> proto = export(model, opset=18, dynamic_batch=False, batch_size=32)
        >>> proto = export(model, layout="native")  # inputs [784, N], as the graph holds them
    """
    latest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= latest:
        raise ExportError(f"ONNX export: expected an opset from {MIN_OPSET} to {latest}, received {opset!r}; "
                          f"hint: the default is 17")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ExportError(f"ONNX export: expected a positive int batch_size, received {batch_size!r}; hint: the "
                          "batch length a neon model builds its graph for, e.g. 1")
    if layout not in LAYOUTS:
        raise ExportError(f"ONNX export: expected layout 'onnx' or 'native', received {layout!r}; hint: 'onnx' "
                          "(the default) writes inputs batch first ([N, F]), 'native' as the graph holds them ([F, N])")
    inputs, outputs, values = read_source(source, transformer, batch_size)
    names_in = _names(input_names, [p.meta.name or f"input_{i}" for i, p in enumerate(inputs)], "input")
    names_out = _names(output_names, [o.meta.name or f"output_{i}" for i, o in enumerate(outputs)], "output")
    if set(names_in) & set(names_out):
        raise ExportError(f"ONNX export: input and output names must differ, received {names_in} and {names_out}; "
                          "hint: pass output_names=")
    try:
        model = _build(inputs, outputs, values, opset, dynamic_batch, names_in, names_out, layout)
    except BakedBatch as reason:
        model = _build(inputs, outputs, values, opset, False, names_in, names_out, layout)  # warn once it succeeded
        batch = next((a.length for op in walk(outputs) for a in op.axes if a.is_batch), None)
        warnings.warn(f"ONNX export: exporting a static batch of {batch}, not a dynamic one: {reason}; hint: build "
                      "the graph so the batch axis N stays a whole axis, or pass dynamic_batch=False",
                      ExportWarning, stacklevel=2)
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        raise ExportError(f"ONNX export: expected a model onnx.checker accepts, received one it refuses: {error}; "
                          "hint: this is an exporter bug, please report it with the graph (ng.serialize)") from error
    if path is not None:
        write_atomically(model.SerializeToString(), Path(path))
    return model


def read_source(source: Any, transformer: Any, batch_size: int) -> tuple[list[Op], list[Op], dict[Op, np.ndarray]]:
    """``(input placeholders, outputs, {variable: value})`` of a neon model, a computation or an op pair.

    Args:
        source: a neon ``Model``, a compiled ``Computation`` or an ``(inputs, outputs)`` pair.
        transformer: for a pair, where variable values come from (None: their initial values).
        batch_size: the batch length a neon model builds its graph for.

    Returns:
        the placeholders, the outputs and every variable's value (sub-graphs' variables included).

    Raises:
        ExportError: a source of another kind, inputs that are not placeholders, or no outputs.

    Example:
        >>> inputs, outputs, values = read_source(model, None, 1)
    """
    if hasattr(source, "__ngraph_inference__"):
        inputs, outputs, values = source.__ngraph_inference__(int(batch_size))
        transformer = getattr(source, "transformer", None)
    elif all(hasattr(source, a) for a in ("placeholders", "results", "transformer")):
        inputs, outputs, values, transformer = source.placeholders, source.results, {}, source.transformer
    elif isinstance(source, (tuple, list)) and len(source) == 2:
        inputs, outputs = ([s] if isinstance(s, Op) else list(s) for s in source)
        values = {}
    else:
        raise ExportError(f"ONNX export: expected a neon Model, an (inputs, outputs) pair of ops or a compiled "
                          f"Computation, received {type(source).__name__}; hint: export(model, 'model.onnx') or "
                          "export(([x], [y]), 'net.onnx', transformer=t)")
    inputs, outputs = list(inputs), list(outputs)
    if not outputs or not all(isinstance(o, Op) for o in [*inputs, *outputs]):
        raise ExportError(f"ONNX export: expected one or more output ops and input ops, received inputs {inputs!r} "
                          f"and outputs {outputs!r}; hint: pass ([placeholders], [results])")
    bad = [p for p in inputs if p.op is not OpType.PLACEHOLDER]
    if bad:
        raise ExportError(f"ONNX export: expected placeholders as inputs, received {bad[0].op.value} {bad[0].name}; "
                          "hint: pass the placeholders the outputs are computed from")
    values = dict(values)
    for var in walk(outputs):
        if var.op is OpType.VARIABLE and var not in values:
            values[var] = transformer.read_variable(var) if transformer is not None else initial_value(var)
    return inputs, outputs, values


def initial_value(var: Op) -> np.ndarray:
    """A variable's initial value as an array of its shape and dtype (a callable initializer is called).

    Example:
        >>> initial_value(ng.variable([C], initial_value=0.5))  # array([0.5, 0.5, ...], dtype=float32)
    """
    init = var.arg.initial_value
    if callable(init):
        init = init(var.axes)
    if isinstance(init, ArrayValue):
        init = init.array
    return np.broadcast_to(np.asarray(init, dtype=var.dtype), var.axes.lengths)


def _names(given: Sequence[str] | None, default: list[str], what: str) -> list[str]:
    if given is None:
        seen: dict[str, int] = {}
        names = []
        for name in default:  # two placeholders may share a name: number the repeats
            names.append(name if name not in seen else f"{name}_{seen[name]}")
            seen[name] = seen.get(name, 0) + 1
        return names
    given = list(given)
    if len(given) != len(default) or len(set(given)) != len(given) or not all(isinstance(n, str) and n
                                                                              for n in given):
        raise ExportError(f"ONNX export: expected {len(default)} distinct, non-empty {what} names, received "
                          f"{given!r}; hint: one name per {what}, in order")
    return given


def _build(inputs: list[Op], outputs: list[Op], values: Mapping[Op, np.ndarray], opset: int, dynamic: bool,
           names_in: list[str], names_out: list[str], layout: str) -> onnx.ModelProto:
    em = Emitter(opset, dynamic, CONVERTERS, dict(values))
    for op in walk(outputs):
        if op.op is OpType.SCAN_RESULT:
            em.scan_uses.setdefault(op.src[0], set()).add(op.arg)
    for name in [*names_in, *names_out]:
        em.value_name(name)  # reserved: no generated name takes them
    for p, name in zip(inputs, names_in):  # each input in the layout's order, transposed to the graph's
        order = io_order(p.axes, layout)
        em.graph.inputs.append(em.tensor_info(name, p, order))
        em.current = p
        em.bind(p, Value(em.transpose(name, sorted(range(len(order)), key=order.__getitem__)),
                         (True,) * len(p.axes)))
    em.current = None
    if dynamic:
        first = next(((name, p.axes) for p, name in zip(inputs, names_in) if p.axes.batch_axis is not None), None)
        if first is not None:  # N's position in the graph input, as the layout writes it
            name, axes = first
            em.set_batch_source(name, io_order(axes, layout).index(axes.index(axes.batch_axis)))
    em.convert(outputs)
    for op, name in zip(outputs, names_out):  # each output transposed from the graph's order to the layout's
        em.current = op
        order = io_order(op.axes, layout)
        full = em.full(op)
        if order == sorted(order):
            em.node("Identity", [full], outputs=[name])
        else:
            em.node("Transpose", [full], outputs=[name], perm=order)
        em.graph.outputs.append(em.tensor_info(name, op, order))
    graph = helper.make_graph(em.graph.nodes, "ngraph", em.graph.inputs, em.graph.outputs, em.initializers)
    opsets = [helper.make_opsetid("", opset)]
    try:  # the oldest IR that holds the opset, for the widest runtime support
        ir_version = helper.find_min_ir_version_for(opsets)
    except ValueError:  # an opset newer than onnx's version table
        ir_version = onnx.IR_VERSION
    model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER, ir_version=ir_version)
    helper.set_model_props(model, {"ngraph.batch_axis": "N" if dynamic else "static", LAYOUT_KEY: layout})
    return model


def write_atomically(data: bytes, path: Path) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    Raises:
        OSError: the folder is missing or not writable (no temporary file is left behind).

    Example:
        >>> write_atomically(model.SerializeToString(), Path("model.onnx"))
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
