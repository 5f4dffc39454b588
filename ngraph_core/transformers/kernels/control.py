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


def call(op: Op, kc: KernelContext) -> Kernel:
    """Run the sub-graph (compiled once, when this kernel is made) and copy out this op's result."""
    run, index, xp = kc.subgraph(op.arg.graph), op.arg.index, kc.xp

    def call_kernel(out, *inputs):
        xp.copyto(out, run(*inputs)[index], casting="unsafe")
        return out

    return call_kernel


KERNELS = {
    OpType.ASSIGN: assign,
    OpType.SEQUENTIAL: last,
    OpType.DOALL: nothing,
    OpType.CUSTOM_GRADIENT: first,
    OpType.CALL: call,
}
