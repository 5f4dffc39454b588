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

from collections.abc import Iterator

from .. import api as ng
from ..ir import Op, OpType, scope_override, toposort
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


def _candidates(op: Op, effect: dict[Op, bool]) -> Iterator[Op]:
    """``op`` with one dead element removed, for each dead element it has."""
    if op.op is OpType.DOALL:
        for i, element in enumerate(op.src):
            rest = op.src[:i] + op.src[i + 1:]
            if effect[element]:
                continue
            if rest:
                yield op.replace(src=rest)
            elif element.op is not OpType.CONSTANT:  # doall([0.0]) is as small as it gets
                with scope_override(op.meta.scope):
                    yield op.replace(src=(ng.constant(0.0),))
    elif op.op is OpType.SEQUENTIAL:
        for i, element in enumerate(op.src[:-1]):
            if not effect[element]:
                rest = op.src[:i] + op.src[i + 1:]
                yield rest[0] if len(rest) == 1 else op.replace(src=rest)


def _replaced(order: list[Op], roots: list[Op], old: Op, new: Op) -> tuple[list[Op], dict[Op, Op]]:
    mapping: dict[Op, Op] = {}
    for op in order:
        src = tuple(mapping[s] for s in op.src)
        mapping[op] = new if op is old else op if src == op.src else op.replace(src=src)
    return [mapping[r] for r in roots], mapping


class _Graph:
    """One state of the graph, and whether a rewrite of it keeps the schedule."""

    def __init__(self, roots: list[Op]) -> None:
        self.roots = roots
        self.order = toposort(roots)
        self.effect = effects(self.order)
        self.assigns, self.before = schedule(roots)
        written = {a.src[0] for a in self.assigns}
        self.reads: dict[Op, bool] = {}  # reads a written variable (directly or through sources)
        for op in self.order:
            self.reads[op] = op in written or any(self.reads[s] for s in op.src)

    def keeps_schedule(self, roots: list[Op], mapping: dict[Op, Op]) -> bool:
        if not self.assigns:
            return True
        assigns, before = schedule(roots)
        if [mapping[a] for a in self.assigns] != assigns:
            return False
        return all(before[mapping[o]] == n for o, n in self.before.items() if self.reads[o] and mapping[o] in before)

    def first_drop(self) -> list[Op] | None:
        """The roots after the first drop that keeps the schedule, or None."""
        for op in self.order:
            for new in _candidates(op, self.effect):
                roots, mapping = _replaced(self.order, self.roots, op, new)
                if self.keeps_schedule(roots, mapping):
                    return roots
        return None


def dce(roots: list[Op]) -> list[Op]:
    """The graph below ``roots`` without the dead elements of its ``sequential`` and ``doall`` ops.

    Args:
        roots: the results of a computation.

    Returns:
        the roots; every effect, and every value they observe, is unchanged.

    Example:
        >>> dce([ng.doall([ng.assign(v, v + 1), v * 2])])  # [doall([assign(v, v + 1)])]
    """
    roots = list(roots)
    while (dropped := _Graph(roots).first_drop()) is not None:  # one at a time: each changes the next
        roots = dropped
    return roots
