"""Algebraic simplification: one pattern rule per identity, applied to a fixed point.

``SIMPLIFY`` holds the rules (``RULES`` is the same list before the type guard, for
tests and for reading). Every rule keeps the replaced op's axes and dtype; where an
identity would change them (``x * 1.0`` with an integer ``x`` is a float op, ``x``
is not), ``type_preserving`` declines the rewrite.

IEEE choices (what is *not* here, and why):

* ``x*0 -> 0`` and ``x-x -> 0`` hold for integers only. For floats ``inf*0`` and
  ``inf-inf`` are NaN, and turning a NaN into a 0 would hide a diverging loss (LLVM
  applies them only under ``nnan``/``ninf`` fast-math flags, XLA not at all).
* ``exp(log(x)) -> x`` is wrong for ``x < 0`` (NaN) and ``x == 0`` is fine only by
  luck; it is left out. ``log(exp(x)) -> x`` is kept: it differs only where ``exp``
  over- or underflowed, and there it gives the exact value instead of ``inf``/``-inf``.
* ``x / c -> x * (1/c)`` (float ``x``, nonzero scalar constant ``c`` whose reciprocal is
  finite) may differ from the division by one rounding (1 ulp), as in XLA.
* ``x + 0 -> x`` and ``x - 0 -> x`` may change the sign of a zero result.
"""

from __future__ import annotations

import numpy as np

from .. import api
from ..ir import Axes, Op, OpType, make, promote
from ..ir.dtypes import FLOAT_DTYPES
from ..pattern import Pat, PatternMatcher, Rule, graph_rewrite, pat, scalar_value, type_preserving

T = OpType
INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


# -- rule helpers ---------------------------------------------------------------------------


def reshaped(x: Op, axes: Axes) -> Op:
    """``x`` reshaped (row-major) to ``axes``; ``x`` itself when they are its axes."""
    return x if x.axes == axes else make(T.RESHAPE, [x], axes=axes)


def _same_axes(op: Op) -> bool:
    return op.axes == op.src[0].axes


def _only_broadcast_axes_reduced(op: Op) -> bool:
    """A reduction over a broadcast that reduces only axes the broadcast added."""
    # ``where`` is tested before the sources are matched: check that x is a broadcast here
    bc = op.src[0]
    return bc.op is T.BROADCAST and bc.src[0].axes.is_subset_of(op.axes) and bc.axes.size > 0


def _reorders(op: Op) -> bool:
    """A reduction over no axis: the same values with the axes in another order (a gradient's transpose)."""
    return op.axes.same_set(op.src[0].axes) and op.dtype == op.src[0].dtype


def _contract(op: Op, a: Op, b: Op) -> Op:
    return make(op.op, [a, b], axes=op.axes)


def _sum_of_copies(op: Op, x: Op) -> Op:
    count = op.src[0].axes.size // op.axes.size
    copies = api.broadcast_to(x, op.axes)
    return copies if count == 1 else copies * count


def _times_reciprocal(x: Op, c: Op) -> Op | None:
    value = scalar_value(c)
    if not value:
        return None
    # the inverse at full precision (scalar constants hold a Python float); it must not
    # overflow or vanish in the division's dtype (an int c gives a float division here)
    dtype = promote(x.dtype, c.dtype)
    with np.errstate(all="ignore"):
        rounded = np.asarray(1.0 / value, dtype=dtype)
    if not np.isfinite(rounded) or rounded == 0:
        return None
    return x * api.constant(1.0 / value, (), dtype=dtype)


# -- the rules ---------------------------------------------------------------------------------

x, a, b = Pat.var("x"), Pat.var("a"), Pat.var("b")
fx = Pat.var("x", dtype=FLOAT_DTYPES)  # float-only identities
ix = Pat.var("x", dtype=INTEGER_DTYPES)  # exact only for integers (see the module docstring)
c = Pat.cvar("c")

RULES: list[Rule] = [
    # identities of arithmetic (mul and add match their sources in either order: 1*x, 0+x too)
    (x * 1, lambda x: x),  # x*1 -> x
    (x + 0, lambda x: x),  # x+0 -> x
    (x - 0, lambda x: x),  # x-0 -> x
    (x / 1, lambda x: x),  # x/1 -> x
    (ix * 0, lambda x: api.fill_like(x, 0)),  # x*0 -> 0  (integers)
    (Pat(T.SUB, (ix, ix)), lambda x: api.fill_like(x, 0)),  # x-x -> 0  (integers)
    (pat(T.NEG, pat(T.NEG, x)), lambda x: x),  # --x -> x
    (-a + b, lambda a, b: b - a),  # -a+b -> b-a  (and a+-b -> a-b)
    (a - (-b), lambda a, b: a + b),  # a--b -> a+b
    (fx / c, _times_reciprocal),  # x/c -> x*(1/c)
    # powers
    (x ** 1, lambda x: x),  # x**1 -> x
    (x ** 0, lambda x: api.fill_like(x, 1)),  # x**0 -> 1  (IEEE pow(nan, 0) is 1 too)
    (x ** 2, lambda x: make(T.SQUARE, [x])),  # x**2 -> square(x)
    (fx ** 0.5, lambda x: make(T.SQRT, [x])),  # x**0.5 -> sqrt(x)
    (fx ** -1, lambda x: make(T.RECIPROCAL, [x])),  # x**-1 -> reciprocal(x)
    # inverse functions
    (pat(T.LOG, pat(T.EXP, x)), lambda x: x),  # log(exp(x)) -> x
    (pat(T.STOP_GRADIENT, pat(T.STOP_GRADIENT, x, name="s")), lambda s, x: s),  # sg(sg(x)) -> sg(x)
    # a custom gradient has done its work once gradients are built (before compiling): its value
    # is its forward subgraph, which element-wise fusion may then merge with its consumers
    (Pat(T.CUSTOM_GRADIENT, name="op"), lambda op: op.src[0]),  # custom_gradient(v, *inputs) -> v
    # movement: collapse chains, drop no-ops
    (pat(T.BROADCAST, pat(T.BROADCAST, x), name="op"), lambda op, x: api.broadcast_to(x, op.axes)),  # bc(bc(x))->bc(x)
    (pat(T.CAST_AXES, pat(T.CAST_AXES, x), name="op"), lambda op, x: api.cast_axes(x, op.axes)),  # ca(ca(x)) -> ca(x)
    (pat(T.RESHAPE, pat(T.RESHAPE, x), name="op"), lambda op, x: reshaped(x, op.axes)),  # rs(rs(x)) -> rs(x)
    (pat(T.BROADCAST, x, where=_same_axes), lambda x: x),  # broadcast(x, x.axes) -> x
    (pat(T.CAST_AXES, x, where=_same_axes), lambda x: x),  # cast_axes(x, x.axes) -> x
    (pat(T.RESHAPE, x, where=_same_axes), lambda x: x),  # reshape(x, x.axes) -> x
    (pat(T.CAST, x, where=lambda op: op.dtype == op.src[0].dtype), lambda x: x),  # cast(x, x.dtype) -> x
    # reductions over copies
    (pat(T.SUM, pat(T.BROADCAST, Pat.var("x", dtype=FLOAT_DTYPES + INTEGER_DTYPES)), name="op",
         where=_only_broadcast_axes_reduced), _sum_of_copies),  # sum(bc(x)) -> x*count
    (pat({T.MAX, T.MIN}, pat(T.BROADCAST, x), name="op", where=_only_broadcast_axes_reduced),
     lambda op, x: api.broadcast_to(x, op.axes)),  # max(bc(x)) -> x
    # a contraction reads its operands in any axis order (its kernel views them as matrices, copying only what
    # BLAS cannot read, in the cheaper order): a transposing copy in front of it is a full pass for nothing
    # (attention's output gradient [V, H, REC, N] -> [H, N, REC, V], 3.5 ms of 1M floats)
    (pat({T.DOT, T.BATCH_DOT}, pat(T.SUM, Pat.var("a"), where=_reorders), Pat.var("b"), name="op"),
     _contract),  # dot(reorder(a), b) -> dot(a, b)
    (pat({T.DOT, T.BATCH_DOT}, Pat.var("a"), pat(T.SUM, Pat.var("b"), where=_reorders), name="op"),
     _contract),  # dot(a, reorder(b)) -> dot(a, b)
    # control
    (pat(T.SEQUENTIAL, x), lambda x: x),  # sequential([x]) -> x
]

SIMPLIFY = PatternMatcher(type_preserving(RULES))


def simplify(roots: list[Op]) -> list[Op]:
    """The graph below ``roots`` with ``SIMPLIFY``'s identities applied to a fixed point.

    Args:
        roots: the results of a computation.

    Returns:
        the simplified roots, in order; values unchanged up to the IEEE notes above.

    Example:
        >>> (y,) = simplify([(x * 1.0 + 0.0) ** 2.0])  # y is ng.square(x)
    """
    return graph_rewrite(roots, SIMPLIFY, name="simplify")
