"""``PatternMatcher`` (rules indexed by root op) and ``graph_rewrite`` (to a fixed point).

A rule is ``(Pat, fn)``: ``fn`` receives the bound names as keyword arguments and
returns a replacement op, or None to decline. Rules are pure functions of the
ops they are given.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import NgraphError
from ..ir import Op, OpType, rebuild, scope_override, toposort, update_meta
from .pat import Pat

Rule = tuple[Pat, Callable[..., Op | None]]

MAX_SWEEPS = 100
MAX_REWRITES_PER_OP = 100


class PatternMatcher:
    """Rules indexed by the op type of their root pattern; compose with ``+``.

    Example:
        >>> x = Pat.var("x")
        >>> pm = PatternMatcher([(x * 1, lambda x: x), (x + 0, lambda x: x)])
    """

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules: list[Rule] = list(rules)
        self._by_op: dict[OpType, list[Rule]] = {}
        self._any: list[Rule] = []
        for rule in self.rules:
            pat = rule[0]
            if pat.ops is None:
                self._any.append(rule)
            else:
                for t in pat.ops:
                    self._by_op.setdefault(t, []).append(rule)

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher(self.rules + other.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def rewrite(self, op: Op, ctx: Any = None) -> Op | None:
        """The first replacement a rule gives for ``op`` (built in op's scope), or None.

        ``ctx``, when given, is passed to every rule as the keyword ``ctx``: read-only facts
        about the whole graph (users, results...) that a pass computed first, so rules stay
        pure functions of their arguments instead of closing over the pass's state.
        """
        extra = {} if ctx is None else {"ctx": ctx}
        for pat, fn in self._by_op.get(op.op, []) + self._any:
            for bindings in pat.match(op):
                with scope_override(op.meta.scope):
                    out = fn(**bindings, **extra)
                if out is not None and out is not op:
                    return out
        return None


def _keep_meta(old: Op, new: Op) -> Op:
    if new.meta.name is None and old.meta.name is not None:
        update_meta(new, name=old.meta.name)
    return new


def graph_rewrite(roots: Sequence[Op], matcher: PatternMatcher, name: str = "rewrite") -> list[Op]:
    """Apply ``matcher`` bottom-up over the graph below ``roots`` until nothing changes.

    Raises:
        NgraphError: no fixed point after ``MAX_SWEEPS`` sweeps (rules that undo each other).

    Example:
        >>> (y,) = graph_rewrite([x * 1.0], PatternMatcher([(Pat.var("x") * 1, lambda x: x)]))
    """
    roots = list(roots)
    start = time.perf_counter()
    for _ in range(MAX_SWEEPS):
        def to_fixed_point(op: Op, cur: Op) -> Op:
            for _ in range(MAX_REWRITES_PER_OP):
                out = matcher.rewrite(cur)
                if out is None:
                    return cur
                cur = _keep_meta(cur, out)
            raise NgraphError(f"graph_rewrite {name}: op {cur.op.value} kept rewriting; rules undo each other")

        new = rebuild(toposort(roots), to_fixed_point)
        roots = [new[r] for r in roots]
        if all(k is v for k, v in new.items()):
            if os.environ.get("NG_DEBUG_REWRITE"):
                print(f"[rewrite] {name}: {time.perf_counter() - start:.4f}s")
            return roots
    raise NgraphError(
        f"graph_rewrite {name}: no fixed point after {MAX_SWEEPS} sweeps; hint: two rules probably undo each other"
    )
