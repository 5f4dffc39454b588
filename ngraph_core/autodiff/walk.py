"""Reverse-mode autodiff's walk: a topological walk from the cost back to the wanted ops.

``backprop`` sorts the ops between the cost and the wanted ops, walks them in reverse,
calls each op's rule from the table it is given (``rules.RULES``; the rules that
differentiate a body, ``call`` and ``scan``, walk it again with the same table), and sums
the contributions a source receives. Because construction is hash-consed,
``deriv(L, W)`` and ``deriv(L, b)`` share every backward op they have in common — one
backward graph. Backward ops carry the scope of the forward op they differentiate and a
``grad`` label.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .. import api
from ..errors import AxesError, UnsupportedOpError
from ..ir import Op, OpGroup, OpType, format_axes, is_float, scope_override, toposort

Grads = tuple[Op | None, ...]
Rule = Callable[[Op, Op], Grads]


def _on_path(order: list[Op], wrt: Sequence[Op]) -> set[Op]:
    """Ops that depend on any of ``wrt`` (the only ones a gradient must pass through)."""
    reach = set(wrt)
    for op in order:
        if op not in reach and any(s in reach for s in op.src):
            reach.add(op)
    return reach


def _accumulate(parts: list[Op]) -> Op:
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def backprop(cost: Op, wrt: Sequence[Op], error: Op | None, rules: Mapping[OpType, Rule]) -> list[Op]:
    """d cost / d w for each ``w`` in ``wrt`` by the rules of ``rules`` (see ``gradient.gradients``).

    Args:
        cost: a scalar op (or any op, with ``error`` giving the upstream gradient).
        wrt: the ops to differentiate with respect to.
        error: the gradient flowing into ``cost``, with its axes; None: 1 for a scalar.
        rules: OpType -> its gradient rule.

    Returns:
        one op per ``w``, with ``w``'s axes (zeros where ``cost`` does not depend on it).

    Raises:
        AxesError: a non-scalar cost without ``error``.
        UnsupportedOpError: an op on the path with no rule in ``rules``.
    """
    wrt = list(wrt)
    if error is None:
        if len(cost.axes) != 0:
            raise AxesError(
                f"gradients: the cost must be a scalar, received axes {format_axes(cost.axes)}; "
                "hint: reduce it with ng.sum / ng.mean, or pass error= with the cost's axes"
            )
        error = api.constant(1.0, (), dtype=cost.dtype)
    elif error.axes != cost.axes:
        raise AxesError(f"gradients: error has axes {format_axes(error.axes)}, the cost {format_axes(cost.axes)}")
    order = toposort([cost])
    on_path = _on_path(order, wrt)
    pending: dict[Op, list[Op]] = {cost: [error]}
    done: dict[Op, Op] = {}
    for op in reversed(order):
        parts = pending.pop(op, None)
        if parts is None or op not in on_path:
            continue
        with scope_override(op.meta.scope, labels={"grad"}):
            ctx = _accumulate(parts)
        done[op] = ctx
        if not op.src or op.op in OpGroup.NON_DIFFERENTIABLE:
            continue
        rule = rules.get(op.op)
        if rule is None:
            raise UnsupportedOpError(
                f"gradients: no gradient rule for {op.op.value} ({op.name}); "
                "hint: add one to ngraph_core/autodiff/rules.py, or wrap it with ng.stop_gradient"
            )
        with scope_override(op.meta.scope, labels={"grad"}):
            grads = rule(ctx, op)
        for src, g in zip(op.src, grads):
            if g is None or src not in on_path or not is_float(src.dtype):
                continue
            assert g.axes == src.axes, f"rule {op.op} gave axes {g.axes} for source {src.axes}"
            pending.setdefault(src, []).append(g)
    return [done.get(w) if w in done else api.fill_like(w, 0.0) for w in wrt]
