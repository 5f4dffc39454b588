"""Looking into a built model: selections over its graph, standing taps, and the summary table.

``Model.select``, ``Model.summary`` and ``Model.memory_plot`` are thin; the machinery is here.
Not to be confused with ``neon/model_inspection.py``: that is the ``ModelInspection`` mixin of
``Model`` (the methods themselves), which calls into this module.

* **Layer paths.** A layer's ops record ``ng.name_scope`` entries named after the layer and
  its parents (``Sequential_0 / Conv_0 / Convolution_0``), so walking the layer tree
  (``sublayers``) with the same names maps a scope path back to its layer object — and the
  selector's attribute tests (``Affine[nout=10]``) read that layer's ``get_config()``.
* **Standing taps.** A model compiles many graphs over one set of variables: inference and
  training, one per batch size. Variables are shared, so ``freeze``/``set`` on them hold
  everywhere already; a tap on any other op must be put on each graph. ``ModelSelection.tap``
  registers ``(query, fn)`` with the model as a ``StandingTap``, which taps every graph the
  model has built and every graph it builds later; its handle's ``remove()`` removes it
  everywhere.

Example:
    >>> handle = model.select("#Affine_1").tap(lambda name, value: print(name, value.shape))
    >>> model.predict(X[:8]); model.fit(train, cost, opt, 1)  # fires in both
    >>> handle.remove()
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ngraph_core as ng

from .layers import Layer

Path = tuple[str, ...]


# -- layer paths -----------------------------------------------------------------------------------------------
def layer_tree(top: Layer) -> list[tuple[Path, Layer]]:
    """Every layer under ``top`` (``top`` included) with its scope path, depth first, parents before children.

    Example:
        >>> [("/".join(p), type(l).__name__) for p, l in layer_tree(model.layers)][:2]
        [('Sequential_0', 'Sequential'), ('Sequential_0/Conv_0', 'Conv')]
    """
    found: list[tuple[Path, Layer]] = []
    stack: list[tuple[Path, Layer]] = [((top.name,), top)]
    while stack:
        path, layer = stack.pop()
        found.append((path, layer))
        children = list(getattr(layer, "sublayers", []))
        stack.extend(((*path, child.name), child) for child in reversed(children))
    return found


def scope_attrs_of(top: Layer) -> Callable[[Sequence[Any]], Mapping[str, Any]]:
    """A ``scope_attrs`` function for ``ng.select``: a scope path -> its layer's ``get_config()`` (``{}``: none).

    Example:
        >>> ng.select(y_hat, "Affine[nout=10]", scope_attrs=scope_attrs_of(model.layers))
    """
    layers = {path: layer for path, layer in layer_tree(top)}
    configs: dict[Path, Mapping[str, Any]] = {}

    def scope_attrs(path: Sequence[Any]) -> Mapping[str, Any]:
        key = tuple(getattr(entry, "name", entry) for entry in path)
        if key not in configs:
            layer = layers.get(key)
            configs[key] = _plain_config(layer) if layer is not None else {}
        return configs[key]

    return scope_attrs


def _plain_config(layer: Layer) -> Mapping[str, Any]:
    try:
        return dict(layer.get_config())
    except Exception:  # noqa: BLE001 - a layer without a config still matches by type and name
        return {"name": layer.name}


# -- standing taps ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class StandingTap:
    """A tap a model puts on every graph it builds: ``fn(name, array)`` for the ops ``query`` selects.

    Attributes:
        query: the selector.
        fn: called with each selected op's name and value, every run.
        handles: the per-graph tap handles (``Selection.tap``) placed so far.
    """

    query: str
    fn: Callable[[str, Any], Any]
    handles: list[Any] = field(default_factory=list)


class ModelTap:
    """The handle ``ModelSelection.tap`` returns: ``remove()`` takes the tap off every graph of the model.

    Example:
        >>> handle = model.select("#conv1").tap(record); ...; handle.remove()
    """

    def __init__(self, owner: TapOwner, tap: StandingTap) -> None:
        self._owner = owner
        self._tap = tap

    @property
    def active(self) -> bool:
        """True until ``remove()``."""
        return self._tap in self._owner.standing_taps

    def remove(self) -> None:
        """Remove the tap from every graph built so far, and stop putting it on new ones (idempotent)."""
        self._owner.remove_tap(self._tap)

    def __enter__(self) -> ModelTap:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<ModelTap {self._tap.query!r}{'' if self.active else ' (removed)'}>"


class TapOwner:
    """What a model needs for standing taps: a registry, and ``tap_graph`` for each graph it builds.

    Subclasses implement ``select_in(roots, query)`` (a selection over one graph) and
    ``built_graphs()`` (the roots of the graphs built so far), and call ``tap_graph(roots)``
    on every graph they build. ``new_tap_invalidates()`` drops compiled computations whose
    graphs are not listed by ``built_graphs`` (they rebuild, and get the tap then).
    """

    standing_taps: list[StandingTap]

    def select_in(self, roots: Sequence[ng.Op], query: str) -> Any:
        """The ``ng.Selection`` of ``query`` over the graph of ``roots``."""
        raise NotImplementedError

    def built_graphs(self) -> list[Sequence[ng.Op]]:
        """The roots of every graph built so far that is kept (a new tap is placed on each)."""
        return []

    def new_tap_invalidates(self) -> None:
        """Forget the computations ``built_graphs`` does not list (they are rebuilt with every tap)."""

    def tap_graph(self, roots: Sequence[ng.Op]) -> None:
        """Put every standing tap on the graph of ``roots`` (call it for each graph built)."""
        for tap in self.standing_taps:
            self._place(tap, roots)

    def add_tap(self, query: str, fn: Callable[[str, Any], Any]) -> ModelTap:
        """Register a standing tap and place it on every graph built so far.

        Returns:
            a ``ModelTap`` whose ``remove()`` takes it off everywhere.

        Raises:
            SelectorError: ``fn`` is not callable.
        """
        if not callable(fn):
            raise ng.SelectorError(f"model selection {query!r}: .tap: expected a callable fn(name, array), received "
                                   f"{type(fn).__name__}; hint: e.g. .tap(lambda name, a: print(name, a.shape))")
        tap = StandingTap(query, fn)
        self.standing_taps.append(tap)
        for roots in self.built_graphs():
            self._place(tap, roots)
        self.new_tap_invalidates()
        return ModelTap(self, tap)

    def remove_tap(self, tap: StandingTap) -> None:
        """Take ``tap`` off every graph (the computations holding those ops recompile on their next call)."""
        if tap in self.standing_taps:
            self.standing_taps.remove(tap)
        while tap.handles:
            tap.handles.pop().remove()

    def _place(self, tap: StandingTap, roots: Sequence[ng.Op]) -> None:
        selection = self.select_in(roots, tap.query)
        if len(selection):
            tap.handles.append(selection.tap(tap.fn))


# -- the selection a model hands out ---------------------------------------------------------------------------
class ModelSelection:
    """A ``Selection`` over a model's graph whose ``tap`` holds for every graph the model compiles.

    It holds what ``ng.select`` found in the model's inference graph at its built batch size
    plus its variables, and forwards everything to that selection (``len``, iteration,
    ``names``, ``ops``, ``variables``, ``roots``, ``set``, ``freeze``, ``unfreeze``,
    ``replace``). Because every graph of the model reads the same variables, ``freeze``,
    ``unfreeze`` and ``set`` on variables (``lr_scale``, ``weight_decay``) apply to every
    graph. ``set`` and ``replace`` on other ops change this graph only; ``tap`` is the one
    mutation re-applied to each graph: the model remembers ``(query, fn)`` and taps the ops
    the query selects in every graph built so far and later (other batch sizes, training).

    Attributes:
        query: the selector.
        selection: the ``ng.select`` result over the inference graph.

    Example:
        >>> sel = model.select("Conv > Pool variable")
        >>> sel.names, len(sel)
        >>> sel.freeze()
    """

    def __init__(self, owner: TapOwner, query: str, selection: Any) -> None:
        self._owner = owner
        self.query = query
        self.selection = selection

    def __len__(self) -> int:
        return len(self.selection)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.selection)

    def __getitem__(self, i: int | slice) -> Any:
        return self.selection[i]

    def __contains__(self, item: object) -> bool:
        return item in self.selection

    @property
    def names(self) -> list[str]:
        """The names of what was selected (ops and layer scopes), in graph order."""
        return self.selection.names

    @property
    def paths(self) -> list[str]:
        """Unambiguous names: an op's scope path then its name, a layer scope's path (see ``Selection.paths``)."""
        return self.selection.paths

    @property
    def ops(self) -> list[ng.Op]:
        """Every op selected, those inside selected layer scopes included."""
        return self.selection.ops

    @property
    def variables(self) -> list[ng.Op]:
        """The variables among ``ops``."""
        return self.selection.variables

    @property
    def outputs(self) -> list[ng.Op]:
        """The ops ``tap`` acts on in the inference graph: op items, and the ops leaving each selected scope."""
        return self.selection.outputs

    @property
    def roots(self) -> list[ng.Op]:
        """The graph roots the selection was made over (the inference output and the variables)."""
        return self.selection.roots

    def set(self, **attrs: Any) -> ModelSelection:
        """Set metadata attributes (``lr_scale=0.1``, ``weight_decay=0``) on the selected ops; see ``Selection.set``.

        Returns:
            this selection.
        """
        self.selection.set(**attrs)
        return self

    def freeze(self) -> list[ng.Op]:
        """Stop training the selected variables (in every graph: they are shared).

        Returns:
            the variables frozen now.
        """
        return self.selection.freeze()

    def unfreeze(self) -> list[ng.Op]:
        """Train the selected frozen variables again.

        Returns:
            the variables unfrozen now.
        """
        return self.selection.unfreeze()

    def replace(self, fn: Callable[[ng.Op], ng.Op]) -> list[ng.Op]:
        """``Selection.replace`` on the inference graph: its roots rebuilt with the selected ops replaced.

        It returns new ops and changes no graph the model builds (layers build as before).
        """
        return self.selection.replace(fn)

    def tap(self, fn: Callable[[str, Any], Any]) -> ModelTap:
        """Call ``fn(name, array)`` with the selected ops' values each time any computation of the model runs.

        The tap stands: it is placed on every graph the model built (inference at each batch
        size, training) and on every graph it builds later, selected by the same query.

        Args:
            fn: called with the op's name and its value (a NumPy array) after each run.

        Returns:
            a ``ModelTap``; ``remove()`` takes it off everywhere.

        Example:
            >>> handle = model.select("#Affine_0").tap(lambda name, v: print(name, v.mean()))
        """
        return self._owner.add_tap(self.query, fn)

    def __repr__(self) -> str:
        return f"<ModelSelection {self.query!r}: {len(self)} item(s)>"


# -- the summary -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a layer (its sub-layers included): trainable, frozen, other state (running averages)."""

    trainable: int
    frozen: int
    other: int

    @classmethod
    def of(cls, variables: Sequence[ng.Op]) -> ParamCounts:
        """The counts of these variables (each once)."""
        counts = {"trainable": 0, "frozen": 0, "other": 0}
        seen: set[int] = set()
        for var in variables:
            if id(var) in seen:
                continue
            seen.add(id(var))
            labels = var.meta.labels
            kind = "frozen" if "frozen" in labels else "trainable" if "trainable" in labels else "other"
            counts[kind] += math.prod(var.axes.lengths)
        return cls(**counts)


def layer_outputs(output: ng.Op) -> dict[Path, ng.Op]:
    """Per layer path, the op that leaves the layer in the graph of ``output``.

    An op leaves a layer when an op outside the layer's scope reads it, or it is ``output``;
    when several do, the last one in graph order.
    """
    order = ng.ordered_ops([output])
    paths = {id(op): tuple(entry.name for entry in op.meta.scope) for op in order}
    exits: dict[Path, ng.Op] = {}
    leaf = (ng.OpType.VARIABLE, ng.OpType.PLACEHOLDER, ng.OpType.CONSTANT)
    readers: dict[int, list[ng.Op]] = {}
    for op in order:
        for src in op.src:
            readers.setdefault(id(src), []).append(op)
    for op in order:
        if op.op in leaf:
            continue
        path = paths[id(op)]
        for depth in range(1, len(path) + 1):
            prefix = path[:depth]
            leaves = op is output or any(paths[id(r)][:depth] != prefix for r in readers.get(id(op), []))
            if leaves:
                exits[prefix] = op  # graph order: a later exit replaces an earlier one
    return exits


def format_summary(top: Layer, output: ng.Op, report: Any, batch: int, max_depth: int | None = None) -> str:
    """The summary table (see ``Model.summary``) of layer tree ``top`` built into ``output``.

    Args:
        top: the model's top layer.
        output: the inference graph's output op.
        report: the inference computation's ``memory_report()``.
        batch: the batch size of that computation.
        max_depth: show layers down to this depth (1: the top layer's children); None: all.

    Returns:
        the table: one row per layer (name indented by depth, type, output axes without the batch,
        trainable and frozen parameters, and running-average state when any layer keeps some),
        then the totals and the memory plan's arena, no-reuse and variable bytes.
    """
    outputs = layer_outputs(output)
    total = ParamCounts.of(top.variables)
    with_state = total.other > 0  # a column for running averages only when some layer keeps them
    rows = [("Layer", "Type", "Output (per sample)", "Trainable", "Frozen", *(("State",) if with_state else ()))]
    for path, layer in layer_tree(top):
        depth = len(path) - 1
        if max_depth is not None and depth > max_depth:
            continue
        counts = ParamCounts.of(layer.variables)
        out = outputs.get(path)
        shape = ", ".join(f"{a.name}:{a.length}" for a in out.axes if not a.is_batch) if out is not None else "-"
        rows.append(("  " * depth + layer.name, type(layer).__name__, f"({shape})", f"{counts.trainable:,}",
                     f"{counts.frozen:,}", *((f"{counts.other:,}",) if with_state else ())))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = (False, False, False, True, True, True)

    def line(row: Sequence[str]) -> str:
        return "  ".join(cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right)).rstrip()

    rule = "-" * len(line(rows[0]))
    text = [line(rows[0]), rule, *(line(row) for row in rows[1:]), rule,
            f"Trainable params: {total.trainable:,}",
            f"Frozen params: {total.frozen:,}",
            f"Other state (running averages...): {total.other:,}",
            f"Total: {total.trainable + total.frozen + total.other:,}",
            rule,
            f"Inference memory plan (batch {batch}):",
            f"  arena: {_bytes(report.arena_bytes)}",
            f"  without reuse: {_bytes(report.unplanned_bytes)} ({report.reuse_ratio:.2f}x the arena)",
            f"  variables: {_bytes(report.persistent_bytes)}"]
    return "\n".join(text)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"
