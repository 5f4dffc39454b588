"""Convolution one image at a time: the batch-outermost layout (NCHW) a layer may compute in.

The im2col kernels (``conv.py``) compute batch innermost, ``(C, *spatial, N)``: a col block holds
every image's columns of some output rows, and one GEMM multiplies them all. Here the batch is
outermost. Each image is copied (padded, in the computation's dtype, from any axes order) into a
worker's own ``(C, *padded)`` buffer; its col matrix ``(C * prod(F), positions)`` is one copy from a
window view of that buffer, whose innermost runs are output rows (not batches of N); one GEMM gives
the image's ``(K, positions)``, stored in its column of the output ``[K, *out, N]``. The filter
gradient sums ``col_n @ dY_nᵀ`` over the images, one sum per worker. The images are split over the
runtime's workers, each with its own buffers.

Which layout a layer computes in is chosen per layer by measurement, with Winograd where it applies
(``transformers/numpy/conv_choice.py``, recorded in ``conv_choices.json``). The data gradient has no
per-image form: it stays batch innermost (im2col or Winograd). Batch 1 is the same layout either way,
so this is not offered there.

Measured before it was written, a NumPy prototype against the im2col kernel with input batch last
(CHWN) and batch first (NCHW) (figures: benchmarks/RESULTS.md, "Behind the code: numpy/conv_image.py"): the
batch-innermost layout wins most layers, and per image wins small batches, or small channel counts whose
input comes batch first (an imported model's first layer): the reason to measure per layer.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ...ir import Axes, Op
from ...ir.conv import ConvArg, activation_roles, filter_roles
from ..kernels.context import Kernel, KernelContext, Runner, per_object
from ..kernels.contraction import is_constant
from ..kernels.conv import filter_matrix, held_filter, is_pointwise, output_lengths, window_view
from ..kernels.windows import PaddedCopy
from . import runtime


def applies(x_axes: Axes, xp: Any) -> bool:
    """True when a convolution of an activation with ``x_axes`` has a per-image form worth measuring: NumPy
    arrays and a batch of 2 or more."""
    return xp.__name__ == "numpy" and activation_roles(x_axes, "conv").batch.length > 1


class ImageCols:
    """The col matrix of one image at a time, in each worker's own buffers (arguments as ``conv.Im2col``'s; the
    image is always copied, padded, into the computation's dtype)."""

    def __init__(self, xp: Any, x_axes: Axes, fshape: tuple[int, ...], arg: ConvArg, dtype: str) -> None:
        roles = activation_roles(x_axes, "conv")
        self.xp, self.perm = xp, roles.perm
        c, lengths = roles.channel.length, roles.spatial.lengths
        rank = len(lengths)
        self.images = roles.batch.length
        self.out_lengths = output_lengths(lengths, fshape, arg)
        self.positions = math.prod(self.out_lengths)
        self.rows = c * math.prod(fshape)
        self.col_shape = (c, *fshape, *self.out_lengths)
        self.pointwise = is_pointwise(fshape, arg)
        padded_shape = (c, *(length + p[0] + p[1] for length, p in zip(lengths, arg.padding)))
        self.pad = PaddedCopy(padded_shape, range(1, rank + 1), arg.padding, 0.0)
        self.parts = runtime.split(self.images, runtime.threads())
        self.specs = [(padded_shape, dtype)] * len(self.parts)
        if not self.pointwise:
            self.specs += [((self.rows * self.positions,), dtype)] * len(self.parts)
        view = window_view(xp, fshape, arg, self.out_lengths, batch=False)
        self._views = [per_object(view) for _ in self.parts]  # one per worker: each keeps its buffer's view

    def image(self, xi: Any, n: int, buffers: list[Any], worker: int) -> Any:
        """Image ``n`` of ``xi`` (the input as ``(C, *spatial, N)``) as its ``(rows, positions)`` col matrix."""
        padded = self.pad(self.xp, buffers[worker], xi[..., n])
        if self.pointwise:
            return padded.reshape(self.rows, -1)
        col = buffers[len(self.parts) + worker].reshape(self.col_shape)
        self.xp.copyto(col, self._views[worker](padded))
        return col.reshape(self.rows, -1)


def _gemm(runner: Runner, workers: int) -> Any:
    """The GEMM of a worker's image: the runtime's (split over its workers when big) with one worker, else one
    BLAS call in the worker's thread."""
    return runner.matmul() if workers == 1 else runner.product()


def conv_into(x: Op, w: Op, arg: ConvArg, dtype: str, kc: KernelContext) -> Kernel:
    """``fn(out, xv, wv)``: the forward convolution into ``out`` ``[K, *out, N]``, an image at a time."""
    xp = kc.xp
    wr = filter_roles(w.axes, "conv")
    cols = ImageCols(xp, x.axes, wr.spatial.lengths, arg, dtype)
    k, groups = wr.out_channels.length, arg.groups
    rows = cols.rows // groups
    workers = len(cols.parts)
    results = [((k, cols.positions), dtype)] * workers
    views = kc.scratch().request(cols.specs + results)
    gemm = _gemm(kc.runner, workers)
    held = held_filter(xp, (), rows, k, groups, dtype, True) if is_constant(w) else None

    def conv_image_kernel(out, xv, wv):
        buffers = views()
        wt = held(wv) if held is not None else filter_matrix(wv.reshape(rows, k).astype(dtype, copy=False), groups)
        xi, o = xv.transpose(cols.perm), out.reshape(k, cols.positions, cols.images)

        def part(worker: int) -> None:
            first, stop = cols.parts[worker]
            result = buffers[len(cols.specs) + worker]
            for n in range(first, stop):
                col = cols.image(xi, n, buffers, worker)
                if groups == 1:
                    gemm(wt, col, result)
                else:
                    xp.matmul(wt, col.reshape(groups, rows, -1), out=result.reshape(groups, k // groups, -1))
                o[:, :, n] = result

        runtime.run([functools.partial(part, w) for w in range(workers)])
        return out

    return conv_image_kernel


def bprop_filter(op: Op, kc: KernelContext) -> Kernel:
    """dW = sum over the images of ``col_n @ dY_nᵀ``, one sum per worker (no groups: ``conv_choice`` offers it
    only for ``groups == 1``)."""
    xp, dtype, arg = kc.xp, kc.dtype_of(op), op.arg
    x, dy = op.src
    wr = filter_roles(op.axes, "conv_bprop_filter")
    cols = ImageCols(xp, x.axes, wr.spatial.lengths, arg, dtype)
    k, rows, workers = wr.out_channels.length, cols.rows, len(cols.parts)
    dy_perm = activation_roles(dy.axes, "conv_bprop_filter").perm
    first = len(cols.specs)
    # per worker: dY of an image (K, positions), its sum (worker 0 sums into the output), one image's product
    extra = [((k, *cols.out_lengths), dtype)] * workers + [((rows, k), dtype)] * (2 * workers)
    views = kc.scratch().request(cols.specs + extra)
    matmul = _gemm(kc.runner, workers)

    def conv_bprop_filter_image_kernel(out, xv, dyv):
        buffers = views()
        xi, dyi = xv.transpose(cols.perm), dyv.transpose(dy_perm)
        total = out.reshape(rows, k)

        def part(worker: int) -> None:
            start, stop = cols.parts[worker]
            dyn = buffers[first + worker]
            acc = total if worker == 0 else buffers[first + workers + worker]
            product = buffers[first + 2 * workers + worker]
            for n in range(start, stop):
                col = cols.image(xi, n, buffers, worker)
                xp.copyto(dyn, dyi[..., n], casting="unsafe")
                dest = acc if n == start else product
                matmul(col, dyn.reshape(k, -1).T, dest)
                if n != start:
                    acc += dest

        runtime.run([functools.partial(part, w) for w in range(workers)])
        for worker in range(1, workers):
            total += buffers[first + workers + worker]
        return out

    return conv_bprop_filter_image_kernel
