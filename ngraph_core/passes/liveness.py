"""Liveness: when each arena buffer of a linearized computation holds a value (an analysis: graph -> data).

Which ops own a buffer (``ir/ops.py`` groups):

* ``OpGroup.NO_BUFFER`` ops own none. Variables, placeholders and constants live
  outside the arena; an ``assign`` has its variable's storage and a ``doall`` no value.
* A view (``OpGroup.VIEW``) has its source's memory: ``sequential`` its last source,
  ``custom_gradient`` its first (the forward value), every other view ``src[0]``.
  Following views down a chain ends at the op that owns the memory, or at an op
  outside the arena.
* Every other op owns one buffer, written at its step.

A buffer lives from the step that writes it to the last step that reads it, where
reading a view counts as reading the buffer under it. Buffers under a result live to
the end of the plan, because the executor copies the results out after the last step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..ir import Op, OpGroup, OpType, owns_buffer


@dataclass(frozen=True, slots=True)
class Interval:
    """The steps ``start..end`` (both included) during which a buffer holds a live value.

    Example:
        >>> Interval(2, 5).overlaps(Interval(5, 7))
        True
    """

    start: int
    end: int

    def overlaps(self, other: Interval) -> bool:
        """True when some step is in both intervals (the two buffers are live together)."""
        return self.start <= other.end and other.start <= self.end

    def __contains__(self, step: object) -> bool:
        return isinstance(step, int) and self.start <= step <= self.end



def aliased_source(op: Op) -> Op:
    """The source whose memory the view ``op`` shares (``sequential``: the last; others: the first).

    Example:
        >>> aliased_source(ng.sequential([a, b]).op) is b
    """
    assert op.op in OpGroup.VIEW and op.src, f"{op.op.value} is not a view"
    return op.src[-1] if op.op is OpType.SEQUENTIAL else op.src[0]


def buffer_owners(order: Sequence[Op]) -> dict[Op, Op | None]:
    """For every op of ``order``, the op whose arena buffer holds its value, or None (outside the arena).

    A buffer-owning op maps to itself, a view to the owner under its chain of views.

    Args:
        order: ops with every source before its consumers (a linearized plan).

    Returns:
        ``{op: owner or None}`` for each op of ``order``.
    """
    owners: dict[Op, Op | None] = {}
    for op in order:
        if owns_buffer(op):
            owners[op] = op
        elif op.op in OpGroup.VIEW:
            source = aliased_source(op)
            assert source in owners, f"{op.op.value} runs before its source {source.op.value}"
            owners[op] = owners[source]
        else:
            owners[op] = None
    return owners


def liveness(order: Sequence[Op], results: Sequence[Op]) -> dict[Op, Interval]:
    """The live interval of every buffer-owning op of a linearized plan.

    Args:
        order: the plan, each op after its sources (``passes.linearize``).
        results: the computation's results; the buffers under them live to the last step.

    Returns:
        ``{op: Interval(start, end)}`` for each op that owns an arena buffer, in ``order``'s
        order; steps index ``order``. An op read by nothing lives at its own step only.

    Raises:
        ValueError: a result is not in ``order``.

    Example:
        >>> order = linearize([y])  # x = placeholder, a = exp(x), y = a * 2.0
        >>> liveness(order, [y])[a]
        Interval(start=1, end=2)
    """
    owners = buffer_owners(order)
    starts: dict[Op, int] = {}
    ends: dict[Op, int] = {}
    for step, op in enumerate(order):
        if owners[op] is op:
            starts[op] = ends[op] = step
        for source in op.src:
            owner = owners[source]
            if owner is not None:
                ends[owner] = step
    last = len(order) - 1
    for result in results:
        if result not in owners:
            raise ValueError(
                f"liveness: result {result.op.value} {result.axes} is not in the order; hint: pass the compiled "
                "graph's results (CompiledGraph.results), which the passes may have rewritten"
            )
        owner = owners[result]
        if owner is not None:
            ends[owner] = last
    return {op: Interval(start, ends[op]) for op, start in starts.items()}
