"""``Adagrad``: per-element rates from the sum of all past squared gradients (neon's epsilon placement)."""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Optimizer
from .checks import check_number


class Adagrad(Optimizer):
    """Adagrad, as neon writes it.

    With ``g`` the gradient after clipping plus ``wdecay * W`` and ``G`` zeros at first::

        G <- G + g**2
        W <- W - lr * g / sqrt(G + epsilon)

    PyTorch's ``Adagrad(eps=e)`` (``lr_decay=0``, ``initial_accumulator_value=0``) divides by
    ``sqrt(G) + e`` instead; the two agree exactly for ``epsilon = 0``.

    Args:
        learning_rate: the base rate (finite, >= 0).
        epsilon: smoothing (finite, >= 0).
        wdecay, gradient_clip_norm, gradient_clip_value, schedule, name: see ``Optimizer``.

    Raises:
        OptimizerError: a hyper-parameter out of range.

    Example:
        >>> update = Adagrad(learning_rate=0.01)(cost, model.variables)
    """

    def __init__(self, learning_rate: float = 0.01, epsilon: float = 1e-6, wdecay: float = 0.0,
                 gradient_clip_norm: float | None = None, gradient_clip_value: float | None = None,
                 schedule: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule, name)
        self.epsilon = check_number("Adagrad", "epsilon", epsilon, 0.0)

    def slot_names(self) -> tuple[str, ...]:
        return ("sum_square",)

    def build_updates(self, grads_and_vars: list[tuple[ng.Op, ng.Op]], lr: ng.Op) -> list[ng.Op]:
        updates = []
        for g, var in grads_and_vars:
            acc = self.slot(var, "sum_square")
            acc_new = ng.assign(acc, acc + ng.square(g))
            updates.append(ng.assign(var, var - lr * g / ng.sqrt(acc_new + self.epsilon)))
        return updates

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "epsilon": self.epsilon}
