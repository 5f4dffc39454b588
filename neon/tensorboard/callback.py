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

import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from ..callbacks import Callback
from ..checkpoint_file import variable_keys
from .events import (
    HISTOGRAM_BINS,
    TensorBoardError,
    graph_def,
    import_tensorboardx,
    numbers,
    open_writer,
    scalar_tag,
)

__all__ = ["TensorBoard", "training_results"]


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

    writer_only = True  # prints or writes files: rank 0 only in a distributed run

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
        self._writer, self.path = open_writer(self._tbx, self.log_dir, self.flush_secs, "TensorBoard")
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
            for key, value in numbers(logs).items():
                self._scalar(f"batch/{key}", value, self._batches)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        if self._writer is None:
            return
        step = epoch + 1  # the epoch's number, as in History["epoch"]
        for key, value in numbers(logs).items():
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
        if callable(getattr(cache, "computations", None)):  # a neon.training.ComputationCache
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
