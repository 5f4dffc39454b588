"""``Adadelta``: rates from the ratio of running RMS of updates and of gradients (Zeiler)."""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Optimizer
from .checks import check_number


class Adadelta(Optimizer):
    """Adadelta, as neon and ``torch.optim.Adadelta`` write it.

    With ``g`` the gradient after clipping plus ``wdecay * W``, ``rho = decay`` and the
    running averages ``Eg``, ``Ed`` zeros at first::

        Eg <- rho * Eg + (1 - rho) * g**2
        d  <- sqrt(Ed + epsilon) / sqrt(Eg + epsilon) * g
        Ed <- rho * Ed + (1 - rho) * d**2
        W  <- W - lr * d

    neon has no learning rate (``lr = 1``, the default here); PyTorch's ``lr`` scales the
    step as here.

    Args:
        decay: ``rho`` in [0, 1).
        epsilon: smoothing (finite, > 0: it starts the update RMS).
        learning_rate: scales the step (finite, >= 0; default 1).
        wdecay, gradient_clip_norm, gradient_clip_value, schedule, name: see ``Optimizer``.

    Raises:
        OptimizerError: a hyper-parameter out of range.

    Example:
        >>> update = Adadelta(decay=0.95, epsilon=1e-6)(cost, model.variables)
    """

    def __init__(self, decay: float = 0.95, epsilon: float = 1e-6, learning_rate: float = 1.0,
                 wdecay: float = 0.0, gradient_clip_norm: float | None = None,
                 gradient_clip_value: float | None = None, schedule: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule, name)
        self.decay = check_number("Adadelta", "decay", decay, 0.0, 1.0, high_open=True)
        self.epsilon = check_number("Adadelta", "epsilon", epsilon, 0.0, low_open=True)

    def slot_names(self) -> tuple[str, ...]:
        return ("mean_square_grad", "mean_square_delta")

    def build_updates(self, grads_and_vars: list[tuple[ng.Op, ng.Op]], lr: ng.Op) -> list[ng.Op]:
        rho, eps = self.decay, self.epsilon
        updates = []
        for g, var in grads_and_vars:
            eg, ed = self.slot(var, "mean_square_grad"), self.slot(var, "mean_square_delta")
            eg_new = ng.assign(eg, rho * eg + (1.0 - rho) * ng.square(g))
            delta = ng.sqrt(ed + eps) / ng.sqrt(eg_new + eps) * g
            ed_new = ng.assign(ed, rho * ed + (1.0 - rho) * ng.square(delta))
            # assignments run in the order listed: delta (reading the old Ed) is computed once, for both
            updates += [ed_new, ng.assign(var, var - lr * delta)]
        return updates

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "decay": self.decay, "epsilon": self.epsilon}
