"""Axes and dtype inference: one entry per ``OpType``.

Each rule takes ``(src, arg, axes, dtype)`` — ``axes``/``dtype`` are what the
constructor was asked for, or None where the op computes them — and returns the
op's ``(Axes, dtype)``, raising ``AxesError``/``DTypeError`` when the sources do
not fit. Element-wise rules require operands with identical axes: the API aligns
operands by name and inserts explicit ``broadcast`` ops first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import AxesError, DTypeError
from .attention import infer_attention
from .axes import Axes, Axis, format_axes
from .collective import infer_allreduce, infer_allreduce_start, infer_allreduce_wait, infer_broadcast_from
from .conv import ConvArg, PoolArg, activation_roles, check_conv, check_pool
from .ctc import infer_ctc, infer_ctc_grad
from .dtypes import ALL_DTYPES, INT_DTYPES, is_float, promote
from .graph import CallArg
from .indexing import (
    infer_cumulative,
    infer_gather_elements,
    infer_gather_nd,
    infer_scatter_elements,
    infer_scatter_nd,
    infer_topk,
    lookup_name,
)
from .logical import infer_bitwise, infer_float_test, infer_logical
from .node import Op
from .ops import OpGroup, OpType
from .scan import infer_scan, infer_scan_result

Rule = Callable[[Sequence[Op], Any, "Axes | None", "str | None"], tuple[Axes, str]]

def _same_axes(src: Sequence[Op], what: str) -> Axes:
    first = src[0].axes
    for s in src[1:]:
        if s.axes != first:
            raise AxesError(
                f"{what}: operands must have identical axes after alignment; received "
                f"{format_axes(first)} and {format_axes(s.axes)}; hint: build element-wise ops "
                "through ngraph_core's API, which aligns axes by name"
            )
    return first


def _given(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    assert axes is not None and dtype is not None
    return Axes(axes), dtype


def _unary(src, arg, axes, dtype):
    return src[0].axes, src[0].dtype


def _cast(src, arg, axes, dtype):
    if dtype not in ALL_DTYPES:
        raise DTypeError(f"cast: expected one of {ALL_DTYPES}, received {dtype!r}")
    return src[0].axes, dtype


def _binary(src, arg, axes, dtype):
    return _same_axes(src, "element-wise op"), promote(*(s.dtype for s in src))


def _where(src, arg, axes, dtype):
    return _same_axes(src, "where"), promote(src[1].dtype, src[2].dtype)


def _reduce(src, arg, axes, dtype):
    out = Axes(axes)
    if not out.is_subset_of(src[0].axes):
        raise AxesError(
            f"reduction: kept axes {format_axes(out)} must be a subset of the input's "
            f"{format_axes(src[0].axes)}; hint: pass reduction_axes= or out_axes= drawn from the input"
        )
    return out, src[0].dtype


def _arg_reduce(src, arg, axes, dtype):
    out, _ = _reduce(src, arg, axes, dtype)
    reduced = src[0].axes - out
    if len(reduced) != 1:
        raise AxesError(
            f"argmax/argmin: expected exactly one reduction axis, received {format_axes(reduced)}; "
            "hint: flatten the axes first, or reduce one axis at a time"
        )
    return out, "int64"


def _broadcast(src, arg, axes, dtype):
    out = Axes(axes)
    if not src[0].axes.is_subset_of(out):
        raise AxesError(
            f"broadcast: input axes {format_axes(src[0].axes)} must all appear in the target "
            f"{format_axes(out)}; hint: rename axes with ng.cast_axes first"
        )
    return out, src[0].dtype


def _cast_axes(src, arg, axes, dtype):
    out = Axes(axes)
    if out.lengths != src[0].axes.lengths:
        raise AxesError(
            f"cast_axes: new axes {format_axes(out)} must have the lengths of the old "
            f"{format_axes(src[0].axes)} in order; hint: cast_axes only renames axes"
        )
    return out, src[0].dtype


def _reshape(src, arg, axes, dtype):
    out = Axes(axes)
    if out.size != src[0].axes.size:
        raise AxesError(
            f"reshape: {format_axes(out)} holds {out.size} elements but the input "
            f"{format_axes(src[0].axes)} holds {src[0].axes.size}"
        )
    return out, src[0].dtype


def slice_length(length: int, start: int, stop: int, step: int) -> int:
    """How many elements ``(start, stop, step)`` selects: ``len(range(start, stop, step))``.

    ``length`` is the axis length; the caller checks the selected indices against it
    (``check_strided_range``)."""
    return len(range(start, stop, step))


def check_strided_range(what: str, axis: Axis, start: int, step: int, count: int) -> None:
    """Every index ``start + step * i`` (``0 <= i < count``) must lie in ``[0, axis.length)``.

    Kernels index buffers with these numbers (a compiled loop without bounds checks too), so an
    index past the axis would read or write outside the buffer: every slice and pad is checked here,
    when the op is built and when a graph document is decoded.

    Raises:
        AxesError: a zero step, or a first or last index outside the axis.
    """
    if step == 0:
        raise AxesError(f"{what}: step must be nonzero, received 0 for axis {axis}")
    if count == 0:
        if not 0 <= start <= axis.length:
            raise AxesError(f"{what}: start {start} is outside axis {axis} (expected 0 <= start <= {axis.length} "
                            "for an empty range); hint: build slices with ng.tensor_slice")
        return
    last = start + step * (count - 1)
    if not (0 <= start < axis.length and 0 <= last < axis.length):
        raise AxesError(
            f"{what}: indices {start}, {start + step}, ... {last} (step {step}, {count} elements) run outside axis "
            f"{axis}; expected every index in [0, {axis.length}); hint: build slices with ng.tensor_slice, which "
            "clips them to the axis"
        )


def _slice(src, arg, axes, dtype):
    x = src[0]
    if len(arg) != len(x.axes):
        raise AxesError(f"slice: expected one slice per input axis ({len(x.axes)}), received {len(arg)}")
    kept = []
    for axis, s in zip(x.axes, arg):
        if isinstance(s, int):
            if not 0 <= s < axis.length:
                raise AxesError(f"slice: index {s} is out of range for axis {axis}")
            continue
        start, stop, step = s
        if step == 0:
            raise AxesError(f"slice: step must be nonzero, received 0 for axis {axis}")
        count = slice_length(axis.length, start, stop, step)
        if count == 0:  # an empty range's start and stop only need to be a canonical pair (slice.indices)
            low = -1 if step < 0 else 0
            if not (low <= start <= axis.length and low <= stop <= axis.length):
                raise AxesError(f"slice: empty range ({start}, {stop}, {step}) outside axis {axis}; hint: build "
                                "slices with ng.tensor_slice")
        else:
            check_strided_range("slice", axis, start, step, count)
        kept.append(axis.with_length(count))
    return Axes(kept), x.dtype


def _pad(src, arg, axes, dtype):
    x, out = src[0], Axes(axes)
    if len(arg) != len(out):
        raise AxesError(f"pad: expected one entry per output axis ({len(out)}), received {len(arg)}")
    placed = [a for a, p in zip(out, arg) if not isinstance(p, int)]
    if [a.name for a in placed] != list(x.axes.names):
        raise AxesError(f"pad: input axes {format_axes(x.axes)} do not match output {format_axes(out)}")
    for axis, p in zip(out, arg):
        if isinstance(p, int) and not 0 <= p < axis.length:
            raise AxesError(f"pad: index {p} is out of range for the new axis {axis}; expected 0 <= index < "
                            f"{axis.length}")
    for axis, inner, (start, step) in zip(placed, x.axes, (p for p in arg if not isinstance(p, int))):
        if step == 0:
            raise AxesError(f"pad: step must be nonzero, received 0 for axis {axis}")
        if not 0 <= start <= axis.length:
            raise AxesError(f"pad: input axis {inner} placed at {start}::{step} starts outside {axis}")
        if inner.length:
            check_strided_range(f"pad: input axis {inner} placed at {start}::{step}", axis, start, step, inner.length)
    return out, x.dtype


def _concat(src, arg, axes, dtype):
    name = arg
    first = src[0].axes
    total = 0
    for s in src:
        if s.axes.names != first.names:
            raise AxesError(
                f"concat along {name!r}: every input must have axes named {list(first.names)} in order, "
                f"received {format_axes(s.axes)}"
            )
        for a, b in zip(s.axes, first):
            if a.name != name and a != b:
                raise AxesError(f"concat along {name!r}: axis {a} differs from {b} of the first input")
        axis = s.axes.find(name)
        if axis is None:
            raise AxesError(f"concat: input {format_axes(s.axes)} has no axis named {name!r}")
        total += axis.length
    return Axes(a.with_length(total) if a.name == name else a for a in first), promote(*(s.dtype for s in src))


def _dot(src, arg, axes, dtype):
    a, b = src
    a.axes.check_compatible(b.axes)
    shared = a.axes & b.axes
    out = (a.axes - shared) + (b.axes - shared)
    if axes is not None and axes != out:  # a chosen output order (passes/scan_layout): the same axes, permuted
        if not axes.same_set(out):
            raise AxesError(f"dot: output axes {format_axes(axes)} are not a reordering of {format_axes(out)}; "
                            "hint: a dot's output holds a's free axes and b's free axes, in any order")
        out = axes
    return out, promote(a.dtype, b.dtype)


def _batch_dot(src, arg, axes, dtype):
    a, b = src
    a.axes.check_compatible(b.axes)
    if axes is None:
        raise AxesError("batch_dot: expected output axes (the batch axes, a's free axes, b's free axes), received "
                        "none; hint: build it with ng.batch_dot(a, b, batch_axes)")
    shared = a.axes & b.axes
    out = Axes(axes)
    batch = shared & out
    if not out.same_set(batch + (a.axes - shared) + (b.axes - shared)):
        raise AxesError(
            f"batch_dot: output axes {format_axes(out)} are not the kept shared axes plus the free axes of "
            f"{format_axes(a.axes)} and {format_axes(b.axes)}; hint: ng.batch_dot(a, b, batch_axes) chooses them"
        )
    return out, promote(a.dtype, b.dtype)


def lookup_axes(table: Axes, name: Any, ids: Op, what: str) -> Axes:
    """The axes of ``gather(table, ids)`` along the axis called ``name``: the table's other axes, then ids'.

    Raises ``AxesError`` when the table lacks the axis or shares an axis name with the ids,
    ``DTypeError`` when the ids are not integers.
    """
    axis = table.find(name) if isinstance(name, str) else None
    if axis is None:
        raise AxesError(
            f"{what}: expected a table with an axis named {name!r}, received {format_axes(table)}; "
            "hint: pass one of the table's own axes to look rows up along"
        )
    if ids.dtype not in INT_DTYPES or ids.dtype == "bool":
        raise DTypeError(
            f"{what}: expected integer ids ({', '.join(INT_DTYPES[1:])}), received {ids.dtype}; "
            "hint: ng.cast(ids, 'int64') first"
        )
    rest = table - Axes([axis])
    shared = [a for a in ids.axes.names if a in rest.names]
    if shared:
        raise AxesError(
            f"{what}: the ids {format_axes(ids.axes)} share the axis name(s) {shared} with the table's other "
            f"axes {format_axes(rest)}; expected distinct names; hint: rename them with ng.cast_axes"
        )
    return rest + ids.axes


def _gather(src, arg, axes, dtype):
    table, ids = src
    return lookup_axes(table.axes, lookup_name(arg), ids, "gather"), table.dtype


def _scatter_add(src, arg, axes, dtype):
    updates, ids = src
    out = _given_axes(axes, "scatter_add", "table")
    expected = lookup_axes(out, arg, ids, "scatter_add")
    if updates.axes != expected:
        raise AxesError(
            f"scatter_add: expected updates with the axes of gather(table, ids) {format_axes(expected)}, received "
            f"{format_axes(updates.axes)}; hint: the updates are the upstream gradient of a gather"
        )
    return out, updates.dtype


def _float_operands(src: Sequence[Op], what: str) -> str:
    for s in src:
        if not is_float(s.dtype):
            raise DTypeError(f"{what}: expected float operands, received {s.dtype}; hint: ng.cast(x, 'float32') first")
    return promote(*(s.dtype for s in src))


def _given_axes(axes: Axes | None, what: str, role: str) -> Axes:
    if axes is None:
        raise AxesError(f"{what}: expected the axes of the {role} (axes=...), received none")
    return axes


def _check_conv_output(dy: Axes, k: int, spatial: Axes, batch: object, what: str) -> None:
    """``dy`` must have the roles and lengths of the convolution's output ``[K, *spatial, N]``."""
    dr = activation_roles(dy, what)
    if dr.channel.length != k or dr.spatial.lengths != spatial.lengths or dr.batch != batch:
        raise AxesError(
            f"{what}: expected a gradient shaped like the convolution's output [K:{k}, "
            f"{', '.join(str(a) for a in spatial)}, {batch}], received {format_axes(dy)}; hint: the gradient has "
            "the output's axes"
        )


def _conv(src, arg: ConvArg, axes, dtype):
    x, w = src
    dtype = _float_operands(src, "conv")
    xr, wr, spatial = check_conv(x.axes, w.axes, arg, "conv")
    return Axes([wr.out_channels, *spatial, xr.batch]), dtype


def _conv_bprop_data(src, arg: ConvArg, axes, dtype):
    dy, w = src
    dtype = _float_operands(src, "conv_bprop_data")
    axes = _given_axes(axes, "conv_bprop_data", "convolution's input")
    xr, wr, spatial = check_conv(axes, w.axes, arg, "conv_bprop_data")
    _check_conv_output(dy.axes, wr.out_channels.length, spatial, xr.batch, "conv_bprop_data")
    return axes, dtype


def _conv_bprop_filter(src, arg: ConvArg, axes, dtype):
    x, dy = src
    dtype = _float_operands(src, "conv_bprop_filter")
    axes = _given_axes(axes, "conv_bprop_filter", "filter")
    xr, wr, spatial = check_conv(x.axes, axes, arg, "conv_bprop_filter")
    _check_conv_output(dy.axes, wr.out_channels.length, spatial, xr.batch, "conv_bprop_filter")
    return axes, dtype


def _pool(src, arg: PoolArg, axes, dtype):
    dtype = _float_operands(src, "pool")
    return check_pool(src[0].axes, arg, "pool")[1], dtype


def _pool_bprop(src, arg: PoolArg, axes, dtype):
    """``pool_bprop(dy)`` for avg, ``pool_bprop(dy, x)`` for max (it finds each window's maximum in x)."""
    dtype = _float_operands(src, "pool_bprop")
    axes = _given_axes(axes, "pool_bprop", "pooling's input")
    out = check_pool(axes, arg, "pool_bprop")[1]
    expected = 2 if arg.op == "max" else 1
    if len(src) != expected:
        raise AxesError(f"pool_bprop ({arg.op}): expected {expected} input(s), received {len(src)}")
    if src[0].axes != out:
        raise AxesError(
            f"pool_bprop: expected a gradient with the pooling's output axes {format_axes(out)}, received "
            f"{format_axes(src[0].axes)}"
        )
    if expected == 2 and src[1].axes != axes:
        raise AxesError(f"pool_bprop: the input {format_axes(src[1].axes)} differs from axes {format_axes(axes)}")
    return axes, dtype


def _assign(src, arg, axes, dtype):
    var, value = src
    if var.op is not OpType.VARIABLE:
        raise DTypeError(f"assign: expected a variable as the target, received a {var.op.value} op")
    if value.axes != var.axes:
        raise AxesError(
            f"assign: value axes {format_axes(value.axes)} differ from the variable's {format_axes(var.axes)}"
        )
    return var.axes, var.dtype


def _sequential(src, arg, axes, dtype):
    return src[-1].axes, src[-1].dtype


def _doall(src, arg, axes, dtype):
    return Axes(()), "float32"


MOMENTS_AXIS = Axis("moments", 2)
"""The leading axis of ``moments`` and ``centered_sums``: index 0 and 1 are their two statistics."""


def _statistics(name: str, x: Op, axes: Axes | None) -> Axes:
    """``[moments:2, *kept]`` for statistics of ``x`` over the axes not in ``axes`` (the kept ones;
    ``axes`` may also be that whole output, as a rebuilt or deserialized op passes it)."""
    kept = Axes(_given_axes(axes, name, "the kept (per-feature) axes"))
    if len(kept) and kept[0] == MOMENTS_AXIS:
        kept = Axes(list(kept)[1:])
    if not kept.is_subset_of(x.axes) or kept == x.axes or MOMENTS_AXIS in kept:
        raise AxesError(
            f"{name}: expected kept axes drawn from the input's {format_axes(x.axes)}, leaving at least one "
            f"axis to reduce, received {format_axes(kept)}; hint: pass the feature axis, e.g. [C] of [C, H, W, N]"
        )
    return Axes([MOMENTS_AXIS, *kept])


def _moments(src, arg, axes, dtype):
    (x,) = src
    return _statistics("moments", x, axes), _float_operands(src, "moments")


def _centered_sums(src, arg, axes, dtype):
    dy, x, mean = src
    dtype = _float_operands(src, "centered_sums")
    if not dy.axes.same_set(x.axes):
        raise AxesError(
            f"centered_sums: expected a gradient with the input's axes {format_axes(x.axes)}, received "
            f"{format_axes(dy.axes)}"
        )
    out = _statistics("centered_sums", x, mean.axes)
    return out, dtype


def _custom_gradient(src, arg, axes, dtype):
    return src[0].axes, src[0].dtype


def _call(src, arg, axes, dtype):
    if not isinstance(arg, CallArg):
        raise AxesError(f"call: expected a CallArg (sub-graph and result index), received {type(arg).__name__}")
    params, roots = arg.graph.params, arg.graph.roots
    if len(src) != len(params):
        raise AxesError(f"call: the sub-graph takes {len(params)} input(s), received {len(src)}")
    for i, (x, p) in enumerate(zip(src, params)):
        if x.axes != p.axes or x.dtype != p.dtype:
            raise AxesError(
                f"call: input {i} has {format_axes(x.axes)} {x.dtype}; expected {format_axes(p.axes)} {p.dtype} "
                f"like the sub-graph's param {p.name}; hint: ng.cast_axes / ng.cast the input first"
            )
    if not 0 <= arg.index < len(roots):
        raise AxesError(f"call: result index {arg.index} out of range for {len(roots)} result(s)")
    return roots[arg.index].axes, roots[arg.index].dtype


INFER: dict[OpType, Rule] = {
    **{t: _given for t in OpGroup.LEAF | OpGroup.RANDOM | {OpType.FUSED}},
    **{t: _unary for t in OpGroup.UNARY - {OpType.CAST}},
    OpType.CAST: _cast,
    **{t: _binary for t in OpGroup.BINARY | OpGroup.COMPARISON},
    OpType.WHERE: _where,
    OpType.ISNAN: infer_float_test,
    OpType.ISINF: infer_float_test,
    **{t: infer_logical for t in (OpType.LOGICAL_NOT, OpType.LOGICAL_AND, OpType.LOGICAL_OR, OpType.LOGICAL_XOR)},
    **{t: infer_bitwise for t in (OpType.BITWISE_NOT, OpType.BITWISE_AND, OpType.BITWISE_OR, OpType.BITWISE_XOR,
                                  OpType.BIT_SHIFT)},
    **{t: _reduce for t in (OpType.SUM, OpType.MAX, OpType.MIN, OpType.PROD)},
    OpType.ARGMAX: _arg_reduce,
    OpType.ARGMIN: _arg_reduce,
    OpType.BROADCAST: _broadcast,
    OpType.CAST_AXES: _cast_axes,
    OpType.RESHAPE: _reshape,
    OpType.SLICE: _slice,
    OpType.PAD: _pad,
    OpType.CONCAT: _concat,
    OpType.GATHER: _gather,
    OpType.SCATTER_ADD: _scatter_add,
    OpType.CUMSUM: infer_cumulative,
    OpType.CUMPROD: infer_cumulative,
    OpType.TOPK: infer_topk,
    OpType.GATHER_ELEMENTS: infer_gather_elements,
    OpType.SCATTER_ELEMENTS: infer_scatter_elements,
    OpType.GATHER_ND: infer_gather_nd,
    OpType.SCATTER_ND: infer_scatter_nd,
    OpType.DOT: _dot,
    OpType.BATCH_DOT: _batch_dot,
    OpType.CONV: _conv,
    OpType.CONV_BPROP_DATA: _conv_bprop_data,
    OpType.CONV_BPROP_FILTER: _conv_bprop_filter,
    OpType.POOL: _pool,
    OpType.POOL_BPROP: _pool_bprop,
    OpType.MOMENTS: _moments,
    OpType.CENTERED_SUMS: _centered_sums,
    OpType.CTC: infer_ctc,
    OpType.CTC_GRAD: infer_ctc_grad,
    OpType.ASSIGN: _assign,
    OpType.SEQUENTIAL: _sequential,
    OpType.DOALL: _doall,
    OpType.CUSTOM_GRADIENT: _custom_gradient,
    OpType.CALL: _call,
    OpType.SCAN: infer_scan,
    OpType.SCAN_RESULT: infer_scan_result,
    OpType.ALLREDUCE: infer_allreduce,
    OpType.BROADCAST_FROM: infer_broadcast_from,
    OpType.ALLREDUCE_START: infer_allreduce_start,
    OpType.ALLREDUCE_WAIT: infer_allreduce_wait,
    OpType.FUSED_ATTENTION: infer_attention,
}

ARITY: dict[OpType, int | None] = {
    **{t: 0 for t in OpGroup.LEAF | OpGroup.RANDOM},
    **{t: 1 for t in OpGroup.UNARY | OpGroup.REDUCE},
    **{t: 2 for t in OpGroup.BINARY | OpGroup.COMPARISON},
    OpType.WHERE: 3,
    **{t: 1 for t in OpGroup.MOVEMENT - {OpType.CONCAT, OpType.GATHER, OpType.SCATTER_ADD}},
    OpType.CONCAT: None,
    OpType.GATHER: 2,  # (table, ids)
    OpType.SCATTER_ADD: 2,  # (updates, ids); axes: the table's
    OpType.GATHER_ELEMENTS: 2,  # (x, indices)
    OpType.SCATTER_ELEMENTS: 3,  # (x, indices, updates)
    OpType.GATHER_ND: 2,
    OpType.SCATTER_ND: 3,
    OpType.DOT: 2,
    OpType.BATCH_DOT: 2,
    **{t: 2 for t in (OpType.CONV, OpType.CONV_BPROP_DATA, OpType.CONV_BPROP_FILTER)},
    OpType.POOL: 1,
    OpType.POOL_BPROP: None,  # (dy) for avg, (dy, x) for max
    OpType.MOMENTS: 1,
    OpType.CENTERED_SUMS: 3,  # (dy, x, mean)
    OpType.CTC: 4,  # (logits, labels, input_lengths, label_lengths)
    OpType.CTC_GRAD: 4,  # the same sources as ctc
    OpType.ASSIGN: 2,
    OpType.SEQUENTIAL: None,
    OpType.DOALL: None,
    OpType.CUSTOM_GRADIENT: None,
    OpType.CALL: None,
    OpType.SCAN: None,  # (*sequences, *initial states, *extras[, lengths])
    OpType.SCAN_RESULT: 1,
    OpType.FUSED: None,
    OpType.ALLREDUCE: 1,
    OpType.BROADCAST_FROM: 1,
    OpType.ALLREDUCE_START: None,  # the bucket's members
    OpType.ALLREDUCE_WAIT: None,  # every start of the computation (its own at arg.index)
    OpType.FUSED_ATTENTION: None,  # (q, k, v[, key_lengths])
}


def infer(op: OpType, src: Sequence[Op], arg: Any = None, axes: Any = None,
          dtype: str | None = None) -> tuple[Axes, str]:
    """The axes and dtype of an ``op`` over ``src``; raises ``AxesError``/``DTypeError``."""
    arity = ARITY[op]
    if arity is not None and len(src) != arity:
        raise AxesError(f"{op.value}: expected {arity} input(s), received {len(src)}")
    if arity is None and not src:
        raise AxesError(f"{op.value}: expected at least one input, received none")
    return INFER[op](src, arg, None if axes is None else Axes(axes), dtype)


def make(op: OpType, src: Sequence[Op] = (), arg: Any = None, axes: Any = None, dtype: str | None = None,
         **meta: Any) -> Op:
    """Infer axes and dtype, then construct (hash-consed) the op."""
    out_axes, out_dtype = infer(op, src, arg, axes, dtype)
    return Op(op, src, out_axes, out_dtype, arg, **meta)
