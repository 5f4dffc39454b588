"""TensorBoard's event files from our IR: tensorboardX import, tags, the graph as a ``GraphDef``, writers.

The ``TensorBoard`` callback (``callback.py``) writes through these; ``write_graph`` also serves
graphs built without ``fit``. tensorboardX is optional: ``import_tensorboardx`` raises
``TensorBoardUnavailableError`` (an ``ImportError``) with the pip command when it is missing.

Example:
    >>> write_graph("runs/graph", [loss])  # then: tensorboard --logdir runs
"""

from __future__ import annotations

import itertools
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

import ngraph_core as ng

from ..callbacks import CallbackError

__all__ = ["TensorBoardError", "TensorBoardUnavailableError", "graph_def", "import_tensorboardx", "node_names",
           "scalar_tag", "write_graph", "open_writer", "numbers", "HISTOGRAM_BINS", "PIP_HINT"]

PIP_HINT = "pip install tensorboardX==2.6.5 (or: pip install 'ngraph-neon[tensorboard]')"

# our dtype names -> TensorFlow DataType names (tensorboardX's types.proto)
_DATA_TYPES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "float16": "DT_HALF", "bfloat16": "DT_BFLOAT16",
               "int8": "DT_INT8", "int16": "DT_INT16", "int32": "DT_INT32", "int64": "DT_INT64", "uint8": "DT_UINT8",
               "uint16": "DT_UINT16", "bool": "DT_BOOL", "complex64": "DT_COMPLEX64", "complex128": "DT_COMPLEX128"}
HISTOGRAM_BINS = 64  # equal-width bins from min to max (TensorBoard re-bins them for display)
_ARG_CHARS = 200  # an op's arg is shown as text in TensorBoard's node panel, cut to this length
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")  # TensorFlow's node-name alphabet (one path element)
_writer_ids = itertools.count()


class TensorBoardError(CallbackError):
    """``TensorBoard`` was given, or met, something it cannot use: an unwritable log directory, a bad
    argument, a ``histograms`` choice that matches no variable of the model."""


class TensorBoardUnavailableError(ng.NgraphError, ImportError):
    """tensorboardX, which writes TensorBoard's event files, is not installed."""


def import_tensorboardx() -> SimpleNamespace:
    """tensorboardX's writer, summaries and protos, in one namespace.

    Returns:
        ``FileWriter``, ``summary`` and the proto modules ``event_pb2``, ``graph_pb2``,
        ``node_def_pb2``, ``attr_value_pb2``, ``tensor_shape_pb2``, ``types_pb2``.

    Raises:
        TensorBoardUnavailableError: tensorboardX is missing (the message has the pip command).

    Example:
        >>> tbx = import_tensorboardx(); tbx.graph_pb2.GraphDef()
    """
    try:
        from tensorboardX import FileWriter, summary
        from tensorboardX.proto import (
            attr_value_pb2,
            event_pb2,
            graph_pb2,
            node_def_pb2,
            tensor_shape_pb2,
            types_pb2,
        )
    except ImportError as exc:
        raise TensorBoardUnavailableError(f"TensorBoard: expected the tensorboardX package, which writes TensorBoard's "
                                          f"event files, received an import error ({exc}); hint: {PIP_HINT}") from exc
    return SimpleNamespace(FileWriter=FileWriter, summary=summary, event_pb2=event_pb2, graph_pb2=graph_pb2,
                           node_def_pb2=node_def_pb2, attr_value_pb2=attr_value_pb2,
                           tensor_shape_pb2=tensor_shape_pb2, types_pb2=types_pb2)


# -- tags -----------------------------------------------------------------------------------------------
def scalar_tag(key: str) -> str:
    """The TensorBoard tag of an epoch log value (see the module docstring).

    Example:
        >>> [scalar_tag(k) for k in ("train_cost", "valid_accuracy", "lr", "d_lr", "g_cost")]
        ['train/cost', 'valid/accuracy', 'lr', 'lr/d', 'train/g_cost']
    """
    if key == "lr":
        return "lr"
    if key.endswith("_lr"):
        return f"lr/{key[:-3]}"
    for prefix in ("train_", "valid_"):
        if key.startswith(prefix) and len(key) > len(prefix):
            return f"{prefix[:-1]}/{key[len(prefix):]}"
    return f"train/{key}"


def numbers(logs: Mapping[str, Any]) -> dict[str, float]:
    """The values of ``logs`` that are numbers (not None, not bools, not the epoch counter)."""
    return {k: float(v) for k, v in logs.items()
            if k not in ("epoch", "batch_size") and isinstance(v, (int, float, np.number)) and not isinstance(v, bool)}


# -- the graph ------------------------------------------------------------------------------------------
def node_names(ops: Iterable[ng.Op]) -> dict[ng.Op, str]:
    """A unique TensorBoard node name per op: its scope path, then its own name or ``<kind>_<k>``.

    ``k`` counts ops of one kind in one scope in the order given (topological: the same graph
    gets the same names in every process). Backward ops (label ``grad``) get a ``grad`` level
    after their scope. A named op whose name repeats its last scope (optimizer state named
    ``Sequential_0/.../W/velocity``) is written once, as checkpoint keys are. Characters
    outside TensorFlow's node-name alphabet become ``_``; a name taken already gets ``_1``, ``_2``...

    Args:
        ops: the ops, sources before their consumers (``ng.ordered_ops(results)``).

    Returns:
        ``{op: name}``, e.g. ``Sequential_0/Affine_0/Linear_0/W`` for a weight and
        ``Sequential_0/Affine_0/Linear_0/grad/dot_0`` for a backward ``dot``.

    Example:
        >>> names = node_names(ng.ordered_ops([loss]))
    """
    out: dict[ng.Op, str] = {}
    taken: set[str] = set()
    counts: Counter[tuple[tuple[str, ...], str]] = Counter()
    for op in ops:
        path = tuple(entry.name for entry in op.meta.scope) + (("grad",) if "grad" in op.meta.labels else ())
        own = op.meta.name
        if own:
            if path and own.startswith(path[-1] + "/"):
                own = own[len(path[-1]) + 1:]
            parts = [*path, *own.split("/")]
        else:
            kind = op.op.value
            parts = [*path, f"{kind}_{counts[(path, kind)]}"]
            counts[(path, kind)] += 1
        base = "/".join(_UNSAFE.sub("_", part) or "_" for part in parts)
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        out[op] = name
    return out


def graph_def(results: Sequence[ng.Op]) -> Any:
    """TensorBoard's ``GraphDef`` of the graph below ``results`` (tensorboardX's proto).

    One node per op: ``name`` from ``node_names``, ``op`` = the op's kind (``dot``, ``variable``...),
    ``input`` = its sources' node names, and attributes ``dtype`` (a TensorFlow ``DataType``),
    ``_output_shapes`` (one shape whose dimensions carry the axis names), ``axes``
    (``"F:4, N:32"``), ``labels`` and ``arg`` (text) — TensorBoard shows them in the node panel.
    A ``scan``'s body is not expanded: the scan is one node.

    Args:
        results: the graph's outputs (e.g. a compiled computation's ``results``).

    Returns:
        a ``tensorboardX.proto.graph_pb2.GraphDef``.

    Raises:
        TensorBoardUnavailableError: tensorboardX is missing.

    Example:
        >>> gd = graph_def(computation.results); [n.op for n in gd.node][:3]
        ['placeholder', 'variable', 'dot']
    """
    tbx = import_tensorboardx()
    attr_value, shape_proto = tbx.attr_value_pb2.AttrValue, tbx.tensor_shape_pb2.TensorShapeProto
    ops = ng.ordered_ops(list(results))
    names = node_names(ops)
    nodes = []
    for op in ops:
        shape = shape_proto(dim=[shape_proto.Dim(size=a.length, name=a.name) for a in op.axes])
        attrs = {"_output_shapes": attr_value(list=attr_value.ListValue(shape=[shape])),
                 "axes": attr_value(s=", ".join(f"{a.name}:{a.length}" for a in op.axes).encode())}
        if op.dtype in _DATA_TYPES:
            attrs["dtype"] = attr_value(type=tbx.types_pb2.DataType.Value(_DATA_TYPES[op.dtype]))
        else:
            attrs["dtype_name"] = attr_value(s=str(op.dtype).encode())
        if op.meta.labels:
            attrs["labels"] = attr_value(list=attr_value.ListValue(s=[x.encode() for x in sorted(op.meta.labels)]))
        if op.arg is not None:
            attrs["arg"] = attr_value(s=str(op.arg)[:_ARG_CHARS].encode())
        nodes.append(tbx.node_def_pb2.NodeDef(name=names[op], op=op.op.value, input=[names[s] for s in op.src],
                                              attr=attrs))
    return tbx.graph_pb2.GraphDef(node=nodes)


def write_graph(log_dir: str | Path, results: Sequence[ng.Op]) -> Path:
    """Write the graph below ``results`` to a new event file in ``log_dir`` (for graphs built without ``fit``).

    Returns:
        the event file written.

    Raises:
        TensorBoardUnavailableError: tensorboardX is missing.
        TensorBoardError: ``log_dir`` cannot be created or written.

    Example:
        >>> write_graph("runs/graph", [loss])  # then: tensorboard --logdir runs
    """
    tbx = import_tensorboardx()
    event = tbx.event_pb2.Event(graph_def=graph_def(results).SerializeToString())
    writer, path = open_writer(tbx, Path(log_dir), flush_secs=120, who="write_graph")
    try:
        writer.add_event(event)
    finally:
        writer.close()
    return path


def open_writer(tbx: SimpleNamespace, log_dir: Path, flush_secs: float, who: str) -> tuple[Any, Path]:
    """A tensorboardX ``FileWriter`` on a new event file in ``log_dir`` (created if missing), and that file."""
    # the file name has the time in whole seconds: a suffix of its own keeps two writers opened
    # within one second (two fits, two callbacks) from truncating each other's file
    suffix = f".ngraph{os.getpid()}_{next(_writer_ids):06d}"  # padded: files sort in the order written
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        writer = tbx.FileWriter(str(log_dir), flush_secs=flush_secs, filename_suffix=suffix)
    except OSError as exc:
        raise TensorBoardError(f"{who}: expected a writable directory for the event files, received log_dir="
                               f"'{log_dir}' ({exc.strerror or exc}); hint: pass a directory you can write to "
                               "(it is created if missing), not a file") from exc
    return writer, next(log_dir.glob(f"events.out.tfevents.*{suffix}"))


