"""Converters: pooling (MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool).

Two lowerings:

* **native** ``ng.pooling`` when ONNX's pooling is one ngraph expresses: float input, no
  dilation, symmetric pads of at most half the window, no ``Indices`` output;
* **windows** otherwise (dilations, asymmetric or large pads, ``ceil_mode`` with those,
  integer inputs, ``Indices``, LpPool): the padded input is read once per kernel offset as a
  strided slice ``[N, C, *out]`` and the slices are combined element-wise (max, sum, sum of
  ``|x|^p``). Which positions are real input, explicit padding, or past the padding (the
  ``ceil_mode`` tail) is known at import time, so masks and divisors are constants.

ONNX's output length is ``floor((L + pb + pe - ((k - 1) * d + 1)) / s) + 1`` (``ceil`` with
``ceil_mode``, dropping a last window that would start in the end padding), as PyTorch.

Example:
    >>> node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import api
from ...ir import Op
from .errors import OnnxError
from .ops_conv import FLOATS, explicit_pads, from_activation, spatial_attrs, to_activation
from .registry import converter


def output_lengths(lengths, kernel, strides, dilations, pads, ceil_mode: bool) -> list[int]:
    """ONNX pooling's output length per spatial dim."""
    out = []
    for n, k, s, d, (b, e) in zip(lengths, kernel, strides, dilations, pads):
        span = (n + b + e - ((k - 1) * d + 1)) / s + 1
        length = math.ceil(span) if ceil_mode else math.floor(span)
        if ceil_mode and (length - 1) * s >= n + b:
            length -= 1  # the last window would start in the end padding
        out.append(int(length))
    return out


def _pool_geometry(node, x: Op):
    rank = len(x.axes) - 2
    if rank < 1:
        raise OnnxError(f"{node.op_type} node {node.name!r}: expected an input [N, C, *spatial], received shape "
                        f"{tuple(x.axes.lengths)}")
    kernel = [int(k) for k in node.attr("kernel_shape")]
    strides, dilations = spatial_attrs(node, rank, kernel)
    lengths = list(x.axes.lengths[2:])
    pads = explicit_pads(node, lengths, kernel, strides, dilations)
    ceil_mode = bool(node.attr("ceil_mode", 0))
    out = output_lengths(lengths, kernel, strides, dilations, pads, ceil_mode)
    if any(o < 1 for o in out):
        raise OnnxError(f"{node.op_type} node {node.name!r}: window {kernel} (dilations {dilations}) is larger than "
                        f"the padded input {lengths} with pads {pads}")
    return kernel, strides, dilations, pads, ceil_mode, out


def _native(x: Op, kernel, dilations, pads) -> bool:
    """True when ``ng.pooling`` computes exactly this ONNX pooling (its length rule is ONNX's, as PyTorch's)."""
    return (x.dtype in FLOATS and all(d == 1 for d in dilations)
            and all(b == e and 2 * b <= k for (b, e), k in zip(pads, kernel)))


class Windows:
    """The kernel-offset slices of a padded input: ``[N, C, *out]`` each, plus their static masks.

    Attributes:
        offsets: one tuple of kernel indices per slice.
        kinds: per offset, an int8 array ``out``-shaped: 0 real input, 1 explicit padding,
            2 beyond the padding (the ``ceil_mode`` tail).
        positions: per offset, per spatial dim, the input coordinate each output reads.
    """

    def __init__(self, lengths, kernel, strides, dilations, pads, out) -> None:
        self.lengths, self.kernel, self.strides, self.dilations = lengths, kernel, strides, dilations
        self.pads, self.out = pads, out
        self.offsets = list(itertools.product(*(range(k) for k in kernel)))
        self.positions, self.kinds = [], []
        for offset in self.offsets:
            coords = [np.arange(o) * s + i * d - b
                      for o, s, i, d, (b, _) in zip(out, strides, offset, dilations, pads)]
            grids = np.meshgrid(*coords, indexing="ij")
            kind = np.zeros(out, dtype="int8")
            for g, n, (b, e) in zip(grids, lengths, pads):
                kind = np.maximum(kind, np.where((g < 0) | (g >= n), 1, 0).astype("int8"))
                kind = np.maximum(kind, np.where((g < -b) | (g >= n + e), 2, 0).astype("int8"))
            self.positions.append(grids)
            self.kinds.append(kind)

    def slices(self, ctx, x: Op, fill: float) -> list[Op]:
        """The slices of ``x`` padded with ``fill`` (one pad covering every window)."""
        before = [max(0, -int(min(c.min() for c in (g[i] for g in self.positions)))) for i in range(len(self.out))]
        after = [max(0, int(max(c.max() for c in (g[i] for g in self.positions))) - n + 1)
                 for i, n in enumerate(self.lengths)]
        padded = x
        if any(before) or any(after):
            padded = api.pad(x, [0, 0] + list(zip(before, after)))
            if fill != 0:
                inside = np.zeros(padded.axes.lengths[2:], dtype=bool)
                inside[tuple(slice(b, b + n) for b, n in zip(before, self.lengths))] = True
                mask = ctx.as_op(inside.reshape((1, 1) + inside.shape))
                mask, padded, filler = ctx.broadcast(mask, ctx.rename(padded), np.asarray(fill, dtype=x.dtype))
                padded = api.where(mask, padded, filler)
        result = []
        for offset in self.offsets:
            index = [slice(None), slice(None)]
            for o, s, i, d, b, (pb, _) in zip(self.out, self.strides, offset, self.dilations, before, self.pads):
                start = b + i * d - pb  # the padded array's coordinate of input position i * d - pb
                index.append(slice(start, start + (o - 1) * s + 1, s))
            result.append(ctx.rename(api.tensor_slice(padded, index)))
        return result


def _lowest(dtype: str) -> float:
    return float("-inf") if dtype in FLOATS else int(np.iinfo(dtype).min)


def _like(ctx, array: np.ndarray, y: Op) -> Op:
    """A static ``[*out]`` array broadcast (as a constant) to ``y``'s ``[N, C, *out]`` axes."""
    return ctx.broadcast(y, array.reshape((1, 1) + array.shape))[1]


def max_pool_windows(ctx, node, x: Op, win: Windows) -> tuple[Op, Op]:
    """Max over the windows and the flat index (into ``x``, ONNX's ``Indices``) of the first maximum."""
    order = int(node.attr("storage_order", 0))
    lengths = win.lengths
    slices = win.slices(ctx, x, _lowest(x.dtype))
    best, index = None, None
    for grids, kind, s in zip(win.positions, win.kinds, slices):
        clipped = [np.clip(g, 0, n - 1) for g, n in zip(grids, lengths)]
        dims = list(lengths) if order == 0 else list(lengths)[::-1]
        flat = np.ravel_multi_index(clipped if order == 0 else clipped[::-1], dims).astype("int64")
        flat = np.where(kind == 0, flat, -1)
        if best is None:
            best, index = s, _like(ctx, flat, s)
            continue
        s, best = ctx.broadcast(s, best)
        better = api.cast(api.greater(s, best), "bool")
        best = api.where(better, s, best)
        index = api.where(better, *ctx.broadcast(_like(ctx, flat, s), index))
    n, c = x.axes.lengths[:2]
    base = (np.arange(n * c, dtype="int64") * int(np.prod(lengths))).reshape((n, c) + (1,) * len(lengths))
    index = api.add(*ctx.broadcast(index, base))
    return best, index


def avg_pool_windows(ctx, x: Op, win: Windows, include_pad: bool, power: float | None = None) -> Op:
    """Mean (or, with ``power``, the Lp norm) over the windows; divisors fixed at import time."""
    total, count = None, np.zeros(win.out, dtype="float64")
    for kind, s in zip(win.kinds, win.slices(ctx, x, 0.0)):
        count += (kind == 0) | ((kind == 1) & include_pad)
        if power is not None:
            s = api.power(api.absolute(s), api.constant(power, dtype=x.dtype)) if power != 1 else api.absolute(s)
        total = s if total is None else api.add(*ctx.broadcast(total, s))
    if power is not None:
        return total if power == 1 else api.power(total, api.constant(1.0 / power, dtype=x.dtype))
    return api.divide(*ctx.broadcast(total, _like(ctx, np.maximum(count, 1).astype(x.dtype), total)))


@converter("MaxPool", "AveragePool", since=1)
def pool(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    kernel, strides, dilations, pads, ceil_mode, out = _pool_geometry(node, x)
    is_max = node.op_type == "MaxPool"
    include_pad = bool(node.attr("count_include_pad", 0))
    wants_index = is_max and len(node.outputs) > 1 and node.outputs[1]
    if not is_max and x.dtype not in FLOATS:
        raise node.unsupported(f"input of type {x.dtype}")
    if not wants_index and _native(x, kernel, dilations, pads):
        y = api.pooling(to_activation(ctx, x), kernel, op="max" if is_max else "avg", strides=strides,
                       padding=[b for b, _ in pads], ceil_mode=ceil_mode, count_include_pad=include_pad)
        return from_activation(ctx, y)
    win = Windows(list(x.axes.lengths[2:]), kernel, strides, dilations, pads, out)
    if is_max:
        y, index = max_pool_windows(ctx, node, x, win)
        return [y, index] if wants_index else y
    return avg_pool_windows(ctx, x, win, include_pad)


@converter("LpPool", since=1)
def lp_pool(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    if x.dtype not in FLOATS:
        raise node.unsupported(f"input of type {x.dtype}")
    kernel, strides, dilations, pads, _, out = _pool_geometry(node, x)
    win = Windows(list(x.axes.lengths[2:]), kernel, strides, dilations, pads, out)
    return avg_pool_windows(ctx, x, win, True, power=float(node.attr("p", 2)))


@converter("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", since=1)
def global_pool(ctx, node, inputs):
    x = ctx.as_op(inputs[0])
    dims = list(range(2, len(x.axes)))
    if node.op_type == "GlobalAveragePool":
        return ctx.reduce("mean", x, dims, True)
    if node.op_type == "GlobalMaxPool":
        return ctx.reduce("max", x, dims, True)
    p = float(node.attr("p", 2))
    powered = api.power(api.absolute(x), api.constant(p, dtype=x.dtype))
    return api.power(ctx.reduce("sum", powered, dims, True), api.constant(1.0 / p, dtype=x.dtype))


@converter("MaxUnpool", since=9)
def max_unpool(ctx, node, inputs):
    """Each value of ``X`` written at its flat ``Indices`` into a zero tensor (MaxPool's partial inverse)."""
    x, indices = ctx.as_op(inputs[0]), ctx.as_op(inputs[1])
    if tuple(indices.axes.lengths) != tuple(x.axes.lengths):
        raise OnnxError(f"MaxUnpool node {node.name!r}: expected indices of X's shape {tuple(x.axes.lengths)}, "
                        f"received {tuple(indices.axes.lengths)}")
    rank = len(x.axes) - 2
    kernel = [int(k) for k in node.attr("kernel_shape")]
    strides, _ = spatial_attrs(node, rank, kernel)
    pads = explicit_pads(node, x.axes.lengths[2:], kernel, strides, [1] * rank)
    wanted = ctx.static(inputs[2] if len(inputs) > 2 else None, "MaxUnpool's output_shape", default=None)
    shape = [*x.axes.lengths[:2], *((n - 1) * s + k - b - e
                                    for n, s, k, (b, e) in zip(x.axes.lengths[2:], strides, kernel, pads))]
    flat = ctx.fresh([int(np.prod(shape))])
    table = api.scatter_add(x, api.cast_axes(indices, x.axes), flat, flat[0])  # ONNX's indices are unique
    y = ctx.reshape(table, shape)
    if wanted is None or [int(n) for n in wanted] == shape:
        return y
    # indices address the inferred shape (as onnxruntime): a larger output_shape pads zeros at the end
    wanted = [int(n) for n in wanted]
    if len(wanted) != len(shape) or any(w < n for w, n in zip(wanted, shape)):
        raise OnnxError(f"MaxUnpool node {node.name!r}: output_shape {wanted} is smaller than the unpooled "
                        f"shape {shape}")
    return ctx.rename(api.pad(y, [(0, w - n) for w, n in zip(wanted, shape)]))
