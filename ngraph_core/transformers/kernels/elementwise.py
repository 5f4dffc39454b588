"""Element-wise kernels (unary, binary, comparisons, where), written once against ``xp``.

Operands always have identical axes (the API inserted explicit broadcasts), so a
kernel is one array-library ufunc writing into the op's buffer ``out``.
Comparisons write their booleans as 0/1 in the op's dtype; ``isnan``/``isinf`` and the
logical ops write bool. ``round`` rounds half to even (``rint``, as ONNX and NumPy do);
``erf`` is ``kernels/erf.py``. ``step_function`` is shared with the fused kernel; the two
ops with an arg (``isinf``'s flags, ``bit_shift``'s direction) never fuse (they give bool /
integers), so only ``elementwise`` reads their arg.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...ir import Op, OpType, is_float
from .context import PARALLEL_MIN_ELEMENTS, Kernel, KernelContext, split
from .erf import erf_into

_UFUNCS = {
    OpType.NEG: "negative", OpType.ABS: "abs", OpType.EXP: "exp", OpType.LOG: "log", OpType.LOG1P: "log1p",
    OpType.SQRT: "sqrt", OpType.SQUARE: "square", OpType.RECIPROCAL: "reciprocal", OpType.TANH: "tanh",
    OpType.SIGN: "sign", OpType.SIN: "sin", OpType.COS: "cos", OpType.ADD: "add", OpType.SUB: "subtract",
    OpType.MUL: "multiply", OpType.DIV: "divide", OpType.POW: "power", OpType.MAXIMUM: "maximum",
    OpType.MINIMUM: "minimum", OpType.EQUAL: "equal", OpType.NOT_EQUAL: "not_equal", OpType.LESS: "less",
    OpType.LESS_EQUAL: "less_equal", OpType.GREATER: "greater", OpType.GREATER_EQUAL: "greater_equal",
    OpType.FLOOR: "floor", OpType.CEIL: "ceil", OpType.ROUND: "rint", OpType.TAN: "tan", OpType.ASIN: "arcsin",
    OpType.ACOS: "arccos", OpType.ATAN: "arctan", OpType.SINH: "sinh", OpType.COSH: "cosh", OpType.ASINH: "arcsinh",
    OpType.ACOSH: "arccosh", OpType.ATANH: "arctanh", OpType.ISNAN: "isnan", OpType.LOGICAL_NOT: "logical_not",
    OpType.BITWISE_NOT: "invert", OpType.MOD: "remainder", OpType.FMOD: "fmod", OpType.LOGICAL_AND: "logical_and",
    OpType.LOGICAL_OR: "logical_or", OpType.LOGICAL_XOR: "logical_xor", OpType.BITWISE_AND: "bitwise_and",
    OpType.BITWISE_OR: "bitwise_or", OpType.BITWISE_XOR: "bitwise_xor",
}


def step_function(xp: Any, kind: OpType) -> Callable[..., Any]:
    """``fn(out, *args)``: the element-wise op ``kind`` writing into ``out``."""
    if kind is OpType.RELU:
        return lambda o, x: xp.maximum(x, 0, out=o)
    if kind is OpType.SIGMOID:
        errstate = getattr(xp, "errstate", None)

        def sigmoid(o, x):
            # 1 / (1 + exp(-x)): full relative precision wherever the result is a normal number (x > -87
            # in float32); below, exp(-x) reaches inf and the result 0 or a denormal (at most 2x the
            # smallest normal), with the overflow flag ignored. Four SIMD passes, no temporaries: a cap on
            # -x (xp.minimum with a scalar runs unvectorized in NumPy: 4 us on 8K floats, exp 5 us) cost a
            # quarter more. x is read by the first pass only: o may be x's buffer.
            xp.negative(x, out=o)
            if errstate is not None:
                with errstate(over="ignore"):
                    xp.exp(o, out=o)
            else:
                xp.exp(o, out=o)
            xp.add(o, 1.0, out=o)
            xp.reciprocal(o, out=o)
            return o

        return sigmoid
    if kind is OpType.ERF:
        return lambda o, x: erf_into(xp, o, x)
    if kind is OpType.RSQRT:
        return lambda o, x: xp.reciprocal(xp.sqrt(x, out=o), out=o)
    if kind is OpType.WHERE:
        def where(o, c, a, b):
            # b everywhere, then a where c holds: no full-size temporary (a key/value cache's row write, 32K
            # floats with broadcast operands: 30 -> 15 us). When o overlaps a or c, writing b first would
            # clobber them: the temporary then.
            if xp.may_share_memory(o, a) or xp.may_share_memory(o, c):
                xp.copyto(o, xp.where(c, a, b), casting="unsafe")
                return o
            xp.copyto(o, b, casting="unsafe")
            if c.dtype != bool:  # the mask from the condition's own values (a broadcast one: its few), broadcast
                c = c[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in c.strides)] != 0
            xp.copyto(o, a, casting="unsafe", where=c)
            return o

        return where
    if kind is OpType.CAST:
        def cast(o, x):
            xp.copyto(o, x, casting="unsafe")
            return o

        return cast
    ufunc = getattr(xp, _UFUNCS[kind])
    return lambda o, *args: ufunc(*args, out=o, casting="unsafe")


def _isinf(xp: Any, positive: bool, negative: bool) -> Kernel:
    """isinf counting only the infinities the flags ask for (ONNX IsInf)."""
    if positive and negative:
        return lambda o, x: xp.isinf(x, out=o)
    if positive or negative:
        inf = float("inf") if positive else -float("inf")
        return lambda o, x: xp.equal(x, inf, out=o)

    def none(o, x):
        o.fill(False)
        return o

    return none


def _kernel(op: Op, kc: KernelContext) -> Kernel:
    xp = kc.xp
    if op.op is OpType.ISINF:
        return _isinf(xp, op.arg.detect_positive, op.arg.detect_negative)
    if op.op is OpType.BIT_SHIFT:
        shift = xp.left_shift if op.arg == "left" else xp.right_shift
        return lambda o, a, b: shift(a, b, out=o, casting="unsafe")
    if op.op is OpType.DIV and not is_float(kc.dtype_of(op)):
        # true division of integers gives floats: integer operands floor-divide instead
        return lambda o, a, b: xp.floor_divide(a, b, out=o)
    return step_function(kc.xp, op.op)


def elementwise(op: Op, kc: KernelContext) -> Kernel:
    """The op's kernel; from ``PARALLEL_MIN_ELEMENTS`` on more than one worker, in parts along the first axis
    long enough (each part the same ufunc on the operands' slices: they have the op's shape, or none)."""
    kernel = _kernel(op, kc)
    lengths = op.axes.lengths
    workers = kc.runner.threads()
    axis = next((i for i, n in enumerate(lengths) if n >= workers), None)
    if workers == 1 or axis is None or op.axes.size < PARALLEL_MIN_ELEMENTS:
        return kernel
    parts = [(slice(None),) * axis + (slice(s, e),) for s, e in split(lengths[axis], workers)]

    def part(index: tuple, o: Any, args: tuple) -> None:
        kernel(o[index], *(a if a.ndim == 0 else a[index] for a in args))

    def split_kernel(o, *args):
        kc.runner.run([functools.partial(part, index, o, args) for index in parts])
        return o

    return split_kernel


def stop_gradient(op: Op, kc: KernelContext) -> Kernel:
    return lambda x: x


KERNELS = {
    **{t: elementwise for t in _UFUNCS},
    OpType.RELU: elementwise,
    OpType.SIGMOID: elementwise,
    OpType.RSQRT: elementwise,
    OpType.ERF: elementwise,
    OpType.ISINF: elementwise,
    OpType.BIT_SHIFT: elementwise,
    OpType.WHERE: elementwise,
    OpType.CAST: elementwise,
    OpType.STOP_GRADIENT: stop_gradient,
}
