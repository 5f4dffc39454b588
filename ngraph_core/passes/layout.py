"""Layout: drop or sink axis reorders so fewer ops read strided (transposed) memory.

A *reorder* is a ``broadcast`` whose axes are its input's in another order (what
``ng.axes_with_order`` builds). Ops that name their axes do not need one:

* ``dot`` contracts by name, so a reorder of an operand is dropped when the result's
  axes stay the same — the reorder moved only the contracted axes, or it keeps the
  order of the operand's other axes (the type guard declines the rest);
* a reduction keeps an explicit output order, so it reduces the original directly;
* two reorders in a row are one;
* an element-wise op whose operands are all reorders of inputs with one axes order
  (or broadcasts of smaller inputs, such as a bias) computes on the inputs in their
  own order, and one reorder of its result follows. Repeated, this sinks a transpose
  to the end of an element-wise chain, where a ``dot`` or a reduction absorbs it;
* a renaming (``cast_axes``) of a reorder renames the input instead, before the reorder;
* a convolution reads an activation whose reorder moved only the batch axis directly, and
  a pooling pools it in its own order (one reorder of the result follows).

Together these keep an imported ONNX CNN (NCHW between layers) in the ``[C, H, W, N]`` order
its convolutions compute: each layer's reorder to NCHW sinks through the normalization,
activation and residual add, into the next convolution, which drops it.
"""

from __future__ import annotations

from .. import api
from ..ir import Axes, Op, OpGroup, OpType, make
from ..pattern import Pat, PatternMatcher, graph_rewrite, pat, type_preserving

T = OpType
x, b = Pat.var("x"), Pat.var("b")


def is_reorder(op: Op) -> bool:
    """True for a ``broadcast`` whose axes are its input's, in any order."""
    return op.op is T.BROADCAST and op.axes.same_set(op.src[0].axes)


reorder = Pat(T.BROADCAST, (x,), where=is_reorder)


def _common_order(op: Op) -> Axes | None:
    """The one axes order that ``op``'s reordered operands come from, if they all fit it."""
    if not all(s.op is T.BROADCAST for s in op.src):
        return None
    orders = {s.src[0].axes for s in op.src if is_reorder(s) and s.axes != s.src[0].axes}
    if len(orders) != 1:
        return None
    (order,) = orders
    return order if all(s.src[0].axes.is_subset_of(order) for s in op.src) else None


def _sink_reorder(op: Op) -> Op:
    order = _common_order(op)
    assert order is not None
    inner = make(op.op, [api.broadcast_to(s.src[0], order) for s in op.src], arg=op.arg, dtype=op.dtype)
    return api.broadcast_to(inner, op.axes)


def _renamed_first(op: Op, x: Op) -> Op:
    """``cast_axes(reorder(x))`` as ``reorder(cast_axes(x))``: ``x`` renamed in its own order, each axis to the
    name its reordered position gets, then reordered to ``op``'s axes."""
    moved = op.src[0]
    names = Axes([op.axes[moved.axes.index(a)] for a in x.axes])
    return api.broadcast_to(api.cast_axes(x, names), op.axes)


def _roles_kept(op: Op) -> bool:
    """For a reorder: True when it moves only the batch axis (a ``[C, *spatial, N]`` activation keeps its roles:
    the other axes stay in their order)."""
    x = op.src[0]
    return op.axes.batch_axis is not None and [a for a in op.axes if not a.is_batch] == \
        [a for a in x.axes if not a.is_batch]


def _pooled_first(op: Op, x: Op) -> Op:
    """``pool(reorder(x))`` as ``reorder(pool(x))``: pooled in ``x``'s order (the compiled loops want the batch
    innermost, as a convolution leaves it), then reordered to ``op``'s axes."""
    rest = iter([a for a in op.axes if not a.is_batch])
    axes = Axes([op.axes.batch_axis if a.is_batch else next(rest) for a in x.axes])
    return api.broadcast_to(op.replace(src=(x,), axes=axes), op.axes)  # replace: its name and scope stay


batch_moved = Pat(T.BROADCAST, (x,), where=lambda op: is_reorder(op) and _roles_kept(op))

RULES = [
    # cast_axes(reorder(x)) -> reorder(cast_axes(x)): a renaming between two ops (ONNX import renames every
    # value) no longer hides the reorder from the rules below
    (pat(T.CAST_AXES, reorder, name="op"), _renamed_first),
    # conv(reorder(x), w) -> conv(x, w) when only the batch axis moved: the convolution reads its input's
    # roles by name and position, and its padded copy no longer transposes
    (pat(T.CONV, batch_moved, b, name="op"), lambda op, x, b: op.replace(src=(x, b))),
    (pat(T.POOL, batch_moved, name="op"), _pooled_first),  # pool(reorder(x)) -> reorder(pool(x))
    (pat(T.DOT, reorder, b), lambda x, b: api.dot(x, b)),  # dot(reorder(x), b) -> dot(x, b)
    (pat(T.DOT, b, reorder), lambda x, b: api.dot(b, x)),  # dot(b, reorder(x)) -> dot(b, x)
    (pat(OpGroup.REDUCE, reorder, name="op"), lambda op, x: make(op.op, [x], axes=op.axes)),  # r(reorder(x)) -> r(x)
    (pat(T.BROADCAST, reorder, name="op"), lambda op, x: api.broadcast_to(x, op.axes)),  # bc(reorder(x)) -> bc(x)
    (Pat(OpGroup.ELEMENTWISE, name="op", where=lambda op: _common_order(op) is not None),
     _sink_reorder),  # f(reorder(x), reorder(y)) -> reorder(f(x, y))
]

LAYOUT = PatternMatcher(type_preserving(RULES))


def layout(roots: list[Op]) -> list[Op]:
    """The graph below ``roots`` with axis reorders dropped or sunk (see the module docstring).

    Args:
        roots: the results of a computation.

    Returns:
        the roots, computing the same values with fewer strided operands.

    Example:
        >>> (y,) = layout([ng.dot(ng.axes_with_order(w, [C, H]), x)])  # dot(w, x)
    """
    return graph_rewrite(roots, LAYOUT, name="layout")
