"""Direct NumPy references for convolution, transposed convolution and pooling (tests only).

They loop over window taps and contract channels with ``einsum`` — a different algorithm
from the im2col/GEMM kernels — on activations laid out ``(C, *spatial, N)`` and filters
``(Ci, *filter_spatial, K)``. Padding is ``(before, after)`` per spatial axis.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def _taps(fshape: Sequence[int]) -> itertools.product:
    return itertools.product(*(range(k) for k in fshape))


def conv(x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[tuple[int, int]],
         dilation: Sequence[int], groups: int = 1) -> np.ndarray:
    """Cross-correlation, PyTorch's conv semantics."""
    fshape, k = w.shape[1:-1], w.shape[-1]
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    out_lengths = [(n - d * (f - 1) - 1) // s + 1 for n, f, s, d in zip(xp.shape[1:-1], fshape, strides, dilation)]
    out = np.zeros((k, *out_lengths, x.shape[-1]))
    cg, kg = x.shape[0] // groups, k // groups
    for tap in _taps(fshape):
        window = tuple(slice(t * d, t * d + (m - 1) * s + 1, s)
                       for t, d, m, s in zip(tap, dilation, out_lengths, strides))
        patch = xp[(slice(None), *window, slice(None))]
        for g in range(groups):
            wt = w[(slice(None), *tap, slice(g * kg, (g + 1) * kg))]
            out[g * kg:(g + 1) * kg] += np.einsum("ck,c...->k...", wt, patch[g * cg:(g + 1) * cg])
    return out


def deconv(x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[tuple[int, int]],
           output_padding: Sequence[int], dilation: Sequence[int], groups: int = 1) -> np.ndarray:
    """Transposed convolution; ``w`` is ``(Co, *filter_spatial, C)`` (the convolution's filter)."""
    fshape, co = w.shape[1:-1], w.shape[0]
    lengths = x.shape[1:-1]
    full = [(n - 1) * s + d * (f - 1) + 1 + e
            for n, s, d, f, e in zip(lengths, strides, dilation, fshape, output_padding)]
    out = np.zeros((co * groups, *full, x.shape[-1]))
    cg = x.shape[0] // groups
    for tap in _taps(fshape):
        window = tuple(slice(t * d, t * d + (n - 1) * s + 1, s) for t, d, n, s in zip(tap, dilation, lengths, strides))
        for g in range(groups):
            wt = w[(slice(None), *tap, slice(g * cg, (g + 1) * cg))]
            out[(slice(g * co, (g + 1) * co), *window, slice(None))] += np.einsum("ok,k...->o...", wt,
                                                                                   x[g * cg:(g + 1) * cg])
    crop = tuple(slice(b, f - a) for (b, a), f in zip(pads, full))
    return out[(slice(None), *crop, slice(None))]


def pool_length(n: int, k: int, s: int, p: int, ceil_mode: bool) -> int:
    out = int(np.ceil((n + 2 * p - k) / s) if ceil_mode else np.floor((n + 2 * p - k) / s)) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def pool(x: np.ndarray, op: str, fshape: Sequence[int], strides: Sequence[int], pads: Sequence[int],
         ceil_mode: bool = False, count_include_pad: bool = True) -> np.ndarray:
    """Max or average pooling over the spatial axes of ``(C, *spatial, N)``, PyTorch's rules."""
    lengths = x.shape[1:-1]
    outs = [pool_length(n, k, s, p, ceil_mode) for n, k, s, p in zip(lengths, fshape, strides, pads)]
    out = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for pos in itertools.product(*(range(m) for m in outs)):
        starts = [o * s - p for o, s, p in zip(pos, strides, pads)]
        ends = [min(b + k, n + p) for b, k, n, p in zip(starts, fshape, lengths, pads)]
        lo = [max(b, 0) for b in starts]
        hi = [min(e, n) for e, n in zip(ends, lengths)]
        region = x[(slice(None), *(slice(a, b) for a, b in zip(lo, hi)), slice(None))]
        axes = tuple(range(1, 1 + len(lengths)))
        if op == "max":
            value = region.max(axis=axes)
        else:
            size = np.prod([e - b for b, e in zip(starts, ends)]) if count_include_pad else \
                np.prod([b - a for a, b in zip(lo, hi)])
            value = region.sum(axis=axes) / size
        out[(slice(None), *pos, slice(None))] = value
    return out


def conv_filter_grad(x: np.ndarray, dy: np.ndarray, fshape: Sequence[int], strides: Sequence[int],
                     pads: Sequence[tuple[int, int]], dilation: Sequence[int]) -> np.ndarray:
    """d sum(conv(x, w) * dy) / dw, ``(C, *fshape, K)`` (one group)."""
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    out_lengths = dy.shape[1:-1]
    dw = np.zeros((x.shape[0], *fshape, dy.shape[0]))
    for tap in _taps(fshape):
        window = tuple(slice(t * d, t * d + (m - 1) * s + 1, s)
                       for t, d, m, s in zip(tap, dilation, out_lengths, strides))
        patch = xp[(slice(None), *window, slice(None))]
        summed = tuple(range(1, patch.ndim))
        dw[(slice(None), *tap, slice(None))] = np.tensordot(patch, dy, axes=(summed, summed))
    return dw


def pool_grad(x: np.ndarray, dy: np.ndarray, op: str, fshape: Sequence[int], strides: Sequence[int],
              pads: Sequence[int], ceil_mode: bool = False, count_include_pad: bool = True) -> np.ndarray:
    """d sum(pool(x) * dy) / dx: max routes to each window's first maximum (row-major), avg spreads."""
    lengths = x.shape[1:-1]
    grad = np.zeros_like(x, dtype=np.float64)
    for pos in itertools.product(*(range(m) for m in dy.shape[1:-1])):
        starts = [o * s - p for o, s, p in zip(pos, strides, pads)]
        ends = [min(b + k, n + p) for b, k, n, p in zip(starts, fshape, lengths, pads)]
        lo = [max(b, 0) for b in starts]
        hi = [min(e, n) for e, n in zip(ends, lengths)]
        index = (slice(None), *(slice(a, b) for a, b in zip(lo, hi)), slice(None))
        g = dy[(slice(None), *pos, slice(None))]
        if op == "avg":
            size = np.prod([e - b for b, e in zip(starts, ends)]) if count_include_pad else \
                np.prod([b - a for a, b in zip(lo, hi)])
            grad[index] += g[(slice(None), *([None] * len(lengths)), slice(None))] / size
            continue
        region = x[index]
        flat = np.moveaxis(region, -1, 1).reshape(region.shape[0], region.shape[-1], -1)  # (C, N, window)
        first = flat.argmax(axis=-1)  # argmax returns the first maximum
        coords = np.unravel_index(first, region.shape[1:-1])
        c_idx, n_idx = np.indices(first.shape)
        target = (c_idx, *(a + c for a, c in zip(lo, coords)), n_idx)
        np.add.at(grad, target, g)
    return grad


def batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, axis: int) -> np.ndarray:
    """Training-form batch normalization: statistics over every axis but ``axis`` (biased variance)."""
    others = tuple(i for i in range(x.ndim) if i != axis)
    shape = [1] * x.ndim
    shape[axis] = -1
    mean, var = x.mean(axis=others, keepdims=True), x.var(axis=others, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)
