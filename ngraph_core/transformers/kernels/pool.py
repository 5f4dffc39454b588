"""Pooling kernels: max/avg over windows as strided-slice maxima/sums, one pass per window tap.

The kernels work in the op's own axes order (no layout change): each window tap is a
strided view of the input, clipped to the positions that are not padding (``windows.taps``),
and the output is reduced tap by tap with ``maximum``/``add`` into the output buffer. For
[C, H, W, N] activations the views have N contiguous innermost, so every pass streams; a
reshape-and-reduce over the small window axes of a contiguous array was 40x slower on
this project's 2-core machine. Padding never materializes: a clipped tap skips it,
which is what -inf (max) and 0 (avg) padding mean.

``pool_bprop`` for max recomputes each window's maximum from x and routes the gradient to
the *first* tap (row-major window order) that holds it, as PyTorch does: the IR has no
multi-output ops, so the forward saves no argmax; recomputing costs one extra forward pass
and keeps nothing alive but x (which the gradient of the op before the pooling usually
keeps alive anyway). Windows that do not overlap (stride >= window) write their taps with
one assignment each instead of accumulating.
"""

from __future__ import annotations

import math
from typing import Any

from ...ir import Op, OpType
from ...ir.conv import PoolArg, activation_roles, pool_window_counts
from .context import Kernel, KernelContext
from .windows import Index, Tap, place, taps


class Geometry:
    """Taps of a pooling as index tuples over the op's axes."""

    def __init__(self, x_axes: Any, out_axes: Any, arg: PoolArg) -> None:
        xr, outr = activation_roles(x_axes, "pool"), activation_roles(out_axes, "pool")
        positions, ndim = xr.perm[1:-1], len(x_axes)
        self.lengths, self.out_lengths = xr.spatial.lengths, outr.spatial.lengths
        self.positions, self.ndim = positions, ndim
        rank = len(self.lengths)
        self.plan: list[Tap] = taps(self.lengths, self.out_lengths, arg.fshape, arg.strides, (1,) * rank, arg.padding)
        self.steps: list[tuple[Index, Index]] = [
            (place(t.out, positions, ndim), place(t.inp, positions, ndim)) for t in self.plan]
        self.disjoint = all(s >= k for s, k in zip(arg.strides, arg.fshape))
        read = sum(math.prod(len(range(n)[s]) for n, s in zip(self.lengths, t.inp)) for t in self.plan)
        # disjoint taps that read every input element write every gradient element once
        self.covers_input = self.disjoint and read == math.prod(self.lengths)

    def divisor(self, xp: Any, arg: PoolArg, dtype: str) -> Any:
        """What avg pooling divides each output by: a number, or an array broadcasting over the output."""
        per_axis = [pool_window_counts(n, m, arg, i) for i, (n, m) in enumerate(zip(self.lengths, self.out_lengths))]
        if all(len(set(counts)) == 1 for counts in per_axis):
            return float(math.prod(counts[0] for counts in per_axis))
        divisor = None
        for pos, counts in zip(self.positions, per_axis):
            shape = [1] * self.ndim
            shape[pos] = len(counts)
            factor = xp.asarray(counts, dtype=dtype).reshape(shape)
            divisor = factor if divisor is None else divisor * factor
        return divisor


def _reduce_windows(xp: Any, geometry: Geometry, is_max: bool) -> Any:
    """``fn(out, x)``: out = the max (or the sum) over each window's non-padding taps."""
    combine = xp.maximum if is_max else xp.add
    first = next((j for j, t in enumerate(geometry.plan) if t.covers_out), None)
    steps = geometry.steps if first is None else \
        [geometry.steps[first]] + geometry.steps[:first] + geometry.steps[first + 1:]
    fill = float("-inf") if is_max else 0.0

    def reduce_windows(out, x):
        if first is None:
            out[...] = fill
        for j, (o, i) in enumerate(steps):
            if j == 0 and first is not None:
                xp.copyto(out, x[i], casting="unsafe")
            else:
                combine(out[o], x[i], out=out[o])
        return out

    return reduce_windows


def pool(op: Op, kc: KernelContext) -> Kernel:
    xp, dtype, arg = kc.xp, kc.dtype_of(op), op.arg
    geometry = Geometry(op.src[0].axes, op.axes, arg)
    reduce_windows = _reduce_windows(xp, geometry, arg.op == "max")
    if arg.op == "max":
        return reduce_windows
    divisor = geometry.divisor(xp, arg, dtype)

    def avg_pool_kernel(out, x):
        reduce_windows(out, x)
        xp.divide(out, divisor, out=out)
        return out

    return avg_pool_kernel


def pool_bprop(op: Op, kc: KernelContext) -> Kernel:
    xp, dtype, arg = kc.xp, kc.dtype_of(op), op.arg
    dy = op.src[0]
    geometry = Geometry(op.axes, dy.axes, arg)
    steps, disjoint, covers = geometry.steps, geometry.disjoint, geometry.covers_input
    out_shape = dy.axes.lengths
    scratch = kc.scratch()

    if arg.op == "avg":
        divisor = geometry.divisor(xp, arg, dtype)
        scaled = scratch.request([(out_shape, dtype)])

        def avg_pool_bprop_kernel(out, dyv):
            (g,) = scaled()
            xp.divide(dyv, divisor, out=g)
            if not covers:
                out[...] = 0
            for o, i in steps:
                if disjoint:
                    xp.copyto(out[i], g[o])
                else:
                    out[i] += g[o]
            return out

        return avg_pool_bprop_kernel

    reduce_windows = _reduce_windows(xp, geometry, is_max=True)
    buffers = scratch.request([(out_shape, dtype), (out_shape, "bool"), (out_shape, "bool"), (out_shape, dtype)])

    def max_pool_bprop_kernel(out, dyv, x):
        y, taken, hit, routed = buffers()
        reduce_windows(y, x)
        taken[...] = False
        if not covers:
            out[...] = 0
        for o, i in steps:  # row-major window order: ties go to the first maximum, as in PyTorch
            h, t = hit[o], taken[o]
            xp.equal(x[i], y[o], out=h)
            xp.greater(h, t, out=h)  # a maximum not routed yet (h and not t)
            xp.logical_or(t, h, out=t)
            if disjoint:
                xp.multiply(dyv[o], h, out=out[i])
            else:
                xp.multiply(dyv[o], h, out=routed[o])
                out[i] += routed[o]
        return out

    return max_pool_bprop_kernel


KERNELS = {OpType.POOL: pool, OpType.POOL_BPROP: pool_bprop}
