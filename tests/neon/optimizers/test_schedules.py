"""Learning-rate schedules: values at given epochs, and PyTorch's equivalent schedulers."""

from __future__ import annotations

import math

import pytest

from neon.optimizers import (
    CosineSchedule,
    ExpSchedule,
    GradientDescentMomentum,
    OptimizerError,
    PolySchedule,
    PowerSchedule,
    Schedule,
    StepSchedule,
    schedule_from_config,
    schedule_to_config,
)


def rates(schedule, base=1.0, epochs=10):
    return [schedule.get_learning_rate(base, e) for e in range(epochs)]


def test_schedule_values():
    assert rates(Schedule()) == [1.0] * 10
    # neon's docstring table: step_config=[2, 6], change=0.5
    assert rates(Schedule(step_config=[2, 6], change=0.5)) == [1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25]
    assert rates(Schedule(step_config=2, change=0.5), base=0.1, epochs=8) == pytest.approx(
        [0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125])
    assert rates(PowerSchedule(2, 0.5), 0.1, 8) == rates(Schedule(2, 0.5), 0.1, 8)
    assert rates(StepSchedule([2, 6], [0.6, 0.4]), base=1.0, epochs=8) == [1, 1, 0.6, 0.6, 0.6, 0.6, 0.4, 0.4]
    assert rates(PolySchedule(4, 2.0), epochs=6) == [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]
    assert rates(ExpSchedule(0.5), epochs=4) == [1.0, 1 / 1.5, 0.5, 1 / 2.5]
    assert rates(CosineSchedule(4, min_lr=0.1), epochs=6) == pytest.approx(
        [1.0, 0.1 + 0.9 * (1 + math.cos(math.pi / 4)) / 2, 0.55, 0.1 + 0.9 * (1 + math.cos(3 * math.pi / 4)) / 2,
         0.1, 0.1])


def test_stateless_any_order():
    # a resumed run asks for epoch 7 first: the answer must not depend on earlier calls
    s = StepSchedule([2, 6], [0.6, 0.4])
    assert s.get_learning_rate(1.0, 7) == 0.4
    assert s.get_learning_rate(1.0, 3) == 0.6
    assert s.get_learning_rate(1.0, 0) == 1.0


def torch_rates(name, kwargs, base, epochs):
    torch = pytest.importorskip("torch", reason="schedules are compared with torch.optim.lr_scheduler")
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base)
    scheduler = getattr(torch.optim.lr_scheduler, name)(opt, **kwargs)
    out = []
    for _ in range(epochs):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    return out


@pytest.mark.parametrize("ours, name, kwargs", [
    (Schedule(step_config=3, change=0.1), "StepLR", {"step_size": 3, "gamma": 0.1}),
    (Schedule(step_config=[2, 5, 6], change=0.3), "MultiStepLR", {"milestones": [2, 5, 6], "gamma": 0.3}),
    (CosineSchedule(8, min_lr=0.01), "CosineAnnealingLR", {"T_max": 8, "eta_min": 0.01}),
    (PolySchedule(6, 1.5), "PolynomialLR", {"total_iters": 6, "power": 1.5}),
    (ExpSchedule(0.2), "LambdaLR", {"lr_lambda": lambda e: 1 / (1 + 0.2 * e)}),
], ids=lambda x: x if isinstance(x, str) else "")
def test_matches_torch_schedulers(ours, name, kwargs):
    epochs = 9 if isinstance(ours, CosineSchedule) else 10  # torch's cosine rises again after T_max
    assert rates(ours, 0.5, epochs) == pytest.approx(torch_rates(name, kwargs, 0.5, epochs), rel=1e-12, abs=1e-15)


def test_optimizer_uses_its_schedule():
    opt = GradientDescentMomentum(0.2, 0.9, schedule=CosineSchedule(10))
    assert opt.learning_rate_at(0) == 0.2
    assert opt.learning_rate_at(5) == pytest.approx(0.1)
    assert opt.learning_rate_at(10) == pytest.approx(0.0)


@pytest.mark.parametrize("make", [
    lambda: Schedule(step_config=0),
    lambda: Schedule(step_config=[3, 1]),
    lambda: Schedule(step_config=[1, 2], change=[0.5, 0.1]),
    lambda: Schedule(change=float("nan")),
    lambda: StepSchedule([1, 2], [0.1]),
    lambda: StepSchedule([1, 2], [0.1, -0.1]),
    lambda: PolySchedule(0, 1.0),
    lambda: ExpSchedule(-0.1),
    lambda: CosineSchedule(10, min_lr=-1.0),
    lambda: Schedule().get_learning_rate(0.1, -1),
])
def test_bad_schedules_raise(make):
    with pytest.raises(OptimizerError, match="expected"):
        make()


@pytest.mark.parametrize("schedule", [
    Schedule(), Schedule([1, 4], 0.5), PowerSchedule(3, 0.2), StepSchedule([1, 3], [0.5, 0.05]),
    PolySchedule(7, 0.9), ExpSchedule(0.3), CosineSchedule(5, 0.001)], ids=lambda s: type(s).__name__)
def test_config_round_trip(schedule):
    rebuilt = schedule_from_config(schedule_to_config(schedule))
    assert type(rebuilt) is type(schedule) and rates(rebuilt, 0.3) == rates(schedule, 0.3)
