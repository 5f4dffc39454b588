"""``Flatten``: merge every non-batch axis into one feature axis; ``Unflatten``: split it again."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ngraph_core as ng

from .base import Layer, LayerError


class Flatten(Layer):
    """Merges all axes but the batch axis ``N`` into one, row-major (``ng.flatten``).

    ``[C:3, H:4, W:4, N]`` becomes ``[C_H_W:48, N]`` (the merged axis is named by joining
    the names). An input with at most one non-batch axis passes through unchanged. A
    recurrent axis ``REC`` counts as a non-batch axis and is merged too.

    ``Linear``/``Affine`` contract every feature axis already, so ``Flatten`` is only
    needed where a single feature axis matters (a cost, a concatenation).

    Example:
        >>> flat = Flatten()(img)  # [C, H, W, N] -> [C_H_W, N]
    """

    def call(self, x: ng.Op) -> ng.Op:
        return ng.flatten(x)


class Unflatten(Layer):
    """Splits the one feature axis of ``[F, N]`` into ``shape`` (row-major; ``ng.unflatten``).

    The new axes are named ``names`` (default ``C, H, W`` for three axes, as ``Model`` names
    image samples; ``D0, D1...`` otherwise), so an ``Affine`` output can feed a ``Deconv``.

    Args:
        shape: the lengths of the new axes; their product must be the feature axis' length.
        names: their names (as many as ``shape``).

    Raises:
        LayerError: a bad ``shape``/``names``; at call, not one feature axis, or lengths that
            do not multiply to it.

    Example:
        >>> img = Unflatten((128, 7, 7))(h)  # [Affine_0:6272, N] -> [C:128, H:7, W:7, N]
    """

    def __init__(self, shape: Sequence[int], names: Sequence[str] | None = None, name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(shape, (list, tuple)) or not shape or \
                not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape):
            raise LayerError(f"{type(self).__name__} {self.name}: expected shape as a non-empty tuple of ints >= 1, "
                             f"received {shape!r}")
        default = ("C", "H", "W") if len(shape) == 3 else tuple(f"D{i}" for i in range(len(shape)))
        names = tuple(names) if names is not None else default
        if len(names) != len(shape) or len(set(names)) != len(names):
            raise LayerError(f"{type(self).__name__} {self.name}: expected {len(shape)} distinct names, "
                             f"received {names!r}")
        self.shape, self.names = tuple(shape), names

    def call(self, x: ng.Op) -> ng.Op:
        features = [a for a in x.axes if not a.is_batch]
        if x.axes.batch_axis is None or len(features) != 1 or features[0].length != math.prod(self.shape):
            raise LayerError(f"{type(self).__name__} {self.name}: expected [F:{math.prod(self.shape)}, N] "
                             f"(one feature axis and the batch axis), received {x.axes}")
        new = [ng.make_axis(n, a) for n, a in zip(self.shape, self.names, strict=True)]
        return ng.unflatten(x, features[0], new)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "names": list(self.names)}
