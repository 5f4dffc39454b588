"""Validity rules of the IR and ``verify(graph)``.

``verify`` re-derives every op's axes and dtype from its sources with the
inference table and checks each ``arg``'s form with the class that owns it
(``ir/args.py`` ``ARG_TYPES``). Tests run it after every pass, and so does the
compiler when ``NG_CHECK=1``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import NgraphError, VerifyError
from .args import ARG_TYPES
from .dtypes import ALL_DTYPES
from .graph import walk
from .infer import infer
from .node import Op, format_op


def verify(roots: Op | Iterable[Op]) -> None:
    """Check every op reachable from ``roots``; raise ``VerifyError`` naming the first bad op.

    Args:
        roots: one op or a list of ops; the ops below them and inside their sub-graphs are checked.

    Raises:
        VerifyError: an op whose axes/dtype disagree with inference, whose arg has the
            wrong form, or whose dtype is unknown.

    Example:
        >>> ng.verify([loss, *updates])
    """
    roots = [roots] if isinstance(roots, Op) else list(roots)
    for op in walk(roots):  # sub-graphs too
        if op.dtype not in ALL_DTYPES:
            raise VerifyError(f"{format_op(op)}: unknown dtype {op.dtype!r}")
        problem = ARG_TYPES[op.op].check(op)  # the arg's own class knows its form
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
