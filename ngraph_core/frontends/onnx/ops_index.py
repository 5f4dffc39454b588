"""Converters: indexing (Slice, Gather*, Scatter*, TensorScatter, Compress, NonZero, Unique, ArrayFeatureExtractor).

``Slice`` becomes one ``SLICE`` op (starts/ends/axes/steps are static: attributes before
opset 10, inputs from it on; Python's slice clamping is ONNX's, negative steps included).
``Gather`` is ``ng.gather(..., out_of_range="raise")`` with the looked-up dim put back in place:
indices outside ``[-n, n)`` are an error, as in onnxruntime (``OnnxIndexError`` at import when
they are static, ``IndexRangeError`` naming the node when the graph runs); the element-wise
and N-d gathers and scatters map onto ``ng.gather_elements`` / ``gather_nd`` /
``scatter_elements`` / ``scatter_nd`` (negative indices handled by the ops).

``Compress``, ``NonZero`` and ``Unique`` have data-dependent output shapes, which a
compiled graph cannot have: their data (``Compress``: the condition) must be known at
import time. ``ctx.static`` raises ``NeedStatic`` otherwise, so the ONNX backend re-imports
with that input baked in and ``import_model`` asks for it in ``static_inputs``.

Example:
    >>> # Gather(data [5, 4, 3], indices [2, 6], axis=1) -> [5, 2, 6, 3]
"""

from __future__ import annotations

import numpy as np

from ... import api
from .errors import OnnxError, OnnxIndexError
from .ops_shape import int_list, optional
from .registry import converter
from .tensor import normalize_axis, shape_of


def take(ctx, x, ids, axis: int):
    """``np.take(x, ids, axis)`` as ng ops: the ids' dims replace dim ``axis`` in place.

    Args:
        ctx: the import context.
        x: an op; ids: an integer value (static array or op) of any rank, entries in ``[-n, n)``.
        axis: a non-negative dim of ``x``.

    Returns:
        An op of shape ``x.shape[:axis] + ids.shape + x.shape[axis + 1:]``.

    Raises:
        OnnxIndexError: static ids outside ``[-n, n)`` (ids computed by the graph raise ``IndexRangeError``
            when it runs: the gather is built with ``out_of_range="raise"``).

    Example:
        >>> take(ctx, x, np.array([2, 0]), 1)   # x [4, 3, 5] -> [4, 2, 5]
    """
    n = x.axes[axis].length
    if isinstance(ids, np.ndarray):
        bad = np.flatnonzero((ids < -n) | (ids >= n))
        if bad.size:
            at = tuple(int(i) for i in np.unravel_index(bad[0], ids.shape))
            raise OnnxIndexError(f"{ctx._where()}: index {int(ids.reshape(-1)[bad[0]])} at position {at} of the "
                                 f"indices is out of range for dim {axis} of length {n}; expected indices in "
                                 f"[{-n}, {n}); hint: is the model damaged?")
        ids = np.where(ids < 0, ids + n, ids).astype("int64")
    ids = ctx.rename(ctx.as_op(ids))
    out = api.gather(x, ids, x.axes[axis], out_of_range="raise")
    order = list(x.axes[:axis]) + list(ids.axes) + list(x.axes[axis + 1:])
    return api.axes_with_order(out, order)


@converter("Slice", since=1)
def slice_(ctx, node, inputs):
    """``x[starts:ends:steps]`` along ``axes`` (default: the first len(starts) dims; steps default 1)."""
    x = ctx.as_op(inputs[0])
    rank = len(x.axes)
    if node.opset < 10:
        starts, ends, axes, steps = node.attr("starts"), node.attr("ends"), node.attr("axes", None), None
    else:
        starts, ends, axes, steps = (int_list(ctx, optional(inputs, i), f"Slice's {w}")
                                     for i, w in enumerate(("starts", "ends", "axes", "steps"), 1))
    starts, ends = [int(s) for s in starts], [int(e) for e in ends]
    axes = list(range(len(starts))) if axes is None else [normalize_axis(a, rank, f"Slice node {node.name!r}")
                                                          for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise OnnxError(f"Slice node {node.name!r}: expected starts {starts}, ends {ends}, axes {axes} and steps "
                        f"{steps} of one length, axes distinct")
    if any(s == 0 for s in steps):
        raise OnnxError(f"Slice node {node.name!r}: steps must be nonzero, received {steps}")
    index = [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(start, end, step)
    return ctx.rename(api.tensor_slice(x, index))


@converter("Gather", since=1)
def gather(ctx, node, inputs):
    """``np.take(data, indices, axis)``: indices of any rank (negative ones count from the end)."""
    x = ctx.as_op(inputs[0])
    axis = normalize_axis(node.attr("axis", 0), len(x.axes), f"Gather node {node.name!r}")
    return take(ctx, x, inputs[1], axis)


@converter("GatherElements", since=11)
def gather_elements(ctx, node, inputs):
    """``out[i][j] = data[index[i][j]][j]`` for axis 0 (and so on): indices of data's rank."""
    x, indices = ctx.as_op(inputs[0]), ctx.as_op(inputs[1])
    axis = normalize_axis(node.attr("axis", 0), len(x.axes), f"GatherElements node {node.name!r}")
    return ctx.rename(api.gather_elements(x, indices, axis))


@converter("GatherND", since=11)
def gather_nd(ctx, node, inputs):
    """Slices of data at the index tuples in the last dim of indices, after ``batch_dims`` shared dims."""
    x, indices = ctx.as_op(inputs[0]), ctx.rename(ctx.as_op(inputs[1]))
    return ctx.rename(api.gather_nd(x, indices, batch_dims=int(node.attr("batch_dims", 0))))


@converter("Scatter", since=9)
@converter("ScatterElements", since=11)
def scatter_elements(ctx, node, inputs):
    """Data with ``updates`` written at ``indices`` along ``axis`` (``reduction``: none/add/mul/max/min)."""
    x, indices, updates = (ctx.as_op(v) for v in inputs)
    axis = normalize_axis(node.attr("axis", 0), len(x.axes), f"{node.op_type} node {node.name!r}")
    return api.scatter_elements(x, indices, updates, axis, reduction=node.attr("reduction", "none"))


@converter("ScatterND", since=11)
def scatter_nd(ctx, node, inputs):
    """Data with ``updates`` written at the index tuples of ``indices`` (``reduction``: none/add/mul/max/min)."""
    x, indices, updates = (ctx.as_op(v) for v in inputs)
    return api.scatter_nd(x, indices, updates, reduction=node.attr("reduction", "none"))


@converter("Compress", since=9)
def compress(ctx, node, inputs):
    """The slices of the input along ``axis`` (default: the flattened input) where the static condition is true."""
    x = ctx.as_op(inputs[0])
    condition = ctx.static(inputs[1], "Compress's condition").astype(bool).reshape(-1)
    axis = node.attr("axis", None)
    if axis is None:
        x, axis = ctx.reshape(x, (x.axes.size,)), 0
    axis = normalize_axis(axis, len(x.axes), f"Compress node {node.name!r}")
    if condition.size > x.axes[axis].length:
        raise OnnxError(f"Compress node {node.name!r}: condition of length {condition.size} is longer than dim "
                        f"{axis} ({x.axes[axis].length})")
    return take(ctx, x, np.flatnonzero(condition).astype("int64"), axis)


@converter("NonZero", since=9)
def nonzero(ctx, node, inputs):
    """The int64 indices ``[rank, count]`` of the nonzero elements; the input must be static (shape = its data)."""
    data = ctx.constant(inputs[0], "NonZero's input (its result's shape depends on it)")
    return np.array(np.nonzero(data), dtype="int64").reshape(data.ndim, -1)


@converter("Unique", since=11)
def unique(ctx, node, inputs):
    """``Y, indices, inverse_indices, counts`` of the static input (``sorted``, optional ``axis``).

    The outputs' shapes depend on the data, so the input must be known at import time.
    """
    data = ctx.constant(inputs[0], "Unique's input (its results' shapes depend on it)")
    axis = node.attr("axis", None)
    if axis is not None:
        axis = normalize_axis(axis, data.ndim, f"Unique node {node.name!r}")
    values, first, inverse, counts = np.unique(data, return_index=True, return_inverse=True, return_counts=True,
                                               axis=axis)
    inverse = inverse.reshape(-1)
    if not node.attr("sorted", 1):  # the order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=axis if axis is not None else 0)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return [values.astype(data.dtype)] + [a.astype("int64") for a in (first, inverse, counts)]



@converter("TensorScatter", since=24)
def tensor_scatter(ctx, node, inputs):
    """A KV cache with ``update`` written along ``axis`` from each batch entry's ``write_indices`` (default 0).

    ``mode="circular"`` wraps the positions modulo the cache length; the indices may be a run-time input.
    """
    cache, update = ctx.as_op(inputs[0]), ctx.as_op(inputs[1])
    dims, who = shape_of(cache), f"TensorScatter node {node.name!r}"
    axis = normalize_axis(node.attr("axis", -2), len(dims), who)
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular") or axis == 0:
        raise OnnxError(f"{who}: expected mode 'linear' or 'circular' and a sequence axis after the batch axis, "
                        f"received mode {mode!r}, axis {axis}")
    steps = shape_of(update)[axis]
    start = optional(inputs, 2)
    start = np.zeros(dims[0], "int64") if start is None else start
    start = ctx.reshape(ctx.as_op(start, dtype="int64"), [dims[0]] + [1] * (len(dims) - 1))
    offsets = np.arange(steps, dtype="int64").reshape([steps if i == axis else 1 for i in range(len(dims))])
    start, offsets, _ = ctx.broadcast(start, offsets, np.zeros(shape_of(update), "int64"))
    positions = start + offsets
    if mode == "circular":
        positions = api.mod(positions, dims[axis])
    return api.scatter_elements(cache, positions, api.cast_axes(update, positions.axes), axis)


@converter("ArrayFeatureExtractor", since=1, domain="ai.onnx.ml")
def array_feature_extractor(ctx, node, inputs):
    """The input's last dim picked at the (flattened) ``indices``; a 1-D input gives one row."""
    x = ctx.as_op(inputs[0])
    indices = inputs[1]
    count = int(np.prod(shape_of(indices), dtype=np.int64))
    indices = ctx.reshape(ctx.as_op(indices), (count,)) if not isinstance(indices, np.ndarray) else indices.reshape(-1)
    if len(x.axes) == 1:
        x = ctx.reshape(x, (1, x.axes[0].length))
    return take(ctx, x, indices, len(x.axes) - 1)
