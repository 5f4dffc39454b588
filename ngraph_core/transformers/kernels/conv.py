"""Convolution kernels: im2col + GEMM a block of output rows at a time; dX as a convolution.

Internal layout: channels first, batch last, ``(C, *spatial, N)`` — neon's CHWN, the
layout activations have by default (``[C, H, W, N]``). Then

* **im2col** of a block of output rows is one ``copyto`` from a ``sliding_window_view`` of
  the (padded) input into a ``(C, *F, rows, *out_rest, N)`` buffer; the innermost runs are
  N elements long and contiguous on both sides;
* the **forward GEMM** ``W(K, C*F) @ col(C*F, rows*out_rest*N)`` writes the block's rows of
  ``[K, *out, N]`` — the op's output layout — straight into the output buffer (a strided
  view BLAS takes as is): no transpose anywhere;
* the **filter gradient** sums ``col @ dYᵀ`` over the blocks, written into ``[Ci, *F, K]``;
* the **data gradient** of a stride-1 convolution with C >= K is the convolution of dY with
  the filter flipped in space and its channel roles swapped (same blocked kernel, "full"
  padding ``d*(k-1) - p``); otherwise (strides, C < K, padding wider than the filter) it is
  ``Wᵀ @ dY`` per block, then col2im: one strided add per filter tap into a zeroed dX. The
  choice follows the GEMMs' shapes: the convolution's has M = C rows, col2im's M = C*k*k,
  so when C < K col2im's wider GEMM wins despite its adds (32 -> 64 channels at 16x16:
  6.5 ms against 8.2; 16 -> 16 at 32x32: 8.8 against 6.3; 64 -> 32 at 8x8: 2.1 against 1.5).

A backend may run another algorithm for a convolution: each kernel here is handed to
``kc.conv_variant`` (the NumPy transformer's ``transformers/numpy/conv_choice.variant``: Winograd F(2x2, 3x3)
for 3x3 stride-1 layers, and the batch-outermost layout of ``numpy/conv_image.py``, chosen per layer by
measurement), and these im2col kernels remain the reference and the fallback. GEMMs and parallel sections go through
the kernel context's runner (``kc.runner``: on NumPy, split over the runtime's workers).

Why blocks: a whole-layer col matrix (37 MB for 16 channels at 32x32, batch 64) is written
to memory and read back by the GEMM; a block of ``COL_BLOCK_BYTES`` is read back from
cache. Inputs in another axes order are transposed into the internal layout by the same
copy that pads them; a 1x1 convolution with stride 1 and no padding skips im2col.
Scratch (padded copies, col blocks) comes from the computation's shared workspace.

Measured (forward, data gradient and filter gradient of 3x3 layers at batch 64): row blocks beat the
whole col matrix with col2im by a fifth to a third. Block size: at one thread 256 KiB-2.4 MiB all gained
alike over the whole matrix (a ResNet row of col is 1.2 MB at every stage); at two threads OpenBLAS splits
a GEMM better when it is bigger, and 2.4-4.8 MiB blocks were best (9.6 MiB lost the cache again). Figures:
benchmarks/RESULTS.md, "Behind the code: kernels/conv.py".

Threads (NumPy, ``NG_THREADS`` > 1): each runtime worker takes a contiguous range of output rows and builds and
multiplies its own col blocks (own buffer; the filter gradient sums per worker, then adds the sums); col2im splits
the input channels: a worker's rows of each dcol block (one GEMM) and their adds into its channels of dX, so no
two workers add into the same element. Measured, it made all three calls of a DCGAN layer faster
(benchmarks/RESULTS.md, "Behind the code: kernels/conv.py"). The same split lost when first tried because OpenBLAS
then ran two threads of its own and serialized concurrent calls; the runtime holds BLAS at one thread, and the
calls overlap. GEMM orientation: with K = 16 output channels the GEMM runs at about half the speed it has at K =
64 (M = 16 rows leave OpenBLAS's packed panels underused); the transposed product ``colᵀ @ Wᵀ`` is 2x faster on a
contiguous ``colᵀ``, but building that channels-last col from CHWN costs more than it saves, and a transposed view
of ``col`` gained less than the output transpose cost.

A direct convolution for small channel counts did not pay either (issue 12 asked for one): a numba loop over
output positions, four output channels at a time, vectorized over the batch (CHWN), each tap one multiply-add of a
batch row into four accumulator rows held in L1. Measured against im2col + one GEMM of the whole layer, it took
twice as long or more on every layer tried. The loop is bound by loads and stores of the accumulator rows; the
GEMM keeps its accumulators in registers, and with 27 or 16 rows the col matrix is cheap to build. Accumulators as
32 scalar locals (4 channels x 8 batch lanes) were slower still: numba's loop did not vectorize them. Figures:
benchmarks/RESULTS.md, "Behind the code: kernels/conv.py".
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

from ...ir import Axes, Op, OpType
from ...ir.conv import ConvArg, activation_roles, filter_roles
from .context import Kernel, KernelContext, Runner, per_object, split
from .contraction import is_constant
from .windows import PaddedCopy, is_identity, taps

COL_BLOCK_BYTES = 5 << 19
"""Target size of one block of the col matrix (2.5 MiB; see the measurements above)."""

WORKER_BLOCK_BYTES = 1 << 20
"""Target size of a col block when several workers each build their own (1 MiB, a core's L2 here;
see ``worker_blocks``)."""

Rows = tuple[int, int]
Block = tuple[int, int, int, int]
"""``(first, stop, column, column_stop)``: output rows ``first:stop`` and, of the second spatial axis,
positions ``column:column_stop`` (all of them unless the block is one row)."""


SHARED_COL_ELEMENTS = 1 << 16
"""A col matrix of at most this many elements (a batch-1 layer: ``[2304, 4]`` at ResNet-18's 2x2 stage,
``[576, 64]`` at 8x8) is one block for all workers: built once, its GEMM split by the filter's rows in
the runner's ``matmul`` when big enough (``MIN_PARALLEL_FLOPS``), so each worker streams its share of the
weights. Split by output rows, each worker built a sliver of col and streamed all the weights, and the
hand-offs cost more than the layer: a batch-1 ResNet-18 ran slower at two threads than at one (measured:
benchmarks/RESULTS.md, "Behind the code: kernels/conv.py")."""


def row_blocks(xp: Any, out_first: int, row_bytes: int, budget: int | None = None) -> list[Rows]:
    """Blocks ``(start, stop)`` of output rows (first spatial axis) whose col matrix fits in
    ``budget`` (default ``COL_BLOCK_BYTES``; one row at least); one block for array modules other than NumPy."""
    budget = COL_BLOCK_BYTES if budget is None else budget
    per = out_first if xp.__name__ != "numpy" else max(1, min(out_first, budget // max(row_bytes, 1)))
    return [(start, min(start + per, out_first)) for start in range(0, out_first, per)]


def worker_blocks(xp: Any, out_lengths: tuple[int, ...], row_bytes: int, workers: int) -> list[list[Block]]:
    """Each of ``workers``' col blocks. One worker: whole rows, ``row_blocks``. Several (the runner's
    ``threads()``): a row bigger than ``WORKER_BLOCK_BYTES`` is cut along its second spatial
    axis into blocks of about that size, dealt out in order, an equal count to each worker; smaller rows
    are shared out first, an equal count of rows to each worker, each worker's rows cut into blocks of up
    to ``COL_BLOCK_BYTES`` (dealing out blocks gave a 32-row stem 11 rows against 21).

    Measured on a layer of 7 output rows of 1.8 MB of col: two workers were fastest with half rows,
    one worker with whole rows (so one worker keeps whole rows). The gain is within this VM's noise in
    a whole convolution call; the cut also evens the workers' shares. Figures:
    benchmarks/RESULTS.md, "Behind the code: kernels/conv.py".
    """
    first = out_lengths[0]
    second = out_lengths[1] if len(out_lengths) > 1 else 1
    if workers == 1:
        return [[(a, b, 0, second) for a, b in row_blocks(xp, first, row_bytes)]]
    if row_bytes > WORKER_BLOCK_BYTES and second > 1:
        cuts = split(second, min(second, -(-row_bytes // WORKER_BLOCK_BYTES)))
        units = [(r, r + 1, c0, c1) for r in range(first) for c0, c1 in cuts]
    else:  # an equal share of whole rows to each worker, in blocks of up to COL_BLOCK_BYTES
        return [[(a + start, a + stop, 0, second) for start, stop in row_blocks(xp, b - a, row_bytes)]
                for a, b in split(first, workers)]
    return [units[a:b] for a, b in split(len(units), workers)]


def output_lengths(lengths: tuple[int, ...], fshape: tuple[int, ...], arg: ConvArg) -> tuple[int, ...]:
    """The output's spatial lengths for an input's ``lengths``, a filter's ``fshape`` and ``arg``."""
    return tuple((length + p[0] + p[1] - d * (k - 1) - 1) // s + 1
                 for length, k, s, p, d in zip(lengths, fshape, arg.strides, arg.padding, arg.dilation))


def is_pointwise(fshape: tuple[int, ...], arg: ConvArg) -> bool:
    """True for a 1x1 convolution with stride 1 and no padding: its col matrix is its input."""
    return all(k == 1 for k in fshape) and all(s == 1 for s in arg.strides) and \
        all(p == (0, 0) for p in arg.padding)


def window_view(xp: Any, fshape: tuple[int, ...], arg: ConvArg, out_lengths: tuple[int, ...], batch: bool
                ) -> Callable[[Any], Any]:
    """``fn(padded)``: a padded ``(C, *spatial[, N])`` array as its strided ``(C, *F, *out[, N])`` window view.

    The sliding window view is ``(C, *positions[, N], *window)``: every stride-th position and every
    dilation-th window element are taken, then the axes ordered ``(C, *F, *out[, N])``.
    """
    rank, extra = len(fshape), int(batch)
    window = tuple(d * (k - 1) + 1 for k, d in zip(fshape, arg.dilation))
    index = (slice(None), *(slice(0, (m - 1) * s + 1, s) for m, s in zip(out_lengths, arg.strides)),
             *(slice(None),) * extra, *(slice(None, None, d) for d in arg.dilation))
    order = (0, *range(rank + 1 + extra, 2 * rank + 1 + extra), *range(1, rank + 1), *range(rank + 1, rank + 1 + extra))
    slide, axes = xp.lib.stride_tricks.sliding_window_view, tuple(range(1, rank + 1))
    return lambda padded: slide(padded, window, axis=axes)[index].transpose(order)


class Im2col:
    """The im2col matrix ``(C, *F, *out, N)`` of one activation geometry, a block of output rows at a time.

    ``specs`` lists the scratch it needs (a padded copy, one col block); the kernel adds
    them to its one workspace request and passes the arrays back at run time.

    Args:
        xp: the array module.
        x_axes: the activation's axes (any order; roles read by position).
        fshape: the filter's spatial lengths.
        arg: strides, padding, dilation.
        dtype: the computation dtype.
        x_dtype: the dtype ``x`` arrives in.
        workers: the workers its blocks are shared out to (the runner's ``threads()``).
    """

    def __init__(self, xp: Any, x_axes: Axes, fshape: tuple[int, ...], arg: ConvArg, dtype: str, x_dtype: str,
                 workers: int = 1) -> None:
        roles = activation_roles(x_axes, "conv")
        self.xp, self.perm = xp, roles.perm
        c, n, lengths = roles.channel.length, roles.batch.length, roles.spatial.lengths
        rank = len(lengths)
        self.out_lengths = output_lengths(lengths, fshape, arg)
        padded = any(p != (0, 0) for p in arg.padding)
        self.copy_in = padded or not is_identity(self.perm) or x_dtype != dtype
        self.pointwise = is_pointwise(fshape, arg)
        self.rows = c * math.prod(fshape)
        self.row_shape = (c, *fshape)
        self.rest_shape = (*self.out_lengths[1:], n)  # one output row's positions
        row_columns = math.prod(self.rest_shape)
        row_bytes = self.rows * row_columns * xp.dtype(dtype).itemsize
        self.second = self.out_lengths[1] if rank > 1 else 1
        # a small col matrix is one block for all workers (its GEMM is split by rows in the runner's matmul, if at all)
        few = self.rows * self.out_lengths[0] * row_columns <= SHARED_COL_ELEMENTS
        if self.pointwise:
            self.parts = [[(0, self.out_lengths[0], 0, self.second)]]
        elif few:  # one worker's blocks (whole rows, COL_BLOCK_BYTES at most)
            self.parts = [[(a, b, 0, self.second) for a, b in row_blocks(xp, self.out_lengths[0], row_bytes)]]
        else:
            self.parts = worker_blocks(xp, self.out_lengths, row_bytes, workers)
        self.blocks = [b for part in self.parts for b in part]
        block_columns = max((b - a) * (d - c) for a, b, c, d in self.blocks) * (row_columns // self.second)
        self.specs: list[tuple[tuple[int, ...], str]] = []
        if self.copy_in:
            padded_shape = (c, *(length + p[0] + p[1] for length, p in zip(lengths, arg.padding)), n)
            self.pad = PaddedCopy(padded_shape, range(1, rank + 1), arg.padding, 0.0)
            self.specs.append((padded_shape, dtype))
        self.first_col = len(self.specs)  # one col block buffer per worker from here
        if not self.pointwise:
            self.specs.extend(((self.rows * block_columns,), dtype) for _ in self.parts)
        self.first_out = 1 + rank  # the position of the first output axis in (C, *F, *out, N)
        self._view = per_object(window_view(xp, fshape, arg, self.out_lengths, batch=True))  # the last source's

    def windows(self, x: Any, buffers: list[Any]) -> Any:
        """``x`` (padded, in internal layout) as a strided ``(C, *F, *out, N)`` view (``buffers``: per ``specs``).

        The view of the last source array is kept: the padded copy is the same workspace array every
        call (and an unpadded input usually the same arena view), and ``sliding_window_view`` costs
        ~30 us of Python per call (a fifth of a batch-1 ResNet-18's time), while a view follows its data.
        """
        source = self.pad(self.xp, buffers[0], x.transpose(self.perm)) if self.copy_in else x
        if self.pointwise:
            return source
        return self._view(source)

    def block(self, windows: Any, block: Block, buffers: list[Any], worker: int = 0) -> Any:
        """The ``(C * prod(F), positions)`` col matrix of ``block`` (in ``worker``'s buffer)."""
        if self.pointwise:
            return windows.reshape(self.rows, -1)
        start, stop, column, column_stop = block
        index = (slice(None),) * self.first_out + (slice(start, stop),)
        rest = self.rest_shape
        if (column, column_stop) != (0, self.second):
            index += (slice(column, column_stop),)
            rest = (column_stop - column, *rest[1:])
        shape = (*self.row_shape, stop - start, *rest)
        col = buffers[self.first_col + worker][:math.prod(shape)].reshape(shape)
        self.xp.copyto(col, windows[index])
        return col.reshape(self.rows, -1)


def _internal(xp: Any, a: Any, perm: tuple[int, ...], buffer: Any) -> Any:
    """``a`` in internal layout ``(C, *spatial, N)``; copied into ``buffer`` when one is given
    (its axes are reordered or its dtype differs)."""
    if buffer is None:
        return a
    xp.copyto(buffer, a.transpose(perm), casting="unsafe")
    return buffer


def _rows(a: Any, channels: int, first: int, start: int, stop: int) -> Any:
    """Output rows ``start:stop`` of an internal-layout array as a ``(channels, positions)`` matrix (a view)."""
    return a.reshape(channels, first, -1)[:, start:stop].reshape(channels, -1)


def _block(a: Any, channels: int, im2col: Im2col, block: Block) -> Any:
    """``block``'s positions of an internal-layout array ``[channels, *out, N]`` as a ``(channels,
    positions)`` matrix: a view (a block cut along the second axis is one row, so its positions are
    one strided run)."""
    start, stop, column, column_stop = block
    view = a.reshape(channels, im2col.out_lengths[0], im2col.second, -1)[:, start:stop, column:column_stop]
    return view.reshape(channels, -1)


class _Scratch:
    """Collects a kernel's scratch arrays into its one workspace request."""

    def __init__(self) -> None:
        self.specs: list[tuple[tuple[int, ...], str]] = []

    def add(self, shape: tuple[int, ...], dtype: str, wanted: bool = True) -> int | None:
        """Reserve an array (when ``wanted``); its index in the list the kernel gets, or None."""
        if not wanted:
            return None
        self.specs.append((tuple(shape), dtype))
        return len(self.specs) - 1

    def extend(self, specs: list[tuple[tuple[int, ...], str]]) -> slice:
        start = len(self.specs)
        self.specs.extend(specs)
        return slice(start, len(self.specs))

    def request(self, kc: KernelContext) -> Callable[[], list[Any]]:
        return kc.scratch().request(self.specs)


def _pick(buffers: list[Any], index: int | None) -> Any:
    return None if index is None else buffers[index]


def _grouped_weights(w2: Any, groups: int) -> Any:
    """``(Ci*F, K)`` weights as ``(G, Ci*F, K/G)``: group g's filters."""
    rows, k = w2.shape
    return w2.reshape(rows, groups, k // groups).transpose(1, 0, 2)


def _matmul(runner: Runner, im2col: Im2col) -> Callable[[Any, Any, Any], Any]:
    """The GEMM of ``_conv_rows``: the runner's (on NumPy split over its workers) when one part holds every
    block, else one GEMM in each worker's thread (``runner.product``). Made once per kernel: the NumPy
    runner reads the thread count from the environment."""
    return runner.matmul() if len(im2col.parts) == 1 else runner.product()


def _conv_rows(xp: Any, runner: Runner, im2col: Im2col, wt: Any, groups: int, out: Any, windows: Any,
               buffers: list[Any], matmul: Callable[[Any, Any, Any], Any] | None = None) -> None:
    """``out[K, *out, N] = wt @ col``, a block of output rows at a time (``wt``: ``(K, rows)``, or
    ``(G, K/G, rows)`` with groups; ``matmul``: ``_matmul(runner, im2col)``, made here when not given)."""
    k, rows = out.shape[0], im2col.rows // groups
    matmul = matmul or _matmul(runner, im2col)

    def part(worker: int) -> None:
        for block in im2col.parts[worker]:
            col = im2col.block(windows, block, buffers, worker)
            dest = _block(out, k, im2col, block)
            if groups == 1:
                matmul(wt, col, dest)
            else:
                xp.matmul(wt, col.reshape(groups, rows, -1), out=dest.reshape(groups, k // groups, -1))

    runner.run([functools.partial(part, w) for w in range(len(im2col.parts))])  # one part: this thread


def filter_matrix(w2: Any, groups: int) -> Any:
    """``(Ci*F, K)`` weights as the left GEMM operand: ``(K, Ci*F)``, or ``(G, K/G, Ci*F)`` with groups."""
    return w2.T if groups == 1 else _grouped_weights(w2, groups).transpose(0, 2, 1)


def live_taps(lengths: tuple[int, ...], fshape: tuple[int, ...], arg: ConvArg) -> tuple[tuple[int, int], ...] | None:
    """Per spatial axis, the first and last filter tap that reads the input (not only padding) at some output
    position; None when that is every tap of every axis (or, degenerate, no tap of some axis).

    Example:
        >>> live_taps((1, 1), (3, 3), ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1)))  # a 3x3 pad-1 conv of a 1x1 map
        ((1, 1), (1, 1))
    """
    spans = []
    for length, k, s, (p0, p1), d in zip(lengths, fshape, arg.strides, arg.padding, arg.dilation):
        m = (length + p0 + p1 - d * (k - 1) - 1) // s + 1
        live = [r for r in range(k) if any(0 <= o * s - p0 + r * d < length for o in range(m))]
        if not live:
            return None
        spans.append((live[0], live[-1]))
    return None if all(span == (0, k - 1) for span, k in zip(spans, fshape)) else tuple(spans)


def _live_geometry(lengths: tuple[int, ...], fshape: tuple[int, ...], arg: ConvArg,
                   spans: tuple[tuple[int, int], ...]) -> ConvArg | None:
    """The convolution with the filter cut to its live taps ``spans``: the same output from the same input
    (padding moved by the taps cut in front); None where that needs negative padding."""
    padding = []
    for length, k, s, (p0, p1), d, (lo, hi) in zip(lengths, fshape, arg.strides, arg.padding, arg.dilation, spans):
        m = (length + p0 + p1 - d * (k - 1) - 1) // s + 1
        before = p0 - lo * d
        after = (m - 1) * s + d * (hi - lo) + 1 - length - before  # keeps m output positions
        if before < 0 or after < 0:
            return None
        padding.append((before, after))
    return dataclasses.replace(arg, padding=tuple(padding))


@dataclasses.dataclass(frozen=True)
class Epilogue:
    """What a ``fused`` op computes after its conv head, handed to the convolution kernel.

    Attributes:
        steps: in program order, each ``("bias", i)`` (add input ``i``: a per-output-channel vector broadcast
            over the rest of the output), ``("add", i)`` (add input ``i``, laid out as the output) or
            ``("relu", None)``.
        finish: ``finish(out, *inputs)`` runs those steps over ``out`` in place: what a kernel that computes the
            convolution alone does after it.

    Input ``i`` is the kernel's ``i``-th argument after ``out, xv, wv``. The channels-last kernel applies the
    steps as its compiled loop stores each sum (``numpy/conv_channels_last.py``); the others run ``finish``.
    """

    steps: tuple[tuple[str, int | None], ...]
    finish: Callable[..., Any] = dataclasses.field(compare=False)


def finishing(kernel: Kernel, epilogue: Epilogue | None) -> Kernel:
    """``kernel`` (``fn(out, xv, wv)``), followed by ``epilogue.finish`` over its output (None: ``kernel``)."""
    if epilogue is None:
        return kernel
    finish = epilogue.finish

    def finished_kernel(out, xv, wv, *inputs):
        kernel(out, xv, wv)
        finish(out, *inputs)
        return out

    return finished_kernel


def conv_into(x: Op, w: Op, arg: ConvArg, dtype: str, kc: KernelContext,
              epilogue: Epilogue | None = None) -> Callable[..., Any]:
    """``fn(out, xv, wv)`` writing conv(xv, wv) (``x``'s and ``w``'s axes) into ``out`` ``[K, *out, N]``; with an
    ``epilogue``, ``fn(out, xv, wv, *inputs)`` then applying it.

    The ``conv`` kernel, and the head of a ``fused`` op (``kernels/fused.py``).

    Filter taps that read only padding at every output position (``live_taps``) are cut: a 3x3 pad-1
    convolution of a 1x1 map is a 1x1 one, a GEMM over a ninth of the weights. In a ResNet-18 on 32x32
    images the last stage's 512-channel layers are such, three quarters of the model's 45 MB of weights:
    cut, a batch-1 inference reads 17 MB of weights instead of 45.
    """
    xp = kc.xp
    wr = filter_roles(w.axes, "conv")
    fshape, index = wr.spatial.lengths, None
    lengths = activation_roles(x.axes, "conv").spatial.lengths
    spans = live_taps(lengths, fshape, arg)
    live_arg = _live_geometry(lengths, fshape, arg, spans) if spans is not None else None
    if live_arg is not None:
        index = (slice(None), *(slice(lo, hi + 1) for lo, hi in spans), slice(None))
        fshape, arg = tuple(hi - lo + 1 for lo, hi in spans), live_arg
    im2col = (kc.im2col or Im2col)(xp, x.axes, fshape, arg, dtype, kc.dtype_of(x), workers=kc.runner.threads())
    rows, k, groups = im2col.rows // arg.groups, wr.out_channels.length, arg.groups
    views = kc.scratch().request(im2col.specs)
    constant, matmul = is_constant(w), _matmul(kc.runner, im2col)
    cut = held_filter(xp, index or (), rows, k, groups, dtype, constant) if index is not None or constant else None

    def conv_kernel(out, xv, wv):
        buffers = views()
        wt = cut(wv) if cut is not None else filter_matrix(wv.reshape(rows, k).astype(dtype, copy=False), groups)
        _conv_rows(xp, kc.runner, im2col, wt, groups, out, im2col.windows(xv, buffers), buffers, matmul)
        return out

    if index is not None:  # the cut filter: im2col, or channels last (``conv_choice.variant``)
        return _variant(kc, "conv_cut", finishing(conv_kernel, epilogue), x, w, arg, dtype, fshape, index,
                        epilogue=epilogue)
    return _variant(kc, "conv", finishing(conv_kernel, epilogue), x, w, arg, dtype, epilogue=epilogue)


def held_filter(xp: Any, index: tuple, rows: int, k: int, groups: int, dtype: str,
                 constant: bool) -> Callable[[Any], Any]:
    """``fn(wv)``: the filter matrix (``filter_matrix``) of the live taps ``wv[index]``, C-contiguous (a
    copy). A ``constant`` filter (inference weights: the same array object every call, never written) is
    cut once and kept while the object is the same; a variable changes in place, so it is cut every call
    (a fraction of the layer).

    Kept whole too (``index`` empty) for a constant filter that arrives reordered: an imported ONNX
    filter ``[K, C, R, S]`` is a transposed view, and reshaping it copied every layer's weights on
    every call (a batch-1 ResNet-18 copied 45 MB per inference). Row-major ``(K, C*R*S)`` is also what
    ``narrow_gemm`` reads (a batch-1 GEMM of 2-4 columns), and BLAS runs it as fast as the transposed
    view (143 against 167 us for ``[256, 2304] @ [2304, 4]``)."""
    def matrix(wv):
        w2 = xp.ascontiguousarray(wv[index], dtype=dtype).reshape(rows, k)
        return xp.ascontiguousarray(filter_matrix(w2, groups))

    return per_object(matrix) if constant else matrix


def _variant(kc: KernelContext, kind: str, kernel: Kernel, *args: Any, epilogue: Epilogue | None = None) -> Kernel:
    """``kernel``, or what the backend's ``conv_variant`` runs instead (``transformers/numpy/conv_choice.py``); a
    forward kernel's ``epilogue`` goes with it (``kernel`` already applies it)."""
    return kernel if kc.conv_variant is None else kc.conv_variant(kind, kernel, kc, *args, epilogue=epilogue)


def conv(op: Op, kc: KernelContext) -> Kernel:
    x, w = op.src
    return conv_into(x, w, op.arg, kc.dtype_of(op), kc)


def conv_bprop_filter(op: Op, kc: KernelContext) -> Kernel:
    """dW = sum over blocks of output rows of col(x) @ dYᵀ, each col block built while it stays in cache."""
    xp, dtype, arg = kc.xp, kc.dtype_of(op), op.arg
    x, dy = op.src
    wr = filter_roles(op.axes, "conv_bprop_filter")
    im2col = (kc.im2col or Im2col)(xp, x.axes, wr.spatial.lengths, arg, dtype, kc.dtype_of(x),
                                   workers=kc.runner.threads())
    rows, k, groups = im2col.rows // arg.groups, wr.out_channels.length, arg.groups
    dy_roles = activation_roles(dy.axes, "conv_bprop_filter")
    scratch = _Scratch()
    col_part = scratch.extend(im2col.specs)
    dy_copy = scratch.add(dy_roles.canonical.lengths, dtype,
                          not is_identity(dy_roles.perm) or kc.dtype_of(dy) != dtype)
    acc_shape = (rows, k) if groups == 1 else (groups, rows, k // groups)
    grouped = scratch.add(acc_shape, dtype, groups > 1)
    workers = len(im2col.parts)
    # per worker: its sum (worker 0 sums into the output) and a block's product when it has several
    sums = [None] + [scratch.add(acc_shape, dtype) for _ in range(1, workers)]
    partials = [scratch.add(acc_shape, dtype, len(part) > 1) for part in im2col.parts]
    views = scratch.request(kc)
    matmul = kc.runner.matmul() if workers == 1 else (lambda a, b, o: xp.matmul(a, b, out=o))

    def conv_bprop_filter_kernel(out, xv, dyv):
        buffers = views()
        windows = im2col.windows(xv, buffers[col_part])
        dyi = _internal(xp, dyv, dy_roles.perm, _pick(buffers, dy_copy))
        out2 = out.reshape(rows, k)
        total = out2 if grouped is None else buffers[grouped]

        def part(worker: int) -> None:
            acc = total if worker == 0 else buffers[sums[worker]]
            for j, block in enumerate(im2col.parts[worker]):
                col = im2col.block(windows, block, buffers[col_part], worker)
                dyb = _block(dyi, k, im2col, block)
                dest = acc if j == 0 else buffers[partials[worker]]
                if groups == 1:
                    matmul(col, dyb.T, dest)
                else:
                    n = col.shape[1]
                    xp.matmul(col.reshape(groups, rows, n), dyb.reshape(groups, k // groups, n).transpose(0, 2, 1),
                              out=dest)
                if j:
                    acc += dest

        kc.runner.run([functools.partial(part, w) for w in range(workers)])
        for index in sums[1:]:
            total += buffers[index]
        if grouped is not None:
            xp.copyto(_grouped_weights(out2, groups), total)
        return out

    return _variant(kc, "bprop_filter", conv_bprop_filter_kernel, op)


def conv_bprop_data(op: Op, kc: KernelContext) -> Kernel:
    """dX: with stride 1 and at least as many input as output channels, a convolution of dY with
    the flipped, transposed filter; otherwise col2im(Wᵀ @ dY) (see the module docstring)."""
    dy, w = op.src
    wr = filter_roles(w.axes, "conv_bprop_data")
    fshape, arg = wr.spatial.lengths, op.arg
    full_pads = tuple((d * (f - 1) - before, d * (f - 1) - after)
                      for f, d, (before, after) in zip(fshape, arg.dilation, arg.padding))
    widening = wr.in_channels.length * arg.groups < wr.out_channels.length  # C < K: col2im's GEMM is wider
    if all(s == 1 for s in arg.strides) and all(p >= 0 for pair in full_pads for p in pair) and not widening:
        kernel = _bprop_data_as_convolution(op, kc, ConvArg(arg.strides, full_pads, arg.dilation, arg.groups))
    else:
        kernel = _bprop_data_col2im(op, kc)
    return _variant(kc, "bprop_data", kernel, op)


def _bprop_data_as_convolution(op: Op, kc: KernelContext, full: ConvArg) -> Kernel:
    """dX = conv(dY, W') with ``full`` padding, W' the filter flipped in space with its channel
    roles swapped: ``[K/G, *F, C]`` (group g's input channels become its output channels)."""
    xp, dtype = kc.xp, kc.dtype_of(op)
    dy, w = op.src
    xr, wr = activation_roles(op.axes, "conv_bprop_data"), filter_roles(w.axes, "conv_bprop_data")
    fshape, groups = wr.spatial.lengths, full.groups
    ci, k, c = wr.in_channels.length, wr.out_channels.length, xr.channel.length
    rank = len(fshape)
    im2col = (kc.im2col or Im2col)(xp, dy.axes, fshape, full, dtype, kc.dtype_of(dy), workers=kc.runner.threads())
    scratch = _Scratch()
    col_part = scratch.extend(im2col.specs)
    flipped = scratch.add((k // groups, *fshape, groups, ci), dtype)
    dx_copy = scratch.add(xr.canonical.lengths, dtype, not is_identity(xr.perm))
    views = scratch.request(kc)
    reverse = (slice(None), *(slice(None, None, -1),) * rank)
    to_flipped = (rank + 2, *range(1, rank + 1), rank + 1, 0)  # (Ci, *F, G, K/G) -> (K/G, *F, G, Ci)

    def conv_bprop_data_kernel(out, dyv, wv):
        buffers = views()
        wf = buffers[flipped]
        xp.copyto(wf, wv.reshape(ci, *fshape, groups, k // groups)[reverse].transpose(to_flipped), casting="unsafe")
        dx = out if dx_copy is None else buffers[dx_copy]
        windows = im2col.windows(dyv, buffers[col_part])
        _conv_rows(xp, kc.runner, im2col, filter_matrix(wf.reshape(-1, c), groups), groups, dx, windows,
                   buffers[col_part])
        if dx_copy is not None:
            xp.copyto(out.transpose(xr.perm), dx)
        return out

    return conv_bprop_data_kernel


def _bprop_data_col2im(op: Op, kc: KernelContext) -> Kernel:
    """dX = col2im(Wᵀ @ dY), a block of dY's rows at a time, added tap by tap into the input's positions."""
    xp, dtype, arg = kc.xp, kc.dtype_of(op), op.arg
    dy, w = op.src
    xr, wr = activation_roles(op.axes, "conv_bprop_data"), filter_roles(w.axes, "conv_bprop_data")
    dyr = activation_roles(dy.axes, "conv_bprop_data")
    fshape, lengths = wr.spatial.lengths, xr.spatial.lengths
    c, k, groups = xr.channel.length, wr.out_channels.length, arg.groups
    rows = math.prod(w.axes.lengths[:-1])  # Ci * prod(F)
    out_lengths = dyr.spatial.lengths
    first, rest = out_lengths[0], (*out_lengths[1:], xr.batch.length)
    pointwise = is_pointwise(fshape, arg)
    itemsize = xp.dtype(dtype).itemsize
    blocks = [(0, first)] if pointwise else row_blocks(xp, first, c * math.prod(fshape) * math.prod(rest) * itemsize)
    block_rows = max(stop - start for start, stop in blocks)
    scratch = _Scratch()
    dy_copy = scratch.add(dyr.canonical.lengths, dtype, not is_identity(dyr.perm) or kc.dtype_of(dy) != dtype)
    dx_copy = scratch.add(xr.canonical.lengths, dtype, not is_identity(xr.perm))
    dcol_buffer = scratch.add((c * math.prod(fshape) * block_rows * math.prod(rest),), dtype, not pointwise)
    views = scratch.request(kc)
    pads = [p[0] for p in arg.padding]
    plans = []  # per block: (dx index, dcol index) per tap, the block's output rows counted from 0
    for start, stop in blocks:
        plan = taps(lengths, (stop - start, *out_lengths[1:]), fshape, arg.strides, arg.dilation,
                    (pads[0] - start * arg.strides[0], *pads[1:]))
        plans.append([((slice(None), *t.inp, slice(None)), (slice(None), *t.offsets, *t.out, slice(None)))
                      for t in plan])

    # on NumPy with several workers (no groups), each worker takes a range of input channels: its rows
    # of every dcol block (one GEMM each) and their adds into its channels of dX
    workers = kc.runner.threads() if groups == 1 and not pointwise else 1
    channel_parts = split(c, workers)
    matmul = kc.runner.matmul() if workers == 1 else (lambda a, b, o: xp.matmul(a, b, out=o))
    taps_per_channel = math.prod(fshape)

    def gemm(dest, w2, dyb):
        if groups == 1:
            matmul(w2, dyb, dest)
        else:
            n = dyb.shape[1]
            xp.matmul(_grouped_weights(w2, groups), dyb.reshape(groups, k // groups, n),
                      out=dest.reshape(groups, rows, n))

    def conv_bprop_data_kernel(out, dyv, wv):
        buffers = views()
        dyi = _internal(xp, dyv, dyr.perm, _pick(buffers, dy_copy))
        w2 = wv.reshape(rows, k).astype(dtype, copy=False)
        dx = out if dx_copy is None else buffers[dx_copy]
        if pointwise:
            gemm(dx.reshape(c, -1), w2, dyi.reshape(k, -1))
        else:
            def channels(c0: int, c1: int) -> None:
                mine, w_mine = dx[c0:c1], w2[c0 * taps_per_channel:c1 * taps_per_channel]
                mine[...] = 0
                for (start, stop), steps in zip(blocks, plans):
                    shape = (c, *fshape, stop - start, *rest)
                    dcol = buffers[dcol_buffer][:math.prod(shape)].reshape(shape)[c0:c1]
                    # one part (c0:c1 is every channel) with groups: the grouped GEMM
                    gemm(dcol.reshape((c1 - c0) * taps_per_channel, -1), w_mine, _rows(dyi, k, first, start, stop))
                    for dx_index, dcol_index in steps:
                        mine[dx_index] += dcol[dcol_index]

            kc.runner.run([functools.partial(channels, c0, c1) for c0, c1 in channel_parts])  # one part: this thread
        if dx_copy is not None:
            xp.copyto(out.transpose(xr.perm), dx)
        return out

    return conv_bprop_data_kernel


KERNELS = {
    OpType.CONV: conv,
    OpType.CONV_BPROP_DATA: conv_bprop_data,
    OpType.CONV_BPROP_FILTER: conv_bprop_filter,
}
