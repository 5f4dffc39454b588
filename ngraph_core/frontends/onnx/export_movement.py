"""The ONNX exporter's movement converters: broadcast, rename, reshape, slice, pad, concat, gather, and
the positional ONNX-set ops (cumsum, topk), each ``fn(emitter, op)`` as in ``export_ops.py``.

A ``broadcast`` is a Transpose (its axes into the target's order) and an Unsqueeze of the
missing axes to length 1: a partial ``Value`` that element-wise consumers broadcast
positionally. A ``pad`` with a step (a strided slice's gradient) dilates first: unsqueeze, pad
the new axis to the step, merge, trim. ``gather`` keeps our rule that an id out of range reads
a zero row (ONNX Gather would fail), with a Where around the Gather.
"""

from __future__ import annotations

import numpy as np

from ...ir import Axes, Op, OpType
from ...ir.indexing import LookupArg, lookup_name
from ...ir.ops import OP_BY_NAME
from .export_context import Converter, Emitter, Value

T = OpType


def _broadcast(em: Emitter, op: Op) -> Value:
    """Transpose into the target's order, Unsqueeze the missing axes: partial (length 1) where it broadcasts."""
    (x,) = op.src
    value = em.lookup(x)
    order = sorted(range(len(x.axes)), key=lambda i: op.axes.index(x.axes[i]))
    name = em.unsqueeze(em.transpose(value.name, order), [i for i, a in enumerate(op.axes) if a not in x.axes])
    flags = iter(value.full[i] for i in order)
    return Value(name, tuple(next(flags) if a in x.axes else False for a in op.axes))


def _cast_axes(em: Emitter, op: Op) -> Value:
    return em.lookup(op.src[0])  # a rename: the same tensor


def _before_batch(axes: Axes) -> int:
    return int(np.prod([a.length for a in axes[:axes.index(axes.batch_axis)]], dtype=np.int64))


def _reshape(em: Emitter, op: Op) -> str:
    """Row-major, as our kernel: a Reshape to the op's lengths (the batch length read at run time)."""
    (x,) = op.src
    if x.axes.batch_axis is not None or op.axes.batch_axis is not None:
        kept = x.axes.batch_axis is not None and op.axes.batch_axis is not None and \
            _before_batch(x.axes) == _before_batch(op.axes)
        em.bake(op, not kept, "the reshape merges or splits the batch axis N with other axes")
    return em.node("Reshape", [em.full(x), em.shape_of(op.axes)])


def _slice_op(em: Emitter, op: Op) -> str:
    """One Slice with steps over the sliced axes, then a Squeeze of the axes indexed by an int."""
    (x,) = op.src
    starts, ends, axes, steps, drop = [], [], [], [], []
    for i, (axis, s) in enumerate(zip(x.axes, op.arg)):
        start, stop, step = (s, s + 1, 1) if isinstance(s, int) else s
        if isinstance(s, int):
            drop.append(i)
        elif (start, stop, step) == (0, axis.length, 1):
            continue  # the whole axis
        em.bake(op, axis.is_batch, "the slice takes part of the batch axis N")
        starts.append(start)
        ends.append(stop if stop >= 0 else -(2 ** 63))  # a negative stop runs to the start (negative steps)
        axes.append(i)
        steps.append(step)
    name = em.full(x)
    if axes:
        name = em.node("Slice", [name, em.ints(starts), em.ints(ends), em.ints(axes), em.ints(steps)])
    return em.squeeze(name, drop)


def _dilate(em: Emitter, name: str, axes: list, i: int, step: int) -> str:
    """Insert ``step - 1`` zeros between the elements of axis ``i``: unsqueeze, pad, merge, trim."""
    length, rank = axes[i].length, len(axes)
    name = em.unsqueeze(name, [i + 1])
    pads = [0] * (2 * (rank + 1))
    pads[rank + 1 + i + 1] = step - 1
    name = em.node("Pad", [name, em.ints(pads)])
    wide = Axes([a.with_length(a.length * step) if j == i else a for j, a in enumerate(axes)])
    name = em.node("Reshape", [name, em.shape_of(wide)])
    trimmed = (length - 1) * step + 1
    axes[i] = axes[i].with_length(trimmed)
    return em.node("Slice", [name, em.ints([0]), em.ints([trimmed]), em.ints([i]), em.ints([1])])


def _pad(em: Emitter, op: Op) -> str:
    """Dilate the axes placed with a step, Unsqueeze the new axes (an int entry), then one zero Pad."""
    (x,) = op.src
    name, axes = em.full(x), list(x.axes)
    placed = [p for p in op.arg if not isinstance(p, int)]
    for i, (_, step) in enumerate(placed):
        if step != 1 and axes[i].length > 1:
            em.bake(op, axes[i].is_batch, "the pad spreads the batch axis N")
            name = _dilate(em, name, axes, i, step)
    name = em.unsqueeze(name, [j for j, p in enumerate(op.arg) if isinstance(p, int)])
    lengths = iter(a.length for a in axes)
    begins, ends = [], []
    for axis, p in zip(op.axes, op.arg):
        begin, inner = (p, 1) if isinstance(p, int) else (p[0], next(lengths))
        begins.append(begin)
        ends.append(axis.length - begin - inner)
        em.bake(op, axis.is_batch and (begin or ends[-1]), "the pad widens the batch axis N")
    if any(begins) or any(ends):
        name = em.node("Pad", [name, em.ints(begins + ends)])
    return name


def _concat(em: Emitter, op: Op) -> str:
    return em.node("Concat", [em.full(s, op.dtype) for s in op.src], axis=op.axes.index(op.arg))


def _gather(em: Emitter, op: Op) -> str:
    """Gather along the arg's axis, ids out of range reading zero rows (a ``raise`` gather: ONNX Gather's own
    range check); Transpose to [table's rest, ids]."""
    table, ids = op.src
    k, rank_ids = table.axes.index(lookup_name(op.arg)), len(ids.axes)
    after = len(table.axes) - k - 1
    order = list(range(k)) + list(range(k + rank_ids, k + rank_ids + after)) + list(range(k, k + rank_ids))
    if isinstance(op.arg, LookupArg):
        return em.transpose(em.node("Gather", [em.full(table), em.full(ids, "int64")], axis=k), order)
    i = em.full(ids, "int64")
    valid = em.node("And", [em.node("GreaterOrEqual", [i, em.scalar(0, "int64")]),
                            em.node("Less", [i, em.scalar(table.axes[k].length, "int64")])])
    rows = em.node("Gather", [em.full(table), em.node("Where", [valid, i, em.scalar(0, "int64")])], axis=k)
    mask = em.unsqueeze(valid, list(range(k)) + list(range(k + rank_ids, k + rank_ids + after)))
    rows = em.node("Where", [mask, rows, em.scalar(0, op.dtype)])  # ids out of range read zeros
    return em.transpose(rows, order)


def _cumsum(em: Emitter, op: Op) -> str:
    """A running sum along the arg's axis (exclusive and reverse as ONNX CumSum has them)."""
    axis = em.const(np.asarray(op.src[0].axes.index(op.arg.axis), dtype=np.int64), "axis")
    return em.node("CumSum", [em.full(op.src[0]), axis], exclusive=int(op.arg.exclusive), reverse=int(op.arg.reverse))


def _topk(em: Emitter, op: Op) -> str:
    """The int64 positions of the k largest (smallest) values along the arg's axis: TopK's second output."""
    (x,) = op.src
    arg = op.arg
    _, positions = em.node("TopK", [em.full(x), em.ints([arg.k])], n_out=2, axis=x.axes.index(arg.axis),
                           largest=int(arg.largest), sorted=int(arg.sorted))
    return em.cast(positions, "int64", op.dtype)


MOVEMENT_CONVERTERS: dict[OpType, Converter] = {
    T.BROADCAST: _broadcast,
    T.CAST_AXES: _cast_axes,
    T.RESHAPE: _reshape,
    T.SLICE: _slice_op,
    T.PAD: _pad,
    T.CONCAT: _concat,
    T.GATHER: _gather,
    **{OP_BY_NAME[k]: fn for k, fn in (("cumsum", _cumsum), ("topk", _topk)) if k in OP_BY_NAME},
}
"""``OpType -> converter`` for the movement ops (merged into ``export_ops.CONVERTERS``)."""
