"""A readable, SSA-like text form of a graph; ``Op.__repr__`` uses it.

    %0 = placeholder [C:4, N:32] float32  # X
    %1 = variable [C:4] float32  # W
    %2 = dot(%1, %0) [N:32] float32
"""

from __future__ import annotations

from collections.abc import Iterable

from .node import Op, toposort
from .ops import OpType


def _arg_text(op: Op) -> str:
    if op.arg is None or op.op in (OpType.PLACEHOLDER,):
        return ""
    return f" {{{op.arg!r}}}"


def _meta_text(op: Op) -> str:
    parts = []
    if op.meta.name:
        parts.append(op.meta.name)
    if op.meta.scope:
        parts.append("in " + "/".join(str(s) for s in op.meta.scope))
    if op.meta.labels:
        parts.append("." + ".".join(sorted(op.meta.labels)))
    return f"  # {' '.join(parts)}" if parts else ""


def format_op(op: Op, names: dict[Op, str] | None = None) -> str:
    """One line for ``op``; sources are shown by ``names`` (default: their op names)."""
    names = names or {}
    src = ", ".join(names.get(s, f"<{s.op.value}>") for s in op.src)
    call = f"{op.op.value}({src})" if op.src else op.op.value
    return f"{call}{_arg_text(op)} {op.axes} {op.dtype}{_meta_text(op)}"


def format_graph(roots: Op | Iterable[Op]) -> str:
    """The whole graph below ``roots``, one ``%i = ...`` line per op in topological order."""
    roots = [roots] if isinstance(roots, Op) else list(roots)
    names: dict[Op, str] = {}
    lines = []
    for i, op in enumerate(toposort(roots)):
        names[op] = f"%{i}"
        lines.append(f"%{i} = {format_op(op, names)}")
    lines.append("return " + ", ".join(names[r] for r in roots))
    return "\n".join(lines)
