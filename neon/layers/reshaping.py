"""``Flatten``: merge every non-batch axis into one feature axis."""

from __future__ import annotations

import ngraph_core as ng

from .base import Layer


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
