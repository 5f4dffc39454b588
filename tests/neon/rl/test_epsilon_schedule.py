"""neon.rl.schedules: epsilon values along linear and exponential decays."""

from __future__ import annotations

import math

import pytest

from neon.rl import EpsilonSchedule
from neon.rl.schedules import ScheduleError


def test_linear_values():
    eps = EpsilonSchedule(1.0, 0.1, 100)
    assert [eps(s) for s in (0, 25, 50, 100, 1000)] == pytest.approx([1.0, 0.775, 0.55, 0.1, 0.1])


def test_exponential_values():
    eps = EpsilonSchedule(1.0, 0.1, 100, kind="exponential")
    assert eps(0) == pytest.approx(1.0)
    assert eps(20) == pytest.approx(0.1 + 0.9 * math.exp(-1.0))
    assert eps(100) == 0.1 and eps(10**6) == 0.1
    assert eps(10) > eps(11) > eps(12)


def test_bad_arguments_raise():
    with pytest.raises(ScheduleError, match=r"start to be a number in \[0, 1\], received 1.5"):
        EpsilonSchedule(1.5, 0.1, 10)
    with pytest.raises(ScheduleError, match="kind"):
        EpsilonSchedule(kind="cosine")
    with pytest.raises(ScheduleError, match="steps"):
        EpsilonSchedule(steps=0)
    with pytest.raises(ScheduleError, match="step >= 0"):
        EpsilonSchedule()(-1)
    assert EpsilonSchedule(**EpsilonSchedule(0.5, 0.0, 7).get_config())(7) == 0.0
