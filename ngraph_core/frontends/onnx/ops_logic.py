"""Converters: comparisons, logic, bit ops, ``Where`` and the casts (``Cast``, ``CastLike``).

ONNX comparisons return bool; ngraph's comparison ops return 0/1 in the operands' dtype
(so they compose with arithmetic), hence each comparison is followed by a cast to bool.
The logical ops (``And``/``Or``/``Xor``/``Not``) take and give bool; the bit ops take
integers. Every binary op broadcasts NumPy-style through ``ctx.broadcast``.

Casts go to the dtypes ngraph computes in (``ONNX_DTYPES``); strings, bfloat16 and the
float8/int4 types raise ``UnsupportedOnnxOpError`` naming the node. ``saturate`` only
concerns float8 targets, so it is ignored.

Example:
    >>> # Less(float32 [1, 5], float32 [3, 3]) -> bool [True, False]
"""

from __future__ import annotations

from ... import api
from .context import ONNX_DTYPES, ONNX_TYPE_NAMES
from .errors import OnnxError
from .registry import converter
from .tensor import dtype_of

_COMPARISONS = {"Equal": api.equal, "Less": api.less, "Greater": api.greater, "LessOrEqual": api.less_equal,
                "GreaterOrEqual": api.greater_equal}
_LOGICAL = {"And": api.logical_and, "Or": api.logical_or, "Xor": api.logical_xor}
_BITWISE = {"BitwiseAnd": api.bitwise_and, "BitwiseOr": api.bitwise_or, "BitwiseXor": api.bitwise_xor}


@converter("Equal", "Less", "Greater", since=7)
@converter("LessOrEqual", "GreaterOrEqual", since=12)
def compare(ctx, node, inputs):
    """``a (==|<|>|<=|>=) b`` as bool, with NumPy broadcasting."""
    a, b = ctx.broadcast(*inputs)
    out = _COMPARISONS[node.op_type](a, b)
    return out if out.dtype == "bool" else api.cast(out, "bool")


@converter("And", "Or", "Xor", since=7)
def logical(ctx, node, inputs):
    """``a (and|or|xor) b`` on bool tensors, with NumPy broadcasting."""
    a, b = ctx.broadcast(*inputs)
    return _LOGICAL[node.op_type](a, b)


@converter("Not", since=1)
def logical_not(ctx, node, inputs):
    """``not x`` on a bool tensor."""
    return api.logical_not(ctx.as_op(inputs[0]))


@converter("BitwiseAnd", "BitwiseOr", "BitwiseXor", since=18)
def bitwise(ctx, node, inputs):
    """``a (&||^) b`` on integer tensors, with NumPy broadcasting."""
    a, b = ctx.broadcast(*inputs)
    return _BITWISE[node.op_type](a, b)


@converter("BitwiseNot", since=18)
def bitwise_not(ctx, node, inputs):
    """``~x`` on an integer tensor."""
    return api.bitwise_not(ctx.as_op(inputs[0]))


@converter("BitShift", since=11)
def bit_shift(ctx, node, inputs):
    """``x << y`` or ``x >> y`` (attribute ``direction``: ``"LEFT"`` or ``"RIGHT"``) on unsigned integers.

    Raises:
        OnnxError: a ``direction`` other than LEFT / RIGHT.
    """
    direction = str(node.attr("direction")).lower()
    if direction not in ("left", "right"):
        raise OnnxError(f"BitShift node {node.name!r}: expected direction 'LEFT' or 'RIGHT', received "
                        f"{node.attr('direction')!r}; hint: fix the model's attribute")
    x, y = ctx.broadcast(*inputs)
    return api.bit_shift(x, api.cast(y, x.dtype), direction=direction)


@converter("Where", since=9)
def where(ctx, node, inputs):
    """``x`` where ``condition`` is true, else ``y``; all three broadcast together."""
    condition, x, y = ctx.broadcast(*inputs)
    return api.where(condition, x, y)


def _target_dtype(node, onnx_type: int) -> str:
    if onnx_type not in ONNX_DTYPES:
        name = ONNX_TYPE_NAMES.get(onnx_type, onnx_type)
        raise node.unsupported(f"casting to {name} (ngraph computes in "
                               f"{', '.join(sorted(set(ONNX_DTYPES.values())))})")
    return ONNX_DTYPES[onnx_type]


def _cast(ctx, node, value, dtype: str):
    if dtype_of(value) not in ONNX_DTYPES.values():
        raise node.unsupported(f"casting from {dtype_of(value)}")
    if not hasattr(value, "axes"):  # a static array stays static (folded shape arithmetic)
        return value.astype(dtype)
    return api.cast(value, dtype)


@converter("Cast", since=6)
def cast(ctx, node, inputs):
    """The input converted to the element type ``to`` (floats to ints truncate; nonzero to bool is True)."""
    return _cast(ctx, node, inputs[0], _target_dtype(node, int(node.attr("to"))))


@converter("CastLike", since=15)
def cast_like(ctx, node, inputs):
    """The first input converted to the second input's element type."""
    return _cast(ctx, node, inputs[0], dtype_of(inputs[1]))
