"""Explicit side effects and ordering: ``assign``, ``sequential``, ``doall``.

Execution order, as the compiler schedules it (``passes/linearize.py``):

* ``sequential([a, b, c])`` runs ``a``, then ``b``, then ``c`` — each with those of its
  inputs not already computed for an earlier element — and has ``c``'s value. So
  ``sequential([assign(v, v + 1), v * 2])`` sees the new ``v``.
* An op sees a variable's *old* value unless it is ordered after the assign to that
  variable (by data flow, or by ``sequential``). So in ``doall([assign(W, W - lr * dW),
  assign(b, b - lr * db)])`` both gradients read the weights from before the update, and
  ``doall([assign(a, b), assign(b, a)])`` swaps. Assignments to one variable run in the
  order given.
* ``assign`` has the assigned value, so ``assign(W, W + assign(v, ...))`` reads the new
  ``v`` through plain data flow (momentum).

Within those rules each update runs as soon as its inputs are ready, so a training step
does not hold every gradient at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import DTypeError
from ..ir import Op, OpType, make
from .math import align
from .tensors import as_op


def assign(var: Op, value: Any) -> Op:
    """Write ``value`` into variable ``var`` when run; its value is the new contents.

    ``value`` is aligned to ``var``'s axes by name (a scalar fills the variable).

    Raises:
        DTypeError: ``var`` is not a variable.
        AxesError: ``value`` has axes ``var`` lacks.

    Example:
        >>> step = assign(W, W - 0.1 * grad_W)
    """
    if not isinstance(var, Op) or var.op is not OpType.VARIABLE:
        got = var.op.value if isinstance(var, Op) else type(var).__name__
        raise DTypeError(f"assign: expected a variable as the target, received {got}; hint: create it with ng.variable")
    value = as_op(value, like=var, where="assign")
    value = align([var, value], "assign")[1]
    if value.dtype != var.dtype:
        from .math import cast

        value = cast(value, var.dtype)
    return make(OpType.ASSIGN, [var, value])


def sequential(ops: Sequence[Any]) -> Op:
    """Run ``ops`` in order; the value is the last one's (see the module docstring)."""
    ops = [as_op(o, where="sequential") for o in ops]
    return ops[0] if len(ops) == 1 else make(OpType.SEQUENTIAL, ops)


def doall(ops: Sequence[Any]) -> Op:
    """Run all of ``ops`` for their effects; the value is nothing (a computation returns None for it)."""
    return make(OpType.DOALL, [as_op(o, where="doall") for o in ops])
