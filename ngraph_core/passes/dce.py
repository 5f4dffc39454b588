"""Dead-code elimination inside ``sequential`` and ``doall``.

Ops nothing reads are already gone (a graph is what its roots reach). What is left
are values computed for nothing: the non-last elements of a ``sequential`` and the
elements of a ``doall`` run only for their side effects, so an element without one
is dead. An element has a side effect when an *effective* ``assign`` is in its
closure; ``assign(v, v)`` writes a variable into itself and counts as none, unless
something else writes ``v`` too (then it may restore ``v``'s old value).

A dead element still orders things: ``sequential([y, assign(v, 5), y + 1])`` needs
``y`` from before the assign, and an op after an ``assign(v, v)`` runs after the
other assignments (the run order of ``api/control.py``, implemented by
``passes/linearize.py``). So each drop is checked against the schedule: it is kept
only when the effective assigns still run in the same order and every op that reads
a written variable still runs after exactly the same ones (``schedule``). Where the
graph writes no variable, order cannot matter and every dead element goes.

A ``doall`` must keep a source: one left with none becomes ``doall([0.0])``, still an
op whose value is nothing, now computing nothing.
"""

from __future__ import annotations

from .. import api
from ..ir import Op, OpType, rebuild, scope_override, toposort
from .linearize import linearize


def effective_assigns(ops: list[Op]) -> set[Op]:
    """The assigns among ``ops`` that may change a variable.

    ``assign(v, v)`` changes nothing only when nothing else writes ``v``: its read of ``v``
    may otherwise mean the value from before another update (rule 3 of ``api/control.py``),
    so that it restores the old value.
    """
    assigns = [op for op in ops if op.op is OpType.ASSIGN]
    written = {a.src[0] for a in assigns if a.src[1] is not a.src[0]}
    return {a for a in assigns if a.src[1] is not a.src[0] or a.src[0] in written}


def effects(ops: list[Op]) -> dict[Op, bool]:
    """For each op (given in topological order), whether its closure holds an effective ``assign``."""
    writes = effective_assigns(ops)
    effect: dict[Op, bool] = {}
    for op in ops:
        effect[op] = op in writes or any(effect[s] for s in op.src)
    return effect


def schedule(roots: list[Op]) -> tuple[list[Op], dict[Op, int]]:
    """The effective assigns in run order, and for each op how many of them run before it."""
    order = linearize(roots)
    writes = effective_assigns(order)
    assigns: list[Op] = []
    before: dict[Op, int] = {}
    for op in order:
        before[op] = len(assigns)
        if op in writes:
            assigns.append(op)
    return assigns, before


def _drop_all(order: list[Op], roots: list[Op], effect: dict[Op, bool], keep: set[Op]) -> tuple[list[Op], dict]:
    """One rebuild dropping every dead element of every doall/sequential, except the elements in ``keep``."""

    def drop(op: Op, cur: Op) -> Op:
        if op.op not in (OpType.DOALL, OpType.SEQUENTIAL):
            return cur
        last = len(op.src) - (op.op is OpType.SEQUENTIAL)  # a sequential's value (its last) always stays
        kept = tuple(c for i, (s, c) in enumerate(zip(op.src, cur.src)) if i >= last or effect[s] or s in keep)
        if kept == cur.src:
            return cur
        if op.op is OpType.SEQUENTIAL:
            return kept[0] if len(kept) == 1 else cur.replace(src=kept)
        if kept:
            return cur.replace(src=kept)
        if len(cur.src) == 1 and cur.src[0].op is OpType.CONSTANT:  # doall([0.0]) is as small as it gets
            return cur
        with scope_override(op.meta.scope):
            return cur.replace(src=(api.constant(0.0),))

    new = rebuild(order, drop)
    return [new[r] for r in roots], new


def _closure_holders(order: list[Op], moved: set[Op]) -> set[Op]:
    """The ops whose closure holds one of ``moved``."""
    holds: set[Op] = set()
    for op in order:
        if op in moved or any(s in holds for s in op.src):
            holds.add(op)
    return holds


def dce(roots: list[Op]) -> list[Op]:
    """The graph below ``roots`` without the dead elements of its ``sequential`` and ``doall`` ops.

    Every dead element goes in one rebuild, and the schedule is checked once. Where a drop
    moved a read of a written variable across an assign (an element whose value is read
    later, after an update), the elements holding the moved ops are put back and the check
    runs again; that loop only ever restores, so it ends, in practice after one or two
    linearizations whatever the graph's size (the old pass linearized after every drop).

    Args:
        roots: the results of a computation.

    Returns:
        the roots; every effect, and every value they observe, is unchanged.

    Example:
        >>> dce([ng.doall([ng.assign(v, v + 1), v * 2])])  # [doall([assign(v, v + 1)])]
    """
    roots = list(roots)
    order = toposort(roots)
    effect = effects(order)
    elements = {s for op in order if op.op in (OpType.DOALL, OpType.SEQUENTIAL) for s in op.src if not effect[s]}
    if not elements:
        return roots
    assigns, before = schedule(roots)
    written = {a.src[0] for a in assigns}
    reads: dict[Op, bool] = {}  # reads a written variable (directly or through its sources)
    for op in order:
        reads[op] = op in written or any(reads[s] for s in op.src)
    keep: set[Op] = set()
    while True:
        dropped, mapping = _drop_all(order, roots, effect, keep)
        if not assigns:
            return dropped
        new_assigns, new_before = schedule(dropped)
        if [mapping[a] for a in assigns] != new_assigns:
            return roots  # cannot happen for dead elements (no effective assign); be safe anyway
        moved = {o for o, n in before.items() if reads[o] and mapping[o] in new_before and new_before[mapping[o]] != n}
        if not moved:
            return dropped
        restore = _closure_holders(order, moved) & elements - keep
        if not restore:
            return roots
        keep |= restore
