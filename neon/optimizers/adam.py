"""``Adam``: adaptive moment estimation (Kingma & Ba), with PyTorch's epsilon placement."""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Optimizer
from .checks import check_number


class Adam(Optimizer):
    """Adam, as ``torch.optim.Adam`` (the paper's Algorithm 1).

    With ``g`` the gradient after clipping plus ``wdecay * W`` (L2, not AdamW), ``t`` the
    1-based step count and ``m``, ``v`` zeros at first, one step is::

        m <- beta_1 * m + (1 - beta_1) * g
        v <- beta_2 * v + (1 - beta_2) * g**2
        W <- W - lr / (1 - beta_1**t) * m / (sqrt(v) / sqrt(1 - beta_2**t) + epsilon)

    i.e. ``W -= lr * m_hat / (sqrt(v_hat) + epsilon)``. neon added epsilon to ``sqrt(v)``
    before the bias correction (a difference of ``epsilon * sqrt(1 - beta_2**t)``).

    Args:
        learning_rate: the base rate (finite, >= 0).
        beta_1, beta_2: moment decay rates in [0, 1).
        epsilon: added to the denominator (finite, >= 0).
        wdecay, gradient_clip_norm, gradient_clip_value, schedule, name: see ``Optimizer``.

    Raises:
        OptimizerError: a hyper-parameter out of range.

    Example:
        >>> update = Adam(learning_rate=1e-3)(cost, model.variables)
    """

    def __init__(self, learning_rate: float = 1e-3, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-8, wdecay: float = 0.0, gradient_clip_norm: float | None = None,
                 gradient_clip_value: float | None = None, schedule: Any = None, name: str | None = None) -> None:
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule, name)
        self.beta_1 = check_number("Adam", "beta_1", beta_1, 0.0, 1.0, high_open=True)
        self.beta_2 = check_number("Adam", "beta_2", beta_2, 0.0, 1.0, high_open=True)
        self.epsilon = check_number("Adam", "epsilon", epsilon, 0.0)

    uses_step_count = True

    def slot_names(self) -> tuple[str, ...]:
        return ("m", "v")

    def build_updates(self, grads_and_vars: list[tuple[ng.Op, ng.Op]], lr: ng.Op) -> list[ng.Op]:
        b1, b2 = self.beta_1, self.beta_2
        t = self.step_count()
        step_size = lr / (1.0 - ng.power(b1, t))
        root_correction = ng.sqrt(1.0 - ng.power(b2, t))
        updates = []
        for g, var in grads_and_vars:
            m, v = self.slot(var, "m"), self.slot(var, "v")
            m_new = ng.assign(m, b1 * m + (1.0 - b1) * g)
            v_new = ng.assign(v, b2 * v + (1.0 - b2) * ng.square(g))
            denom = ng.sqrt(v_new) / root_correction + self.epsilon
            updates.append(ng.assign(var, var - step_size * m_new / denom))
        return updates

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon}
