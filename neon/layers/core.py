"""The dense layers: ``Linear``, ``Bias``, ``Activation`` and ``Affine`` (their composition).

Layout (neon's): features first, batch (``N``) last, e.g. ``[F:784, N:128]``. A
*feature* axis is any axis other than ``N`` and the recurrent axis ``REC``; the first
feature axis is the one ``Bias`` and ``BatchNorm`` work along.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ngraph_core as ng
from neon import activations, initializers

from .base import Layer, LayerError
from .checks import (
    as_activation,
    as_initializer,
    describe,
    feature_axes,
    feature_axis,
    layer_error,
    output_axis,
    positive_int,
    same_axes,
)
from .composite import CompositeLayer
from .normalization import BatchNorm


class Linear(Layer):
    """``W · x``: a fully connected layer without bias.

    The weight ``W`` has axes ``[Out] + <the input's feature axes>``, so the dot contracts
    every feature axis (an image ``[C, H, W, N]`` needs no ``Flatten``) and keeps ``N``
    and ``REC``: ``[F, N] -> [Out, N]``, ``[F, REC, N] -> [Out, REC, N]``. The output
    axis ``Out`` has length ``nout`` and is named ``axis_name`` (default: the layer's
    name), so every layer's output axis is distinct.

    Args:
        nout: output size (> 0).
        init: initializer of ``W`` (an ``Initializer``, a name, or a number); default ``GlorotUniform()``.
        axis_name: the output axis name (``Affine`` passes its own name).
        name: the layer's name.

    Raises:
        LayerError: ``nout <= 0``, an unknown init; at call, an input with no feature axis
            or (on a later call) other feature axes than the first.

    Example:
        >>> y = Linear(10, init=GlorotUniform())(x)  # x [F:784, N:128] -> y [Linear_0:10, N:128]
    """

    def __init__(self, nout: int, init: Any = None, axis_name: str | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self.nout = positive_int(self, "nout", nout)
        self.init = as_initializer(self, "init", initializers.GlorotUniform() if init is None else init)
        if axis_name is not None and (not isinstance(axis_name, str) or not axis_name):
            raise layer_error(self, "axis_name to be a non-empty str or None", repr(axis_name),
                              "leave it out to name the output axis after the layer")
        self.axis_name = axis_name
        self.strict_axis_name = axis_name is not None or self.explicit_name
        self._out_axis: ng.Axis | None = None

    @property
    def out_axis(self) -> ng.Axis:
        """The output axis (made at build; before it, the axis the current name would give)."""
        return self._out_axis or ng.make_axis(self.nout, name=self.axis_name or self.name)

    def build(self, x: ng.Op) -> None:
        feature_axis(self, x)
        self._out_axis = output_axis(self, x, self.nout, self.axis_name or self.name, self.strict_axis_name)
        self.in_axes = feature_axes(x)
        self.W = self.add_variable("W", [self.out_axis, *self.in_axes], self.init, labels=("weight",))

    def call(self, x: ng.Op) -> ng.Op:
        same_axes(self, feature_axes(x), self.in_axes, "feature axes")
        return ng.dot(self.W, x)

    def get_config(self) -> dict[str, Any]:
        config = {"name": self.name, "nout": self.nout, "init": initializers.serialize(self.init)}
        if self.axis_name is not None:
            config["axis_name"] = self.axis_name
        return config


class Bias(Layer):
    """``x + b``, with ``b`` along the input's feature (or channel) axis.

    ``b`` has one axis, the input's first feature axis (``Out`` of ``[Out, N]``, ``C`` of
    ``[C, H, W, N]``), and is broadcast over the others.

    Args:
        init: initializer of ``b``; default ``Constant(0)``.
        name: the layer's name.

    Example:
        >>> y = Bias(init=Constant(0.1))(x)
    """

    def __init__(self, init: Any = None, name: str | None = None) -> None:
        super().__init__(name)
        self.init = as_initializer(self, "init", initializers.Constant(0.0) if init is None else init)

    def build(self, x: ng.Op) -> None:
        self.axis = feature_axis(self, x)
        self.b = self.add_variable("b", [self.axis], self.init, labels=("bias",))

    def call(self, x: ng.Op) -> ng.Op:
        same_axes(self, [feature_axis(self, x)], [self.axis], "feature axis")
        return x + self.b

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "init": initializers.serialize(self.init)}


class Activation(Layer):
    """Applies an activation function (``neon.activations``) element-wise.

    Args:
        activation: an activation object (``Rectlin()``), its name (``"relu"``, ``"Tanh"``;
            see ``neon.activations``), or its serialized config.
        name: the layer's name.

    Raises:
        LayerError: an unknown activation.

    Example:
        >>> h = Activation("relu")(x)
    """

    def __init__(self, activation: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.activation = as_activation(self, activation)

    def call(self, x: ng.Op) -> ng.Op:
        return self.activation(x)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "activation": activations.serialize(self.activation)}


class LayerStack(CompositeLayer):
    """A core layer (``Linear``, ``Convolution``...) then, when asked for, ``BatchNorm_0``,
    ``Bias_0`` and ``Activation_0`` sub-layers, all in this layer's scope (``Affine``, ``Conv``)."""

    core: Layer

    def _stack(self, make_core: Callable[[], Layer], bias: Any, activation: Any, batch_norm: Any) -> None:
        if not isinstance(batch_norm, bool):
            raise layer_error(self, "batch_norm to be a bool", repr(batch_norm), "pass batch_norm=True or False")
        try:
            self.core = make_core()
        except LayerError as exc:
            raise LayerError(f"{describe(self)} > {exc}") from None  # name the layer the user made
        self.core.strict_axis_name = self.explicit_name  # type: ignore[attr-defined]  # named after this layer
        self.batch_norm = BatchNorm(name="BatchNorm_0") if batch_norm else None
        self.bias = Bias(as_initializer(self, "bias", bias), name="Bias_0") if bias is not None else None
        self.activation = Activation(as_activation(self, activation), name="Activation_0") \
            if activation is not None else None

    @property
    def sublayers(self) -> list[Layer]:
        return [layer for layer in (self.core, self.batch_norm, self.bias, self.activation) if layer is not None]

    @property
    def out_axis(self) -> ng.Axis:
        """The output axis (features or channels, named after this layer)."""
        return self.core.out_axis  # type: ignore[attr-defined]

    def rename(self, name: str) -> None:
        """Rename the layer and the output axis its core names after it."""
        super().rename(name)
        self.core.axis_name = name  # type: ignore[attr-defined]

    def call(self, x: ng.Op) -> ng.Op:
        for layer in self.sublayers:
            try:
                x = layer(x)
            except LayerError as exc:
                # name the layer the user made, not only the part of it that failed
                raise LayerError(f"{describe(self)} > {exc}") from None
        return x

    def _tail_config(self) -> dict[str, Any]:
        return {
            "bias": initializers.serialize(self.bias.init) if self.bias is not None else None,
            "activation": activations.serialize(self.activation.activation) if self.activation is not None else None,
            "batch_norm": self.batch_norm is not None,
        }


class Affine(LayerStack):
    """A fully connected layer: ``Linear``, then ``BatchNorm``, ``Bias``, ``Activation`` when asked for.

    The parts are sub-layers built in this layer's scope, named ``Linear_0``,
    ``BatchNorm_0``, ``Bias_0`` and ``Activation_0`` (a variable's scope path reads
    ``(..., Affine_3, Bias_0)``; an optimizer can route by the ``Bias`` layer type). The
    output axis is named after this layer: ``[F, N] -> [<name>:nout, N]``.

    Args:
        nout: output size (> 0).
        init: initializer of the weights; default ``GlorotUniform()``.
        bias: initializer of the bias; None for no bias.
        activation: an activation (object, name or config); None for none.
        batch_norm: normalize the linear output with ``BatchNorm`` (before the bias).
        name: the layer's name.

    Raises:
        LayerError: a bad ``nout``, init or activation.

    Example:
        >>> fc = Affine(100, init=Kaiming(), bias=Constant(0), activation=Rectlin())
        >>> h = fc(x)  # x [F:784, N:128] -> h [Affine_0:100, N:128]
    """

    def __init__(self, nout: int, init: Any = None, bias: Any = None, activation: Any = None,
                 batch_norm: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        self._stack(lambda: Linear(nout, init, axis_name=self.name, name="Linear_0"), bias, activation, batch_norm)
        self.linear = self.core
        self.nout, self.init = self.linear.nout, self.linear.init

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "nout": self.nout, "init": initializers.serialize(self.init),
                **self._tail_config()}
