"""Converters: products and activations' normalizers (MatMul, Gemm, Softmax, LogSoftmax, Hardmax, Dropout).

MatMul with a 2-D right operand (a linear layer on ``[batch..., M, K]``) reads the left
operand as one ``[batch * M, K]`` matrix and makes a single ``ng.dot``; batched float
operands on both sides (attention's ``Q K^T``) become one grouped 1x1 convolution (see
``batched_matmul``); neither materializes the ``[batch, M, K, N]`` broadcast product.

Softmax-family axis semantics changed at opset 13: before, the input is coerced to 2-D
at ``axis`` (the normalization runs over *every* dim from ``axis`` on, default 1); from
13 on, over the one dim ``axis`` (default -1).

Example:
    >>> node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, transB=1)
"""

from __future__ import annotations

import numpy as np

from ... import api as ng
from ...ir import Axes, Axis, Op
from .errors import OnnxError
from .ops_conv import BATCH, FLOATS
from .registry import converter
from .tensor import dtype_of, normalize_axis, shape_of


def matmul_op(ctx, a, b) -> Op:
    """NumPy's ``matmul`` of two values, lowered to the cheapest ngraph product.

    * ``b`` 2-D: ``a`` read as one ``[batch * M, K]`` matrix, one ``ng.dot``;
    * ``b`` batched, ``a`` a matrix or batched (float): a grouped 1x1 convolution, one group
      per batch matrix (``batched_matmul``), never materializing the ``[batch, M, K, N]`` product;
    * otherwise (vectors, integers): ``ctx.matmul``.

    float16 operands are multiplied in float32 (as NumPy and onnxruntime accumulate) and the
    product rounded back.

    Raises:
        OnnxError: inner dims that differ, or batch dims that do not broadcast.
    """
    a, b = ctx.as_op(a), ctx.as_op(b)
    if a.dtype == "float16" and b.dtype == "float16":
        return ng.cast(matmul_op(ctx, ng.cast(a, "float32"), ng.cast(b, "float32")), "float16")
    if len(a.axes) >= 2 and len(b.axes) >= 2 and a.axes.lengths[-1] != b.axes.lengths[-2]:
        raise OnnxError(f"matmul: inner dims differ: {tuple(a.axes.lengths)} @ {tuple(b.axes.lengths)}")
    if len(b.axes) == 2 and len(a.axes) > 2:
        lead, k = a.axes.lengths[:-1], a.axes.lengths[-1]
        rows = ctx.reshape(a, [int(np.prod(lead)), k])
        out = ng.dot(rows, ctx.rename(b, Axes([rows.axes[1], *ctx.fresh([b.axes.lengths[1]])])))
        return ctx.reshape(out, [*lead, b.axes.lengths[1]])
    if len(a.axes) >= 2 and len(b.axes) > 2 and a.dtype == b.dtype and a.dtype in FLOATS:
        return batched_matmul(ctx, a, b)
    return ctx.matmul(a, b)


def batched_matmul(ctx, a: Op, b: Op) -> Op:
    """``a [*batch, M, K] @ b [*batch, K, N]`` (batch dims broadcast) as one grouped 1x1 convolution.

    With ``G`` batch matrices, the activation is ``a`` as ``[C = G * K, M, N = 1]`` and the
    filter ``b`` as ``[K, 1, G * N]``: group ``g`` of the convolution multiplies the ``K``
    channels of matrix ``g`` by the ``N`` filters of matrix ``g`` at every one of the ``M``
    positions, which is ``a[g] @ b[g]``; the conv kernel runs it as one stacked GEMM.
    """
    batch = tuple(np.broadcast_shapes(tuple(a.axes.lengths[:-2]), tuple(b.axes.lengths[:-2])))
    (m, k), n = a.axes.lengths[-2:], b.axes.lengths[-1]
    a = ctx.expand(a, ctx.fresh([*batch, m, k])) if tuple(a.axes.lengths[:-2]) != batch else a
    b = ctx.expand(b, ctx.fresh([*batch, k, n])) if tuple(b.axes.lengths[:-2]) != batch else b
    groups = int(np.prod(batch))
    x = ctx.reshape(ctx.transpose(ctx.reshape(a, [groups, m, k]), [0, 2, 1]), [groups * k, m, 1])
    x = ctx.rename(x, Axes([*ctx.fresh([groups * k, m]), Axis(BATCH, 1)]))
    w = ctx.reshape(ctx.transpose(ctx.reshape(b, [groups, k, n]), [1, 0, 2]), [k, 1, groups * n])
    y = ng.convolution(x, w, groups=groups)  # [G * N, M, 1]
    y = ctx.transpose(ctx.reshape(y, [groups, n, m]), [0, 2, 1])
    return ctx.reshape(y, [*batch, m, n])


@converter("MatMul", since=1)
def matmul(ctx, node, inputs):
    return matmul_op(ctx, *inputs)


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
        a = ng.subtract(*ctx.broadcast(a, zero))
    if b_zero is not None:
        b = ng.subtract(*ctx.broadcast(b, ctx.as_op(b_zero, "float64")))  # per column: the last dim
    return ng.cast(matmul_op(ctx, a, b), "int32")


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
        y = y * ng.constant(alpha, dtype=y.dtype)
    c = inputs[2] if len(inputs) > 2 else None
    if c is not None and beta != 0.0:
        c = ctx.as_op(c, y.dtype)
        if beta != 1.0:
            c = c * ng.constant(beta, dtype=y.dtype)
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
        return ng.constant(0.0 if node.op_type == "LogSoftmax" else 1.0, dtype=x.dtype)
    axes = [x.axes[d] for d in _softmax_dims(node, x)]
    fn = ng.softmax if node.op_type == "Softmax" else ng.log_softmax
    return ng.axes_with_order(fn(x, normalization_axes=axes), x.axes)


@converter("Hardmax", since=1)
def hardmax(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    dims = _softmax_dims(node, x)
    shape = x.axes.lengths
    flat = ctx.reshape(x, [*shape[:dims[0]], int(np.prod([shape[d] for d in dims]))]) if len(dims) > 1 else x
    axis = flat.axes[dims[0]]
    index = ng.argmax(flat, reduction_axes=[axis])  # the first maximum, as ONNX
    iota = ng.constant(np.arange(axis.length, dtype=index.dtype), axes=[axis])
    hot = ng.cast(ng.equal(ng.broadcast(index, flat.axes), ng.broadcast(iota, flat.axes)), x.dtype)
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
