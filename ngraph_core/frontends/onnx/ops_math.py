"""Converters: element-wise arithmetic and math (Add ... Pow, Mod, the unary functions, variadic Max/Min/Sum/Mean).

Every binary and variadic converter goes through ``ctx.broadcast`` (NumPy-style
broadcasting over generated axis names), so operands of any rank combine as ONNX says.
The semantics that differ from ngraph's defaults:

* integer ``Div`` truncates toward zero (ONNX and onnxruntime: ``-7 / 2 = -3``), while
  ngraph's integer ``divide`` floors; it is rebuilt as ``(a - fmod(a, b)) / b``, an exact
  division;
* ``Pow`` returns the base's dtype whatever the exponent's (an integer base with a float
  exponent is computed in float64, then cast back, truncating as ONNX's reference does);
* ``Mod`` follows its ``fmod`` attribute (0: the divisor's sign, Python ``%``; 1: C ``fmod``).

Example:
    >>> # Div(int32 [-7, 7], int32 [2, -2]) -> [-3, -3]
"""

from __future__ import annotations

import functools

from ... import api
from ...ir import is_float
from .registry import converter

_BINARY = {"Add": api.add, "Sub": api.subtract, "Mul": api.multiply}

_UNARY = {
    "Neg": api.negative, "Abs": api.absolute, "Reciprocal": api.reciprocal, "Sqrt": api.sqrt, "Exp": api.exp,
    "Log": api.log, "Floor": api.floor, "Ceil": api.ceil, "Sigmoid": api.sigmoid, "Tanh": api.tanh,
}
_UNARY_SINCE_7 = {"Sin": api.sin, "Cos": api.cos, "Tan": api.tan, "Asin": api.asin, "Acos": api.acos, "Atan": api.atan}
_UNARY_SINCE_9 = {"Sign": api.sign, "Erf": api.erf, "Sinh": api.sinh, "Cosh": api.cosh, "Asinh": api.asinh,
                  "Acosh": api.acosh, "Atanh": api.atanh}
_UNARY_ALL = {**_UNARY, **_UNARY_SINCE_7, **_UNARY_SINCE_9, "Round": api.round}

_VARIADIC = {"Max": api.maximum, "Min": api.minimum, "Sum": api.add, "Mean": api.add}


@converter("Add", "Sub", "Mul", since=7)
def arithmetic(ctx, node, inputs):
    """``a (+|-|*) b`` with NumPy broadcasting."""
    a, b = ctx.broadcast(*inputs)
    return _BINARY[node.op_type](a, b)


@converter("Div", since=7)
def div(ctx, node, inputs):
    """``a / b``; integers truncate toward zero (``-7 / 2 = -3``) as ONNX specifies."""
    a, b = ctx.broadcast(*inputs)
    if is_float(a.dtype) or a.dtype.startswith("uint") or a.dtype == "bool":
        return api.divide(a, b)  # unsigned: flooring is truncating
    # ngraph's integer divide floors; a - fmod(a, b) is an exact multiple of b, so it divides exactly
    return api.divide(a - api.mod(a, b, fmod=True), b)


@converter("Pow", since=7)
def power(ctx, node, inputs):
    """``x ** y`` in the base's dtype (ONNX allows the exponent a different numeric type)."""
    x, y = ctx.broadcast(*inputs)
    if is_float(x.dtype) or not is_float(y.dtype):
        return api.power(x, api.cast(y, x.dtype))
    # an integer base with a float exponent: compute in float64, truncate back to the base's type
    return api.cast(api.power(api.cast(x, "float64"), api.cast(y, "float64")), x.dtype)


@converter("Mod", since=10)
def mod(ctx, node, inputs):
    """The remainder of ``a / b``: ``fmod=0`` takes the divisor's sign, ``fmod=1`` the dividend's."""
    a, b = ctx.broadcast(*inputs)
    return api.mod(a, b, fmod=bool(node.attr("fmod", 0)))


@converter(*_UNARY, since=6)
@converter(*_UNARY_SINCE_7, since=7)
@converter(*_UNARY_SINCE_9, since=9)
@converter("Round", since=11)
def unary(ctx, node, inputs):
    """The one-input element-wise functions, one ngraph op each."""
    return _UNARY_ALL[node.op_type](ctx.as_op(inputs[0]))


@converter("IsNaN", since=9)
def isnan(ctx, node, inputs):
    """True where the input is NaN (bool)."""
    return api.isnan(ctx.as_op(inputs[0]))


@converter("IsInf", since=10)
def isinf(ctx, node, inputs):
    """True where the input is an infinity counted by ``detect_positive`` / ``detect_negative``."""
    return api.isinf(ctx.as_op(inputs[0]), detect_positive=bool(node.attr("detect_positive", 1)),
                    detect_negative=bool(node.attr("detect_negative", 1)))


@converter("Max", "Min", "Sum", "Mean", since=6)
def variadic(ctx, node, inputs):
    """The element-wise maximum / minimum / sum / mean of one or more inputs, broadcast together."""
    values = [v for v in inputs if v is not None]
    if not values:
        raise node.unsupported("no inputs (expected at least one)")
    ops = ctx.broadcast(*values)
    out = functools.reduce(_VARIADIC[node.op_type], ops)
    if node.op_type == "Mean" and len(ops) > 1:
        out = out / float(len(ops))  # ONNX Mean takes floats only
    return out

