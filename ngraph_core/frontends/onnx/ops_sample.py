"""Converters: sampling an image at run-time coordinates (GridSample, RoiAlign) and the grids (AffineGrid).

``GridSample``'s grid is usually a run-time value, so unlike ``Resize`` its weights cannot
be computed at import time: the converter builds them in the graph, per spatial dim:

1. the normalized coordinate in ``[-1, 1]`` mapped to a pixel position (``align_corners``);
2. positions outside the image clamped (``border``) or mirrored (``reflection``);
3. the neighbours (1 for nearest, 2 for linear, 4 for cubic) and their weights;

then every combination of neighbours across the dims is one ``gather_elements`` on the
image with its spatial dims flattened, scaled by the product of the weights (zero for a
neighbour outside the image in ``zeros`` padding) and summed. It follows the ONNX
reference implementation step by step (opset 16 names ``bilinear`` / ``bicubic`` too).

``RoiAlign`` builds its bilinear samples the same way from run-time rois (separable per
axis, four corners gathered with ``gather_nd`` from the roi's image), then averages or
takes the maximum per output bin. ``sampling_ratio=0`` sizes each roi's sample grid from
the roi itself, so the rois must then be static (the grid is padded to the largest and
masked).

Example:
    >>> # AffineGrid(theta [N, 2, 3], size [N, C, H, W]) -> grid [N, H, W, 2]; GridSample(x, grid) -> [N, C, H, W]
"""

from __future__ import annotations

import itertools

import numpy as np

from ... import api
from .errors import OnnxError
from .ops_shape import int_list
from .registry import converter
from .tensor import shape_of

MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear", "cubic": "cubic", "bicubic": "cubic"}
PADDINGS = ("zeros", "border", "reflection")
CUBIC_A = -0.75


def base_coordinates(n: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates in ``[-1, 1]`` of the ``n`` pixel centres (or corners) of one dim."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.array([-1.0])
    return (2.0 * np.arange(n) + 1.0) / n - 1.0


@converter("AffineGrid", since=20)
def affine_grid(ctx, node, inputs):
    """The sampling grid ``[N, *spatial, k]`` of the affine maps ``theta [N, k, k + 1]`` over an image of ``size``.

    Raises:
        OnnxError: ``size`` not ``[N, C, H, W]`` / ``[N, C, D, H, W]`` matching theta.
    """
    theta = ctx.as_op(inputs[0])
    size = int_list(ctx, inputs[1], "AffineGrid's size")
    n, k, k1 = shape_of(theta)
    spatial = size[2:]
    if len(spatial) != k or k1 != k + 1 or size[0] != n:
        raise OnnxError(f"AffineGrid node {node.name!r}: theta {shape_of(theta)} does not match size {size}; "
                        "hint: 2-D needs theta [N, 2, 3] and size [N, C, H, W], 3-D theta [N, 3, 4]")
    align = bool(node.attr("align_corners", 0))
    axes = [base_coordinates(d, align) for d in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial dim, each of shape spatial
    homogeneous = np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(int(np.prod(spatial)))])  # [k+1, P]
    cols, points = ctx.fresh([k + 1, homogeneous.shape[1]])
    base = api.constant(homogeneous.astype(theta.dtype), axes=[cols, points])
    grid = api.dot(api.cast_axes(theta, [theta.axes[0], theta.axes[1], cols]), base)  # [N, k, P]
    grid = api.axes_with_order(grid, [grid.axes[0], points, grid.axes[1]])
    return ctx.reshape(grid, [n, *spatial, k])


def _bool(x):
    return x if x.dtype == "bool" else api.cast(x, "bool")


def reflect(v, lo: float, hi: float):
    """``v`` mirrored at ``lo`` and ``hi`` (repeatedly) until it lies between them, as the reference does."""
    span = hi - lo
    below, above = _bool(api.less(v, lo)), _bool(api.greater(v, hi))
    dx = api.where(below, lo - v, v - hi)
    folds = api.floor(dx / span)
    rest = dx - folds * span
    even = _bool(api.equal(api.mod(folds, 2.0), 0.0))
    from_below = api.where(even, rest + lo, hi - rest)
    from_above = api.where(even, hi - rest, rest + lo)
    return api.where(below, from_below, api.where(above, from_above, v))


def cubic_weights(t) -> list:
    """Keys' cubic weights (a = -0.75) of the neighbours at -1, 0, 1, 2 for the fraction ``t``."""
    a = CUBIC_A

    def far(x):
        return ((x * a - 5 * a) * x + 8 * a) * x - 4 * a

    def near(x):
        return (x * (a + 2) - (a + 3)) * x * x + 1
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def neighbours(x, mode: str) -> list[tuple]:
    """(integer position op, weight op or None) of each neighbour of the pixel positions ``x``."""
    if mode == "nearest":
        return [(api.cast(x, "int64"), None)]
    base = api.floor(x)
    t = x - base
    base = api.cast(base, "int64")
    if mode == "linear":
        return [(base, 1 - t), (base + 1, t)]
    return [(base + offset, w) for offset, w in zip((-1, 0, 1, 2), cubic_weights(t))]


def fetch_index(i, length: int, padding: str, lo: float, hi: float):
    """(an in-range position, a validity mask or None) for integer positions ``i`` under ``padding``."""
    if padding == "zeros":
        valid = api.logical_and(_bool(api.greater_equal(i, 0)), _bool(api.less(i, length)))
        return api.where(valid, i, 0), valid
    if padding == "border":
        return api.minimum(api.maximum(i, 0), length - 1), None
    mirrored = reflect(api.cast(i, "float64"), lo, hi)
    return api.cast(api.floor(mirrored + 0.5), "int64"), None


@converter("GridSample", since=16)
def grid_sample(ctx, node, inputs):
    """The input ``[N, C, *spatial]`` sampled at the normalized coordinates of ``grid [N, *out, r]``.

    Raises:
        OnnxError: an unknown mode or padding_mode, or a grid that does not match the input.
    """
    x, grid = ctx.as_op(inputs[0]), ctx.as_op(inputs[1])
    dims, gdims, who = shape_of(x), shape_of(grid), f"GridSample node {node.name!r}"
    mode = MODES.get(node.attr("mode", "linear" if node.opset >= 20 else "bilinear"))
    padding = node.attr("padding_mode", "zeros")
    spatial, out = dims[2:], gdims[1:-1]
    if mode is None or padding not in PADDINGS or gdims[0] != dims[0] or gdims[-1] != len(spatial):
        raise OnnxError(f"{who}: mode {node.attr('mode', None)!r}, padding_mode {padding!r}, input {dims} and grid "
                        f"{gdims}; hint: expected modes {sorted(MODES)}, paddings {PADDINGS} and a grid "
                        f"[N, *out, {len(spatial)}]")
    align = bool(node.attr("align_corners", 0))
    per_dim = []
    for i, length in enumerate(spatial):  # the grid's last dim lists x (the last spatial dim) first
        g = api.tensor_slice(grid, [slice(None)] * (len(gdims) - 1) + [len(spatial) - 1 - i])
        g = api.cast(g, "float64")
        pos = (g + 1) / 2 * (length - 1) if align else ((g + 1) * length - 1) / 2
        if mode == "nearest":
            pos = api.round(pos)
        lo, hi = (0.0, length - 1.0) if align else (-0.5, length - 0.5)
        outside = api.logical_or(_bool(api.less(pos, lo)), _bool(api.greater(pos, hi)))
        if padding == "border":
            pos = api.where(outside, api.minimum(api.maximum(pos, 0.0), length - 1.0), pos)
        elif padding == "reflection":
            pos = reflect(pos, lo, hi)
        per_dim.append([(*fetch_index(idx, length, padding, lo, hi), w) for idx, w in neighbours(pos, mode)])
    n, c, points = dims[0], dims[1], int(np.prod(out, dtype=np.int64))
    flat_x = ctx.reshape(x, (n, c, int(np.prod(spatial, dtype=np.int64))))
    strides = [int(np.prod(spatial[i + 1:], dtype=np.int64)) for i in range(len(spatial))]
    out_axes, total = ctx.fresh((n, c, points)), None
    for combo in itertools.product(*per_dim):
        index, weight = None, None
        for (idx, valid, w), stride in zip(combo, strides):
            index = idx * stride if index is None else index + idx * stride
            if valid is not None:
                w = api.cast(valid, "float64") if w is None else w * api.cast(valid, "float64")
            weight = w if weight is None else (weight if w is None else weight * w)
        picked = _sample(ctx, flat_x, index, out_axes)
        if weight is not None:
            picked = picked * ctx.expand(ctx.reshape(api.cast(weight, x.dtype), (n, 1, points)), out_axes)
        total = picked if total is None else total + picked
    return ctx.reshape(total, (n, c, *out))


def _sample(ctx, flat_x, index, out_axes):
    """``flat_x [N, C, S]`` read at the flat positions ``index [N, *out]`` for every channel, on ``out_axes``."""
    n, _, points = out_axes.lengths
    index = ctx.expand(ctx.reshape(index, (n, 1, points)), out_axes)
    return api.gather_elements(flat_x, index, 2)


def _roi_axis(ctx, start, size, pooled: int, grid, length: int, dtype: str):
    """One spatial axis of RoiAlign's samples: ``[R, pooled, G]`` low / high positions, fractions and validity.

    ``grid`` is the samples per bin: an int, or a static ``[R]`` array when it adapts to each roi (then
    G is its maximum and ``mask [R, 1, G]`` marks the samples a roi really has).
    """
    g = int(np.max(grid)) if np.ndim(grid) else int(grid)
    r = shape_of(start)[0]
    step = size / pooled
    bins = np.arange(pooled, dtype=dtype).reshape(1, pooled, 1)
    offsets = (np.arange(g) + 0.5).astype(dtype).reshape(1, 1, g)
    per_roi = np.asarray(grid, dtype=dtype).reshape(-1, 1, 1) if np.ndim(grid) else np.asarray(grid, dtype=dtype)
    start3, step3 = ctx.reshape(start, (r, 1, 1)), ctx.reshape(step, (r, 1, 1))
    start3, step3, bins, offsets, per_roi = ctx.broadcast(start3, step3, bins, offsets, per_roi, dtype=dtype)
    c = start3 + bins * step3 + offsets * step3 / per_roi
    valid = api.logical_and(_bool(api.greater_equal(c, -1.0)), _bool(api.less_equal(c, float(length))))
    c = api.maximum(c, 0.0)
    edge = _bool(api.greater_equal(api.floor(c), length - 1.0))
    low = api.where(edge, length - 1.0, api.floor(c))
    c = api.where(edge, low, c)
    high = api.where(edge, low, low + 1.0)
    mask = None
    if np.ndim(grid):
        mask = ctx.as_op(np.arange(g)[None, None, :] < np.asarray(grid).reshape(-1, 1, 1))
    return api.cast(low, "int64"), api.cast(high, "int64"), c - low, valid, mask


@converter("RoiAlign", since=10)
def roi_align(ctx, node, inputs):
    """Each roi of ``rois [R, 4]`` (x1, y1, x2, y2) in image ``batch_indices[r]`` pooled (avg or max) to
    ``[R, C, output_height, output_width]`` from bilinear samples, ``sampling_ratio`` per bin and dim.

    ``sampling_ratio=0`` adapts the count to each roi's size, so the rois must then be static.
    """
    x, who = ctx.as_op(inputs[0]), f"RoiAlign node {node.name!r}"
    n, c, h, w = shape_of(x)
    oh, ow = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
    ratio, scale = int(node.attr("sampling_ratio", 0)), float(node.attr("spatial_scale", 1.0))
    mode = node.attr("mode", "avg")
    half_pixel = node.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel" and node.opset >= 16
    if mode not in ("avg", "max") or shape_of(inputs[1])[-1] != 4:
        raise OnnxError(f"{who}: mode {mode!r}, rois {shape_of(inputs[1])}; hint: expected mode avg or max and "
                        "rois [R, 4]")
    rois = ctx.static(inputs[1], "RoiAlign's rois (sampling_ratio=0 adapts to them)") if ratio <= 0 else inputs[1]
    rois = ctx.as_op(rois, dtype=x.dtype)  # the image's precision, as the reference and onnxruntime compute
    r = shape_of(rois)[0]
    corner = [ctx.reshape(api.tensor_slice(rois, [slice(None), i]), (r,)) * scale - (0.5 if half_pixel else 0.0)
              for i in range(4)]
    sizes = [corner[2] - corner[0], corner[3] - corner[1]]  # width, height
    if not half_pixel:
        sizes = [api.maximum(s, 1.0) for s in sizes]
    grids = [ratio, ratio]
    if ratio <= 0:
        grids = [np.ceil(ctx.evaluate([s])[0] / p).astype(int) for s, p in zip(sizes, (ow, oh))]
    ylow, yhigh, ly, vy, my = _roi_axis(ctx, corner[1], sizes[1], oh, grids[1], h, x.dtype)
    xlow, xhigh, lx, vx, mx = _roi_axis(ctx, corner[0], sizes[0], ow, grids[0], w, x.dtype)
    gh, gw = shape_of(ly)[2], shape_of(lx)[2]
    samples = ctx.fresh((r, oh, gh, ow, gw))
    on_y, on_x = (r, oh, gh, 1, 1), (r, 1, 1, ow, gw)

    def spread(v, shape):  # a per-axis tensor on the [R, oh, gh, ow, gw] sample grid
        return ctx.expand(ctx.reshape(ctx.as_op(v), shape), samples)
    inside = api.cast(api.logical_and(spread(vy, on_y), spread(vx, on_x)), x.dtype)  # samples off the image read 0
    exists = None
    if my is not None:  # adaptive grids: samples past a roi's own count do not exist
        exists = api.logical_and(spread(my, (r, 1, gh, 1, 1)), spread(mx, (r, 1, 1, 1, gw)))
        inside = inside * api.cast(exists, x.dtype)
    batch = spread(ctx.as_op(inputs[2], dtype="int64"), (r, 1, 1, 1, 1))
    pair = ctx.fresh([1])[0]
    table = ctx.transpose(ctx.reshape(x, (n, c, h * w)), (0, 2, 1))  # [N, H*W, C]
    terms = []
    for yi, wy in ((ylow, 1 - ly), (yhigh, ly)):
        for xi, wx in ((xlow, 1 - lx), (xhigh, lx)):
            pos = spread(yi, on_y) * w + spread(xi, on_x)
            index = api.concat_along_axis([api.expand_dims(v, pair, 5) for v in (batch, pos)], pair.name)
            weight = api.cast(spread(wy, on_y) * spread(wx, on_x), x.dtype) * inside
            terms.append(api.gather_nd(table, index) * weight)  # [R, oh, gh, ow, gw, C]
    grid_axes = [samples[2], samples[4]]
    if mode == "avg":
        total = api.sum(terms[0] + terms[1] + terms[2] + terms[3], reduction_axes=grid_axes)
        count = np.maximum(np.asarray(grids[0]) * np.asarray(grids[1]), 1).astype(x.dtype)
        count = api.constant(count, axes=[samples[0]]) if count.ndim else float(count)
        pooled = total / count
    else:
        best = api.maximum(api.maximum(terms[0], terms[1]), api.maximum(terms[2], terms[3]))
        if exists is not None:
            best = api.where(api.broadcast(exists, best.axes), best, float(np.finfo(x.dtype).min))
        pooled = api.max(best, reduction_axes=grid_axes)
    return ctx.rename(api.axes_with_order(pooled, [samples[0], pooled.axes[-1], samples[1], samples[3]]))
