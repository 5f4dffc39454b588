"""Positional indexing kernels (``ir/indexing.py``): cumsum/cumprod, topk, gather/scatter elements and nd.

Written once against ``xp`` with what NumPy and CuPy share: ``cumsum``/``cumprod``, a stable
``argsort``, advanced indexing, and ``ufunc.at`` for scatters with a reduction (CuPy has
``add.at``, ``maximum.at`` and ``minimum.at`` but no ``multiply.at``: off NumPy a ``"mul"``
scatter runs as ``_multiply_at``, rounds of plain indexed multiplies).

Indices are read as int64: negative ones count from the end, and those still out of range
read 0 (gathers) or write nothing (scatters), as ``gather`` does. Index grids that depend only
on shapes are built once, when the kernel is made.
"""

from __future__ import annotations

import math
from typing import Any

from ...ir import Op, OpType
from .context import Kernel, KernelContext

_AT = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


def _normalize(xp: Any, idx: Any, length: Any) -> tuple[Any, Any]:
    """``idx`` as int64 with negatives wrapped once, out-of-range entries set to 0, and the in-range mask."""
    i = idx.astype("int64", copy=False)
    i = xp.where(i < 0, i + length, i)
    valid = (i >= 0) & (i < length)
    return xp.where(valid, i, 0), valid


def _scatter(xp: Any, target: Any, index: tuple, updates: Any, valid: Any, reduction: str) -> None:
    """Write (``"none"``) or combine (``ufunc.at``) ``updates`` into ``target`` at ``index``, in-range ones only."""
    if not bool(valid.all()):  # drop out-of-range positions (rare: one host sync on a GPU)
        index = tuple(xp.broadcast_to(a, valid.shape)[valid] for a in index)
        updates = updates[valid]
    if reduction == "none":
        target[index] = updates
    elif reduction == "mul" and xp.__name__ != "numpy":
        _multiply_at(xp, target, index, updates)
    else:
        getattr(xp, _AT[reduction]).at(target, index, updates)


def _multiply_at(xp: Any, target: Any, index: tuple, updates: Any) -> None:
    """``multiply.at(target, index, updates)`` without ``ufunc.at`` (CuPy's ``multiply`` has none).

    Round r multiplies every position by its r-th update (in the updates' order, as
    ``multiply.at`` does); no position repeats within a round, so each round is one plain
    indexed multiply and the result equals NumPy's bit for bit. Rounds: the most updates one
    position gets (one host sync).
    """
    lead, shape = len(index), xp.broadcast_shapes(*(a.shape for a in index))
    flat = tuple(xp.broadcast_to(a, shape).reshape(-1) for a in index)
    if flat[0].size == 0:
        return
    rest = target.shape[lead:]
    values = xp.broadcast_to(updates, shape + rest).reshape((-1,) + rest)
    key = xp.ravel_multi_index(flat, target.shape[:lead])
    order = xp.argsort(key, kind="stable")
    ordered = key[order]
    rank = xp.empty_like(order)
    rank[order] = xp.arange(ordered.size) - xp.searchsorted(ordered, ordered, side="left")
    for r in range(int(rank.max()) + 1):
        chosen = xp.nonzero(rank == r)[0]
        target[tuple(f[chosen] for f in flat)] *= values[chosen]


def cumulative(op: Op, kc: KernelContext) -> Kernel:
    xp, arg = kc.xp, op.arg
    ax = op.axes.index(arg.axis)
    accumulate = xp.cumsum if op.op is OpType.CUMSUM else xp.cumprod
    identity = 0 if op.op is OpType.CUMSUM else 1
    before = (slice(None),) * ax

    def cumulative_kernel(out, x):
        # reversing = running over flipped views of the input and of the output
        src = xp.flip(x, axis=ax) if arg.reverse else x
        dst = xp.flip(out, axis=ax) if arg.reverse else out
        acc = accumulate(src, axis=ax, dtype=out.dtype)
        if arg.exclusive:  # position i gets the running value of i - 1; the first, the identity
            xp.copyto(dst[before + (slice(1, None),)], acc[before + (slice(None, -1),)])
            dst[before + (slice(0, 1),)] = identity
        else:
            xp.copyto(dst, acc)
        return out

    return cumulative_kernel


def topk(op: Op, kc: KernelContext) -> Kernel:
    xp, arg = kc.xp, op.arg
    ax = op.src[0].axes.index(arg.axis)
    n = op.src[0].axes.lengths[ax]
    first_k = (slice(None),) * ax + (slice(0, arg.k),)

    def topk_kernel(out, x):
        if arg.largest:
            # descending with ties to the lower position: a stable ascending sort of the reversed
            # axis puts equal values in decreasing original position; reversed again, increasing
            order = xp.flip(xp.argsort(xp.flip(x, axis=ax), axis=ax, kind="stable"), axis=ax)
            order = (n - 1) - order
        else:
            order = xp.argsort(x, axis=ax, kind="stable")
        xp.copyto(out, order[first_k], casting="unsafe")
        return out

    return topk_kernel


def _grids(xp: Any, shape: tuple[int, ...]) -> list[Any]:
    """Per dimension d, ``arange(shape[d])`` shaped to broadcast along d only."""
    r = len(shape)
    return [xp.arange(s).reshape((1,) * d + (s,) + (1,) * (r - d - 1)) for d, s in enumerate(shape)]


def gather_elements(op: Op, kc: KernelContext) -> Kernel:
    xp = kc.xp
    x_op, ind_op = op.src
    ax = x_op.axes.index(op.arg.axis)
    n = x_op.axes.lengths[ax]
    grids = _grids(xp, ind_op.axes.lengths)

    def gather_elements_kernel(out, x, idx):
        if n == 0:
            out.fill(0)
            return out
        i, valid = _normalize(xp, idx, n)
        xp.copyto(out, x[tuple(i if d == ax else g for d, g in enumerate(grids))], casting="unsafe")
        xp.copyto(out, 0, where=~valid)
        return out

    return gather_elements_kernel


def scatter_elements(op: Op, kc: KernelContext) -> Kernel:
    xp = kc.xp
    _, ind_op, _ = op.src
    ax = op.axes.index(op.arg.axis)
    n = op.axes.lengths[ax]
    grids = _grids(xp, ind_op.axes.lengths)

    def scatter_elements_kernel(out, x, idx, updates):
        xp.copyto(out, x, casting="unsafe")
        i, valid = _normalize(xp, idx, n)
        index = tuple(i if d == ax else xp.broadcast_to(g, i.shape) for d, g in enumerate(grids))
        _scatter(xp, out, index, updates.astype(out.dtype, copy=False), valid, op.arg.reduction)
        return out

    return scatter_elements_kernel


def _nd_layout(x_op: Op, ind_op: Op, batch_dims: int) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...]]:
    """(B: batch size, M: index tuples per batch, q, x's shape after the batch axes, its indexed lengths)."""
    xs, ind = x_op.axes.lengths, ind_op.axes.lengths
    q = ind[-1]
    return math.prod(xs[:batch_dims]), math.prod(ind[batch_dims:-1]), q, xs[batch_dims:], xs[batch_dims:batch_dims + q]


def _nd_index(xp: Any, idx: Any, b: int, m: int, q: int, dims: Any) -> tuple[tuple, Any]:
    """The advanced index into ``[B, *x after batch]`` for index tuples ``idx``, and the mask of in-range tuples."""
    i, ok = _normalize(xp, idx.reshape((b, m, q)), dims)
    valid = ok.all(axis=-1)  # [B, M]: every coordinate of the tuple in range
    i = xp.where(valid[..., None], i, 0)
    batch = xp.broadcast_to(xp.arange(b).reshape((b, 1)), (b, m))
    return (batch,) + tuple(i[..., j] for j in range(q)), valid


def gather_nd(op: Op, kc: KernelContext) -> Kernel:
    xp = kc.xp
    x_op, ind_op = op.src
    b, m, q, inner, indexed = _nd_layout(x_op, ind_op, op.arg.batch_dims)
    dims = xp.asarray(indexed, dtype="int64")

    def gather_nd_kernel(out, x, idx):
        if 0 in indexed:
            out.fill(0)
            return out
        index, valid = _nd_index(xp, idx, b, m, q, dims)
        values = x.reshape((b,) + inner)[index]  # [B, M, *rest]
        values[~valid] = 0
        xp.copyto(out, values.reshape(out.shape), casting="unsafe")
        return out

    return gather_nd_kernel


def scatter_nd(op: Op, kc: KernelContext) -> Kernel:
    xp = kc.xp
    x_op, ind_op, _ = op.src
    b, m, q, inner, indexed = _nd_layout(x_op, ind_op, op.arg.batch_dims)
    dims = xp.asarray(indexed, dtype="int64")
    rest = inner[q:]

    def scatter_nd_kernel(out, x, idx, updates):
        xp.copyto(out, x, casting="unsafe")
        if 0 in indexed:
            return out
        index, valid = _nd_index(xp, idx, b, m, q, dims)
        target = out.reshape((b,) + inner)  # out is C-contiguous: a view
        values = updates.reshape((b, m) + rest).astype(out.dtype, copy=False)
        _scatter(xp, target, index, values, valid, op.arg.reduction)
        return out

    return scatter_nd_kernel


KERNELS = {
    OpType.CUMSUM: cumulative,
    OpType.CUMPROD: cumulative,
    OpType.TOPK: topk,
    OpType.GATHER_ELEMENTS: gather_elements,
    OpType.SCATTER_ELEMENTS: scatter_elements,
    OpType.GATHER_ND: gather_nd,
    OpType.SCATTER_ND: scatter_nd,
}
