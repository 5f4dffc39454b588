"""Convolution and pooling geometry: the ops' args, axis roles and output-length arithmetic.

Shared by shape inference, the API, the gradient rules and the kernels, so the one
formula for an output length lives here.

Axis roles are read by *position*, never by name:

* an **activation** has axes ``[C, *spatial, N]``: its channel axis is its first axis that
  is not the batch axis ``N``, its spatial axes (1 to 3) are the other non-batch axes in
  order, and ``N`` may stand anywhere;
* a **filter** has axes ``[Ci, *filter_spatial, K]``: the first axis is the input channels
  per group (``Ci = C / groups``), the last the output channels ``K``, and the middle ones
  are matched to the activation's spatial axes by position.

Output lengths follow PyTorch: a convolution gives
``(L + pad_before + pad_after - dilation * (k - 1) - 1) // stride + 1`` per spatial axis; a
pooling ``(L + 2 * pad - k) // stride + 1``, rounded up instead with ``ceil_mode``, where a
last window that would start in the right padding is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AxesError
from .axes import Axes, Axis, format_axes
from .codec import CodecContext, check_keys, check_type, decode_ints, fail, wrong_arg

if TYPE_CHECKING:
    from .node import Op

POOL_OPS = ("max", "avg")


# -- axis roles ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActivationRoles:
    """The roles of an activation's axes.

    Attributes:
        channel: the channel axis (the first non-batch axis).
        spatial: the spatial axes, in order.
        batch: the batch axis ``N``.
        perm: positions of ``(channel, *spatial, batch)`` among the axes, so that
            ``array.transpose(perm)`` views an array of these axes as ``(C, *spatial, N)``.
    """

    channel: Axis
    spatial: Axes
    batch: Axis
    perm: tuple[int, ...]

    @property
    def canonical(self) -> Axes:
        """The axes in role order ``[C, *spatial, N]``."""
        return Axes([self.channel, *self.spatial, self.batch])


def activation_roles(axes: Axes, what: str) -> ActivationRoles:
    """The roles of ``axes`` read as an activation ``[C, *spatial, N]``; raises ``AxesError`` otherwise."""
    batch = axes.batch_axis
    rest = [a for a in axes if not a.is_batch]
    if batch is None or not 2 <= len(rest) <= 4:
        raise AxesError(
            f"{what}: expected an activation [C, *spatial, N] with a batch axis N, a channel axis and 1 to 3 "
            f"spatial axes, received {format_axes(axes)}; hint: name the batch axis 'N' and put the channel "
            "axis first among the others, e.g. [C, H, W, N]"
        )
    perm = tuple(axes.index(a) for a in (*rest, batch))
    return ActivationRoles(rest[0], Axes(rest[1:]), batch, perm)


@dataclass(frozen=True)
class FilterRoles:
    """The roles of a filter's axes ``[Ci, *spatial, K]``."""

    in_channels: Axis
    spatial: Axes
    out_channels: Axis


def filter_roles(axes: Axes, what: str) -> FilterRoles:
    """The roles of ``axes`` read as a filter ``[Ci, *spatial, K]``; raises ``AxesError`` otherwise."""
    if not 3 <= len(axes) <= 5 or axes.batch_axis is not None:
        raise AxesError(
            f"{what}: expected a filter [Ci, *filter_spatial, K] with 1 to 3 filter spatial axes and no batch "
            f"axis, received {format_axes(axes)}; hint: e.g. [C, R, S, K] for a 2-D convolution"
        )
    return FilterRoles(axes[0], axes[1:-1], axes[-1])


# -- args -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvArg:
    """``arg`` of ``conv``, ``conv_bprop_data`` and ``conv_bprop_filter``: one entry per spatial axis.

    Attributes:
        strides: the step between windows.
        padding: ``(before, after)`` zero padding.
        dilation: the step between filter taps.
        groups: channels split into this many independent groups.
    """

    strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    dilation: tuple[int, ...]
    groups: int = 1

    @property
    def rank(self) -> int:
        return len(self.strides)

    def __repr__(self) -> str:
        pads = ",".join(f"{b}" if b == a else f"{b}:{a}" for b, a in self.padding)
        text = f"strides={_join(self.strides)} pad={pads} dilation={_join(self.dilation)}"
        return text + (f" groups={self.groups}" if self.groups != 1 else "")

    # -- as an op's arg (the protocol of ir/args.py) ------------------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a ConvArg, else None (its geometry is checked by inference)."""
        return None if isinstance(op.arg, ConvArg) else wrong_arg(op, "a ConvArg")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"dilation", "groups", "padding": [[before, after]], "strides"}``."""
        arg = op.arg
        return {"dilation": list(arg.dilation), "groups": arg.groups, "padding": [list(p) for p in arg.padding],
                "strides": list(arg.strides)}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> ConvArg:
        """The ConvArg ``to_json`` wrote; raises ``SerializationError`` on any other data."""
        check_keys(data, ("dilation", "groups", "padding", "strides"), where)
        pads = []
        for pair in check_type(data["padding"], list, where, "padding as a list of [before, after]"):
            if not (isinstance(pair, list) and len(pair) == 2):
                raise fail(where, "padding entries [before, after]", pair)
            pads.append(decode_ints(pair, where, "padding"))
        return ConvArg(decode_ints(data["strides"], where, "strides"), tuple(pads),
                       decode_ints(data["dilation"], where, "dilation"),
                       check_type(data["groups"], int, where, "an int groups"))


@dataclass(frozen=True)
class PoolArg:
    """``arg`` of ``pool`` and ``pool_bprop``: one entry per spatial axis in the tuples.

    Attributes:
        op: ``"max"`` or ``"avg"``.
        fshape: the window lengths.
        strides: the step between windows.
        padding: padding on both sides (at most half the window; -inf for max, 0 for avg).
        ceil_mode: round the output length up (a window starting in the right padding is dropped).
        count_include_pad: avg only: divide by the window size including padding (PyTorch's default).
    """

    op: str
    fshape: tuple[int, ...]
    strides: tuple[int, ...]
    padding: tuple[int, ...]
    ceil_mode: bool = False
    count_include_pad: bool = True

    @property
    def rank(self) -> int:
        return len(self.fshape)

    def __repr__(self) -> str:
        text = f"{self.op} fshape={_join(self.fshape)} strides={_join(self.strides)} pad={_join(self.padding)}"
        if self.ceil_mode:
            text += " ceil"
        if self.op == "avg" and not self.count_include_pad:
            text += " exclude_pad"
        return text

    # -- as an op's arg (the protocol of ir/args.py) ------------------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a PoolArg, else None (its geometry is checked by inference)."""
        return None if isinstance(op.arg, PoolArg) else wrong_arg(op, "a PoolArg")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"ceil_mode", "count_include_pad", "fshape", "op", "padding", "strides"}``."""
        arg = op.arg
        return {"ceil_mode": arg.ceil_mode, "count_include_pad": arg.count_include_pad, "fshape": list(arg.fshape),
                "op": arg.op, "padding": list(arg.padding), "strides": list(arg.strides)}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> PoolArg:
        """The PoolArg ``to_json`` wrote; raises ``SerializationError`` on any other data."""
        check_keys(data, ("ceil_mode", "count_include_pad", "fshape", "op", "padding", "strides"), where)
        return PoolArg(check_type(data["op"], str, where, "a pooling op name"),
                       decode_ints(data["fshape"], where, "fshape"), decode_ints(data["strides"], where, "strides"),
                       decode_ints(data["padding"], where, "padding"),
                       check_type(data["ceil_mode"], bool, where, "true or false"),
                       check_type(data["count_include_pad"], bool, where, "true or false"))


def _join(values: Sequence[int]) -> str:
    return "x".join(str(v) for v in values)


# -- output lengths ------------------------------------------------------------------------------------


def conv_output_length(length: int, k: int, stride: int, padding: tuple[int, int], dilation: int) -> int:
    """Windows of a convolution along one axis (<= 0 when the kernel exceeds the padded input)."""
    return (length + padding[0] + padding[1] - dilation * (k - 1) - 1) // stride + 1


def deconv_output_length(length: int, k: int, stride: int, padding: tuple[int, int], dilation: int,
                         output_padding: int) -> int:
    """Length of a transposed convolution's output along one axis (PyTorch's formula)."""
    return (length - 1) * stride - padding[0] - padding[1] + dilation * (k - 1) + output_padding + 1


def pool_output_length(length: int, k: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """Windows of a pooling along one axis, as PyTorch counts them."""
    span = length + 2 * padding - k
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= length + padding:
        out -= 1  # the last window would start in the right padding
    return out


def pool_window_counts(length: int, out: int, arg: PoolArg, axis: int) -> list[int]:
    """Per output position along one axis, what an average divides by (PyTorch's avg_pool rule).

    With ``count_include_pad`` a window counts the padding but not what ceil mode adds
    beyond it; without, only the input elements it covers.
    """
    k, s, p = arg.fshape[axis], arg.strides[axis], arg.padding[axis]
    counts = []
    for o in range(out):
        start = o * s - p
        end = min(start + k, length + p)
        counts.append(end - start if arg.count_include_pad else min(end, length) - max(start, 0))
    return counts


# -- validation -------------------------------------------------------------------------------------------


def _check_rank(values: Sequence, rank: int, name: str, what: str) -> None:
    if len(values) != rank:
        raise AxesError(
            f"{what}: expected one {name} per spatial axis ({rank}), received {len(values)}: {tuple(values)}; "
            "hint: pass an int for every axis, or a tuple with one entry per spatial axis"
        )


def _check_positive(values: Sequence[int], name: str, what: str) -> None:
    if any(v < 1 for v in values):
        raise AxesError(f"{what}: expected positive {name}, received {tuple(values)}; hint: use 1 for none")


def check_conv(x: Axes, w: Axes, arg: ConvArg, what: str) -> tuple[ActivationRoles, FilterRoles, Axes]:
    """Check a convolution of activation axes ``x`` by filter axes ``w``.

    Returns:
        the activation roles, the filter roles and the output spatial axes (the input's
        names, new lengths).

    Raises:
        AxesError: ranks that disagree, non-positive strides or dilation, negative padding,
            channels or filters not divisible by ``groups``, a filter whose input channels are
            not ``C / groups``, or a kernel larger than the padded input.
    """
    xr, wr = activation_roles(x, what), filter_roles(w, what)
    rank = len(xr.spatial)
    if len(wr.spatial) != rank:
        raise AxesError(
            f"{what}: the filter {format_axes(w)} has {len(wr.spatial)} spatial axes, the input {format_axes(x)} "
            f"has {rank}; expected equal ranks; hint: a filter is [Ci, *filter_spatial, K] with one filter axis "
            "per spatial axis of the input"
        )
    for values, name in ((arg.strides, "strides"), (arg.padding, "paddings"), (arg.dilation, "dilations")):
        _check_rank(values, rank, name, what)
    _check_positive(arg.strides, "strides", what)
    _check_positive(arg.dilation, "dilations", what)
    if any(p < 0 for pair in arg.padding for p in pair):
        raise AxesError(f"{what}: expected non-negative padding, received {arg.padding}; hint: slice to crop")
    groups, c, ci, k = arg.groups, xr.channel.length, wr.in_channels.length, wr.out_channels.length
    if groups < 1 or c % groups:
        raise AxesError(
            f"{what}: the input's {c} channels ({xr.channel}) are not divisible by groups={groups}; "
            "hint: groups must divide the channel count"
        )
    if ci * groups != c:
        raise AxesError(
            f"{what}: expected the filter's first axis to hold C/groups = {c // groups} input channels, received "
            f"{wr.in_channels} in filter {format_axes(w)} for input {format_axes(x)}; hint: the filter is "
            "[Ci, *filter_spatial, K] with Ci = C / groups"
        )
    if k % groups:
        raise AxesError(
            f"{what}: the filter's {k} output channels ({wr.out_channels}) are not divisible by groups={groups}; "
            "hint: K must be a multiple of groups"
        )
    out = []
    for axis, f, s, p, d in zip(xr.spatial, wr.spatial, arg.strides, arg.padding, arg.dilation):
        n = conv_output_length(axis.length, f.length, s, p, d)
        if n < 1:
            raise AxesError(
                f"{what}: the kernel spans {d * (f.length - 1) + 1} along {axis} (filter axis {f}, dilation {d}), "
                f"larger than the padded input ({axis.length} + {p[0]} + {p[1]}); expected a kernel that fits; "
                "hint: pad the input, or use a smaller filter or dilation"
            )
        out.append(axis.with_length(n))
    return xr, wr, Axes(out)


def check_pool(x: Axes, arg: PoolArg, what: str) -> tuple[ActivationRoles, Axes]:
    """Check a pooling of activation axes ``x``; returns its roles and the output axes (``x``'s order).

    Raises:
        AxesError: an unknown ``op``, ranks that disagree, non-positive windows or strides,
            padding outside ``[0, fshape // 2]``, or a window larger than the padded input.
    """
    if arg.op not in POOL_OPS:
        raise AxesError(f"{what}: expected op among {POOL_OPS}, received {arg.op!r}")
    xr = activation_roles(x, what)
    rank = len(xr.spatial)
    for values, name in ((arg.fshape, "window length"), (arg.strides, "stride"), (arg.padding, "padding")):
        _check_rank(values, rank, name, what)
    _check_positive(arg.fshape, "window lengths", what)
    _check_positive(arg.strides, "strides", what)
    if any(not 0 <= p <= k // 2 for p, k in zip(arg.padding, arg.fshape)):
        raise AxesError(
            f"{what}: expected padding between 0 and half the window {tuple(k // 2 for k in arg.fshape)}, received "
            f"{arg.padding}; hint: larger padding gives windows that see only padding"
        )
    lengths = {}
    for axis, k, s, p in zip(xr.spatial, arg.fshape, arg.strides, arg.padding):
        n = pool_output_length(axis.length, k, s, p, arg.ceil_mode)
        if k > axis.length + 2 * p or n < 1:
            raise AxesError(
                f"{what}: the window {k} along {axis} is larger than the padded input ({axis.length} + 2*{p}); "
                "hint: use a smaller window or pad the input"
            )
        lengths[axis.name] = n
    return xr, Axes(a.with_length(lengths[a.name]) if a.name in lengths else a for a in x)
