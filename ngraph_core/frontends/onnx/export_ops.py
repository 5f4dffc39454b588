"""The ONNX exporter's op table: one converter per ``OpType`` an inference graph uses.

A converter ``fn(emitter, op)`` writes the nodes computing ``op`` from its sources' values
and returns a ``Value`` (a tensor that may be partial: length 1 where ``op`` broadcasts) or
the name of a full tensor. Named axes are positions here (``export_context`` says how):

* element-wise ops let ONNX broadcast positionally (their operands have ``op``'s axes in
  ``op``'s order; a ``broadcast`` source is a Transpose + Unsqueeze of length-1 dims);
  comparisons give ``bool`` in ONNX and 0/1 in our dtype, so a Cast follows;
* reductions, ``argmax``/``argmin``: the ONNX reduce over the dropped axes, then a
  Transpose into the kept axes' order;
* ``dot``: MatMul when each side has one axis besides the one contracted, else Einsum
  over one letter per axis;
* ``conv``/``pool``/``conv_bprop_data`` (deconvolution): Transpose ``[C, *spatial, N]``
  to NCHW, Conv / MaxPool / AveragePool / ConvTranspose, Transpose back;
* ``moments``: ReduceMean of x and of its squared deviations, stacked.

Movement ops live in ``export_movement.py``, control flow (scan, call) in ``export_control.py``.
"""

from __future__ import annotations

import string

import numpy as np

from ...ir import Axes, Op, OpType, is_float
from ...ir.conv import activation_roles
from ...ir.ops import OP_BY_NAME
from ...ir.values import ArrayValue
from .export_context import Converter, Emitter, Value, unsupported
from .export_control import CONTROL_CONVERTERS
from .export_movement import MOVEMENT_CONVERTERS

T = OpType

_UNARY = {T.NEG: "Neg", T.ABS: "Abs", T.EXP: "Exp", T.LOG: "Log", T.SQRT: "Sqrt", T.RECIPROCAL: "Reciprocal",
          T.TANH: "Tanh", T.SIGMOID: "Sigmoid", T.RELU: "Relu", T.SIGN: "Sign", T.SIN: "Sin", T.COS: "Cos",
          T.STOP_GRADIENT: "Identity"}
_BINARY = {T.ADD: "Add", T.SUB: "Sub", T.MUL: "Mul", T.DIV: "Div", T.POW: "Pow", T.MAXIMUM: "Max",
           T.MINIMUM: "Min"}
_COMPARE = {T.EQUAL: "Equal", T.NOT_EQUAL: "Equal", T.LESS: "Less", T.LESS_EQUAL: "LessOrEqual",
            T.GREATER: "Greater", T.GREATER_EQUAL: "GreaterOrEqual"}
_REDUCE = {T.SUM: "ReduceSum", T.MAX: "ReduceMax", T.MIN: "ReduceMin", T.PROD: "ReduceProd"}
# the ONNX operator set's other element-wise ops (ir/ops.py), by name: one ONNX op each
_UNARY.update({OP_BY_NAME[k]: v for k, v in {
    "floor": "Floor", "ceil": "Ceil", "round": "Round", "erf": "Erf", "tan": "Tan", "asin": "Asin", "acos": "Acos",
    "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
    "isnan": "IsNaN", "logical_not": "Not", "bitwise_not": "BitwiseNot"}.items() if k in OP_BY_NAME})
_BINARY.update({OP_BY_NAME[k]: v for k, v in {
    "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor", "bitwise_and": "BitwiseAnd",
    "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor"}.items() if k in OP_BY_NAME})
_MOD = {OP_BY_NAME[k] for k in ("mod", "fmod") if k in OP_BY_NAME}
_ISINF = {OP_BY_NAME[k] for k in ("isinf",) if k in OP_BY_NAME}


def reduce_node(em: Emitter, kind: str, name: str, axes: list[int], keepdims: int) -> str:
    """``kind`` (ReduceSum, ReduceMean...) over ``axes``: axes an input from opset 13 (ReduceSum) or 18 (others)."""
    if em.opset >= (13 if kind == "ReduceSum" else 18):
        return em.node(kind, [name, em.ints(axes)], keepdims=keepdims)
    return em.node(kind, [name], axes=axes, keepdims=keepdims)


# -- leaves ------------------------------------------------------------------------------------------


def _constant(em: Emitter, op: Op) -> str:
    em.bake(op, op.axes.batch_axis is not None, "a constant array holds the batch axis")
    value = op.arg.array if isinstance(op.arg, ArrayValue) else np.full(op.axes.lengths, op.arg)
    return em.const(np.asarray(value, dtype=op.dtype), f"{em.scope_name()}/value")


def _variable(em: Emitter, op: Op) -> str:
    em.bake(op, op.axes.batch_axis is not None, "a variable holds the batch axis")
    array = np.asarray(em.values[op], dtype=op.dtype)
    if array.shape != op.axes.lengths:
        array = np.broadcast_to(array, op.axes.lengths)
    path = "/".join(str(s) for s in op.meta.scope)
    return em.const(array, f"{path}/{op.name}" if path else op.name, shared=False)


def _placeholder(em: Emitter, op: Op) -> Value:
    return em.lookup(op)  # raises: the inputs and loop parameters are bound before conversion


# -- element-wise ------------------------------------------------------------------------------------


def _joined(em: Emitter, src: tuple[Op, ...]) -> tuple[bool, ...]:
    return tuple(any(flags) for flags in zip(*(em.lookup(s).full for s in src)))


def _unary(em: Emitter, op: Op) -> Value:
    (x,) = op.src
    value = em.lookup(x)
    name = em.partial(x, x.dtype if op.op in _ISINF or op.op.value == "isnan" else op.dtype)
    if op.op is T.LOG1P:
        out = em.node("Log", [em.node("Add", [name, em.scalar(1, op.dtype)])])
    elif op.op is T.RSQRT:
        out = em.node("Reciprocal", [em.node("Sqrt", [name])])
    elif op.op is T.SQUARE:
        out = em.node("Mul", [name, name])
    elif op.op is T.CAST:
        out = name if x.dtype != op.dtype else em.node("Identity", [name])
    elif op.op in _ISINF:
        out = em.node("IsInf", [em.lookup(x).name], detect_positive=int(op.arg.detect_positive),
                      detect_negative=int(op.arg.detect_negative))
    else:
        out = em.node(_UNARY[op.op], [name])
    return Value(out, value.full)


def _binary(em: Emitter, op: Op) -> Value:
    a, b = (em.partial(s, op.dtype) for s in op.src)
    if op.op is T.DIV and not is_float(op.dtype):  # integers floor-divide, as our kernel does
        wide = [em.cast(n, op.dtype, "float64") for n in (a, b)]
        out = em.cast(em.node("Floor", [em.node("Div", wide)]), "float64", op.dtype)
    elif op.op in _MOD and op.op.value == "mod" and is_float(op.dtype):  # Python's %: a - floor(a / b) * b
        out = em.node("Sub", [a, em.node("Mul", [em.node("Floor", [em.node("Div", [a, b])]), b])])
    elif op.op in _MOD:
        out = em.node("Mod", [a, b], fmod=int(op.op.value == "fmod" or is_float(op.dtype)))
    else:
        out = em.node(_BINARY[op.op], [a, b])
    return Value(out, _joined(em, op.src))


def _compare(em: Emitter, op: Op) -> Value:
    operands = [em.partial(s, op.dtype) for s in op.src]
    out = em.node(_COMPARE[op.op], operands)
    if op.op is T.NOT_EQUAL:
        out = em.node("Not", [out])
    return Value(em.cast(out, "bool", op.dtype), _joined(em, op.src))


def _where(em: Emitter, op: Op) -> Value:
    cond, a, b = op.src
    c = em.cast(em.partial(cond, cond.dtype), cond.dtype, "bool")
    out = em.node("Where", [c, em.partial(a, op.dtype), em.partial(b, op.dtype)])
    return Value(out, _joined(em, op.src))


# -- reductions ----------------------------------------------------------------------------------------


def _kept_perm(x: Op, kept: Axes) -> list[int]:
    """The perm taking ``x``'s axes that are in ``kept`` (in ``x``'s order) into ``kept``'s order."""
    kept_in_input_order = [a for a in x.axes if a in kept]
    return [kept_in_input_order.index(a) for a in kept]


def _reduce(em: Emitter, op: Op) -> Value | str:
    (x,) = op.src
    value, perm = em.lookup(x), _kept_perm(x, op.axes)
    reduced = [i for i, a in enumerate(x.axes) if a not in op.axes]
    kept_full = [f for a, f in zip(x.axes, value.full) if a in op.axes]
    if not reduced:  # a reduction over nothing reorders
        return Value(em.transpose(value.name, perm), tuple(kept_full[p] for p in perm))
    if op.op in (T.ARGMAX, T.ARGMIN):
        kind = "ArgMax" if op.op is T.ARGMAX else "ArgMin"
        out = em.node(kind, [em.full(x)], axis=reduced[0], keepdims=0)
    else:
        out = reduce_node(em, _REDUCE[op.op], em.full(x), reduced, 0)
    return em.transpose(out, perm)


# -- contraction and neural-network ops -------------------------------------------------------------------


def _dot(em: Emitter, op: Op) -> str:
    a, b = op.src
    shared = a.axes & b.axes
    a_rest, b_rest = a.axes - shared, b.axes - shared
    an, bn = em.full(a, op.dtype), em.full(b, op.dtype)
    if len(shared) == 1 and len(a_rest) <= 1 and len(b_rest) <= 1 and op.axes == a_rest + b_rest:
        left = em.transpose(an, [a.axes.index(x) for x in a_rest + shared])
        right = em.transpose(bn, [b.axes.index(x) for x in shared + b_rest])
        return em.node("MatMul", [left, right])
    letters = {name: string.ascii_letters[i] for i, name in enumerate(dict.fromkeys(a.axes.names + b.axes.names))}
    spell = lambda axes: "".join(letters[n] for n in axes.names)  # noqa: E731 - a one-line helper
    return em.node("Einsum", [an, bn], equation=f"{spell(a.axes)},{spell(b.axes)}->{spell(op.axes)}")


def _nchw(x: Op) -> list[int]:
    """The perm taking an activation ``[C, *spatial, N]`` (any order) to ONNX's ``[N, C, *spatial]``."""
    perm = activation_roles(x.axes, "onnx export").perm
    return [perm[-1], perm[0], *perm[1:-1]]


def _filter_oi(w: Op) -> list[int]:
    """The perm taking a filter ``[Ci, *spatial, K]`` to ONNX's ``[K, Ci, *spatial]``."""
    return [len(w.axes) - 1, 0, *range(1, len(w.axes) - 1)]


def _back(em: Emitter, name: str, onnx_order: list[int], out: Axes, like: Axes) -> str:
    """Transpose an NCHW result (axes of ``like`` in ``onnx_order``) into ``out``'s order (``like``'s names)."""
    names = [like[i].name for i in onnx_order]
    return em.transpose(name, [names.index(a.name) for a in out])


def _conv(em: Emitter, op: Op) -> str:
    x, w = op.src
    arg, order = op.arg, _nchw(x)
    xn = em.transpose(em.full(x, op.dtype), order)
    wn = em.transpose(em.full(w, op.dtype), _filter_oi(w))
    y = em.node("Conv", [xn, wn], kernel_shape=list(w.axes.lengths[1:-1]), strides=list(arg.strides),
                pads=[p[0] for p in arg.padding] + [p[1] for p in arg.padding], dilations=list(arg.dilation),
                group=arg.groups)
    return em.transpose(y, [1, *range(2, len(op.axes)), 0])  # [N, K, *spatial] -> [K, *spatial, N]


def _conv_bprop_data(em: Emitter, op: Op) -> str:
    """The data gradient of a convolution, which is the deconvolution's forward op: ConvTranspose."""
    dy, w = op.src
    arg, roles = op.arg, activation_roles(op.axes, "onnx export")
    kernel = w.axes.lengths[1:-1]
    output_padding = []
    for out_axis, in_axis, k, s, p, d in zip(roles.spatial, activation_roles(dy.axes, "onnx export").spatial,
                                            kernel, arg.strides, arg.padding, arg.dilation):
        natural = (in_axis.length - 1) * s - p[0] - p[1] + d * (k - 1) + 1
        output_padding.append(out_axis.length - natural)
    y = em.node("ConvTranspose", [em.transpose(em.full(dy, op.dtype), _nchw(dy)),
                                  em.transpose(em.full(w, op.dtype), _filter_oi(w))],
                kernel_shape=list(kernel), strides=list(arg.strides), dilations=list(arg.dilation),
                pads=[p[0] for p in arg.padding] + [p[1] for p in arg.padding], output_padding=output_padding,
                group=arg.groups)
    canonical = roles.canonical
    return _back(em, y, [len(canonical) - 1, *range(len(canonical) - 1)], op.axes, canonical)


def _pool(em: Emitter, op: Op) -> str:
    """MaxPool / AveragePool in floor mode: ceil mode is extra right padding that no average counts.

    Our ceil mode drops a window that would start in the right padding and never counts what it
    adds beyond the padding (PyTorch's rule), which ONNX's ``ceil_mode`` does not promise; so the
    windows are written out. An average that counts its padding, with such extra, pads real zeros
    first and then counts only what it covers.
    """
    (x,) = op.src
    arg, order = op.arg, _nchw(x)
    xr, yr = activation_roles(x.axes, "onnx export"), activation_roles(op.axes, "onnx export")
    extra = [max(0, (out.length - 1) * s + k - (inp.length + 2 * p)) for inp, out, k, s, p in
             zip(xr.spatial, yr.spatial, arg.fshape, arg.strides, arg.padding)]
    name, pads = em.transpose(em.full(x), order), list(arg.padding)
    counted = arg.op == "avg" and arg.count_include_pad
    if counted and any(extra):
        if any(pads):
            name = em.node("Pad", [name, em.ints([0, 0, *pads, 0, 0, *pads])])
            pads = [0] * len(pads)
        counted = False
    attrs = dict(kernel_shape=list(arg.fshape), strides=list(arg.strides),
                 pads=pads + [p + e for p, e in zip(pads, extra)])
    if arg.op == "max":
        y = em.node("MaxPool", [name], **attrs)
    else:
        y = em.node("AveragePool", [name], count_include_pad=int(counted), **attrs)
    return _back(em, y, order, op.axes, x.axes)


def _moments(em: Emitter, op: Op) -> str:
    """``[moments:2, *kept]``: the mean and the biased variance over the other axes."""
    (x,) = op.src
    kept = op.axes[1:]
    xn = em.full(x, op.dtype)
    reduced = [i for i, a in enumerate(x.axes) if a not in kept]
    mean = reduce_node(em, "ReduceMean", xn, reduced, 1)
    centered = em.node("Sub", [xn, mean])
    var = reduce_node(em, "ReduceMean", em.node("Mul", [centered, centered]), reduced, 1)
    perm = _kept_perm(x, kept)
    stats = [em.unsqueeze(em.transpose(em.squeeze(s, reduced), perm), [0]) for s in (mean, var)]
    return em.node("Concat", stats, axis=0)


CONVERTERS: dict[OpType, Converter] = {
    T.CONSTANT: _constant,
    T.VARIABLE: _variable,
    T.PLACEHOLDER: _placeholder,
    **{t: _unary for t in (*_UNARY, *_ISINF, T.LOG1P, T.RSQRT, T.SQUARE, T.CAST)},
    **{t: _binary for t in (*_BINARY, *_MOD)},
    **{t: _compare for t in _COMPARE},
    T.WHERE: _where,
    **{t: _reduce for t in (*_REDUCE, T.ARGMAX, T.ARGMIN)},
    T.DOT: _dot,
    T.BATCH_DOT: _dot,  # the same Einsum: batch axes are in both operands and the result, so they are kept
    T.CONV: _conv,
    T.CONV_BPROP_DATA: _conv_bprop_data,
    T.POOL: _pool,
    T.MOMENTS: _moments,
    **MOVEMENT_CONVERTERS,
    **CONTROL_CONVERTERS,
}
"""``OpType -> converter``; an op missing here raises ``ExportError`` naming it (``unsupported``)."""

__all__ = ["CONVERTERS", "reduce_node", "unsupported"]
