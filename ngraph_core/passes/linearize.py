"""Linearization: the order in which a computation's ops run (an analysis: graph -> list).

Rules (documented for users in ``api/control.py``):

1. An op runs after its sources.
2. ``sequential([s1, ..., sk])``: the ops only ``s_i`` needs (not needed by an
   earlier element) run after ``s_(i-1)`` — a control dependency.
3. An op is *late* when it is an ``assign`` or depends, by data or control, on one.
   Every op that is not late runs before any late op; late ops run in the
   depth-first order of the results (so a ``doall``'s assignments run in list order).
   Hence gradients read the weights from before the update.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Op, OpGroup, OpType, toposort


def control_dependencies(ops: Sequence[Op]) -> dict[Op, list[Op]]:
    """For each op with one, the ops that must run before it besides its sources (rule 2)."""
    control: dict[Op, list[Op]] = {}
    for op in ops:
        if op.op is not OpType.SEQUENTIAL:
            continue
        seen = set(toposort([op.src[0]]))
        for prev, cur in zip(op.src, op.src[1:]):
            for o in toposort([cur]):
                if o in seen:
                    continue
                seen.add(o)
                if o.src:
                    control.setdefault(o, []).append(prev)
    return control


def linearize(results: Sequence[Op], control: dict[Op, list[Op]] | None = None) -> list[Op]:
    """Every op the ``results`` need, in execution order (see the module docstring)."""
    control = control_dependencies(toposort(results)) if control is None else control

    def deps(op: Op) -> tuple[Op, ...]:
        return op.src + tuple(control.get(op, ()))

    # one depth-first walk over data and control edges gives a valid order ...
    order: list[Op] = []
    placed: set[Op] = set()
    stack = [(r, 0) for r in reversed(results)]
    while stack:
        op, i = stack.pop()
        if op in placed:
            continue
        d = deps(op)
        if i < len(d):
            stack.append((op, i + 1))
            stack.append((d[i], 0))
        else:
            placed.add(op)
            order.append(op)
    # ... and its early ops, then its late ops, is one too (early ops never depend on late ones)
    late: set[Op] = set()
    for op in order:
        if op.op is OpType.ASSIGN or any(d in late for d in deps(op)):
            late.add(op)
    return [op for op in order if op not in late] + [op for op in order if op in late]


def viewed_variable(op: Op) -> Op | None:
    """The variable whose storage ``op``'s value may share (the variable itself, or a view of it)."""
    while op.op in OpGroup.VIEW or op.op in (OpType.VARIABLE, OpType.ASSIGN):
        if op.op is OpType.VARIABLE:
            return op
        op = op.src[-1] if op.op is OpType.SEQUENTIAL else op.src[0]
    return None


def snapshot_reads(order: Sequence[Op], control: dict[Op, list[Op]]) -> set[Op]:
    """Early values that a late op reads after an assign overwrote the variable they view.

    By rule 3 such a value means the variable *before* the update (``doall([assign(a, b),
    assign(b, a)])`` swaps), unless the reader is ordered after that assign by data or by
    ``sequential`` (then it means the new contents). The executor copies these values
    when they are computed, for their late readers.
    """
    after: dict[Op, set[Op]] = {}  # the assigns each op is ordered after
    assigns_so_far: list[Op] = []
    late = False
    needed: set[Op] = set()
    for op in order:
        deps = op.src + tuple(control.get(op, ()))
        after[op] = set().union(*(after[d] | ({d} if d.op is OpType.ASSIGN else set()) for d in deps)) if deps \
            else set()
        late = late or op.op is OpType.ASSIGN
        if late:
            for s in op.src[1:] if op.op is OpType.ASSIGN else op.src:
                var = viewed_variable(s)
                if var is None or s.op is OpType.ASSIGN:
                    continue
                if any(a.src[0] is var and a not in after[op] for a in assigns_so_far):
                    needed.add(s)
        if op.op is OpType.ASSIGN:
            assigns_so_far.append(op)
    return needed
