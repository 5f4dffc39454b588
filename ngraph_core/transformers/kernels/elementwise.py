"""Element-wise kernels (unary, binary, comparisons, where), written once against ``xp``.

Operands always have identical axes (the API inserted explicit broadcasts), so a
kernel is the array library's ufunc with the result kept in the op's dtype.
"""

from __future__ import annotations

from ...ir import Op, OpType, is_float
from .context import Kernel, KernelContext


def _sigmoid(xp, out):
    def sigmoid(x):
        # 0.5 * (1 + tanh(x / 2)) never overflows, unlike 1 / (1 + exp(-x))
        xp.multiply(x, 0.5, out=out)
        xp.tanh(out, out=out)
        xp.add(out, 1.0, out=out)
        return xp.multiply(out, 0.5, out=out)

    return sigmoid


def _rsqrt(xp, out):
    def rsqrt(x):
        xp.sqrt(x, out=out)
        return xp.reciprocal(out, out=out)

    return rsqrt


def _ufunc(name: str):
    def make(xp, out):
        fn = getattr(xp, name)
        return lambda x: fn(x, out=out)

    return make


_UNARY = {
    OpType.NEG: _ufunc("negative"),
    OpType.ABS: _ufunc("abs"),
    OpType.EXP: _ufunc("exp"),
    OpType.LOG: _ufunc("log"),
    OpType.LOG1P: _ufunc("log1p"),
    OpType.SQRT: _ufunc("sqrt"),
    OpType.RSQRT: _rsqrt,
    OpType.SQUARE: _ufunc("square"),
    OpType.RECIPROCAL: _ufunc("reciprocal"),
    OpType.TANH: _ufunc("tanh"),
    OpType.SIGMOID: _sigmoid,
    OpType.RELU: lambda xp, out: (lambda x: xp.maximum(x, 0, out=out)),
    OpType.SIGN: _ufunc("sign"),
    OpType.SIN: _ufunc("sin"),
    OpType.COS: _ufunc("cos"),
}

_BINARY = {
    OpType.ADD: "add", OpType.SUB: "subtract", OpType.MUL: "multiply", OpType.DIV: "divide",
    OpType.POW: "power", OpType.MAXIMUM: "maximum", OpType.MINIMUM: "minimum",
    OpType.EQUAL: "equal", OpType.NOT_EQUAL: "not_equal", OpType.LESS: "less",
    OpType.LESS_EQUAL: "less_equal", OpType.GREATER: "greater", OpType.GREATER_EQUAL: "greater_equal",
}


def unary(op: Op, kc: KernelContext) -> Kernel:
    return _UNARY[op.op](kc.xp, kc.out(op))


def stop_gradient(op: Op, kc: KernelContext) -> Kernel:
    return lambda x: x


def cast(op: Op, kc: KernelContext) -> Kernel:
    xp, out = kc.xp, kc.out(op)

    def cast_kernel(x):
        xp.copyto(out, x, casting="unsafe")
        return out

    return cast_kernel


def binary(op: Op, kc: KernelContext) -> Kernel:
    fn, out = getattr(kc.xp, _BINARY[op.op]), kc.out(op)
    if op.op is OpType.DIV and not is_float(kc.dtype_of(op)):
        # true division of integers gives floats: bring the result back to the op's integer dtype
        xp = kc.xp
        return lambda a, b: xp.floor_divide(a, b, out=out)
    # comparisons write their bools as 0/1 into the float (or int) buffer
    return lambda a, b: fn(a, b, out=out, casting="unsafe")


def where(op: Op, kc: KernelContext) -> Kernel:
    xp, out = kc.xp, kc.out(op)

    def where_kernel(c, a, b):
        xp.copyto(out, xp.where(c, a, b), casting="unsafe")
        return out

    return where_kernel


KERNELS = {
    **{t: unary for t in _UNARY},
    OpType.STOP_GRADIENT: stop_gradient,
    OpType.CAST: cast,
    **{t: binary for t in _BINARY},
    OpType.WHERE: where,
}
