"""Converters: the ten ``Reduce*`` operators and ``ArgMax`` / ``ArgMin``.

Each reduction is ``post(reduce(pre(x)))`` over the dims named by ``axes``:

=================  ==========  =======  ========
operator           pre         reduce   post
=================  ==========  =======  ========
ReduceSum          -           sum      -
ReduceSumSquare    x*x         sum      -
ReduceL1           abs         sum      -
ReduceL2           x*x         sum      sqrt
ReduceLogSum       -           sum      log
ReduceLogSumExp    (stable: max subtracted first)
ReduceMean/Max/Min/Prod  -     that     -
=================  ==========  =======  ========

``axes`` is an attribute up to opset 12 (``ReduceSum``) or 17 (the others) and an optional
input after; it must be known at import time. No axes reduce every dim, unless
``noop_with_empty_axes=1``, which reduces none (``pre`` and ``post`` still apply, as in the
ONNX reference). ``keepdims`` (default 1) keeps reduced dims with length 1. A reduction over
a dim of length 0 gives the reduction's identity (0, 1, -inf, +inf; NaN for the mean).

Example:
    >>> # ReduceL2(x [2, 3], axes=[1], keepdims=0) -> sqrt(sum(x*x, dim 1)) [2]
"""

from __future__ import annotations

import numpy as np

from ... import api
from ...ir import is_float
from .registry import converter
from .tensor import normalize_axis

# operator -> (the opset from which axes is an input, ngraph reduction kind, pre, post)
_REDUCTIONS = {
    "ReduceSum": (13, "sum", None, None),
    "ReduceSumSquare": (18, "sum", lambda x: x * x, None),
    "ReduceL1": (18, "sum", api.absolute, None),
    "ReduceL2": (18, "sum", lambda x: x * x, api.sqrt),
    "ReduceLogSum": (18, "sum", None, api.log),
    "ReduceLogSumExp": (18, "logsumexp", None, None),
    "ReduceMean": (18, "mean", None, None),
    "ReduceMax": (18, "max", None, None),
    "ReduceMin": (18, "min", None, None),
    "ReduceProd": (18, "prod", None, None),
}
# the value of a reduction over no elements, before ``post`` (log(0) = -inf for ReduceLogSum)
_EMPTY = {"ReduceSum": 0.0, "ReduceSumSquare": 0.0, "ReduceL1": 0.0, "ReduceL2": 0.0, "ReduceLogSum": -np.inf,
          "ReduceLogSumExp": -np.inf, "ReduceMean": np.nan, "ReduceMax": -np.inf, "ReduceMin": np.inf,
          "ReduceProd": 1.0}
# operators computed in float64 for integer inputs (sqrt, log and exp need floats), then cast back
_FLOAT_ONLY = {"ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean"}


def _dims(ctx, node, inputs, rank: int) -> list[int]:
    """The dims to reduce, normalized and sorted; [] for noop_with_empty_axes with no axes."""
    axes_input_since = _REDUCTIONS[node.op_type][0]
    if node.opset >= axes_input_since:
        axes = inputs[1] if len(inputs) > 1 else None
        axes = ctx.static(axes, f"{node.op_type}'s axes", default=None)
    else:
        axes = node.attr("axes", None)
    axes = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not axes:
        return [] if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted({normalize_axis(a, rank, f"{node.op_type} node {node.name!r}") for a in axes})


def _empty_result(x, op_type: str, dims: list[int], keepdims: bool) -> np.ndarray:
    """The static result of reducing dims where one has length 0 (no element to read)."""
    shape = [1 if i in dims else n for i, n in enumerate(x.axes.lengths) if keepdims or i not in dims]
    value = _EMPTY[op_type]
    if not is_float(x.dtype) and not np.isfinite(value):  # the integer extremes stand for +-inf
        info = np.iinfo(x.dtype)
        value = info.min if value < 0 else info.max
    return np.full(shape, value, dtype=x.dtype)


@converter(*_REDUCTIONS, since=1)
def reduce(ctx, node, inputs):
    """``post(reduce(pre(x)))`` over ``axes`` with ONNX's ``keepdims`` and ``noop_with_empty_axes``."""
    x = ctx.as_op(inputs[0])
    _, kind, pre, post = _REDUCTIONS[node.op_type]
    dims = _dims(ctx, node, inputs, len(x.axes))
    keepdims = bool(node.attr("keepdims", 1))
    if any(x.axes[d].length == 0 for d in dims):
        return _empty_result(x, node.op_type, dims, keepdims)
    dtype = x.dtype
    if node.op_type in _FLOAT_ONLY and not is_float(dtype):
        x = api.cast(x, "float64")
    if pre is not None:
        x = pre(x)
    if kind == "logsumexp":
        out = api.logsumexp(x, reduction_axes=[x.axes[d] for d in dims]) if dims else x
        if keepdims and dims:
            out = ctx.reshape(out, [1 if i in dims else n for i, n in enumerate(x.axes.lengths)])
    else:
        out = ctx.reduce(kind, x, dims, keepdims)
    if post is not None:
        out = post(out)
    return out if out.dtype == dtype else api.cast(out, dtype)


@converter("ArgMax", "ArgMin", since=1)
def arg_reduce(ctx, node, inputs):
    """The int64 index of the maximum / minimum along ``axis`` (first occurrence, or the last with
    ``select_last_index=1``), with ``keepdims``."""
    x = ctx.as_op(inputs[0])
    axis = normalize_axis(node.attr("axis", 0), len(x.axes), f"{node.op_type} node {node.name!r}")
    reduced = x.axes[axis]
    last = bool(node.attr("select_last_index", 0))
    if last:  # the first occurrence in the reversed axis is the last one in the original
        x = api.slice_along_axis(x, reduced, slice(None, None, -1))
    fn = api.argmax if node.op_type == "ArgMax" else api.argmin
    out = fn(x, reduction_axes=[x.axes[axis]])
    if last:
        out = api.subtract(reduced.length - 1, out)
    if node.attr("keepdims", 1):
        out = ctx.reshape(out, [1 if i == axis else n for i, n in enumerate(x.axes.lengths)])
    return out
