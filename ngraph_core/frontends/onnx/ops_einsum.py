"""Converter: Einsum, composed from named-axis products and sums.

Every subscript letter becomes one ngraph axis (``...`` becomes generated letters,
right-aligned, NumPy-broadcast); each operand is renamed onto its letters' axes, a
repeated letter within one operand (``ii``) takes the diagonal (a product with a
constant identity, summed), then:

* two operands with no letter kept by both (``ij,jk->ik``, ``i,i``): one ``ng.dot``,
  which contracts exactly the shared axes;
* otherwise (batch letters ``bij,bjk->bik``): broadcast product, then a sum over the
  letters the output drops.

Example:
    >>> node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")
"""

from __future__ import annotations

import string

import numpy as np

from ... import api
from ...ir import Axes, Op
from .errors import OnnxError
from .registry import converter

_SPARE = [c for c in string.ascii_letters[::-1]]  # letters for the dims "..." stands for


def parse_equation(node, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Each operand's letters (``...`` expanded) and the output's letters.

    Raises:
        OnnxError: operand count or ranks that disagree with the equation.
    """
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise OnnxError(f"Einsum node {node.name!r}: equation {equation!r} has {len(terms)} operands, received "
                        f"{len(ranks)} inputs")
    used = set(text) - set(".,->")
    spare = [c for c in _SPARE if c not in used]
    ellipsis_rank = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    dots = "".join(spare[:ellipsis_rank][::-1])
    letters = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            head, tail = t.split("...")
            t = head + dots[len(dots) - (r - len(head) - len(tail)):] + tail
        if len(t) != r:
            raise OnnxError(f"Einsum node {node.name!r}: term {t!r} of {equation!r} names {len(t)} dims, the input "
                            f"has rank {r}")
        letters.append(t)
    if arrow:
        out = rhs.replace("...", dots)
    else:  # implicit form: the broadcast dims, then the letters used once, sorted
        counts = {c: "".join(letters).count(c) for c in set("".join(letters)) - set(dots)}
        out = dots + "".join(sorted(c for c, n in counts.items() if n == 1))
    return letters, out


def _diagonal(x: Op, term: str) -> tuple[Op, str]:
    """``x`` with each repeated letter of ``term`` reduced to its diagonal; the letters left."""
    while len(set(term)) < len(term):
        letter = next(c for c in term if term.count(c) > 1)
        i, j = term.index(letter), term.index(letter, term.index(letter) + 1)
        a, b = x.axes[i], x.axes[j]
        eye = api.constant(np.eye(a.length, dtype=x.dtype), axes=[a, b])
        x = api.sum(x * eye, reduction_axes=[b])
        term = term[:j] + term[j + 1:]
    return x, term


@converter("Einsum", since=12)
def einsum(ctx, node, inputs):
    ops = [ctx.as_op(v) for v in inputs]
    letters, out = parse_equation(node, node.attr("equation"), [len(o.axes) for o in ops])
    lengths: dict[str, int] = {}
    for term, o in zip(letters, ops):
        for c, n in zip(term, o.axes.lengths):
            if n != 1 or c not in lengths:
                if lengths.get(c, 1) not in (1, n):
                    raise OnnxError(f"Einsum node {node.name!r}: letter {c!r} has lengths {lengths[c]} and {n}")
                lengths[c] = n
    axis = {c: ctx.fresh([n])[0] for c, n in lengths.items()}
    named = []
    for term, o in zip(letters, ops):
        o, term = _diagonal(ctx.rename(o), term)
        stretch = [k for k, c in enumerate(term) if o.axes[k].length != lengths[c]]  # size-1 dims that broadcast
        if stretch:
            kept = [k for k in range(len(term)) if k not in stretch]
            o = ctx.reshape(o, [o.axes[k].length for k in kept])
            term = "".join(term[k] for k in kept)
        named.append((api.cast_axes(o, Axes(axis[c] for c in term)), term))
    y, term = named[0]
    for k, (o, t) in enumerate(named[1:], start=1):
        later = set(out).union(*(s for _, s in named[k + 1:]))
        shared = set(term) & set(t)
        if shared and not shared & later:  # the shared letters end here: one dot contracts them
            y = api.dot(y, o)
            term = "".join(c for c in term + t if c not in shared)
        else:
            union = Axes([*y.axes, *(a for a in o.axes if a not in y.axes)])
            y = api.broadcast(y, union) * api.broadcast(o, union)
            term = "".join(dict.fromkeys(term + t))
    drop = [axis[c] for c in term if c not in out]
    if drop:
        y = api.sum(y, reduction_axes=drop)
    missing = [c for c in out if c not in lengths]
    if missing:
        raise OnnxError(f"Einsum node {node.name!r}: output letters {missing} appear in no input")
    y = api.axes_with_order(y, Axes(axis[c] for c in out)) if out else y
    return ctx.rename(y)
