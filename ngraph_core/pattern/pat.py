"""``Pat``: a pattern over ops — op type(s), dtype, arg test, a bound name, and sources.

``src`` as a tuple matches sources in order; as a list, in any permutation (for
commutative ops). Operator sugar builds patterns: ``Pat.var("x") * 1`` matches a
multiply of anything by a constant one (through the explicit broadcast the API
inserts for scalars).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..ir import ArrayValue, Op, OpType

Bindings = dict[str, Op]


def scalar_value(op: Op) -> float | None:
    """The value of a constant that is the same everywhere (possibly broadcast), else None."""
    while op.op is OpType.BROADCAST:
        op = op.src[0]
    if op.op is not OpType.CONSTANT:
        return None
    if isinstance(op.arg, ArrayValue):
        flat = op.arg.array.ravel()
        return float(flat[0]) if flat.size and (flat == flat[0]).all() else None
    return float(op.arg)


class Pat:
    """A pattern node.

    Args:
        op: an OpType or a set of them; None matches any op.
        src: a tuple (ordered) or list (any permutation) of sub-patterns; None: any sources.
        name: bind the matched op under this name (a name bound twice must match one op).
        dtype: a dtype name or a set of them.
        arg: a value ``op.arg`` must equal, or a predicate on it.
        where: a predicate on the whole op.

    Example:
        >>> x = Pat.var("x")
        >>> rule = (x * 1, lambda x: x)  # x*1 -> x
    """

    __slots__ = ("ops", "src", "name", "dtypes", "arg", "where")

    def __init__(self, op: OpType | Iterable[OpType] | None = None, src: tuple | list | None = None,
                 name: str | None = None, dtype: str | Iterable[str] | None = None, arg: Any = None,
                 where: Callable[[Op], bool] | None = None) -> None:
        self.ops = None if op is None else frozenset([op] if isinstance(op, OpType) else op)
        self.src = src
        self.name = name
        self.dtypes = None if dtype is None else frozenset([dtype] if isinstance(dtype, str) else dtype)
        self.arg = arg
        self.where = where

    # -- constructors ------------------------------------------------------------------
    @classmethod
    def var(cls, name: str | None = None, dtype: str | Iterable[str] | None = None) -> Pat:
        """Any op, bound to ``name``."""
        return cls(name=name, dtype=dtype)

    @classmethod
    def cvar(cls, name: str | None = None, dtype: str | Iterable[str] | None = None) -> Pat:
        """A constant with one value everywhere (possibly broadcast), bound to ``name``."""
        return cls(name=name, dtype=dtype, where=lambda op: scalar_value(op) is not None)

    @classmethod
    def const(cls, value: float, name: str | None = None) -> Pat:
        """A constant equal to ``value`` everywhere (possibly broadcast)."""
        return cls(name=name, where=lambda op: scalar_value(op) == value)

    # -- matching --------------------------------------------------------------------------
    def match(self, op: Op, bindings: Bindings | None = None) -> Iterator[Bindings]:
        """Every way ``op`` matches, as the bindings extended by this pattern's names."""
        b = {} if bindings is None else bindings
        if self.ops is not None and op.op not in self.ops:
            return
        if self.dtypes is not None and op.dtype not in self.dtypes:
            return
        if self.arg is not None and not (self.arg(op.arg) if callable(self.arg) else op.arg == self.arg):
            return
        if self.where is not None and not self.where(op):
            return
        if self.name is not None:
            bound = b.get(self.name)
            if bound is not None and bound is not op:
                return
            b = {**b, self.name: op}
        if self.src is None:
            yield b
            return
        if len(self.src) != len(op.src):
            return
        orders = itertools.permutations(self.src) if isinstance(self.src, list) else (self.src,)
        for pats in orders:
            yield from _match_sources(tuple(pats), op.src, b)

    # -- sugar -------------------------------------------------------------------------------
    def _binary(self, kind: OpType, other: Any, commutative: bool, reverse: bool = False) -> Pat:
        other = other if isinstance(other, Pat) else Pat.const(float(other))
        pair = [other, self] if reverse else [self, other]
        return Pat(kind, pair if commutative else tuple(pair))

    def __add__(self, other: Any) -> Pat:
        return self._binary(OpType.ADD, other, True)

    __radd__ = __add__

    def __mul__(self, other: Any) -> Pat:
        return self._binary(OpType.MUL, other, True)

    __rmul__ = __mul__

    def __sub__(self, other: Any) -> Pat:
        return self._binary(OpType.SUB, other, False)

    def __rsub__(self, other: Any) -> Pat:
        return self._binary(OpType.SUB, other, False, reverse=True)

    def __truediv__(self, other: Any) -> Pat:
        return self._binary(OpType.DIV, other, False)

    def __rtruediv__(self, other: Any) -> Pat:
        return self._binary(OpType.DIV, other, False, reverse=True)

    def __pow__(self, other: Any) -> Pat:
        return self._binary(OpType.POW, other, False)

    def __neg__(self) -> Pat:
        return Pat(OpType.NEG, (self,))

    def __repr__(self) -> str:
        ops = "|".join(sorted(o.value for o in self.ops)) if self.ops else "*"
        src = "" if self.src is None else f"{list(self.src) if isinstance(self.src, list) else self.src}"
        return f"Pat({ops}{' ' + self.name if self.name else ''}{src})"


def _match_sources(pats: tuple[Pat, ...], ops: tuple[Op, ...], b: Bindings) -> Iterator[Bindings]:
    if not pats:
        yield b
        return
    for b1 in pats[0].match(ops[0], b):
        yield from _match_sources(pats[1:], ops[1:], b1)
