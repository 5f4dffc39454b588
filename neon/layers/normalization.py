"""``BatchNorm``: batch normalization over features (Ioffe & Szegedy 2015).

Which axes: the statistics are taken per *feature*, over every other axis. The feature
(channel) axis is the input's first axis that is neither ``N`` nor ``REC``:

* ``[F, N]``: one mean per ``F``, over ``N`` (PyTorch's ``BatchNorm1d``);
* ``[C, H, W, N]``: one mean per channel ``C``, over ``H, W, N`` (``BatchNorm2d``);
* ``[F, REC, N]``: one mean per ``F``, over time and batch.

Training mode (``training_mode(True)``) normalizes with the batch statistics (the
gradient flows through them) and registers, with ``add_update``, the running averages
``mean <- rho * mean + (1 - rho) * batch_mean`` and the same for ``var`` with the
*unbiased* batch variance (``n / (n - 1)`` times the biased one, as PyTorch does; the
normalization itself uses the biased one). Inference mode normalizes with the running
averages. ``rho`` is PyTorch's ``1 - momentum``. Both forms are ``ng.batch_norm``: in training its
gradient is the closed form over one ``moments`` op, which the running-average updates share.
"""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Layer, is_training
from .checks import batch_axis, feature_axis, finite_float, same_axes


class BatchNorm(Layer):
    """``gamma * (x - mean) / sqrt(var + eps) + beta`` per feature (see the module docstring).

    Variables: ``gamma`` (init 1, label ``scale``), ``beta`` (init 0, label ``bias``),
    and the non-trainable running averages ``mean`` (init 0) and ``var`` (init 1),
    labelled ``running``.

    Args:
        rho: decay of the running averages, in [0, 1].
        eps: added to the variance, > 0.
        name: the layer's name.

    Raises:
        LayerError: ``rho`` or ``eps`` out of range; at call, an input without a batch
            axis or a feature axis.

    Example:
        >>> with training_mode(True):
        ...     h = BatchNorm()(x)  # x [F, N]
    """

    def __init__(self, rho: float = 0.9, eps: float = 1e-3, name: str | None = None) -> None:
        super().__init__(name)
        self.rho = finite_float(self, "rho", rho, 0.0, 1.0)
        self.eps = finite_float(self, "eps", eps, 0.0, float("inf"), low_open=True, high_open=True)

    def build(self, x: ng.Op) -> None:
        batch_axis(self, x)
        self.axis = feature_axis(self, x)
        axes = [self.axis]
        self.gamma = self.add_variable("gamma", axes, 1.0, labels=("scale",))
        self.beta = self.add_variable("beta", axes, 0.0, labels=("bias",))
        self.mean = self.add_variable("mean", axes, 0.0, trainable=False, labels=("running",))
        self.var = self.add_variable("var", axes, 1.0, trainable=False, labels=("running",))

    def call(self, x: ng.Op) -> ng.Op:
        batch_axis(self, x)
        same_axes(self, [feature_axis(self, x)], [self.axis], "feature axis")
        if is_training():
            mean, var = ng.moments(x, [self.axis])  # the op ng.batch_norm's statistics come from
            count = x.axes.size // self.axis.length
            unbiased = var * (count / max(count - 1, 1))
            self.add_update(ng.assign(self.mean, self.rho * self.mean + (1.0 - self.rho) * mean))
            self.add_update(ng.assign(self.var, self.rho * self.var + (1.0 - self.rho) * unbiased))
            return ng.batch_norm(x, self.gamma, self.beta, self.eps)
        return ng.batch_norm(x, self.gamma, self.beta, self.eps, mean=self.mean, var=self.var)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "rho": self.rho, "eps": self.eps}
