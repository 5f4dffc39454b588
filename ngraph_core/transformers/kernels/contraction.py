"""``dot``: contract the shared axes with one BLAS matrix multiply into the output buffer; ``batch_dot``: one
stacked matmul, keeping the batch axes.

Both operands are viewed as matrices — a as (a's other axes, shared axes), b as
(shared axes, b's other axes) — which costs nothing for 2-D operands (BLAS takes
transposed strides) and copies only when a transpose must be merged into one axis.
"""

from __future__ import annotations

import functools
import math
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


def _mergeable(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """True when axes of these lengths and strides merge into one without a copy (a reshape's view)."""
    dims = [(n, st) for n, st in zip(shape, strides) if n != 1]
    return all(outer == inner * n for (_, outer), (n, inner) in zip(dims, dims[1:]))


@functools.lru_cache(maxsize=1024)
def _matrix_plan(shape: tuple[int, ...], strides: tuple[int, ...], item: int, cast: bool, batch: int,
                 rows: int) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """How ``stacked_matrices`` makes a layout into matrices: ``("view", shape, ())``, ``("C", shape, ())`` or
    ``("F", shape of the transposed copy, its axis order)`` (cached: a kernel sees the same layouts each call)."""
    lead = shape[:batch]
    m, k = math.prod(shape[batch:batch + rows]), math.prod(shape[batch + rows:])
    row_axes, col_axes = range(batch, batch + rows), range(batch + rows, len(shape))
    if not cast and _mergeable(shape[batch:batch + rows], strides[batch:batch + rows]) and \
            _mergeable(shape[batch + rows:], strides[batch + rows:]):
        row_stride = min((strides[i] for i in row_axes if shape[i] > 1), default=item)
        col_stride = min((strides[i] for i in col_axes if shape[i] > 1), default=item)
        if (col_stride == item and row_stride >= k * item) or (row_stride == item and col_stride >= m * item) \
                or m == 1 or k == 1:
            return "view", lead + (m, k), ()
    smallest_row = min((abs(strides[i]) for i in row_axes if shape[i] > 1), default=None)
    smallest_col = min((abs(strides[i]) for i in col_axes if shape[i] > 1), default=None)
    if smallest_row is not None and smallest_col is not None and smallest_row < smallest_col:
        return "F", lead + (k, m), tuple(range(batch)) + tuple(col_axes) + tuple(row_axes)
    return "C", lead + (m, k), ()


def stacked_matrices(xp: Any, x: Any, batch: int, rows: int, dtype: str) -> Any:
    """``x``'s axes as ``(batch axes..., rows, columns)``: its first ``batch`` axes kept, the next ``rows`` merged into
    the rows and the rest into the columns, each matrix laid out for BLAS (one unit stride), in ``dtype``.

    A view where the axes merge and a matrix has a unit stride. Otherwise a copy, into row-major matrices or
    column-major ones, whichever the copy writes in the order it reads: the one whose innermost axis has the
    smaller stride in ``x``. Attention's q ``[D, H, REC, N]`` (batch last) as ``[H, N]`` stacks of ``REC x D``
    matrices took 3.2 ms row-major and 0.8 ms column-major (1M floats, one thread); the GEMM that follows runs
    as fast on either (BLAS reads a transposed operand).
    """
    kind, shape, order = _matrix_plan(x.shape, x.strides, x.itemsize, x.dtype != dtype, batch, rows)
    if kind == "view":
        return x.reshape(shape)
    if kind == "F":
        return xp.ascontiguousarray(x.transpose(order), dtype=dtype).reshape(shape).swapaxes(-1, -2)
    return xp.ascontiguousarray(x, dtype=dtype).reshape(shape)


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

    a_rows, b_rows = len(a_rest), len(shared)

    def operands(u, v):
        u2 = held_a(u) if held_a is not None else stacked_matrices(xp, u.transpose(a_perm), 0, a_rows, dtype)
        v2 = held_b(v) if held_b is not None else stacked_matrices(xp, v.transpose(b_perm), 0, b_rows, dtype)
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


PARALLEL_MIN_MULTIPLY_ADDS = 1 << 23
"""A ``batch_dot`` of at least this many multiply-adds is split over the runner's workers (NumPy's runtime splits a
GEMM from the same size, ``MIN_PARALLEL_FLOPS``)."""


def batch_dot(op: Op, kc: KernelContext) -> Kernel:
    """Stacked matmuls: a as ``(batch..., a's free, contracted)``, b as ``(batch..., contracted, b's free)``.

    The output is written in place when its axes are batch, a's free, b's free (what ``ng.batch_dot``
    builds); any other order (a gradient's) goes through one transposing copy. An operand whose
    matrices are not laid out for BLAS (attention's ``[D, H, REC, N]``, batch last, viewed as
    ``[H, N, REC, D]``) is copied into the cheaper of the two layouts first (``stacked_matrices``).

    With more than one worker (``kc.runner``) and at least ``PARALLEL_MIN_MULTIPLY_ADDS``, the longest batch
    axis is split over the workers, each copying, multiplying and reordering its part: BLAS runs at one
    thread inside our sections, so one ``matmul`` call left a core idle.
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
    nbatch, a_rows, b_rows = len(batch), len(a_rest), len(summed)

    def part(out: Any, u: Any, v: Any, index: tuple) -> None:
        u4 = stacked_matrices(xp, u.transpose(a_perm)[index], nbatch, a_rows, dtype)
        v4 = stacked_matrices(xp, v.transpose(b_perm)[index], nbatch, b_rows, dtype)
        target = out.transpose(from_out)[index]
        if out_axes == standard:
            xp.matmul(u4, v4, out=target.reshape(u4.shape[:nbatch] + (m, n)))
        else:
            xp.copyto(target, xp.matmul(u4, v4).reshape(target.shape))

    workers = kc.runner.threads()
    split_axis = max(range(nbatch), key=lambda j: batch_shape[j]) if nbatch else None
    if workers > 1 and split_axis is not None and batch_shape[split_axis] >= 2 \
            and nb * m * k * n >= PARALLEL_MIN_MULTIPLY_ADDS:
        indices = [(slice(None),) * split_axis + (slice(s, e),) for s, e in split(batch_shape[split_axis], workers)]

        def split_batch_dot_kernel(out, u, v):
            kc.runner.run([functools.partial(part, out, u, v, index) for index in indices])
            return out

        return split_batch_dot_kernel

    def batch_dot_kernel(out, u, v):
        part(out, u, v, ())
        return out

    return batch_dot_kernel


KERNELS = {OpType.DOT: dot, OpType.BATCH_DOT: batch_dot}
