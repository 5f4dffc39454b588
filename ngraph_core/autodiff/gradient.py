"""Reverse-mode autodiff's entry points: ``gradients`` and ``deriv`` run the reverse walk (``walk.py``)
over the rule table (``rules.RULES``); ``deriv(L, W)`` and ``deriv(L, b)`` share one backward graph.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Op
from .rules import RULES
from .walk import backprop


def gradients(cost: Op, wrt: Sequence[Op], error: Op | None = None) -> list[Op]:
    """d cost / d w for each ``w`` in ``wrt``, built as one backward graph.

    Args:
        cost: a scalar op (or any op, with ``error`` giving the upstream gradient).
        wrt: the ops to differentiate with respect to (usually variables).
        error: the gradient flowing into ``cost``, with its axes; default 1 for a scalar.

    Returns:
        one op per ``w``, with ``w``'s axes (zeros where ``cost`` does not depend on it).

    Raises:
        AxesError: a non-scalar cost without ``error``.
        UnsupportedOpError: an op on the path with no gradient rule.

    Example:
        >>> grad_W, grad_b = gradients(L, [W, b])
    """
    return backprop(cost, wrt, error, RULES)


def deriv(cost: Op, wrt: Op, error: Op | None = None) -> Op:
    """d cost / d wrt (see ``gradients``; calls share one backward graph).

    Example:
        >>> grad_W = deriv(L, W)
    """
    return gradients(cost, [wrt], error)[0]
