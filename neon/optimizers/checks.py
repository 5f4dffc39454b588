"""What every optimizer and schedule checks its hyper-parameters with: ``OptimizerError`` and ``check_number``."""

from __future__ import annotations

import math
from typing import Any

import ngraph_core as ng


class OptimizerError(ng.NgraphError, ValueError):
    """An optimizer or a schedule was given a hyper-parameter or an input it cannot use."""


def check_number(who: str, what: str, value: Any, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, optional: bool = False) -> float | None:
    """``value`` as a float within bounds, or raise ``OptimizerError`` saying expected vs received.

    Args:
        who: the optimizer or schedule named in the error.
        what: the argument's name.
        low, high: bounds (None: unbounded); ``low_open``/``high_open`` exclude them.
        optional: None passes through.

    Example:
        >>> check_number("Adam", "beta_1", 0.9, 0.0, 1.0, high_open=True)
        0.9
    """
    if value is None and optional:
        return None
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        interval = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"
        none = " or None" if optional else ""
        raise OptimizerError(f"{who}: expected {what} to be a finite number in {interval}{none}, received {value!r}")
    return float(value)
