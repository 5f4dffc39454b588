"""Scan sequence layout: an element-wise sequence a scan reads is computed with the recurrent axis first.

A scan reads each sequence one step at a time, ``x[..., t, ...]``. With the recurrent axis
in the middle (``[G, REC, N]``, how ``dot(W_x, x)`` of a ``[F, REC, N]`` input comes out) a
step is ``G`` rows of ``N`` values, ``T*N`` values apart: every row is on another page, and
the hardware prefetcher, which stops at page boundaries, fetches none of them. When such a
sequence is computed by an element-wise op (the input projection plus its bias, say), this
pass has the op write its result with the recurrent axis first instead (its operands are
read through strided views, once, in one pass that runs anyway); the scan then slices one
contiguous block per step, and any other reader sees the result through a reorder view.
An operand that is a ``dot`` read only there is itself computed in that order (a ``dot`` op
with a chosen output order: one batched matmul, ``kernels/contraction.dot_into``), so the
element-wise op reads it contiguously too. Sequences that are placeholders, variables or
views are left as they are: a reorder of them would be a copy this pass does not add.

Measured on the issue-10 LSTM step: the step's ``x_t + W_h h`` add took a quarter of its time before,
and the projection itself costs what it did, where a plain reorder of the add cost about half the
projection (figures: benchmarks/RESULTS.md, "Behind the code: passes/scan_layout.py").
"""

from __future__ import annotations

from .. import api
from ..ir import Axes, Op, OpGroup, OpType, consumers, make, rebuild, toposort


def _step_major(op: Op, axis_name: str) -> Axes:
    """``op``'s axes with the recurrent axis (``axis_name``) moved first."""
    rec = next(a for a in op.axes if a.name == axis_name)
    return Axes([rec, *(a for a in op.axes if a.name != axis_name)])


def _targets(order: list[Op]) -> dict[Op, str]:
    """Element-wise ops some scan reads as a sequence with its recurrent axis not first -> that axis' name."""
    found: dict[Op, str] = {}
    for op in order:
        if op.op is not OpType.SCAN:
            continue
        name = op.arg.axis.name
        for seq in op.src[:op.arg.n_seq]:
            if seq.op in OpGroup.ELEMENTWISE and seq.axes.index(name) != 0 and found.get(seq, name) == name:
                found[seq] = name
    return found


def _operand(x: Op, axes: Axes, readers: int) -> Op:
    """``x`` in the order ``axes``: a broadcast's own source broadcast straight there, a dot read only
    here (``readers``: how many ops read it) computed in that order (one batched matmul:
    ``kernels/contraction.dot_into``), else a view."""
    if x.op is OpType.BROADCAST and not x.axes.same_set(x.src[0].axes):
        return api.broadcast_to(x.src[0], axes)
    if x.op is OpType.DOT and readers == 1:
        return make(OpType.DOT, x.src, axes=axes, name=x.meta.name)
    return api.broadcast_to(x, axes)


def step_major_sequences(roots: list[Op]) -> list[Op]:
    """``roots`` with each element-wise scan sequence computed recurrent-axis-first (module docstring)."""
    order = toposort(roots)
    targets = _targets(order)
    if not targets:
        return roots
    users, results = consumers(order), set(roots)
    computed: dict[Op, Op] = {}  # the reorder view a target became -> its step-major op

    def rewrite(op: Op, cur: Op) -> Op:
        if op in targets and all(s.axes == cur.axes for s in cur.src):
            axes = _step_major(cur, targets[op])
            readers = [len(users[o]) + (o in results) for o in op.src]  # a result is read by its caller too
            major = make(cur.op, [_operand(s, axes, n) for s, n in zip(cur.src, readers)], arg=cur.arg,
                         dtype=cur.dtype, name=cur.meta.name)
            view = api.broadcast_to(major, cur.axes)
            computed[view] = major
            return view
        if cur.op is OpType.SCAN:
            n_seq = cur.arg.n_seq
            src = [computed.get(s, s) for s in cur.src[:n_seq]] + list(cur.src[n_seq:])
            if any(a is not b for a, b in zip(src, cur.src)):
                return cur.replace(src=tuple(src))
        return cur

    new = rebuild(order, rewrite)
    return [new[r] for r in roots]
