"""Learning-rate schedules: ``schedule.get_learning_rate(base_lr, epoch) -> float``.

Schedules are plain host-side functions of the 0-based epoch (no state, so a resumed
run gets the same rates). The optimizer calls them through ``learning_rate_at(epoch)``
and ``Model`` writes the result into the optimizer's learning-rate variable before
each epoch.

Example:
    >>> opt = GradientDescentMomentum(0.1, 0.9, schedule=Schedule(step_config=[30, 60], change=0.1))
    >>> [opt.learning_rate_at(e) for e in (0, 30, 60)]  # 0.1, 0.01, 0.001 (up to rounding)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .checks import OptimizerError, check_number

SCHEDULES: dict[str, type[Schedule]] = {}


def _check_epoch(who: str, epoch: Any) -> float:
    return check_number(who, "epoch", epoch, 0.0)


def _check_epochs(who: str, what: str, values: Any) -> list[int]:
    if not isinstance(values, Sequence) or isinstance(values, str) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise OptimizerError(f"{who}: expected {what} to be a list of epoch numbers (ints >= 0), received {values!r}")
    if any(b <= a for a, b in zip(values, values[1:])):
        raise OptimizerError(f"{who}: expected {what} in increasing order, received {list(values)!r}")
    return list(values)


class Schedule:
    """Constant, or multiplied by ``change`` at given epochs (neon's ``Schedule``).

    ``lr(epoch) = base_lr * change ** steps`` where ``steps`` is

    * 0 when ``step_config`` is None (a constant rate);
    * the number of epochs in ``step_config`` (a list) that are ``<= epoch`` — PyTorch's
      ``MultiStepLR(milestones=step_config, gamma=change)``;
    * ``floor(epoch / step_config)`` (an int) — PyTorch's ``StepLR(step_size, gamma=change)``.

    Args:
        step_config: None, a list of epochs, or a period in epochs.
        change: the factor (finite, >= 0).

    Raises:
        OptimizerError: a malformed step_config or change (a list of rates belongs to StepSchedule).

    Example:
        >>> Schedule(step_config=[2, 6], change=0.5).get_learning_rate(1.0, 6)
        0.25
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        SCHEDULES[cls.__name__] = cls

    def __init__(self, step_config: int | Sequence[int] | None = None, change: float = 1.0) -> None:
        who = type(self).__name__
        if isinstance(change, (list, tuple)):
            raise OptimizerError(f"{who}: expected change to be a number, received the list {change!r}; "
                                 "hint: use StepSchedule(step_config, change) to set a rate per step")
        self.change = check_number(who, "change", change, 0.0)
        if step_config is None or (isinstance(step_config, int) and not isinstance(step_config, bool)):
            if step_config is not None and step_config < 1:
                raise OptimizerError(f"{who}: expected an int step_config >= 1, received {step_config!r}")
            self.step_config: int | list[int] | None = step_config
        else:
            self.step_config = _check_epochs(who, "step_config", step_config)

    def get_learning_rate(self, learning_rate: float, epoch: float) -> float:
        """The learning rate for ``epoch`` (0-based) given the base rate."""
        epoch = _check_epoch(type(self).__name__, epoch)
        if self.step_config is None:
            steps = 0
        elif isinstance(self.step_config, int):
            steps = math.floor(epoch / self.step_config)
        else:
            steps = sum(1 for e in self.step_config if e <= epoch)
        return float(learning_rate * self.change ** steps)

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain data."""
        return {"step_config": self.step_config, "change": self.change}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


SCHEDULES["Schedule"] = Schedule


class PowerSchedule(Schedule):
    """``base_lr * change ** floor(epoch / step_config)``: a factor every ``step_config`` epochs (neon's name).

    Example:
        >>> PowerSchedule(2, 0.5).get_learning_rate(0.1, 4)
        0.025
    """

    def __init__(self, step_config: int, change: float) -> None:
        if isinstance(step_config, bool) or not isinstance(step_config, int):
            raise OptimizerError(f"PowerSchedule: expected step_config to be an int, received {step_config!r}")
        super().__init__(step_config, change)


class StepSchedule(Schedule):
    """The rate is SET to ``change[i]`` from epoch ``step_config[i]`` on (``base_lr`` before the first).

    ``lr(epoch) = change[i]`` for the largest ``i`` with ``step_config[i] <= epoch``.

    Args:
        step_config: increasing epochs.
        change: the rates, one per epoch in ``step_config``.

    Raises:
        OptimizerError: lists of different lengths, unsorted epochs, negative rates.

    Example:
        >>> StepSchedule([2, 6], [0.6, 0.4]).get_learning_rate(1.0, 3)
        0.6
    """

    def __init__(self, step_config: Sequence[int], change: Sequence[float]) -> None:
        self.step_config = _check_epochs("StepSchedule", "step_config", step_config)
        if not isinstance(change, Sequence) or isinstance(change, str) or len(change) != len(self.step_config):
            raise OptimizerError(f"StepSchedule: expected change to be a list of {len(self.step_config)} rates "
                                 f"(one per step_config epoch), received {change!r}")
        self.change = [check_number("StepSchedule", "each rate in change", c, 0.0) for c in change]

    def get_learning_rate(self, learning_rate: float, epoch: float) -> float:
        epoch = _check_epoch("StepSchedule", epoch)
        rate = learning_rate
        for e, c in zip(self.step_config, self.change):
            if e <= epoch:
                rate = c
        return float(rate)


class PolySchedule(Schedule):
    """Polynomial decay to zero: ``base_lr * (1 - min(epoch, T) / T) ** power`` with ``T = total_epochs``.

    This is the formula neon documents (neon's code used ``epoch // T``, which holds the
    rate until ``T``); PyTorch's ``PolynomialLR(total_iters=T, power=power)``.

    Raises:
        OptimizerError: total_epochs not a positive int, power negative.

    Example:
        >>> PolySchedule(10, 2.0).get_learning_rate(1.0, 5)
        0.25
    """

    def __init__(self, total_epochs: int, power: float) -> None:
        if isinstance(total_epochs, bool) or not isinstance(total_epochs, int) or total_epochs < 1:
            raise OptimizerError(f"PolySchedule: expected total_epochs to be an int >= 1, received {total_epochs!r}")
        self.total_epochs = total_epochs
        self.power = check_number("PolySchedule", "power", power, 0.0)

    def get_learning_rate(self, learning_rate: float, epoch: float) -> float:
        epoch = min(_check_epoch("PolySchedule", epoch), self.total_epochs)
        return float(learning_rate * (1.0 - epoch / self.total_epochs) ** self.power)

    def get_config(self) -> dict[str, Any]:
        return {"total_epochs": self.total_epochs, "power": self.power}


class ExpSchedule(Schedule):
    """neon's "exponential" schedule, which is an inverse-time decay: ``base_lr / (1 + decay * epoch)``.

    Raises:
        OptimizerError: decay negative or not finite.

    Example:
        >>> ExpSchedule(0.5).get_learning_rate(1.0, 2)
        0.5
    """

    def __init__(self, decay: float) -> None:
        self.decay = check_number("ExpSchedule", "decay", decay, 0.0)

    def get_learning_rate(self, learning_rate: float, epoch: float) -> float:
        epoch = _check_epoch("ExpSchedule", epoch)
        return float(learning_rate / (1.0 + self.decay * epoch))

    def get_config(self) -> dict[str, Any]:
        return {"decay": self.decay}


class CosineSchedule(Schedule):
    """Cosine annealing from ``base_lr`` to ``min_lr`` over ``total_epochs``, then ``min_lr``.

    ``lr(epoch) = min_lr + (base_lr - min_lr) * (1 + cos(pi * min(epoch, T) / T)) / 2``

    PyTorch's ``CosineAnnealingLR(T_max=T, eta_min=min_lr)`` up to epoch ``T`` (PyTorch then
    rises again; this one stays at ``min_lr``).

    Raises:
        OptimizerError: total_epochs not a positive int, min_lr negative.

    Example:
        >>> CosineSchedule(10).get_learning_rate(1.0, 5)
        0.5
    """

    def __init__(self, total_epochs: int, min_lr: float = 0.0) -> None:
        if isinstance(total_epochs, bool) or not isinstance(total_epochs, int) or total_epochs < 1:
            raise OptimizerError(f"CosineSchedule: expected total_epochs to be an int >= 1, "
                                 f"received {total_epochs!r}")
        self.total_epochs = total_epochs
        self.min_lr = check_number("CosineSchedule", "min_lr", min_lr, 0.0)

    def get_learning_rate(self, learning_rate: float, epoch: float) -> float:
        epoch = min(_check_epoch("CosineSchedule", epoch), self.total_epochs)
        cosine = (1.0 + math.cos(math.pi * epoch / self.total_epochs)) / 2.0
        return float(self.min_lr + (learning_rate - self.min_lr) * cosine)

    def get_config(self) -> dict[str, Any]:
        return {"total_epochs": self.total_epochs, "min_lr": self.min_lr}


def schedule_to_config(schedule: Schedule | None) -> dict[str, Any] | None:
    """``{"type": class name, "config": get_config()}``, or None for no schedule."""
    if schedule is None:
        return None
    return {"type": type(schedule).__name__, "config": schedule.get_config()}


def schedule_from_config(config: dict[str, Any] | None) -> Schedule | None:
    """The schedule ``schedule_to_config`` described.

    Raises:
        OptimizerError: an unknown schedule type.
    """
    if config is None:
        return None
    kind = config.get("type") if isinstance(config, dict) else None
    if kind not in SCHEDULES:
        raise OptimizerError(f"schedule_from_config: expected a type among {sorted(SCHEDULES)}, received {kind!r}")
    return SCHEDULES[kind](**config.get("config", {}))
