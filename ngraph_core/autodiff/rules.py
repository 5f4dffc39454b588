"""The gradient table: one rule per differentiable ``OpType``.

A rule takes the upstream gradient ``ctx`` (with the op's axes) and the op (which
is also its output) and returns one gradient per ``src``, each with that source's
axes, or None where no gradient flows. Ops in ``OpGroup.NON_DIFFERENTIABLE`` have
no rule. Composites (softmax, cross-entropy, logsumexp) have none either: autodiff
sees the primitives they are built from.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .. import api
from ..api.custom import registered_gradient
from ..errors import NgraphError, UnsupportedOpError
from ..ir import Op, OpType, is_float, make, substitute
from ..ir.conv import activation_roles
from ..ir.indexing import LookupArg, lookup_name
from ..ir.infer import MOMENTS_AXIS
from .scan import scan_grad, scan_result_grad
from .walk import Grads, Rule, backprop


def _x(op: Op) -> Op:
    return op.src[0]


def _reduce_to(g: Op, like: Op) -> Op:
    """``g`` summed/reordered to ``like``'s axes (the inverse of a broadcast)."""
    return g if g.axes == like.axes else api.sum(g, out_axes=like.axes)


def _maxmin_grad(ctx: Op, op: Op) -> Grads:
    x = _x(op)
    mask = api.equal(x, api.broadcast(op, x.axes))
    # ties share the gradient equally
    count = api.broadcast(api.sum(mask, out_axes=op.axes), x.axes)
    return (api.broadcast(ctx, x.axes) * mask / count,)


def _gather_grad(ctx: Op, op: Op) -> Op:
    """The table's gradient: the upstream rows added at the ids (a ``raise`` gather's negative ids count
    from the end, and scatter_add drops negative ids: they are wrapped first)."""
    table, ids = op.src
    name = lookup_name(op.arg)
    if isinstance(op.arg, LookupArg):
        ids = api.where(api.cast(api.less(ids, 0), "bool"), ids + table.axes.find(name).length, ids)
    return api.scatter_add(ctx, ids, table.axes, name)


def _slice_grad(ctx: Op, op: Op) -> Grads:
    x = _x(op)
    arg = tuple(s if isinstance(s, int) else (s[0], s[2]) for s in op.arg)
    return (make(OpType.PAD, [ctx], arg=arg, axes=x.axes),)


def _pad_grad(ctx: Op, op: Op) -> Grads:
    lengths = iter(_x(op).axes.lengths)
    arg = tuple(p if isinstance(p, int) else (p[0], p[0] + p[1] * next(lengths), p[1]) for p in op.arg)
    return (make(OpType.SLICE, [ctx], arg=arg),)


def _concat_grad(ctx: Op, op: Op) -> Grads:
    name, start, grads = op.arg, 0, []
    for s in op.src:
        n = s.axes.find(name).length
        grads.append(api.slice_along_axis(ctx, op.axes.find(name), slice(start, start + n)))
        start += n
    return tuple(grads)


def _scatter_grad(ctx: Op, op: Op) -> Grads:
    """scatter_elements / scatter_nd: "add" passes ctx to x and gathers it for the updates; "none" also
    zeroes x's gradient where an update replaced its value. Repeated positions under "none" (undefined in
    ONNX) give every update the gradient."""
    x, indices, updates = op.src
    reduction = op.arg.reduction
    if reduction not in ("none", "add"):
        raise UnsupportedOpError(
            f"gradients: {op.op.value} with reduction {reduction!r} has no gradient; expected 'none' or 'add'; "
            "hint: build the update with reduction='add' of log-values, or stop the gradient (ng.stop_gradient)"
        )
    elements = op.op is OpType.SCATTER_ELEMENTS
    gather = OpType.GATHER_ELEMENTS if elements else OpType.GATHER_ND
    gather_arg = replace(op.arg, reduction="none")
    d_updates = make(gather, [ctx, indices], arg=gather_arg)
    if reduction == "add":
        return ctx, None, api.cast_axes(d_updates, updates.axes)
    written = make(op.op, [api.fill_like(x, 0.0), indices, api.fill_like(updates, 1.0)], arg=op.arg)
    return ctx - ctx * written, None, api.cast_axes(d_updates, updates.axes)


def _dot_grad(ctx: Op, op: Op) -> Grads:
    a, b = op.src
    ga = api.axes_with_order(api.dot(ctx, b), a.axes)
    gb = api.axes_with_order(api.dot(a, ctx), b.axes)
    return ga, gb


# batch_dot is bilinear: each gradient contracts ctx with the other operand over that operand's free axes,
# keeping the batch axes: da[B, A, K] = sum_Bfree ctx[B, A, Bfree] b[B, K, Bfree], and db likewise
def _batch_dot_grad(ctx: Op, op: Op) -> Grads:
    a, b = op.src
    shared = a.axes & b.axes
    batch = shared & op.axes
    ga = make(OpType.BATCH_DOT, [ctx, b], axes=batch + (op.axes - batch - (b.axes - shared)) + (shared - batch))
    gb = make(OpType.BATCH_DOT, [a, ctx], axes=batch + (shared - batch) + (op.axes - batch - (a.axes - shared)))
    return api.axes_with_order(ga, a.axes), api.axes_with_order(gb, b.axes)


def _activation_like(g: Op, like: Op) -> Op:
    """``g``, an activation with ``like``'s roles and lengths, renamed and reordered to ``like``'s axes."""
    g_roles, like_roles = activation_roles(g.axes, "gradient"), activation_roles(like.axes, "gradient")
    canonical = api.cast_axes(api.axes_with_order(g, g_roles.canonical), like_roles.canonical)
    return api.axes_with_order(canonical, like.axes)


# conv is bilinear in (x, w); its two gradient ops are the adjoints, and they are bilinear too:
# <ctx, conv_bprop_data(dy, w)> = <conv(ctx, w), dy> and <ctx, conv_bprop_filter(x, dy)> = <conv(x, ctx), dy>
def _conv_grad(ctx: Op, op: Op) -> Grads:
    x, w = op.src
    return (make(OpType.CONV_BPROP_DATA, [ctx, w], arg=op.arg, axes=x.axes),
            make(OpType.CONV_BPROP_FILTER, [x, ctx], arg=op.arg, axes=w.axes))


def _conv_bprop_data_grad(ctx: Op, op: Op) -> Grads:
    dy, w = op.src
    return (_activation_like(make(OpType.CONV, [ctx, w], arg=op.arg), dy),
            make(OpType.CONV_BPROP_FILTER, [ctx, dy], arg=op.arg, axes=w.axes))


def _conv_bprop_filter_grad(ctx: Op, op: Op) -> Grads:
    x, dy = op.src
    return (make(OpType.CONV_BPROP_DATA, [dy, ctx], arg=op.arg, axes=x.axes),
            _activation_like(make(OpType.CONV, [x, ctx], arg=op.arg), dy))


def _pool_grad(ctx: Op, op: Op) -> Grads:
    x = _x(op)
    # max routes each window's gradient to its (first) maximum, which pool_bprop finds again in x
    src = [ctx, x] if op.arg.op == "max" else [ctx]
    return (make(OpType.POOL_BPROP, src, arg=op.arg, axes=x.axes),)


def _pool_bprop_grad(ctx: Op, op: Op) -> Grads:
    if op.arg.op == "avg":  # linear in dy: its adjoint is the average pooling itself
        return (make(OpType.POOL, [ctx], arg=op.arg),)
    raise UnsupportedOpError(
        "gradients: the gradient of max pooling's gradient (a second derivative through max pooling) is not "
        "supported; hint: use average pooling, or a strided convolution, where second derivatives are needed"
    )


def _moments_grad(ctx: Op, op: Op) -> Grads:
    """mean = sum(x)/n, var = sum((x - mean)^2)/n: dx = d_mean/n + d_var * 2 (x - mean)/n."""
    x = _x(op)
    mean = api.slice_along_axis(op, MOMENTS_AXIS, 0)
    d_mean, d_var = (api.broadcast_to(api.slice_along_axis(ctx, MOMENTS_AXIS, i), x.axes) for i in (0, 1))
    n = x.axes.size // mean.axes.size
    return ((d_mean + d_var * 2.0 * (x - api.broadcast_to(mean, x.axes))) * (1.0 / n),)


def _centered_sums_grad(ctx: Op, op: Op) -> Grads:
    """s0 = sum(dy), s1 = sum(dy * (x - mean)): d dy = c0 + c1 (x - mean), dx = c1 dy, d mean = -c1 s0."""
    dy, x, mean = op.src
    c0, c1 = (api.slice_along_axis(ctx, MOMENTS_AXIS, i) for i in (0, 1))
    s0 = api.slice_along_axis(op, MOMENTS_AXIS, 0)
    b1 = api.broadcast_to(c1, x.axes)
    d_dy = api.broadcast_to(c0, x.axes) + b1 * (x - api.broadcast_to(mean, x.axes))
    return api.broadcast_to(d_dy, dy.axes), b1 * api.broadcast_to(dy, x.axes), api.broadcast_to(-(c1 * s0), mean.axes)


def _ctc_grad(ctx: Op, op: Op) -> Grads:
    """d ctc[n] / d logits is row n of ctc_grad (softmax - posteriors): scaled by each example's ctx[n]."""
    return (make(OpType.CTC_GRAD, op.src, arg=op.arg) * ctx, None, None, None)


def _ctc_grad_grad(ctx: Op, op: Op) -> Grads:
    raise UnsupportedOpError(
        "gradients: the gradient of the CTC loss's gradient (a second derivative through ctc) is not supported; "
        "hint: differentiate the CTC loss once, or wrap its gradient with ng.stop_gradient"
    )


def _custom_grad(ctx: Op, op: Op) -> Grads:
    """A ``custom_gradient`` op: rebuild the user's ``grad`` (from the API's registry) and call it."""
    fn = registered_gradient(op.arg)
    if fn is None:
        raise UnsupportedOpError(
            f"custom_gradient {op.arg!r}: expected a function registered under this name, received none; "
            "hint: import the module that defines it before differentiating a deserialized graph"
        )
    inputs = op.src[1:]
    _, grad = fn(*inputs)
    grads = list(grad(ctx))
    if len(grads) != len(inputs):
        raise NgraphError(
            f"custom_gradient {op.arg!r}: expected {len(inputs)} gradient(s), one per input, received {len(grads)}; "
            "hint: return None for an input that gets no gradient"
        )
    return (None, *grads)


def _call_grad(ctx: Op, op: Op) -> list[Op | None]:
    """The sub-graph's result with the inputs substituted for its params, differentiated (a vector-Jacobian
    product: ``d sum(f(inputs) * ctx) / d inputs``, with ``ctx`` held constant)."""
    body = op.arg.graph
    (value,) = substitute([body.roots[op.arg.index]], dict(zip(body.params, op.src, strict=True)))
    float_inputs = [s for s in op.src if is_float(s.dtype)]
    if not float_inputs:
        return [None] * len(op.src)
    vjp = backprop(api.sum(value * api.stop_gradient(ctx)), float_inputs, None, RULES)
    grads = dict(zip(float_inputs, vjp, strict=True))
    return [grads.get(s) for s in op.src]


RULES: dict[OpType, Rule] = {
    # element-wise unary
    OpType.NEG: lambda ctx, op: (-ctx,),
    OpType.ABS: lambda ctx, op: (ctx * api.sign(_x(op)),),
    OpType.EXP: lambda ctx, op: (ctx * op,),
    OpType.LOG: lambda ctx, op: (ctx / _x(op),),
    OpType.LOG1P: lambda ctx, op: (ctx / (_x(op) + 1.0),),
    OpType.SQRT: lambda ctx, op: (ctx * 0.5 / op,),
    OpType.RSQRT: lambda ctx, op: (ctx * -0.5 * op * op * op,),
    OpType.SQUARE: lambda ctx, op: (ctx * 2.0 * _x(op),),
    OpType.RECIPROCAL: lambda ctx, op: (-ctx * op * op,),
    OpType.TANH: lambda ctx, op: (ctx * (1.0 - op * op),),
    OpType.SIGMOID: lambda ctx, op: (ctx * op * (1.0 - op),),
    # relu(x) > 0 exactly where x > 0: testing the output lets x die early (and fuse)
    OpType.RELU: lambda ctx, op: (ctx * api.greater(op, 0.0),),
    OpType.SIN: lambda ctx, op: (ctx * api.cos(_x(op)),),
    OpType.COS: lambda ctx, op: (-ctx * api.sin(_x(op)),),
    OpType.CAST: lambda ctx, op: (api.cast(ctx, _x(op).dtype),),
    OpType.ERF: lambda ctx, op: (ctx * (2.0 / math.sqrt(math.pi)) * api.exp(-api.square(_x(op))),),
    OpType.TAN: lambda ctx, op: (ctx * (1.0 + op * op),),
    OpType.ASIN: lambda ctx, op: (ctx * api.rsqrt(1.0 - api.square(_x(op))),),
    OpType.ACOS: lambda ctx, op: (-ctx * api.rsqrt(1.0 - api.square(_x(op))),),
    OpType.ATAN: lambda ctx, op: (ctx / (1.0 + api.square(_x(op))),),
    OpType.SINH: lambda ctx, op: (ctx * api.cosh(_x(op)),),
    OpType.COSH: lambda ctx, op: (ctx * api.sinh(_x(op)),),
    OpType.ASINH: lambda ctx, op: (ctx * api.rsqrt(api.square(_x(op)) + 1.0),),
    OpType.ACOSH: lambda ctx, op: (ctx * api.rsqrt(api.square(_x(op)) - 1.0),),
    OpType.ATANH: lambda ctx, op: (ctx / (1.0 - api.square(_x(op))),),
    # element-wise binary
    OpType.ADD: lambda ctx, op: (ctx, ctx),
    OpType.SUB: lambda ctx, op: (ctx, -ctx),
    OpType.MUL: lambda ctx, op: (ctx * op.src[1], ctx * op.src[0]),
    OpType.DIV: lambda ctx, op: (ctx / op.src[1], -ctx * op / op.src[1]),
    OpType.POW: lambda ctx, op: (
        ctx * op.src[1] * api.power(op.src[0], op.src[1] - 1.0),
        ctx * op * api.log(op.src[0]),
    ),
    OpType.MAXIMUM: lambda ctx, op: (ctx * api.greater_equal(*op.src), ctx * api.less(*op.src)),
    OpType.MINIMUM: lambda ctx, op: (ctx * api.less_equal(*op.src), ctx * api.greater(*op.src)),
    # a = q b + mod(a, b) with q = floor(a/b) (mod) or trunc(a/b) (fmod), piecewise constant: d/db = -q,
    # and q = (a - mod(a, b)) / b reads the op's own value instead of rounding a/b again
    OpType.MOD: lambda ctx, op: (ctx, -ctx * (op.src[0] - op) / op.src[1]),
    OpType.FMOD: lambda ctx, op: (ctx, -ctx * (op.src[0] - op) / op.src[1]),
    OpType.WHERE: lambda ctx, op: (
        None,
        api.where(op.src[0], ctx, 0.0),
        api.where(op.src[0], 0.0, ctx),
    ),
    # reductions
    OpType.SUM: lambda ctx, op: (api.broadcast(ctx, _x(op).axes),),
    OpType.MAX: _maxmin_grad,
    OpType.MIN: _maxmin_grad,
    OpType.PROD: lambda ctx, op: (api.broadcast(ctx * op, _x(op).axes) / _x(op),),
    # movement
    OpType.BROADCAST: lambda ctx, op: (_reduce_to(ctx, _x(op)),),
    OpType.CAST_AXES: lambda ctx, op: (api.cast_axes(ctx, _x(op).axes),),
    OpType.RESHAPE: lambda ctx, op: (make(OpType.RESHAPE, [ctx], axes=_x(op).axes),),
    OpType.SLICE: _slice_grad,
    OpType.PAD: _pad_grad,
    OpType.CONCAT: _concat_grad,
    # gather and scatter_add are each other's adjoints (linear in the table/updates); ids get none
    OpType.GATHER: lambda ctx, op: (_gather_grad(ctx, op), None),
    OpType.SCATTER_ADD: lambda ctx, op: (api.gather(ctx, op.src[1], op.arg), None),
    # positional indexing: a cumsum's adjoint runs the other way; a gather's is a scatter-add into zeros
    OpType.CUMSUM: lambda ctx, op: (make(OpType.CUMSUM, [ctx], arg=replace(op.arg, reverse=not op.arg.reverse)),),
    OpType.CUMPROD: lambda ctx, op: (  # d y_i / d x_j = y_i / x_j for i after j: needs nonzero x
        make(OpType.CUMSUM, [ctx * op], arg=replace(op.arg, reverse=not op.arg.reverse)) / _x(op),),
    OpType.GATHER_ELEMENTS: lambda ctx, op: (make(OpType.SCATTER_ELEMENTS, [api.fill_like(_x(op), 0.0), op.src[1], ctx],
                                                  arg=replace(op.arg, reduction="add")), None),
    OpType.GATHER_ND: lambda ctx, op: (make(OpType.SCATTER_ND, [api.fill_like(_x(op), 0.0), op.src[1], ctx],
                                            arg=replace(op.arg, reduction="add")), None),
    OpType.SCATTER_ELEMENTS: _scatter_grad,
    OpType.SCATTER_ND: _scatter_grad,
    # contraction
    OpType.DOT: _dot_grad,
    OpType.BATCH_DOT: _batch_dot_grad,
    # neural network
    OpType.CONV: _conv_grad,
    OpType.CONV_BPROP_DATA: _conv_bprop_data_grad,
    OpType.CONV_BPROP_FILTER: _conv_bprop_filter_grad,
    OpType.POOL: _pool_grad,
    OpType.POOL_BPROP: _pool_bprop_grad,
    OpType.MOMENTS: _moments_grad,
    OpType.CENTERED_SUMS: _centered_sums_grad,
    OpType.CTC: _ctc_grad,  # no gradient to the labels and lengths (ints)
    OpType.CTC_GRAD: _ctc_grad_grad,  # raises: no second derivative
    # control
    OpType.SEQUENTIAL: lambda ctx, op: (None,) * (len(op.src) - 1) + (ctx,),
    OpType.CUSTOM_GRADIENT: _custom_grad,
    OpType.CALL: _call_grad,
    OpType.SCAN: lambda ctx, op: scan_grad(ctx, op, RULES),  # a reverse scan of the body's VJP (autodiff/scan.py)
    OpType.SCAN_RESULT: scan_result_grad,
    # collectives: an allreduce is linear, its adjoint the same allreduce of the upstream gradients
    OpType.ALLREDUCE: lambda ctx, op: (make(OpType.ALLREDUCE, [ctx], arg=op.arg),),
}

