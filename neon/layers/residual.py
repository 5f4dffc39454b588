"""``ResidualBlock``: ``activation(branch(x) + shortcut(x))`` on images (He et al. 2016).

The shortcut options of the paper (section 4.2, CIFAR-10 and ImageNet), for a block whose
branch changes the shape (more channels ``K > C``, spatial lengths divided by a stride):

* ``"A"``: identity where the shape is kept; otherwise parameter-free: subsample the input
  spatially by the stride (``x[:, ::s, ::s]``) and append ``K - C`` zero channels. The
  paper's CIFAR-10 ResNets (ResNet-20: 0.27M parameters) use it.
* ``"B"``: identity where the shape is kept; otherwise a projection: a 1x1 convolution with
  the stride (no bias, ``Conv``'s default ``GlorotUniform`` init) and ``BatchNorm`` (as the
  usual implementations add), named ``Projection_0`` inside the block.
* ``"C"``: the projection on every block.
* a list of layers: your own shortcut branch (``[]``: always the identity).

The stride is read from the shapes: the smallest ``s`` with ``ceil(L / s)`` equal to the
branch's output length along every spatial axis (what a 3x3 convolution with padding 1 and
stride ``s`` gives). The shortcut's output takes the branch output's axis names, as
``MergeSum`` conforms its branches.
"""

from __future__ import annotations

from typing import Any

import ngraph_core as ng
from neon import activations

from .base import Layer, LayerError, name_children
from .checks import as_activation, describe, fmt_axes, layer_error
from .composite import CompositeLayer, unique
from .convolution import Conv, image_roles
from .core import Activation
from .serialization import deserialize_layer, serialize_layer

SHORTCUTS = ("A", "B", "C")


def _layers(owner: Layer, value: Any, what: str) -> list[Layer]:
    items = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(layer, Layer) for layer in items):
        raise layer_error(owner, f"{what} as a list of layers", repr(value),
                          "e.g. [Conv((3, 3, 16), padding=1, batch_norm=True, activation='relu'), ...]")
    return list(items)


def _strides(owner: Layer, lengths: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """Per spatial axis the smallest ``s`` with ``ceil(L / s) == out`` (a stride-``s`` subsample's length)."""
    strides = []
    for length, n in zip(lengths, out):
        s = next((s for s in range(1, length + 1) if -(-length // s) == n), None)
        if s is None:
            raise layer_error(owner, f"a branch whose output lengths are the input's {lengths} divided by a stride",
                              out, "a shortcut can subsample but not upsample or crop; give your own shortcut layers")
        strides.append(s)
    return tuple(strides)


class ResidualBlock(CompositeLayer):
    """``activation(branch(x) + shortcut(x))`` for images ``[C, *spatial, N]`` (see the module docstring).

    Args:
        branch: the residual function, a list of layers (e.g. conv-bn-relu-conv-bn).
        shortcut: ``"A"``, ``"B"``, ``"C"`` or a list of layers (``[]``: the identity).
        activation: applied to the sum (an activation, name or config); None for none.
        name: the layer's name.

    Raises:
        LayerError: an unknown shortcut; at call, a branch output that is not an image of the
            input's rank, or one option ``"A"`` cannot reach (fewer channels, or lengths that
            are not the input's divided by a stride).

    Example:
        >>> block = ResidualBlock([Conv((3, 3, 32), strides=2, padding=1, batch_norm=True, activation="relu"),
        ...                        Conv((3, 3, 32), padding=1, batch_norm=True)], shortcut="A")
        >>> h = block(x)  # [C:16, H:32, W:32, N] -> [Conv_1:32, H:16, W:16, N]
        >>> block = ResidualBlock.basic(32, strides=2)  # the same block
    """

    def __init__(self, branch: Any, shortcut: Any = "A", activation: Any = "relu", name: str | None = None) -> None:
        super().__init__(name)
        self.branch = _layers(self, branch, "branch")
        if not self.branch:
            raise layer_error(self, "a branch with at least one layer", "[]", "the branch is the residual function")
        if isinstance(shortcut, str) and shortcut not in SHORTCUTS:
            raise layer_error(self, f"shortcut to be one of {SHORTCUTS} or a list of layers", repr(shortcut),
                              "'A' pads with zeros, 'B' projects where the shape changes, 'C' projects always")
        self.shortcut = shortcut if isinstance(shortcut, str) else _layers(self, shortcut, "shortcut")
        self.activation = Activation(as_activation(self, activation), name="Activation_0") \
            if activation is not None else None
        self.projection: Conv | None = None
        name_children(self.sublayers)

    @classmethod
    def basic(cls, nout: int, strides: int = 1, shortcut: Any = "A", init: Any = None,
              name: str | None = None) -> ResidualBlock:
        """He et al.'s basic block: 3x3 conv (``strides``)-BN-ReLU, 3x3 conv-BN, the shortcut, ReLU.

        Example:
            >>> stage = [ResidualBlock.basic(32, strides=2)] + [ResidualBlock.basic(32) for _ in range(2)]
        """
        return cls([Conv((3, 3, nout), strides=strides, padding=1, init=init, batch_norm=True, activation="relu"),
                    Conv((3, 3, nout), padding=1, init=init, batch_norm=True)], shortcut, "relu", name)

    @property
    def sublayers(self) -> list[Layer]:
        extra = self.shortcut if isinstance(self.shortcut, list) else [self.projection]
        return unique([layer for layer in (*self.branch, *extra, self.activation) if layer is not None])

    def call(self, x: ng.Op) -> ng.Op:
        channel, spatial, batch = image_roles(self, x)
        h = x
        for layer in self.branch:
            h = layer(h)
        if not isinstance(h, ng.Op) or h.axes.batch_axis is None or len(h.axes) != len(x.axes):
            raise layer_error(self, f"a branch output of the input's rank {len(x.axes)} with a batch axis",
                              fmt_axes(h.axes) if isinstance(h, ng.Op) else type(h).__name__,
                              "end the branch with a Conv")
        out_channel, out_spatial, out_batch = image_roles(self, h)
        target = [out_channel, *out_spatial, out_batch]
        same = (channel.length, *spatial.lengths) == (out_channel.length, *out_spatial.lengths)
        s = ng.axes_with_order(x, [channel, *spatial, batch])
        if isinstance(self.shortcut, list):
            for layer in self.shortcut:
                s = layer(s)
            s_channel, s_spatial, s_batch = image_roles(self, s)
            s = ng.axes_with_order(s, [s_channel, *s_spatial, s_batch])
        elif self.shortcut == "C" or (self.shortcut == "B" and not same):
            s = self._project(s, spatial.lengths, out_channel.length, out_spatial.lengths)
        elif not same:
            s = self._pad_subsample(s, out_channel.length, out_spatial.lengths)
        if s.axes.lengths != tuple(a.length for a in target):
            raise layer_error(self, f"a shortcut output of the branch output's lengths {fmt_axes(target)}",
                              fmt_axes(s.axes), "make the shortcut layers produce the branch's shape")
        out = h + ng.cast_axes(s, target)
        return self.activation(out) if self.activation is not None else out

    def _project(self, x: ng.Op, lengths: tuple[int, ...], nout: int, out: tuple[int, ...]) -> ng.Op:
        """Options B and C: a 1x1 convolution with the stride, then BatchNorm."""
        if self.projection is None:
            rank = len(lengths)
            self.projection = Conv((1,) * rank + (nout,), strides=list(_strides(self, lengths, out)),
                                   batch_norm=True, name="Projection_0")
        try:
            return self.projection(x)
        except LayerError as exc:
            raise LayerError(f"{describe(self)} > {exc}") from None

    def _pad_subsample(self, x: ng.Op, nout: int, out: tuple[int, ...]) -> ng.Op:
        """Option A: ``x[:, ::s, ::s]`` with ``nout - C`` zero channels appended (no parameters)."""
        channel = x.axes[0]
        if nout < channel.length:
            raise layer_error(self, f"a branch with at least the input's {channel.length} channels (option A pads "
                              "with zeros)", f"{nout} channels", "use shortcut='B' to project to fewer channels")
        strides = _strides(self, x.axes.lengths[1:-1], out)
        x = ng.tensor_slice(x, [slice(None), *(slice(None, None, s) for s in strides), slice(None)])
        return ng.pad(x, [(0, nout - channel.length)] + [(0, 0)] * (len(x.axes) - 1))

    def get_config(self) -> dict[str, Any]:
        shortcut = self.shortcut if isinstance(self.shortcut, str) else [serialize_layer(s) for s in self.shortcut]
        return {"name": self.name, "branch": [serialize_layer(layer) for layer in self.branch], "shortcut": shortcut,
                "activation": activations.serialize(self.activation.activation) if self.activation else None}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None,
                    memo: dict | None = None) -> ResidualBlock:
        memo = {} if memo is None else memo
        shortcut = config.get("shortcut", "A")
        if isinstance(shortcut, list):
            shortcut = [deserialize_layer(c, custom_objects, memo) for c in shortcut]
        return cls([deserialize_layer(c, custom_objects, memo) for c in config["branch"]], shortcut,
                   config.get("activation"), config.get("name"))
