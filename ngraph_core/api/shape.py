"""Shape and movement: reorder, broadcast, rename, flatten, slice, concat, stack, pad, one_hot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import AxesError
from ..ir import Axes, Axis, Op, OpType, format_axes, make
from .math import _resolve_axes, broadcast_to, cast, equal
from .tensors import AxesLike, as_op, constant, make_axes


def axes_with_order(x: Any, axes: AxesLike) -> Op:
    """``x`` with its axes in the order of ``axes`` (the same set).

    Example:
        >>> xt = axes_with_order(x, [N, C])
    """
    x, axes = as_op(x, where="axes_with_order"), make_axes(axes)
    if not axes.same_set(x.axes):
        raise AxesError(
            f"axes_with_order: {format_axes(axes)} must be a reordering of {format_axes(x.axes)}; "
            "hint: use ng.broadcast to add axes, a reduction to remove them"
        )
    return broadcast_to(x, axes)


def broadcast(x: Any, axes: AxesLike) -> Op:
    """``x`` repeated over the axes of ``axes`` it lacks, in ``axes``' order (explicit outer products).

    Example:
        >>> grid = broadcast(h, [H, W]) + w  # h [H], w [W]: an explicit outer sum
    """
    x = as_op(x, where="broadcast")
    return make(OpType.BROADCAST, [x], axes=make_axes(axes)) if x.axes != make_axes(axes) else x


def cast_axes(x: Any, axes: AxesLike) -> Op:
    """``x`` with its axes renamed to ``axes`` (same lengths, same order)."""
    x, axes = as_op(x, where="cast_axes"), make_axes(axes)
    return x if x.axes == axes else make(OpType.CAST_AXES, [x], axes=axes)


def _reshape(x: Op, axes: Axes) -> Op:
    return x if x.axes == axes else make(OpType.RESHAPE, [x], axes=axes)


def flatten(x: Any, axes: AxesLike | None = None, name: str | None = None) -> Op:
    """Merge ``axes`` of ``x`` (default: every non-batch axis) into one axis, row-major.

    The merged axis is called ``name`` (default: the names joined by ``_``) and stands
    where the first merged axis stood.

    Example:
        >>> flat = flatten(img)  # [C, H, W, N] -> [C_H_W, N]
    """
    x = as_op(x, where="flatten")
    group = (x.axes - Axes(a for a in x.axes if a.is_batch)) if axes is None else _resolve_axes(x, axes, "flatten")
    if len(group) == 0:
        return x
    merged = Axis(name or "_".join(group.names), group.size)
    first = min(x.axes.index(a) for a in group)
    rest = x.axes - group
    before = Axes(a for a in rest if x.axes.index(a) < first)
    after = rest - before
    return _reshape(broadcast_to(x, before + group + after), before + Axes([merged]) + after)


def unflatten(x: Any, axis: Axis, new_axes: AxesLike) -> Op:
    """Split ``axis`` of ``x`` into ``new_axes`` (row-major; lengths must multiply to its length).

    Example:
        >>> img = unflatten(flat, flat.axes[0], [C, H, W])
    """
    x, new_axes = as_op(x, where="unflatten"), make_axes(new_axes)
    axis = _resolve_axes(x, axis, "unflatten")[0]
    if new_axes.size != axis.length:
        raise AxesError(
            f"unflatten: {format_axes(new_axes)} holds {new_axes.size} elements, axis {axis} holds {axis.length}"
        )
    i = x.axes.index(axis)
    return _reshape(x, x.axes[:i] + new_axes + x.axes[i + 1:])


def expand_dims(x: Any, axis: Axis, dim: int = 0) -> Op:
    """``x`` repeated along a new ``axis`` inserted at position ``dim``.

    Example:
        >>> xs = expand_dims(x, make_axis(1, "K"), 0)
    """
    x = as_op(x, where="expand_dims")
    if x.axes.find(axis.name) is not None:
        raise AxesError(f"expand_dims: {x.axes} already has an axis named {axis.name!r}")
    axes = list(x.axes)
    axes.insert(dim if dim >= 0 else len(axes) + 1 + dim, axis)
    return make(OpType.BROADCAST, [x], axes=axes)


def _normalize(s: Any, axis: Axis) -> int | tuple[int, int, int]:
    if isinstance(s, (int, np.integer)):
        i = int(s) + axis.length if s < 0 else int(s)
        if not 0 <= i < axis.length:
            raise AxesError(f"tensor_slice: index {s} is out of range for axis {axis}")
        return i
    if isinstance(s, slice):
        return s.indices(axis.length)
    raise AxesError(f"tensor_slice: expected an int or a slice for axis {axis}, received {s!r}")


def tensor_slice(x: Any, slices: Sequence[Any]) -> Op:
    """Index ``x`` with one int (drops the axis) or slice (keeps the axis, new length) per axis.

    Example:
        >>> first_rows = tensor_slice(x, [slice(0, 2), slice(None)])
    """
    x = as_op(x, where="tensor_slice")
    slices = list(slices) + [slice(None)] * (len(x.axes) - len(slices))
    if len(slices) != len(x.axes):
        raise AxesError(f"tensor_slice: {len(slices)} slices for {len(x.axes)} axes {format_axes(x.axes)}")
    arg = tuple(_normalize(s, a) for s, a in zip(slices, x.axes))
    if all(not isinstance(s, int) and s == (0, a.length, 1) for s, a in zip(arg, x.axes)):
        return x
    return make(OpType.SLICE, [x], arg=arg)


def slice_along_axis(x: Any, axis: Axis, idx: int | slice) -> Op:
    """Slice ``x`` along one ``axis`` with an int or a slice (see ``tensor_slice``)."""
    x = as_op(x, where="slice_along_axis")
    i = x.axes.index(_resolve_axes(x, axis, "slice_along_axis")[0])
    return tensor_slice(x, [idx if j == i else slice(None) for j in range(len(x.axes))])


def concat_along_axis(xs: Sequence[Any], axis: Axis) -> Op:
    """Join ``xs`` end to end along ``axis`` (each input's own length of that name).

    Example:
        >>> both = concat_along_axis([a, b], C)  # C:3 and C:5 -> C:8
    """
    ops = [as_op(x, where="concat_along_axis") for x in xs]
    if not ops:
        raise AxesError("concat_along_axis: expected at least one input, received none")
    name = axis if isinstance(axis, str) else axis.name
    for o in ops:
        if o.axes.find(name) is None:
            raise AxesError(f"concat_along_axis: input {format_axes(o.axes)} has no axis named {name!r}")
    order = ops[0].axes.names
    for o in ops:
        if set(o.axes.names) != set(order):
            raise AxesError(
                f"concat_along_axis: inputs must have the same axis names; received "
                f"{format_axes(ops[0].axes)} and {format_axes(o.axes)}"
            )
    ops = [o if o.axes.names == order else broadcast_to(o, Axes(o.axes.find(n) for n in order)) for o in ops]
    return ops[0] if len(ops) == 1 else make(OpType.CONCAT, ops, arg=name)


def stack(xs: Sequence[Any], axis: Axis, pos: int = 0) -> Op:
    """Stack same-axes tensors along a new ``axis`` (its length must be ``len(xs)``) at ``pos``."""
    if axis.length != len(xs):
        raise AxesError(f"stack: axis {axis} must have length {len(xs)} (one per input)")
    one = axis.with_length(1)
    return concat_along_axis([expand_dims(x, one, pos) for x in xs], one)


def pad(x: Any, paddings: Sequence[int | tuple[int, int]], axes: AxesLike | None = None) -> Op:
    """Zero-pad ``x``: one ``(before, after)`` (or one int for both) per axis.

    The padded axes keep their names with the new lengths (or take ``axes`` if given).

    Example:
        >>> padded = pad(img, [(0, 0), (1, 1), (1, 1), (0, 0)])
    """
    x = as_op(x, where="pad")
    if len(paddings) != len(x.axes):
        raise AxesError(f"pad: expected {len(x.axes)} paddings for {format_axes(x.axes)}, received {len(paddings)}")
    def pair(p: Any) -> tuple[int, int]:
        entry = (p, p) if isinstance(p, (int, np.integer)) else tuple(p) if isinstance(p, (tuple, list)) else None
        if entry is None or len(entry) != 2 or not all(
                isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in entry):
            raise AxesError(f"pad: expected an int or a (before, after) pair of ints per axis, received {p!r}")
        return int(entry[0]), int(entry[1])

    pairs = [pair(p) for p in paddings]
    if any(b < 0 or a < 0 for b, a in pairs):
        raise AxesError(f"pad: paddings must be non-negative, received {paddings}; hint: slice to crop")
    out = make_axes(axes) if axes is not None else Axes(
        ax.with_length(ax.length + b + a) for ax, (b, a) in zip(x.axes, pairs))
    if all(b == 0 and a == 0 for b, a in pairs) and out == x.axes:
        return x
    return make(OpType.PAD, [x], arg=tuple((b, 1) for b, _ in pairs), axes=out)


def one_hot(x: Any, axis: Axis) -> Op:
    """One-hot encode integer class ids ``x`` along a new ``axis`` (put first), float32.

    Example:
        >>> Y = one_hot(labels, make_axis(10, "Y"))  # labels [N] -> [Y, N]
    """
    x = as_op(x, where="one_hot")
    ids = constant(np.arange(axis.length), [axis], dtype=x.dtype)
    out = Axes([axis]) + x.axes
    return cast(equal(broadcast_to(x, out), broadcast_to(ids, out)), "float32")


