"""Positional indexing along axes (the ONNX operators CumSum, TopK, GatherElements, ScatterElements,
GatherND, ScatterND): running sums and products, the k largest values, element and index-tuple
gathers and scatters.

An ``axis`` argument is an ``Axis`` of the input, its name, or its position (negative counts
from the end, as ONNX does). Indices are integers; negative ones count from the end, and those
out of range read 0 / write nothing (a graph cannot raise at run time). Element and index-tuple
indices are matched to the input *by position*, as in ONNX.

Gradients: ``cumsum`` (a reversed cumsum of the upstream gradient), ``cumprod`` (for nonzero
inputs), ``gather_elements`` and ``gather_nd`` (a scatter-add of the upstream gradient) and the
values of ``topk`` (through its gather) have them; the scatters and topk's indices do not.

Example:
    >>> values, indices = ng.topk(scores, "C", k=5)
"""

from __future__ import annotations

from typing import Any

from ..errors import AxesError, DTypeError
from ..ir import Axis, Op, OpType, format_axes, make
from ..ir.indexing import REDUCTIONS, CumArg, ElementsArg, NdArg, TopKArg
from .tensors import as_op

AxisRef = Axis | str | int


def axis_name(x: Op, axis: AxisRef, what: str) -> str:
    """The name of ``axis`` (an Axis, a name or a position of ``x``), checked against ``x``'s axes."""
    if isinstance(axis, int) and not isinstance(axis, bool):
        if not -len(x.axes) <= axis < len(x.axes):
            raise AxesError(f"{what}: axis position {axis} is out of range for {format_axes(x.axes)}; "
                            f"hint: positions run from {-len(x.axes)} to {len(x.axes) - 1}")
        return x.axes[axis].name
    name = axis.name if isinstance(axis, Axis) else axis
    if not isinstance(name, str) or x.axes.find(name) is None:
        raise AxesError(f"{what}: expected an axis of the input {format_axes(x.axes)}, received {axis!r}; "
                        "hint: pass one of x.axes, its name, or its position")
    return name


def _reduction(reduction: str, what: str) -> str:
    if reduction not in REDUCTIONS:
        raise AxesError(f"{what}: expected a reduction among {REDUCTIONS}, received {reduction!r}")
    return reduction


def _cumulative(kind: OpType, x: Any, axis: AxisRef, exclusive: bool, reverse: bool) -> Op:
    x = as_op(x, where=kind.value)
    if x.dtype == "bool":
        raise DTypeError(f"{kind.value}: expected a number input, received bool; hint: ng.cast(x, 'int64') first")
    arg = CumArg(axis_name(x, axis, kind.value), bool(exclusive), bool(reverse))
    return make(kind, [x], arg=arg)


def cumsum(x: Any, axis: AxisRef, exclusive: bool = False, reverse: bool = False) -> Op:
    """Running sums of ``x`` along ``axis`` (ONNX CumSum).

    Args:
        x: a numeric op.
        axis: the axis to run along (an Axis, its name or position).
        exclusive: each position sums the ones before it only (the first gets 0).
        reverse: run from the end of the axis.

    Returns:
        An op with x's axes and dtype. Its gradient is the upstream gradient's cumsum with the
        same ``exclusive`` and the opposite ``reverse``.

    Raises:
        AxesError: ``axis`` is not an axis of x.
        DTypeError: x is bool.

    Example:
        >>> ng.cumsum(x, "T")  # [1, 2, 3] -> [1, 3, 6]; exclusive: [0, 1, 3]; reverse: [6, 5, 3]
    """
    return _cumulative(OpType.CUMSUM, x, axis, exclusive, reverse)


def cumprod(x: Any, axis: AxisRef, exclusive: bool = False, reverse: bool = False) -> Op:
    """Running products of ``x`` along ``axis`` (``exclusive``/``reverse`` as for ``cumsum``).

    Its gradient divides by x, so it needs nonzero inputs (as ``ng.prod``'s does).

    Example:
        >>> ng.cumprod(x, "T")  # [1, 2, 3] -> [1, 2, 6]
    """
    return _cumulative(OpType.CUMPROD, x, axis, exclusive, reverse)


def topk(x: Any, axis: AxisRef, k: int, largest: bool = True, sorted: bool = True) -> tuple[Op, Op]:  # noqa: A002
    """The ``k`` largest (or smallest) values along ``axis`` and their int64 positions (ONNX TopK).

    Ties go to the lower position; NaN counts as the largest value. The result axis has
    ``axis``'s name and length ``k``. The values are ``gather_elements(x, indices, axis)``, so
    their gradient flows back to the chosen positions.

    Args:
        x: a numeric op.
        axis: the axis to select along (an Axis, its name or position).
        k: how many, ``0 <= k <= axis length``.
        largest: the largest first (else the smallest first).
        sorted: accepted for ONNX; the results are always in order.

    Returns:
        ``(values, indices)``: x's dtype and int64, both with x's axes with ``axis`` of length k.

    Raises:
        AxesError: ``axis`` is not x's, or k is out of range.

    Example:
        >>> values, indices = ng.topk(logits, "C", 3)
    """
    x = as_op(x, where="topk")
    name = axis_name(x, axis, "topk")
    if not isinstance(k, int) or isinstance(k, bool):
        raise AxesError(f"topk: expected an int k, received {k!r}")
    indices = make(OpType.TOPK, [x], arg=TopKArg(name, k, bool(largest), bool(sorted)))
    return gather_elements(x, indices, name), indices


def gather_elements(x: Any, indices: Any, axis: AxisRef) -> Op:
    """``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``axis`` (ONNX GatherElements).

    Args:
        x: the op to read.
        indices: integers of x's rank, matched to x by position; along the other axes no
            longer than x's.
        axis: the axis the indices index (an Axis of x, its name or position).

    Returns:
        An op with the indices' axes and x's dtype; its gradient scatter-adds the upstream
        gradient into x's positions.

    Raises:
        AxesError: ranks or lengths do not fit. DTypeError: the indices are not integers.

    Example:
        >>> picked = ng.gather_elements(x, idx, "C")  # x [C:5, N:4], idx [C:1, N:4]
    """
    x = as_op(x, where="gather_elements")
    return make(OpType.GATHER_ELEMENTS, [x, as_op(indices, where="gather_elements")],
                arg=ElementsArg(axis_name(x, axis, "gather_elements")))


def scatter_elements(x: Any, indices: Any, updates: Any, axis: AxisRef, reduction: str = "none") -> Op:
    """x with ``updates`` written at ``indices`` along ``axis`` (ONNX ScatterElements).

    Args:
        x: the op to update (not changed: the result is a new value).
        indices: integers of x's rank, matched by position.
        updates: values shaped like the indices.
        axis: the axis the indices index.
        reduction: ``"none"`` (replace; for repeated positions one update wins), ``"add"``,
            ``"mul"``, ``"max"`` or ``"min"`` (combine with x's value and each other).

    Returns:
        An op with x's axes and dtype (no gradient).

    Raises:
        AxesError: shapes do not fit, or an unknown reduction. DTypeError: non-integer indices.

    Example:
        >>> ng.scatter_elements(x, idx, u, "C", reduction="add")
    """
    x = as_op(x, where="scatter_elements")
    arg = ElementsArg(axis_name(x, axis, "scatter_elements"), _reduction(reduction, "scatter_elements"))
    src = [x, as_op(indices, where="scatter_elements"), as_op(updates, x, "scatter_elements")]
    return make(OpType.SCATTER_ELEMENTS, src, arg=arg)


def gather_nd(x: Any, indices: Any, batch_dims: int = 0) -> Op:
    """Slices of x at index tuples: the last axis of ``indices`` holds them (ONNX GatherND).

    Args:
        x: the op to read, ``[*batch, *indexed (q axes), *rest]``.
        indices: integers ``[*batch, *positions, q]``; the first ``batch_dims`` lengths are x's.
        batch_dims: how many leading axes x and indices share.

    Returns:
        An op with axes ``indices.axes[:-1] + x.axes[batch_dims + q:]`` and x's dtype; its
        gradient scatter-adds the upstream gradient into x.

    Raises:
        AxesError: lengths do not fit, or the result would repeat an axis name (rename the
            indices' axes with ``ng.cast_axes``). DTypeError: non-integer indices.

    Example:
        >>> rows = ng.gather_nd(table, ids)  # table [V, E], ids [N, Q:1] -> [N, E]
    """
    x = as_op(x, where="gather_nd")
    return make(OpType.GATHER_ND, [x, as_op(indices, where="gather_nd")], arg=NdArg(int(batch_dims)))


def scatter_nd(x: Any, indices: Any, updates: Any, reduction: str = "none", batch_dims: int = 0) -> Op:
    """x with ``updates`` written at the index tuples of ``indices`` (ONNX ScatterND).

    Args:
        x: the op to update.
        indices: integers ``[*batch, *positions, q]`` (as for ``gather_nd``).
        updates: values with the lengths ``gather_nd(x, indices, batch_dims)`` would have.
        reduction: ``"none"``, ``"add"``, ``"mul"``, ``"max"`` or ``"min"``.
        batch_dims: leading axes x and indices share (ONNX ScatterND has none).

    Returns:
        An op with x's axes and dtype (no gradient).

    Raises:
        AxesError: lengths do not fit, or an unknown reduction. DTypeError: non-integer indices.

    Example:
        >>> ng.scatter_nd(x, ids, rows, reduction="add")
    """
    x = as_op(x, where="scatter_nd")
    arg = NdArg(int(batch_dims), _reduction(reduction, "scatter_nd"))
    src = [x, as_op(indices, where="scatter_nd"), as_op(updates, x, "scatter_nd")]
    return make(OpType.SCATTER_ND, src, arg=arg)
