"""``Dropout``: inverted dropout, a fresh mask every run in training mode, identity otherwise."""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Layer, is_training
from .checks import finite_float, layer_error


class Dropout(Layer):
    """Keeps each element with probability ``keep`` and scales it by ``1 / keep`` (training mode).

    In training mode the output is ``x * (u < keep) / keep`` with ``u`` a fresh
    ``ng.uniform`` sample per element and per run, so the expected output is ``x``;
    in inference mode the layer is the identity (no rescaling needed).

    Args:
        keep: probability of keeping an element, in (0, 1]; 1 makes the layer the identity.
        seed: seeds the mask's own generator (a reproducible sequence of masks); None uses
            the transformer's seed.
        name: the layer's name.

    Raises:
        LayerError: ``keep`` outside (0, 1], or a non-int seed.

    Example:
        >>> with training_mode(True):
        ...     h = Dropout(keep=0.8)(x)
    """

    def __init__(self, keep: float = 0.5, seed: int | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self.keep = finite_float(self, "keep", keep, 0.0, 1.0, low_open=True)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise layer_error(self, "seed to be an int or None", repr(seed), "e.g. Dropout(0.5, seed=0)")
        self.seed = seed

    def call(self, x: ng.Op) -> ng.Op:
        if not is_training() or self.keep == 1.0:
            return x
        mask = ng.less(ng.uniform(x.axes, 0.0, 1.0, seed=self.seed, dtype=x.dtype), self.keep)
        return x * mask * (1.0 / self.keep)

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"name": self.name, "keep": self.keep}
        if self.seed is not None:
            config["seed"] = self.seed
        return config
