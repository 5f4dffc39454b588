"""``PatternMatcher`` (rules indexed by root op) and ``graph_rewrite`` (to a fixed point).

A rule is ``(Pat, fn)``: ``fn`` receives the bound names as keyword arguments and
returns a replacement op, or None to decline. Rules are pure functions of the
ops they are given.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence

from ..errors import NgraphError
from ..ir import Op, OpType, scope_override, toposort
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

    def rewrite(self, op: Op) -> Op | None:
        """The first replacement a rule gives for ``op`` (built in op's scope), or None."""
        for pat, fn in self._by_op.get(op.op, []) + self._any:
            for bindings in pat.match(op):
                with scope_override(op.meta.scope):
                    out = fn(**bindings)
                if out is not None and out is not op:
                    return out
        return None


def _keep_meta(old: Op, new: Op) -> Op:
    if new.meta.name is None and old.meta.name is not None:
        new.meta.name = old.meta.name
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
        new: dict[Op, Op] = {}
        changed = False
        for op in toposort(roots):
            src = tuple(new[s] for s in op.src)
            cur = op if src == op.src else op.replace(src=src)
            for _ in range(MAX_REWRITES_PER_OP):
                out = matcher.rewrite(cur)
                if out is None:
                    break
                cur = _keep_meta(cur, out)
            else:
                raise NgraphError(f"graph_rewrite {name}: op {cur.op.value} kept rewriting; rules undo each other")
            changed |= cur is not op
            new[op] = cur
        roots = [new[r] for r in roots]
        if not changed:
            if os.environ.get("NG_DEBUG_REWRITE"):
                print(f"[rewrite] {name}: {time.perf_counter() - start:.4f}s")
            return roots
    raise NgraphError(
        f"graph_rewrite {name}: no fixed point after {MAX_SWEEPS} sweeps; hint: two rules probably undo each other"
    )
