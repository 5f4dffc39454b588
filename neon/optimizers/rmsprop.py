"""``RMSProp``: divide the gradient by a running root mean square (neon's epsilon placement)."""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Optimizer
from .checks import check_number


class RMSProp(Optimizer):
    """RMSProp, as neon writes it.

    With ``g`` the gradient after clipping plus ``wdecay * W`` and ``s`` zeros at first::

        s <- decay_rate * s + (1 - decay_rate) * g**2
        W <- W - lr * g / (sqrt(s + epsilon) + epsilon)

    PyTorch's ``RMSprop(alpha=decay_rate, eps=e)`` divides by ``sqrt(s) + e`` instead; the two
    agree exactly for ``epsilon = 0`` and differ by O(epsilon) otherwise.

    Args:
        learning_rate: the base rate (finite, >= 0; neon's default 2e-3).
        decay_rate: in [0, 1).
        epsilon: smoothing (finite, >= 0).
        wdecay, gradient_clip_norm, gradient_clip_value, schedule, name: see ``Optimizer``.

    Raises:
        OptimizerError: a hyper-parameter out of range.

    Example:
        >>> update = RMSProp(learning_rate=2e-3, decay_rate=0.95)(cost, model.variables)
    """

    def __init__(self, learning_rate: float = 2e-3, decay_rate: float = 0.95, epsilon: float = 1e-6,
                 wdecay: float = 0.0, gradient_clip_norm: float | None = None,
                 gradient_clip_value: float | None = None, schedule: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule, name)
        self.decay_rate = check_number("RMSProp", "decay_rate", decay_rate, 0.0, 1.0, high_open=True)
        self.epsilon = check_number("RMSProp", "epsilon", epsilon, 0.0)

    def slot_names(self) -> tuple[str, ...]:
        return ("mean_square",)

    def build_updates(self, grads_and_vars: list[tuple[ng.Op, ng.Op]], lr: ng.Op) -> list[ng.Op]:
        rho, eps = self.decay_rate, self.epsilon
        updates = []
        for g, var in grads_and_vars:
            s = self.slot(var, "mean_square")
            s_new = ng.assign(s, rho * s + (1.0 - rho) * ng.square(g))
            updates.append(ng.assign(var, var - lr * g / (ng.sqrt(s_new + eps) + eps)))
        return updates

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "decay_rate": self.decay_rate, "epsilon": self.epsilon}
