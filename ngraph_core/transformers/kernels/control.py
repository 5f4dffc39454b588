"""Side effects and ordering. ``assign`` writes into the variable's storage in place."""

from __future__ import annotations

from ...ir import Op, OpType
from .context import Kernel, KernelContext


def assign(op: Op, kc: KernelContext) -> Kernel:
    xp = kc.xp

    def assign_kernel(var, value):
        # the value may already be the variable (computed into it); copyto buffers other overlaps
        if value is not var:
            xp.copyto(var, value, casting="unsafe")
        return var

    return assign_kernel


def last(op: Op, kc: KernelContext) -> Kernel:
    return lambda *vs: vs[-1]


def first(op: Op, kc: KernelContext) -> Kernel:
    return lambda *vs: vs[0]


def nothing(op: Op, kc: KernelContext) -> Kernel:
    return lambda *vs: None


KERNELS = {
    OpType.ASSIGN: assign,
    OpType.SEQUENTIAL: last,
    OpType.DOALL: nothing,
    OpType.CUSTOM_GRADIENT: first,
}
