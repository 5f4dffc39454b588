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

from ..ir import Op, OpType, toposort


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


def linearize(results: Sequence[Op]) -> list[Op]:
    """Every op the ``results`` need, in execution order (see the module docstring)."""
    control = control_dependencies(toposort(results))

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
