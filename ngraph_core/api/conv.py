"""Convolution, transposed convolution and pooling over named spatial axes.

Axis roles are read by position (``ir/conv.py``): an activation is ``[C, *spatial, N]``
(channel = first non-batch axis, 1 to 3 spatial axes, the batch axis ``N`` anywhere); a
filter is ``[Ci, *filter_spatial, K]`` (input channels per group, filter spatial axes
matched to the activation's by position, output channels). Outputs keep the input's
spatial axis *names* with their new lengths, as slicing does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import AxesError
from ..ir import Axes, ConvArg, Op, OpType, PoolArg, make
from ..ir.conv import activation_roles, deconv_output_length, filter_roles
from .tensors import as_op

IntOrTuple = int | Sequence[int]
Padding = int | str | Sequence[int | Sequence[int]]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _per_axis(value: IntOrTuple, rank: int, name: str, what: str) -> tuple[int, ...]:
    """``value`` (an int for every axis, or one per axis) as a tuple of ``rank`` ints."""
    if _is_int(value):
        return (int(value),) * rank
    values = tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else None
    if values is None or len(values) != rank or not all(_is_int(v) for v in values):
        raise AxesError(
            f"{what}: expected {name} as an int or {rank} ints (one per spatial axis), received {value!r}; "
            f"hint: e.g. {name}=1 or {name}={(1,) * rank}"
        )
    return tuple(int(v) for v in values)


def _padding(padding: Padding, rank: int, fshape: Sequence[int], strides: Sequence[int],
             dilation: Sequence[int], what: str) -> tuple[tuple[int, int], ...]:
    """``(before, after)`` per spatial axis from an int, ints or pairs per axis, ``"valid"`` or ``"same"``."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * rank
        if padding != "same":
            raise AxesError(f"{what}: expected padding 'same', 'valid', an int or a tuple, received {padding!r}")
        if any(s != 1 for s in strides):
            raise AxesError(
                f"{what}: padding='same' expects strides of 1, received strides={tuple(strides)}; "
                "hint: give the padding explicitly for strided convolutions"
            )
        # as PyTorch: the total d*(k-1) split with the extra element after
        totals = [d * (k - 1) for k, d in zip(fshape, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if _is_int(padding):
        return ((int(padding), int(padding)),) * rank
    items = tuple(padding) if isinstance(padding, Sequence) else ()
    pairs = []
    for item in items:
        if _is_int(item):
            pairs.append((int(item), int(item)))
        elif isinstance(item, Sequence) and len(item) == 2 and all(_is_int(v) for v in item):
            pairs.append((int(item[0]), int(item[1])))
        else:
            break
    if len(items) != rank or len(pairs) != rank:
        raise AxesError(
            f"{what}: expected padding as an int, 'same', 'valid', or {rank} entries (an int or a "
            f"(before, after) pair per spatial axis), received {padding!r}"
        )
    return tuple(pairs)


def convolution(x: Any, w: Any, strides: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1,
                groups: int = 1) -> Op:
    """Cross-correlate activations ``x`` with filters ``w`` (deep learning's convolution, as PyTorch's conv).

    Args:
        x: activations ``[C, *spatial, N]``: the first non-batch axis is the channel axis, the
            other non-batch axes (1 to 3) are spatial, ``N`` (the batch axis) may stand anywhere.
        w: filters ``[Ci, *filter_spatial, K]`` with ``Ci = C / groups`` input channels per
            group and ``K`` output channels; filter axes match ``x``'s spatial axes by position.
        strides: the step between windows (an int for every axis, or one per spatial axis).
        padding: zeros added around the input: an int, one per spatial axis, ``(before,
            after)`` pairs, ``"valid"`` (none) or ``"same"`` (stride 1 only: the output keeps
            the input's lengths; an odd total puts the extra zero after, as PyTorch).
        dilation: the step between filter taps.
        groups: split channels into this many independent groups (``groups = C`` is depthwise).

    Returns:
        ``[K, *out_spatial, N]``: ``w``'s last axis, then ``x``'s spatial axes (same names) with
        lengths ``(L + pad - dilation * (k - 1) - 1) // stride + 1``, then ``N``.

    Raises:
        AxesError: axes that are not an activation and a filter, ranks that disagree,
            non-positive strides or dilation, negative padding, ``C`` or ``K`` not divisible
            by ``groups``, ``Ci != C / groups``, or a kernel larger than the padded input.
        DTypeError: non-float operands.

    Example:
        >>> C, H, W, N = ng.make_axis(3, "C"), ng.make_axis(32, "H"), ng.make_axis(32, "W"), ng.make_axis(64, "N")
        >>> x = ng.placeholder([C, H, W, N])
        >>> w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(16, "K")], 0.1)
        >>> y = ng.convolution(x, w, padding=1)  # [K:16, H:32, W:32, N:64]
    """
    x, w = as_op(x, where="convolution"), as_op(w, where="convolution")
    rank = len(activation_roles(x.axes, "convolution").spatial)
    fshape = filter_roles(w.axes, "convolution").spatial.lengths
    strides_t = _per_axis(strides, rank, "strides", "convolution")
    dilation_t = _per_axis(dilation, rank, "dilation", "convolution")
    pads = _padding(padding, rank, fshape, strides_t, dilation_t, "convolution")
    if not _is_int(groups):
        raise AxesError(f"convolution: expected groups as an int, received {groups!r}")
    return make(OpType.CONV, [x, w], arg=ConvArg(strides_t, pads, dilation_t, int(groups)))


def deconvolution(x: Any, w: Any, strides: IntOrTuple = 1, padding: Padding = 0, output_padding: IntOrTuple = 0,
                  dilation: IntOrTuple = 1, groups: int = 1) -> Op:
    """The transposed convolution of ``x`` (PyTorch's ``conv_transpose``): the gradient of a convolution.

    ``deconvolution(x, w, ...)`` is the adjoint of ``convolution(., w, ...)`` with the same
    ``w``: it maps that convolution's output shape back to its input shape. So ``w`` has the
    layout of that convolution's filter, ``[Co, *filter_spatial, C]``: its *last* axis is
    ``x``'s channels ``C`` (the deconvolution's input) and its *first* axis the output
    channels per group. (PyTorch's ``conv_transpose`` weight ``(C, Co, *k)`` is the same
    tensor with the last axis moved first.)

    Args:
        x: activations ``[C, *spatial, N]`` (roles as in ``convolution``).
        w: filters ``[Co, *filter_spatial, C]`` with ``C`` divisible by ``groups``.
        strides: the step between the windows of the convolution this transposes (the upsampling factor).
        padding: that convolution's padding (an int, one per axis, or ``(before, after)`` pairs),
            cropped from the output.
        output_padding: extra length added after the output along each axis, ``0 <= output_padding
            < stride`` (it picks among the input lengths that the strided convolution maps to the
            same output length).
        dilation: the step between filter taps.
        groups: channel groups.

    Returns:
        ``[Co * groups, *out_spatial, N]``: ``w``'s first axis (its length times ``groups``), then
        ``x``'s spatial axes with lengths ``(L - 1) * stride - pad_before - pad_after +
        dilation * (k - 1) + output_padding + 1``, then ``N``.

    Raises:
        AxesError: as ``convolution``, plus ``output_padding`` outside ``[0, stride)`` or an
            output shorter than one element.
        DTypeError: non-float operands.

    Example:
        >>> up = ng.deconvolution(x, w, strides=2, padding=1, output_padding=1)  # doubles H and W
    """
    x, w = as_op(x, where="deconvolution"), as_op(w, where="deconvolution")
    xr, wr = activation_roles(x.axes, "deconvolution"), filter_roles(w.axes, "deconvolution")
    rank = len(xr.spatial)
    if len(wr.spatial) != rank:
        raise AxesError(
            f"deconvolution: the filter {w.axes} has {len(wr.spatial)} spatial axes, the input {x.axes} has "
            f"{rank}; expected equal ranks"
        )
    fshape = wr.spatial.lengths
    strides_t = _per_axis(strides, rank, "strides", "deconvolution")
    dilation_t = _per_axis(dilation, rank, "dilation", "deconvolution")
    extra = _per_axis(output_padding, rank, "output_padding", "deconvolution")
    if isinstance(padding, str):
        raise AxesError(f"deconvolution: expected numeric padding, received {padding!r}; hint: pass ints")
    pads = _padding(padding, rank, fshape, strides_t, dilation_t, "deconvolution")
    if not _is_int(groups) or groups < 1:
        raise AxesError(f"deconvolution: expected groups as a positive int, received {groups!r}")
    if any(not 0 <= e < s for e, s in zip(extra, strides_t)):
        raise AxesError(
            f"deconvolution: expected 0 <= output_padding < stride, received output_padding={extra} with "
            f"strides={strides_t}; hint: output_padding only picks among lengths a stride folds together"
        )
    lengths = [deconv_output_length(a.length, k, s, p, d, e)
               for a, k, s, p, d, e in zip(xr.spatial, fshape, strides_t, pads, dilation_t, extra)]
    if any(n < 1 for n in lengths):
        raise AxesError(
            f"deconvolution: the output lengths {tuple(lengths)} for input {x.axes} are not positive; "
            "hint: reduce the padding"
        )
    out = Axes([wr.in_channels.with_length(wr.in_channels.length * groups),
                *(a.with_length(n) for a, n in zip(xr.spatial, lengths)), xr.batch])
    return make(OpType.CONV_BPROP_DATA, [x, w], arg=ConvArg(strides_t, pads, dilation_t, int(groups)), axes=out)


def pooling(x: Any, fshape: IntOrTuple, op: str = "max", strides: IntOrTuple | None = None, padding: IntOrTuple = 0,
            ceil_mode: bool = False, count_include_pad: bool = True) -> Op:
    """Max or average over windows of the spatial axes of ``x`` (as PyTorch's max_pool / avg_pool).

    Args:
        x: activations ``[C, *spatial, N]`` (roles as in ``convolution``).
        fshape: the window length (an int for every spatial axis, or one per axis).
        op: ``"max"`` or ``"avg"``.
        strides: the step between windows; default ``fshape`` (windows side by side).
        padding: added on both sides, at most half the window: ``-inf`` for max, zeros for avg.
        ceil_mode: round the output length up instead of down; a window that would start in the
            right padding is dropped (PyTorch's rule).
        count_include_pad: avg only. True (PyTorch's default): divide by the window size, padding
            included (but not what ``ceil_mode`` adds beyond the padding); False: by the number
            of input elements in the window.

    Returns:
        ``x``'s axes in their order, the spatial ones with the pooled lengths.

    Raises:
        AxesError: an unknown ``op``, ranks that disagree, non-positive windows or strides,
            padding outside ``[0, fshape // 2]``, or a window larger than the padded input.
        DTypeError: a non-float input.

    Example:
        >>> p = ng.pooling(y, 2)                              # [K, H/2, W/2, N]
        >>> a = ng.pooling(y, 3, op="avg", strides=2, padding=1, ceil_mode=True)
    """
    x = as_op(x, where="pooling")
    rank = len(activation_roles(x.axes, "pooling").spatial)
    fshape_t = _per_axis(fshape, rank, "fshape", "pooling")
    strides_t = fshape_t if strides is None else _per_axis(strides, rank, "strides", "pooling")
    pads = _per_axis(padding, rank, "padding", "pooling")
    arg = PoolArg(op, fshape_t, strides_t, pads, bool(ceil_mode), bool(count_include_pad) or op == "max")
    return make(OpType.POOL, [x], arg=arg)
