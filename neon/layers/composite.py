"""``CompositeLayer``: a layer made of sub-layers (``Affine``, the containers).

Its ``variables`` and ``updates`` include those of its sub-layers (each once, in
order), so a model, an optimizer or a saver sees every weight through the top layer.
"""

from __future__ import annotations

import ngraph_core as ng

from .base import Layer


def unique(items: list) -> list:
    """``items`` without repeats (by identity), first occurrence kept."""
    seen: dict[int, object] = {}
    for item in items:
        seen.setdefault(id(item), item)
    return list(seen.values())


class CompositeLayer(Layer):
    """Base of layers built from sub-layers; subclasses define ``sublayers``."""

    @property
    def sublayers(self) -> list[Layer]:
        """The direct sub-layers (each once)."""
        return []

    @property
    def variables(self) -> list[ng.Op]:
        """The layer's own variables, then its sub-layers' (each once)."""
        own = list(self._variables.values())
        return unique(own + [v for layer in self.sublayers for v in layer.variables])

    @property
    def updates(self) -> list[ng.Op]:
        """Side effects of the layer and its sub-layers (e.g. BatchNorm's running averages)."""
        return unique(list(self._updates) + [u for layer in self.sublayers for u in layer.updates])

    def walk(self) -> list[Layer]:
        """This layer and every layer inside it, depth first (each once)."""
        found: list[Layer] = [self]
        for layer in self.sublayers:
            found.extend(layer.walk() if isinstance(layer, CompositeLayer) else [layer])
        return unique(found)
