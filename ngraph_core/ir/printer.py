"""A readable, SSA-like text form of a graph, one ``format_op`` line (``ir/node.py``, ``Op.__repr__``) per op.

    %0 = placeholder [C:4, N:32] float32  # X
    %1 = variable [C:4] float32  # W
    %2 = dot(%1, %0) [N:32] float32
"""

from __future__ import annotations

from collections.abc import Iterable

from .node import Op, format_op, toposort


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
