"""Selections over a model's graph: layer paths, standing taps, and the ``ModelSelection`` ``Model.select`` returns.

``Model.select`` (``neon/model_inspection.py``) is thin; the machinery is here.

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
