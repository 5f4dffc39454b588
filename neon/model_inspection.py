"""The half of ``Model`` that looks inside it: ``select``, ``summary``, ``memory_plot`` and the
protocols that ``ng.select``, ``ng.viz.render`` and ``ng.inference`` read a model through.

``ModelInspection`` is a mixin of ``neon.model.Model``. It reads the model only through public
names ``Model`` defines: ``layers``, ``variables``, ``transformer``, ``require_built``,
``inference_graph``, ``inference_computation``, ``training_computations`` and ``built_batch``.
``ModelError`` lives here because both halves of ``Model`` and ``neon.saving`` raise it
(``neon.model`` re-exports it). The machinery behind these methods is in ``neon/selection.py``
(layer paths, ``ModelSelection``, standing taps) and ``neon/summary.py`` (the summary table).

Example:
    >>> model.build((1, 28, 28), batch_size=32)
    >>> print(model.summary()); model.select("Conv > Pool variable").freeze()
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

import ngraph_core as ng

from .selection import ModelSelection, scope_attrs_of
from .summary import format_summary

__all__ = ["ModelError", "ModelInspection"]


class ModelError(ng.NgraphError, ValueError):
    """The model was used in a way it cannot support (unbuilt, bad arguments, a mismatched optimizer)."""


class ModelInspection:
    """``Model``'s queries and pictures (see the module docstring)."""

    def __ngraph_inference__(self, batch_size: int) -> tuple[list[ng.Op], list[ng.Op], dict[ng.Op, np.ndarray]]:
        """The inference graph for ``batch_size`` samples and the current weights
        (``ng.inference.compile_for_inference`` reads a model through this).

        Returns:
            ``(input placeholders, [output], {variable: its current value})``.

        Raises:
            ModelError: the model is not built yet.

        Example:
            >>> compiled = ng.inference.compile_for_inference(model, precision="fp16")
        """
        self.require_built("__ngraph_inference__")
        inputs, y_hat = self.inference_graph(int(batch_size))
        values = {v: self.transformer.read_variable(v) for v in ng.ordered_ops([y_hat]) if v.op is ng.OpType.VARIABLE}
        return list(inputs), [y_hat], values

    # -- looking inside -------------------------------------------------------------------------------
    def __ngraph_ops__(self) -> list[ng.Op]:
        """The roots of the model's graph: the inference output at the built batch size, then any variable
        it does not read (``select`` and ``ng.viz.render`` read a model through this).

        Only variables outside the output's graph are roots: a root counts as an output of its
        scope, and a tap on a layer must see the layer's output, not its weights.
        """
        _, y_hat = self.inference_graph(self.built_batch)
        reached = {id(op) for op in ng.ordered_ops([y_hat])}
        return [y_hat, *(v for v in self.variables if id(v) not in reached)]

    def select(self, query: str, unknown_types: str = "warn") -> ModelSelection:
        """The ops and layer scopes of the model's graph that a CSS-like ``query`` matches (docs/selectors.md).

        The graph is the inference graph at the batch size the model was built with, plus the
        variables. Capitalized names are layer types (``Conv`` matches subclasses), lowercase
        names op kinds; attribute tests on layers read their ``get_config()``
        (``Affine[nout=10]``). ``freeze``/``unfreeze``/``set`` on variables hold for every
        graph the model compiles (they share the variables); ``tap`` stands for every graph,
        built before or later — training, inference, other batch sizes (``ModelSelection``).

        Args:
            query: e.g. ``"Conv > Pool variable"``, ``".elementwise:not(Conv *)"``, ``"#conv1"``.
            unknown_types: a layer type the model does not have (``"Afine"``) selects nothing:
                ``"warn"`` (a ``SelectorWarning`` with the closest types), ``"error"`` or ``"ignore"``.

        Returns:
            a ``ModelSelection``.

        Raises:
            ModelError: the model is not built yet.
            SelectorError: a malformed query (pointing at the column), or (``unknown_types="error"``)
                a layer type the model does not have.

        Example:
            >>> model.select("Conv > Pool variable").freeze()
            >>> model.select(".bias").set(weight_decay=0)
            >>> handle = model.select("#Affine_1").tap(lambda name, a: print(name, a.shape))
        """
        self.require_built("select")
        return ModelSelection(self, query, self.select_in(self.__ngraph_ops__(), query, unknown_types))

    def select_in(self, roots: Sequence[ng.Op], query: str, unknown_types: str = "ignore") -> ng.Selection:
        """``ng.select`` over one of the model's graphs, with layer configs as scope attributes (unknown
        layer types are reported once, by ``select``, not again for every graph a selection reaches)."""
        return ng.select(roots, query, scope_attrs=scope_attrs_of(self.layers), unknown_types=unknown_types)

    def summary(self, max_depth: int | None = None) -> str:
        """A table of the layers (indented by depth), their types, output axes and parameter counts, then
        the totals and the memory plan of the inference computation at the built batch size.

        Args:
            max_depth: list layers down to this depth (1: the top layer's children); None: every layer.

        Returns:
            the table as a string (``print(model.summary())``).

        Raises:
            ModelError: the model is not built yet.

        Example:
            >>> model.build((1, 28, 28), batch_size=32)
            >>> print(model.summary(max_depth=1))
        """
        self.require_built("summary")
        comp, y_hat = self.inference_computation(self.built_batch)
        return format_summary(self.layers, y_hat, comp.memory_report(), self.built_batch, max_depth)

    def memory_plot(self, path: str | Path, which: str = "inference") -> Path:
        """Draw the memory plan of the model's inference or training computation as a PNG (``ng.viz.memory_plot``).

        Args:
            path: the PNG file (its folder must exist).
            which: ``"inference"`` (at the built batch size) or ``"training"`` (the training
                computation of the largest batch compiled; needs a prior ``fit``).

        Returns:
            ``path`` as a ``Path``.

        Raises:
            ModelError: an unknown ``which``, an unbuilt model, or ``"training"`` before any ``fit``.

        Example:
            >>> model.memory_plot("out/train_memory.png", which="training")
        """
        if which not in ("inference", "training"):
            raise ModelError(f"Model.memory_plot: expected which='inference' or 'training', received {which!r}")
        self.require_built("memory_plot")
        if which == "inference":
            comp, _ = self.inference_computation(self.built_batch)
        else:
            compiled = self.training_computations()  # (N, shapes...) -> computation
            if not compiled:
                raise ModelError("Model.memory_plot: no training computation is compiled yet; hint: call "
                                 "model.fit(...) first, or plot which='inference'")
            comp = compiled[max(compiled, key=lambda key: key[0])]  # the largest batch: not a last partial one
        return ng.viz.memory_plot(comp, path)
