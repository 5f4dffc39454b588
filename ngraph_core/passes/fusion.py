"""Element-wise fusion: chains of element-wise ops become one ``fused`` op.

Grouping (reverse topological order): an element-wise op joins the group of its
consumers when every consumer is in that one group, it is not a result, and it has
the group's axes and float dtype; otherwise it roots a new group. Groups of two
or more ops become one ``fused`` op whose sources are the group's external
inputs (scalar constants are inlined). A ``dot`` or ``conv`` feeding the group, used
only there (a conv also through a ``cast_axes`` that only renames its axes), becomes the
group's head (``FusedProgram.head``; its operands are sources 0 and 1): one op then
computes dot/conv + bias + activation, the head writing into the output buffer
(``kernels/contraction.dot_into``, ``kernels/conv.conv_into``) and the element-wise
epilogue running over it in place while it is in cache. The kernel evaluates the
program in cache-sized blocks (``transformers/kernels/fused.py``).

Measured on a conv + bias + relu forward: the conv as the head saves about 8%, the
separate pass over the output; the GEMM dominates either way (figures:
benchmarks/RESULTS.md, "Behind the code: passes/fusion.py"). It also drops the conv's own output buffer from the
memory plan.

Fusion runs after autodiff, so ``fused`` ops need no gradient rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import FusedProgram, Op, OpGroup, OpType, consumers, is_float, rebuild, toposort
from ..pattern import scalar_value

FUSIBLE = OpGroup.ELEMENTWISE - {OpType.STOP_GRADIENT, OpType.CAST}


def _fusible(op: Op) -> bool:
    return op.op in FUSIBLE and is_float(op.dtype) and all(s.dtype == op.dtype for s in op.src)


def _inline_constant(op: Op) -> float | None:
    return scalar_value(op) if (op.op is OpType.CONSTANT and not op.axes) or op.op is OpType.BROADCAST else None


def _groups(order: Sequence[Op], results: set[Op]) -> dict[Op, list[Op]]:
    users = consumers(order)
    group_of: dict[Op, Op] = {}
    for op in reversed(order):
        if not _fusible(op):
            continue
        us = users[op]
        roots = {group_of.get(u) for u in us}
        if op not in results and us and None not in roots and len(roots) == 1:
            root = roots.pop()
            if root.axes == op.axes and root.dtype == op.dtype:
                group_of[op] = root
                continue
        group_of[op] = op
    members: dict[Op, list[Op]] = {}
    for op in order:  # topological order within each group
        if op in group_of:
            members.setdefault(group_of[op], []).append(op)
    return {root: ops for root, ops in members.items() if len(ops) > 1}


HEADS = frozenset({OpType.DOT, OpType.CONV})


def _head(members: list[Op], users: dict[Op, list[Op]], results: set[Op]) -> tuple[Op | None, Op | None]:
    """The group's head (a ``dot`` or ``conv`` used only by one member), and the renaming it is read through
    (or None): an imported model's conv feeds its bias through a ``cast_axes`` to fresh axis names, which
    changes no element's place when the lengths keep their order. (A conv kernel writes by position; a dot's
    reads its output's axis names, so a dot is a head only under its own axes.)"""
    for op in members:
        for s in op.src:
            view = None
            if (s.op is OpType.CAST_AXES and s.src[0].op is OpType.CONV and users[s] == [op] and s not in results
                    and s.axes.lengths == s.src[0].axes.lengths and users[s.src[0]] == [s]):
                s, view = s.src[0], s
            if (s.op in HEADS and s.axes.lengths == op.axes.lengths and (view is not None or s.axes == op.axes)
                    and s.dtype == op.dtype and s not in results and users[s] == [op if view is None else view]
                    and all(x.dtype == s.dtype for x in s.src)):
                return s, view
    return None, None


def _program(root: Op, members: list[Op], head: Op | None, view: Op | None = None
             ) -> tuple[FusedProgram, list[Op]]:
    index = {op: j for j, op in enumerate(members)}
    first = 2 if head is not None else 0  # input refs count the head's operands too
    inputs: list[Op] = []
    steps = []
    for op in members:
        refs = []
        for s in op.src:
            value = _inline_constant(s)
            if s in index:
                refs.append(("t", index[s]))
            elif s is head or (view is not None and s is view):
                refs.append(("d",))
            elif value is not None:
                refs.append(("c", value))
            else:
                if s not in inputs:
                    inputs.append(s)
                refs.append(("in", first + inputs.index(s)))
        steps.append((op.op, tuple(refs)))
    src = list(head.src) + inputs if head is not None else inputs
    kind = head.op if head is not None else None
    return FusedProgram(tuple(steps), dot=kind is OpType.DOT, conv=head.arg if kind is OpType.CONV else None), src


def fuse_elementwise(roots: list[Op]) -> list[Op]:
    """Replace each fusible element-wise group (and its ``dot`` or ``conv`` head) by one ``fused`` op."""
    order = toposort(roots)
    results = set(roots)
    users = consumers(order)
    fused: dict[Op, tuple[FusedProgram, list[Op]]] = {}
    for root, members in _groups(order, results).items():
        fused[root] = _program(root, members, *_head(members, users, results))
    if not fused:
        return roots
    new: dict[Op, Op] = {}

    def fuse(op: Op, cur: Op) -> Op:  # bottom-up, so a group's inputs are already in ``new``
        if op not in fused:
            return cur
        program, src = fused[op]
        return Op(OpType.FUSED, [new[s] for s in src], op.axes, op.dtype, program, name=op.meta.name,
                  labels=op.meta.labels, scope=op.meta.scope)

    rebuild(order, fuse, new)
    return [new[r] for r in roots]
