"""Reduction kernels: the reduced axes are the input's axes the op does not keep."""

from __future__ import annotations

from ...ir import Op, OpType
from .context import Kernel, KernelContext

_NAMES = {OpType.SUM: "sum", OpType.MAX: "max", OpType.MIN: "min", OpType.PROD: "prod",
          OpType.ARGMAX: "argmax", OpType.ARGMIN: "argmin"}


def reduce(op: Op, kc: KernelContext) -> Kernel:
    xp, (x,) = kc.xp, op.src
    fn = getattr(xp, _NAMES[op.op])
    reduced = tuple(i for i, a in enumerate(x.axes) if a not in op.axes)
    kept_in_input_order = [a for a in x.axes if a in op.axes]
    perm = tuple(kept_in_input_order.index(a) for a in op.axes)
    out = kc.out(op)
    if op.op in (OpType.ARGMAX, OpType.ARGMIN):
        (axis,) = reduced
        if perm == tuple(range(len(perm))):
            return lambda v: fn(v, axis=axis, out=out)

        def arg_reduce(v):
            xp.copyto(out, fn(v, axis=axis).transpose(perm), casting="unsafe")
            return out

        return arg_reduce
    if not reduced:
        # a reduction over nothing is a reordering
        return lambda v: xp.copyto(out, v.transpose(perm)) or out
    if perm == tuple(range(len(perm))):
        return lambda v: fn(v, axis=reduced, out=out)
    # reduce into the input's order, then reorder into the buffer
    return lambda v: xp.copyto(out, fn(v, axis=reduced).transpose(perm)) or out


KERNELS = {t: reduce for t in _NAMES}
