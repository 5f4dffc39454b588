"""Convolution layers: ``Convolution`` / ``Deconvolution`` (the filter alone) and ``Conv`` / ``Deconv``.

Layout (neon's, and ``ng.convolution``'s): an image is ``[C, *spatial, N]`` — the channel axis
first, 1 to 3 spatial axes, the batch axis ``N`` — e.g. ``[C:3, H:32, W:32, N:64]`` as
``Model`` feeds CIFAR-shaped data. A filter is ``[C, *window, K]``: the input's channel axis,
one window axis per spatial axis (``R, S``; ``S`` in 1-D; ``T, R, S`` in 3-D) and the output
channel axis ``K``, which is named after the layer, as ``Affine``'s output axis is. The
output ``[K, *spatial, N]`` keeps the input's spatial axis names with their new lengths, so
``Bias`` and ``BatchNorm`` (which work along the first axis) are per output channel.

``Conv`` and ``Deconv`` compose, like ``Affine``: the filter (``Convolution_0`` or
``Deconvolution_0``), then ``BatchNorm_0``, ``Bias_0`` and ``Activation_0`` when asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ngraph_core as ng
from neon import initializers

from .base import Layer, LayerError
from .checks import as_initializer, describe, fmt_axes, layer_error, output_axis, positive_int
from .core import LayerStack

WINDOW_AXIS_NAMES = {1: ("S",), 2: ("R", "S"), 3: ("T", "R", "S")}
SPATIAL_EXAMPLES = {1: "[C, W, N]", 2: "[C, H, W, N]", 3: "[C, D, H, W, N]"}


def image_roles(layer: Layer, x: ng.Op, rank: int | None = None) -> tuple[ng.Axis, ng.Axes, ng.Axis]:
    """``(channel, spatial, batch)`` of an image input ``[C, *spatial, N]``, or ``LayerError``.

    The roles are read as ``ng.convolution`` reads them: ``N`` is the batch axis, the first
    other axis the channel axis, the rest (``rank`` of them when given, else 1 to 3) spatial.
    """
    batch = x.axes.batch_axis
    rest = ng.make_axes(a for a in x.axes if not a.is_batch)
    spatial = len(rest) - 1
    wanted = f"{rank} spatial ax{'is' if rank == 1 else 'es'}" if rank else "1 to 3 spatial axes"
    if batch is None or (spatial != rank if rank else not 1 <= spatial <= 3):
        example = SPATIAL_EXAMPLES.get(rank or 2, "[C, H, W, N]")
        hint = ("name the batch axis 'N'" if batch is None else
                "an image has its channels first, then its spatial axes, e.g. Model feeds (C, H, W) samples as "
                "[C, H, W, N]; give 2-D samples a channel axis (lshape=(1, H, W))")
        raise layer_error(layer, f"an image {example}: a batch axis N, a channel axis and {wanted}",
                          fmt_axes(x.axes), hint)
    return rest[0], rest[1:], batch


def per_axis(layer: Layer, key: str, value: Any, rank: int | None, minimum: int) -> int | list[int]:
    """``value`` as an int or (when ``rank`` is known) ``rank`` ints, each >= ``minimum``; plain data for configs."""
    def ok(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= minimum

    if ok(value):
        return int(value)
    if isinstance(value, (list, tuple)) and (rank is None or len(value) == rank) and value and all(map(ok, value)):
        return [int(v) for v in value]
    per = f"{rank} " if rank else "one per spatial axis, "
    raise layer_error(layer, f"{key} as an int >= {minimum} or {per}ints >= {minimum}", repr(value),
                      f"e.g. {key}={max(minimum, 1)}")


def as_padding(layer: Layer, value: Any, rank: int | None) -> Any:
    """An int, ``"same"``/``"valid"``, or one int or ``(before, after)`` pair per spatial axis (plain data)."""
    if isinstance(value, str) and value in ("same", "valid"):
        return value

    def ok(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0

    if ok(value):
        return int(value)
    if isinstance(value, (list, tuple)) and value and (rank is None or len(value) == rank):
        pairs = [[int(v[0]), int(v[1])] if isinstance(v, (list, tuple)) and len(v) == 2 and all(map(ok, v))
                 else int(v) if ok(v) else None for v in value]
        if all(p is not None for p in pairs):
            return pairs
    raise layer_error(layer, "padding as an int >= 0, 'same', 'valid', or one int or (before, after) pair per "
                      "spatial axis", repr(value), "e.g. padding=1 keeps a 3x3 convolution's output size")


def same_padding(lengths: Sequence[int], window: Sequence[int], strides: Sequence[int],
                 dilation: Sequence[int]) -> list[tuple[int, int]]:
    """``(before, after)`` padding that gives ``ceil(L / stride)`` outputs (TensorFlow's "same"; with
    stride 1 PyTorch's too): the total split with the extra element after."""
    pads = []
    for length, k, s, d in zip(lengths, window, strides, dilation):
        total = max((-(-length // s) - 1) * s + d * (k - 1) + 1 - length, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def _expand(value: int | list[int], rank: int) -> tuple[int, ...]:
    return (value,) * rank if isinstance(value, int) else tuple(value)


def _window_axes(layer: Layer, window: Sequence[int], taken: Sequence[str]) -> list[ng.Axis]:
    names = WINDOW_AXIS_NAMES[len(window)]
    clash = sorted(set(names) & set(taken))
    if clash:
        raise layer_error(layer, f"channel axes not named {' or '.join(repr(n) for n in names)} (the filter's window "
                          "axes)", f"{clash[0]!r}", "rename the input's channel axis or the layer")
    return [ng.make_axis(k, name) for k, name in zip(window, names)]


class _Filter(Layer):
    """What ``Convolution`` and ``Deconvolution`` share: the checks of ``fshape``, ``strides``,
    ``dilation``, ``init``, the output axis, and of a later call's channels."""

    def __init__(self, fshape: Any, strides: Any, dilation: Any, init: Any, axis_name: Any,
                 name: str | None) -> None:
        super().__init__(name)
        if not isinstance(fshape, (list, tuple)) or not 2 <= len(fshape) <= 4:
            raise layer_error(self, "fshape as (*window, K) with 1 to 3 window lengths", repr(fshape),
                              "e.g. fshape=(3, 3, 64) for 64 filters of 3x3")
        self.fshape = per_axis(self, "fshape", list(fshape), len(fshape), 1)
        self.rank = len(fshape) - 1
        self.window, self.nout = tuple(self.fshape[:-1]), self.fshape[-1]
        self.strides = per_axis(self, "strides", strides, self.rank, 1)
        self.dilation = per_axis(self, "dilation", dilation, self.rank, 1)
        self.init = as_initializer(self, "init", initializers.GlorotUniform() if init is None else init)
        if axis_name is not None and (not isinstance(axis_name, str) or not axis_name):
            raise layer_error(self, "axis_name to be a non-empty str or None", repr(axis_name),
                              "leave it out to name the output axis after the layer")
        self.axis_name = axis_name
        self.strict_axis_name = axis_name is not None or self.explicit_name
        self._out_axis: ng.Axis | None = None
        self.in_channels = 0

    @property
    def out_axis(self) -> ng.Axis:
        """The output channel axis (made at build; before it, the axis the current name would give)."""
        return self._out_axis or ng.make_axis(self.nout, name=self.axis_name or self.name)

    def make_out_axis(self, x: ng.Op) -> None:
        """Create the output channel axis at build, free of ``x``'s axis names (see ``output_axis``)."""
        self._out_axis = output_axis(self, x, self.nout, self.axis_name or self.name, self.strict_axis_name)

    def check_filter_count(self, x: ng.Op) -> None:
        """Refuse an input with one more spatial axis than the window: ``fshape`` lacks its filter count.

        ``Conv((3, 3))`` reads as a 1-D window ``(3,)`` of ``K = 3`` filters; on a 2-D image the
        input check would then say the image should be 1-D. The likely mistake is the missing
        ``K``, so the message says that.
        """
        spatial = sum(1 for a in x.axes if not a.is_batch) - 1
        if x.axes.batch_axis is None or spatial != self.rank + 1 or spatial > 3:
            return
        fshape = tuple(self.fshape)
        raise layer_error(self, f"fshape as (*window, K): {spatial} window lengths for the input's {spatial} spatial "
                                "axes, then K, the filter count", f"fshape={fshape} for input {fmt_axes(x.axes)}",
                          f"the filter count is missing: {fshape} reads as a {self.rank}-D window {self.window} "
                          f"of K={self.nout} filters; write fshape=({', '.join(map(str, fshape))}, K), e.g. "
                          f"{type(self).__name__.replace('olution', '')}(({', '.join(map(str, fshape))}, 64)) for 64 "
                          "filters")

    def spatial_axes(self, x: ng.Op) -> ng.Axes:
        """The spatial axes of ``x``, checking its channels are those the layer was built for."""
        channel, spatial, _ = image_roles(self, x, self.rank)
        if channel.length != self.in_channels:
            raise layer_error(self, f"{self.in_channels} input channels (the layer was built for them)",
                              fmt_axes(x.axes), "a layer called twice shares its filter, so every input needs "
                              "the same number of channels")
        return spatial

    def filter_config(self) -> dict[str, Any]:
        config = {"name": self.name, "fshape": list(self.fshape), "strides": self.strides, "padding": self.padding,
                  "dilation": self.dilation, "init": initializers.serialize(self.init)}
        if self.axis_name is not None:
            config["axis_name"] = self.axis_name
        return config


class Convolution(_Filter):
    """Cross-correlation of the input with a learned filter (``ng.convolution``), without bias.

    The filter ``W`` has axes ``[C, *window, K]`` (``C / groups`` input channels per group, in
    an axis named ``<C>_group`` when ``groups > 1``); the output axis ``K`` is named
    ``axis_name`` (default: the layer's name). Its initial value is drawn output channels
    first, ``(K, C / groups, *window)``, with ``Initializer.fill_filter``, so fans follow
    PyTorch's rule (``fan_in = C/groups * prod(window)``, ``fan_out = K * prod(window)``).

    Args:
        fshape: ``(*window, K)``: 1 to 3 window lengths (one per spatial axis), then the
            number of output channels ``K``.
        strides: the step between windows (an int, or one per spatial axis).
        padding: zeros around the input: an int, one int or ``(before, after)`` pair per
            spatial axis, ``"valid"`` (none) or ``"same"`` (``ceil(L / stride)`` outputs, the
            odd element of padding after, as TensorFlow; PyTorch's too at stride 1).
        dilation: the step between filter taps.
        init: initializer of ``W``; default ``GlorotUniform()``.
        groups: independent channel groups (``C`` and ``K`` divisible by it; ``C`` is depthwise).
        axis_name: the output channel axis name (``Conv`` passes its own name).
        name: the layer's name.

    Raises:
        LayerError: a bad configuration; at call, an input that is not an image with as many
            spatial axes as ``fshape`` has window lengths, channels not divisible by ``groups``,
            a window larger than the padded input, or (on a later call) other channels.

    Example:
        >>> y = Convolution((3, 3, 16), padding=1)(x)  # [C:3, H:32, W:32, N] -> [Convolution_0:16, H:32, W:32, N]
    """

    def __init__(self, fshape: Sequence[int], strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                 init: Any = None, groups: int = 1, axis_name: str | None = None, name: str | None = None) -> None:
        super().__init__(fshape, strides, dilation, init, axis_name, name)
        self.padding = as_padding(self, padding, self.rank)
        self.groups = positive_int(self, "groups", groups)
        if self.nout % self.groups:
            raise layer_error(self, f"groups dividing K = {self.nout}", repr(groups),
                              "K and the input channels must both be multiples of groups")

    def build(self, x: ng.Op) -> None:
        self.check_filter_count(x)
        channel, _, _ = image_roles(self, x, self.rank)
        self.make_out_axis(x)
        if channel.length % self.groups:
            raise layer_error(self, f"input channels divisible by groups={self.groups}", fmt_axes(x.axes),
                              "groups must divide the channel count")
        self.in_channels = channel.length
        ci = channel if self.groups == 1 else ng.make_axis(channel.length // self.groups, f"{channel.name}_group")
        window = _window_axes(self, self.window, [ci.name, self.out_axis.name])
        value = self.init.fill_filter((self.nout, ci.length, *self.window), math.prod(self.window))
        self.W = self.add_variable("W", [ci, *window, self.out_axis], np.moveaxis(value, 0, -1),
                                   labels=("weight",))

    def call(self, x: ng.Op) -> ng.Op:
        spatial = self.spatial_axes(x)
        strides, dilation = _expand(self.strides, self.rank), _expand(self.dilation, self.rank)
        padding = same_padding(spatial.lengths, self.window, strides, dilation) if self.padding == "same" \
            else self.padding
        try:
            return ng.convolution(x, self.W, strides, padding, dilation, self.groups)
        except ng.AxesError as exc:
            raise LayerError(f"{describe(self)}: {exc}") from None

    def get_config(self) -> dict[str, Any]:
        return {**self.filter_config(), "groups": self.groups}


class Deconvolution(_Filter):
    """Transposed convolution (``ng.deconvolution``, PyTorch's ``conv_transpose``), without bias.

    The adjoint of a ``Convolution`` with the same filter layout seen from its output: ``W``
    has axes ``[K, *window, C]`` — ``K`` output channels (named ``axis_name``, default the
    layer's name), the window, the input's channel axis ``C`` last. A stride upsamples:
    each spatial length becomes ``(L - 1) * stride - pad_before - pad_after + dilation *
    (k - 1) + output_padding + 1``. Drawn as ``(K, C, *window)`` with ``fill_filter``:
    ``fan_in = C * prod(window)``, ``fan_out = K * prod(window)``.

    Args:
        fshape: ``(*window, K)``.
        strides: the upsampling factor (an int or one per spatial axis).
        padding: the padding of the convolution this transposes (an int, or one int or
            ``(before, after)`` pair per spatial axis), cropped from the output.
        output_padding: extra length after the output per axis, ``0 <= output_padding < stride``.
        dilation: the step between filter taps.
        init: initializer of ``W``; default ``GlorotUniform()``.
        axis_name: the output channel axis name (``Deconv`` passes its own name).
        name: the layer's name.

    Raises:
        LayerError: as ``Convolution``, and ``output_padding`` outside ``[0, stride)``.

    Example:
        >>> up = Deconvolution((4, 4, 32), strides=2, padding=1)(x)  # [C, 7, 7, N] -> [Deconvolution_0:32, 14, 14, N]
    """

    def __init__(self, fshape: Sequence[int], strides: Any = 1, padding: Any = 0, output_padding: Any = 0,
                 dilation: Any = 1, init: Any = None, axis_name: str | None = None, name: str | None = None) -> None:
        super().__init__(fshape, strides, dilation, init, axis_name, name)
        self.padding = as_padding(self, padding, self.rank)
        if isinstance(self.padding, str):
            raise layer_error(self, "numeric padding (an int or one per spatial axis)", repr(padding),
                              "a transposed convolution crops its output by the padding; pass ints")
        self.output_padding = per_axis(self, "output_padding", output_padding, self.rank, 0)
        strides_t = _expand(self.strides, self.rank)
        if any(e >= s for e, s in zip(_expand(self.output_padding, self.rank), strides_t)):
            raise layer_error(self, f"0 <= output_padding < stride {strides_t}", repr(output_padding),
                              "output_padding only picks among the lengths a stride folds together")

    def build(self, x: ng.Op) -> None:
        self.check_filter_count(x)
        channel, _, _ = image_roles(self, x, self.rank)
        self.make_out_axis(x)
        self.in_channels = channel.length
        window = _window_axes(self, self.window, [channel.name, self.out_axis.name])
        value = self.init.fill_filter((self.nout, channel.length, *self.window), math.prod(self.window))
        self.W = self.add_variable("W", [self.out_axis, *window, channel], np.moveaxis(value, 1, -1),
                                   labels=("weight",))

    def call(self, x: ng.Op) -> ng.Op:
        self.spatial_axes(x)
        try:
            return ng.deconvolution(x, self.W, self.strides, self.padding, self.output_padding, self.dilation)
        except ng.AxesError as exc:
            raise LayerError(f"{describe(self)}: {exc}") from None

    def get_config(self) -> dict[str, Any]:
        return {**self.filter_config(), "output_padding": self.output_padding}


class _FilterStack(LayerStack):
    """The filter, then ``BatchNorm_0``, ``Bias_0``, ``Activation_0`` when asked for (``Conv``, ``Deconv``)."""

    filter: Convolution | Deconvolution

    def _parts(self, make_filter: Callable[[], Convolution | Deconvolution], bias: Any, activation: Any,
               batch_norm: Any) -> None:
        self._stack(make_filter, bias, activation, batch_norm)
        self.filter = self.core  # type: ignore[assignment]
        self.fshape, self.init = self.filter.fshape, self.filter.init

    def _stack_config(self) -> dict[str, Any]:
        config = {k: v for k, v in self.filter.get_config().items() if k not in ("name", "axis_name")}
        return {"name": self.name, **config, **self._tail_config()}


class Conv(_FilterStack):
    """A convolution layer (neon's ``Conv``): ``Convolution``, then ``BatchNorm``, ``Bias``, ``Activation``.

    1-D to 3-D by the length of ``fshape``. The parts are sub-layers in this layer's scope
    named ``Convolution_0``, ``BatchNorm_0``, ``Bias_0`` and ``Activation_0``; the output
    channel axis is named after this layer: ``[C, H, W, N] -> [<name>:K, H', W', N]``.

    Args:
        fshape: ``(*window, K)``, e.g. ``(3, 3, 64)``.
        strides, padding, dilation, groups: as ``Convolution`` (padding ``"same"`` too).
        init: initializer of the filter; default ``GlorotUniform()``.
        bias: initializer of the per-channel bias; None for no bias.
        activation: an activation (object, name or config); None for none.
        batch_norm: normalize each output channel with ``BatchNorm`` (before the bias).
        name: the layer's name.

    Raises:
        LayerError: a bad configuration; at call, an input that does not fit (see ``Convolution``).

    Example:
        >>> conv = Conv((3, 3, 32), padding=1, init=Kaiming(), bias=0.0, activation="relu")
        >>> h = conv(x)  # x [C:3, H:32, W:32, N:64] -> h [Conv_0:32, H:32, W:32, N:64]
    """

    def __init__(self, fshape: Sequence[int], strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                 init: Any = None, bias: Any = None, activation: Any = None, batch_norm: bool = False,
                 groups: int = 1, name: str | None = None) -> None:
        super().__init__(name)
        self._parts(lambda: Convolution(fshape, strides, padding, dilation, init, groups, axis_name=self.name,
                                        name="Convolution_0"), bias, activation, batch_norm)

    def get_config(self) -> dict[str, Any]:
        return self._stack_config()


class Deconv(_FilterStack):
    """A transposed-convolution layer (neon's ``Deconv``): ``Deconvolution``, then ``BatchNorm``, ``Bias``,
    ``Activation``; sub-layers and output axis as ``Conv`` (``Deconvolution_0`` for the filter).

    Args:
        fshape: ``(*window, K)``.
        strides, padding, output_padding, dilation: as ``Deconvolution``.
        init, bias, activation, batch_norm, name: as ``Conv``.

    Raises:
        LayerError: a bad configuration; at call, an input that does not fit.

    Example:
        >>> up = Deconv((4, 4, 64), strides=2, padding=1, batch_norm=True, activation="relu")
        >>> h = up(z)  # z [C:128, H:7, W:7, N] -> h [Deconv_0:64, H:14, W:14, N]
    """

    def __init__(self, fshape: Sequence[int], strides: Any = 1, padding: Any = 0, output_padding: Any = 0,
                 dilation: Any = 1, init: Any = None, bias: Any = None, activation: Any = None,
                 batch_norm: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        self._parts(lambda: Deconvolution(fshape, strides, padding, output_padding, dilation, init,
                                          axis_name=self.name, name="Deconvolution_0"), bias, activation, batch_norm)

    def get_config(self) -> dict[str, Any]:
        return self._stack_config()
