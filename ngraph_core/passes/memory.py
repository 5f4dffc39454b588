"""The memory plan: every temporary of a computation packed into one arena (an analysis: graph -> data).

``plan_memory`` takes a linearized plan and returns a ``MemoryPlan``: a byte offset in
one arena for each buffer-owning op (``passes/liveness.py`` says which ops own one).

1. **Liveness** gives each buffer its interval of steps.
2. **In place**: an op that computes position by position (``OpGroup.IN_PLACE``) may
   write over the buffer of a source that dies at this very step, when the two have
   the same shape and dtype, the source's buffer is not under a result, and no other
   source of the op reads that buffer through a view (``x + transpose(x)`` must not
   overwrite ``x`` while reading it transposed; the very same source read twice, as in
   ``x * x``, is fine for a position-wise kernel). The op and its source then form one
   buffer, live over both intervals.
3. **Placement**, best fit: buffers are placed one by one (largest first; also tried
   by start step, the smaller arena wins) at the aligned gap, between the buffers
   already placed whose intervals overlap this one, that fits it most tightly, or
   after all of them. Two buffers live at one step never share a byte.

The executor carves each op's output out of one arena allocation:
``arena[offset : offset + nbytes].view(dtype).reshape(shape)``. ``unplanned_bytes``, the
no-reuse figure, sums the same buffers each rounded up to the alignment, as separate
aligned allocations would take; so the arena never exceeds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..ir import Op, OpGroup, OpType
from .liveness import Interval, buffer_owners, liveness

MiB = 1 << 20
UNITS = (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10), ("B", 1))


def format_bytes(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps the figure at least 1.

    Example:
        >>> format_bytes(3 * 2**20 + 2**18)
        '3.25 MiB'
    """
    name, size = next((u for u in UNITS if abs(n) >= u[1]), UNITS[-1])
    return f"{n} B" if size == 1 else f"{n / size:.2f} {name}"


def nbytes(op: Op, dtype_of: Callable[[Op], str] = lambda op: op.dtype) -> int:
    """Bytes of ``op``'s value: its axes' lengths times the item size of ``dtype_of(op)`` (0-d: one item)."""
    return math.prod(op.axes.lengths) * np.dtype(dtype_of(op)).itemsize


def can_run_in_place(op: Op) -> bool:
    """True for ops whose kernel may write over a source it reads (``OpGroup.IN_PLACE``).

    A ``fused`` op with a head (``dot`` or ``conv``) is excluded: it writes the head's value
    into its output before the epilogue reads the other sources.
    """
    if op.op is OpType.FUSED and getattr(op.arg, "head", None) is not None:
        return False
    return op.op in OpGroup.IN_PLACE


def _align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


@dataclass(frozen=True)
class MemoryReport:
    """The figures of a memory plan (what ``computation.memory_report()`` returns).

    Attributes:
        arena_bytes: size of the one arena holding every temporary.
        unplanned_bytes: what the same buffers take with no reuse (each aligned, none shared).
        persistent_bytes: bytes of the variables the computation reads or writes (outside the arena).
        live_bytes: per step of the plan, bytes of arena buffers live at that step.
        peak_live_bytes: the largest ``live_bytes`` figure (a lower bound of ``arena_bytes``).
        buffers: number of buffer-owning ops.
        in_place: how many of them write over a source's buffer.
        workspace_bytes: the kernels' shared scratch (im2col blocks, padded copies), outside the
            arena; 0 from a plan alone, filled in by ``computation.memory_report()``.
        subgraph_bytes: the arenas and workspaces of the sub-graphs the computation calls
            (``ng.call``; each compiled once per transformer), outside this arena; 0 from a plan alone.
    """

    arena_bytes: int
    unplanned_bytes: int
    persistent_bytes: int
    live_bytes: list[int]
    peak_live_bytes: int
    buffers: int
    in_place: int
    workspace_bytes: int = 0
    subgraph_bytes: int = 0

    @property
    def reuse_ratio(self) -> float:
        """``unplanned_bytes / arena_bytes`` (1.0 for an empty arena): how much reuse saves."""
        return self.unplanned_bytes / self.arena_bytes if self.arena_bytes else 1.0

    def as_dict(self) -> dict[str, object]:
        """The figures as plain data (for JSON, benchmarks)."""
        return {
            "arena_bytes": self.arena_bytes, "unplanned_bytes": self.unplanned_bytes,
            "persistent_bytes": self.persistent_bytes, "peak_live_bytes": self.peak_live_bytes,
            "buffers": self.buffers, "in_place": self.in_place, "reuse_ratio": self.reuse_ratio,
            "workspace_bytes": self.workspace_bytes, "subgraph_bytes": self.subgraph_bytes,
            "live_bytes": list(self.live_bytes),
        }

    def __str__(self) -> str:
        def row(label: str, n: int, note: str) -> str:
            return f"{label:<10}{n / MiB:10.3f} MiB  {n:>14,} B  {note}"

        return "\n".join([
            row("arena", self.arena_bytes, f"{self.buffers} buffers, {self.in_place} written in place"),
            row("no reuse", self.unplanned_bytes, f"reuse ratio {self.reuse_ratio:.2f}x"),
            row("peak live", self.peak_live_bytes, f"over {len(self.live_bytes)} steps"),
            row("variables", self.persistent_bytes, "persistent, outside the arena"),
            row("workspace", self.workspace_bytes, "kernel scratch, shared, outside the arena"),
            *([row("subgraphs", self.subgraph_bytes, "called sub-graphs' arenas and workspaces")]
              if self.subgraph_bytes else []),
        ])


@dataclass(frozen=True, eq=False)
class MemoryPlan:
    """Where each buffer of a linearized computation lives in one arena (made by ``plan_memory``).

    Attributes:
        order: the plan the offsets are for (steps index it).
        results: the computation's results.
        offsets: byte offset in the arena of each buffer-owning op.
        sizes: bytes of each buffer-owning op's value.
        intervals: liveness of each buffer-owning op's own value.
        in_place: op -> the source whose buffer it writes over (same offset as that source).
        arena_bytes, unplanned_bytes, persistent_bytes, live_bytes, peak_live_bytes: see ``MemoryReport``.
        alignment: every offset is a multiple of it.
    """

    order: tuple[Op, ...]
    results: tuple[Op, ...]
    offsets: dict[Op, int]
    sizes: dict[Op, int]
    intervals: dict[Op, Interval]
    in_place: dict[Op, Op]
    arena_bytes: int
    unplanned_bytes: int
    persistent_bytes: int
    live_bytes: list[int] = field(repr=False)
    peak_live_bytes: int
    alignment: int

    @property
    def op_bytes(self) -> list[int]:
        """Per step, bytes of the buffer the step's op writes (0 for views and ops outside the arena)."""
        return [self.sizes.get(op, 0) for op in self.order]

    def report(self) -> MemoryReport:
        """The plan's figures (arena, no reuse, persistent, live bytes per step)."""
        return MemoryReport(
            arena_bytes=self.arena_bytes, unplanned_bytes=self.unplanned_bytes,
            persistent_bytes=self.persistent_bytes, live_bytes=list(self.live_bytes),
            peak_live_bytes=self.peak_live_bytes, buffers=len(self.offsets), in_place=len(self.in_place),
        )

    def __str__(self) -> str:
        return str(self.report())


def plan_memory(
    order: Sequence[Op],
    results: Sequence[Op],
    dtype_of: Callable[[Op], str] = lambda op: op.dtype,
    alignment: int = 64,
    in_place: bool = True,
    may_run_in_place: Callable[[Op], bool] = can_run_in_place,
    results_in_arena: bool = True,
    outside: Collection[Op] = (),
) -> MemoryPlan:
    """Pack every buffer of the linearized plan ``order`` into one arena (see the module docstring).

    Args:
        order: the plan, each op after its sources (``passes.linearize``).
        results: the computation's results (their buffers live to the end and are never overwritten).
        dtype_of: the dtype an op's value has on the transformer (float32 may run as float64).
        alignment: every offset is a multiple of this many bytes (a positive int).
        in_place: let ops write over a dying source's buffer.
        may_run_in_place: which ops' kernels may write over a source they read.
        results_in_arena: False when the executor writes each buffer-owning result into a
            fresh array of its own (handed to the user): those results then get no offset,
            never run in place, and count in none of the figures. Buffers that results
            *view* stay in the arena, live to the end.
        outside: more buffer-owning ops whose output the executor puts elsewhere (an
            assign's value written straight into its variable): no offset, no figures.

    Returns:
        A ``MemoryPlan``.

    Raises:
        ValueError: ``alignment`` is not a positive int, or a result is not in ``order``.

    Example:
        >>> order = linearize([loss, update])
        >>> plan = plan_memory(order, [loss, update], dtype_of=transformer.dtype_of)
        >>> print(plan)  # arena vs no reuse, in MiB
    """
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
        raise ValueError(f"plan_memory: expected a positive int alignment, received {alignment!r}")
    order = tuple(order)
    intervals = liveness(order, results)
    elsewhere = set(outside) | (set() if results_in_arena else set(results))
    if elsewhere:
        intervals = {op: interval for op, interval in intervals.items() if op not in elsewhere}
    sizes = {op: nbytes(op, dtype_of) for op in intervals}
    reuse = _in_place(order, results, intervals, dtype_of, may_run_in_place) if in_place else {}

    # one arena buffer per chain of in-place ops, live from the chain's first write to its last read
    root: dict[Op, Op] = {}
    spans: dict[Op, Interval] = {}
    for op, interval in intervals.items():
        r = root[op] = root[reuse[op]] if op in reuse else op
        spans[r] = Interval(spans[r].start, interval.end) if r in spans else interval
    buffers = list(spans)
    offsets_of_root = _best_fit([spans[b] for b in buffers], [sizes[b] for b in buffers], alignment)
    offset_by_root = dict(zip(buffers, offsets_of_root, strict=True))
    offsets = {op: offset_by_root[root[op]] for op in intervals}
    arena = max((offset_by_root[b] + sizes[b] for b in buffers), default=0)

    live = np.zeros(len(order) + 1, dtype=np.int64)
    for b in buffers:
        live[spans[b].start] += sizes[b]
        live[spans[b].end + 1] -= sizes[b]
    live_bytes = [int(v) for v in np.cumsum(live)[: len(order)]]
    variables = {op for op in order if op.op is OpType.VARIABLE}
    return MemoryPlan(
        order=order, results=tuple(results), offsets=offsets, sizes=sizes, intervals=intervals, in_place=reuse,
        arena_bytes=arena,
        unplanned_bytes=sum(_align_up(s, alignment) for s in sizes.values()),
        persistent_bytes=sum(nbytes(v, dtype_of) for v in variables),
        live_bytes=live_bytes, peak_live_bytes=max(live_bytes, default=0), alignment=alignment,
    )


def _in_place(order: Sequence[Op], results: Sequence[Op], intervals: dict[Op, Interval],
              dtype_of: Callable[[Op], str],
              may_run_in_place: Callable[[Op], bool]) -> dict[Op, Op]:
    """op -> the source whose buffer it may write over (the rules in the module docstring)."""
    owners = buffer_owners(order)
    under_results = {owners[r] for r in results} - {None}
    chain: dict[Op, Op] = {}  # buffer-owning op -> first op of its in-place chain
    reuse: dict[Op, Op] = {}
    for step, op in enumerate(order):
        if op not in intervals:
            continue
        chain[op] = op
        if not may_run_in_place(op):
            continue
        for source in dict.fromkeys(op.src):
            if (owners[source] is not source or source not in intervals or source in under_results
                    or intervals[source].end != step
                    or source.axes.lengths != op.axes.lengths or dtype_of(source) != dtype_of(op)):
                continue
            # reading the same buffer through a different view (a transpose, a slice) while overwriting it
            others = {chain.get(owners[s]) for s in op.src if s is not source}
            if chain[source] in others:
                continue
            reuse[op] = source
            chain[op] = chain[source]
            break
    return reuse


def _best_fit(spans: Sequence[Interval], sizes: Sequence[int], alignment: int) -> list[int]:
    """Offsets for buffers live over ``spans``: the smaller arena of two placement orders."""
    n = len(spans)
    if n == 0:
        return []
    by_size = sorted(range(n), key=lambda i: (-sizes[i], spans[i].start, i))
    by_start = sorted(range(n), key=lambda i: (spans[i].start, -sizes[i], i))
    best: list[int] | None = None
    best_arena = 0
    for placement in (by_size, by_start):
        offsets = _place(spans, sizes, placement, alignment)
        arena = max(o + s for o, s in zip(offsets, sizes, strict=True))
        if best is None or arena < best_arena:
            best, best_arena = offsets, arena
    assert best is not None
    return best


def _place(spans: Sequence[Interval], sizes: Sequence[int], placement: Sequence[int], alignment: int) -> list[int]:
    """Place buffers in ``placement`` order, each in the tightest aligned gap among those live with it."""
    n = len(spans)
    starts = np.array([s.start for s in spans], dtype=np.int64)
    ends = np.array([s.end for s in spans], dtype=np.int64)
    size_arr = np.array(sizes, dtype=np.int64)
    offsets = np.zeros(n, dtype=np.int64)
    placed = np.zeros(n, dtype=bool)
    for i in placement:
        size = int(size_arr[i])
        clash = placed & (starts <= ends[i]) & (ends >= starts[i]) & (size_arr > 0)
        lo = offsets[clash]
        offset = 0
        if lo.size and size > 0:
            order = np.argsort(lo, kind="stable")
            lo = lo[order]
            hi = lo + size_arr[clash][order]
            # a gap opens at the aligned end of everything below it and closes at the next buffer
            cursor = np.concatenate(([0], _align_array(np.maximum.accumulate(hi), alignment)))
            gaps = lo - cursor[:-1]
            fits = np.flatnonzero(gaps >= size)
            offset = int(cursor[fits[np.argmin(gaps[fits])]]) if fits.size else int(cursor[-1])
        offsets[i] = offset
        placed[i] = True
    return [int(o) for o in offsets]


def _align_array(values: np.ndarray, alignment: int) -> np.ndarray:
    return -(-values // alignment) * alignment
