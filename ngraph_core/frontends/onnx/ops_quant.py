"""Converters: linear quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul,
QLinearConv) for the 8- and 16-bit integer types.

``q = saturate(round_half_even(x / scale) + zero_point)`` and ``x = (q - zero_point) * scale``
with a scale (and zero point) that is per tensor (a scalar), per axis (1-D along
``axis``) or blocked (``x``'s rank, each element repeated ``block_size`` times along
``axis``). Integer products (QLinearMatMul, QLinearConv) are computed exactly in float64
(8-bit products summed stay far below 2**53), scaled by ``x_scale * w_scale / y_scale`` and
requantized. float8 / 4-bit / 2-bit types are not ngraph dtypes: the loader rejects them.

Example:
    >>> node = helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=1)
"""

from __future__ import annotations

from ... import api
from ...ir import Op
from .errors import OnnxError
from .ops_conv import convolve
from .registry import converter
from .tensor import normalize_axis

RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


def _range(node, dtype: str) -> tuple[int, int]:
    if dtype not in RANGES:
        raise node.unsupported(f"quantized type {dtype} (expected one of {sorted(RANGES)})")
    return RANGES[dtype]


def spread(ctx, node, p, x: Op, dtype: str) -> Op:
    """A scale / zero point broadcastable to ``x``: scalar, per ``axis`` (1-D) or blocked (``block_size``)."""
    p = ctx.as_op(p, dtype)
    rank = len(x.axes)
    if not p.axes or p.axes.size == 1:
        return ctx.reshape(p, [])
    axis = normalize_axis(node.attr("axis", 1), rank, f"{node.op_type} node {node.name!r}")
    block = int(node.attr("block_size", 0))
    if not block:
        if len(p.axes) != 1 or p.axes.lengths[0] != x.axes.lengths[axis]:
            raise OnnxError(f"{node.op_type} node {node.name!r}: a per-axis scale must be 1-D of length "
                            f"{x.axes.lengths[axis]} (axis {axis}), received {tuple(p.axes.lengths)}")
        return ctx.reshape(p, [p.axes.lengths[0] if i == axis else 1 for i in range(rank)])
    shape = list(p.axes.lengths)  # blocked: repeat each entry `block` times along axis, crop the last block
    stretched = ctx.reshape(p, shape[:axis + 1] + [1] + shape[axis + 1:])
    target = ctx.fresh(shape[:axis + 1] + [block] + shape[axis + 1:])
    full = ctx.reshape(ctx.expand(stretched, target), shape[:axis] + [shape[axis] * block] + shape[axis + 1:])
    return api.tensor_slice(full, [slice(0, x.axes.lengths[axis]) if i == axis else slice(None) for i in range(rank)])


def requantize(ctx, node, y: Op, zero, dtype: str) -> Op:
    """``saturate(round(y) + zero_point)`` as ``dtype`` (``y`` float, already divided by the scale)."""
    low, high = _range(node, dtype)
    y = api.round(y)
    if zero is not None:
        y = api.add(*ctx.broadcast(y, zero))
    y = api.minimum(api.maximum(y, api.constant(float(low), dtype=y.dtype)), api.constant(float(high), dtype=y.dtype))
    return api.cast(y, dtype)


@converter("QuantizeLinear", since=10)
def quantize_linear(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    zero = inputs[2] if len(inputs) > 2 else None
    out_attr = node.attr("output_dtype", 0)
    dtype = ctx.as_op(zero).dtype if zero is not None else (ctx.dtype(out_attr) if out_attr else "uint8")
    precision = node.attr("precision", 0)
    compute = ctx.dtype(precision) if precision else x.dtype
    x = ctx.as_op(x, compute)
    scaled = api.divide(*ctx.broadcast(x, spread(ctx, node, inputs[1], x, compute)))
    zp = None if zero is None else spread(ctx, node, zero, x, compute)
    return requantize(ctx, node, scaled, zp, dtype)


@converter("DequantizeLinear", since=10)
def dequantize_linear(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _range(node, x.dtype)
    scale = ctx.as_op(inputs[1])
    out_attr = node.attr("output_dtype", 0)
    dtype = ctx.dtype(out_attr) if out_attr else scale.dtype
    y = ctx.as_op(x, "float32")
    if len(inputs) > 2 and inputs[2] is not None:
        y = api.subtract(*ctx.broadcast(y, spread(ctx, node, inputs[2], x, "float32")))
    y = api.multiply(*ctx.broadcast(y, spread(ctx, node, scale, x, "float32")))
    return api.cast(y, dtype) if dtype != "float32" else y


@converter("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx, node, inputs):
    x = ctx.as_op(inputs[0], "float32")
    zero = api.constant(0.0, dtype="float32")
    high, low = api.maximum(api.max(x), zero), api.minimum(api.min(x), zero)
    span = high - low
    span = api.where(api.cast(api.equal(span, zero), "bool"), api.constant(1.0, dtype="float32"), span)
    scale = span / api.constant(255.0, dtype="float32")
    zp = api.round(api.minimum(api.maximum(zero - low / scale, zero), api.constant(255.0, dtype="float32")))
    y = requantize(ctx, node, api.divide(*ctx.broadcast(x, scale)), zp, "uint8")
    return [y, scale, api.cast(zp, "uint8")]


def _centered(ctx, q, zero, like_axis: int | None = None) -> Op:
    """``q - zero_point`` in float64 (exact); a 1-D zero point of length > 1 runs along ``like_axis``."""
    q = ctx.as_op(q, "float64")
    if zero is None:
        return q
    z = ctx.as_op(zero, "float64")
    if len(z.axes) == 1 and z.axes.lengths[0] > 1 and like_axis is not None:
        z = ctx.reshape(z, [z.axes.lengths[0] if i == like_axis else 1 for i in range(len(q.axes))])
    return api.subtract(*ctx.broadcast(q, z))


def _multiplier(ctx, x_scale, w_scale, y_scale, channels_axis: int | None, rank: int) -> Op:
    """``x_scale * w_scale / y_scale`` in the scales' type, as float64 (per output channel when 1-D)."""
    w = ctx.as_op(w_scale)
    dtype = w.dtype
    if len(w.axes) == 1 and w.axes.lengths[0] > 1 and channels_axis is not None:
        w = ctx.reshape(w, [w.axes.lengths[0] if i == channels_axis else 1 for i in range(rank)])
    m = api.divide(*ctx.broadcast(api.multiply(*ctx.broadcast(ctx.as_op(x_scale, dtype), w)),
                                 ctx.as_op(y_scale, dtype)))
    return api.cast(m, "float64")


@converter("QLinearMatMul", since=10)
def qlinear_matmul(ctx, node, inputs):
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = inputs
    dtype = ctx.as_op(y_zero).dtype if y_zero is not None else ctx.as_op(a).dtype
    product = ctx.matmul(_centered(ctx, a, a_zero, len(ctx.as_op(a).axes) - 2), _centered(ctx, b, b_zero))
    scaled = api.multiply(*ctx.broadcast(product, _multiplier(ctx, a_scale, b_scale, y_scale, None, 0)))
    return requantize(ctx, node, scaled, None if y_zero is None else ctx.as_op(y_zero, "float64"), dtype)


@converter("QLinearConv", since=10)
def qlinear_conv(ctx, node, inputs):
    inputs = list(inputs) + [None] * (9 - len(inputs))
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = inputs
    dtype = ctx.as_op(y_zero).dtype if y_zero is not None else ctx.as_op(x).dtype
    y = convolve(ctx, node, _centered(ctx, x, x_zero), _centered(ctx, w, w_zero, 0))
    if bias is not None:
        b = ctx.as_op(bias, "float64")
        b = ctx.reshape(b, [b.axes.lengths[0]] + [1] * (len(y.axes) - 2))
        y = api.add(*ctx.broadcast(y, b))
    scaled = api.multiply(*ctx.broadcast(y, _multiplier(ctx, x_scale, w_scale, y_scale, 1, len(y.axes))))
    return requantize(ctx, node, scaled, None if y_zero is None else ctx.as_op(y_zero, "float64"), dtype)
