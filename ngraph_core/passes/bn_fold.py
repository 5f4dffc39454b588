"""Batch-norm folding for inference: ``conv`` (or ``dot``) + normalization -> one ``conv`` with a bias.

In inference mode neon's ``BatchNorm`` normalizes with its running averages, and the
graph reads (``neon/layers/normalization.py``; ``b(v)`` is a broadcast over the channel axis)

    add(mul(mul(sub(h, b(mean)), b(rsqrt(add(var, eps)))), b(gamma)), b(beta))

with ``h = conv(x, w)``. That is an affine map per output channel, so it folds into the
filter and a bias (``s = gamma * rsqrt(var + eps)``):

    conv(x, w * b(s)) + b(beta - mean * s)

A bias added *before* the normalization (``h = conv(x, w) + b(b0)``) folds too: it only
shifts the mean (``mean -> mean - b0``). The same holds for a ``dot`` whose one operand
carries the channel axis.

The head may also be seen through renamings and reorders (``cast_axes``, and ``broadcast`` to its
input's axes in another order): an imported ONNX model normalizes ``rename(reorder(conv(x, w)))``,
the convolution's ``[K, H, W, N]`` as ONNX's ``[N, C, H, W]`` under fresh axis names. The channel axis
is followed back through the views to the convolution's own, the scale renamed to it, and the views
rebuilt over the folded convolution (``_through_views``).

The folded filter and bias are computed in the graph from the variables, so the
computation stays right when the weights or statistics change; constant folding does
not evaluate variables, so ``w * b(s)`` runs each call. It is cheap: a ``[Ci, *k, K]``
element-wise op (18K elements for 3x3 32->64) where the normalization it removes
reads and writes the ``[K, *spatial, N]`` activation four times (1M elements for
64x16x16 at batch 64). The bias then fuses into the convolution's epilogue
(``fusion.py``).

What is *not* folded: normalizations whose statistics depend on anything but variables
and constants (training mode computes them from the batch), whose statistics are
variables some ``assign`` in the graph writes (a training step updating the running
averages), heads whose scaled operand is not such a parameter (the filter, or the dot
operand holding the channel axis), and heads with another consumer (the unfolded value
would still be needed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import api
from ..ir import Axes, Op, OpType, consumers, make, rebuild, toposort
from ..ir.conv import activation_roles
from ..pattern import Pat, PatternMatcher

T = OpType
LEAVES = frozenset({T.VARIABLE, T.CONSTANT})


def _b(p: Pat) -> Pat:
    return Pat(T.BROADCAST, (p,))


def _normalized(head: Pat) -> Pat:
    """neon's inference ``BatchNorm`` over ``head``: ``(head - mean) * rsqrt(var + eps) * gamma + beta``."""
    inv = Pat(T.RSQRT, (Pat.var("var") + Pat.cvar("eps"),), name="inv")
    return (head - _b(Pat.var("mean"))) * _b(inv) * _b(Pat.var("gamma")) + _b(Pat.var("beta"))


@dataclass(frozen=True)
class FoldContext:
    """What the rules may ask of the graph, computed before any rewrite (read-only).

    Attributes:
        users: each op's consumers in the original graph.
        results: the graph's roots.
        frozen: ops computed only from constants and variables no ``assign`` writes.
        rewritten: original op -> its rewrite so far (the pass's rebuild mapping; a rule reads
            the rewrites of its head's inputs, which the bottom-up walk has already made).
    """

    users: Mapping[Op, list[Op]]
    results: frozenset[Op]
    frozen: frozenset[Op]
    rewritten: Mapping[Op, Op]

    def single_use(self, op: Op) -> bool:
        return op not in self.results and len(self.users.get(op, ())) == 1

    def is_frozen(self, op: Op) -> bool:
        """``op in frozen``, extended to ops a rule just built from original ones (``mean - b0``)."""
        if op in self.frozen or op.op is T.CONSTANT:
            return True
        if op.op in LEAVES or op.op in (T.PLACEHOLDER, T.ASSIGN) or not op.src:
            return False
        return all(self.is_frozen(s) for s in op.src)


def _frozen_ops(order: list[Op]) -> frozenset[Op]:
    """The ops computed from constants and variables no ``assign`` writes (one bottom-up pass)."""
    assigned = {op.src[0] for op in order if op.op is T.ASSIGN}
    frozen: set[Op] = set()
    for op in order:
        if op.op in LEAVES:
            if op.op is T.CONSTANT or op not in assigned:
                frozen.add(op)
        elif op.src and op.op not in (T.PLACEHOLDER, T.ASSIGN) and all(s in frozen for s in op.src):
            frozen.add(op)
    return frozenset(frozen)


def _scaled_operand(h: Op, channels: Axes) -> int | None:
    """Which source of ``h`` (conv or dot) to scale per channel, or None when the channels are not one's own."""
    if h.op is T.CONV:
        return 1 if list(channels) == [activation_roles(h.axes, "bn_fold").channel] else None
    owners = [j for j, s in enumerate(h.src) if all(a in s.axes for a in channels)]
    return owners[0] if len(owners) == 1 else None


def _is_view(op: Op) -> bool:
    """A renaming, or a reorder (a ``broadcast`` to its input's axes in another order)."""
    return op.op is T.CAST_AXES or (op.op is T.BROADCAST and op.axes.same_set(op.src[0].axes))


def _through_views(h: Op, channels: Axes) -> tuple[Op, list[Op], Axes] | None:
    """``h`` as views (renamings, reorders) of a ``conv``/``dot``: that op, the views from it outwards, and
    ``channels`` as its axes; None when ``h`` is no such chain."""
    views = []
    while _is_view(h):
        if h.op is T.CAST_AXES:  # positionally renamed: the same position in the input
            channels = Axes([h.src[0].axes[h.axes.index(a)] for a in channels])
        views.append(h)
        h = h.src[0]
    return (h, views[::-1], channels) if h.op in (T.CONV, T.DOT) else None


def _fold(ctx: FoldContext, h: Op, mean: Op, inv: Op, gamma: Op, beta: Op, *single: Op) -> Op | None:
    """``conv(x, w * b(s)) + b(beta - mean * s)`` with ``s = inv * gamma`` (see the module docstring); ``h`` may
    be views of the ``conv``/``dot`` (``_through_views``)."""
    channels = mean.axes
    found = _through_views(h, channels)
    if found is None:
        return None
    head, views, own = found
    if not all(ctx.single_use(op) for op in (head, *views, *single)):
        return None
    if not all(ctx.is_frozen(v) and v.axes == channels for v in (mean, inv, gamma, beta)):
        return None
    j = _scaled_operand(head, own)
    if j is None or not ctx.is_frozen(head.src[j]):  # scale weights, never an activation
        return None
    src = [ctx.rewritten.get(s, s) for s in head.src]  # its inputs as rewritten (earlier layers folded too)
    scale = make(T.MUL, [inv, gamma])
    renamed = scale if own == channels else api.cast_axes(scale, own)
    src[j] = make(T.MUL, [src[j], make(T.BROADCAST, [renamed], axes=src[j].axes)])
    folded = head.replace(src=tuple(src))
    for view in views:
        folded = view.replace(src=(folded,))
    shift = make(T.SUB, [beta, make(T.MUL, [mean, scale])])
    return make(T.ADD, [folded, make(T.BROADCAST, [shift], axes=h.axes)])


_HEAD = Pat({T.CONV, T.DOT, T.CAST_AXES, T.BROADCAST}, name="h")  # views checked by _through_views
_BIASED = Pat(T.ADD, [_HEAD, _b(Pat.var("b0"))], name="hb")

RULES = PatternMatcher([
    (_normalized(_HEAD), lambda h, mean, inv, gamma, beta, ctx, **_:
        _fold(ctx, h, mean, inv, gamma, beta)),  # bn(h) = h' + b'
    (_normalized(_BIASED), lambda h, hb, b0, mean, inv, gamma, beta, ctx, **_:
        _fold(ctx, h, make(T.SUB, [mean, b0]), inv, gamma, beta, hb)),  # bn(h + b0) = bn'(h), mean' = mean - b0
])


def fold_batch_norm(roots: list[Op]) -> list[Op]:
    """Fold inference-mode batch normalizations into the ``conv``/``dot`` before them.

    Args:
        roots: the graph's results.

    Returns:
        The rewritten results (``roots`` itself when nothing folds).

    Example:
        >>> with training_mode(False):
        ...     y = Conv((3, 3, 64), batch_norm=True)(x)
        >>> (z,) = fold_batch_norm([y])  # add(conv(x, mul(W, broadcast(...))), broadcast(...))
    """
    order = toposort(roots)
    new: dict[Op, Op] = {}
    ctx = FoldContext(consumers(order), frozenset(roots), _frozen_ops(order), new)
    # one bottom-up sweep; rules see the original ops (their users are known)
    def fold(op: Op, cur: Op) -> Op:
        out = RULES.rewrite(op, ctx)
        return cur if out is None else out

    rebuild(order, fold, new)
    return [new[r] for r in roots] if any(k is not v for k, v in new.items()) else roots
