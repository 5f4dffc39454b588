"""What a model's input looks like: plain samples, or variable-length sequences with their lengths.

A dataset yields ``(x, y)`` batches, batch axis last. ``x`` is either

* ``"dense"``: an array ``(features..., N)`` (``ArrayIterator``, ``ImageIterator``): the input
  placeholder's axes are named C/H/W (or F...), then ``N`` (``sample_placeholder``);
* ``"frames"``: a pair ``(array [F, T, N] float, lengths [N] int)`` (``SequenceIterator`` of
  feature frames): axes ``F, REC, N``;
* ``"tokens"``: a pair ``(array [T, N] int, lengths [N] int)`` (``SequenceIterator`` of token
  ids): axes ``REC, N``, int32.

For sequences the lengths become an int32 ``[N]`` placeholder that every recurrent layer built
for the graph receives (``neon.layers.recurrent.sequence_lengths``). ``T`` may change from batch
to batch (bucketing): each (batch size, sample shape) compiles its own computation over the same
variables, as batch sizes already do.

Example:
    >>> kind = batch_kind(x)                       # "frames"
    >>> X, L = input_placeholders(kind, (80, 120), 16)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import ngraph_core as ng

from .data import DataError

KINDS = ("dense", "frames", "tokens")
FEATURE_AXIS_NAMES = {1: ("F",), 2: ("H", "W"), 3: ("C", "H", "W"), 4: ("C", "D", "H", "W")}


def sample_placeholder(shape: Sequence[int], n: int) -> ng.Op:
    """The input placeholder for ``n`` samples of ``shape``: feature axes named C/H/W (or F...), then ``N``."""
    names = FEATURE_AXIS_NAMES.get(len(shape), tuple(f"D{i}" for i in range(len(shape))))
    axes = [ng.make_axis(length, name) for length, name in zip(shape, names, strict=True)]
    return ng.placeholder([*axes, ng.make_axis(n, "N")], name="X")


def split_batch(x: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """``(array, lengths)`` of a batch's ``x`` (lengths None for dense batches)."""
    if isinstance(x, tuple):
        if len(x) != 2:
            raise DataError(f"Model: expected x as an array or an (array, lengths) pair, received a tuple of {len(x)}")
        return np.asarray(x[0]), np.asarray(x[1])
    return np.asarray(x), None


def batch_kind(x: Any) -> str:
    """``"dense"``, ``"frames"`` or ``"tokens"`` for a batch's ``x`` (see the module docstring).

    Raises:
        DataError: a sequence batch whose array or lengths have the wrong shape.
    """
    array, lengths = split_batch(x)
    if lengths is None:
        return "dense"
    n = array.shape[-1] if array.ndim else 0
    if lengths.shape != (n,) or not np.issubdtype(lengths.dtype, np.integer):
        raise DataError(f"Model: expected sequence lengths as ints of shape ({n},), received "
                        f"{lengths.dtype} {lengths.shape}")
    if np.issubdtype(array.dtype, np.integer):
        if array.ndim != 2:
            raise DataError(f"Model: expected token ids of shape (T, N), received {array.shape}")
        return "tokens"
    if array.ndim != 3:
        raise DataError(f"Model: expected frames of shape (F, T, N), received {array.shape}; "
                        "hint: SequenceIterator yields (F, T, N) float frames or (T, N) int tokens")
    return "frames"


def input_placeholders(kind: str, shape: tuple[int, ...], n: int) -> tuple[ng.Op, ng.Op | None]:
    """The input placeholder for ``n`` samples of ``shape`` and, for sequences, the lengths placeholder."""
    N = ng.make_axis(n, "N")
    if kind == "dense":
        return sample_placeholder(shape, n), None
    lengths = ng.placeholder([N], dtype="int32", name="lengths")
    if kind == "tokens":
        return ng.placeholder([ng.make_axis(shape[0], "REC"), N], dtype="int32", name="X"), lengths
    F, T = ng.make_axis(shape[0], "F"), ng.make_axis(shape[1], "REC")
    return ng.placeholder([F, T, N], name="X"), lengths


def same_features(kind: str, a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """True when samples of shapes ``a`` and ``b`` fit one model (sequences may differ in length)."""
    if kind == "dense":
        return a == b
    return kind == "tokens" or a[:1] == b[:1]
