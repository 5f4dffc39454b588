"""Activation functions: callables that build ngraph ops on an op (``act(x) -> op``).

Each is a small object with ``get_config()`` so layers can serialise it; ``get``
turns a name (``"relu"``, ``"Rectlin"``...), a config dict or an instance into one.

| class | formula | names accepted by ``get`` |
|---|---|---|
| ``Identity`` | x | identity, linear |
| ``Rectlin(slope=0)`` | max(x, 0) + slope * min(x, 0) | rectlin, relu |
| ``Explin(alpha=1)`` | x if x > 0 else alpha * (exp(x) - 1) | explin, elu |
| ``Logistic`` | 1 / (1 + exp(-x)) | logistic, sigmoid |
| ``Tanh`` | tanh(x) | tanh |
| ``Softmax`` | exp(x) / sum(exp(x)) over the feature axes | softmax |
| ``Softplus`` | log(1 + exp(x)) | softplus |
| ``Gelu(approximate="none")`` | x * Phi(x) (``ng.gelu``; ``"tanh"``: its tanh approximation) | gelu |

Example:
    >>> from neon.activations import Rectlin
    >>> h = Rectlin()(z)  # z an op
"""

from __future__ import annotations

import math
from typing import Any

import ngraph_core as ng

from .registry import lookup


class ActivationError(ng.NgraphError, ValueError):
    """An activation was configured with values it cannot use, or named wrongly."""


class Transform:
    """Base of the activation functions: ``__call__(x)`` builds the op."""

    def __call__(self, x: ng.Op) -> ng.Op:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__(x)")

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain data."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Transform:
        """A new transform from ``get_config()``'s output."""
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.get_config() == self.get_config()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.get_config().items()))))


def _number(cls_name: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ActivationError(f"{cls_name}: {key} must be a finite number, received {value!r}")
    return float(value)


class Identity(Transform):
    """x (no activation)."""

    def __call__(self, x: ng.Op) -> ng.Op:
        return x


class Rectlin(Transform):
    """Rectified linear: max(x, 0) + slope * min(x, 0) (``slope > 0``: leaky ReLU).

    Example:
        >>> h = Rectlin(slope=0.1)(z)
    """

    def __init__(self, slope: float = 0.0) -> None:
        self.slope = _number("Rectlin", "slope", slope)

    def __call__(self, x: ng.Op) -> ng.Op:
        if self.slope == 0:
            return ng.relu(x)
        return ng.maximum(x, 0.0) + self.slope * ng.minimum(x, 0.0)

    def get_config(self) -> dict[str, Any]:
        return {"slope": self.slope}


class Explin(Transform):
    """Exponential linear unit: x if x > 0 else alpha * (exp(x) - 1).

    Example:
        >>> h = Explin(alpha=1.0)(z)
    """

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = _number("Explin", "alpha", alpha)

    def __call__(self, x: ng.Op) -> ng.Op:
        # exp of min(x, 0) only: exp(x) for a large positive x would overflow for nothing
        return ng.maximum(x, 0.0) + self.alpha * (ng.exp(ng.minimum(x, 0.0)) - 1.0)

    def get_config(self) -> dict[str, Any]:
        return {"alpha": self.alpha}


class Logistic(Transform):
    """1 / (1 + exp(-x)). A cost (``CrossEntropyBinary``) recognises it and works from its logits."""

    def __call__(self, x: ng.Op) -> ng.Op:
        return ng.sigmoid(x)


class Tanh(Transform):
    """Hyperbolic tangent."""

    def __call__(self, x: ng.Op) -> ng.Op:
        return ng.tanh(x)


class Softmax(Transform):
    """exp(x) / sum(exp(x)) over the feature axes: every axis but the batch (``N``) and
    recurrent (``REC``) ones, so a sequence gets one distribution per time step.

    A cost (``CrossEntropyMulti``) recognises it and works from its logits.
    """

    def __call__(self, x: ng.Op) -> ng.Op:
        features = [a for a in x.axes if not (a.is_batch or a.is_recurrent)]
        if not features:
            raise ActivationError(
                f"Softmax: expected an input with a feature axis, received axes {ng.make_axes(x.axes)}; "
                "hint: softmax normalizes over every axis except N and REC"
            )
        return ng.softmax(x, normalization_axes=features)


class Softplus(Transform):
    """log(1 + exp(x)), computed stably."""

    def __call__(self, x: ng.Op) -> ng.Op:
        return ng.softplus(x)


class Gelu(Transform):
    """The Gaussian error linear unit ``x * Phi(x)`` (``ng.gelu``): exact, or its tanh approximation.

    Example:
        >>> h = Gelu(approximate="tanh")(z)
    """

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ng.api.nn.GELU_APPROXIMATIONS:
            raise ActivationError(f"Gelu: expected approximate in {ng.api.nn.GELU_APPROXIMATIONS}, received "
                                  f"{approximate!r}; hint: 'none' (exact) or 'tanh'")
        self.approximate = approximate

    def __call__(self, x: ng.Op) -> ng.Op:
        return ng.gelu(x, approximate=self.approximate)

    def get_config(self) -> dict[str, Any]:
        return {"approximate": self.approximate}


_ALIASES: dict[str, type[Transform]] = {
    "identity": Identity, "linear": Identity, "rectlin": Rectlin, "relu": Rectlin, "explin": Explin, "elu": Explin,
    "logistic": Logistic, "sigmoid": Logistic, "tanh": Tanh, "softmax": Softmax, "softplus": Softplus,
    "gelu": Gelu,
}


def serialize(activation: Transform) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` for ``activation`` (plain data; ``get`` reverses it)."""
    return {"class_name": type(activation).__name__, "config": activation.get_config()}


def get(identifier: Any, where: str = "activation") -> Transform:
    """An activation from an instance, a name (case-insensitive, see the module table) or a
    ``serialize`` dict.

    Raises:
        ActivationError: an unknown name, or something else.

    Example:
        >>> get("relu"), get("Tanh"), get({"class_name": "Rectlin", "config": {"slope": 0.1}})
    """
    return lookup(identifier, Transform, _ALIASES, ActivationError, where, "activation",
                  "an activation (e.g. neon.activations.Rectlin()), a name such as 'relu', or a config dict")


__all__ = [
    "Transform", "ActivationError", "Identity", "Rectlin", "Explin", "Logistic", "Tanh", "Softmax", "Softplus", "Gelu",
    "serialize", "get",
]
