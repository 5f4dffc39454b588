"""Dead-code elimination inside ``sequential`` and ``doall``.

Ops nothing reads are already gone (a graph is what its roots reach). What is left
are values computed for nothing: the non-last elements of a ``sequential`` and the
elements of a ``doall`` are run only for their side effects, so an element without
one is dead. An element has a side effect when an *effective* ``assign`` is in its
closure; ``assign(v, v)`` writes a variable into itself and counts as none.

Two details keep the run order of ``api/control.py`` intact:

* A pure non-last element of a ``sequential`` is dropped only when no op it is the
  first to need is used elsewhere. Otherwise that op would be computed at another
  time, and may read a variable from before or after an assign it used not to
  (``sequential([y, assign(v, 5), y + 1])`` needs ``y`` from before the assign).
* A ``doall`` must keep a source. One left with no effect at all becomes
  ``doall([0.0])``: still a valid op whose value is nothing, now computing nothing.
"""

from __future__ import annotations

from .. import api as ng
from ..ir import Op, OpType, scope_override, substitute, toposort


def effects(ops: list[Op]) -> dict[Op, bool]:
    """For each op (in topological order), whether its closure holds an effective ``assign``."""
    effect: dict[Op, bool] = {}
    for op in ops:
        writes = op.op is OpType.ASSIGN and op.src[1] is not op.src[0]
        effect[op] = writes or any(effect[s] for s in op.src)
    return effect


def _reachable_without(roots: list[Op], owner: Op, index: int) -> set[Op]:
    """The ops ``roots`` reach when the edge from ``owner`` to its source ``index`` is cut."""
    seen: set[Op] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(s for i, s in enumerate(op.src) if op is not owner or i != index)
    return seen


def _droppable_step(roots: list[Op], seq: Op, effect: dict[Op, bool]) -> int | None:
    """The index of a non-last element of ``seq`` that DCE may drop, or None."""
    earlier: set[Op] = set()
    for i, element in enumerate(seq.src[:-1]):
        closure = toposort([element])
        if not effect[element]:
            introduced = {o for o in closure if o.src and o not in earlier}
            if not introduced & _reachable_without(roots, seq, i):
                return i
        earlier.update(closure)
    return None


def _pruned(roots: list[Op], op: Op, effect: dict[Op, bool]) -> Op | None:
    """``op`` without its dead elements, or None when it has none."""
    if op.op is OpType.DOALL:
        live = [s for s in op.src if effect[s]]
        if len(live) == len(op.src):
            return None
        if not live:
            with scope_override(op.meta.scope):
                live = [ng.constant(0.0)]
            if tuple(live) == op.src:
                return None
        return op.replace(src=tuple(live))
    if op.op is OpType.SEQUENTIAL:
        i = _droppable_step(roots, op, effect)
        if i is None:
            return None
        rest = op.src[:i] + op.src[i + 1:]
        return rest[0] if len(rest) == 1 else op.replace(src=rest)
    return None


def dce(roots: list[Op]) -> list[Op]:
    """The graph below ``roots`` without the dead elements of its ``sequential`` and ``doall`` ops.

    Args:
        roots: the results of a computation.

    Returns:
        the roots; every effect and every observed value is unchanged.

    Example:
        >>> dce([ng.doall([ng.assign(v, v + 1), v * 2])])  # [doall([assign(v, v + 1)])]
    """
    roots = list(roots)
    while True:  # one removal at a time: each changes what the next may see
        order = toposort(roots)
        effect = effects(order)
        change = next(((op, new) for op in order if (new := _pruned(roots, op, effect)) is not None), None)
        if change is None:
            return roots
        roots = substitute(roots, {change[0]: change[1]})
