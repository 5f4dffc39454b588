"""The compiler pipeline, read top to bottom: what a transformer runs on a computation's graph.

Transformers call ``compile_graph`` and use only its result (``CompiledGraph``).

``NG_DEBUG=1`` prints each pass's name and time, ``=2`` adds node counts, ``=3``
prints the graph after each pass. ``NG_CHECK=1`` runs ``verify`` after each pass.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..ir import Op, OpType, format_graph, toposort, verify
from ..pattern import PatternMatcher, graph_rewrite
from .bn_fold import fold_batch_norm
from .cse import cse
from .dce import dce
from .fold import fold
from .fusion import fuse_elementwise
from .layout import layout
from .linearize import control_dependencies, linearize, snapshot_reads, values_into_variables
from .memory import MemoryPlan, can_run_in_place, plan_memory
from .simplify import simplify

GraphPass = Callable[[list[Op]], list[Op]]

# the optimizing passes, in order. Layout runs before fusion: sinking transposes gives
# fusion longer chains, and nothing can look inside a fused op afterwards. (``decompose``
# is for backends without a kernel for some op; NumPy and CuPy have them all.)
OPTIMIZATIONS: list[tuple[str, GraphPass]] = [
    ("simplify", simplify),                  # algebraic identities, one rule per line
    ("fold", fold),                          # constant subgraphs evaluated at compile time
    ("fold_batch_norm", fold_batch_norm),    # inference batch norm -> conv/dot filter + bias
    ("cse", cse),                            # equal ops from different scopes merged
    ("dce", dce),                            # elements of sequential/doall with no effect dropped
    ("layout", layout),                      # needless transposes removed or sunk
    ("fuse_elementwise", fuse_elementwise),  # element-wise chains (+ a dot/conv head) -> one kernel
]


@dataclass(frozen=True)
class CompiledGraph:
    """What a transformer executes.

    Attributes:
        results: the ops to return.
        order: every needed op, in run order.
        snapshots: values the executor must copy when computed, for the ops after the first
            assign that read them (``linearize.snapshot_reads``).
        memory: where each temporary lives in the computation's arena (results are fresh
            arrays each call, outside it).
        into_variables: assign values the executor computes straight into their variable's
            storage (value -> variable; ``linearize.values_into_variables``).
    """

    results: tuple[Op, ...]
    order: tuple[Op, ...]
    snapshots: frozenset[Op]
    memory: MemoryPlan
    into_variables: dict[Op, Op]

    @property
    def variables(self) -> list[Op]:
        return [op for op in self.order if op.op is OpType.VARIABLE]


def _debug_level() -> int:
    try:
        return int(os.environ.get("NG_DEBUG", "0") or 0)
    except ValueError:
        return 0


def passes_for(optimize: bool = True, extra_rules: PatternMatcher | None = None) -> list[tuple[str, GraphPass]]:
    """The pass list a transformer runs: user rules first, then ``OPTIMIZATIONS`` (none if not ``optimize``)."""
    passes: list[tuple[str, GraphPass]] = []
    if extra_rules is not None and len(extra_rules):
        passes.append(("extra_rules", lambda roots: graph_rewrite(roots, extra_rules, name="extra_rules")))
    if optimize:
        passes.extend(OPTIMIZATIONS)
    return passes


def compile_graph(results: Sequence[Op], optimize: bool = True,
                  extra_rules: PatternMatcher | None = None,
                  dtype_of: Callable[[Op], str] = lambda op: op.dtype) -> CompiledGraph:
    """Run the passes over ``results``, linearize, and plan memory.

    Args:
        results: the ops the computation returns.
        optimize: False runs no optimizing pass and no in-place reuse (user rules still apply).
        extra_rules: a ``PatternMatcher`` of user rewrite rules, applied first.
        dtype_of: the dtype each op has on the transformer (sizes the memory plan).
    """
    level = _debug_level()
    check = os.environ.get("NG_CHECK", "") not in ("", "0")
    roots = list(results)
    if check:
        verify(roots)
    for name, graph_pass in passes_for(optimize, extra_rules):
        start = time.perf_counter()
        before = len(toposort(roots)) if level >= 2 else 0
        roots = graph_pass(roots)
        if check:
            verify(roots)
        if level >= 1:
            counts = f" {before} -> {len(toposort(roots))} ops" if level >= 2 else ""
            print(f"[ngraph] pass {name}: {1e3 * (time.perf_counter() - start):.2f} ms{counts}", file=sys.stderr)
        if level >= 3:
            print(format_graph(roots), file=sys.stderr)
    start = time.perf_counter()
    control = control_dependencies(toposort(roots))
    order = linearize(roots, control)
    into = values_into_variables(order, roots, can_run_in_place) if optimize else {}
    memory = plan_memory(order, roots, dtype_of=dtype_of, in_place=optimize, results_in_arena=False,
                         outside=into)
    if level >= 1:
        print(f"[ngraph] linearize + memory plan: {1e3 * (time.perf_counter() - start):.2f} ms, "
              f"{len(order)} steps, arena {memory.arena_bytes} B (no reuse {memory.unplanned_bytes} B)",
              file=sys.stderr)
    return CompiledGraph(tuple(roots), tuple(order), frozenset(snapshot_reads(order, control)), memory, into)
