"""Convolution kernels: im2col + one GEMM per call (per group), col2im for the data gradient.

Internal layout: channels first, batch last, ``(C, *spatial, N)`` — neon's CHWN, the
layout activations have by default (``[C, H, W, N]``). Then

* **im2col** is one ``copyto`` from a ``sliding_window_view`` of the (padded) input into a
  ``(C, *F, *out, N)`` buffer: the innermost runs are N elements long and contiguous on
  both sides;
* the **forward GEMM** ``W(K, C*F) @ col(C*F, out*N)`` writes ``[K, *out, N]`` — the op's
  output layout — directly into the output buffer: no transpose anywhere;
* the **filter gradient** is ``col @ dYᵀ``, written straight into ``[Ci, *F, K]``;
* the **data gradient** is ``dcol = Wᵀ @ dY`` then col2im: one strided add per filter tap
  (R*S of them), each clipped to the taps' real input positions, so no padded buffer is
  zeroed or cropped, and the first tap that covers the whole input assigns instead of adds.

Inputs in another axes order are transposed into the internal layout by the same copy
that pads them; a 1x1 convolution with stride 1 and no padding skips im2col entirely.
Scratch (padded copies, col matrices) comes from the computation's shared workspace.

Measured 2026-11-24 on this machine (2 vCPUs, OpenBLAS, float32, batch 64, 3x3, pad 1, ms,
medians; standalone prototypes of these kernels, 2 threads):

====================  ======  ======  ====  ============================
layer                 layout  im2col  GEMM  data gradient
====================  ======  ======  ====  ============================
3x32x32 -> 32         CHWN    0.18    1.2   1.9 (col2im)
3x32x32 -> 32         NHWC    0.8     1.3   9.3
32x16x16 -> 64        CHWN    0.9     3.7   5.8 (clipped col2im)
32x16x16 -> 64        NHWC    2.0     4.4   17.5
====================  ======  ======  ====  ============================

For the data gradient, a full convolution of the padded gradient with the flipped filter
took 8.1 ms against col2im's 5.8 (its im2col over K*R*S rows moves more memory when
K >= C), so col2im is used. The filter gradient recomputes im2col from x rather than
keeping the forward's col alive across the step: that costs 0.2-0.9 ms above, and keeping
it would add a col buffer per layer to the step's live memory (37 MB for a 16-channel
32x32 layer at batch 64).

Through the compiler (``benchmarks/conv_layer.py``, ours/PyTorch, 2 threads): the first
layer's forward + filter gradient 3.6 / 1.9 ms; with the data gradient 4.4 / 4.5 ms; the
32x16x16 -> 64 layer with both gradients 15.3 / 9.7 ms (1 thread: 23.8 / 11.8). The GEMMs
of the first layer are memory-bound (col is 7 MB); im2col fused with the GEMM in blocks of
output rows (the block stays in cache) gained 10-30% on the forward in a prototype, and
was not consistently faster for the filter gradient — a candidate for the tuning pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...ir import Op, OpType
from ...ir.conv import ConvArg, activation_roles, filter_roles
from .context import Kernel, KernelContext
from .windows import PaddedCopy, is_identity, taps


class Im2col:
    """The im2col matrix ``(C, *F, *out, N)`` of one activation geometry.

    ``specs`` lists the scratch it needs (a padded copy, the col buffer); the kernel adds
    them to its one workspace request and passes the arrays back at run time.

    Args:
        xp: the array module.
        x: the activation op (any axes order; roles read by position).
        fshape: the filter's spatial lengths.
        arg: strides, padding, dilation.
        dtype: the computation dtype.
        x_dtype: the dtype ``x`` arrives in.
    """

    def __init__(self, xp: Any, x: Op, fshape: tuple[int, ...], arg: ConvArg, dtype: str, x_dtype: str) -> None:
        roles = activation_roles(x.axes, "conv")
        self.xp, self.perm = xp, roles.perm
        c, n, lengths = roles.channel.length, roles.batch.length, roles.spatial.lengths
        rank = len(lengths)
        self.out_lengths = tuple(
            (length + p[0] + p[1] - d * (k - 1) - 1) // s + 1
            for length, k, s, p, d in zip(lengths, fshape, arg.strides, arg.padding, arg.dilation))
        padded = any(p != (0, 0) for p in arg.padding)
        self.copy_in = padded or not is_identity(self.perm) or x_dtype != dtype
        self.pointwise = not padded and all(k == 1 for k in fshape) and all(s == 1 for s in arg.strides)
        self.shape = (c, *fshape, *self.out_lengths, n)
        self.specs: list[tuple[tuple[int, ...], str]] = []
        if self.copy_in:
            padded_shape = (c, *(length + p[0] + p[1] for length, p in zip(lengths, arg.padding)), n)
            self.pad = PaddedCopy(padded_shape, range(1, rank + 1), arg.padding, 0.0)
            self.specs.append((padded_shape, dtype))
        if not self.pointwise:
            self.specs.append((self.shape, dtype))
        self.window = tuple(d * (k - 1) + 1 for k, d in zip(fshape, arg.dilation))
        self.window_axes = tuple(range(1, rank + 1))
        # the window view is (C, *positions, N, *window): take every stride-th position and
        # every dilation-th window element, then order the axes as (C, *F, *out, N)
        self.index = (slice(None), *(slice(0, (m - 1) * s + 1, s) for m, s in zip(self.out_lengths, arg.strides)),
                      slice(None), *(slice(None, None, d) for d in arg.dilation))
        self.order = (0, *range(rank + 2, 2 * rank + 2), *range(1, rank + 1), rank + 1)
        self.sliding_window_view = xp.lib.stride_tricks.sliding_window_view

    def __call__(self, x: Any, buffers: list[Any]) -> Any:
        """The col matrix of ``x`` as a ``(C * prod(F), prod(out) * N)`` array (``buffers``: per ``specs``)."""
        source = self.pad(self.xp, buffers[0], x.transpose(self.perm)) if self.copy_in else x
        if self.pointwise:
            return source.reshape(self.shape[0], -1)
        col = buffers[-1]
        windows = self.sliding_window_view(source, self.window, axis=self.window_axes)
        self.xp.copyto(col, windows[self.index].transpose(self.order))
        return col.reshape(math.prod(self.shape[:1 + len(self.window)]), -1)


def _as_matrix(xp: Any, a: Any, perm: tuple[int, ...], rows: int, buffer: Any) -> Any:
    """``a`` in internal layout as a ``(rows, -1)`` matrix; copied into ``buffer`` when one is given
    (its axes are reordered or its dtype differs)."""
    if buffer is None:
        return a.reshape(rows, -1)
    xp.copyto(buffer, a.transpose(perm), casting="unsafe")
    return buffer.reshape(rows, -1)


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


def conv_into(x: Op, w: Op, arg: ConvArg, dtype: str, kc: KernelContext) -> Callable[[Any, Any, Any], Any]:
    """``fn(out, xv, wv)`` writing conv(xv, wv) (``x``'s and ``w``'s axes) into ``out`` ``[K, *out, N]``.

    The ``conv`` kernel, and the head of a ``fused`` op (``kernels/fused.py``).
    """
    xp = kc.xp
    wr = filter_roles(w.axes, "conv")
    im2col = Im2col(xp, x, wr.spatial.lengths, arg, dtype, kc.dtype_of(x))
    rows, k, groups = math.prod(w.axes.lengths[:-1]), wr.out_channels.length, arg.groups
    views = kc.scratch().request(im2col.specs)

    def conv_kernel(out, xv, wv):
        col = im2col(xv, views())
        w2 = wv.reshape(rows, k).astype(dtype, copy=False)
        out2 = out.reshape(k, -1)
        if groups == 1:
            xp.dot(w2.T, col, out=out2)
        else:
            wg = _grouped_weights(w2, groups).transpose(0, 2, 1)
            xp.matmul(wg, col.reshape(groups, rows, -1), out=out2.reshape(groups, k // groups, -1))
        return out

    return conv_kernel


def conv(op: Op, kc: KernelContext) -> Kernel:
    x, w = op.src
    return conv_into(x, w, op.arg, kc.dtype_of(op), kc)


def conv_bprop_filter(op: Op, kc: KernelContext) -> Kernel:
    xp, dtype, arg = kc.xp, kc.dtype_of(op), op.arg
    x, dy = op.src
    wr = filter_roles(op.axes, "conv_bprop_filter")
    im2col = Im2col(xp, x, wr.spatial.lengths, arg, dtype, kc.dtype_of(x))
    rows, k, groups = math.prod(op.axes.lengths[:-1]), wr.out_channels.length, arg.groups
    dy_roles = activation_roles(dy.axes, "conv_bprop_filter")
    scratch = _Scratch()
    col_part = scratch.extend(im2col.specs)
    dy_copy = scratch.add(dy_roles.canonical.lengths, dtype,
                          not is_identity(dy_roles.perm) or kc.dtype_of(dy) != dtype)
    grouped = scratch.add((groups, rows, k // groups), dtype, groups > 1)
    views = scratch.request(kc)

    def conv_bprop_filter_kernel(out, xv, dyv):
        buffers = views()
        col = im2col(xv, buffers[col_part])
        dy2 = _as_matrix(xp, dyv, dy_roles.perm, k, _pick(buffers, dy_copy))
        out2 = out.reshape(rows, k)
        if grouped is None:
            xp.dot(col, dy2.T, out=out2)
        else:
            g = buffers[grouped]
            n = col.shape[1]
            xp.matmul(col.reshape(groups, rows, n), dy2.reshape(groups, k // groups, n).transpose(0, 2, 1), out=g)
            xp.copyto(_grouped_weights(out2, groups), g)
        return out

    return conv_bprop_filter_kernel


def conv_bprop_data(op: Op, kc: KernelContext) -> Kernel:
    """dX = col2im(Wᵀ @ dY), written tap by tap into the input's positions (see the module docstring)."""
    xp, dtype, arg = kc.xp, kc.dtype_of(op), op.arg
    dy, w = op.src
    xr, wr = activation_roles(op.axes, "conv_bprop_data"), filter_roles(w.axes, "conv_bprop_data")
    dyr = activation_roles(dy.axes, "conv_bprop_data")
    fshape, lengths = wr.spatial.lengths, xr.spatial.lengths
    c, k, groups = xr.channel.length, wr.out_channels.length, arg.groups
    rows = math.prod(w.axes.lengths[:-1])  # Ci * prod(F)
    out_lengths = dyr.spatial.lengths
    pointwise = all(f == 1 for f in fshape) and all(s == 1 for s in arg.strides) and \
        all(p == (0, 0) for p in arg.padding)
    canonical = xr.canonical.lengths
    scratch = _Scratch()
    dy_copy = scratch.add(dyr.canonical.lengths, dtype, not is_identity(dyr.perm) or kc.dtype_of(dy) != dtype)
    dx_copy = scratch.add(canonical, dtype, not is_identity(xr.perm))
    dcol_buffer = scratch.add((c, *fshape, *out_lengths, xr.batch.length), dtype, not pointwise)
    views = scratch.request(kc)
    plan = taps(lengths, out_lengths, fshape, arg.strides, arg.dilation, [p[0] for p in arg.padding])
    first = next((t for t in plan if t.covers_in), None)
    steps = [((slice(None), *t.inp, slice(None)), (slice(None), *t.offsets, *t.out, slice(None)))
             for t in sorted(plan, key=lambda t: t is not first)]

    def gemm(dcol2, w2, dy2):
        if groups == 1:
            xp.dot(w2, dy2, out=dcol2)
        else:
            n = dy2.shape[1]
            xp.matmul(_grouped_weights(w2, groups), dy2.reshape(groups, k // groups, n),
                      out=dcol2.reshape(groups, rows, n))

    def conv_bprop_data_kernel(out, dyv, wv):
        buffers = views()
        dy2 = _as_matrix(xp, dyv, dyr.perm, k, _pick(buffers, dy_copy))
        w2 = wv.reshape(rows, k).astype(dtype, copy=False)
        dx = out if dx_copy is None else buffers[dx_copy]
        if pointwise:
            gemm(dx.reshape(c, -1), w2, dy2)
        else:
            dcol = buffers[dcol_buffer]
            gemm(dcol.reshape(c * math.prod(fshape), -1), w2, dy2)
            if first is None:
                dx[...] = 0
            for j, (dx_index, dcol_index) in enumerate(steps):
                if j == 0 and first is not None:
                    xp.copyto(dx, dcol[dcol_index])
                else:
                    dx[dx_index] += dcol[dcol_index]
        if dx_copy is not None:
            xp.copyto(out.transpose(xr.perm), dx)
        return out

    return conv_bprop_data_kernel


KERNELS = {
    OpType.CONV: conv,
    OpType.CONV_BPROP_DATA: conv_bprop_data,
    OpType.CONV_BPROP_FILTER: conv_bprop_filter,
}
