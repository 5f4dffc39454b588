"""Converters: ``Resize`` (opsets 10 to 19) and ``Upsample`` (7, 9) as separable per-dim resampling.

Every mode ONNX defines is linear in the input and separable by dim, so each resized dim
``d`` (input length ``n``, output length ``m``) becomes an ``m x n`` weight matrix computed
at import time by the ONNX reference's rules (``coordinate_transformation_mode``, the
``nearest`` / ``linear`` / ``cubic`` kernels, ``antialias``, ``exclude_outside``, edge
clamping), then applied in the graph:

* nearest (every row one 1): a ``gather`` of the chosen positions, exact for any dtype;
* linear / cubic: a ``dot`` of the input with the weights over dim ``d``.

``tf_crop_and_resize`` output positions that fall outside the input take
``extrapolation_value`` through a ``where`` over a static mask. Scales, sizes and roi must
be static (they fix the output's shape).

Example:
    >>> # Resize(x [1, 1, 2, 2], scales=[1, 1, 2, 3], mode="nearest") -> [1, 1, 4, 6]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ... import api
from .errors import OnnxError
from .ops_index import take
from .ops_shape import optional
from .registry import converter
from .tensor import normalize_axis, shape_of

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
FLOATS = ("float16", "float32", "float64")


# -- 1-D kernels: coefficients of the neighbours of source coordinates, as the ONNX reference --
# each maps the ratios ``[m]`` (a coordinate's distance past its left neighbour, in (0, 1]) to taps ``[m, n]``;
# vectorized over the output positions: an output dim of millions (a hostile ``sizes``) costs NumPy time, not a loop
def nearest_coeffs(mode: str, downsample: bool) -> Callable[[np.ndarray, float], np.ndarray]:
    """The two-tap nearest kernel: ``[1, 0]`` takes the left neighbour, ``[0, 1]`` the right one."""
    if mode == "simple":  # Resize-10 / Upsample: floor when enlarging, ceil when shrinking
        mode = "ceil" if downsample else "floor"

    def coeffs(ratio: np.ndarray, scale: float) -> np.ndarray:
        right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                 "floor": np.zeros(ratio.shape, bool), "ceil": np.ones(ratio.shape, bool)}[mode]
        right = right | (ratio == 1.0)  # on a neighbour: the right one (the coordinate itself)
        return np.stack([~right, right], axis=1).astype(np.float64)
    return coeffs


def linear_coeffs(antialias: bool) -> Callable[[np.ndarray, float], np.ndarray]:
    """The triangle kernel (widened by 1/scale when ``antialias`` and shrinking)."""
    def coeffs(ratio: np.ndarray, scale: float) -> np.ndarray:
        if not antialias:
            return np.stack([1 - ratio, ratio], axis=1)
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start)[None, :] - ratio[:, None]) * scale
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum(axis=1, keepdims=True)
    return coeffs


def cubic_coeffs(a: float, antialias: bool) -> Callable[[np.ndarray, float], np.ndarray]:
    """Keys' cubic kernel with coefficient ``a`` (widened by 1/scale when ``antialias`` and shrinking)."""
    def kernel(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x <= 1, near, np.where(x < 2, far, 0.0))

    def coeffs(ratio: np.ndarray, scale: float) -> np.ndarray:
        if not antialias:
            return kernel(np.stack([ratio + 1, ratio, 1 - ratio, 2 - ratio], axis=1))
        scale = min(scale, 1.0)
        start = int(np.floor(-2 / scale) + 1)
        c = kernel(scale * (np.arange(start, 2 - start)[None, :] - ratio[:, None]))
        return c / c.sum(axis=1, keepdims=True)
    return coeffs


def source_coordinates(mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """The input coordinate of each output position under ``coordinate_transformation_mode``."""
    y = np.arange(out_len, dtype=np.float64)
    out_width = scale * in_len
    if mode == "align_corners":
        return np.zeros(out_len) if out_width == 1 else y * (in_len - 1) / (out_width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_width == 1:
            return np.full(out_len, (end - start) * (in_len - 1) / 2) + start * (in_len - 1)
        return y * (end - start) * (in_len - 1) / (out_width - 1) + start * (in_len - 1)
    if mode == "pytorch_half_pixel":
        return np.full(out_len, -0.5) if out_width == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_width)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5  # half_pixel


def weights(in_len: int, out_len: int, scale: float, roi: tuple[float, float], coordinate_mode: str,
            coeffs: Callable[[np.ndarray, float], np.ndarray], exclude_outside: bool) -> tuple[np.ndarray, np.ndarray]:
    """The resampling matrix of one dim and which outputs fall outside the input, as the ONNX reference computes.

    Args:
        in_len, out_len: the dim's input and output lengths; scale: their ratio (or the policy's scale).
        roi: the dim's (start, end) region for ``tf_crop_and_resize``; coordinate_mode: the mapping.
        coeffs: the kernel, ``coeffs(ratios [m], scale)`` -> weights ``[m, taps]`` of the neighbours around
            each coordinate.
        exclude_outside: zero (and renormalise) the weights of neighbours outside the input.

    Returns:
        ``(matrix [out_len, in_len], extrapolated [out_len] bool)``; neighbours past an edge read the edge.

    Example:
        >>> m, _ = weights(2, 4, 2.0, (0, 1), "asymmetric", nearest_coeffs("floor", False), False)  # rows 0,0,1,1
    """
    x = source_coordinates(coordinate_mode, out_len, in_len, scale, roi)
    outside = (x < 0) | (x > in_len - 1) if coordinate_mode == "tf_crop_and_resize" else np.zeros(out_len, bool)
    matrix = np.zeros((out_len, in_len))
    if out_len == 0:
        return matrix, outside
    base = np.floor(x)
    ratio = np.where(x == base, 1.0, x - base)  # prefer the left pixel: ratio in (0, 1]
    c = np.asarray(coeffs(ratio, scale), dtype=np.float64)  # [m, n]
    n = c.shape[1]
    pad = math.ceil(n / 2)
    padded = x + pad
    p = np.floor(padded)
    frac = padded - p
    if n % 2 == 0:  # even taps: windows centred on half integers, ties to the left one
        start = np.where(frac == 0, p - n // 2, p - n // 2 + 1)
    else:
        start = p - (n - 1) // 2 + np.where(frac <= 0.5, 0, 1)
    idx = start.astype(np.int64)[:, None] + np.arange(n) - pad  # [m, n]
    if exclude_outside:
        c = np.where((idx < 0) | (idx >= in_len), 0.0, c)
        total = c.sum(axis=1, keepdims=True)
        c = c / np.where(total == 0, 1.0, total)
    np.add.at(matrix, (np.arange(out_len)[:, None], np.clip(idx, 0, in_len - 1)), c)
    return matrix, outside


def _attrs_for(node) -> dict:
    if node.op_type == "Upsample" or node.opset < 11:
        mode = node.attr("mode", "nearest")
        return {"mode": "linear" if mode in ("linear", "bilinear") else mode, "coordinate": "asymmetric",
                "nearest": "simple", "a": -0.75, "exclude": False, "extrapolation": 0.0, "antialias": False,
                "policy": "stretch"}
    return {"mode": node.attr("mode", "nearest"), "coordinate": node.attr("coordinate_transformation_mode",
                                                                          "half_pixel"),
            "nearest": node.attr("nearest_mode", "round_prefer_floor"), "a": float(node.attr("cubic_coeff_a", -0.75)),
            "exclude": bool(node.attr("exclude_outside", 0)), "extrapolation": float(node.attr("extrapolation_value",
                                                                                               0.0)),
            "antialias": bool(node.attr("antialias", 0)), "policy": node.attr("keep_aspect_ratio_policy", "stretch")}


def _plan(ctx, node, inputs, dims: tuple[int, ...], opts: dict) -> tuple[list[float], list[int], np.ndarray | None]:
    """Per-dim scales, output lengths and roi (``[starts..., ends...]`` over every dim, or None)."""
    rank, who = len(dims), f"{node.op_type} node {node.name!r}"
    if node.op_type == "Upsample" and node.opset < 9:
        scales, sizes, roi, axes = node.attr("scales"), None, None, None
    elif node.op_type == "Upsample" or node.opset < 11:
        scales, sizes, roi, axes = ctx.static(inputs[1], "the scales"), None, None, None
    else:
        roi = ctx.static(optional(inputs, 1), "Resize's roi", default=None)
        scales = ctx.static(optional(inputs, 2), "Resize's scales", default=None)
        sizes = ctx.static(optional(inputs, 3), "Resize's sizes", default=None)
        axes = node.attr("axes", None)
    scales = None if scales is None or np.size(scales) == 0 else [float(s) for s in np.reshape(scales, -1)]
    sizes = None if sizes is None or np.size(sizes) == 0 else [int(s) for s in np.reshape(sizes, -1)]
    roi = None if roi is None or np.size(roi) == 0 else [float(r) for r in np.reshape(roi, -1)]
    if (scales is None) == (sizes is None):
        raise OnnxError(f"{who}: expected exactly one of scales and sizes, received "
                        f"{'both' if scales is not None else 'neither'}")
    axes = list(range(rank)) if axes is None else [normalize_axis(a, rank, who) for a in axes]
    given = scales if scales is not None else sizes
    if len(given) != len(axes) or (roi is not None and len(roi) != 2 * len(axes)):
        raise OnnxError(f"{who}: expected {len(axes)} scales or sizes (and {2 * len(axes)} roi values), received "
                        f"{len(given)} (roi {roi})")
    full_roi = None
    if roi is not None:
        full_roi = np.array([0.0] * rank + [1.0] * rank)
        for i, a in enumerate(axes):
            full_roi[a], full_roi[rank + a] = roi[i], roi[len(axes) + i]
    if scales is not None:
        factor = [1.0] * rank
        for a, s in zip(axes, scales):
            factor[a] = s
        return factor, [int(np.floor(f * n)) for f, n in zip(factor, dims)], full_roi
    factor, out = [1.0] * rank, list(dims)
    for a, s in zip(axes, sizes):
        factor[a], out[a] = s / dims[a], s
    if opts["policy"] != "stretch":
        pick = {"not_larger": min, "not_smaller": max}.get(opts["policy"])
        if pick is None:
            raise OnnxError(f"{who}: unknown keep_aspect_ratio_policy {opts['policy']!r}")
        scale = pick(factor[a] for a in axes)
        factor = [scale if i in axes else 1.0 for i in range(rank)]
        out = [int(scale * n + 0.5) if i in axes else n for i, n in enumerate(dims)]
    return factor, out, full_roi


@converter("Upsample", since=7)
@converter("Resize", since=10)
def resize(ctx, node, inputs):
    """The input resampled to new dims by ``mode`` (nearest / linear / cubic) and the coordinate mapping.

    Raises:
        OnnxError: both or neither of scales and sizes, an unknown mode, or mismatched lengths.
    """
    x = ctx.as_op(inputs[0])
    dims, who = shape_of(x), f"{node.op_type} node {node.name!r}"
    opts = _attrs_for(node)
    if opts["mode"] not in ("nearest", "linear", "cubic") or opts["coordinate"] not in COORDINATE_MODES \
            or opts["nearest"] not in NEAREST_MODES:
        raise OnnxError(f"{who}: unknown mode {opts['mode']!r}, coordinate_transformation_mode "
                        f"{opts['coordinate']!r} or nearest_mode {opts['nearest']!r}; hint: expected a mode of "
                        f"nearest/linear/cubic and a mapping among {', '.join(COORDINATE_MODES)}")
    factor, out_dims, roi = _plan(ctx, node, inputs, dims, opts)
    if any(m < 0 for m in out_dims):
        raise OnnxError(f"{who}: expected non-negative output dims, received {out_dims}")
    ctx.check_tensor(out_dims, x.dtype)  # before the per-dim matrices [out, in] are made
    ctx.check_constant((sum(m * n for m, n in zip(out_dims, dims) if m != n),), "float64")
    rank = len(dims)
    outside = np.zeros([1] * rank, dtype=bool)
    source_dtype = x.dtype
    if opts["mode"] != "nearest" and x.dtype not in FLOATS:
        x = api.cast(x, "float32")
    for axis, (n, m, s) in enumerate(zip(dims, out_dims, factor)):
        span = (0.0, 1.0) if roi is None else (float(roi[axis]), float(roi[rank + axis]))
        if m == n and math.isclose(s, 1.0) and math.isclose(span[0], 0.0) and math.isclose(span[1], 1.0):
            continue
        if opts["mode"] == "nearest":
            coeffs = nearest_coeffs(opts["nearest"], downsample=s < 1)
        elif opts["mode"] == "linear":
            coeffs = linear_coeffs(opts["antialias"])
        else:
            coeffs = cubic_coeffs(opts["a"], opts["antialias"])
        matrix, extrapolated = weights(n, m, s, span, opts["coordinate"], coeffs, opts["exclude"])
        outside = outside | extrapolated.reshape([m if i == axis else 1 for i in range(rank)])
        x = ctx.rename(_apply(ctx, x, axis, matrix, opts["mode"] == "nearest"))
    if outside.any():
        outside, x, fill = ctx.broadcast(outside, x, np.asarray(opts["extrapolation"], dtype=x.dtype))
        x = api.where(outside, fill, x)
    return x if x.dtype == source_dtype else api.cast(x, source_dtype)


def _apply(ctx, x, axis: int, matrix: np.ndarray, nearest: bool):
    """``x`` resampled along dim ``axis`` by ``matrix`` ``[out, in]`` (a gather when every row is one-hot)."""
    if nearest and np.all((matrix == 0) | (matrix == 1)) and np.all(matrix.sum(axis=1) == 1):
        return take(ctx, x, matrix.argmax(axis=1).astype("int64"), axis)
    out_axis = ctx.fresh([matrix.shape[0]])[0]
    w = api.constant(matrix.T.astype(x.dtype), axes=[x.axes[axis], out_axis])
    y = api.dot(x, w)  # x's other dims, then the output dim
    return api.axes_with_order(y, list(x.axes[:axis]) + [out_axis] + list(x.axes[axis + 1:]))
