"""Attention fusion: the composite ``ng.scaled_dot_product_attention`` builds -> one ``fused_attention`` op.

The composite (``api/attention.py``; ``b`` is a broadcast, ``valid`` the 0/1 mask of ``causal`` and
``key_lengths``, absent without them) reads

    batch_dot(softmax(where(b(valid), batch_dot(q, k) * b(scale), b(lowest)), over REC_K) * b(valid), v)

with ``softmax(x) = exp(x - b(stop_gradient(max(x)))) / b(sum(exp(...)))``. It materializes the scores
``[*kept, REC, REC_K]`` several times over. The ``fused_attention`` op (``ir/attention.py``) computes the same
value by tiles with an online softmax (``transformers/kernels/attention.py``) and holds none of them.

A composite is fused when

* its scores, weights and every value between have no use but the next op of the chain, and none is a
  result: a training graph's backward reads the weights (and a tapped op is a result), so there the
  composite stays;
* it has no dropout (a dropout mask multiplies the weights: the chain above does not match);
* its scores hold at least ``MIN_SCORES`` elements, ``MIN_POSITION_SCORES`` per head and example: below
  that one stacked BLAS ``matmul`` per product beats the tiles (measured: see the constants).

The mask is read back into the op's arg: a constant ``tril`` of ones over ``[REC, REC_K]`` is ``causal``;
``cast(less(b(arange(REC_K)), b(lengths)))`` gives the ``key_lengths`` source; a product of both is both.
Any other mask leaves the composite alone.

Runs first on the NumPy backend's pipeline, on the graph as the API built it (``passes/pipeline.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import AxesError, DTypeError
from ..ir import Op, OpType, consumers, make, rebuild, toposort
from ..ir.attention import KEY_TIME, AttentionArg
from ..ir.axes import RECURRENT_AXIS_NAME
from ..ir.values import ArrayValue
from ..pattern import scalar_value

T = OpType

MIN_SCORES = 1 << 18
"""The fewest score elements (kept positions x queries x keys) for which attention is fused. Measured on the
2-core EPYC of docs/attention.md (inference, float32, D=64, medians of 3 x 9 interleaved runs on a busy machine;
composite / fused time): 4 heads, batch 1, T=128: 0.64 (65K scores), T=224: 0.94 (200K), T=256: 1.48 (262K),
T=320: 1.76; 8 heads, batch 16, T=64: 1.01 (524K), T=128: 1.39 (2M); causal ones gain more (T=224: 1.23,
T=256: 2.8), the kernel skipping the hidden half."""

MIN_POSITION_SCORES = 1 << 14
"""The fewest scores per kept position (queries x keys) for which attention is fused: with many short sequences
the kernel's per-block work in Python outweighs the tiles (8 heads, batch 16, T=32: composite / fused 0.37; at
T=64, 4096 scores each, 1.01 and causal 1.55; at T=128, 1.39)."""


@dataclass(frozen=True)
class Match:
    """One composite found: the ``fused_attention`` op's sources and arg, and the ops whose values it replaces."""

    src: tuple[Op, ...]
    arg: AttentionArg
    inner: frozenset[Op]
    scores: Op


def _through(op: Op, *kinds: OpType) -> Op:
    while op.op in kinds:
        op = op.src[0]
    return op


def _scalar_operand(op: Op) -> tuple[Op, float] | None:
    """``(x, c)`` when ``op`` is ``x * b(c)`` or ``b(c) * x`` with a scalar constant ``c``."""
    if op.op is not T.MUL:
        return None
    for x, c in (op.src, op.src[::-1]):
        value = scalar_value(c) if c.op is T.BROADCAST else None
        if value is not None:
            return x, value
    return None


def _softmax(w: Op, key: str) -> tuple[Op, list[Op]] | None:
    """``(x, ops)`` when ``w`` is ``softmax(x)`` over the axis named ``key`` alone (``api/nn.softmax``)."""
    if w.op is not T.DIV or w.src[1].op is not T.BROADCAST:
        return None
    e, total = w.src[0], w.src[1].src[0]
    if e.op is not T.EXP or total.op is not T.SUM or total.src[0] is not e or e.src[0].op is not T.SUB:
        return None
    x, top = e.src[0].src
    peak = _through(top, T.BROADCAST, T.STOP_GRADIENT)
    if peak.op is not T.MAX or peak.src[0] is not x or top.op is not T.BROADCAST:
        return None
    if {a.name for a in x.axes} - {a.name for a in total.axes} != {key} or peak.axes != total.axes:
        return None
    return x, [w, w.src[1], total, e, e.src[0], top, top.src[0], peak]


def _mask(valid: Op, query: str, key: str) -> tuple[bool, Op | None] | None:
    """``(causal, key_lengths)`` of a 0/1 mask as ``api/attention._valid`` builds it, else None."""
    valid = _through(valid, T.BROADCAST, T.CAST)
    if valid.op is T.MUL:
        parts = [_mask(s, query, key) for s in valid.src]
        if None in parts or sum(p[0] for p in parts) > 1 or sum(p[1] is not None for p in parts) > 1:
            return None
        return any(p[0] for p in parts), next((p[1] for p in parts if p[1] is not None), None)
    if valid.op is T.CONSTANT and isinstance(valid.arg, ArrayValue) and set(valid.axes.names) == {query, key}:
        array = valid.arg.array if valid.axes.names == (query, key) else valid.arg.array.T
        return (True, None) if np.array_equal(array, np.tril(np.ones(array.shape))) else None
    if valid.op is T.LESS:
        steps, lengths = (_through(s, T.BROADCAST) for s in valid.src)
        if (steps.op is T.CONSTANT and isinstance(steps.arg, ArrayValue) and steps.axes.names == (key,)
                and np.array_equal(steps.arg.array, np.arange(steps.axes.lengths[0])) and len(lengths.axes) == 1):
            return False, lengths
    return None


def match_attention(out: Op) -> Match | None:
    """The composite ending in ``out`` (its last ``batch_dot``), or None when ``out`` is not one.

    Args:
        out: any op; a composite's is ``batch_dot(weights, v)``.

    Returns:
        the ``Match`` (sources, arg, the ops it replaces), or None: another op, another mask, dropout.

    Example:
        >>> out = ng.scaled_dot_product_attention(q, k, v, causal=True)
        >>> match_attention(out.src[0]).arg  # out: the final transpose of the last batch_dot
        D scale=0.353553 causal
    """
    if out.op is not T.BATCH_DOT:
        return None
    weights, v = out.src
    after = None
    if weights.op is T.MUL:  # the weights times the mask: zeros for a query that sees no key
        found = [(a, b) for a, b in (weights.src, weights.src[::-1]) if a.op is T.DIV]
        if not found:
            return None
        weights_mul, (weights, after) = weights, found[0]
    softmax = _softmax(weights, KEY_TIME)
    if softmax is None:
        return None
    x, inner = softmax
    if after is not None:
        inner.append(weights_mul)
    masked = None
    if x.op is T.WHERE:
        masked, (before, x, low) = x, x.src
        lowest = float(np.finfo(np.dtype(x.dtype)).min) if x.dtype.startswith("float") else None
        if (scalar_value(low) != lowest or after is None
                or _through(after, T.BROADCAST, T.CAST) is not _through(before, T.BROADCAST, T.CAST)):
            return None
        inner.append(masked)
    elif after is not None:
        return None
    scaled = _scalar_operand(x)
    if scaled is None or scaled[0].op is not T.BATCH_DOT or not 0 < scaled[1] < math.inf:
        return None
    scores, scale = scaled
    q, k = scores.src
    names = set(q.axes.names) & set(k.axes.names) - set(scores.axes.names)
    if len(names) != 1 or q.axes.find(RECURRENT_AXIS_NAME) is None or k.axes.find(KEY_TIME) is None:
        return None
    causal, lengths = False, None
    if masked is not None:
        mask = _mask(before, RECURRENT_AXIS_NAME, KEY_TIME)
        if mask is None:
            return None
        causal, lengths = mask
    src = (q, k, v) if lengths is None else (q, k, v, lengths)
    return Match(src, AttentionArg(names.pop(), scale, causal), frozenset([*inner, x, scores]), scores)


def _times(scores: Op) -> int:
    """Queries x keys: the scores of one kept position."""
    return scores.axes.find(RECURRENT_AXIS_NAME).length * scores.axes.find(KEY_TIME).length


def fuse_attention(roots: list[Op], min_scores: int | None = None, min_position_scores: int | None = None
                   ) -> list[Op]:
    """Replace each attention composite whose intermediate values have no other use by one ``fused_attention`` op.

    Args:
        roots: the graph's results.
        min_scores: the fewest score elements worth fusing (None: ``MIN_SCORES``).
        min_position_scores: the fewest per kept position (None: ``MIN_POSITION_SCORES``).

    Returns:
        the new roots (the same list when nothing was fused).

    Example:
        >>> (y,) = fuse_attention([ng.scaled_dot_product_attention(q, k, v, causal=True)], 0, 0)
        >>> y.src[0].op  # the attention op, under the composite's final transpose
    """
    least = MIN_SCORES if min_scores is None else min_scores
    least_each = MIN_POSITION_SCORES if min_position_scores is None else min_position_scores
    order = toposort(roots)
    users, results = consumers(order), set(roots)
    fused: dict[Op, Match] = {}
    for op in order:
        match = match_attention(op)
        if match is None or match.scores.axes.size < least or _times(match.scores) < least_each:
            continue
        if any(i in results or any(u not in match.inner and u is not op for u in users[i]) for i in match.inner):
            continue  # the weights (or the scores) are read elsewhere: the backward, a tap
        fused[op] = match
    if not fused:
        return roots
    new: dict[Op, Op] = {}

    def fuse(op: Op, cur: Op) -> Op:
        match = fused.get(op)
        if match is None:
            return cur
        try:
            return make(T.FUSED_ATTENTION, [new[s] for s in match.src], arg=match.arg, axes=op.axes, name=op.meta.name,
                        labels=op.meta.labels, scope=op.meta.scope)
        except (AxesError, DTypeError):  # a look-alike whose axes do not line up: keep it as built
            return cur

    rebuild(order, fuse, new)
    return [new[r] for r in roots]
