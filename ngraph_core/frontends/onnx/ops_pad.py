"""Converters: padding and cropping (Pad in its four modes, CenterCropPad).

``Pad``'s widths are static: the ``paddings`` / ``pads`` attribute before opset 11, an
input from it on (with an ``axes`` input from 18). Negative widths crop first (a
``SLICE``); then, per mode:

* ``constant``: one ``PAD`` op (zeros), and where the fill value is not zero a ``where``
  over a static mask of the padded border (the value may be a run-time input);
* ``edge``, ``reflect``, ``wrap``: per padded dim, a ``gather`` of the source positions,
  which ``np.pad`` of ``arange(n)`` in that mode gives at import time.

Example:
    >>> # Pad(x [3, 2], pads=[0, 2, 0, 0], mode="reflect") -> [3, 4], rows [x01, x00, x01]...
"""

from __future__ import annotations

import numpy as np

from ... import api
from .errors import OnnxError
from .ops_index import take
from .ops_shape import int_list, optional
from .registry import converter
from .tensor import normalize_axis, shape_of

MODES = ("constant", "reflect", "edge", "wrap")


def crop(ctx, x, pairs: list[tuple[int, int]]):
    """``x`` without the elements that negative (before, after) widths remove; the widths left non-negative."""
    if all(b >= 0 and a >= 0 for b, a in pairs):
        return x, pairs
    index = [slice(max(0, -b), n - max(0, -a)) for (b, a), n in zip(pairs, shape_of(x))]
    return ctx.rename(api.tensor_slice(x, index)), [(max(0, b), max(0, a)) for b, a in pairs]


def pad_constant(ctx, x, pairs: list[tuple[int, int]], value):
    """``x`` padded with ``value`` (a static scalar or a scalar op) by non-negative ``pairs``."""
    if all(b == 0 and a == 0 for b, a in pairs):
        return x
    padded = ctx.rename(api.pad(x, pairs))
    if isinstance(value, np.ndarray) and not value.any():
        return padded
    inside = np.pad(np.ones(shape_of(x), dtype=bool), pairs)
    fill = value.astype(x.dtype) if isinstance(value, np.ndarray) else ctx.as_op(value, dtype=x.dtype)
    inside, padded, fill = ctx.broadcast(inside, padded, fill)
    return api.where(inside, padded, fill)


def pad_gather(ctx, x, pairs: list[tuple[int, int]], mode: str, who: str):
    """``x`` padded by non-negative ``pairs`` in ``edge`` / ``reflect`` / ``wrap`` mode (one gather per dim)."""
    for axis, ((before, after), n) in enumerate(zip(pairs, shape_of(x))):
        if before == 0 and after == 0:
            continue
        if n == 0 or (mode == "reflect" and n == 1 and before + after):
            raise OnnxError(f"{who}: cannot pad dim {axis} of length {n} in {mode!r} mode; hint: use "
                            "mode='constant' or pad a longer dim")
        positions = np.pad(np.arange(n, dtype="int64"), (before, after), mode=mode)
        x = ctx.rename(take(ctx, x, positions, axis))
    return x


@converter("Pad", since=1)
def pad(ctx, node, inputs):
    """The input padded by ``pads`` (``[begin per dim..., end per dim...]``; negative ones crop) in ``mode``.

    Raises:
        OnnxError: an unknown mode, or widths that do not match the input's rank / ``axes``.
    """
    x = ctx.as_op(inputs[0])
    rank = len(x.axes)
    who = f"Pad node {node.name!r}"
    mode = node.attr("mode", "constant")
    if mode not in MODES:
        raise OnnxError(f"{who}: unknown mode {mode!r}; hint: expected one of {', '.join(MODES)}")
    if node.opset < 11:
        widths = [int(p) for p in node.attr("pads" if node.opset >= 2 else "paddings")]
        value, axes = np.asarray(node.attr("value", 0.0)), None
    else:
        widths = int_list(ctx, inputs[1], "Pad's pads")
        value = optional(inputs, 2)
        value = np.zeros((), dtype=x.dtype) if value is None else value
        if isinstance(value, np.ndarray) and value.size == 1:
            value = value.reshape(())
        axes = int_list(ctx, optional(inputs, 3), "Pad's axes") if node.opset >= 18 else None
    axes = list(range(rank)) if axes is None else [normalize_axis(a, rank, who) for a in axes]
    if len(widths) != 2 * len(axes):
        raise OnnxError(f"{who}: expected {2 * len(axes)} pads (begin and end for {len(axes)} dims), received "
                        f"{len(widths)}")
    pairs = [(0, 0)] * rank
    for i, axis in enumerate(axes):
        pairs[axis] = (widths[i], widths[len(axes) + i])
    x, pairs = crop(ctx, x, pairs)
    if mode == "constant":
        if not isinstance(value, np.ndarray):
            value = ctx.reshape(ctx.as_op(value), ())
        return pad_constant(ctx, x, pairs, value)
    return pad_gather(ctx, x, pairs, mode, who)


@converter("CenterCropPad", since=18)
def center_crop_pad(ctx, node, inputs):
    """The input center-cropped or zero-padded to the static ``shape`` along ``axes`` (default: all dims).

    Odd differences put the extra element at the end (cropping) or the end (padding), as the reference does.
    """
    x = ctx.as_op(inputs[0])
    dims = shape_of(x)
    who = f"CenterCropPad node {node.name!r}"
    target = int_list(ctx, inputs[1], "CenterCropPad's shape")
    axes = node.attr("axes", None)
    axes = list(range(len(dims))) if axes is None else [normalize_axis(a, len(dims), who) for a in axes]
    if len(target) != len(axes):
        raise OnnxError(f"{who}: expected {len(axes)} target lengths (one per axis), received {target}")
    pairs = [(0, 0)] * len(dims)
    for axis, want in zip(axes, target):
        diff = want - dims[axis]  # > 0 pads, < 0 crops; the odd element goes at the end
        half = abs(diff) // 2
        pairs[axis] = (half, abs(diff) - half) if diff > 0 else (-half, -(abs(diff) - half))
    x, pairs = crop(ctx, x, pairs)
    return pad_constant(ctx, x, pairs, np.zeros((), dtype=x.dtype))
