"""``dot``: contract the shared axes with one BLAS matrix multiply into the output buffer.

Both operands are viewed as matrices — a as (a's other axes, shared axes), b as
(shared axes, b's other axes) — which costs nothing for 2-D operands (BLAS takes
transposed strides) and copies only when a transpose must be merged into one axis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir import Axes, Op, OpType
from .context import Kernel, KernelContext


def dot_into(xp: Any, a: Op, b: Op, out_axes: Axes, dtype: str) -> Callable[[Any, Any, Any], Any]:
    """``fn(out, u, v)`` writing dot(u, v) (u with ``a``'s axes, v with ``b``'s) into ``out``."""
    shared = a.axes & b.axes
    a_rest, b_rest = a.axes - shared, b.axes - shared
    assert a_rest + b_rest == out_axes, "dot output axes are a's rest then b's rest"
    a_perm = tuple(a.axes.index(x) for x in a_rest + shared)
    b_perm = tuple(b.axes.index(x) for x in shared + b_rest)
    m, k, n = a_rest.size, shared.size, b_rest.size

    def dot_kernel(out, u, v):
        u2 = u.transpose(a_perm).reshape(m, k)
        v2 = v.transpose(b_perm).reshape(k, n)
        if u2.dtype != dtype or v2.dtype != dtype:
            u2, v2 = u2.astype(dtype), v2.astype(dtype)
        xp.dot(u2, v2, out=out.reshape(m, n))
        return out

    return dot_kernel


def dot(op: Op, kc: KernelContext) -> Kernel:
    a, b = op.src
    return dot_into(kc.xp, a, b, op.axes, kc.dtype_of(op))


KERNELS = {OpType.DOT: dot}
