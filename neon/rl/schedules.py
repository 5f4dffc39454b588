"""``EpsilonSchedule``: the exploration rate of epsilon-greedy action selection, by environment step.

Example:
    >>> eps = EpsilonSchedule(1.0, 0.05, 10_000)
    >>> eps(0), eps(5_000), eps(20_000)
    (1.0, 0.525, 0.05)
"""

from __future__ import annotations

import math
from typing import Any

import ngraph_core as ng


class ScheduleError(ng.NgraphError, ValueError):
    """An epsilon schedule was given a value it cannot use."""


def _check_rate(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ScheduleError(f"EpsilonSchedule: expected {what} to be a number in [0, 1], received {value!r}")
    return float(value)


class EpsilonSchedule:
    """Epsilon decaying from ``start`` to ``end`` over ``steps`` environment steps, then constant.

    * ``kind="linear"``: ``start + (end - start) * min(step / steps, 1)`` (the DQN paper's schedule);
    * ``kind="exponential"``: ``end + (start - end) * exp(-5 * step / steps)`` — the gap to ``end``
      shrinks by ``e**-5`` (to 0.7 %) at ``steps``; past ``steps`` the value is ``end``.

    Args:
        start: epsilon at step 0, in [0, 1].
        end: the final epsilon, in [0, 1].
        steps: the decay length (>= 1).
        kind: ``"linear"`` or ``"exponential"``.

    Raises:
        ScheduleError: a rate outside [0, 1], ``steps < 1`` or an unknown kind.

    Example:
        >>> EpsilonSchedule(1.0, 0.1, 100, kind="exponential")(100)
        0.1
    """

    KINDS = ("linear", "exponential")

    def __init__(self, start: float = 1.0, end: float = 0.05, steps: int = 10_000, kind: str = "linear") -> None:
        self.start = _check_rate("start", start)
        self.end = _check_rate("end", end)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ScheduleError(f"EpsilonSchedule: expected steps to be an int >= 1, received {steps!r}")
        if kind not in self.KINDS:
            raise ScheduleError(f"EpsilonSchedule: expected kind in {self.KINDS}, received {kind!r}")
        self.steps = steps
        self.kind = kind

    def __call__(self, step: int) -> float:
        """Epsilon at environment step ``step`` (>= 0)."""
        if step < 0:
            raise ScheduleError(f"EpsilonSchedule: expected a step >= 0, received {step}")
        if step >= self.steps:
            return self.end
        fraction = step / self.steps
        if self.kind == "linear":
            return self.start + (self.end - self.start) * fraction
        return self.end + (self.start - self.end) * math.exp(-5.0 * fraction)

    def get_config(self) -> dict[str, Any]:
        """The schedule as plain data (``EpsilonSchedule(**config)`` rebuilds it)."""
        return {"start": self.start, "end": self.end, "steps": self.steps, "kind": self.kind}

    def __repr__(self) -> str:
        return f"EpsilonSchedule({self.start}, {self.end}, {self.steps}, kind={self.kind!r})"
