"""Window geometry shared by the convolution and pooling kernels: taps, index tuples, padded copies.

A *tap* is one position inside the window (one filter element). Along each spatial
axis, tap ``f`` of output position ``o`` reads input position ``o * stride + f *
dilation - pad_before``. ``taps`` lists, per tap, the output positions whose input
position lies inside the input (not in the padding) as two strided slices, one over
the output and one over the input. Kernels that scatter (col2im, pooling gradients)
or reduce (pooling) tap by tap use them to skip padding without a padded copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Index = tuple[Any, ...]


@dataclass(frozen=True)
class Tap:
    """One window position: its filter offsets, and the output and input positions it joins.

    Attributes:
        offsets: the tap's index inside the window, per spatial axis.
        out: a slice per spatial axis over the output positions that read a real input element.
        inp: a slice per spatial axis over the input elements those positions read.
        covers_out: ``out`` is every output position.
        covers_in: ``inp`` is every input position (each read once).
    """

    offsets: tuple[int, ...]
    out: tuple[slice, ...]
    inp: tuple[slice, ...]
    covers_out: bool
    covers_in: bool


def _axis_range(length: int, out_length: int, offset: int, stride: int, dilation: int, pad: int
                ) -> tuple[slice, slice, bool, bool] | None:
    """Along one axis: (output slice, input slice, covers every output, covers every input), or None."""
    shift = offset * dilation - pad  # input position of output 0 for this tap
    first = max(0, -(shift // stride))  # the first o with o * stride + shift >= 0
    last = min(out_length - 1, (length - 1 - shift) // stride)
    if last < first:
        return None
    count = last - first + 1
    start = first * stride + shift
    inp = slice(start, start + (count - 1) * stride + 1, stride)
    covers_in = stride == 1 and start == 0 and count == length
    return slice(first, last + 1), inp, count == out_length, covers_in


def taps(lengths: Sequence[int], out_lengths: Sequence[int], fshape: Sequence[int], strides: Sequence[int],
         dilation: Sequence[int], pad_before: Sequence[int]) -> list[Tap]:
    """Every tap that reads at least one input element, in row-major window order."""
    found = []
    for offsets in itertools.product(*(range(k) for k in fshape)):
        ranges = [_axis_range(n, m, f, s, d, p)
                  for n, m, f, s, d, p in zip(lengths, out_lengths, offsets, strides, dilation, pad_before)]
        if any(r is None for r in ranges):
            continue
        found.append(Tap(offsets, tuple(r[0] for r in ranges), tuple(r[1] for r in ranges),
                         all(r[2] for r in ranges), all(r[3] for r in ranges)))
    return found


def place(slices: Sequence[Any], positions: Sequence[int], ndim: int) -> Index:
    """An index tuple over ``ndim`` axes: ``slices[i]`` at ``positions[i]``, everything elsewhere."""
    index: list[Any] = [slice(None)] * ndim
    for s, p in zip(slices, positions):
        index[p] = s
    return tuple(index)


def is_identity(perm: Sequence[int]) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


class PaddedCopy:
    """Copies an activation into a buffer with ``fill`` around it (borders refilled on every call).

    The buffer lives in a shared workspace, so its borders may hold another kernel's data:
    refilling only the border slabs costs a small fraction of the copy.

    Args:
        shape: the padded buffer's shape.
        spatial: the positions of the spatial axes in that shape.
        pads: ``(before, after)`` per spatial axis.
        fill: the padding value.
    """

    def __init__(self, shape: Sequence[int], spatial: Sequence[int], pads: Sequence[tuple[int, int]],
                 fill: float) -> None:
        ndim = len(shape)
        self.fill = fill
        self.borders: list[Index] = []
        interior = []
        for pos, (before, after) in zip(spatial, pads):
            n = shape[pos]
            if before:
                self.borders.append(place([slice(0, before)], [pos], ndim))
            if after:
                self.borders.append(place([slice(n - after, n)], [pos], ndim))
            interior.append(slice(before, n - after))
        self.interior = place(interior, spatial, ndim)

    def __call__(self, xp: Any, buffer: Any, value: Any) -> Any:
        for border in self.borders:
            buffer[border] = self.fill
        xp.copyto(buffer[self.interior], value, casting="unsafe")
        return buffer
