"""Element-wise kernels (unary, binary, comparisons, where), written once against ``xp``.

Operands always have identical axes (the API inserted explicit broadcasts), so a
kernel is one array-library ufunc writing into the op's buffer ``out``.
Comparisons write their booleans as 0/1 in the op's dtype. ``step_function`` is
shared with the fused kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...ir import Op, OpType, is_float
from .context import Kernel, KernelContext

_UFUNCS = {
    OpType.NEG: "negative", OpType.ABS: "abs", OpType.EXP: "exp", OpType.LOG: "log", OpType.LOG1P: "log1p",
    OpType.SQRT: "sqrt", OpType.SQUARE: "square", OpType.RECIPROCAL: "reciprocal", OpType.TANH: "tanh",
    OpType.SIGN: "sign", OpType.SIN: "sin", OpType.COS: "cos", OpType.ADD: "add", OpType.SUB: "subtract",
    OpType.MUL: "multiply", OpType.DIV: "divide", OpType.POW: "power", OpType.MAXIMUM: "maximum",
    OpType.MINIMUM: "minimum", OpType.EQUAL: "equal", OpType.NOT_EQUAL: "not_equal", OpType.LESS: "less",
    OpType.LESS_EQUAL: "less_equal", OpType.GREATER: "greater", OpType.GREATER_EQUAL: "greater_equal",
}


def step_function(xp: Any, kind: OpType) -> Callable[..., Any]:
    """``fn(out, *args)``: the element-wise op ``kind`` writing into ``out``."""
    if kind is OpType.RELU:
        return lambda o, x: xp.maximum(x, 0, out=o)
    if kind is OpType.SIGMOID:
        limits: dict[Any, float] = {}  # dtype -> the largest t whose exp(t) is finite

        def sigmoid(o, x):
            # 1 / (1 + exp(-x)), with -x capped where exp stays finite (88 for float32): full
            # relative precision wherever the result is a normal number (x > -87 in float32),
            # below that the smallest normal-range value instead of a denormal; no overflow
            # warnings. Five SIMD passes, no temporaries (three times faster than an exp(-|x|)
            # form with a masked multiply). x is read by the first pass only: o may be x's buffer.
            limit = limits.get(o.dtype)
            if limit is None:
                limit = limits[o.dtype] = math.floor(math.log(float(xp.finfo(o.dtype).max)))
            xp.negative(x, out=o)
            xp.minimum(o, limit, out=o)
            xp.exp(o, out=o)
            xp.add(o, 1.0, out=o)
            xp.reciprocal(o, out=o)
            return o

        return sigmoid
    if kind is OpType.RSQRT:
        return lambda o, x: xp.reciprocal(xp.sqrt(x, out=o), out=o)
    if kind is OpType.WHERE:
        def where(o, c, a, b):
            xp.copyto(o, xp.where(c, a, b), casting="unsafe")
            return o

        return where
    if kind is OpType.CAST:
        def cast(o, x):
            xp.copyto(o, x, casting="unsafe")
            return o

        return cast
    ufunc = getattr(xp, _UFUNCS[kind])
    return lambda o, *args: ufunc(*args, out=o, casting="unsafe")


def elementwise(op: Op, kc: KernelContext) -> Kernel:
    if op.op is OpType.DIV and not is_float(kc.dtype_of(op)):
        # true division of integers gives floats: integer operands floor-divide instead
        xp = kc.xp
        return lambda o, a, b: xp.floor_divide(a, b, out=o)
    return step_function(kc.xp, op.op)


def stop_gradient(op: Op, kc: KernelContext) -> Kernel:
    return lambda x: x


KERNELS = {
    **{t: elementwise for t in _UFUNCS},
    OpType.RELU: elementwise,
    OpType.SIGMOID: elementwise,
    OpType.RSQRT: elementwise,
    OpType.WHERE: elementwise,
    OpType.CAST: elementwise,
    OpType.STOP_GRADIENT: stop_gradient,
}
