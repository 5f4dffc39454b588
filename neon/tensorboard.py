"""TensorBoard logging for ``fit``: per-epoch scalars, weight histograms and the training graph.

``TensorBoard(log_dir)`` is a callback; it writes event files that ``tensorboard --logdir``
reads, through tensorboardX's ``FileWriter`` (no TensorFlow needed). What it writes:

* **scalars**, after every epoch, at step = the epoch's 1-based number (as ``History["epoch"]``):
  every number in the epoch's logs, tagged by ``scalar_tag`` — ``train_cost`` → ``train/cost``,
  ``valid_<x>`` → ``valid/<x>``, ``lr`` → ``lr``, ``<net>_lr`` → ``lr/<net>``, other training
  values (a GAN's ``d_cost``) → ``train/<key>``. With ``batch_freq=k``, every k-th batch's
  values too, as ``batch/<key>`` at step = the batch's 1-based number counted over the run.
* **histograms** of chosen variables (a selector query, ``True`` for every weight, or the
  variables themselves), tagged by the variable's checkpoint key — its scope path, e.g.
  ``Sequential_0/Affine_0/Linear_0/W`` — with the values read from the model's transformer.
* **the graph**: the model's training computation (loss, backward pass and updates) as a
  TensorBoard ``GraphDef`` (``graph_def``), once per ``fit``, after the first batch (when the
  computation exists). Nodes are named by scope path so TensorBoard folds each layer into a
  box; backward ops sit in a ``grad`` box inside the layer they differentiate.

tensorboardX is optional: ``pip install tensorboardX==2.6.5`` (or the package's
``tensorboard`` extra). Without it, constructing the callback raises
``TensorBoardUnavailableError`` (an ``ImportError``), and nothing else in neon needs it.

Example:
    >>> model.fit(train, cost, optimizer, 10, valid_set=test, metric=Accuracy(),
    ...           callbacks=[TensorBoard("runs/mlp", histograms="Affine variable")])
    >>> # then: tensorboard --logdir runs
"""

from __future__ import annotations

import itertools
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

import ngraph_core as ng

from .callbacks import Callback, CallbackError
from .saving import variable_keys
from .training import ComputationCache

__all__ = ["TensorBoard", "TensorBoardError", "TensorBoardUnavailableError", "graph_def", "node_names",
           "scalar_tag", "write_graph"]

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


def _numbers(logs: Mapping[str, Any]) -> dict[str, float]:
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
    writer, path = _open_writer(tbx, Path(log_dir), flush_secs=120, who="write_graph")
    try:
        writer.add_event(event)
    finally:
        writer.close()
    return path


def _open_writer(tbx: SimpleNamespace, log_dir: Path, flush_secs: float, who: str) -> tuple[Any, Path]:
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


# -- the callback ---------------------------------------------------------------------------------------
class TensorBoard(Callback):
    """Write scalars, weight histograms and the training graph for TensorBoard during ``fit``.

    Works with any model trained by ``neon.training.fit_loop`` (``Model``, ``GAN``). One new event
    file per ``fit``, closed when training ends; a resumed run continues the same steps.

    Args:
        log_dir: the directory of the event files (created at fit start).
        histograms: which variables to draw each ``histogram_freq`` epochs: None/False (none);
            True (every weight: variables labelled ``trainable`` or ``frozen``); a selector
            query evaluated with ``model.select(query)`` (``"Conv variable"``; ``"variable"``
            is every model variable even where the model has no ``select``); a ``Selection``;
            or variables / layers (their ``.variables``).
        histogram_freq: draw histograms after every this many epochs (epochs ``k``, ``2k``...).
        graph: write the training graph (``graph_def``) once per fit, after its first batch.
        batch_freq: also write every this many batches' values (``batch/cost``...); None: off.
        flush_secs: how often tensorboardX flushes pending events (the callback also flushes
            after every epoch, and closes the file at the end of ``fit``).

    Attributes:
        variables: ``{tag: variable}`` drawn as histograms in the current fit.
        path: the event file of the current (or last) fit, or None.

    Raises:
        TensorBoardUnavailableError: tensorboardX is missing (raised here, at construction).
        TensorBoardError: bad arguments; at fit start, an unwritable ``log_dir`` or a ``histograms``
            choice that matches no variable of the model.

    Example:
        >>> tb = TensorBoard("runs/mlp", histograms=True, batch_freq=10)
        >>> model.fit(train, CrossEntropyMulti(), Adam(1e-3), 5, valid_set=test, metric=Accuracy(),
        ...           callbacks=[tb])
        >>> sorted(tb.variables)[:1]
        ['Sequential_0/Affine_0/Bias_0/b']
    """

    def __init__(self, log_dir: str | Path, *, histograms: Any = None, histogram_freq: int = 1, graph: bool = True,
                 batch_freq: int | None = None, flush_secs: float = 120) -> None:
        self._tbx = import_tensorboardx()
        if not isinstance(log_dir, (str, os.PathLike)) or not str(log_dir):
            raise TensorBoardError(f"TensorBoard: expected log_dir to be a directory path, received {log_dir!r}")
        for name, value, optional in (("histogram_freq", histogram_freq, False), ("batch_freq", batch_freq, True)):
            if optional and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TensorBoardError(f"TensorBoard: expected {name} to be an int >= 1{' or None' if optional else ''}"
                                       f", received {value!r}")
        if not isinstance(flush_secs, (int, float)) or isinstance(flush_secs, bool) or not flush_secs > 0:
            raise TensorBoardError(f"TensorBoard: expected flush_secs > 0, received {flush_secs!r}")
        if not (histograms is None or isinstance(histograms, (bool, str, ng.Op, Iterable))
                or hasattr(histograms, "variables")) or isinstance(histograms, (bytes, Mapping)):
            raise TensorBoardError(f"TensorBoard: expected histograms to be None, True, a selector query, a Selection "
                                   f"or variables, received {type(histograms).__name__}")
        if isinstance(histograms, str) and not histograms.strip():
            raise TensorBoardError("TensorBoard: expected histograms to be a selector query such as 'Affine variable'"
                                   ", received an empty string; hint: histograms=None draws none")
        self.log_dir = Path(log_dir)
        self.histograms, self.histogram_freq, self.graph = histograms, histogram_freq, bool(graph)
        self.batch_freq, self.flush_secs = batch_freq, flush_secs
        self.variables: dict[str, ng.Op] = {}
        self.path: Path | None = None
        self._writer: Any = None
        self._graph_written = False
        self._batches = 0

    # -- hooks ----------------------------------------------------------------------------------------------
    def on_train_begin(self, logs: dict[str, Any]) -> None:
        self.close()  # a writer an interrupted fit left open
        self.variables = self._histogram_variables()  # checked before any file is created
        self._writer, self.path = _open_writer(self._tbx, self.log_dir, self.flush_secs, "TensorBoard")
        self._graph_written = False
        nbatches = self.params.get("nbatches")
        self._batches = self.params.get("initial_epoch", 0) * nbatches if isinstance(nbatches, int) else 0

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict[str, Any]) -> None:
        if self._writer is None:
            return
        if self.graph and not self._graph_written:
            self._write_graph()
        self._batches += 1
        if self.batch_freq is not None and self._batches % self.batch_freq == 0:
            for key, value in _numbers(logs).items():
                self._scalar(f"batch/{key}", value, self._batches)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        if self._writer is None:
            return
        step = epoch + 1  # the epoch's number, as in History["epoch"]
        for key, value in _numbers(logs).items():
            self._scalar(scalar_tag(key), value, step)
        if self.variables and step % self.histogram_freq == 0:
            for tag, var in self.variables.items():
                self._histogram(tag, var, step)
        self._writer.flush()

    def on_train_end(self, logs: dict[str, Any]) -> None:
        self.close()

    def close(self) -> None:
        """Flush and close the event file (``fit`` does it when training ends)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # -- what is written ----------------------------------------------------------------------------------
    def _scalar(self, tag: str, value: float, step: int) -> None:
        self._writer.add_summary(self._tbx.summary.scalar(tag, value), step)

    def _histogram(self, tag: str, var: ng.Op, step: int) -> None:
        values = np.asarray(self.model.transformer.read_variable(var), dtype=np.float64).ravel()
        finite = values[np.isfinite(values)]  # TensorBoard's histograms cannot hold NaN or inf
        if finite.size < values.size:
            warnings.warn(f"TensorBoard: epoch {step}: {values.size - finite.size} of {values.size} values of {tag} "
                          "are NaN or inf; the histogram shows the finite ones", RuntimeWarning, stacklevel=3)
        if finite.size:
            self._writer.add_summary(self._tbx.summary.histogram(tag, finite, bins=HISTOGRAM_BINS), step)

    def _write_graph(self) -> None:
        self._graph_written = True
        results = training_results(self.model)
        if not results:
            warnings.warn(f"TensorBoard: {type(self.model).__name__} keeps no compiled training computation "
                          "(neon.training.ComputationCache in caches()); the graph was not written",
                          RuntimeWarning, stacklevel=3)
            return
        event = self._tbx.event_pb2.Event(graph_def=graph_def(results).SerializeToString())
        self._writer.add_event(event)

    # -- which variables ----------------------------------------------------------------------------------
    def _histogram_variables(self) -> dict[str, ng.Op]:
        """``{checkpoint key: variable}`` for ``histograms``, in the model's order."""
        spec, model = self.histograms, self.model
        if spec is None or spec is False:
            return {}
        keys = _keys_by_variable(model)
        if spec is True:
            chosen = [v for v in keys if {"trainable", "frozen"} & v.meta.labels]
        elif isinstance(spec, str):
            chosen = _selected(model, spec)
        else:
            chosen = _variables_in(spec)
        unknown = [v for v in chosen if v not in keys]
        if unknown:
            raise TensorBoardError(f"TensorBoard: histograms: expected variables of this {type(model).__name__}, "
                                   f"received {len(unknown)} that are not ({unknown[0].name}...); hint: pick them "
                                   "from this model (model.variables, model.select(...))")
        wanted = set(chosen)
        found = {keys[v]: v for v in keys if v in wanted}
        if not found:
            raise TensorBoardError(f"TensorBoard: histograms={spec!r} matched no variable of the model; hint: "
                                   "a query must select variables (e.g. 'Affine variable'), or pass True for "
                                   "every weight")
        return found


def training_results(model: Any) -> list[ng.Op]:
    """The results of ``model``'s training computations: the first compiled one of each
    ``ComputationCache`` in ``model.caches()`` (``Model``: the training step; ``GAN``: the D and
    G steps). Empty before the first training step.

    Example:
        >>> graph_def(training_results(model))
    """
    results: list[ng.Op] = []
    caches = model.caches() if callable(getattr(model, "caches", None)) else []
    for cache in caches:
        if isinstance(cache, ComputationCache):
            computations = cache.computations()
            if computations:
                results.extend(computations[0].results)
    return results


def _keys_by_variable(model: Any) -> dict[ng.Op, str]:
    """Every variable ``model`` holds (weights, then optimizer state) -> its checkpoint key."""
    if callable(getattr(model, "checkpoint_keys", None)):
        params, state = model.checkpoint_keys()
    else:
        params, state = variable_keys(model.variables, [])
    return {var: key for key, var in (*params.items(), *state.items())}


def _selected(model: Any, query: str) -> list[ng.Op]:
    """The variables ``model.select(query)`` selects (``"variable"``: every model variable, without ``select``)."""
    select = getattr(model, "select", None)
    if callable(select):
        return _variables_in(select(query))
    if query.strip() == "variable":
        return list(model.variables)
    raise TensorBoardError(f"TensorBoard: histograms={query!r} is a selector query, but {type(model).__name__} "
                           "has no select(); hint: pass 'variable' or True, or the variables themselves")


def _variables_in(items: Any) -> list[ng.Op]:
    """The variables in a ``Selection`` (its ``.variables``), an op, or an iterable of ops and layers."""
    if isinstance(items, ng.Op) or (hasattr(items, "variables") and not isinstance(items, (list, tuple))):
        items = [items]
    if not isinstance(items, Iterable) or isinstance(items, (str, bytes, Mapping)):
        raise TensorBoardError(f"TensorBoard: expected histograms to be None, True, a selector query, a Selection or "
                               f"variables, received {type(items).__name__}")
    found: list[ng.Op] = []
    for item in items:
        if isinstance(item, ng.Op):
            if item.op is not ng.OpType.VARIABLE:
                raise TensorBoardError(f"TensorBoard: histograms: expected variables, received a {item.op.value} op "
                                       f"({item.name}); hint: select variables, e.g. 'Affine variable'")
            found.append(item)
        elif hasattr(item, "variables"):
            found.extend(v for v in item.variables if isinstance(v, ng.Op) and v.op is ng.OpType.VARIABLE)
        else:
            raise TensorBoardError(f"TensorBoard: histograms: expected variables or layers, received "
                                   f"{type(item).__name__}")
    return found
