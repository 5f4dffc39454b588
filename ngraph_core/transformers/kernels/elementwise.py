"""Element-wise kernels (unary, binary, comparisons, where), written once against ``xp``.

Operands always have identical axes (the API inserted explicit broadcasts), so a
kernel is the array library's ufunc with the result kept in the op's dtype.
"""

from __future__ import annotations

from ...ir import Op, OpType, is_float
from .context import Kernel, KernelContext


def _sigmoid(xp):
    def sigmoid(x):
        # 0.5 * (1 + tanh(x / 2)) never overflows, unlike 1 / (1 + exp(-x))
        out = xp.tanh(x * 0.5)
        out += 1.0
        out *= 0.5
        return out

    return sigmoid


def _rsqrt(xp):
    def rsqrt(x):
        out = xp.sqrt(x)
        return xp.reciprocal(out, out=out)

    return rsqrt


_UNARY = {
    OpType.NEG: lambda xp: xp.negative,
    OpType.ABS: lambda xp: xp.abs,
    OpType.EXP: lambda xp: xp.exp,
    OpType.LOG: lambda xp: xp.log,
    OpType.LOG1P: lambda xp: xp.log1p,
    OpType.SQRT: lambda xp: xp.sqrt,
    OpType.RSQRT: _rsqrt,
    OpType.SQUARE: lambda xp: xp.square,
    OpType.RECIPROCAL: lambda xp: xp.reciprocal,
    OpType.TANH: lambda xp: xp.tanh,
    OpType.SIGMOID: _sigmoid,
    OpType.RELU: lambda xp: (lambda x: xp.maximum(x, 0)),
    OpType.SIGN: lambda xp: xp.sign,
    OpType.SIN: lambda xp: xp.sin,
    OpType.COS: lambda xp: xp.cos,
    OpType.STOP_GRADIENT: lambda xp: (lambda x: x),
}

_BINARY = {
    OpType.ADD: "add", OpType.SUB: "subtract", OpType.MUL: "multiply", OpType.DIV: "divide",
    OpType.POW: "power", OpType.MAXIMUM: "maximum", OpType.MINIMUM: "minimum",
    OpType.EQUAL: "equal", OpType.NOT_EQUAL: "not_equal", OpType.LESS: "less",
    OpType.LESS_EQUAL: "less_equal", OpType.GREATER: "greater", OpType.GREATER_EQUAL: "greater_equal",
}


def unary(op: Op, kc: KernelContext) -> Kernel:
    return _UNARY[op.op](kc.xp)


def cast(op: Op, kc: KernelContext) -> Kernel:
    dtype = kc.dtype_of(op)
    return lambda x: x.astype(dtype)


def binary(op: Op, kc: KernelContext) -> Kernel:
    fn = getattr(kc.xp, _BINARY[op.op])
    dtype = kc.dtype_of(op)
    keeps_dtype = op.op not in (OpType.EQUAL, OpType.NOT_EQUAL, OpType.LESS, OpType.LESS_EQUAL,
                                OpType.GREATER, OpType.GREATER_EQUAL) and (is_float(dtype) or op.op is not OpType.DIV)
    if keeps_dtype and all(kc.dtype_of(s) == dtype for s in op.src):
        return fn
    # comparisons give bool and int division gives float: bring the result to the op's dtype
    return lambda a, b: fn(a, b).astype(dtype, copy=False)


def where(op: Op, kc: KernelContext) -> Kernel:
    xp, dtype = kc.xp, kc.dtype_of(op)
    return lambda c, a, b: xp.where(c, a, b).astype(dtype, copy=False)


KERNELS = {
    **{t: unary for t in _UNARY},
    OpType.CAST: cast,
    **{t: binary for t in _BINARY},
    OpType.WHERE: where,
}
