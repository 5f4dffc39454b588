"""Converters: convolution (Conv, ConvTranspose) and the NCHW <-> ngraph activation layout.

ONNX activations are ``[N, C, *spatial]`` and filters ``[M, C / group, *kernel]``;
ngraph's ``convolution`` reads an activation's roles by position with the batch axis
*named* ``N`` anywhere (``[N, C, H, W]`` is a valid activation once its first axis is
called ``N``) and a filter as ``[Ci, *kernel, K]``. So a Conv is: rename the input's
first axis to ``N``, move the filter's output-channel dim last, convolve, and read the
result ``[K, *spatial, N]`` back as ``[N, K, *spatial]`` with fresh names.

Padding follows ONNX: explicit ``pads`` ``[b1, b2, ..., e1, e2, ...]`` (asymmetric allowed)
or ``auto_pad`` ``SAME_UPPER`` / ``SAME_LOWER`` (output ``ceil(L / stride)``; the odd extra
zero after, resp. before) / ``VALID``.

Example:
    >>> node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 0, 2, 1], group=2)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ... import api
from ...ir import Axes, Axis, Op
from .errors import OnnxError
from .registry import converter
from .tensor import shape_of

BATCH = "N"
FLOATS = ("float16", "float32", "float64")


def to_activation(ctx, x) -> Op:
    """``x`` ``[N, C, *spatial]`` with its first axis named ``N`` (ngraph's batch axis), the rest fresh."""
    x = ctx.as_op(x)
    n, *rest = x.axes.lengths
    return ctx.rename(x, Axes([Axis(BATCH, n), *ctx.fresh(rest)]))


def from_activation(ctx, y: Op) -> Op:
    """An ngraph activation (batch axis ``N`` anywhere) as ONNX ``[N, C, *spatial]`` with fresh names."""
    batch = y.axes.batch_axis
    order = Axes([batch, *(a for a in y.axes if a is not batch)])
    return ctx.rename(api.axes_with_order(y, order))


def concat_dim(ctx, parts: Sequence[Op], dim: int) -> Op:
    """The ops joined end to end along positional ``dim`` (their other dims equal), with fresh names."""
    first = parts[0]
    name = ctx.fresh([1])[0].name  # one name for the joined dim, each part its own length
    others = ctx.fresh(first.axes.lengths)
    renamed = [ctx.rename(p, Axes([Axis(name, n) if i == dim else others[i] for i, n in enumerate(p.axes.lengths)]))
               for p in parts]
    return ctx.rename(api.concat_along_axis(renamed, name))


def spatial_attrs(node, rank: int, kernel: Sequence[int]) -> tuple[list[int], list[int]]:
    """``strides`` and ``dilations`` of ``node`` (default 1 per spatial dim), checked against ``rank``."""
    strides = [int(s) for s in node.attr("strides", [1] * rank)]
    dilations = [int(d) for d in node.attr("dilations", [1] * rank)]
    for name, values in (("strides", strides), ("dilations", dilations), ("kernel_shape", kernel)):
        if len(values) != rank or any(v < 1 for v in values):
            raise OnnxError(f"{node.op_type} node {node.name!r}: expected {name} as {rank} positive ints (one per "
                            f"spatial dim), received {list(values)}")
    return strides, dilations


def explicit_pads(node, lengths: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int]) -> list[tuple[int, int]]:
    """``(before, after)`` per spatial dim from ``pads`` or ``auto_pad`` (SAME_UPPER/SAME_LOWER/VALID/NOTSET).

    Args:
        node: the Conv / pooling node (its ``pads`` ``[b1, b2, ..., e1, e2, ...]`` and ``auto_pad``).
        lengths, kernel, strides, dilations: per spatial dim.

    Returns:
        one ``(before, after)`` pair per spatial dim; SAME pads reach ``ceil(L / stride)``
        outputs, the odd extra zero after (SAME_UPPER) or before (SAME_LOWER).

    Raises:
        OnnxError: an unknown ``auto_pad``, or ``pads`` of the wrong length or negative.

    Example:
        >>> explicit_pads(node_with(auto_pad="SAME_UPPER"), [5], [2], [1], [1])
        [(0, 1)]
    """
    rank = len(lengths)
    auto_pad = node.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for n, k, s, d in zip(lengths, kernel, strides, dilations):
            out = -(-n // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
            small, large = total // 2, total - total // 2
            pairs.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        return pairs
    if auto_pad == "VALID":
        return [(0, 0)] * rank
    if auto_pad != "NOTSET":
        raise OnnxError(f"{node.op_type} node {node.name!r}: expected auto_pad in NOTSET, SAME_UPPER, SAME_LOWER, "
                        f"VALID, received {auto_pad!r}")
    pads = [int(p) for p in node.attr("pads", [0] * 2 * rank)]
    if len(pads) != 2 * rank or any(p < 0 for p in pads):
        raise OnnxError(f"{node.op_type} node {node.name!r}: expected pads as {2 * rank} non-negative ints "
                        f"[begin..., end...], received {pads}")
    return list(zip(pads[:rank], pads[rank:]))


def _check_float(node, x: Op) -> None:
    if x.dtype not in FLOATS:
        raise node.unsupported(f"input of type {x.dtype} (ngraph convolves float16/32/64 only)")


def _add_bias(ctx, y: Op, bias) -> Op:
    """``y`` ``[N, M, *spatial]`` plus a per-channel ``bias`` ``[M]``."""
    if bias is None:
        return y
    b = ctx.reshape(ctx.as_op(bias, y.dtype), [shape_of(bias)[0]] + [1] * (len(y.axes) - 2))
    return api.add(*ctx.broadcast(y, b))


@converter("Conv", since=1)
def conv(ctx, node, inputs):
    x, w = ctx.as_op(inputs[0]), ctx.as_op(inputs[1])
    _check_float(node, x)
    y = convolve(ctx, node, x, ctx.as_op(w, x.dtype))
    return _add_bias(ctx, y, inputs[2] if len(inputs) > 2 else None)


@converter("ConvInteger", since=10)
def conv_integer(ctx, node, inputs):
    """Integer convolution, exact in float64 (products of 8-bit ints summed), returned as int32."""
    x, w = ctx.as_op(inputs[0], "float64"), ctx.as_op(inputs[1], "float64")
    x_zero = inputs[2] if len(inputs) > 2 else None
    w_zero = inputs[3] if len(inputs) > 3 else None
    if x_zero is not None:
        x = api.subtract(*ctx.broadcast(x, ctx.as_op(x_zero, "float64")))
    if w_zero is not None:
        zero = ctx.as_op(w_zero, "float64")
        if len(zero.axes) == 1 and zero.axes.lengths[0] > 1:  # one zero point per output channel
            zero = ctx.reshape(zero, [zero.axes.lengths[0]] + [1] * (len(w.axes) - 1))
        w = api.subtract(*ctx.broadcast(w, zero))
    return api.cast(convolve(ctx, node, x, w), "int32")


def convolve(ctx, node, x: Op, w: Op) -> Op:
    """ONNX's Conv of ``x`` ``[N, C, *spatial]`` with ``w`` ``[M, C / group, *kernel]`` (no bias)."""
    rank = len(x.axes) - 2
    if rank not in (1, 2, 3) or len(w.axes) != rank + 2:
        raise node.unsupported(f"input of rank {len(x.axes)} with filter of rank {len(w.axes)} "
                               "(ngraph convolves 1-D, 2-D and 3-D)")
    kernel = [int(k) for k in node.attr("kernel_shape", w.axes.lengths[2:])]
    if kernel != list(w.axes.lengths[2:]):
        raise OnnxError(f"Conv node {node.name!r}: kernel_shape {kernel} differs from the filter's spatial dims "
                        f"{list(w.axes.lengths[2:])}")
    strides, dilations = spatial_attrs(node, rank, kernel)
    pads = explicit_pads(node, x.axes.lengths[2:], kernel, strides, dilations)
    group = int(node.attr("group", 1))
    if group < 1 or x.axes.lengths[1] != w.axes.lengths[1] * group or w.axes.lengths[0] % group:
        raise OnnxError(f"Conv node {node.name!r}: input channels {x.axes.lengths[1]} must equal the filter's "
                        f"{w.axes.lengths[1]} per group times group={group}, and the filter's {w.axes.lengths[0]} "
                        "output channels must divide by group")
    filt = ctx.rename(w)
    filt = api.axes_with_order(filt, Axes([*filt.axes[1:], filt.axes[0]]))  # [M, Ci, *k] -> [Ci, *k, M]
    y = api.convolution(to_activation(ctx, x), filt, strides=strides, padding=pads, dilation=dilations, groups=group)
    return from_activation(ctx, y)


def _transpose_pads(node, lengths, kernel, strides, dilations, extra) -> list[tuple[int, int]]:
    """ConvTranspose's ``(before, after)`` crops from ``output_shape``, ``auto_pad`` or ``pads``."""
    rank = len(lengths)
    output_shape = node.attr("output_shape", None)
    auto_pad = node.attr("auto_pad", "NOTSET") or "NOTSET"
    if output_shape is None and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        if auto_pad == "VALID":
            return [(0, 0)] * rank
        return explicit_pads(node, lengths, kernel, strides, dilations)
    wanted = [int(v) for v in output_shape[-rank:]] if output_shape is not None else \
        [n * s for n, s in zip(lengths, strides)]
    pairs = []
    for n, k, s, d, e, out in zip(lengths, kernel, strides, dilations, extra, wanted):
        total = s * (n - 1) + e + (k - 1) * d + 1 - out  # may be negative: zeros appended (see below)
        small, large = total // 2, total - total // 2
        pairs.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
    return pairs


@converter("ConvTranspose", since=1)
def conv_transpose(ctx, node, inputs):
    x, w = ctx.as_op(inputs[0]), ctx.as_op(inputs[1])
    _check_float(node, x)
    w = ctx.as_op(w, x.dtype)
    rank = len(x.axes) - 2
    if rank not in (1, 2, 3) or len(w.axes) != rank + 2:
        raise node.unsupported(f"input of rank {len(x.axes)} with filter of rank {len(w.axes)}")
    kernel = [int(k) for k in node.attr("kernel_shape", w.axes.lengths[2:])]
    strides, dilations = spatial_attrs(node, rank, kernel)
    group = int(node.attr("group", 1))
    if group < 1 or x.axes.lengths[1] != w.axes.lengths[0] or w.axes.lengths[0] % group:
        raise OnnxError(f"ConvTranspose node {node.name!r}: the filter's first dim {w.axes.lengths[0]} must equal "
                        f"the input channels {x.axes.lengths[1]} and divide by group={group}")
    extra = [int(e) for e in node.attr("output_padding", [0] * rank)]
    pads = _transpose_pads(node, x.axes.lengths[2:], kernel, strides, dilations, extra)
    filt = ctx.rename(w)
    filt = api.axes_with_order(filt, Axes([*filt.axes[1:], filt.axes[0]]))  # [C, Co, *k] -> [Co, *k, C]
    if all(b >= 0 and a >= 0 for b, a in pads) and all(0 <= e < s for e, s in zip(extra, strides)):
        y = api.deconvolution(to_activation(ctx, x), filt, strides=strides, padding=pads, output_padding=extra,
                             dilation=dilations, groups=group)  # what ngraph's op expresses directly
        return _add_bias(ctx, from_activation(ctx, y), inputs[2] if len(inputs) > 2 else None)
    # otherwise deconvolve cropping only the leading pads, then crop / zero-extend the end: exact for
    # any output_padding and negative totals (positions past the full result are zeros)
    lead = [(max(b, 0), 0) for b, _ in pads]
    y = from_activation(ctx, api.deconvolution(to_activation(ctx, x), filt, strides=strides, padding=lead,
                                              dilation=dilations, groups=group))
    full = y.axes.lengths[2:]
    targets = [s * (n - 1) + e + (k - 1) * d + 1 - b - a
               for s, n, e, k, d, (b, a) in zip(strides, x.axes.lengths[2:], extra, kernel, dilations, pads)]
    if any(t < 1 for t in targets):
        raise OnnxError(f"ConvTranspose node {node.name!r}: output spatial shape {targets} is not positive; "
                        "hint: check pads, output_padding and output_shape")
    front = [max(-b, 0) for b, _ in pads]  # a negative leading crop prepends zeros
    keep = [min(t - f, n) for t, f, n in zip(targets, front, full)]
    y = api.tensor_slice(y, [slice(None), slice(None)] + [slice(0, k) for k in keep])
    if any(f or t > f + k for t, f, k in zip(targets, front, keep)):
        y = api.pad(y, [0, 0] + [(f, t - f - k) for t, f, k in zip(targets, front, keep)])
    y = ctx.rename(y)
    return _add_bias(ctx, y, inputs[2] if len(inputs) > 2 else None)


@converter("CausalConvWithState", since=27)
def causal_conv_with_state(ctx, node, inputs):
    """Depthwise causal 1-D convolution over ``[past_state or zeros, input]``; the last ``k - 1``
    positions of that concatenation are the ``present_state``; optional fused SiLU."""
    inputs = list(inputs) + [None] * (4 - len(inputs))
    x = ctx.as_op(inputs[0])
    _check_float(node, x)
    w = ctx.as_op(inputs[1], x.dtype)
    activation = node.attr("activation", "none") or "none"
    if activation not in ("none", "silu", "swish"):
        raise OnnxError(f"CausalConvWithState node {node.name!r}: expected activation in none, silu, swish, "
                        f"received {activation!r}")
    if len(x.axes) != 3 or len(w.axes) != 3:
        raise OnnxError(f"CausalConvWithState node {node.name!r}: expected input [B, C, L] and weight [C, 1, k], "
                        f"received {tuple(x.axes.lengths)} and {tuple(w.axes.lengths)}")
    b, c, _ = x.axes.lengths
    k = w.axes.lengths[2]
    past = inputs[3] if inputs[3] is not None else np.zeros((b, c, k - 1), dtype=x.dtype)
    padded = concat_dim(ctx, [ctx.as_op(past, x.dtype), x], 2) if k > 1 else x
    filt = ctx.rename(w)
    filt = api.axes_with_order(filt, Axes([*filt.axes[1:], filt.axes[0]]))  # [C, 1, k] -> [1, k, C]
    y = from_activation(ctx, api.convolution(to_activation(ctx, padded), filt, groups=c))
    y = _add_bias(ctx, y, inputs[2])
    if activation != "none":
        y = y * api.sigmoid(y)
    total = padded.axes.lengths[2]
    present = ctx.rename(api.tensor_slice(padded, [slice(None), slice(None), slice(total - (k - 1), total)]))
    return [y, present]


@converter("Col2Im", since=18)
def col2im(ctx, node, inputs):
    """Column blocks ``[N, C * prod(block), L]`` summed back into an image ``[N, C, *image_shape]`` (fold).

    Every (block offset, block position) pair lands at a padded-image position known at
    import time, so the whole fold is one ``ng.scatter_add`` over the flattened padded image
    (overlaps accumulate), then the padding is cropped.
    """
    x = ctx.as_op(inputs[0])
    image = [int(v) for v in ctx.static(inputs[1], "Col2Im's image_shape")]
    block = [int(v) for v in ctx.static(inputs[2], "Col2Im's block_shape")]
    rank = len(image)
    strides, dilations = spatial_attrs(node, rank, block)
    pads = [int(p) for p in node.attr("pads", [0] * 2 * rank)]
    padded = [n + b + e for n, b, e in zip(image, pads[:rank], pads[rank:])]
    counts = [(p - (k - 1) * d - 1) // s + 1 for p, k, d, s in zip(padded, block, dilations, strides)]
    n, rows, length = x.axes.lengths
    taps = int(np.prod(block))
    if rows % taps or int(np.prod(counts)) != length:
        raise OnnxError(f"Col2Im node {node.name!r}: input {tuple(x.axes.lengths)} does not hold C * {taps} rows of "
                        f"{int(np.prod(counts))} blocks for image {image}, block {block}")
    offsets = np.stack(np.meshgrid(*(np.arange(k) * d for k, d in zip(block, dilations)), indexing="ij"), -1)
    starts = np.stack(np.meshgrid(*(np.arange(c) * s for c, s in zip(counts, strides)), indexing="ij"), -1)
    coords = offsets.reshape(taps, 1, rank) + starts.reshape(1, length, rank)  # [taps, L, rank]
    flat = np.ravel_multi_index(tuple(coords[..., i] for i in range(rank)), padded).astype("int64")
    updates = ctx.reshape(x, [n, rows // taps, taps, length])
    ids = ctx.as_op(flat)
    updates = ctx.rename(updates, Axes([*ctx.fresh([n, rows // taps]), *ids.axes]))
    table = Axes([*updates.axes[:2], *ctx.fresh([int(np.prod(padded))])])
    y = ctx.reshape(api.scatter_add(updates, ids, table, table[2]), [n, rows // taps, *padded])
    crop = [slice(None), slice(None)] + [slice(b, b + m) for b, m in zip(pads[:rank], image)]
    return ctx.rename(api.tensor_slice(y, crop))
