"""Constant folding: evaluate at compile time every pure, cheap op whose inputs are all constants.

An input is constant when it is a ``constant`` op or a ``broadcast`` of one (the form
the API gives scalars). The value is computed with the very kernels the NumPy
transformer runs; float32 work runs in float64 (as on a ``float_dtype="float64"``
transformer), so a folded scalar is the correctly rounded value on a float32 run
and keeps full precision on a float64 run.

What is never folded: leaves, random ops (fresh values on every run), control ops
(``assign``, ``sequential``, ``doall``, ``custom_gradient``), and ``broadcast`` itself
(a broadcast constant is already the cheapest form: a scalar and a view). Ops whose
result or inputs hold more than ``MAX_FOLD_SIZE`` elements are left to run time, so a
graph never grows by a large array; element-wise ops over broadcast scalars are the
exception, because they are evaluated on the scalars alone.

A result that holds one value everywhere becomes a scalar constant broadcast to the
op's axes (which ``Pat.const`` and the simplify rules recognise); any other result
becomes an array constant. Array constants hold their values in the op's dtype, so a
float32 array result is folded only when float32 holds it exactly (a slice, a
reorder, a max, ``2 * k``...): otherwise a float64 run of the graph, which computes
the unfolded op in float64, would see a rounded value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import api as ng
from ..errors import NgraphError
from ..ir import Op, OpGroup, OpType, make
from ..pattern import Pat, PatternMatcher, graph_rewrite

MAX_FOLD_SIZE = 2**16

FOLDABLE = (
    OpGroup.ELEMENTWISE | OpGroup.REDUCE | OpGroup.CONTRACTION | OpGroup.MOVEMENT
) - {OpType.BROADCAST}


def is_constant(op: Op) -> bool:
    """True for a ``constant`` op, or a broadcast of one."""
    while op.op is OpType.BROADCAST:
        op = op.src[0]
    return op.op is OpType.CONSTANT


def _scalar_source(op: Op) -> Op | None:
    """The scalar (axes ``()``) constant that ``op`` broadcasts, or None."""
    while op.op is OpType.BROADCAST:
        op = op.src[0]
    return op if op.op is OpType.CONSTANT and not op.axes else None


def _foldable(op: Op) -> bool:
    from ..transformers.kernels import KERNELS  # lazily, as in ``_evaluate``

    if op.op not in KERNELS or not all(is_constant(s) for s in op.src):
        return False
    if op.op in OpGroup.ELEMENTWISE and all(_scalar_source(s) is not None for s in op.src):
        return True  # evaluated on the scalars, whatever the axes
    return max([op.axes.size] + [s.axes.size for s in op.src]) <= MAX_FOLD_SIZE


def _evaluation_dtype(op: Op) -> str:
    # float32 work runs in float64, as on a float_dtype="float64" transformer: a folded scalar
    # keeps full precision (scalar constants hold a Python float) and rounds once, when run
    return "float64" if op.dtype == "float32" else op.dtype


def _evaluate(op: Op) -> np.ndarray:
    """``op``'s value (its sources must be constant) computed by the NumPy kernels."""
    # imported here, not at the top: the transformers import the pass pipeline (to
    # compile), so a module-level import of transformers from a pass would be circular
    from ..transformers.kernels import KERNELS, KernelContext

    def no_seed(o: Op) -> int:
        raise NgraphError(f"constant folding: {o.op.value} is random and must not be folded")

    kc = KernelContext(np, _evaluation_dtype, no_seed)

    def value(o: Op) -> Any:
        kernel = KERNELS[o.op](o, kc)
        inputs = [value(s) for s in o.src]
        if o.op in OpGroup.NO_BUFFER:
            return kernel(*inputs)
        return kernel(np.empty(o.axes.lengths, dtype=_evaluation_dtype(o)), *inputs)  # a fresh buffer per op

    with np.errstate(all="ignore"):  # the run-time kernels would give the same inf/nan
        return np.array(value(op), dtype=_evaluation_dtype(op), copy=True)


def fold_op(op: Op) -> Op | None:
    """The constant that ``op`` (all of whose sources are constant) evaluates to, or None.

    None when the value is an array that the op's dtype cannot hold exactly (see the
    module docstring).

    Example:
        >>> fold_op(ng.constant(2.0) * 3.0)  # constant 6.0
    """
    scalars = [_scalar_source(s) for s in op.src]
    if op.op in OpGroup.ELEMENTWISE and all(s is not None for s in scalars):
        # element-wise over scalars: evaluate once on the scalars, broadcast the result
        value = _evaluate(make(op.op, scalars, arg=op.arg, dtype=op.dtype))
        return ng.broadcast_to(ng.constant(value, (), dtype=op.dtype), op.axes)
    value = _evaluate(op)
    flat = value.ravel()
    if flat.size and (flat == flat[0]).all():
        return ng.broadcast_to(ng.constant(flat[0], (), dtype=op.dtype), op.axes)
    if not np.array_equal(value.astype(op.dtype), value, equal_nan=True):
        return None  # float64 work a float32 array would round: a float64 run must not see that
    return ng.constant(value, op.axes, dtype=op.dtype)


FOLD = PatternMatcher([
    (Pat(FOLDABLE, name="op", where=_foldable), fold_op),  # f(constants) -> constant
])


def fold(roots: list[Op]) -> list[Op]:
    """The graph below ``roots`` with every foldable op replaced by its constant value.

    Args:
        roots: the results of a computation.

    Returns:
        the roots with constant subgraphs evaluated (see the module docstring for what folds).

    Example:
        >>> (y,) = fold([x * (ng.constant(2.0) + 1.0)])  # x * broadcast(constant 3.0)
    """
    return graph_rewrite(roots, FOLD, name="fold")
