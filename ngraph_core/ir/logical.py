"""Element-wise tests, logic and bit ops: their args and axes/dtype inference rules.

These ops never compute floats, so the fusion pass never absorbs them and autodiff never
differentiates them (``OpGroup.LOGICAL``):

* ``isnan(x)``, ``isinf(x)`` -> bool, from a float ``x``; ``isinf``'s arg (``InfFlags``) says
  which infinities count (ONNX ``detect_positive`` / ``detect_negative``);
* ``logical_not``, ``logical_and``, ``logical_or``, ``logical_xor``: bool in, bool out;
* ``bitwise_not``, ``bitwise_and``, ``bitwise_or``, ``bitwise_xor``, ``bit_shift``: integers
  (not bool) in, the promoted integer out; ``bit_shift``'s arg is ``"left"`` or ``"right"``
  (``ShiftDirection``); shifting a signed int right is arithmetic (the sign is kept).

Element-wise operands arrive with identical axes (the API aligns them by name first).

Example:
    >>> make(OpType.ISINF, [x], arg=InfFlags(detect_positive=True, detect_negative=False))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import AxesError, DTypeError
from .axes import Axes, format_axes
from .codec import CodecContext, check_keys, check_type, fail, wrong_arg

if TYPE_CHECKING:
    from .node import Op

FLOATS = ("float16", "float32", "float64")
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
SHIFT_DIRECTIONS = ("left", "right")


@dataclass(frozen=True)
class InfFlags:
    """``arg`` of ``isinf``: which infinities give True.

    Attributes:
        detect_positive: ``+inf`` gives True.
        detect_negative: ``-inf`` gives True.
    """

    detect_positive: bool = True
    detect_negative: bool = True

    def __repr__(self) -> str:
        return f"positive={self.detect_positive} negative={self.detect_negative}"

    # -- as an op's arg (the protocol of ir/args.py) ------------------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not an InfFlags of two bools, else None."""
        a = op.arg
        ok = isinstance(a, InfFlags) and type(a.detect_positive) is bool and type(a.detect_negative) is bool
        return None if ok else wrong_arg(op, "an InfFlags(detect_positive: bool, detect_negative: bool)")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"detect_positive", "detect_negative"}``."""
        return {"detect_positive": op.arg.detect_positive, "detect_negative": op.arg.detect_negative}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> InfFlags:
        """The InfFlags ``to_json`` wrote; raises ``SerializationError`` on any other data."""
        check_keys(data, ("detect_positive", "detect_negative"), where)
        return InfFlags(check_type(data["detect_positive"], bool, where, "true or false"),
                        check_type(data["detect_negative"], bool, where, "true or false"))


class ShiftDirection:
    """``arg`` of ``bit_shift``: the string ``"left"`` or ``"right"``; JSON: the string."""

    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not ``"left"`` or ``"right"``, else None."""
        return None if op.arg in SHIFT_DIRECTIONS else wrong_arg(op, "'left' or 'right'")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> str:
        """The direction string."""
        return op.arg

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> str:
        """The direction; raises ``SerializationError`` on anything but ``"left"`` / ``"right"``."""
        if data not in SHIFT_DIRECTIONS:
            raise fail(where, "'left' or 'right'", data)
        return data


def _same_axes(src: Sequence[Op], what: str) -> Axes:
    for s in src[1:]:
        if s.axes != src[0].axes:
            raise AxesError(
                f"{what}: operands must have identical axes after alignment; received {format_axes(src[0].axes)} "
                f"and {format_axes(s.axes)}; hint: build element-wise ops through ngraph_core's API"
            )
    return src[0].axes


def _require(src: Sequence[Op], allowed: tuple[str, ...], what: str, hint: str) -> None:
    for s in src:
        if s.dtype not in allowed:
            raise DTypeError(f"{what}: expected {' or '.join(allowed)} operands, received {s.dtype}; hint: {hint}")


def infer_float_test(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``isnan`` / ``isinf``: a float input, a bool output of its axes."""
    _require(src, FLOATS, "isnan/isinf", "integers are never NaN or infinite")
    return src[0].axes, "bool"


def infer_logical(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``logical_*``: bool operands of identical axes, a bool output."""
    _require(src, ("bool",), "logical op", "compare first (x != 0), or ng.cast(x, 'bool')")
    return _same_axes(src, "logical op"), "bool"


def infer_bitwise(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``bitwise_*`` and ``bit_shift``: integer operands of identical axes, the widest of their dtypes."""
    _require(src, INTEGERS, "bit op", "bit ops take integers; use logical_* for bool")
    if arg is not None and arg not in SHIFT_DIRECTIONS:
        raise AxesError(f"bit_shift: expected direction 'left' or 'right', received {arg!r}")
    widest = max((s.dtype for s in src), key=lambda d: (np.dtype(d).itemsize, d.startswith("int")))
    return _same_axes(src, "bit op"), widest
