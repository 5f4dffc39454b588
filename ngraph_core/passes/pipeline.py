"""The compiler pipeline, read top to bottom: what every transformer runs on a computation's graph.

Transformers call ``compile_graph`` and use only its result (``CompiledGraph``).
Optimizing rewrites (simplify, fold, CSE, fusion, memory planning) join
``GRAPH_PASSES`` as they are written; today the pipeline only linearizes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..ir import Op, OpType, verify
from .linearize import linearize

GraphPass = Callable[[list[Op]], list[Op]]

GRAPH_PASSES: list[tuple[str, GraphPass]] = []


@dataclass(frozen=True)
class CompiledGraph:
    """What a transformer executes: the results and every needed op in run order."""

    results: tuple[Op, ...]
    order: tuple[Op, ...]

    @property
    def variables(self) -> list[Op]:
        return [op for op in self.order if op.op is OpType.VARIABLE]


def compile_graph(results: Sequence[Op]) -> CompiledGraph:
    """Run ``GRAPH_PASSES`` over ``results``, then linearize (``NG_CHECK=1`` verifies after each pass)."""
    check = os.environ.get("NG_CHECK", "") not in ("", "0")
    roots = list(results)
    if check:
        verify(roots)
    for _name, graph_pass in GRAPH_PASSES:
        roots = graph_pass(roots)
        if check:
            verify(roots)
    return CompiledGraph(tuple(roots), tuple(linearize(roots)))
