"""Converter: DeformConv (2-D), a convolution whose taps read at learned fractional offsets.

For output position ``(oh, ow)`` and kernel tap ``(i, j)`` of offset group ``g`` the input
is sampled at ``(oh * sh - ph + i * dh + dy, ow * sw - pw + j * dw + dx)`` with ``(dy, dx)``
read from ``offset`` ``[N, G * kH * kW * 2, oH, oW]``, bilinearly (zeros outside the
input, as GridSample with ``align_corners=1``), optionally scaled by ``mask``. Lowered to:

1. sampling coordinates = a constant grid + the offsets; ``floor`` gives the four corners
   and their bilinear weights;
2. one ``ng.gather`` per corner from the input viewed as ``[N * G * H * W, C / G]`` rows
   (the flat row index adds the constant ``(n * G + g) * H * W``); out-of-range corners
   get weight 0 and a clamped index;
3. the sampled columns ``[N, C, kH * kW, oH, oW]`` contracted with the filter by
   ``ng.dot`` (one per convolution group), plus the bias.

Example:
    >>> node = helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
"""

from __future__ import annotations

import numpy as np

from ... import api
from ...ir import Axes, Axis, Op
from .errors import OnnxError
from .ops_conv import FLOATS, spatial_attrs
from .registry import converter


def sample_columns(ctx, x: Op, offset: Op, mask: Op | None, kernel, strides, dilations, pads, groups: int) -> Op:
    """The bilinear samples ``[N, C, kH * kW, oH, oW]`` a deformable convolution multiplies by its filter."""
    n, c, h, w = x.axes.lengths
    oh, ow = offset.axes.lengths[2:]
    taps = kernel[0] * kernel[1]
    per_group = c // groups
    off = ctx.reshape(offset, [n, groups, taps, 2, oh, ow])
    dy = ctx.rename(api.tensor_slice(off, [slice(None)] * 3 + [0]))  # [N, G, K, oH, oW]
    dx = ctx.rename(api.tensor_slice(off, [slice(None)] * 3 + [1]))
    ki, kj = np.divmod(np.arange(taps), kernel[1])
    base_h = (np.arange(oh)[None, :, None] * strides[0] - pads[0] + ki[:, None, None] * dilations[0])
    base_w = (np.arange(ow)[None, None, :] * strides[1] - pads[1] + kj[:, None, None] * dilations[1])
    ph = api.add(*ctx.broadcast(dy, base_h.astype(x.dtype)[None, None]))
    pw = api.add(*ctx.broadcast(dx, base_w.astype(x.dtype)[None, None]))
    pw = ctx.rename(pw, ph.axes)
    h0, w0 = api.floor(ph), api.floor(pw)
    fh, fw = ph - h0, pw - w0
    one = api.constant(1.0, dtype=x.dtype)
    rows = ctx.reshape(ctx.transpose(ctx.reshape(x, [n, groups, per_group, h * w]), [0, 1, 3, 2]),
                       [n * groups * h * w, per_group])
    start = (np.arange(n * groups, dtype="int64") * h * w).reshape(n, groups, 1, 1, 1)
    total = None
    for di, dj in ((0, 0), (0, 1), (1, 0), (1, 1)):
        hh, ww = h0 + api.constant(float(di), dtype=x.dtype), w0 + api.constant(float(dj), dtype=x.dtype)
        weight = (fh if di else one - fh) * (fw if dj else one - fw)
        zero = api.constant(0.0, dtype=x.dtype)
        inside = (api.greater_equal(hh, zero) * api.less_equal(hh, api.constant(h - 1.0, dtype=x.dtype)) *
                  api.greater_equal(ww, zero) * api.less_equal(ww, api.constant(w - 1.0, dtype=x.dtype)))
        inside = api.cast(inside, x.dtype)  # ngraph comparisons give 0/1 floats: a product is their "and"
        weight = weight * inside
        flat = api.cast((hh * api.constant(float(w), dtype=x.dtype) + ww) * inside, "int64")  # outside: row 0
        index = api.add(*ctx.broadcast(flat, start))
        picked = api.gather(rows, ctx.rename(index, weight.axes), rows.axes[0])  # [Cg, N, G, K, oH, oW]
        term = picked * weight
        total = term if total is None else total + term
    if mask is not None:
        total = total * ctx.rename(ctx.reshape(mask, [n, groups, taps, oh, ow]), weight.axes)
    cg = total.axes[0]
    order = Axes([*total.axes[1:3], cg, *total.axes[3:]])  # [N, G, Cg, K, oH, oW]
    return ctx.reshape(api.axes_with_order(total, order), [n, c, taps, oh, ow])


@converter("DeformConv", since=19)
def deform_conv(ctx, node, inputs):
    inputs = list(inputs) + [None] * (5 - len(inputs))
    x, w, offset = (ctx.as_op(v) for v in inputs[:3])
    if x.dtype not in FLOATS or len(x.axes) != 4:
        raise node.unsupported(f"input of shape {tuple(x.axes.lengths)} and type {x.dtype} (2-D float only)")
    w, offset = ctx.as_op(w, x.dtype), ctx.as_op(offset, x.dtype)
    n, c, _, _ = x.axes.lengths
    out_c, cin_g, *kernel = w.axes.lengths
    kernel = [int(k) for k in node.attr("kernel_shape", kernel)]
    strides, dilations = spatial_attrs(node, 2, kernel)
    pads = [int(p) for p in node.attr("pads", [0, 0, 0, 0])]
    group, offset_group = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    if c != cin_g * group or out_c % group or c % offset_group or \
            offset.axes.lengths[1] != offset_group * 2 * kernel[0] * kernel[1]:
        raise OnnxError(f"DeformConv node {node.name!r}: channels {c}, filter {tuple(w.axes.lengths)}, group={group}, "
                        f"offset_group={offset_group} and offset {tuple(offset.axes.lengths)} disagree")
    mask = None if inputs[4] is None else ctx.as_op(inputs[4], x.dtype)
    cols = sample_columns(ctx, x, offset, mask, kernel, strides, dilations, pads, offset_group)
    oh, ow = offset.axes.lengths[2:]
    taps = kernel[0] * kernel[1]
    cols = ctx.reshape(cols, [n, group, cin_g * taps, oh, ow])
    filt = ctx.reshape(w, [group, out_c // group, cin_g * taps])
    parts = []
    for g in range(group):  # one dot per convolution group, contracting (channel, tap)
        col = ctx.rename(api.tensor_slice(cols, [slice(None), g]))  # [N, Cg * K, oH, oW]
        f = api.tensor_slice(filt, [g])  # [Mg, Cg * K]
        f = ctx.rename(f, Axes([*ctx.fresh([f.axes.lengths[0]]), col.axes[1]]))
        parts.append(api.axes_with_order(api.dot(f, col), Axes([col.axes[0], f.axes[0], *col.axes[2:]])))
    if len(parts) > 1:
        name = ctx.fresh([1])[0].name  # the output channels: one name, each group its own part
        stacked = [ctx.rename(p, Axes([parts[0].axes[0], Axis(name, p.axes[1].length), *parts[0].axes[2:]]))
                   for p in parts]
        y = api.concat_along_axis(stacked, name)
    else:
        y = parts[0]
    y = ctx.rename(y)
    if inputs[3] is not None:
        y = api.add(*ctx.broadcast(y, ctx.reshape(ctx.as_op(inputs[3], x.dtype), [out_c, 1, 1])))
    return y
