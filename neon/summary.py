"""The table ``Model.summary`` prints: layers by depth, output axes, parameter counts, the memory plan.

``Model.summary`` (``neon/model_inspection.py``) is thin; the table is built here from the
layer tree (``neon.selection.layer_tree``), the op that leaves each layer in the inference
graph (``layer_outputs``) and the inference computation's ``memory_report()``.

Example:
    >>> print(format_summary(model.layers, y_hat, computation.memory_report(), batch=32, max_depth=1))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ngraph_core as ng

from .layers import Layer
from .selection import Path, layer_tree


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
