"""``dot``: contract the shared axes with one BLAS matrix multiply into the output buffer; ``batch_dot``: one
stacked matmul, keeping the batch axes.

Both operands are viewed as matrices — a as (a's other axes, shared axes), b as
(shared axes, b's other axes) — which costs nothing for 2-D operands (BLAS takes
transposed strides) and copies only when a transpose must be merged into one axis.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...ir import Axes, Op, OpType
from .context import Kernel, KernelContext, per_object, split


def is_constant(op: Op) -> bool:
    """True when ``op`` is a ``constant``, possibly renamed (``cast_axes``) or reordered (``broadcast``): its
    value never changes, and is the same array object every call (those kernels keep their last view)."""
    while op.op in (OpType.CAST_AXES, OpType.BROADCAST):
        op = op.src[0]
    return op.op is OpType.CONSTANT


def _held(xp: Any, perm: tuple[int, ...], shape: tuple[int, int], dtype: str) -> Callable[[Any], Any]:
    """``fn(x)``: a constant operand as a C-contiguous ``shape`` matrix in ``dtype``, made once per array.

    A constant is the same array object every call, so its matrix (transposed and copied where its
    layout is not row-major) is kept and returned again while the object is the same. BLAS runs a
    transposed right operand at half speed or worse from 8 rows (``compiled_scan.TRANSPOSE_MIN_ROWS``):
    the 16 x 32 x 256 input projection of a batch-1 LSTM took 7.8 us transposed, 3.5 us not.
    """
    return per_object(lambda x: xp.ascontiguousarray(x.transpose(perm).reshape(shape), dtype=dtype))


def dot_into(kc: KernelContext, a: Op, b: Op, out_axes: Axes, dtype: str) -> Callable[[Any, Any, Any], Any]:
    """``fn(out, u, v)`` writing dot(u, v) (u with ``a``'s axes, v with ``b``'s) into ``out``, its GEMM the
    runner's (``kc.runner.matmul``: on NumPy split over the workers when big, or on BLAS's threads with
    ``kc.blas_threads``).

    ``out_axes`` is a's free axes then b's (one GEMM), or a reordering (``ir/infer._dot``): with
    some of b's free axes first (``[REC, G, N]`` for ``dot(W [G, F], x [F, REC, N])``) it is one
    batched matmul writing each batch entry's block contiguously; any other order is a GEMM into
    a scratch array and one transposing copy. An operand that is a ``constant`` (inference weights)
    is made a C-contiguous matrix once (``_held``).
    """
    shared = a.axes & b.axes
    a_rest, b_rest = a.axes - shared, b.axes - shared
    assert out_axes.same_set(a_rest + b_rest), "dot output axes are a's rest and b's rest"
    a_perm = tuple(a.axes.index(x) for x in a_rest + shared)
    b_perm = tuple(b.axes.index(x) for x in shared + b_rest)
    m, k, n = a_rest.size, shared.size, b_rest.size
    xp, matmul = kc.xp, kc.runner.matmul(m * k * n, kc.blas_threads)
    held_a = _held(xp, a_perm, (m, k), dtype) if is_constant(a) else None
    held_b = _held(xp, b_perm, (k, n), dtype) if is_constant(b) else None

    def operands(u, v):
        u2 = held_a(u) if held_a is not None else u.transpose(a_perm).reshape(m, k)
        v2 = held_b(v) if held_b is not None else v.transpose(b_perm).reshape(k, n)
        if u2.dtype != dtype or v2.dtype != dtype:
            u2, v2 = u2.astype(dtype), v2.astype(dtype)
        return u2, v2

    if out_axes == a_rest + b_rest:
        def dot_kernel(out, u, v):
            matmul(*operands(u, v), out.reshape(m, n))
            return out

        return dot_kernel
    lead = out_axes[:out_axes.index(a_rest[0].name)] if a_rest else Axes([])
    rest = b_rest - lead
    if a_rest and len(lead) and out_axes == lead + a_rest + rest:  # batched over the leading axes of b
        v_perm = tuple(b.axes.index(x) for x in lead + shared + rest)
        p, q = lead.size, rest.size

        def batched_kernel(out, u, v):
            u2 = u.transpose(a_perm).reshape(m, k)
            v3 = v.transpose(v_perm).reshape(p, k, q)
            if u2.dtype != dtype or v3.dtype != dtype:
                u2, v3 = u2.astype(dtype), v3.astype(dtype)
            matmul(u2, v3, out.reshape(p, m, q))
            return out

        return batched_kernel
    standard = a_rest + b_rest
    to_out = tuple(standard.index(x) for x in out_axes)

    def reordered_kernel(out, u, v):
        full = xp.dot(*operands(u, v)).reshape(standard.lengths)
        xp.copyto(out, full.transpose(to_out))
        return out

    return reordered_kernel


def dot(op: Op, kc: KernelContext) -> Kernel:
    a, b = op.src
    return dot_into(kc, a, b, op.axes, kc.dtype_of(op))


def _matrices(xp: Any, x: Any, dtype: str) -> Any:
    """``x`` (a stack of matrices) in ``dtype`` with every matrix laid out for BLAS (one of its two strides one
    element), copied into C order where not: NumPy's matmul runs any other layout in a loop of its own, ~20x
    slower."""
    item, (rows, cols), (row_stride, col_stride) = x.itemsize, x.shape[-2:], x.strides[-2:]
    blas = (col_stride == item and row_stride >= cols * item) or (row_stride == item and col_stride >= rows * item)
    return x if x.dtype == dtype and blas else xp.ascontiguousarray(x, dtype=dtype)


PARALLEL_MIN_MULTIPLY_ADDS = 1 << 23
"""A ``batch_dot`` of at least this many multiply-adds is split over the runner's workers (NumPy's runtime splits a
GEMM from the same size, ``MIN_PARALLEL_FLOPS``)."""


def batch_dot(op: Op, kc: KernelContext) -> Kernel:
    """Stacked matmuls: a as ``(batch..., a's free, contracted)``, b as ``(batch..., contracted, b's free)``.

    The output is written in place when its axes are batch, a's free, b's free (what ``ng.batch_dot``
    builds); any other order (a gradient's) goes through one transposing copy. An operand whose
    matrices are not laid out for BLAS (attention's ``[D, H, REC, N]``, batch last, viewed as
    ``[H, N, REC, D]``) is copied into that order first.

    With more than one worker (``kc.runner``) and at least ``PARALLEL_MIN_MULTIPLY_ADDS``, the longest batch
    axis is split over the workers, each copying, multiplying and reordering its part: BLAS runs at one
    thread inside our sections, so one ``matmul`` call left a core idle (attention's four products per
    layer of a 4-layer d=256 Transformer step, 150 ms at one thread and at two).
    """
    a, b = op.src
    out_axes, dtype, xp = op.axes, kc.dtype_of(op), kc.xp
    shared = a.axes & b.axes
    batch = Axes([x for x in out_axes if x in shared])
    summed = shared - batch
    a_rest, b_rest = a.axes - shared, b.axes - shared
    a_perm = tuple(a.axes.index(x) for x in batch + a_rest + summed)
    b_perm = tuple(b.axes.index(x) for x in batch + summed + b_rest)
    nb, m, k, n = batch.size, a_rest.size, summed.size, b_rest.size
    standard = batch + a_rest + b_rest
    from_out = tuple(out_axes.index(x) for x in standard)  # out.transpose(from_out): out in the standard order
    batch_shape = tuple(batch.lengths)
    workers = kc.runner.threads()
    split_axis = max(range(len(batch)), key=lambda j: batch_shape[j]) if len(batch) else None
    if workers > 1 and split_axis is not None and batch_shape[split_axis] >= 2 \
            and nb * m * k * n >= PARALLEL_MIN_MULTIPLY_ADDS:
        def part(out: Any, u: Any, v: Any, start: int, stop: int) -> None:
            index = (slice(None),) * split_axis + (slice(start, stop),)
            u_part, v_part = u.transpose(a_perm)[index], v.transpose(b_perm)[index]
            shape = u_part.shape[:len(batch)]
            u4 = _matrices(xp, u_part.reshape(shape + (m, k)), dtype)
            v4 = _matrices(xp, v_part.reshape(shape + (k, n)), dtype)
            target = out.transpose(from_out)[index]
            if out_axes == standard:
                xp.matmul(u4, v4, out=target.reshape(shape + (m, n)))
            else:
                xp.copyto(target, xp.matmul(u4, v4).reshape(target.shape))

        parts = split(batch_shape[split_axis], workers)

        def split_batch_dot_kernel(out, u, v):
            kc.runner.run([functools.partial(part, out, u, v, s, e) for s, e in parts])
            return out

        return split_batch_dot_kernel
    to_out = tuple(standard.index(x) for x in out_axes)

    def batch_dot_kernel(out, u, v):
        u3 = u.transpose(a_perm).reshape(nb, m, k).astype(dtype, copy=False)
        v3 = v.transpose(b_perm).reshape(nb, k, n).astype(dtype, copy=False)
        if out_axes == standard:
            xp.matmul(u3, v3, out=out.reshape(nb, m, n))
        else:
            xp.copyto(out, xp.matmul(u3, v3).reshape(standard.lengths).transpose(to_out))
        return out

    return batch_dot_kernel


KERNELS = {OpType.DOT: dot, OpType.BATCH_DOT: batch_dot}
