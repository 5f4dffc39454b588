"""Sugar shared by the rewrite passes: ``pat`` for ops without an operator, ``type_preserving`` rules.

Both used to live in ``passes/simplify.py``; layout and decompose need them too, and
they are about patterns and rules, not about one pass, so they sit here beside ``Pat``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from ..ir import Op, OpType
from .matcher import Rule
from .pat import Pat


def pat(kind: OpType | Iterable[OpType], *src: Pat, name: str | None = None,
        where: Callable[[Op], bool] | None = None) -> Pat:
    """A pattern for ``kind`` over ordered sources ``src`` (sugar for ops without an operator).

    Args:
        kind: the op type, or a set of them.
        *src: one sub-pattern per source, matched in order.
        name: bind the matched op under this name.
        where: a predicate on the whole op.

    Returns:
        the ``Pat``.

    Example:
        >>> rule = (pat(OpType.NEG, pat(OpType.NEG, Pat.var("x"))), lambda x: x)  # --x -> x
    """
    return Pat(kind, tuple(src), name=name, where=where)


def type_preserving(rules: Iterable[Rule]) -> list[Rule]:
    """``rules`` with a guard that declines any replacement whose axes or dtype differ from the op's.

    Each pattern's root is bound (under its own name, or a private one), so the guard
    can compare; the rule functions still receive only the names they declare.

    Args:
        rules: ``(Pat, fn)`` pairs.

    Returns:
        the guarded rules, in the same order.

    Example:
        >>> SIMPLIFY = PatternMatcher(type_preserving([(Pat.var("x") * 1, lambda x: x)]))  # x*1 -> x
    """
    guarded = []
    for p, fn in rules:
        root = p.name or "_root"
        bound = Pat(p.ops, p.src, root, p.dtypes, p.arg, p.where)
        guarded.append((bound, _guard(fn, root, keep=p.name is not None)))
    return guarded


def _guard(fn: Callable[..., Op | None], root: str, keep: bool) -> Callable[..., Op | None]:
    @functools.wraps(fn)
    def guarded(**bindings: Op) -> Op | None:
        op = bindings[root] if keep else bindings.pop(root)
        new = fn(**bindings)
        return new if new is None or (new.axes == op.axes and new.dtype == op.dtype) else None

    return guarded
