"""Converters: normalization (BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, RMSNormalization, LRN, MeanVarianceNormalization, LpNormalization).

Each statistic is one ``ng.moments`` op over the normalized dims (the kept dims are named,
so ``x - mean`` broadcasts by name); per-channel parameters ``[C]`` are reshaped to
``[C, 1, ...]`` and broadcast NumPy-style. ``stash_type=1`` (the default) computes the
statistics of a float16 input in float32, as ONNX says, and casts the result back.

Example:
    >>> node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv_std"], axis=-1)
"""

from __future__ import annotations

from collections.abc import Sequence

from ... import api
from ...ir import Op
from .errors import OnnxError
from .ops_conv import FLOATS
from .registry import converter
from .tensor import normalize_axis, shape_of


def _float(node, x) -> None:
    if x.dtype not in FLOATS:
        raise node.unsupported(f"input of type {x.dtype} (normalization computes in float16/32/64)")


def _stash(node, x: Op) -> Op:
    """``x`` in the statistics' type: float32 for float16 under ``stash_type=1`` (the default)."""
    return api.cast(x, "float32") if x.dtype == "float16" and int(node.attr("stash_type", 1)) == 1 else x


def standardize(ctx, x: Op, dims: Sequence[int], eps: float) -> tuple[Op, Op, Op]:
    """``(x - mean) / sqrt(var + eps)`` over ``dims``, with ``mean`` and ``1 / sqrt(var + eps)`` (kept dims)."""
    dims = set(dims)
    kept = [a for i, a in enumerate(x.axes) if i not in dims]
    mean, var = api.moments(x, kept)
    inv = api.rsqrt(var + api.constant(eps, dtype=x.dtype))
    return (x - mean) * inv, mean, inv


def keepdims(ctx, stat: Op, x: Op, dims: Sequence[int]) -> Op:
    """A statistic over ``dims`` of ``x`` with those dims kept as 1 (ONNX's ``keepdims=1`` shape)."""
    return ctx.reshape(stat, [1 if i in set(dims) else n for i, n in enumerate(x.axes.lengths)])


def per_channel(ctx, p, like: Op, channels: int | None = None) -> Op:
    """A ``[C]`` parameter reshaped ``[C, 1, ...]`` to broadcast over ``like`` ``[N, C, *spatial]``."""
    p = ctx.as_op(p, like.dtype)
    n = channels if channels is not None else shape_of(p)[0]
    return ctx.reshape(p, [n] + [1] * (len(like.axes) - 2))


def affine(ctx, y: Op, scale, bias) -> Op:
    """``y * scale + bias`` with NumPy broadcasting (either may be None)."""
    if scale is not None:
        y = api.multiply(*ctx.broadcast(y, ctx.as_op(scale, y.dtype)))
    if bias is not None:
        y = api.add(*ctx.broadcast(y, ctx.as_op(bias, y.dtype)))
    return y


@converter("BatchNormalization", since=1)
def batch_normalization(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    eps, momentum = float(node.attr("epsilon", 1e-5)), float(node.attr("momentum", 0.9))
    if len(x.axes) < 2:
        raise OnnxError(f"BatchNormalization node {node.name!r}: expected X [N, C, ...], received shape "
                        f"{tuple(x.axes.lengths)}")
    scale, bias, mean, var = (ctx.as_op(v, x.dtype) for v in inputs[1:5])
    if node.opset < 9 and not node.attr("spatial", 1):  # per-activation statistics [C, D1, ...]
        scale, bias, mean, var = (ctx.reshape(p, [1, *shape_of(p)]) for p in (scale, bias, mean, var))
        x, mean, var, scale, bias = ctx.broadcast(x, mean, var, scale, bias)
        return (x - mean) * api.rsqrt(var + api.constant(eps, dtype=x.dtype)) * scale + bias
    channel = x.axes[1]
    if any(shape_of(p) != (channel.length,) for p in (scale, bias, mean, var)):
        raise OnnxError(f"BatchNormalization node {node.name!r}: expected scale, B, mean and var of shape "
                        f"({channel.length},) for X {tuple(x.axes.lengths)}, received "
                        f"{[shape_of(p) for p in (scale, bias, mean, var)]}")
    params = [ctx.rename(p, [channel]) for p in (scale, bias, mean, var)]
    training = int(node.attr("training_mode", 0)) and node.opset >= 14
    if not training:
        if len(x.axes) == 2:  # [N, C]: ng.batch_norm needs a dim to normalize over besides the features
            return (x - params[2]) * api.rsqrt(params[3] + api.constant(eps, dtype=x.dtype)) * params[0] + params[1]
        return api.batch_norm(x, params[0], params[1], eps=eps, mean=params[2], var=params[3])
    batch_mean, batch_var = api.moments(x, [channel])
    y = (x - batch_mean) * api.rsqrt(batch_var + api.constant(eps, dtype=x.dtype)) * params[0] + params[1]
    keep = api.constant(momentum, dtype=x.dtype)
    rest = api.constant(1.0 - momentum, dtype=x.dtype)
    running_mean = ctx.rename(params[2] * keep + batch_mean * rest)
    running_var = ctx.rename(params[3] * keep + batch_var * rest)
    return [y, running_mean, running_var]


@converter("InstanceNormalization", since=1)
def instance_normalization(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    y, _, _ = standardize(ctx, x, range(2, len(x.axes)), float(node.attr("epsilon", 1e-5)))
    return affine(ctx, y, per_channel(ctx, inputs[1], x), per_channel(ctx, inputs[2], x))


@converter("LayerNormalization", since=17)
def layer_normalization(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    axis = normalize_axis(node.attr("axis", -1), len(x.axes), f"LayerNormalization node {node.name!r}")
    dims = list(range(axis, len(x.axes)))
    xs = _stash(node, x)
    y, mean, inv = standardize(ctx, xs, dims, float(node.attr("epsilon", 1e-5)))
    y = affine(ctx, api.cast(y, x.dtype) if y.dtype != x.dtype else y, inputs[1],
               inputs[2] if len(inputs) > 2 else None)
    return [y, keepdims(ctx, mean, xs, dims), keepdims(ctx, inv, xs, dims)]


@converter("GroupNormalization", since=18)
def group_normalization(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    groups = int(node.attr("num_groups"))
    n, c = x.axes.lengths[:2]
    if groups < 1 or c % groups:
        raise OnnxError(f"GroupNormalization node {node.name!r}: {c} channels do not split into num_groups={groups}")
    grouped = ctx.reshape(_stash(node, x), [n, groups, x.axes.size // (n * groups)])
    y, _, _ = standardize(ctx, grouped, [2], float(node.attr("epsilon", 1e-5)))
    y = api.cast(y, x.dtype) if y.dtype != x.dtype else y
    if node.opset < 21 and shape_of(inputs[1])[0] == groups and groups != c:  # opset 18: one scale per group
        y = affine(ctx, y, ctx.reshape(ctx.as_op(inputs[1], x.dtype), [groups, 1]),
                   ctx.reshape(ctx.as_op(inputs[2], x.dtype), [groups, 1]))
        return ctx.reshape(y, x.axes.lengths)
    y = ctx.reshape(y, x.axes.lengths)
    return affine(ctx, y, per_channel(ctx, inputs[1], y), per_channel(ctx, inputs[2], y))


@converter("RMSNormalization", since=23)
def rms_normalization(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    axis = normalize_axis(node.attr("axis", -1), len(x.axes), f"RMSNormalization node {node.name!r}")
    xs = _stash(node, x)
    dims = list(range(axis, len(x.axes)))
    ms = api.mean(api.square(xs), reduction_axes=[xs.axes[d] for d in dims])
    y = xs * api.rsqrt(ms + api.constant(float(node.attr("epsilon", 1e-5)), dtype=xs.dtype))
    return affine(ctx, api.cast(y, x.dtype) if y.dtype != x.dtype else y, inputs[1], None)


@converter("MeanVarianceNormalization", since=9)
def mean_variance_normalization(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    dims = sorted({normalize_axis(a, len(x.axes), f"MeanVarianceNormalization node {node.name!r}")
                   for a in node.attr("axes", [0, 2, 3])})
    kept = [a for i, a in enumerate(x.axes) if i not in dims]
    mean, var = api.moments(x, kept)
    return (x - mean) / (api.sqrt(var) + api.constant(1e-9, dtype=x.dtype))


@converter("LpNormalization", since=1)
def lp_normalization(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    axis = x.axes[normalize_axis(node.attr("axis", -1), len(x.axes), f"LpNormalization node {node.name!r}")]
    p = int(node.attr("p", 2))
    if p not in (1, 2):
        raise OnnxError(f"LpNormalization node {node.name!r}: expected p in (1, 2), received {p}")
    norm = api.sum(api.absolute(x), reduction_axes=[axis]) if p == 1 else \
        api.sqrt(api.sum(api.square(x), reduction_axes=[axis]))
    zero, one = api.constant(0.0, dtype=x.dtype), api.constant(1.0, dtype=x.dtype)
    return x / api.where(api.cast(api.equal(norm, zero), "bool"), one, norm)  # an all-zero slice stays 0, as ONNX


@converter("LRN", since=1)
def lrn(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    _float(node, x)
    size = int(node.attr("size"))
    alpha, beta, bias = (float(node.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    if size < 1 or len(x.axes) < 3:
        raise OnnxError(f"LRN node {node.name!r}: expected size >= 1 and an input [N, C, ...], received size={size}, "
                        f"shape {tuple(x.axes.lengths)}")
    c = x.axes.lengths[1]
    low, high = (size - 1) // 2, size - 1 - (size - 1) // 2
    squares = api.pad(api.square(x), [0, (low, high)] + [0] * (len(x.axes) - 2))
    window = None  # sum over channels [c - low, c + high] as `size` shifted slices of the padded squares
    for i in range(size):
        s = ctx.rename(api.tensor_slice(squares, [slice(None), slice(i, i + c)]), x.axes)
        window = s if window is None else window + s
    base = api.constant(bias, dtype=x.dtype) + window * api.constant(alpha / size, dtype=x.dtype)
    return x / api.power(base, api.constant(beta, dtype=x.dtype))
