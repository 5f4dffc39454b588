"""Converters: activation functions and ``Clip``, composed from ngraph's element-wise ops.

ngraph has primitives for ``relu``, ``sigmoid``, ``tanh``, ``exp``, ``erf``; the other
ONNX activations are short compositions of those (so they differentiate and fuse like
any element-wise chain). Exponentials of the negative branch read ``min(x, 0)`` so a
large positive ``x`` never overflows in the branch ``where`` discards. Attribute
constants become scalars of the input's dtype (``x * alpha`` with float16 ``x`` stays float16).

Example:
    >>> # HardSigmoid(x, alpha=0.2, beta=0.5) -> min(max(0.2 * x + 0.5, 0), 1)
"""

from __future__ import annotations

import math

import numpy as np

from ... import api
from ...ir import is_float
from .errors import OnnxError
from .registry import converter


def _x(ctx, inputs):
    return ctx.as_op(inputs[0])


@converter("Relu", since=6)
def relu(ctx, node, inputs):
    """``max(x, 0)`` (integer inputs since opset 14)."""
    x = _x(ctx, inputs)
    return api.relu(x) if is_float(x.dtype) else api.maximum(x, 0)


@converter("LeakyRelu", since=6)
def leaky_relu(ctx, node, inputs):
    """``x`` where ``x >= 0``, else ``alpha * x`` (alpha 0.01)."""
    x = _x(ctx, inputs)
    return api.where(x >= 0, x, x * float(node.attr("alpha", 0.01)))


@converter("PRelu", since=7)
def prelu(ctx, node, inputs):
    """``x`` where ``x >= 0``, else ``slope * x``; ``slope`` broadcasts to ``x``."""
    x, slope = ctx.broadcast(*inputs)
    return api.where(x >= 0, x, slope * x)


@converter("Elu", since=6)
def elu(ctx, node, inputs):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (alpha 1)."""
    x = _x(ctx, inputs)
    alpha = float(node.attr("alpha", 1.0))
    return api.where(x > 0, x, (api.exp(api.minimum(x, 0.0)) - 1.0) * alpha)


@converter("Selu", since=6)
def selu(ctx, node, inputs):
    """``gamma * x`` where ``x > 0``, else ``gamma * alpha * (exp(x) - 1)`` (the self-normalizing constants)."""
    x = _x(ctx, inputs)
    alpha = float(node.attr("alpha", 1.67326319217681884765625))
    gamma = float(node.attr("gamma", 1.05070102214813232421875))
    return api.where(x > 0, x, (api.exp(api.minimum(x, 0.0)) - 1.0) * alpha) * gamma


@converter("Celu", since=12)
def celu(ctx, node, inputs):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (alpha 1).

    Raises:
        OnnxError: ``alpha`` is 0.
    """
    x = _x(ctx, inputs)
    alpha = float(node.attr("alpha", 1.0))
    if alpha == 0:
        raise OnnxError(f"Celu node {node.name!r}: alpha must be nonzero, received 0; hint: the default is 1.0")
    return api.relu(x) + api.minimum((api.exp(api.minimum(x, 0.0) / alpha) - 1.0) * alpha, 0.0)


@converter("ThresholdedRelu", since=10)
def thresholded_relu(ctx, node, inputs):
    """``x`` where ``x > alpha``, else 0 (alpha 1)."""
    x = _x(ctx, inputs)
    return api.where(x > float(node.attr("alpha", 1.0)), x, 0.0)


def _hard_sigmoid(x, alpha: float, beta: float):
    return api.minimum(api.maximum(x * alpha + beta, 0.0), 1.0)


@converter("HardSigmoid", since=6)
def hard_sigmoid(ctx, node, inputs):
    """``min(max(alpha * x + beta, 0), 1)`` (alpha 0.2, beta 0.5)."""
    return _hard_sigmoid(_x(ctx, inputs), float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5)))


@converter("HardSwish", since=14)
def hard_swish(ctx, node, inputs):
    """``x * HardSigmoid(x, alpha=1/6, beta=0.5)``."""
    x = _x(ctx, inputs)
    return x * _hard_sigmoid(x, 1.0 / 6.0, 0.5)


@converter("Softplus", since=1)
def softplus(ctx, node, inputs):
    """``log(exp(x) + 1)``, computed stably."""
    return api.softplus(_x(ctx, inputs))


@converter("Softsign", since=1)
def softsign(ctx, node, inputs):
    """``x / (1 + |x|)``."""
    x = _x(ctx, inputs)
    return x / (api.absolute(x) + 1.0)


@converter("Gelu", since=20)
def gelu(ctx, node, inputs):
    """``0.5 x (1 + erf(x / sqrt 2))``, or with ``approximate="tanh"`` its tanh approximation.

    Raises:
        OnnxError: ``approximate`` other than ``"none"`` / ``"tanh"``.
    """
    x = _x(ctx, inputs)
    approximate = node.attr("approximate", "none")
    if approximate == "none":
        return x * (api.erf(x * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * (api.tanh(inner) + 1.0) * 0.5
    raise OnnxError(f"Gelu node {node.name!r}: expected approximate 'none' or 'tanh', received {approximate!r}")


@converter("Mish", since=18)
def mish(ctx, node, inputs):
    """``x * tanh(softplus(x))``."""
    x = _x(ctx, inputs)
    return x * api.tanh(api.softplus(x))


@converter("Swish", since=24)
def swish(ctx, node, inputs):
    """``x * sigmoid(alpha * x)`` (alpha 1)."""
    x = _x(ctx, inputs)
    alpha = float(node.attr("alpha", 1.0))
    return x * api.sigmoid(x * alpha if alpha != 1.0 else x)


@converter("Shrink", since=9)
def shrink(ctx, node, inputs):
    """``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0 (bias 0, lambd 0.5)."""
    x = _x(ctx, inputs)
    bias, lambd = float(node.attr("bias", 0.0)), float(node.attr("lambd", 0.5))
    return api.where(x < -lambd, x + bias, api.where(x > lambd, x - bias, 0.0))


def _bound(ctx, x, value):
    """A Clip bound as a scalar op of x's dtype, or None where absent."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return api.constant(value.reshape(()).astype(x.dtype), (), dtype=x.dtype)
    return ctx.as_op(value, dtype=x.dtype)


def _clip(ctx, x, low, high):
    if low is not None:
        x = api.maximum(*ctx.broadcast(x, low))
    if high is not None:
        x = api.minimum(*ctx.broadcast(x, high))
    return x


@converter("Clip", since=6)
def clip_attributes(ctx, node, inputs):
    """``min(max(x, min), max)`` with the bounds as attributes (opsets 6-10; absent: unbounded)."""
    x = _x(ctx, inputs)
    low, high = node.attr("min", None), node.attr("max", None)
    return _clip(ctx, x, None if low is None else _bound(ctx, x, np.asarray(low)),
                 None if high is None else _bound(ctx, x, np.asarray(high)))


@converter("Clip", since=11)
def clip(ctx, node, inputs):
    """``min(max(x, min), max)`` with the bounds as optional scalar inputs (opset 11 on).

    When ``min > max`` every element becomes ``max``, as ONNX specifies.
    """
    x = _x(ctx, inputs)
    low = inputs[1] if len(inputs) > 1 else None
    high = inputs[2] if len(inputs) > 2 else None
    return _clip(ctx, x, _bound(ctx, x, low), _bound(ctx, x, high))
