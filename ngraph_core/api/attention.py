"""Scaled dot-product attention over named axes, a composite of ``batch_dot``, masking and ``softmax``.

**Axes.** Every operand is laid out as neon lays out sequences, features first, time ``REC``,
batch ``N`` last:

* ``q`` ``[D, *kept, REC, ...]``: its *first* axis ``D`` is the feature axis (contracted with the
  axis of ``k`` of the same name), ``REC`` is the query time; every other axis (the heads ``H``,
  the batch ``N``) is *kept*: attention runs independently for each of its positions;
* ``k`` ``[D, ..., REC]``: the same feature axis and kept axes, and its own ``REC`` (the key time:
  any length, another sequence's in cross-attention);
* ``v`` ``[Dv, ..., REC]``: the kept axes, ``k``'s time, and its own first axis ``Dv`` as features.

The result has ``q``'s axes with ``Dv`` in place of ``D``. Inside, the key time is renamed
``KEY_TIME`` (``REC_K``) so that the scores ``[*kept, REC, REC_K]`` hold both times.

**Masks.** ``causal`` lets query step ``i`` see key steps ``j <= i`` (PyTorch's ``is_causal``, aligned
top-left when the lengths differ); ``key_lengths`` (int ``[N]``, as ``SequenceIterator`` yields) hides
each example's key steps from its length on. Masked scores become the dtype's lowest value before the
softmax, and the weights are multiplied by the mask after it, so a query with no visible key gets zero
weights (an output of zeros) rather than NaN.

Gradients come from autodiff through the primitives (``batch_dot``'s are ``batch_dot``s), which
materialize the scores ``[*kept, REC, REC_K]``. Where nothing else reads them (inference, a forward-only
graph) and they are large, the NumPy transformer's compiler replaces the composite by one
``fused_attention`` op (``passes/attention.py``), a tiled kernel with the softmax computed online that
never holds the whole score matrix (``transformers/kernels/attention.py``; docs/attention.md, "The fused
kernel").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import AxesError, DTypeError
from ..ir import Axes, Op, format_axes
from ..ir.attention import KEY_TIME
from ..ir.axes import RECURRENT_AXIS_NAME, Axis
from .math import batch_dot, cast, less, where
from .nn import softmax
from .shape import axes_with_order, broadcast, cast_axes
from .tensors import as_op, constant, uniform

__all__ = ["KEY_TIME", "scaled_dot_product_attention"]  # KEY_TIME: the key time's axis name inside, "REC_K"


def _time(x: Op, what: str) -> Axis:
    axis = x.axes.recurrent_axis
    if axis is None:
        raise AxesError(f"scaled_dot_product_attention: expected {what} with a time axis named "
                        f"{RECURRENT_AXIS_NAME!r}, received {format_axes(x.axes)}; hint: sequences are [F, REC, N]")
    return axis


def _check_operand(x: Op, what: str, expected: Axes) -> None:
    if not x.axes.same_set(expected):
        raise AxesError(f"scaled_dot_product_attention: expected {what} with axes {format_axes(expected)} (any "
                        f"order), received {format_axes(x.axes)}; hint: q, k and v share every axis but their "
                        "features (the first axis) and time (REC)")


def _valid(causal: bool, key_lengths: Any, query: Axis, key: Axis, kept: Axes) -> Op | None:
    """1 where a query step may see a key step, else 0: ``[REC, REC_K]`` and/or ``[REC_K, N]``, combined."""
    valid = None
    if causal:
        valid = constant(np.tril(np.ones((query.length, key.length))), [query, key], dtype="float32")
    if key_lengths is not None:
        lengths = as_op(key_lengths, where="scaled_dot_product_attention")
        batch = kept.batch_axis
        if batch is None or lengths.axes != Axes([batch]):
            raise AxesError(f"scaled_dot_product_attention: expected key_lengths with axes [{batch}] (the batch axis "
                            f"of q), received {format_axes(lengths.axes)}; hint: an int [N] op of each example's "
                            "valid length, e.g. ng.placeholder([N], dtype='int32')")
        if not lengths.dtype.startswith(("int", "uint")):
            raise DTypeError(f"scaled_dot_product_attention: expected integer key_lengths, received {lengths.dtype}; "
                             "hint: ng.cast(lengths, 'int32')")
        steps = broadcast(constant(np.arange(key.length), [key], dtype=lengths.dtype), [key, batch])
        padding = cast(less(steps, lengths), "float32")
        valid = padding if valid is None else broadcast(valid, [query, key, batch]) * padding
    return valid


def scaled_dot_product_attention(q: Any, k: Any, v: Any, *, causal: bool = False, key_lengths: Any = None,
                                 dropout: float = 0.0, scale: float | None = None, seed: int | None = None) -> Op:
    """``softmax(q . k * scale, over key time) . v`` for each position of the kept axes (see the module docstring).

    Args:
        q: the queries ``[D, *kept, REC]`` (any order, ``D`` first), e.g. ``[D, H, REC, N]``.
        k: the keys, ``q``'s axes with its own ``REC`` length.
        v: the values ``[Dv, *kept, REC]`` with ``k``'s ``REC``.
        causal: hide key steps after the query step.
        key_lengths: an int ``[N]`` op of each example's valid key length, or None (all valid).
        dropout: the probability of dropping each attention weight (the kept ones scaled by
            ``1 / (1 - dropout)``), a fresh mask each run; 0 for none. Give it only when training.
        scale: multiplies the scores; default ``1 / sqrt(len(D))``.
        seed: seeds the dropout mask's generator (None: the transformer's seed).

    Returns:
        ``q``'s axes with ``v``'s features in place of ``q``'s.

    Raises:
        AxesError: an operand without ``REC``, axes that do not match as above, or ``key_lengths``
            not ``[N]``.
        DTypeError: float ``key_lengths``.
        ValueError: ``dropout`` outside [0, 1) or a non-positive ``scale``.

    Example:
        >>> out = ng.scaled_dot_product_attention(q, k, v, causal=True, key_lengths=lengths)
        >>> # q, k, v [D:16, H:4, REC:10, N:8] -> out [D:16, H:4, REC:10, N:8]
    """
    q, k, v = (as_op(t, where="scaled_dot_product_attention") for t in (q, k, v))
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"scaled_dot_product_attention: expected dropout in [0, 1), received {dropout!r}; "
                         "hint: the probability of dropping a weight, e.g. 0.1")
    if scale is not None and not scale > 0:
        raise ValueError(f"scaled_dot_product_attention: expected scale > 0 or None, received {scale!r}; "
                         "hint: None gives 1 / sqrt(feature length)")
    query, key_time = _time(q, "queries"), _time(k, "keys")
    feature = q.axes[0]
    if feature == query or feature.is_batch:
        raise AxesError(f"scaled_dot_product_attention: expected the queries' first axis to be their features, "
                        f"received {format_axes(q.axes)}; hint: lay q out as [D, H, REC, N]")
    if q.axes.find(KEY_TIME) is not None:
        raise AxesError(f"scaled_dot_product_attention: expected queries without an axis named {KEY_TIME!r} (the "
                        f"key time's name inside), received {format_axes(q.axes)}; hint: rename that axis")
    kept = q.axes - Axes([feature, query])
    _check_operand(k, "keys", Axes([feature, *kept, key_time]))
    v_feature = v.axes[0]
    _check_operand(v, "values", Axes([v_feature, *kept, v.axes.recurrent_axis or key_time]))
    if v.axes.recurrent_axis != key_time or v_feature in kept or v_feature == key_time:
        raise AxesError(f"scaled_dot_product_attention: expected values [Dv, ..., {key_time}] (features first, the "
                        f"keys' time), received {format_axes(v.axes)}; hint: keys and values come from one sequence")
    key = Axis(KEY_TIME, key_time.length)
    k = cast_axes(k, [key if a == key_time else a for a in k.axes])
    v = cast_axes(v, [key if a == key_time else a for a in v.axes])

    scores = batch_dot(q, k, kept) * (1.0 / math.sqrt(feature.length) if scale is None else float(scale))
    valid = _valid(causal, key_lengths, query, key, kept)
    if valid is not None:
        lowest = float(np.finfo(np.dtype(scores.dtype)).min)
        scores = where(valid, scores, constant(lowest, (), dtype=scores.dtype))
    weights = softmax(scores, normalization_axes=[key])
    if valid is not None:
        weights = weights * cast(valid, weights.dtype)  # a query that sees no key: zero weights, not uniform
    if dropout > 0.0:
        keep = 1.0 - dropout
        kept_mask = less(uniform(weights.axes, 0.0, 1.0, seed=seed, dtype=weights.dtype), keep)
        weights = weights * kept_mask * (1.0 / keep)
    out = batch_dot(weights, v, kept)  # [*kept, REC, Dv]
    return axes_with_order(out, [v_feature if a == feature else a for a in q.axes])
