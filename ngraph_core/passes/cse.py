"""Common-subexpression elimination across scopes.

Hash-consing already makes equal structure within one scope one object. The scope is
part of an op's identity (two layers never share an op while the model is built), so
``tanh(x)`` built in ``Affine_0`` and in ``Affine_1`` are two ops. Once the graph is
built, computing it twice is waste: this pass keeps the first of such ops in
topological order (with its own name, scope and labels) and points every user of the
others at it.

Never merged: ops that carry a unique id (variables, placeholders, random ops — they
differ by ``arg`` anyway, and the exclusion says so) and ``assign`` (an effect is kept
where the user wrote it).
"""

from __future__ import annotations

from typing import Any

from ..ir import Op, OpGroup, OpType, rebuild, toposort

NEVER_MERGED = OpGroup.RANDOM | {OpType.VARIABLE, OpType.PLACEHOLDER, OpType.ASSIGN}


def structure(op: Op) -> tuple[Any, ...]:
    """What two ops must share to compute the same value: everything but the metadata."""
    return op.op, op.src, op.axes, op.dtype, op.arg


def cse(roots: list[Op]) -> list[Op]:
    """The graph below ``roots`` with ops of equal structure (in any scopes) merged into one.

    Args:
        roots: the results of a computation.

    Returns:
        the roots, each op computed once; the survivor of a merge is the first in
        topological order and keeps its metadata.

    Example:
        >>> with ng.name_scope("a"): ya = ng.tanh(x)
        >>> with ng.name_scope("b"): yb = ng.tanh(x)
        >>> cse([ya, yb])  # [ya, ya]
    """
    first: dict[tuple[Any, ...], Op] = {}
    new = rebuild(toposort(roots), lambda op, cur: cur if cur.op in NEVER_MERGED
                  else first.setdefault(structure(cur), cur))
    return [new[r] for r in roots]
