"""Pooling compiled by numba: one pass over each window per output, channels split over the workers.

The shared kernels (``kernels/pool.py``) reduce tap by tap with whole-array ufuncs: a 2x2 max pool's
gradient makes 4 passes of ``equal``/``greater``/``logical_or``/``multiply`` over strided views, plus
a recomputed forward, all on one core. Here each output position's window is read once (twice for
the max gradient: its maximum, then the first tap holding it), vectorized over the batch, which is
innermost in neon's ``[C, H, W, N]`` layout. The channels are split over the runtime's workers
(``runtime.run``; the loops release the GIL), each writing its own channels of the output.

Semantics match the shared kernels exactly: NaN propagates through max; the max gradient goes to
the *first* tap in row-major window order that holds the maximum (PyTorch's rule); padding is
never read (clipped windows); average pooling divides by ``pool_window_counts`` per axis (PyTorch's
``count_include_pad`` rule). One difference: where the output gradient is inf or NaN, the shared
kernel spreads ``0 * inf = NaN`` to the window's other taps, this one routes it to the chosen tap only.

The NumPy transformer installs ``pool``/``pool_bprop`` below as its overrides. They run the shared
kernel instead when ``NG_KERNELS=numpy``, numba is missing, the dtype is not float32/float64, there
are more than 3 spatial axes, or (per call) an operand is not C-contiguous in ``(C, *spatial, N)``
order (another axes order works, on the reference path). 1-d and 2-d pooling run the 3-d loops with
length-1 axes in front.

The sources below are static (no names from the graph) and go through the kernel disk cache
(``numba_loader.load_kernel``), so a second process compiles nothing.

Memory safety: the loops index without bounds checks. Their window, strides and padding are the op's
``PoolArg``, checked against the input's axes by ``ir.conv.check_pool`` when the graph was built,
decoded and compiled (padding at most half the window, a window no larger than the padded input), and
each call reaches them through ``_view``, whose ``reshape`` to the planned ``(C, D, H, W, N)`` shape
raises on an array of any other size.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import Op
from ...ir.conv import PoolArg, activation_roles, pool_window_counts
from ..kernels import pool as shared
from ..kernels.collective import communicator_of
from ..kernels.context import Kernel, KernelContext
from . import runtime
from .numba_loader import FLOAT_DTYPES, HAVE_NUMBA, Pending, background_allowed, load_kernel, prepare, reference_only

MIN_SPLIT_ELEMENTS = 1 << 15
"""Outputs smaller than this run in one call (a hand-off to a worker costs ~35 us)."""

_HEADER = """\
from numba import njit
import numpy as np


@njit(cache=True, nogil=True)
"""

_LOOPS = """\
    depth, height, width, batch = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
    for c in range(c0, c1):
        for od in range(y.shape[1]):
            d0 = od * sd - pd
            for oh in range(y.shape[2]):
                h0 = oh * sh - ph
                for ow in range(y.shape[3]):
                    w0 = ow * sw - pw
"""

_TAPS = """\
{p}for i in range(max(d0, 0), min(d0 + fd, depth)):
{p}    for j in range(max(h0, 0), min(h0 + fh, height)):
{p}        for l in range(max(w0, 0), min(w0 + fw, width)):
"""


def _taps(indent: int) -> str:
    return _TAPS.format(p=" " * indent)


MAX_SOURCE = _HEADER + """\
def k(x, y, c0, c1, fd, fh, fw, sd, sh, sw, pd, ph, pw):
""" + _LOOPS + """\
                    o = y[c, od, oh, ow]
                    for n in range(batch):
                        o[n] = -np.inf
""" + _taps(20) + """\
                                r = x[c, i, j, l]
                                for n in range(batch):
                                    a = o[n]
                                    b = r[n]
                                    o[n] = a if a >= b or a != a else b
"""
"""``k(x, y, ...)``: ``y[c] = `` the max over each window of ``x[c]``, for channels ``c0:c1``."""

AVG_SOURCE = _HEADER + """\
def k(x, y, c0, c1, fd, fh, fw, sd, sh, sw, pd, ph, pw, cd, ch, cw):
""" + _LOOPS + """\
                    o = y[c, od, oh, ow]
                    for n in range(batch):
                        o[n] = 0
""" + _taps(20) + """\
                                r = x[c, i, j, l]
                                for n in range(batch):
                                    o[n] += r[n]
                    div = cd[od] * ch[oh] * cw[ow]
                    for n in range(batch):
                        o[n] /= div
"""
"""``k(x, y, ..., cd, ch, cw)``: the window sums over ``cd[od] * ch[oh] * cw[ow]`` (per-axis divisors)."""

MAX_BPROP_SOURCE = _HEADER + """\
def k(x, dy, dx, c0, c1, fd, fh, fw, sd, sh, sw, pd, ph, pw, fresh):
    y = dy
    best = np.empty(x.shape[4], x.dtype)
    taken = np.empty(x.shape[4], np.bool_)
    for c in range(c0, c1):
        if not fresh:
            dx[c] = 0
""" + _LOOPS + """\
                    for n in range(batch):
                        best[n] = -np.inf
                        taken[n] = False
""" + _taps(20) + """\
                                r = x[c, i, j, l]
                                for n in range(batch):
                                    a = best[n]
                                    b = r[n]
                                    best[n] = a if a >= b or a != a else b
                    g = dy[c, od, oh, ow]
""" + _taps(20) + """\
                                r = x[c, i, j, l]
                                d = dx[c, i, j, l]
                                for n in range(batch):
                                    hit = r[n] == best[n] and not taken[n]
                                    d[n] = (0 if fresh else d[n]) + (g[n] if hit else 0)
                                    taken[n] = taken[n] or hit
"""
"""``k(x, dy, dx, ..., fresh)``: ``dx[c]`` gets each window's gradient at the first tap holding its maximum;
``fresh``: the windows are disjoint and cover the input, so every element is written once (no zeroing)."""

AVG_BPROP_SOURCE = _HEADER + """\
def k(dy, dx, c0, c1, fd, fh, fw, sd, sh, sw, pd, ph, pw, fresh, cd, ch, cw):
    x = dx
    y = dy
    for c in range(c0, c1):
        if not fresh:
            dx[c] = 0
""" + _LOOPS + """\
                    g = dy[c, od, oh, ow]
                    div = cd[od] * ch[oh] * cw[ow]
""" + _taps(20) + """\
                                d = dx[c, i, j, l]
                                for n in range(batch):
                                    d[n] = (0 if fresh else d[n]) + g[n] / div
"""
"""``k(dy, dx, ..., fresh, cd, ch, cw)``: every tap of each window gets the window's gradient over its divisor."""

MAX1_SOURCE = _HEADER + """\
def k(x, y, c0, c1, fd, fh, fw, sd, sh, sw, pd, ph, pw):
    depth, height, width = x.shape[1], x.shape[2], x.shape[3]
    row = np.empty(width, x.dtype)
    for c in range(c0, c1):
        for od in range(y.shape[1]):
            d0 = od * sd - pd
            for oh in range(y.shape[2]):
                h0 = oh * sh - ph
                for l in range(width):
                    row[l] = -np.inf
                for i in range(max(d0, 0), min(d0 + fd, depth)):
                    for j in range(max(h0, 0), min(h0 + fh, height)):
                        r = x[c, i, j]
                        for l in range(width):
                            a = row[l]
                            b = r[l]
                            row[l] = a if a >= b or a != a else b
                for ow in range(y.shape[3]):
                    w0 = ow * sw - pw
                    m = -np.inf
                    for l in range(max(w0, 0), min(w0 + fw, width)):
                        v = row[l]
                        m = m if m >= v or m != m else v
                    y[c, od, oh, ow] = m
"""
"""``MAX_SOURCE`` for a batch of one, on ``(C, D, H, W)`` views: per output row, the window's input rows are
first combined into one row of maxima (whole contiguous rows: the select vectorizes), then each output takes
the maximum of its taps of that row. On a 3x3 stride-2 pad-1 max pool at batch 1 the
batch loops were slowest; a maximum per window tap by tap halved them (not vectorized: the NaN-propagating
select on stride-2 elements), and the rows combined first took about half as long again (measured:
benchmarks/RESULTS.md, "Behind the code: numpy/compiled_pool.py")."""

AVG1_SOURCE = _HEADER + """\
def k(x, y, c0, c1, fd, fh, fw, sd, sh, sw, pd, ph, pw, cd, ch, cw):
""" + _LOOPS + """\
                    total = 0.0
""" + _taps(20) + """\
                                total += x[c, i, j, l, 0]
                    y[c, od, oh, ow, 0] = total / (cd[od] * ch[oh] * cw[ow])
"""
"""``AVG_SOURCE`` for a batch of one (the sum in a register)."""

_SOURCES = {"max": MAX_SOURCE, "avg": AVG_SOURCE, "max_bprop": MAX_BPROP_SOURCE, "avg_bprop": AVG_BPROP_SOURCE,
            "max1": MAX1_SOURCE, "avg1": AVG1_SOURCE}


@functools.cache
def loops(name: str) -> Callable[..., Any]:
    """The compiled loops ``name`` (``max``, ``avg``, ``max_bprop``, ``avg_bprop``; ``max1``, ``avg1`` for a batch
    of one), from the kernel disk cache."""
    return load_kernel(_SOURCES[name])


class _Layout:
    """How the op's arrays become the loops' ``(C, D, H, W, N)`` views, and the window's numbers."""

    def __init__(self, x_axes: Any, y_axes: Any, arg: PoolArg, dtype: str) -> None:
        xr, yr = activation_roles(x_axes, "pool"), activation_roles(y_axes, "pool")
        rank = len(arg.fshape)
        self.x_perm, self.y_perm = xr.perm, yr.perm
        front = (1,) * (3 - rank)
        self.x_shape = (xr.channel.length, *front, *xr.spatial.lengths, xr.batch.length)
        self.y_shape = (yr.channel.length, *front, *yr.spatial.lengths, yr.batch.length)
        self.window = (*(1,) * (3 - rank), *arg.fshape, *(1,) * (3 - rank), *arg.strides,
                       *(0,) * (3 - rank), *arg.padding)
        counts = [[1]] * (3 - rank) + [pool_window_counts(n, m, arg, i) for i, (n, m) in
                                       enumerate(zip(xr.spatial.lengths, yr.spatial.lengths))]
        self.divisors = tuple(np.asarray(c, dtype=dtype) for c in counts)
        channels = xr.channel.length
        big = math.prod(self.y_shape) >= MIN_SPLIT_ELEMENTS
        self.parts = runtime.split(channels, runtime.threads() if big else 1)

    def x(self, a: Any) -> Any | None:
        """``a`` (x's axes) as a contiguous ``(C, D, H, W, N)`` view, or None when it is not one."""
        return _view(a, self.x_perm, self.x_shape)

    def y(self, a: Any) -> Any | None:
        return _view(a, self.y_perm, self.y_shape)

    def run(self, fn: Callable[..., Any], arrays: Sequence[Any], extra: tuple = ()) -> None:
        """``fn(*arrays, c0, c1, *window, *extra)`` for each channel part, in parallel."""
        runtime.run([functools.partial(fn, *arrays, c0, c1, *self.window, *extra) for c0, c1 in self.parts])

    def compiled(self, fn: Callable[..., Any], arrays: Sequence[Any], extra: tuple, background: bool) -> Pending:
        """``fn``'s machine code for these arguments (``numba_loader.prepare``)."""
        c0, c1 = self.parts[0]
        return prepare(fn, (*arrays, c0, c1, *self.window, *extra), background)


def _view(a: Any, perm: tuple[int, ...], shape: tuple[int, ...]) -> Any | None:
    t = a.transpose(perm)
    return t.reshape(shape) if t.flags.c_contiguous else None


def _background(kc: KernelContext) -> bool:
    return background_allowed(communicator_of(kc).size)


def _eligible(op: Op, kc: KernelContext) -> bool:
    dtype = kc.dtype_of(op)
    return (HAVE_NUMBA and not reference_only() and dtype in FLOAT_DTYPES and len(op.arg.fshape) <= 3
            and all(kc.dtype_of(s) == dtype for s in op.src))


def pool(op: Op, kc: KernelContext) -> Kernel:
    """The NumPy transformer's ``pool`` kernel: compiled loops where eligible, else the shared kernel."""
    reference = shared.pool(op, kc)
    if not _eligible(op, kc):
        return reference
    arg = op.arg
    layout = _Layout(op.src[0].axes, op.axes, arg, kc.dtype_of(op))
    one = layout.x_shape[-1] == 1
    fn = loops(arg.op + ("1" if one else ""))  # a batch of one: its own loops
    extra = layout.divisors if arg.op == "avg" else ()
    drop = one and arg.op == "max"  # max1 takes (C, D, H, W) views
    background, pending = _background(kc), []

    def compiled_pool_kernel(out, x):
        xv, yv = layout.x(x), layout.y(out)
        if xv is None or yv is None:
            return reference(out, x)
        arrays = (xv[..., 0], yv[..., 0]) if drop else (xv, yv)
        if not pending or not pending[0].done:  # the first call, or numba still compiling (NG_COMPILE)
            pending[:] = pending or [layout.compiled(fn, arrays, extra, background)]
            if not pending[0].done:
                return reference(out, x)
        layout.run(fn, arrays, extra)
        return out

    return compiled_pool_kernel


def pool_bprop(op: Op, kc: KernelContext) -> Kernel:
    """The NumPy transformer's ``pool_bprop`` kernel (``dx`` from ``dy``, and ``x`` for max)."""
    reference = shared.pool_bprop(op, kc)
    if not _eligible(op, kc):
        return reference
    arg = op.arg
    layout = _Layout(op.axes, op.src[0].axes, arg, kc.dtype_of(op))
    is_max = arg.op == "max"
    fn = loops("max_bprop" if is_max else "avg_bprop")
    fresh = shared.Geometry(op.axes, op.src[0].axes, arg).covers_input
    extra = (fresh,) if is_max else (fresh, *layout.divisors)
    background, pending = _background(kc), []

    def compiled_pool_bprop_kernel(out, dy, *x):
        dyv, dxv = layout.y(dy), layout.x(out)
        xv = layout.x(x[0]) if is_max else dxv
        if dyv is None or dxv is None or xv is None:
            return reference(out, dy, *x)
        arrays = (xv, dyv, dxv) if is_max else (dyv, dxv)
        if not pending or not pending[0].done:  # the first call, or numba still compiling (NG_COMPILE)
            pending[:] = pending or [layout.compiled(fn, arrays, extra, background)]
            if not pending[0].done:
                return reference(out, dy, *x)
        layout.run(fn, arrays, extra)
        return out

    return compiled_pool_bprop_kernel
