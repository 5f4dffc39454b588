"""Converters: losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).

Both pick ``input[n, target[n, d...], d...]`` with a one-hot of the targets over the
class dim (``[N, C, d...]``, a comparison with a constant ``arange(C)``), so no gather
and no index arithmetic at run time. The per-element weight is the same one-hot times
the class ``weight`` (ones when omitted), with the ``ignore_index`` class zeroed: an
ignored target contributes 0 to the loss and 0 to ``mean``'s denominator
``sum(weight[target])``, as ONNX says. A target outside ``[0, C)`` (ONNX's usual
``ignore_index=-1``/``-100``) has an all-zero one-hot and is ignored the same way.

Example:
    >>> node = helper.make_node("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["loss", "log_prob"],
    ...                         reduction="mean", ignore_index=-1)
"""

from __future__ import annotations

import numpy as np

from ... import api
from ...ir import Op
from .errors import OnnxError
from .ops_conv import FLOATS
from .registry import converter

REDUCTIONS = ("none", "sum", "mean")


def nll(ctx, node, x: Op, target, weight) -> Op:
    """ONNX's negative log-likelihood of log-probabilities ``x`` ``[N, C, d...]`` at ``target`` ``[N, d...]``.

    Args:
        node: the loss node (its ``reduction`` and ``ignore_index``).
        x: log-probabilities (float).
        target: class ids (int), one per ``x`` position without the class dim.
        weight: per-class weights ``[C]``, or None.

    Returns:
        the per-position losses ``[N, d...]`` (``reduction="none"``), their sum, or their
        weighted mean (a scalar).

    Raises:
        OnnxError: an unknown reduction, or a target whose shape is not ``x``'s without ``C``.

    Example:
        >>> loss = nll(ctx, node, log_softmax_of_scores, labels, None)
    """
    reduction = node.attr("reduction", "mean")
    if reduction not in REDUCTIONS:
        raise OnnxError(f"{node.op_type} node {node.name!r}: expected reduction in {REDUCTIONS}, received "
                        f"{reduction!r}")
    if x.dtype not in FLOATS:
        raise node.unsupported(f"input of type {x.dtype}")
    target = ctx.as_op(target)
    n, c, *rest = x.axes.lengths
    if tuple(target.axes.lengths) != (n, *rest):
        raise OnnxError(f"{node.op_type} node {node.name!r}: expected target of shape {(n, *rest)} for input "
                        f"{tuple(x.axes.lengths)}, received {tuple(target.axes.lengths)}")
    classes = np.arange(c, dtype=target.dtype).reshape([1, c] + [1] * len(rest))
    t, iota = ctx.broadcast(ctx.reshape(target, [n, 1, *rest]), classes)
    hot = api.cast(api.equal(t, iota), x.dtype)
    w = np.ones(c, dtype=x.dtype) if weight is None else weight
    ignore = node.attr("ignore_index", None)
    if ignore is not None and 0 <= int(ignore) < c:
        keep = np.ones(c, dtype=x.dtype)
        keep[int(ignore)] = 0
        w = api.multiply(*ctx.broadcast(ctx.as_op(w, x.dtype), keep))
    hot_w = api.multiply(*ctx.broadcast(hot, ctx.reshape(ctx.as_op(w, x.dtype), [1, c] + [1] * len(rest))))
    x, hot_w = ctx.broadcast(x, hot_w)
    class_axis = x.axes[1]
    loss = api.negative(api.sum(x * hot_w, reduction_axes=[class_axis]))
    if reduction == "none":
        return ctx.rename(loss)
    total = api.sum(loss)
    if reduction == "sum":
        return total
    return total / api.sum(hot_w)


@converter("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    return nll(ctx, node, x, inputs[1], inputs[2] if len(inputs) > 2 else None)


@converter("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(ctx, node, inputs):
    scores = ctx.as_op(inputs[0])
    if len(scores.axes) < 2:
        raise OnnxError(f"SoftmaxCrossEntropyLoss node {node.name!r}: expected scores [N, C, ...], received shape "
                        f"{tuple(scores.axes.lengths)}")
    log_prob = api.axes_with_order(api.log_softmax(scores, normalization_axes=[scores.axes[1]]), scores.axes)
    loss = nll(ctx, node, log_prob, inputs[1], inputs[2] if len(inputs) > 2 else None)
    return [loss, log_prob] if len(node.outputs) > 1 and node.outputs[1] else loss
