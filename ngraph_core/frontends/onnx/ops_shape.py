"""Converters: shapes and reshapes (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Expand, Tile...).

Every ONNX dim lives on a generated axis name, so these converters mostly compute the
new positional shape with NumPy at import time (shapes are always static in ngraph) and
emit one movement op: ``RESHAPE`` (row-major re-reading), ``axes_with_order`` (Transpose),
``CONCAT``, ``SLICE`` or ``BROADCAST``. Attributes that later opsets moved to inputs
(Squeeze/Unsqueeze/Split axes and sizes at 13, Split ``num_outputs`` at 18) are read from
whichever the node carries; such inputs must be known at import time (``ctx.static``).

Values fully known at import time (shape arithmetic: ``Shape -> Gather -> Concat``) are
folded by the importer after each node, so converters build ng ops in every case.

Example:
    >>> # Unsqueeze(x [3, 4], axes=[0, 3]) -> [1, 3, 4, 1]; Split(x [6], num_outputs=4) -> 2, 2, 2, 0
"""

from __future__ import annotations

import numpy as np

from ... import api
from ...ir import Axes, Axis
from .errors import OnnxError
from .registry import converter
from .tensor import normalize_axis, shape_of

_VALUE_KEYS = ("value", "value_float", "value_floats", "value_int", "value_ints")


def optional(inputs: list, i: int):
    """Input ``i`` of a node, or None when it is omitted (absent, or named ``""``).

    Example:
        >>> optional([x, None], 2) is None   # a trailing optional input left out
    """
    return inputs[i] if i < len(inputs) else None


def int_list(ctx, value, what: str) -> list[int] | None:
    """A static integer input (``axes``, ``split``, ``repeats``...) as a flat list of Python ints.

    Args:
        ctx: the import context; value: the input (None when omitted); what: names it in errors.

    Returns:
        The ints, or None for an omitted input.

    Raises:
        NeedStatic: the value depends on a graph input (the backend then re-imports with it known).
    """
    array = ctx.static(value, what, default=None)
    return None if array is None else [int(v) for v in np.asarray(array).reshape(-1)]


def axes_arg(ctx, node, inputs, index: int, since: int) -> list[int] | None:
    """The ``axes`` of a node: the attribute before opset ``since``, the static input ``index`` from it on.

    Example:
        >>> axes_arg(ctx, node, inputs, 1, since=13)   # Squeeze: attribute <= 12, input >= 13
    """
    if node.opset < since:
        axes = node.attr("axes", None)
        return None if axes is None else [int(a) for a in axes]
    return int_list(ctx, optional(inputs, index), f"{node.op_type}'s axes")


@converter("Identity", since=1)
def identity(ctx, node, inputs):
    """The input itself."""
    return inputs[0]


@converter("Constant", since=1)
def constant(ctx, node, inputs):
    """The tensor of the one ``value*`` attribute (strings and sparse tensors are not expressible)."""
    for key in _VALUE_KEYS:
        if key in node.attrs:
            value = node.attrs[key]
            if key.startswith("value_float"):
                return np.asarray(value, dtype="float32")
            if key.startswith("value_int"):
                return np.asarray(value, dtype="int64")
            return np.asarray(value)
    if "sparse_value" in node.attrs:
        raise node.unsupported("a sparse_value (ngraph has no sparse tensors); hint: densify the constant")
    if any(k.startswith("value_string") for k in node.attrs):
        raise node.unsupported("a string constant (ngraph computes in numeric dtypes only)")
    raise OnnxError(f"Constant node {node.name!r}: expected one of the attributes {', '.join(_VALUE_KEYS)}, "
                    f"received {sorted(node.attrs)}; hint: the model is malformed")


@converter("Shape", since=1)
def shape(ctx, node, inputs):
    """The input's dims as int64, ``[start:end]`` of them from opset 15 (clamped like Python slices)."""
    dims = np.asarray(shape_of(inputs[0]), dtype="int64")
    return dims[int(node.attr("start", 0)):node.attr("end", None)]


@converter("Size", since=1)
def size(ctx, node, inputs):
    """The input's element count, an int64 scalar."""
    return np.asarray(int(np.prod(shape_of(inputs[0]), dtype=np.int64)), dtype="int64")


@converter("Reshape", since=1)
def reshape(ctx, node, inputs):
    """The input read row-major into ``shape`` (0 copies a dim unless ``allowzero``, -1 infers).

    ``shape`` is an attribute before opset 5, a static input from it on.
    """
    x = ctx.as_op(inputs[0])
    if node.opset < 5:
        target = [int(v) for v in node.attr("shape")]
    else:
        target = [int(v) for v in ctx.static(inputs[1], "Reshape's shape").reshape(-1)]
    allowzero = node.attr("allowzero", 0)
    dims = list(x.axes.lengths)
    target = [dims[i] if v == 0 and not allowzero else v for i, v in enumerate(target)]
    if target.count(-1) > 1:
        raise OnnxError(f"Reshape node {node.name!r}: expected at most one -1 in the shape, received {target}")
    if -1 in target:
        known = int(np.prod([v for v in target if v != -1], dtype=np.int64))
        target[target.index(-1)] = x.axes.size // known if known else 0
    return ctx.reshape(x, target)


@converter("Flatten", since=1)
def flatten(ctx, node, inputs):
    """The input as 2-D: dims before ``axis`` (default 1, negative from opset 11) times the rest."""
    x = ctx.as_op(inputs[0])
    dims = shape_of(x)
    axis = int(node.attr("axis", 1))
    axis = axis + len(dims) if axis < 0 else axis
    if not 0 <= axis <= len(dims):
        raise OnnxError(f"Flatten node {node.name!r}: axis {node.attr('axis', 1)} is out of range for rank "
                        f"{len(dims)}; hint: expected an axis in [{-len(dims)}, {len(dims)}]")
    return ctx.reshape(x, (int(np.prod(dims[:axis], dtype=np.int64)), int(np.prod(dims[axis:], dtype=np.int64))))


@converter("Transpose", since=1)
def transpose(ctx, node, inputs):
    """The input's dims permuted by ``perm`` (default: reversed)."""
    x = ctx.as_op(inputs[0])
    perm = node.attr("perm", None)
    return ctx.transpose(x, list(range(len(x.axes)))[::-1] if perm is None else perm)


@converter("Squeeze", since=1)
def squeeze(ctx, node, inputs):
    """The input without the size-1 dims ``axes`` (attribute before opset 13, input after; default: all)."""
    x = ctx.as_op(inputs[0])
    dims = shape_of(x)
    axes = axes_arg(ctx, node, inputs, 1, since=13)
    if axes is None:
        drop = {i for i, n in enumerate(dims) if n == 1}
    else:
        drop = {normalize_axis(a, len(dims), f"Squeeze node {node.name!r}") for a in axes}
        bad = [i for i in drop if dims[i] != 1]
        if bad:
            raise OnnxError(f"Squeeze node {node.name!r}: dim {bad[0]} has length {dims[bad[0]]}, expected 1; "
                            f"hint: only size-1 dims of {dims} can be squeezed")
    return ctx.reshape(x, [n for i, n in enumerate(dims) if i not in drop])


@converter("Unsqueeze", since=1)
def unsqueeze(ctx, node, inputs):
    """The input with size-1 dims inserted at ``axes`` (positions in the output; attribute before opset 13)."""
    x = ctx.as_op(inputs[0])
    axes = axes_arg(ctx, node, inputs, 1, since=13)
    if axes is None:
        raise OnnxError(f"Unsqueeze node {node.name!r}: axes are required")
    rank = len(x.axes) + len(axes)
    positions = {normalize_axis(a, rank, f"Unsqueeze node {node.name!r}") for a in axes}
    if len(positions) != len(axes):
        raise OnnxError(f"Unsqueeze node {node.name!r}: axes {axes} repeat a position")
    dims = iter(shape_of(x))
    return ctx.reshape(x, [1 if i in positions else next(dims) for i in range(rank)])


@converter("Concat", since=1)
def concat(ctx, node, inputs):
    """The inputs joined along ``axis``; the other dims must agree."""
    ops = [ctx.as_op(v) for v in inputs if v is not None]
    rank = len(ops[0].axes)
    axis = normalize_axis(node.attr("axis", 1) if node.opset < 4 else node.attr("axis"), rank,
                          f"Concat node {node.name!r}")
    shared = list(ctx.fresh([n for i, n in enumerate(shape_of(ops[0])) if i != axis]))
    name = ctx.fresh([0])[0].name
    parts = []
    for o in ops:
        dims = shape_of(o)
        if len(dims) != rank or [n for i, n in enumerate(dims) if i != axis] != [a.length for a in shared]:
            raise OnnxError(f"Concat node {node.name!r}: input shapes {[shape_of(p) for p in ops]} differ "
                            f"outside axis {axis}; hint: every input needs the same dims but the joined one")
        if dims[axis] == 0:
            continue
        parts.append(api.cast_axes(o, Axes(shared[:axis] + [Axis(name, dims[axis])] + shared[axis:])))
    if not parts:
        return ctx.reshape(ops[0], shape_of(ops[0]))
    return ctx.rename(api.concat_along_axis(parts, name) if len(parts) > 1 else parts[0])


def slice_dim(ctx, x, axis: int, start: int, stop: int):
    """``x[..., start:stop, ...]`` along dim ``axis`` with fresh axis names."""
    index = [slice(None)] * len(x.axes)
    index[axis] = slice(start, stop)
    return ctx.rename(api.tensor_slice(x, index))


@converter("Split", since=1)
def split(ctx, node, inputs):
    """The input cut along ``axis`` into parts of lengths ``split`` (attribute < 13, input >= 13), else equal parts.

    From opset 18 ``num_outputs`` may give the count: parts of ``ceil(n / count)``, the last smaller.
    """
    x = ctx.as_op(inputs[0])
    dims = shape_of(x)
    axis = normalize_axis(node.attr("axis", 0), len(dims), f"Split node {node.name!r}")
    if node.opset < 13:
        sizes = node.attr("split", None)
        sizes = int_list(ctx, optional(inputs, 1), "Split's split") if sizes is None and node.opset < 2 else sizes
    else:
        sizes = int_list(ctx, optional(inputs, 1), "Split's split")
    count = int(node.attr("num_outputs", len(node.outputs)))
    n = dims[axis]
    if sizes is None:
        if node.opset >= 18 and "num_outputs" in node.attrs:
            chunk = -(-n // count)
            sizes = [max(0, min(chunk, n - i * chunk)) for i in range(count)]
        elif n % count:
            raise OnnxError(f"Split node {node.name!r}: dim {axis} of length {n} does not split into {count} equal "
                            "parts; hint: give the split sizes")
        else:
            sizes = [n // count] * count
    sizes = [int(s) for s in sizes]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise OnnxError(f"Split node {node.name!r}: split sizes {sizes} must be non-negative and sum to the "
                        f"length {n} of dim {axis}")
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return [slice_dim(ctx, x, axis, int(offsets[i]), int(offsets[i + 1])) for i in range(len(sizes))]


@converter("Expand", since=8)
def expand(ctx, node, inputs):
    """The input broadcast NumPy-style with the static ``shape`` input (which may itself stretch to the input)."""
    x = ctx.as_op(inputs[0])
    target = [int(v) for v in ctx.static(inputs[1], "Expand's shape").reshape(-1)]
    try:
        out = np.broadcast_shapes(shape_of(x), tuple(target))
    except ValueError:
        raise OnnxError(f"Expand node {node.name!r}: shape {target} does not broadcast with the input's "
                        f"{shape_of(x)}; hint: dims must be equal or 1") from None
    return x if tuple(out) == shape_of(x) else ctx.expand(x, ctx.fresh(out))


@converter("Tile", since=6)
def tile(ctx, node, inputs):
    """The input repeated ``repeats[i]`` times along each dim ``i`` (whole copies, like ``np.tile``)."""
    x = ctx.as_op(inputs[0])
    dims = shape_of(x)
    repeats = int_list(ctx, inputs[1], "Tile's repeats")
    if len(repeats) != len(dims) or any(r < 0 for r in repeats):
        raise OnnxError(f"Tile node {node.name!r}: expected {len(dims)} non-negative repeats, received {repeats}")
    if all(r == 1 for r in repeats):
        return x
    copies = ctx.fresh(repeats)
    interleaved = Axes(a for pair in zip(copies, x.axes) for a in pair)  # [r0, d0, r1, d1, ...]
    return ctx.reshape(api.broadcast(x, interleaved), [r * n for r, n in zip(repeats, dims)])


@converter("ConstantOfShape", since=9)
def constant_of_shape(ctx, node, inputs):
    """A tensor of the static ``shape`` input filled with ``value`` (a one-element tensor; default float 0)."""
    dims = int_list(ctx, inputs[0], "ConstantOfShape's shape")
    value = np.asarray(node.attr("value", np.zeros(1, dtype="float32")))
    if value.size != 1:
        raise OnnxError(f"ConstantOfShape node {node.name!r}: value must hold one element, received {value.shape}")
    if any(n < 0 for n in dims):
        raise OnnxError(f"ConstantOfShape node {node.name!r}: expected a shape of non-negative dims, received {dims}")
    ctx.check_constant(dims, value.dtype)  # 78 bytes of model may ask for any size: refused before np.full
    return np.full(dims, value.reshape(()), dtype=value.dtype)


@converter("Range", since=11)
def range_(ctx, node, inputs):
    """``start, start + delta, ...`` up to ``limit`` (excluded); the three scalars must be static."""
    start, limit, delta = (ctx.static(v, f"Range's {w}") for v, w in zip(inputs, ("start", "limit", "delta")))
    if delta.reshape(-1)[0] == 0:
        raise OnnxError(f"Range node {node.name!r}: delta is 0; hint: the sequence would never reach the limit")
    s, lim, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    steps = np.ceil((float(lim) - float(s)) / float(d))
    if not np.isfinite(steps):
        raise OnnxError(f"Range node {node.name!r}: expected finite start, limit and delta, received {float(s)}, "
                        f"{float(lim)}, {float(d)}")
    count = max(int(steps), 0)
    ctx.check_constant((count,), np.result_type(start.dtype, np.int64))  # np.arange(count) is int64 first
    return (s + np.arange(count) * d).astype(start.dtype)


@converter("EyeLike", since=9)
def eye_like(ctx, node, inputs):
    """A 2-D tensor of the input's shape with ones on diagonal ``k``; dtype ``dtype`` (default: the input's)."""
    dims = shape_of(inputs[0])
    if len(dims) != 2:
        raise OnnxError(f"EyeLike node {node.name!r}: expected a 2-D input, received shape {dims}")
    dtype = ctx.dtype(node.attr("dtype"), f"EyeLike node {node.name!r}") if "dtype" in node.attrs else None
    dtype = dtype or (inputs[0].dtype if hasattr(inputs[0], "axes") else np.dtype(inputs[0].dtype).name)
    ctx.check_constant(dims, dtype)
    return np.eye(dims[0], dims[1], k=int(node.attr("k", 0)), dtype=dtype)


def _blocks(node) -> int:
    size = int(node.attr("blocksize"))
    if size < 1:
        raise OnnxError(f"{node.op_type} node {node.name!r}: blocksize must be >= 1, received {size}")
    return size


@converter("DepthToSpace", since=1)
def depth_to_space(ctx, node, inputs):
    """NCHW channels moved into ``blocksize`` x ``blocksize`` spatial blocks (``mode`` DCR or CRD)."""
    x, b = ctx.as_op(inputs[0]), _blocks(node)
    n, c, h, w = shape_of(x)
    if c % (b * b):
        raise OnnxError(f"DepthToSpace node {node.name!r}: {c} channels are not a multiple of blocksize^2 = {b * b}")
    if node.attr("mode", "DCR") == "CRD":
        y = ctx.transpose(ctx.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    else:
        y = ctx.transpose(ctx.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    return ctx.reshape(y, (n, c // (b * b), h * b, w * b))


@converter("SpaceToDepth", since=1)
def space_to_depth(ctx, node, inputs):
    """NCHW ``blocksize`` x ``blocksize`` spatial blocks moved into channels (DepthToSpace DCR's inverse)."""
    x, b = ctx.as_op(inputs[0]), _blocks(node)
    n, c, h, w = shape_of(x)
    if h % b or w % b:
        raise OnnxError(f"SpaceToDepth node {node.name!r}: spatial dims {(h, w)} are not multiples of blocksize {b}")
    y = ctx.transpose(ctx.reshape(x, (n, c, h // b, b, w // b, b)), (0, 3, 5, 1, 2, 4))
    return ctx.reshape(y, (n, c * b * b, h // b, w // b))
