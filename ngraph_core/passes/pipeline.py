"""The compiler pipelines, read top to bottom: what a transformer runs on a computation's graph.

Each backend has a pass list per mode: ``training`` (the default) and ``inference``,
which also folds inference batch norm into the conv/dot before it. ``passes_for(backend,
mode)`` gives the list; transformers call ``compile_graph`` and use only its result
(``CompiledGraph``). A transformer hands in its kernel table: constant folding computes
with it, and ``decompose`` rewrites the ops it has no kernel for (so no pass imports a
transformer).

``NG_DEBUG=1`` prints each pass's name and time, ``=2`` adds node counts, ``=3``
prints the graph after each pass. ``NG_CHECK=1`` runs ``verify`` after each pass.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import PipelineError
from ..ir import Op, OpType, format_graph, toposort, verify
from ..pattern import PatternMatcher, graph_rewrite
from .allreduce import bucket_allreduce
from .attention import fuse_attention
from .bn_fold import fold_batch_norm
from .cse import cse
from .dce import dce
from .decompose import DECOMPOSE, make_decompose
from .fold import ContextFactory, KernelEvaluator, KernelTable, fold
from .fusion import fuse_elementwise
from .layout import layout
from .linearize import control_dependencies, linearize, snapshot_reads, values_into_variables
from .memory import MemoryPlan, can_run_in_place, plan_memory
from .scan_layout import step_major_sequences
from .scan_prune import prune_scans
from .simplify import simplify

GraphPass = Callable[[list[Op]], list[Op]]

# The recipes. Layout runs before fusion: sinking transposes gives fusion longer chains,
# and nothing can look inside a fused op afterwards. Training graphs keep their batch
# norm as built (its statistics come from the batch, so there is nothing to fold).
TRAINING: tuple[str, ...] = (
    "simplify",          # algebraic identities, one rule per line
    "fold",              # constant subgraphs evaluated at compile time, with the backend's kernels
    "cse",               # equal ops from different scopes merged
    "dce",               # elements of sequential/doall with no effect dropped
    "prune_scans",       # scans pack the per-step values their gradient reads only when it is taken
    "bucket_allreduce",  # allreduces fused into buckets, started as backward makes them ready
    "decompose",         # ops the backend has no kernel for -> ops it has (none on numpy, cupy)
    "layout",            # needless transposes removed or sunk
    "scan_layout",       # element-wise scan sequences computed recurrent-axis-first (one block a step)
    "fuse_elementwise",  # element-wise chains (+ a dot/conv head) -> one kernel
)
INFERENCE: tuple[str, ...] = (
    "simplify",
    "fold",
    "fold_batch_norm",   # inference batch norm -> conv/dot filter + bias
    "cse",
    "dce",
    "prune_scans",
    "bucket_allreduce",
    "decompose",
    "layout",
    "scan_layout",
    "fuse_elementwise",
)

# backend -> mode -> pass names. NumPy and CuPy run the same plans; a backend with
# other needs (fewer kernels, its own fusion) gets its own lists here. NumPy first fuses
# attention (on the graph as built; it keeps the composite wherever the backward reads
# the weights, so it runs in both modes): its tiled kernel pays off on CPUs only.
PIPELINES: dict[str, dict[str, tuple[str, ...]]] = {
    "numpy": {"training": ("fuse_attention", *TRAINING), "inference": ("fuse_attention", *INFERENCE)},
    "cupy": {"training": TRAINING, "inference": INFERENCE},
}
MODES = ("training", "inference")

# passes a graph needs to run at all on its backend: they run even with optimize=False
LEGALIZING = frozenset({"decompose"})


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


def _choose(what: str, value: str, choices: Sequence[str], hint: str) -> None:
    if value not in choices:
        raise PipelineError(
            f"compile_graph: expected a {what} in {', '.join(map(repr, choices))}, received {value!r}; hint: {hint}"
        )


def _make_pass(name: str, kernels: KernelTable | None, kernel_context: ContextFactory | None) -> GraphPass | None:
    """The pass called ``name`` for a backend with ``kernels``; None where it has nothing to do."""
    if name == "fold":  # folding computes with the backend's kernels: without them, nothing folds
        if kernels is None or kernel_context is None:
            return None
        return functools.partial(fold, evaluator=KernelEvaluator(kernels, kernel_context))
    if name == "decompose":  # only for ops that have a rule and no kernel
        if kernels is None or not any(rule[0].ops - set(kernels) for rule in DECOMPOSE.rules):
            return None
        return make_decompose(frozenset(kernels))
    return {
        "fuse_attention": fuse_attention,
        "simplify": simplify,
        "fold_batch_norm": fold_batch_norm,
        "cse": cse,
        "dce": dce,
        "prune_scans": prune_scans,
        "bucket_allreduce": bucket_allreduce,
        "layout": layout,
        "scan_layout": step_major_sequences,
        "fuse_elementwise": fuse_elementwise,
    }[name]


def passes_for(backend: str = "numpy", mode: str = "training", optimize: bool = True,
               extra_rules: PatternMatcher | None = None, kernels: KernelTable | None = None,
               kernel_context: ContextFactory | None = None) -> list[tuple[str, GraphPass]]:
    """The named passes ``backend`` runs on a ``mode`` graph: user rules first, then its recipe.

    Args:
        backend: a key of ``PIPELINES`` (a transformer passes its name).
        mode: ``"training"`` or ``"inference"`` (the latter also folds inference batch norm).
        optimize: False keeps only the user rules and the passes in ``LEGALIZING``.
        extra_rules: a ``PatternMatcher`` of user rewrite rules, applied first.
        kernels: the backend's kernel table; without it (and ``kernel_context``) there is no
            constant folding and no decomposition.
        kernel_context: builds the context the kernel factories take, from ``(xp, dtype_of, generator_for)``.

    Returns:
        ``(name, pass)`` pairs in run order; passes with nothing to do on this backend are left out.

    Raises:
        PipelineError: an unknown backend or mode.
        VerifyError: an op of ``results``' graph whose axes, dtype or arg disagree with inference
            (an index, slice or length outside its axes among them).

    Example:
        >>> [name for name, _ in passes_for("numpy", "inference")][:3]  # ['simplify', 'fold_batch_norm', 'cse']
    """
    _choose("backend", backend, sorted(PIPELINES),
            "add the backend's pass lists to PIPELINES in ngraph_core/passes/pipeline.py")
    _choose("mode", mode, MODES, "pass mode='training' or mode='inference' to t.computation")
    passes: list[tuple[str, GraphPass]] = []
    if extra_rules is not None and len(extra_rules):
        passes.append(("extra_rules", lambda roots: graph_rewrite(roots, extra_rules, name="extra_rules")))
    for name in PIPELINES[backend][mode]:
        graph_pass = _make_pass(name, kernels, kernel_context) if optimize or name in LEGALIZING else None
        if graph_pass is not None:
            passes.append((name, graph_pass))
    return passes


def compile_graph(results: Sequence[Op], optimize: bool = True,
                  extra_rules: PatternMatcher | None = None,
                  dtype_of: Callable[[Op], str] = lambda op: op.dtype,
                  backend: str = "numpy", mode: str = "training",
                  kernels: KernelTable | None = None,
                  kernel_context: ContextFactory | None = None) -> CompiledGraph:
    """Run ``backend``'s ``mode`` passes over ``results``, linearize, and plan memory.

    Args:
        results: the ops the computation returns.
        optimize: False runs no optimizing pass and no in-place reuse (user rules still apply).
        extra_rules: a ``PatternMatcher`` of user rewrite rules, applied first.
        dtype_of: the dtype each op has on the transformer (sizes the memory plan).
        backend: whose pass lists to run (``PIPELINES``).
        mode: ``"training"`` or ``"inference"``.
        kernels: the backend's kernel table (constant folding and decomposition use it).
        kernel_context: builds the context the kernel factories take.

    Returns:
        the ``CompiledGraph`` a transformer executes.

    Raises:
        PipelineError: an unknown backend or mode.

    Example:
        >>> graph = compile_graph([loss, update], backend="numpy", mode="training",
        ...                       kernels=KERNELS, kernel_context=KernelContext)
    """
    level = _debug_level()
    check = os.environ.get("NG_CHECK", "") not in ("", "0")
    roots = list(results)
    # Always: the kernels (compiled loops without bounds checks among them) take their loop bounds,
    # offsets and strides from the graph's axes and args, so a graph reaches them only verified (an op
    # made with Op(...) directly skips the inference that make() and ng.deserialize run). ~10 ms for a
    # 1,500-op ResNet-20 training graph. NG_CHECK=1 verifies after every pass too.
    verify(roots)
    for name, graph_pass in passes_for(backend, mode, optimize, extra_rules, kernels, kernel_context):
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
