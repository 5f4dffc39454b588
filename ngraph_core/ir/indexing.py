"""Positional indexing along axes (ONNX semantics): the args and axes/dtype rules of seven ops.

* ``cumsum(x)``, ``cumprod(x)`` (``CumArg``): running sums / products along a named axis,
  optionally exclusive (each position leaves itself out) and reversed (from the end); x's axes.
* ``topk(x)`` (``TopKArg``): the int64 positions along ``axis`` of the ``k`` largest (or
  smallest) values, ties to the lower position; x's axes with that axis of length ``k``.
* ``gather_elements(x, indices)`` / ``scatter_elements(x, indices, updates)`` (``ElementsArg``):
  ``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``axis``, and its write.
  ``indices`` has x's rank and is matched to x *by position* (ONNX); its other lengths are at
  most x's. The gather has indices' axes; the scatter x's, with updates shaped like indices.
* ``gather_nd(x, indices)`` / ``scatter_nd(x, indices, updates)`` (``NdArg``): the last axis of
  ``indices`` (length q) holds index tuples into x's axes after ``batch_dims`` leading axes
  shared with indices; the gather has ``indices.axes[:-1] + x.axes[batch_dims + q:]``.

Indices may be negative (counted from the end). Out of range ones read 0 and write nothing (a
graph cannot raise at run time), as ``gather`` does. ``reduction`` of a scatter is ``"none"``
(replace; repeated positions: one of the updates wins), ``"add"``, ``"mul"``, ``"max"``, ``"min"``.

Example:
    >>> make(OpType.TOPK, [x], arg=TopKArg("C", k=2))  # int64 [C:2, N]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..errors import AxesError, DTypeError
from .axes import Axes, format_axes
from .codec import CodecContext, check_keys, check_type, fail, wrong_arg

if TYPE_CHECKING:
    from .node import Op

REDUCTIONS = ("none", "add", "mul", "max", "min")
INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_JSON_TYPES = {"str": str, "bool": bool, "int": int}


class _Record:
    """Arg protocol (ir/args.py) for a frozen dataclass of str / bool / int fields, JSON: an object of them."""

    @classmethod
    def check(cls, op: Op) -> str | None:
        """A message when ``op.arg`` is not this class with fields of the declared types and valid values."""
        a = op.arg
        ok = isinstance(a, cls) and all(type(getattr(a, f.name)) is _JSON_TYPES[f.type] for f in fields(cls))
        problem = None if not ok else a.problem()
        if problem is None and ok:
            return None
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        return wrong_arg(op, f"{article} {cls.__name__}({', '.join(f'{f.name}: {f.type}' for f in fields(cls))})"
                         + (f" ({problem})" if problem else ""))

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """The fields as a JSON object."""
        return {f.name: getattr(op.arg, f.name) for f in fields(op.arg)}

    @classmethod
    def from_json(cls, data: Any, ctx: CodecContext, where: str) -> Any:
        """The arg ``to_json`` wrote; raises ``SerializationError`` on any other data."""
        check_keys(data, tuple(f.name for f in fields(cls)), where)
        arg = cls(**{f.name: check_type(data[f.name], _JSON_TYPES[f.type], where, f"{f.name} as {f.type}")
                     for f in fields(cls)})
        problem = arg.problem()
        if problem:
            raise fail(where, problem, data)
        return arg

    def problem(self) -> str | None:
        """What is wrong with the field values (None: nothing)."""
        return None

    def __repr__(self) -> str:
        return " ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


@dataclass(frozen=True, repr=False)
class CumArg(_Record):
    """``arg`` of ``cumsum`` / ``cumprod``: the axis name, and the ONNX ``exclusive`` / ``reverse`` flags."""

    axis: str
    exclusive: bool = False
    reverse: bool = False


@dataclass(frozen=True, repr=False)
class TopKArg(_Record):
    """``arg`` of ``topk``: the axis name, ``k``, largest (else smallest) first, sorted (always honoured)."""

    axis: str
    k: int
    largest: bool = True
    sorted: bool = True

    def problem(self) -> str | None:
        return None if self.k >= 0 else f"k >= 0, not {self.k}"


@dataclass(frozen=True, repr=False)
class ElementsArg(_Record):
    """``arg`` of ``gather_elements`` (reduction ``"none"``) and ``scatter_elements``."""

    axis: str
    reduction: str = "none"

    def problem(self) -> str | None:
        return None if self.reduction in REDUCTIONS else f"a reduction among {REDUCTIONS}"


@dataclass(frozen=True, repr=False)
class LookupArg(_Record):
    """``arg`` of a ``gather`` whose out-of-range ids raise (``ng.gather(..., out_of_range="raise")``, ONNX Gather).

    Ids lie in ``[-length, length)`` of the table axis ``axis``, negative ones counting from the end
    (``np.take``); any other id raises ``IndexRangeError`` when the graph runs. A gather that reads
    zero rows for such ids (the default, neon's ``LookupTable``) has the axis name alone as its arg,
    so the two never hash-cons into one op.
    """

    axis: str
    out_of_range: str = "raise"

    def problem(self) -> str | None:
        return None if self.out_of_range == "raise" else (
            "out_of_range 'raise' (a gather that reads zero rows has the axis name alone as its arg)")


def lookup_name(arg: Any) -> str:
    """The table axis's name in a ``gather``'s arg (the name itself, or a ``LookupArg``'s ``axis``)."""
    return arg.axis if isinstance(arg, LookupArg) else arg


@dataclass(frozen=True, repr=False)
class NdArg(_Record):
    """``arg`` of ``gather_nd`` (reduction ``"none"``) and ``scatter_nd``: leading batch axes and reduction."""

    batch_dims: int = 0
    reduction: str = "none"

    def problem(self) -> str | None:
        if self.batch_dims < 0:
            return f"batch_dims >= 0, not {self.batch_dims}"
        return None if self.reduction in REDUCTIONS else f"a reduction among {REDUCTIONS}"


def _axis_position(x: Op, name: Any, what: str) -> int:
    if not isinstance(name, str) or x.axes.find(name) is None:
        raise AxesError(f"{what}: expected an axis of the input {format_axes(x.axes)}, received {name!r}; "
                        "hint: pass one of x.axes (or its name)")
    return x.axes.index(name)


def _check_indices(indices: Op, what: str) -> None:
    if indices.dtype not in INDEX_DTYPES:
        raise DTypeError(f"{what}: expected integer indices ({', '.join(INDEX_DTYPES)}), received {indices.dtype}; "
                         "hint: ng.cast(indices, 'int64') first")


def _check_lengths(got: Sequence[int], want: Sequence[int], role: str, src: Op, what: str, expect: str) -> None:
    if tuple(got) != tuple(want):
        raise AxesError(f"{what}: expected {role} with lengths {tuple(want)} ({expect}), received "
                        f"{format_axes(src.axes)}; hint: the ONNX semantics match axes by position")


def infer_cumulative(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``cumsum`` / ``cumprod``: x's axes and dtype; the axis must be x's."""
    _axis_position(src[0], getattr(arg, "axis", arg), "cumsum/cumprod")
    return src[0].axes, src[0].dtype


def infer_topk(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``topk``: int64 positions; x's axes with ``axis`` shortened to ``k``."""
    x = src[0]
    k = _axis_position(x, getattr(arg, "axis", arg), "topk")
    if not isinstance(arg, TopKArg) or not 0 <= arg.k <= x.axes[k].length:
        raise AxesError(f"topk: expected k in [0, {x.axes[k].length}] for axis {x.axes[k]}, received "
                        f"{getattr(arg, 'k', arg)!r}; hint: k cannot exceed the axis length")
    return Axes(a.with_length(arg.k) if i == k else a for i, a in enumerate(x.axes)), "int64"


def _elements(x: Op, indices: Op, arg: Any, what: str) -> int:
    k = _axis_position(x, getattr(arg, "axis", arg), what)
    _check_indices(indices, what)
    il, xl = indices.axes.lengths, x.axes.lengths
    if len(il) != len(xl) or any(i != k and a > b for i, (a, b) in enumerate(zip(il, xl))):
        raise AxesError(f"{what}: expected indices of the input's rank {len(xl)}, no longer than {xl} except along "
                        f"{x.axes[k]}, received {format_axes(indices.axes)}; hint: indices match x by position")
    return k


def infer_gather_elements(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``gather_elements(x, indices)``: indices' axes, x's dtype."""
    x, indices = src
    _elements(x, indices, arg, "gather_elements")
    return indices.axes, x.dtype


def infer_scatter_elements(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``scatter_elements(x, indices, updates)``: x's axes and dtype; updates shaped like indices."""
    x, indices, updates = src
    _elements(x, indices, arg, "scatter_elements")
    _check_lengths(updates.axes.lengths, indices.axes.lengths, "updates", updates, "scatter_elements",
                   "the indices' lengths")
    return x.axes, x.dtype


def _nd(x: Op, indices: Op, arg: Any, what: str) -> tuple[int, int]:
    """(batch_dims, q) after checking ``indices`` against ``x``."""
    _check_indices(indices, what)
    b = getattr(arg, "batch_dims", 0)
    if len(indices.axes) < b + 1:
        raise AxesError(f"{what}: expected indices with {b} batch axes and a last index-tuple axis, received "
                        f"{format_axes(indices.axes)}")
    q = indices.axes[-1].length
    if b + q > len(x.axes) or x.axes.lengths[:b] != indices.axes.lengths[:b]:
        raise AxesError(f"{what}: expected x with the indices' {b} batch lengths {indices.axes.lengths[:b]} then at "
                        f"least {q} axes to index, received {format_axes(x.axes)}; hint: the last axis of indices "
                        "is the length of each index tuple")
    return b, q


def gather_nd_axes(x: Op, indices: Op, arg: Any, what: str = "gather_nd") -> Axes:
    """The axes of ``gather_nd(x, indices)``: indices' axes but the last, then x's after batch_dims + q."""
    b, q = _nd(x, indices, arg, what)
    out = list(indices.axes)[:-1] + list(x.axes)[b + q:]
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise AxesError(f"{what}: the result would have the axes {format_axes(out)}, with a repeated name; "
                        "hint: rename the indices' axes with ng.cast_axes")
    return Axes(out)


def infer_gather_nd(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``gather_nd(x, indices)``: ``indices.axes[:-1] + x.axes[batch_dims + q:]``, x's dtype."""
    return gather_nd_axes(src[0], src[1], arg), src[0].dtype


def infer_scatter_nd(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``scatter_nd(x, indices, updates)``: x's axes and dtype; updates have gather_nd's lengths."""
    x, indices, updates = src
    b, q = _nd(x, indices, arg, "scatter_nd")
    want = indices.axes.lengths[:-1] + x.axes.lengths[b + q:]
    _check_lengths(updates.axes.lengths, want, "updates", updates, "scatter_nd", "gather_nd's result")
    return x.axes, x.dtype
