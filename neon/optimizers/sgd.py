"""``GradientDescentMomentum``: stochastic gradient descent with (Nesterov) momentum."""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Optimizer
from .checks import OptimizerError, check_number


class GradientDescentMomentum(Optimizer):
    """SGD with momentum, in PyTorch's ``torch.optim.SGD`` form (dampening 0).

    With ``g`` the gradient after clipping plus ``wdecay * W``, ``lr`` the learning rate,
    ``mu`` the momentum and ``v`` the velocity (zeros at first), one step is::

        v <- mu * v + g
        W <- W - lr * v                    (nesterov=False)
        W <- W - lr * (g + mu * v)         (nesterov=True, with the new v)

    and ``W <- W - lr * g`` when ``mu == 0`` (no velocity is kept). neon wrote
    ``v <- mu * v - lr * g; W <- W + v``, the same steps for a constant learning rate
    (neon's velocity is ``-lr`` times this one); with a schedule, this form applies a new
    rate to the whole step at once.

    Args:
        learning_rate: the base rate (finite, >= 0).
        momentum_coef: ``mu`` in [0, 1).
        wdecay: L2 weight decay (``g += wdecay * W``), PyTorch's ``weight_decay``.
        nesterov: Nesterov accelerated gradient (needs ``momentum_coef > 0``).
        gradient_clip_norm, gradient_clip_value, schedule, name: see ``Optimizer``.

    Raises:
        OptimizerError: a hyper-parameter out of range, or nesterov without momentum.

    Example:
        >>> opt = GradientDescentMomentum(0.1, momentum_coef=0.9, wdecay=5e-4, nesterov=True)
        >>> update = opt(cost, model.variables)
    """

    def __init__(self, learning_rate: float, momentum_coef: float = 0.0, wdecay: float = 0.0,
                 nesterov: bool = False, gradient_clip_norm: float | None = None,
                 gradient_clip_value: float | None = None, schedule: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule, name)
        self.momentum_coef = check_number("GradientDescentMomentum", "momentum_coef", momentum_coef, 0.0, 1.0,
                                          high_open=True)
        if not isinstance(nesterov, bool):
            raise OptimizerError(f"GradientDescentMomentum: expected nesterov to be a bool, received {nesterov!r}")
        if nesterov and self.momentum_coef == 0:
            raise OptimizerError("GradientDescentMomentum: expected momentum_coef > 0 with nesterov=True, "
                                 "received momentum_coef=0; hint: set momentum_coef (e.g. 0.9) or nesterov=False")
        self.nesterov = nesterov

    def slot_names(self) -> tuple[str, ...]:
        return ("velocity",) if self.momentum_coef else ()

    def build_updates(self, grads_and_vars: list[tuple[ng.Op, ng.Op]], lr: ng.Op) -> list[ng.Op]:
        mu = self.momentum_coef
        updates = []
        for g, var in grads_and_vars:
            if mu == 0:
                updates.append(ng.assign(var, var - lr * g))
                continue
            v = self.slot(var, "velocity")
            v_new = ng.assign(v, mu * v + g)
            step = g + mu * v_new if self.nesterov else v_new
            updates.append(ng.assign(var, var - lr * step))
        return updates

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "momentum_coef": self.momentum_coef, "nesterov": self.nesterov}
