"""Constant folding: evaluate at compile time every pure, cheap op whose inputs are all constants.

An input is constant when it is a ``constant`` op or a ``broadcast`` of one (the form
the API gives scalars). The value is computed with the very kernels the transformer
runs, run on NumPy: the transformer hands its kernel table to the pipeline
(``compile_graph(kernels=..., kernel_context=...)``), which wraps it in a
``KernelEvaluator`` for this pass — a pass never imports a transformer. float32 work
runs in float64 (as on a ``float_dtype="float64"`` transformer), so a folded scalar is
the correctly rounded value on a float32 run and keeps full precision on a float64 run.

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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import api
from ..errors import NgraphError
from ..ir import Op, OpGroup, OpType, make
from ..pattern import Pat, PatternMatcher, graph_rewrite

MAX_FOLD_SIZE = 2**16

FOLDABLE = (
    OpGroup.ELEMENTWISE | OpGroup.REDUCE | OpGroup.CONTRACTION | OpGroup.MOVEMENT
) - {OpType.BROADCAST}

# a backend's kernel table (``transformers.kernels.KERNELS``): OpType -> factory (op, context) -> kernel
KernelTable = Mapping[OpType, Callable[[Op, Any], Callable[..., Any]]]
# builds the context its factories take from (xp, dtype_of, generator_for) (``transformers.kernels.KernelContext``)
ContextFactory = Callable[[Any, Callable[[Op], str], Callable[[Op], int]], Any]


def _evaluation_dtype(op: Op) -> str:
    # float32 work runs in float64, as on a float_dtype="float64" transformer: a folded scalar
    # keeps full precision (scalar constants hold a Python float) and rounds once, when run
    return "float64" if op.dtype == "float32" else op.dtype


def _no_generator(op: Op) -> Any:
    raise NgraphError(
        f"constant folding: expected a deterministic op, received {op.op.value}; "
        "hint: random ops are never folded (this is a bug in the fold pass)"
    )


class KernelEvaluator:
    """Computes one op's value on NumPy with a backend's kernels: what ``fold`` evaluates with.

    Args:
        kernels: the backend's kernel table, ``OpType -> factory(op, context) -> kernel``.
        make_context: builds the factories' context from ``(xp, dtype_of, generator_for)``.

    Example:
        >>> from ngraph_core.transformers.kernels import KERNELS, KernelContext
        >>> evaluator = KernelEvaluator(KERNELS, KernelContext)
        >>> evaluator(ng.constant(2.0), [])  # array(2.)
    """

    def __init__(self, kernels: KernelTable, make_context: ContextFactory) -> None:
        self.kernels = kernels
        self.context = make_context(np, _evaluation_dtype, _no_generator)

    def supports(self, op: Op) -> bool:
        """True when the backend has a kernel for ``op``'s type."""
        return op.op in self.kernels

    def __call__(self, op: Op, inputs: Sequence[Any]) -> Any:
        """``op``'s value from its sources' values (NumPy arrays), in the evaluation dtype."""
        kernel = self.kernels[op.op](op, self.context)
        if op.op in OpGroup.NO_BUFFER:
            return kernel(*inputs)
        return kernel(np.empty(op.axes.lengths, dtype=_evaluation_dtype(op)), *inputs)  # a fresh buffer per op


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


def _foldable(op: Op, evaluator: KernelEvaluator) -> bool:
    if not evaluator.supports(op) or not all(is_constant(s) for s in op.src):
        return False
    if op.op in OpGroup.ELEMENTWISE and all(_scalar_source(s) is not None for s in op.src):
        return True  # evaluated on the scalars, whatever the axes
    return max([op.axes.size] + [s.axes.size for s in op.src]) <= MAX_FOLD_SIZE


def _evaluate(op: Op, evaluator: KernelEvaluator) -> np.ndarray:
    """``op``'s value (its sources must be constant), each op of the subgraph evaluated by ``evaluator``."""

    def value(o: Op) -> Any:
        return evaluator(o, [value(s) for s in o.src])

    with np.errstate(all="ignore"):  # the run-time kernels would give the same inf/nan
        return np.array(value(op), dtype=_evaluation_dtype(op), copy=True)


def fold_op(op: Op, evaluator: KernelEvaluator) -> Op | None:
    """The constant that ``op`` (all of whose sources are constant) evaluates to, or None.

    Args:
        op: an op whose sources are all constant (``is_constant``).
        evaluator: computes values with the backend's kernels.

    Returns:
        a scalar constant broadcast to ``op``'s axes, an array constant, or None when the
        value is an array that the op's dtype cannot hold exactly (see the module docstring).

    Example:
        >>> fold_op(ng.constant(2.0) * 3.0, KernelEvaluator(KERNELS, KernelContext))  # constant 6.0
    """
    scalars = [_scalar_source(s) for s in op.src]
    if op.op in OpGroup.ELEMENTWISE and all(s is not None for s in scalars):
        # element-wise over scalars: evaluate once on the scalars, broadcast the result
        value = _evaluate(make(op.op, scalars, arg=op.arg, dtype=op.dtype), evaluator)
        return api.broadcast_to(api.constant(value, (), dtype=op.dtype), op.axes)
    value = _evaluate(op, evaluator)
    flat = value.ravel()
    if flat.size and (flat == flat[0]).all():
        return api.broadcast_to(api.constant(flat[0], (), dtype=op.dtype), op.axes)
    if not np.array_equal(value.astype(op.dtype), value, equal_nan=True):
        return None  # float64 work a float32 array would round: a float64 run must not see that
    return api.constant(value, op.axes, dtype=op.dtype)


def fold_rules(evaluator: KernelEvaluator) -> PatternMatcher:
    """The folding rule, evaluating with ``evaluator``.

    Example:
        >>> len(fold_rules(KernelEvaluator(KERNELS, KernelContext)))  # 1
    """
    return PatternMatcher([
        (Pat(FOLDABLE, name="op", where=lambda op: _foldable(op, evaluator)),
         lambda op: fold_op(op, evaluator)),  # f(constants) -> constant
    ])


def fold(roots: list[Op], evaluator: KernelEvaluator) -> list[Op]:
    """The graph below ``roots`` with every foldable op replaced by its constant value.

    Args:
        roots: the results of a computation.
        evaluator: computes values with the backend's kernels (``compile_graph`` makes it
            from the kernel table the transformer passes in).

    Returns:
        the roots with constant subgraphs evaluated (see the module docstring for what folds).

    Example:
        >>> (y,) = fold([x * (ng.constant(2.0) + 1.0)], evaluator)  # x * broadcast(constant 3.0)
    """
    return graph_rewrite(roots, fold_rules(evaluator), name="fold")
