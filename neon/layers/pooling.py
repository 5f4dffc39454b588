"""Pooling layers: ``Pool`` (max or average over windows) and ``GlobalAvgPool``.

Both read an image ``[C, *spatial, N]`` as ``Conv`` does (``image_roles``); pooling keeps
every axis, the spatial ones with their pooled lengths, and has no variables.
"""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

from .base import Layer, LayerError
from .checks import describe, layer_error
from .convolution import as_padding, image_roles, per_axis

POOL_OPS = ("max", "avg")


class Pool(Layer):
    """Max or average pooling over windows of the spatial axes (``ng.pooling``; PyTorch's max/avg_pool).

    Args:
        fshape: the window length: an int for every spatial axis, or one per spatial axis
            (then the input needs that many spatial axes).
        op: ``"max"`` or ``"avg"`` (an average divides by the window size, padding included,
            as PyTorch's default ``count_include_pad=True``).
        strides: the step between windows; default ``fshape`` (windows side by side).
        padding: added on both sides of each spatial axis (an int or one per axis), at most half
            the window: ``-inf`` for max, zeros for avg.
        ceil_mode: round the output length up instead of down (a last window starting in the
            right padding is dropped, as PyTorch).
        name: the layer's name.

    Raises:
        LayerError: an unknown ``op``, bad lengths or padding; at call, an input that is not an
            image ``[C, *spatial, N]`` or whose padded spatial axes are shorter than the window.

    Example:
        >>> p = Pool(2)(h)                                   # [K, H:32, W:32, N] -> [K, H:16, W:16, N]
        >>> p = Pool((3, 3), op="avg", strides=2, padding=1)(h)
    """

    def __init__(self, fshape: Any, op: str = "max", strides: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        self.fshape = per_axis(self, "fshape", fshape, None, 1)
        self.rank = None if isinstance(self.fshape, int) else len(self.fshape)
        if op not in POOL_OPS:
            raise layer_error(self, f"op to be one of {POOL_OPS}", repr(op), "e.g. Pool(2, op='max')")
        self.op = op
        self.strides = None if strides is None else per_axis(self, "strides", strides, self.rank, 1)
        self.padding = as_padding(self, padding, self.rank)
        if isinstance(self.padding, str) or (isinstance(self.padding, list) and isinstance(self.padding[0], list)):
            raise layer_error(self, "padding as an int or one int per spatial axis (the same on both sides)",
                              repr(padding), "e.g. padding=1 for a 3x3 window")
        if not isinstance(ceil_mode, bool):
            raise layer_error(self, "ceil_mode to be a bool", repr(ceil_mode), "pass ceil_mode=True or False")
        self.ceil_mode = ceil_mode

    def call(self, x: ng.Op) -> ng.Op:
        image_roles(self, x, self.rank)
        try:
            return ng.pooling(x, self.fshape, self.op, self.strides, self.padding, self.ceil_mode)
        except ng.AxesError as exc:
            raise LayerError(f"{describe(self)}: {exc}") from None

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "fshape": self.fshape, "op": self.op, "strides": self.strides,
                "padding": self.padding, "ceil_mode": self.ceil_mode}


class GlobalAvgPool(Layer):
    """The mean over every spatial axis: ``[C, *spatial, N] -> [C, N]`` (PyTorch's ``AdaptiveAvgPool(1)``
    then flatten), as ResNet ends before its classifier.

    Args:
        name: the layer's name.

    Raises:
        LayerError: at call, an input that is not an image ``[C, *spatial, N]``.

    Example:
        >>> features = GlobalAvgPool()(h)  # [K:64, H:8, W:8, N] -> [K:64, N]
    """

    def call(self, x: ng.Op) -> ng.Op:
        _, spatial, _ = image_roles(self, x)
        return ng.mean(x, reduction_axes=spatial)
