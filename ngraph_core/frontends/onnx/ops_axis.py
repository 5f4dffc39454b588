"""Converters: operators that work along one dim (CumSum, CumProd, TopK, ReverseSequence, OneHot, Trilu).

The running sums/products and TopK map onto ``ng.cumsum`` / ``ng.cumprod`` / ``ng.topk``
with the dim given by position; their ``axis`` and ``k`` inputs must be static (they fix
the output's shape or the op's argument). ``ReverseSequence`` is a ``gather_elements``
along the time dim whose positions are computed in the graph from ``sequence_lens`` (so the
lengths may be a run-time input). ``OneHot`` compares the indices with ``arange(depth)``
on a new dim; ``Trilu`` selects with a static triangle mask.

Example:
    >>> # CumSum(x [2, 3], axis=1, exclusive=1) -> [[0, x00, x00+x01], ...]
"""

from __future__ import annotations

import numpy as np

from ... import api
from .errors import OnnxError
from .ops_shape import optional
from .registry import converter
from .tensor import dtype_of, normalize_axis, shape_of


def static_int(ctx, node, value, what: str, default: int | None = None) -> int:
    """A static scalar (or one-element) integer input as an int; ``default`` when omitted."""
    array = ctx.static(value, what, default=None)
    if array is None:
        if default is None:
            raise OnnxError(f"{node.op_type} node {node.name!r}: {what} is required")
        return default
    if np.asarray(array).size != 1:
        raise OnnxError(f"{node.op_type} node {node.name!r}: {what} must hold one value, received shape "
                        f"{np.shape(array)}")
    return int(np.asarray(array).reshape(-1)[0])


@converter("CumSum", since=11)
@converter("CumProd", since=26)
def cumulative(ctx, node, inputs):
    """Running sums (products) along the static ``axis`` input; ``exclusive`` leaves each element out,
    ``reverse`` runs from the end."""
    x = ctx.as_op(inputs[0])
    axis = normalize_axis(static_int(ctx, node, inputs[1], f"{node.op_type}'s axis"), len(x.axes),
                          f"{node.op_type} node {node.name!r}")
    fn = api.cumsum if node.op_type == "CumSum" else api.cumprod
    return fn(x, axis, exclusive=bool(node.attr("exclusive", 0)), reverse=bool(node.attr("reverse", 0)))


@converter("TopK", since=1)
def topk(ctx, node, inputs):
    """The ``k`` largest (``largest=0``: smallest) values along ``axis`` and their int64 indices.

    ``k`` is an attribute before opset 10 and a static input from it on.
    """
    x = ctx.as_op(inputs[0])
    axis = normalize_axis(node.attr("axis", -1), len(x.axes), f"TopK node {node.name!r}")
    k = int(node.attr("k")) if node.opset < 10 else static_int(ctx, node, inputs[1], "TopK's k")
    if not 0 <= k <= x.axes[axis].length:
        raise OnnxError(f"TopK node {node.name!r}: k = {k} is out of range for dim {axis} of length "
                        f"{x.axes[axis].length}; hint: expected 0 <= k <= the dim's length")
    values, indices = api.topk(x, axis, k, largest=bool(node.attr("largest", 1)), sorted=bool(node.attr("sorted", 1)))
    return [ctx.rename(values), ctx.rename(indices)]


@converter("ReverseSequence", since=10)
def reverse_sequence(ctx, node, inputs):
    """Each batch entry's first ``sequence_lens[b]`` time steps reversed, the rest kept."""
    x = ctx.as_op(inputs[0])
    rank = len(x.axes)
    batch = normalize_axis(node.attr("batch_axis", 1), rank, f"ReverseSequence node {node.name!r}")
    time = normalize_axis(node.attr("time_axis", 0), rank, f"ReverseSequence node {node.name!r}")
    if batch == time:
        raise OnnxError(f"ReverseSequence node {node.name!r}: batch_axis and time_axis are both {batch}")
    dims = shape_of(x)
    lens_shape, steps_shape = [1] * rank, [1] * rank
    lens_shape[batch], steps_shape[time] = dims[batch], dims[time]
    lens = ctx.reshape(ctx.as_op(inputs[1], dtype="int64"), lens_shape)
    steps = np.arange(dims[time], dtype="int64").reshape(steps_shape)
    lens, steps, _ = ctx.broadcast(lens, steps, np.zeros(dims, dtype="int64"))  # both to x's full shape
    positions = api.where(api.cast(api.less(steps, lens), "bool"), lens - 1 - steps, steps)
    return api.gather_elements(x, positions, time)


@converter("OneHot", since=9)
def one_hot(ctx, node, inputs):
    """``values[1]`` where ``indices`` (negative ones count from the end) equals the position along a new
    dim of static length ``depth`` inserted at ``axis``, ``values[0]`` elsewhere."""
    indices, values = inputs[0], inputs[2]
    depth = ctx.static(inputs[1], "OneHot's depth")
    depth = int(np.asarray(depth).reshape(-1)[0])
    dims = shape_of(indices)
    axis = normalize_axis(node.attr("axis", -1), len(dims) + 1, f"OneHot node {node.name!r}")
    if depth < 0:
        raise OnnxError(f"OneHot node {node.name!r}: expected a non-negative depth, received {depth}")
    ctx.check_tensor((*dims, depth), dtype_of(values))  # the output, before the positions are made
    ctx.check_constant((depth,), "int64")
    ids = ctx.as_op(indices, dtype="int64")
    ids = api.where(api.cast(api.less(ids, 0), "bool"), ids + depth, ids)
    ids = ctx.reshape(ids, dims[:axis] + (1,) + dims[axis:])
    positions = np.arange(depth, dtype="int64").reshape([depth if i == axis else 1 for i in range(len(dims) + 1)])
    ids, positions = ctx.broadcast(ids, positions)
    hot = api.cast(api.equal(ids, positions), "bool")
    values = ctx.as_op(values)
    off, on = (ctx.reshape(api.tensor_slice(values, [i]), ()) for i in (0, 1))
    hot, on, off = ctx.broadcast(hot, on, off)
    return api.where(hot, on, off)


@converter("Trilu", since=14)
def trilu(ctx, node, inputs):
    """The upper (``upper=1``, default) or lower triangle of the last two dims from diagonal ``k``; zeros elsewhere."""
    x = ctx.as_op(inputs[0])
    dims = shape_of(x)
    if len(dims) < 2:
        raise OnnxError(f"Trilu node {node.name!r}: expected a tensor of rank >= 2, received shape {dims}")
    k = static_int(ctx, node, optional(inputs, 1), "Trilu's k", default=0)
    rows, cols = dims[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    mask = offset >= k if node.attr("upper", 1) else offset <= k
    if mask.all():
        return x
    mask, x, zero = ctx.broadcast(mask, x, np.zeros((), dtype=x.dtype))
    return api.where(mask, x, zero)
