"""Normalization statistics: ``moments`` (mean, biased variance) and ``centered_sums``.

Both see their input as a ``(features, rest)`` matrix: the kept axes first, the reduced ones after (a view when
the kept axes lead the input, as ``C`` does in ``[C, H, W, N]``; otherwise one transposing copy into scratch). Row
sums are a matrix-vector product with a vector of ones (BLAS gemv: 3x faster than ``sum(axis=1)`` on a 16 x 65536
float32 matrix). Products are reduced in blocks of about ``BLOCK_ELEMENTS``: the block's centered values ``x -
mean`` are formed in a small temporary that stays in cache and each row is dotted with its partner by a stacked
``matmul`` (2x faster than ``einsum('ij,ij->i')``), so the input is read from memory twice (the mean, then the
block pass) and no full-size temporary is written. An input whose reduced axes lead (a layer norm's ``[F, REC,
N]``) is reduced as it lies instead (``_moments_over_leading_axes``: down its columns, in column blocks split over
the runtime's workers, 5.2 -> 0.9 ms at one thread, 0.6 at two). The row kernels stay in the calling thread:
splitting the features over two runtime workers (each with its own block temporary) measured slower on this
memory-bound pass (benchmarks/RESULTS.md, "Behind the code: kernels/normalization.py"). The variance is the mean
of squared deviations from the mean, not ``E[x^2] - E[x]^2``, which cancels catastrophically in float32 when the
mean is large against the spread.

Off NumPy (CuPy) there is no cache to block for and every call is a kernel launch: the block
loop (one subtract and one tiny batched GEMM per block of rows, ~40 blocks for a ResNet layer)
took ~800 us per call on an H100, nearly all of it launches. There the whole matrix is one
block and the row dots are an element-wise product and one GEMV: four launches per call.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ...ir import Op, OpType
from .context import PARALLEL_MIN_ELEMENTS, Kernel, KernelContext

BLOCK_ELEMENTS = 1 << 16


class _Rows:
    """Views an input (axes ``x_axes``) as a ``(features, rest)`` matrix: the kept axes first in ``kept``
    order, then the others in ``rest`` order (default: their own), so two inputs can be made to agree."""

    def __init__(self, kc: KernelContext, x_axes: Any, kept: Any, dtype: str, x_dtype: str, scratch: list,
                 rest: Any = None) -> None:
        self.xp = kc.xp
        kept_pos = [x_axes.index(a) for a in kept]
        rest_pos = [i for i in range(len(x_axes)) if i not in kept_pos] if rest is None else \
            [x_axes.index(a) for a in rest]
        self.rest_axes = [x_axes[i] for i in rest_pos]
        self.perm = tuple(kept_pos + rest_pos)
        self.features = math.prod(a.length for a in kept)
        self.rest = x_axes.size // max(self.features, 1)
        self.copy = self.perm != tuple(range(len(x_axes))) or x_dtype != dtype
        self.slot = None
        if self.copy:
            self.slot = len(scratch)
            scratch.append(((self.features, self.rest), dtype))

    def __call__(self, x: Any, buffers: list[Any]) -> Any:
        if not self.copy:
            return x.reshape(self.features, self.rest)
        out = buffers[self.slot]
        self.xp.copyto(out.reshape([x.shape[p] for p in self.perm]), x.transpose(self.perm), casting="unsafe")
        return out


@functools.lru_cache(maxsize=64)
def _ones(xp: Any, n: int, dtype: str) -> Any:
    """A read-only vector of ``n`` ones (row sums as one gemv), shared by every kernel that needs it."""
    return xp.ones(n, dtype=dtype)


def _row_dots(xp: Any, a: Any, b: Any) -> Any:
    """``(a * b).sum(axis=1)`` for two ``(rows, n)`` matrices, one BLAS dot per row."""
    return xp.matmul(a[:, None, :], b[:, :, None])[:, 0, 0]


def _blocks(xp: Any, features: int, rest: int) -> list[tuple[int, int]]:
    if xp.__name__ != "numpy":  # a GPU: one block (see the module docstring)
        return [(0, features)]
    per = max(1, BLOCK_ELEMENTS // max(rest, 1))
    return [(s, min(s + per, features)) for s in range(0, features, per)]


def _row_dots_into(xp: Any, out: Any, a: Any, d: Any, ones: Any) -> None:
    """``out = (a * d).sum(axis=1)``; ``d`` is scratch the caller no longer needs (a GPU overwrites it)."""
    if xp.__name__ == "numpy":
        out[...] = _row_dots(xp, a, d)
    else:
        xp.multiply(d, a, out=d)
        xp.matmul(d, ones, out=out)


def _moments_over_leading_axes(op: Op, kc: KernelContext) -> Kernel | None:
    """``moments`` where the input is ``[reduced..., kept...]`` (a layer norm's ``[F, REC, N]`` over ``F``) on NumPy:
    the input is an ``(F, K)`` matrix as it is, reduced down its columns (``add.reduce`` over axis 0 adds whole
    rows, vectorized) in blocks of columns that keep the centered values in cache, the blocks split over the
    runner's workers. The general kernel first copies such an input into ``(K, F)`` rows: 3.75 ms for a
    ``[256, 128, 32]`` float32 layer norm at one thread, against ~1 here. None where it does not apply."""
    xp, dtype, (x,) = kc.xp, kc.dtype_of(op), op.src
    kept = op.axes[1:]
    reduced = [a for a in x.axes if a not in kept]
    if xp.__name__ != "numpy" or not reduced or not len(kept) or list(x.axes) != reduced + list(kept) \
            or kc.dtype_of(x) != dtype:
        return None
    features = math.prod(a.length for a in reduced)
    columns = math.prod(a.length for a in kept)
    width = max(1, min(columns, BLOCK_ELEMENTS // max(features, 1)))
    blocks = [(s, min(s + width, columns)) for s in range(0, columns, width)]
    workers = min(kc.runner.threads(), len(blocks)) if features * columns >= PARALLEL_MIN_ELEMENTS else 1
    views = kc.scratch().request([((features, width), dtype) for _ in range(workers)])
    inv = 1.0 / features

    def run_blocks(worker: int, x2: Any, mean: Any, var: Any, temps: list[Any]) -> None:
        d = temps[worker]
        for s, e in blocks[worker::workers]:
            block = d[:, :e - s]
            xp.add.reduce(x2[:, s:e], axis=0, out=mean[s:e])
            mean[s:e] *= inv
            xp.subtract(x2[:, s:e], mean[s:e], out=block)
            xp.multiply(block, block, out=block)
            xp.add.reduce(block, axis=0, out=var[s:e])
            var[s:e] *= inv

    def moments_kernel(out, xv):
        temps = views()
        x2, out2 = xv.reshape(features, columns), out.reshape(2, columns)
        if workers == 1:
            run_blocks(0, x2, out2[0], out2[1], temps)
        else:
            kc.runner.run([functools.partial(run_blocks, w, x2, out2[0], out2[1], temps) for w in range(workers)])
        return out

    return moments_kernel


def moments(op: Op, kc: KernelContext) -> Kernel:
    """``out[0] = mean``, ``out[1] = mean((x - mean)^2)`` per kept position."""
    leading = _moments_over_leading_axes(op, kc)
    if leading is not None:
        return leading
    xp, dtype, (x,) = kc.xp, kc.dtype_of(op), op.src
    kept = op.axes[1:]
    scratch: list = []
    rows = _Rows(kc, x.axes, kept, dtype, kc.dtype_of(x), scratch)
    blocks = _blocks(xp, rows.features, rows.rest)
    per = blocks[0][1] - blocks[0][0]
    temp = len(scratch)
    scratch.append(((per, rows.rest), dtype))
    views = kc.scratch().request(scratch)
    inv = 1.0 / rows.rest
    ones = _ones(xp, rows.rest, dtype)

    def moments_kernel(out, xv):
        buffers = views()
        x2 = rows(xv, buffers)
        out2 = out.reshape(2, rows.features)
        mean, var = out2[0], out2[1]
        xp.matmul(x2, ones, out=mean)
        mean *= inv
        for s, e in blocks:
            d = buffers[temp][:e - s]
            xp.subtract(x2[s:e], mean[s:e, None], out=d)
            _row_dots_into(xp, var[s:e], d, d, ones)
        var *= inv
        return out

    return moments_kernel


def centered_sums(op: Op, kc: KernelContext) -> Kernel:
    """``out[0] = sum(dy)``, ``out[1] = sum(dy * (x - mean))`` per kept position."""
    xp, dtype = kc.xp, kc.dtype_of(op)
    dy, x, mean = op.src
    kept = op.axes[1:]
    scratch: list = []
    x_rows = _Rows(kc, x.axes, kept, dtype, kc.dtype_of(x), scratch)
    dy_rows = _Rows(kc, dy.axes, kept, dtype, kc.dtype_of(dy), scratch, rest=x_rows.rest_axes)  # x's order
    mean_perm = tuple(mean.axes.index(a) for a in kept)
    blocks = _blocks(xp, x_rows.features, x_rows.rest)
    per = blocks[0][1] - blocks[0][0]
    temp = len(scratch)
    scratch.append(((per, x_rows.rest), dtype))
    views = kc.scratch().request(scratch)
    ones = _ones(xp, x_rows.rest, dtype)

    def centered_sums_kernel(out, dyv, xv, meanv):
        buffers = views()
        dy2, x2 = dy_rows(dyv, buffers), x_rows(xv, buffers)
        m = meanv.transpose(mean_perm).reshape(-1)
        out2 = out.reshape(2, x_rows.features)
        xp.matmul(dy2, ones, out=out2[0])
        for s, e in blocks:
            d = buffers[temp][:e - s]
            xp.subtract(x2[s:e], m[s:e, None], out=d, casting="unsafe")
            _row_dots_into(xp, out2[1, s:e], dy2[s:e], d, ones)
        return out

    return centered_sums_kernel


KERNELS = {OpType.MOMENTS: moments, OpType.CENTERED_SUMS: centered_sums}
