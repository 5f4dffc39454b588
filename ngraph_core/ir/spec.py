"""Validity rules of the IR and ``verify(graph)``.

``verify`` re-derives every op's axes and dtype from its sources with the
inference table and checks op-specific ``arg`` shapes. Tests run it after every
pass, and so does the compiler when ``NG_CHECK=1``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import NgraphError, VerifyError
from .conv import ConvArg, PoolArg
from .infer import ALL_DTYPES, infer
from .node import ArrayValue, Op, RandomInfo, VariableInfo, toposort
from .ops import OpType
from .printer import format_op

_CONV_OPS = (OpType.CONV, OpType.CONV_BPROP_DATA, OpType.CONV_BPROP_FILTER)


def _check_arg(op: Op) -> str | None:
    """A message when ``op.arg`` has the wrong form for its OpType, else None."""
    t, arg = op.op, op.arg
    if t is OpType.VARIABLE and not isinstance(arg, VariableInfo):
        return f"variable arg must be VariableInfo, got {type(arg).__name__}"
    if t is OpType.PLACEHOLDER and not isinstance(arg, int):
        return f"placeholder arg must be an int id, got {type(arg).__name__}"
    if t in (OpType.UNIFORM, OpType.NORMAL) and not isinstance(arg, RandomInfo):
        return f"random arg must be RandomInfo, got {type(arg).__name__}"
    if t is OpType.CONSTANT:
        if isinstance(arg, ArrayValue):
            if arg.array.shape != op.axes.lengths:
                return f"constant array shape {arg.array.shape} differs from axes lengths {op.axes.lengths}"
        elif not isinstance(arg, (int, float, bool)):
            return f"constant arg must be a number or ArrayValue, got {type(arg).__name__}"
    if t is OpType.CONCAT and not isinstance(arg, str):
        return "concat arg must be the axis name"
    if t in _CONV_OPS and not isinstance(arg, ConvArg):
        return f"{t.value} arg must be ConvArg, got {type(arg).__name__}"
    if t in (OpType.POOL, OpType.POOL_BPROP) and not isinstance(arg, PoolArg):
        return f"{t.value} arg must be PoolArg, got {type(arg).__name__}"
    return None


def verify(roots: Op | Iterable[Op]) -> None:
    """Check every op reachable from ``roots``; raise ``VerifyError`` naming the first bad op.

    Raises:
        VerifyError: an op whose axes/dtype disagree with inference, whose arg has the
            wrong form, or whose dtype is unknown.
    """
    roots = [roots] if isinstance(roots, Op) else list(roots)
    for op in toposort(roots):
        if op.dtype not in ALL_DTYPES:
            raise VerifyError(f"{format_op(op)}: unknown dtype {op.dtype!r}")
        problem = _check_arg(op)
        if problem:
            raise VerifyError(f"{format_op(op)}: {problem}")
        try:
            axes, dtype = infer(op.op, op.src, op.arg, op.axes, op.dtype)
        except (NgraphError, TypeError, ValueError, AttributeError, IndexError, KeyError) as exc:
            # a malformed arg can trip the inference rule itself; report it as the op's fault
            raise VerifyError(f"{format_op(op)}: {type(exc).__name__}: {exc}") from exc
        if axes != op.axes or dtype != op.dtype:
            raise VerifyError(
                f"{format_op(op)}: inference gives {axes} {dtype}, the op says {op.axes} {op.dtype}"
            )
