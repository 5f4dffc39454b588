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
    transpose = perm != tuple(range(len(perm)))
    dtype = kc.dtype_of(op)
    if op.op in (OpType.ARGMAX, OpType.ARGMIN):
        (axis,) = reduced

        def arg_reduce(v):
            out = fn(v, axis=axis)
            return xp.asarray(out.transpose(perm) if transpose else out, dtype=dtype)

        return arg_reduce

    def reduce_kernel(v):
        out = fn(v, axis=reduced) if reduced else v
        return out.transpose(perm) if transpose else xp.asarray(out)

    return reduce_kernel


KERNELS = {t: reduce for t in _NAMES}
