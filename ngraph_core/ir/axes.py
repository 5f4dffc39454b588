"""Named axes: ``Axis`` (a name and a length) and ``Axes`` (an ordered set of them).

Axes are values: two axes are equal when name and length are both equal, and
equality and hashing always agree. The batch axis is the one named ``N``; the
recurrent (time) axis is named ``REC``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..errors import AxesError
from .names import check_name

BATCH_AXIS_NAME = "N"
RECURRENT_AXIS_NAME = "REC"

_anonymous_ids = itertools.count()


@dataclass(frozen=True, slots=True)
class Axis:
    """One named axis of a tensor.

    Args:
        name: the axis name; names align operands of element-wise ops.
        length: the number of elements along the axis (>= 0).

    Example:
        >>> Axis("C", 4)
        Axis(name='C', length=4)
    """

    name: str
    length: int

    def __post_init__(self) -> None:
        check_name(self.name, "axis name", AxesError)
        if isinstance(self.length, bool) or not isinstance(self.length, int) or self.length < 0:
            raise AxesError(
                f"Expected axis {self.name!r} to have a non-negative int length, received: {self.length!r}"
            )

    @property
    def is_batch(self) -> bool:
        """True for the batch axis (named ``N``)."""
        return self.name == BATCH_AXIS_NAME

    @property
    def is_recurrent(self) -> bool:
        """True for the recurrent (time) axis (named ``REC``)."""
        return self.name == RECURRENT_AXIS_NAME

    def with_length(self, length: int) -> Axis:
        """The axis of the same name with another length (e.g. after slicing)."""
        return Axis(self.name, length)

    def __repr__(self) -> str:
        return f"Axis(name={self.name!r}, length={self.length})"

    def __str__(self) -> str:
        return f"{self.name}:{self.length}"


def anonymous_axis_name() -> str:
    """A fresh generated axis name (``axis_0``, ``axis_1``, ...)."""
    return f"axis_{next(_anonymous_ids)}"


class Axes(tuple):
    """An ordered tuple of ``Axis`` without duplicate names, with set algebra.

    ``a + b`` concatenates (names must be disjoint), ``a | b`` is the ordered union,
    ``a & b`` the intersection in a's order and ``a - b`` the difference in a's order.
    Two axes of the same name must have the same length wherever they meet.

    Example:
        >>> C, N = Axis("C", 4), Axis("N", 32)
        >>> Axes([C, N]) - Axes([N])
        Axes(C:4)
    """

    __slots__ = ()

    def __new__(cls, axes: Iterable[Axis] = ()) -> Axes:
        if isinstance(axes, Axes):
            return axes
        if isinstance(axes, Axis):
            axes = (axes,)
        items = tuple(axes)
        seen: dict[str, Axis] = {}
        for axis in items:
            if not isinstance(axis, Axis):
                raise AxesError(f"Expected Axis objects, received: {axis!r} ({type(axis).__name__})")
            if axis.name in seen:
                raise AxesError(
                    f"Axes must have distinct names; received {axis.name!r} twice in ({_fmt(items)})"
                )
            seen[axis.name] = axis
        return super().__new__(cls, items)

    # -- queries -------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self)

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(a.length for a in self)

    @property
    def size(self) -> int:
        total = 1
        for a in self:
            total *= a.length
        return total

    @property
    def batch_axis(self) -> Axis | None:
        return next((a for a in self if a.is_batch), None)

    @property
    def recurrent_axis(self) -> Axis | None:
        return next((a for a in self if a.is_recurrent), None)

    def find(self, name: str) -> Axis | None:
        """The axis called ``name``, or None."""
        return next((a for a in self if a.name == name), None)

    def index(self, axis: Axis | str) -> int:  # type: ignore[override]
        name = axis if isinstance(axis, str) else axis.name
        for i, a in enumerate(self):
            if a.name == name:
                if not isinstance(axis, str) and a != axis:
                    raise AxesError(f"Axis {name!r} has length {a.length} here, received length {axis.length}")
                return i
        raise AxesError(f"Axis {name!r} is not among ({_fmt(self)})")

    def __contains__(self, axis: object) -> bool:
        return any(a == axis for a in tuple.__iter__(self))

    def is_subset_of(self, other: Iterable[Axis]) -> bool:
        other = Axes(other)
        return all(a in other for a in self)

    def same_set(self, other: Iterable[Axis]) -> bool:
        other = Axes(other)
        return len(self) == len(other) and self.is_subset_of(other)

    # -- algebra -------------------------------------------------------------------
    def check_compatible(self, other: Iterable[Axis]) -> None:
        """Raise when an axis name occurs in both with different lengths."""
        mine = {a.name: a for a in self}
        for b in Axes(other):
            a = mine.get(b.name)
            if a is not None and a.length != b.length:
                raise AxesError(
                    f"Axis {b.name!r} has length {a.length} in ({_fmt(self)}) but {b.length} in ({_fmt(other)})"
                )

    def __add__(self, other: Iterable[Axis]) -> Axes:  # type: ignore[override]
        return Axes(tuple(self) + tuple(Axes(other)))

    def __or__(self, other: Iterable[Axis]) -> Axes:
        other = Axes(other)
        self.check_compatible(other)
        return Axes(tuple(self) + tuple(a for a in other if a.name not in self.names))

    def __and__(self, other: Iterable[Axis]) -> Axes:
        other = Axes(other)
        self.check_compatible(other)
        return Axes(a for a in self if a.name in other.names)

    def __sub__(self, other: Iterable[Axis]) -> Axes:
        other = Axes(other)
        return Axes(a for a in self if a.name not in other.names)

    def __iter__(self) -> Iterator[Axis]:
        return tuple.__iter__(self)

    def __getitem__(self, item):  # type: ignore[override]
        got = tuple.__getitem__(self, item)
        return Axes(got) if isinstance(item, slice) else got

    def __repr__(self) -> str:
        return f"Axes({_fmt(self)})"

    def __str__(self) -> str:
        return f"[{_fmt(self)}]"

    # tuple's own __eq__/__hash__ compare element-wise, which is exactly what we want.


def _fmt(axes: Iterable[Axis]) -> str:
    return ", ".join(str(a) for a in axes)


def format_axes(axes: Iterable[Axis]) -> str:
    """``[C:4, N:32]`` — the form error messages use."""
    return f"[{_fmt(axes)}]"
