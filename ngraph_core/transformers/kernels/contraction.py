"""``dot``: contract the shared axes with one BLAS matrix multiply (via tensordot)."""

from __future__ import annotations

from ...ir import Op, OpType
from .context import Kernel, KernelContext


def dot(op: Op, kc: KernelContext) -> Kernel:
    xp, (a, b) = kc.xp, op.src
    shared = a.axes & b.axes
    axes = (tuple(a.axes.index(s) for s in shared), tuple(b.axes.index(s) for s in shared))
    dtype = kc.dtype_of(op)
    same = kc.dtype_of(a) == dtype and kc.dtype_of(b) == dtype
    if same:
        return lambda u, v: xp.tensordot(u, v, axes=axes)
    return lambda u, v: xp.tensordot(u.astype(dtype, copy=False), v.astype(dtype, copy=False), axes=axes)


KERNELS = {OpType.DOT: dot}
