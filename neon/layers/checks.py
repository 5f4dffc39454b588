"""Validation shared by the layers: config values, input axes, and the errors they raise.

Every message names the layer, says what was expected and what was received, and
ends with a ``hint:``. Layout conventions the checks encode (neon's): the batch axis
is ``N`` (last), the recurrent axis ``REC``; every other axis is a *feature* axis,
and the first feature axis is *the* feature (or channel) axis.
"""

from __future__ import annotations

import math
from typing import Any

import ngraph_core as ng
from neon import activations, initializers

from .base import Layer, LayerError


def describe(layer: Layer) -> str:
    """``Affine_0 (Affine)``: how messages name a layer."""
    return f"{layer.name} ({type(layer).__name__})"


def layer_error(layer: Layer, expected: str, received: Any, hint: str) -> LayerError:
    """A ``LayerError`` reading ``<layer>: expected X, received: Y; hint: Z``."""
    return LayerError(f"{describe(layer)}: expected {expected}, received: {received}; hint: {hint}")


def fmt_axes(axes: Any) -> str:
    """``[F:5, N:4]``: how messages show axes."""
    return str(ng.make_axes(axes)) if axes is not None else "none"


def positive_int(layer: Layer, key: str, value: Any) -> int:
    """``value`` as an int > 0, or ``LayerError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise layer_error(layer, f"{key} to be a positive int", repr(value), f"e.g. {type(layer).__name__}({key}=10)")
    return int(value)


def finite_float(layer: Layer, key: str, value: Any, low: float, high: float, low_open: bool = False,
                 high_open: bool = False) -> float:
    """``value`` as a float in the interval (bounds open or closed), or ``LayerError``."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise layer_error(layer, f"{key} to be a number in {interval}", repr(value), f"pass {key} within {interval}")
    return float(value)


def as_initializer(layer: Layer, key: str, value: Any) -> initializers.Initializer:
    """``initializers.get(value)``, re-raised as ``LayerError`` naming the layer."""
    try:
        return initializers.get(value, where=f"{describe(layer)} {key}")
    except initializers.InitializerError as exc:
        raise LayerError(str(exc)) from None


def as_activation(layer: Layer, value: Any) -> activations.Transform:
    """``activations.get(value)``, re-raised as ``LayerError`` naming the layer."""
    try:
        return activations.get(value, where=f"{describe(layer)} activation")
    except activations.ActivationError as exc:
        raise LayerError(str(exc)) from None


def feature_axes(x: ng.Op) -> ng.Axes:
    """The axes of ``x`` that are neither the batch (``N``) nor the recurrent (``REC``) axis."""
    return ng.make_axes(a for a in x.axes if not (a.is_batch or a.is_recurrent))


def feature_axis(layer: Layer, x: ng.Op) -> ng.Axis:
    """The first feature axis of ``x`` (the feature or channel axis), or ``LayerError``."""
    found = feature_axes(x)
    if len(found) == 0:
        raise layer_error(layer, "an input with a feature axis (an axis other than N and REC)", fmt_axes(x.axes),
                          "neon's layout is features first, batch last, e.g. [F:784, N:128]")
    return found[0]


def batch_axis(layer: Layer, x: ng.Op) -> ng.Axis:
    """The batch axis ``N`` of ``x``, or ``LayerError``."""
    axis = x.axes.batch_axis
    if axis is None:
        raise layer_error(layer, "an input with a batch axis named 'N'", fmt_axes(x.axes),
                          "name the batch axis 'N', e.g. ng.make_axis(128, name='N')")
    return axis


def free_name(layer: Layer, x: ng.Op, name: str) -> None:
    """``LayerError`` when ``x`` already has an axis called ``name`` (the layer would create a second one)."""
    if x.axes.find(name) is not None:
        raise layer_error(layer, f"an input without an axis named {name!r} (the axis this layer creates)",
                          fmt_axes(x.axes), "give the layer another name; its output axis is named after it")


def output_axis(layer: Layer, x: ng.Op, length: int, name: str, strict: bool) -> ng.Axis:
    """The axis a layer creates, named ``name``; when ``x`` has an axis of that name already, a
    ``strict`` (user-given) name raises ``LayerError``, a generated one becomes ``<name>_1``, ``_2``...

    Generated names are relative to the parent, so a nested layer can share its name with a
    layer before it (``Conv_0`` inside ``ResidualBlock_0`` after the stem's ``Conv_0``).
    """
    if strict:
        free_name(layer, x, name)
        return ng.make_axis(length, name=name)
    candidate, k = name, 0
    while x.axes.find(candidate) is not None:
        k += 1
        candidate = f"{name}_{k}"
    return ng.make_axis(length, name=candidate)


def same_axes(layer: Layer, x_axes: ng.Axes, built: ng.Axes, what: str) -> None:
    """``LayerError`` when a later call's ``what`` axes differ from those the layer was built for."""
    if not ng.make_axes(x_axes).same_set(built):
        raise layer_error(layer, f"{what} {fmt_axes(built)} (the layer was built for them)", fmt_axes(x_axes),
                          "a layer called twice shares its weights, so every input needs the same feature axes")
