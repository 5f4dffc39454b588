"""Movement kernels: views where the array library allows (broadcast, rename, slice), copies otherwise."""

from __future__ import annotations

from ...ir import Op, OpType
from .context import Kernel, KernelContext, per_object


def broadcast(op: Op, kc: KernelContext) -> Kernel:
    xp, (x,) = kc.xp, op.src
    out_shape = op.axes.lengths
    # x's axes ordered as they appear in the output, then unit axes where x has none
    perm = tuple(sorted(range(len(x.axes)), key=lambda i: op.axes.index(x.axes[i])))
    unit_shape = tuple(a.length if a in x.axes else 1 for a in op.axes)
    needs_transpose = perm != tuple(range(len(perm)))
    needs_expand = len(x.axes) != len(op.axes)
    # weights, constants and arena buffers are the same array objects every call, and a view follows its
    # base's data: the view is made once per input object (``broadcast_to`` costs ~3 us, a bias per layer)

    def view(v):
        w = v.transpose(perm) if needs_transpose else v
        return xp.broadcast_to(w.reshape(unit_shape), out_shape) if needs_expand else w

    return per_object(view)


def identity(op: Op, kc: KernelContext) -> Kernel:
    return lambda v: v


def reshape(op: Op, kc: KernelContext) -> Kernel:
    shape = op.axes.lengths
    return lambda v: v.reshape(shape)


def _python_slice(start: int, step: int, count: int) -> slice:
    """The Python slice selecting ``start, start + step, ...`` (``count`` indices, all inside the axis:
    ``ir.infer.check_strided_range`` checked them when the op was built or decoded)."""
    if count == 0:
        return slice(0, 0, 1)  # (-1, -1, -1) is an empty range too, but slice(-1, None, -1) is not empty
    stop = start + step * count
    return slice(start, stop if stop >= 0 else None, step)  # below zero: run to the axis' start


def slice_index(op: Op) -> tuple:
    """The basic index (ints and slices) a ``slice`` op applies: ``x[slice_index(op)]`` is its view."""
    return tuple(s if isinstance(s, int) else _python_slice(s[0], s[2], len(range(*s))) for s in op.arg)


def slice_kernel(op: Op, kc: KernelContext) -> Kernel:
    index = slice_index(op)
    return lambda v: v[index]


def pad(op: Op, kc: KernelContext) -> Kernel:
    xp, (x,) = kc.xp, op.src
    lengths = iter(x.axes.lengths)
    index = []
    for p in op.arg:
        if isinstance(p, int):
            index.append(p)
        else:
            start, step = p
            index.append(_python_slice(start, step, next(lengths)))
    index_t = tuple(index)

    def pad_kernel(out, v):
        # zero every call: the buffer may be shared with other ops between calls
        xp.copyto(out, 0)
        out[index_t] = v
        return out

    return pad_kernel


def concat(op: Op, kc: KernelContext) -> Kernel:
    xp, axis, dtype = kc.xp, op.axes.index(op.arg), kc.dtype_of(op)
    return lambda out, *vs: xp.concatenate([v.astype(dtype, copy=False) for v in vs], axis=axis, out=out)


KERNELS = {
    OpType.BROADCAST: broadcast,
    OpType.CAST_AXES: identity,
    OpType.RESHAPE: reshape,
    OpType.SLICE: slice_kernel,
    OpType.PAD: pad,
    OpType.CONCAT: concat,
}
