"""Constants and random tensors (variables and placeholders are bound by the executor)."""

from __future__ import annotations

from ...ir import ArrayValue, Op, OpType
from .context import Kernel, KernelContext


def constant(op: Op, kc: KernelContext) -> Kernel:
    xp, dtype = kc.xp, kc.dtype_of(op)
    if isinstance(op.arg, ArrayValue):
        value = xp.asarray(op.arg.array, dtype=dtype)
    else:
        value = xp.full(op.axes.lengths, op.arg, dtype=dtype)
    return lambda: value


def uniform(op: Op, kc: KernelContext) -> Kernel:
    dtype, info = kc.dtype_of(op), op.arg
    gen = kc.generator_for(op)
    scale = info.b - info.a

    def uniform_kernel(out):
        # size= too: CuPy 14.2's random(out=) without it fills out with one value
        gen.random(size=out.shape, dtype=dtype, out=out)
        out *= scale
        out += info.a
        return out

    return uniform_kernel


def normal(op: Op, kc: KernelContext) -> Kernel:
    dtype, info = kc.dtype_of(op), op.arg
    gen = kc.generator_for(op)

    def normal_kernel(out):
        gen.standard_normal(size=out.shape, dtype=dtype, out=out)
        out *= info.b
        out += info.a
        return out

    return normal_kernel


KERNELS = {OpType.CONSTANT: constant, OpType.UNIFORM: uniform, OpType.NORMAL: normal}
