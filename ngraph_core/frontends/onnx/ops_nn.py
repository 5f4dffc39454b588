"""Converters: products and activations' normalizers (MatMul, Gemm, Softmax, LogSoftmax, Hardmax, Dropout).

MatMul and Gemm go through ``ImportContext.matmul`` (``tensor.py``), which lowers the product:
a 2-D right operand makes one ``ng.dot`` over ``[batch * M, K]``, batched float operands on both
sides (attention's ``Q K^T``) one grouped 1x1 convolution; neither materializes the
``[batch, M, K, N]`` broadcast product.

Softmax-family axis semantics changed at opset 13: before, the input is coerced to 2-D
at ``axis`` (the normalization runs over *every* dim from ``axis`` on, default 1); from
13 on, over the one dim ``axis`` (default -1).

Example:
    >>> node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, transB=1)
"""

from __future__ import annotations

import numpy as np

from ... import api
from ...ir import Op
from .errors import OnnxError
from .registry import converter
from .tensor import dtype_of, normalize_axis, shape_of


@converter("MatMul", since=1)
def matmul(ctx, node, inputs):
    return ctx.matmul(*inputs)


@converter("MatMulInteger", since=10)
def matmul_integer(ctx, node, inputs):
    """Integer MatMul, exact in float64 (8-bit products summed), returned as int32."""
    a, b = ctx.as_op(inputs[0], "float64"), ctx.as_op(inputs[1], "float64")
    a_zero = inputs[2] if len(inputs) > 2 else None
    b_zero = inputs[3] if len(inputs) > 3 else None
    if a_zero is not None:
        zero = ctx.as_op(a_zero, "float64")
        if len(zero.axes) == 1 and zero.axes.lengths[0] > 1:  # one zero point per row of A
            zero = ctx.reshape(zero, [zero.axes.lengths[0], 1])
        a = api.subtract(*ctx.broadcast(a, zero))
    if b_zero is not None:
        b = api.subtract(*ctx.broadcast(b, ctx.as_op(b_zero, "float64")))  # per column: the last dim
    return api.cast(ctx.matmul(a, b), "int32")


@converter("Gemm", since=1)
def gemm(ctx, node, inputs):
    a, b = ctx.as_op(inputs[0]), ctx.as_op(inputs[1])
    if len(a.axes) != 2 or len(b.axes) != 2:
        raise OnnxError(f"Gemm node {node.name!r}: expected 2-D A and B, received shapes {tuple(a.axes.lengths)} "
                        f"and {tuple(b.axes.lengths)}; hint: use MatMul for batched products")
    if node.attr("transA", 0):
        a = ctx.transpose(a, [1, 0])
    if node.attr("transB", 0):
        b = ctx.transpose(b, [1, 0])
    y = ctx.matmul(a, b)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        y = y * api.constant(alpha, dtype=y.dtype)
    c = inputs[2] if len(inputs) > 2 else None
    if c is not None and beta != 0.0:
        c = ctx.as_op(c, y.dtype)
        if beta != 1.0:
            c = c * api.constant(beta, dtype=y.dtype)
        y, c = ctx.broadcast(y, c)
        y = y + c
    return y


def _softmax_dims(node, x: Op) -> list[int]:
    rank = len(x.axes)
    if node.opset < 13:
        axis = normalize_axis(node.attr("axis", 1), rank, f"{node.op_type} node {node.name!r}")
        return list(range(axis, rank))  # coerced to 2-D at axis: every trailing dim
    return [normalize_axis(node.attr("axis", -1), rank, f"{node.op_type} node {node.name!r}")]


@converter("Softmax", "LogSoftmax", since=1)
def softmax(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    if not x.axes:
        return api.constant(0.0 if node.op_type == "LogSoftmax" else 1.0, dtype=x.dtype)
    axes = [x.axes[d] for d in _softmax_dims(node, x)]
    fn = api.softmax if node.op_type == "Softmax" else api.log_softmax
    return api.axes_with_order(fn(x, normalization_axes=axes), x.axes)


@converter("Hardmax", since=1)
def hardmax(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    dims = _softmax_dims(node, x)
    shape = x.axes.lengths
    flat = ctx.reshape(x, [*shape[:dims[0]], int(np.prod([shape[d] for d in dims]))]) if len(dims) > 1 else x
    axis = flat.axes[dims[0]]
    index = api.argmax(flat, reduction_axes=[axis])  # the first maximum, as ONNX
    iota = api.constant(np.arange(axis.length, dtype=index.dtype), axes=[axis])
    hot = api.cast(api.equal(api.broadcast(index, flat.axes), api.broadcast(iota, flat.axes)), x.dtype)
    return ctx.reshape(hot, shape)


@converter("Dropout", since=1)
def dropout(ctx, node, inputs):
    x = inputs[0]
    if node.opset >= 12:
        ratio = float(ctx.static(inputs[1] if len(inputs) > 1 else None, "Dropout's ratio", default=0.5))
        training = bool(ctx.static(inputs[2] if len(inputs) > 2 else None, "Dropout's training_mode",
                                   default=False))
    else:
        ratio = float(node.attr("ratio", 0.5))
        training = node.opset < 7 and not node.attr("is_test", 0)
    if training and ratio > 0:
        raise node.unsupported(f"training_mode with ratio={ratio} (random masks are not reproducible across "
                               "frameworks); hint: export the model for inference")
    if len(node.outputs) < 2 or not node.outputs[1]:
        return x
    mask_dtype = "bool" if node.opset >= 10 else dtype_of(x)
    return [x, np.ones(shape_of(x), dtype=mask_dtype)]
