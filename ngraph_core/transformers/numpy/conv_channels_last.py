"""Convolution of few output positions, channels last: the filter streamed once by a compiled loop.

A batch-1 layer on a small map is a GEMM with few columns (ResNet-18 on 32x32 images: 64 output
positions at 8x8, 16 at 4x4, 4 at 2x2). There the im2col kernels (``conv.py``) spend more around the
GEMM than in it, and the GEMM runs below its peak:

* their col matrix ``(C * prod(F), positions)`` is copied from a window view whose innermost runs are
  output rows (2-8 floats at these sizes): 35-43 us for a 64-channel 8x8 or 128-channel 4x4 layer;
* OpenBLAS packs the weights on every call: ~17 MB per batch-1 ResNet-18 inference, written and read
  again, and they push the next layers' weights out of this VM's share of the L3.

Here the input is copied, padded, channels last ``(*padded, N, C)``, so the transposed col matrix
``(positions * N, prod(F) * C)`` is one copy from a window view whose innermost runs are ``C`` floats
(``S * C`` at batch 1: the filter's last axis and the channels are one run). The filter is held as
``(K, prod(F) * C)`` and ``narrow_gemm.times_transposed`` multiplies: four filter rows read once from
memory against four columns at a time, sixteen sums in registers, no packing (BLAS where the depth
``prod(F) * C`` is short: ``MIN_LOOP_DEPTH``). Its result ``(K, positions * N)`` is the output
``[K, *out, N]`` itself (columns in ``(position, image)`` order). With several workers each takes a range
of the filter's rows (its share of the weights).

As the head of a fused op whose program is a bias, a residual and a relu (``conv.Epilogue``), the loop
applies them to each sum as it stores it; a shallow product with more columns than filter rows (the stem)
is computed transposed on BLAS and stored back through the same steps (``narrow_gemm.transposed_store``).
A filter cut to its live taps (``conv.live_taps``) runs here too, unmeasured (``conv_choice.variant``).
A batch-1 ResNet-18 imported from ONNX: 1.44 ms per inference against 2.66 with the im2col kernels
(one thread; ``benchmarks/RESULTS.md``, tenth session).

Measured before it was written, batch-1 layers against the im2col kernel: the copies cost a few
microseconds and the compiled product about half of im2col's time or less (figures: benchmarks/RESULTS.md,
"Behind the code: numpy/conv_channels_last.py").

It is a candidate of the measured per-layer choice (``transformers/numpy/conv_choice.py``, ``channels_last``)
for a forward convolution without groups whose product has at most ``MAX_COLUMNS`` columns, where
numba and a float dtype are there.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ...ir import Axes, Op
from ...ir.conv import ConvArg, activation_roles, filter_roles
from ..kernels.context import Kernel, KernelContext, per_object
from ..kernels.contraction import is_constant
from ..kernels.conv import Epilogue, output_lengths
from ..kernels.windows import PaddedCopy
from . import narrow_gemm, runtime

MIN_LOOP_DEPTH = 256
"""Products shallower than this (``prod(F) * C``: the stem's 7x7x3 = 147, a 1x1 layer's C) run on BLAS, as
``w @ colᵀ`` (a transposed view, no copy): the loop's sixteen sums per block of four rows and four columns
are reduced across their vector lanes at the end, and with a short depth that is most of the work. Measured:
BLAS wins depths of 147 and 27, the loop 288 and 576. One column (a batch-1 layer of a 1x1 map) goes to the
loop too: it computes the column four times over but streams the filter faster than BLAS's GEMV (the
weights of a batch-1 ResNet-18 cycled as in an inference). Figures: benchmarks/RESULTS.md,
"Behind the code: numpy/conv_channels_last.py"."""

OWN_PADDED_BYTES = 1 << 18
"""A padded copy of at most this many bytes (a batch-1 layer's) is the kernel's own array, its borders zeroed
once; a bigger one is scratch shared with other kernels, its borders written on every call (~4 us of
slab assignments at batch 1)."""

PARALLEL_LOOP_MACS = 1 << 18
"""With several threads, a product of at least this many multiply-adds (~5 us at one thread) runs the loop on
numba's threads (``narrow_gemm.parallel_loop``). ResNet-18 at batch 1, two threads: see RESULTS (tenth
session)."""

MAX_COLUMNS = 256
"""Products of more columns (output positions times the batch) are not offered: the transposed col matrix
then leaves L2 (each block of four filter rows reads all of it) and BLAS's packed kernel is at its peak."""


def applies(x_axes: Axes, w_axes: Axes, arg: ConvArg, dtype: str, xp: Any, fshape: tuple[int, ...] | None = None
            ) -> bool:
    """True when a forward convolution of these operands has this form: NumPy arrays, a float dtype that the
    compiled loop takes (numba present, ``NG_KERNELS`` not ``numpy``), no groups, and at most ``MAX_COLUMNS``
    output positions times the batch (``fshape``: the filter's spatial lengths when it is cut to its live
    taps, ``conv.live_taps``)."""
    if xp.__name__ != "numpy" or arg.groups != 1 or not narrow_gemm.available(dtype):
        return False
    roles = activation_roles(x_axes, "conv")
    fshape = fshape or filter_roles(w_axes, "conv").spatial.lengths
    return math.prod(output_lengths(roles.spatial.lengths, fshape, arg)) * roles.batch.length <= MAX_COLUMNS


def _window_view(xp: Any, fshape: tuple[int, ...], arg: ConvArg, out_lengths: tuple[int, ...]) -> Any:
    """``fn(padded)``: a padded ``(*spatial, N, C)`` array as its strided ``(*out, N, *F, C)`` window view."""
    rank = len(fshape)
    window = tuple(d * (k - 1) + 1 for k, d in zip(fshape, arg.dilation))
    index = (*(slice(0, (m - 1) * s + 1, s) for m, s in zip(out_lengths, arg.strides)), slice(None), slice(None),
             *(slice(None, None, d) for d in arg.dilation))
    # sliding_window_view gives (*positions, N, C, *window): move C after the window
    order = (*range(rank + 1), *range(rank + 2, 2 * rank + 2), rank + 1)
    slide, axes = xp.lib.stride_tricks.sliding_window_view, tuple(range(rank))
    return lambda padded: slide(padded, window, axis=axes)[index].transpose(order)


def conv_into(x: Op, w: Op, arg: ConvArg, dtype: str, kc: KernelContext, fshape: tuple[int, ...] | None = None,
              taps: tuple = (), epilogue: Epilogue | None = None) -> Kernel:
    """``fn(out, xv, wv)``: the forward convolution into ``out`` ``[K, *out, N]`` (``applies`` must hold);
    with ``fshape`` and ``taps``, of the filter cut to ``wv[taps]`` (its live taps, ``conv.live_taps``) under
    the cut geometry ``arg``.

    With an ``epilogue`` (a fused op's bias, residual and relu after this head) it is ``fn(out, xv, wv,
    *inputs)``, and the compiled loop applies the steps to each sum as it stores it: one pass instead of the
    conv's and then the fused program's (three NumPy ufuncs over the output, ~6 us a layer at batch 1). On
    BLAS (a shallow product) ``epilogue.finish`` runs after the product."""
    xp = kc.xp
    roles = activation_roles(x.axes, "conv")
    wr = filter_roles(w.axes, "conv")
    c, n, lengths = roles.channel.length, roles.batch.length, roles.spatial.lengths
    fshape, k = fshape or wr.spatial.lengths, wr.out_channels.length
    rank = len(lengths)
    out_lengths = output_lengths(lengths, fshape, arg)
    columns, depth = math.prod(out_lengths) * n, math.prod(fshape) * c
    padded_shape = (*(length + p[0] + p[1] for length, p in zip(lengths, arg.padding)), n, c)
    pad = PaddedCopy(padded_shape, range(rank), arg.padding, 0.0)
    # the input's axes as (*spatial, N, C), the filter's [Ci, *F, K] as [K, *F, Ci]
    to_last = (*roles.perm[1:rank + 1], roles.perm[rank + 1], roles.perm[0])
    filter_order = (rank + 1, *range(1, rank + 1), 0)
    col_shape = (*out_lengths, n, *fshape, c)
    window = _window_view(xp, fshape, arg, out_lengths)
    # the padded copy is the kernel's own when small (its zero borders are written once, its window view made
    # once), else shared scratch
    own = math.prod(padded_shape) * xp.dtype(dtype).itemsize <= OWN_PADDED_BYTES
    kept = xp.zeros(padded_shape, dtype=dtype) if own else None
    inside, kept_windows = (kept[pad.interior], window(kept)) if own else (None, None)
    windows = per_object(window)
    shaped = per_object(lambda flat: (flat.reshape(col_shape), flat.reshape(columns, depth)))
    result_of = per_object(lambda out: out.reshape(k, columns))

    def matrix(wv):
        return xp.ascontiguousarray(wv[taps].transpose(filter_order), dtype=dtype).reshape(k, depth)

    def transposed(wv):
        return xp.ascontiguousarray(held(wv).T)

    held = per_object(matrix) if is_constant(w) else matrix
    held_t = per_object(transposed) if is_constant(w) else transposed
    matmul = kc.runner.matmul(k * depth * columns)
    blas = depth < MIN_LOOP_DEPTH
    # on BLAS with more columns than filter rows (the stem: [64, 147] @ [147, 256]) the product is computed
    # transposed, col @ filterᵀ (50 against 64 us there), and stored back transposed through the epilogue
    wide = blas and columns >= k
    views = kc.scratch().request(([] if own else [(padded_shape, dtype)]) + [((columns * depth,), dtype)]
                                 + ([((columns * k,), dtype)] if wide else []))
    steps = tuple(step for step, _ in epilogue.steps) if epilogue is not None else ()
    in_kernel = epilogue is not None and (wide or not blas)  # applied by the loop or the transposed store
    gemm = narrow_gemm.compiled(dtype, steps if in_kernel and not blas else ())
    store = narrow_gemm.transposed_store(dtype, steps if in_kernel else ()) if wide else None
    finish = epilogue.finish if epilogue is not None and not in_kernel else None
    at = {step: i for step, i in epilogue.steps} if epilogue is not None else {}
    bias_at, res_at = at.get("bias"), at.get("add")
    vector = per_object(lambda b: b[(slice(None),) + (0,) * (b.ndim - 1)])  # a broadcast bias's [K] values
    unused = (xp.zeros(1, dtype=dtype), xp.zeros((1, 1), dtype=dtype))  # for the steps a kernel does not have
    # the filter's rows shared out over threads (each streams its share) when worth it: numba's OpenMP team
    # from PARALLEL_LOOP_MACS, else the runtime's workers (a costlier hand-off) from MIN_PARALLEL_FLOPS
    workers, macs = runtime.threads(), k * depth * columns
    team = narrow_gemm.parallel_loop(dtype, steps if in_kernel else (), workers) \
        if not blas and workers > 1 and macs >= PARALLEL_LOOP_MACS else None
    blocks = -(-k // 4)
    parts = [(4 * a, min(k, 4 * b)) for a, b in runtime.split(blocks, workers)] \
        if team is None and macs >= runtime.MIN_PARALLEL_FLOPS else [(0, k)]

    def epilogue_arrays(inputs):
        """This call's bias vector and residual matrix (read only), placeholders for the steps not there."""
        bias = vector(inputs[bias_at]) if bias_at is not None else unused[0]
        res = inputs[res_at].reshape(k, columns) if res_at is not None else unused[1]
        return bias, res

    def by_rows(wt, cols, result, extra):
        """The loop, each worker over its rows of the filter (and of the output, bias and residual)."""
        if team is not None:
            team(wt, cols, result, *extra)
        elif len(parts) == 1:
            gemm(wt, cols, result, *extra)
        else:
            runtime.run([functools.partial(gemm, wt[a:b], cols, result[a:b],
                                           *(e[a:b] if e.shape[0] == k else e for e in extra)) for a, b in parts])

    def conv_channels_last_kernel(out, xv, wv, *inputs):
        buffers = views()
        if own:
            flat = buffers[0]
            xp.copyto(inside, xv.transpose(to_last), casting="unsafe")
            source = kept_windows
        else:
            padded, flat = buffers[:2]
            source = windows(pad(xp, padded, xv.transpose(to_last)))
        col, cols = shaped(flat)
        xp.copyto(col, source)
        result = result_of(out)
        extra = epilogue_arrays(inputs) if in_kernel else ()
        if wide:
            product = buffers[-1].reshape(columns, k)
            matmul(cols, held_t(wv), product)
            store(product, result, *(extra or unused))
        elif blas:
            matmul(held(wv), cols.T, result)
        else:
            by_rows(held(wv), cols, result, extra)
        if finish is not None:
            finish(out, *inputs)
        return out

    return conv_channels_last_kernel
