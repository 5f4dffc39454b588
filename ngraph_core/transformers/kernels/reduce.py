"""Reduction kernels: the reduced axes are the input's axes the op does not keep."""

from __future__ import annotations

import functools

from ...ir import Op, OpType
from .context import PARALLEL_MIN_ELEMENTS, Kernel, KernelContext, split

_NAMES = {OpType.SUM: "sum", OpType.MAX: "max", OpType.MIN: "min", OpType.PROD: "prod",
          OpType.ARGMAX: "argmax", OpType.ARGMIN: "argmin"}

_UFUNCS = {OpType.SUM: "add", OpType.MAX: "maximum", OpType.MIN: "minimum", OpType.PROD: "multiply"}
"""On NumPy a reduction is its ufunc's ``reduce`` into a view of the output with the kept axes in the input's
order: no temporary, no copy, and none of ``numpy.sum``'s Python wrapper (a batch-1 ResNet-18's global
average pool, 512 values, took 12-18 us as ``sum`` then a reordering copy)."""


def reduce(op: Op, kc: KernelContext) -> Kernel:
    xp, (x,) = kc.xp, op.src
    fn = getattr(xp, _NAMES[op.op])
    reduced = tuple(i for i, a in enumerate(x.axes) if a not in op.axes)
    kept_in_input_order = [a for a in x.axes if a in op.axes]
    perm = tuple(kept_in_input_order.index(a) for a in op.axes)
    in_order = perm == tuple(range(len(perm)))
    if op.op in (OpType.ARGMAX, OpType.ARGMIN):
        (axis,) = reduced
        if in_order:
            return lambda o, v: fn(v, axis=axis, out=o)
        reduced_arg = axis
    elif xp.__name__ == "numpy":
        ufunc = getattr(xp, _UFUNCS[op.op])
        if not reduced:
            return lambda o, v: (xp.copyto(o, v.transpose(perm)), o)[1]  # a reduction over nothing: a reordering
        inverse = tuple(sorted(range(len(perm)), key=perm.__getitem__))  # o's axes in the input's order
        workers = kc.runner.threads()
        kept_positions = [i for i, a in enumerate(x.axes) if a in op.axes]
        split_at = next((j for j, i in enumerate(kept_positions) if x.axes[i].length >= workers), None)
        if workers > 1 and split_at is not None and x.axes.size >= PARALLEL_MIN_ELEMENTS:
            # a big reduction (a softmax's max and sum over [H, N, T, T]) in parts along a kept axis, one a worker
            axis_in = kept_positions[split_at]
            ranges = split(x.axes[axis_in].length, workers)

            def part(o_view, v, s, e):
                ufunc.reduce(v[(slice(None),) * axis_in + (slice(s, e),)], axis=reduced,
                             out=o_view[(slice(None),) * split_at + (slice(s, e),)])

            def split_reduce(o, v):
                o_view = o.transpose(inverse)
                kc.runner.run([functools.partial(part, o_view, v, s, e) for s, e in ranges])
                return o

            return split_reduce

        def ufunc_reduce(o, v):
            ufunc.reduce(v, axis=reduced, out=o.transpose(inverse))
            return o

        return ufunc_reduce
    else:
        if not reduced:
            # a reduction over nothing is a reordering
            def reorder(o, v):
                xp.copyto(o, v.transpose(perm))
                return o

            return reorder
        # CuPy 14.2's min(out=) raises TypeError in its CUB path (max, sum, prod take out=): off
        # NumPy, min reduces into a temporary and copies
        if in_order and (op.op is not OpType.MIN or xp.__name__ == "numpy"):
            return lambda o, v: fn(v, axis=reduced, out=o)
        reduced_arg = reduced

    def reduce_then_reorder(o, v):
        xp.copyto(o, fn(v, axis=reduced_arg).transpose(perm), casting="unsafe")
        return o

    return reduce_then_reorder


KERNELS = {t: reduce for t in _NAMES}
