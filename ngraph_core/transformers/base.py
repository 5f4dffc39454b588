"""The transformer protocol, the executor shared by the array backends, and the registry.

A transformer owns the variables (initialised once, shared by all its
computations) and compiles computations: ``compile_graph`` (the pass pipeline)
gives an ordered op list, every op gets a kernel from ``kernels.KERNELS``, and the
plan becomes straight-line Python source — one line per op — that ``exec`` turns
into a function. ``computation.source`` shows that source.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import (
    AxesError,
    DTypeError,
    FeedError,
    MemoryBudgetError,
    NgraphError,
    UnsupportedOpError,
)
from ..ir import (
    Graph,
    Op,
    OpType,
    changed_since,
    consumers,
    format_axes,
    format_op,
    meta_generation,
    owns_buffer,
    toposort,
    walk,
)
from ..ir import subgraphs as subgraphs_of
from ..ir.names import printable
from ..memory_budget import (
    check_bytes,
    format_bytes,
    physical_memory,
    resolve_max_bytes,
    tensor_bytes,
    typed_out_of_memory,
)
from ..passes import CompiledGraph, MemoryPlan, MemoryReport, compile_graph
from ..pattern import PatternMatcher
from ..selectors import TAP_ATTR, tap_value
from .kernels import KERNELS, KernelContext, Workspace
from .kernels.movement import slice_index


class Computation:
    """A compiled, callable computation (made by ``Transformer.computation``).

    Call it with one array per placeholder, in the order given at compile time.
    It returns one NumPy array for a single result, a tuple for a list of results,
    and None for a ``doall`` result.

    Attributes:
        source: the generated plan as Python source.
        graph: the compiled graph (results and op order).
    """

    def __init__(self, transformer: Transformer, results: Sequence[Op], placeholders: Sequence[Op],
                 single: bool, mode: str = "training", on_device: bool = False,
                 into: tuple[tuple[int, bool], ...] = ()) -> None:
        self.transformer = transformer
        # results a caller offers to hand a buffer for, as (result index, that buffer is C-contiguous);
        # ``accepted_into`` says which the plan writes straight into (``Transformer._build``)
        self.into = into
        self.accepted_into: tuple[int, ...] = ()
        self.placeholders = tuple(placeholders)
        self.single = single
        self.on_device = on_device  # a sub-graph's results stay backend arrays (its caller copies them at once)
        self.results = tuple(results)
        self.mode = mode
        self.recompiles = 0
        self._compile()

    def _compile(self) -> None:
        """Run the pipeline and build the plan; remember the metadata generation it saw."""
        transformer = self.transformer
        self._generation = meta_generation()
        self._ops = tuple(walk(self.results))  # what the plan depends on (metadata included)
        # ops with debug taps (Selection.tap) become hidden extra results, so no pass fuses their values away
        tapped = [op for op in toposort(self.results) if op.meta.attrs.get(TAP_ATTR)]
        results = list(self.results) + [op for op in tapped if op not in self.results]
        self.graph: CompiledGraph = compile_graph(results, transformer.optimize, transformer.extra_rules,
                                                  transformer.dtype_of, backend=transformer.name, mode=self.mode,
                                                  kernels=KERNELS, kernel_context=KernelContext)
        transformer.check_memory(self.graph)
        self.workspace = Workspace(transformer.xp)
        self.source, self._fn = transformer._build(self.graph, self.placeholders, self.workspace, self.on_device,
                                                   self.into)
        self.accepted_into = getattr(self._fn, "accepted_into", ())
        if tapped:
            self._fn = self._with_taps(self._fn, [(results.index(op), op) for op in tapped])
        else:  # what a kernel may compile a sub-graph's plan from (``compiled_scan``); a tapped plan runs as is
            self._fn.compiled_graph = self.graph

    def _with_taps(self, fn: Callable[..., tuple], taps: list[tuple[int, Op]]) -> Callable[..., tuple]:
        """``fn`` followed by each tapped op's taps, called with (name, a NumPy copy of its value);
        returns the user's results only."""
        count, to_numpy = len(self.results), self.transformer.to_numpy
        calls = [(j, op.name, op.meta.attrs[TAP_ATTR]) for j, op in taps]

        def run(*values: Any) -> tuple:
            out = fn(*values)
            for j, name, fns in calls:
                for tap in fns:
                    tap(name, tap_value(out[j], to_numpy))
            return out[:count]

        return run

    @property
    def stale(self) -> bool:
        """True when the metadata of an op this computation was compiled from changed since
        (``ng.update_meta``: a label, an attribute, a name); the next call recompiles."""
        return meta_generation() != self._generation and bool(changed_since(self._ops, self._generation))

    def __call__(self, *values: Any) -> Any:
        if self.transformer.closed:
            raise NgraphError(
                f"computation: its {self.transformer.name} transformer is closed (its variables are gone); "
                "hint: compile the computation again on an open transformer"
            )
        if meta_generation() != self._generation:
            if changed_since(self._ops, self._generation):
                self._compile()
                self.recompiles += 1
            else:
                self._generation = meta_generation()
        if len(values) != len(self.placeholders):
            names = ", ".join(p.name for p in self.placeholders) or "none"
            raise FeedError(
                f"computation: expected {len(self.placeholders)} input(s) ({names}), received {len(values)}; "
                "hint: pass one array per placeholder, in the order given to t.computation"
            )
        try:  # inline, not typed_out_of_memory: a with block costs a fraction of a microsecond every call
            out = self._fn(*values)
        except MemoryError as exc:  # a kernel's allocation failed: the machine (or a ulimit) has no room
            if isinstance(exc, MemoryBudgetError):
                raise
            raise MemoryBudgetError(f"computation: out of memory while running ({exc}); hint: a smaller batch, "
                                    "or more memory") from None
        return out[0] if self.single else out

    @property
    def memory_plan(self) -> MemoryPlan:
        """Where each temporary lives in this computation's arena (``ng.viz.memory_plot`` draws it)."""
        return self.graph.memory

    @property
    def workspace_bytes(self) -> int:
        """Bytes of the scratch buffer the kernels share (im2col matrices, padded copies), outside the arena."""
        return self.workspace.nbytes

    def memory_report(self) -> MemoryReport:
        """Arena bytes, bytes without reuse, persistent (variable) bytes, live bytes per step and
        the kernels' scratch workspace.

        Example:
            >>> print(f.memory_report())  # arena vs no reuse, with the reuse ratio
        """
        subgraphs = {g for op in self.graph.order for g in subgraphs_of(op)}
        inner = 0
        for key, comp in self.transformer._subgraphs.items():  # compiled when our kernels were made
            if (key[0] if isinstance(key, tuple) else key) in subgraphs:
                report = comp.memory_report()
                inner += report.arena_bytes + report.workspace_bytes + report.subgraph_bytes
        return dataclasses.replace(self.graph.memory.report(), workspace_bytes=self.workspace_bytes,
                                   subgraph_bytes=inner)

    def __repr__(self) -> str:
        return f"<Computation of {len(self.graph.order)} ops on {self.transformer.name}>"


class Transformer:
    """Base of the array-module backends (NumPy, CuPy). Use ``make_transformer`` to get one.

    Args:
        float_dtype: run every float32 op in this dtype (``"float64"`` for gradient checks).
        seed: seeds the random ops that have no seed of their own.
        optimize: run the optimizing passes (``passes/pipeline.py``); False compiles the graph as built.
        extra_rules: a ``PatternMatcher`` (or a list of ``(Pat, fn)`` rules) of user rewrites,
            applied to every computation before the optimizing passes.
        profile: time every kernel call into ``profile_counters`` (``ng.inference.profile`` reads
            them); the generated source is the same, only the kernels bound to it are wrapped.
        communicator: the ``ng.distributed`` communicator that collective ops (allreduce,
            broadcast) run on; None: ``ng.distributed.current()`` when a computation is compiled.
        max_bytes: the most bytes one tensor (a variable, a temporary, a result) may take; a computation
            with a larger one is refused when compiled (``MemoryBudgetError``), before anything is
            allocated. None: ``NG_MAX_BYTES``, else 1 GiB (``ngraph_core/memory_budget.py``). The arena
            and the new variables together may not exceed the machine's memory (or ``max_bytes``, if larger).
    """

    name = "base"
    xp: Any = None
    # kernels this backend replaces (a backend overrides only what differs from kernels.KERNELS)
    kernel_overrides: dict[OpType, Any] = {}
    # the element-wise ops this backend compiles as steps of its generated fused loops (numba, CUDA); a fused
    # program with any other step runs the shared kernel. Read by ngraph_core/catalog.py, not by the executor
    compiled_elementwise: frozenset[OpType] = frozenset()
    # the im2col the convolution kernels use (None: the shared one; see KernelContext.im2col)
    im2col: Any = None
    # what a convolution kernel runs instead of im2col (None: im2col; see KernelContext.conv_variant)
    conv_variant: Any = None
    # how kernels split sections and run GEMMs (None: serial, xp.matmul; see KernelContext.runner)
    runner: Any = None

    def __init__(self, float_dtype: str = "float32", seed: int | None = 0, optimize: bool = True,
                 extra_rules: Any = None, profile: bool = False, communicator: Any = None,
                 max_bytes: int | None = None, **options: Any) -> None:
        if options:
            raise NgraphError(f"{self.name} transformer: unknown option(s) {sorted(options)}")
        self.max_bytes = resolve_max_bytes(max_bytes, f"{self.name} transformer: max_bytes")
        if float_dtype not in ("float32", "float64"):
            raise DTypeError(
                f"{self.name} transformer: float_dtype must be float32 or float64, received {float_dtype!r}"
            )
        self.float_dtype = float_dtype
        self.profile = profile
        self.communicator = communicator
        # op -> [nanoseconds, calls, output bytes], filled by kernels wrapped when profile=True
        self.profile_counters: dict[Op, list[int]] = {}
        self.seed = seed
        self.optimize = optimize
        self.extra_rules = extra_rules if extra_rules is None or isinstance(extra_rules, PatternMatcher) \
            else PatternMatcher(extra_rules)
        self._storage: dict[Op, Any] = {}
        self._computations: list[Computation] = []
        # a body -> its plan; (body, what it writes into) -> the plan that takes those buffers
        self._subgraphs: dict[Graph | tuple[Graph, tuple], Computation] = {}
        self._building: list[bool] = []  # the blas_threads of the computations being built, innermost last
        self._closed = False
        self._generators: dict[str, Any] = {}
        self._pending_random_state: dict[str, Any] = {}

    # -- context manager ------------------------------------------------------------------
    def __enter__(self) -> Transformer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release the variables' storage."""
        self._storage.clear()
        self._computations.clear()
        self._subgraphs.clear()
        self._closed = True

    @property
    def closed(self) -> bool:
        """True after ``close()``: its computations refuse to run."""
        return self._closed

    # -- public ------------------------------------------------------------------------------
    def computation(self, results: Op | Sequence[Op], *placeholders: Op, mode: str = "training") -> Computation:
        """Compile ``results`` as a function of ``placeholders``.

        Args:
            results: an op, or a list of ops, to return.
            *placeholders: the inputs, in the order the computation takes them.
            mode: ``"training"`` (default) or ``"inference"``: which of this backend's pass
                lists compiles it (``passes/pipeline.py``); inference also folds batch norm
                into the conv/dot before it.

        Raises:
            NgraphError: a result that needs a placeholder not listed.
            PipelineError: an unknown mode.

        Example:
            >>> f = t.computation([loss, update], X, Y)
            >>> loss_value, _ = f(x_batch, y_batch)
        """
        single = isinstance(results, Op)
        results = [results] if single else list(results)
        for r in list(results) + list(placeholders):
            if not isinstance(r, Op):
                raise NgraphError(f"computation: expected ops, received {type(r).__name__}")
        for p in placeholders:
            if p.op is not OpType.PLACEHOLDER:
                raise FeedError(f"computation: expected placeholders after the results, received {format_op(p)}; "
                                "hint: list the graph's inputs (ng.placeholder ops)")
        twice = sorted({p.name for p in placeholders if placeholders.count(p) > 1})
        if twice:
            raise FeedError(f"computation: placeholder(s) {', '.join(twice)} listed more than once; "
                            "hint: list each input once")
        comp = Computation(self, results, placeholders, single, mode)
        self._computations.append(comp)
        return comp

    def read_variable(self, var: Op) -> np.ndarray:
        """A NumPy copy of ``var``'s current value (initialising it if needed)."""
        return self.to_numpy(self._variable(var)).copy()

    def write_variable(self, var: Op, value: Any) -> None:
        """Overwrite ``var``'s value in place (shape must match its axes)."""
        storage = self._variable(var)
        # an array of any backend keeps its own memory until the copy below (a CuPy array stays on its device)
        array = value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)
        if array.shape != storage.shape:
            raise AxesError(
                f"write_variable {var.name}: expected shape {storage.shape} for axes {format_axes(var.axes)}, "
                f"received {array.shape}"
            )
        storage[...] = self.xp.asarray(array, dtype=storage.dtype)

    def _subgraph(self, graph: Graph, into: tuple[tuple[int, bool], ...] = ()) -> Callable[..., tuple]:
        """``graph`` compiled once on this transformer (its variables are the transformer's).

        ``into`` lists the roots the caller can hand a buffer for, as (root index, that buffer is
        C-contiguous); the function then takes one more argument per root it accepts (its
        ``accepted_into``, in order), and writes those roots' values there instead of into fresh arrays.
        """
        key = (graph, into) if into else graph
        comp = self._subgraphs.get(key)
        if comp is None or comp.stale:  # stale: an op of the body changed its metadata (a tap, say)
            comp = self._subgraphs[key] = Computation(self, graph.roots, graph.params, single=False, on_device=True,
                                                      into=into)
        fn = comp._fn
        if comp.accepted_into and getattr(fn, "accepted_into", None) != comp.accepted_into:
            fn.accepted_into = comp.accepted_into  # a tap wrapper passes the extra buffers through
        return fn

    # -- backend hooks ---------------------------------------------------------------------
    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def dtype_of(self, op: Op) -> str:
        return self.float_dtype if op.dtype == "float32" else op.dtype

    # -- random streams ------------------------------------------------------------------------
    def generator_for(self, op: Op) -> Any:
        """The generator a random op draws from, owned by the transformer (so a recompile does not
        restart it, and ``random_state`` can save it).

        Ops without a seed share one stream seeded by the transformer's ``seed``: draws follow the
        order computations run in, so a run is reproducible and a checkpoint can resume it
        exactly. An op with its own ``seed`` gets a stream of its own, keyed by that seed and its
        scope path and name, so the same layer's op in each per-batch-size graph shares one stream.
        """
        info = op.arg
        key = _SHARED if info.seed is None else \
            f"seed={info.seed} {'/'.join(map(str, op.meta.scope))} {op.meta.name or op.op.value}"
        gen = self._generators.get(key)
        if gen is None:
            seed = self.seed or 0 if info.seed is None else info.seed
            gen = self._generators[key] = self.xp.random.default_rng(seed)
            if key in self._pending_random_state:
                self._set_generator_state(gen, self._pending_random_state.pop(key), key)
        return gen

    def random_state(self) -> dict[str, Any]:
        """The state of every random stream, as JSON-ready data (``set_random_state`` restores it).

        Example:
            >>> state = t.random_state(); ...; t.set_random_state(state)  # the same draws again
        """
        return {"format": 1, "streams": {key: self._generator_state(gen) for key, gen in self._generators.items()},
                "pending": dict(self._pending_random_state)}

    def check_random_state(self, state: Any) -> dict[str, Any]:
        """The streams of a ``random_state()`` result, each tried on a scratch generator; changes nothing.

        Raises:
            NgraphError: data that is not a ``random_state()`` result, or a stream that does not fit.
        """
        if not isinstance(state, dict) or state.get("format") != 1 or not isinstance(state.get("streams"), dict) \
                or not isinstance(state.get("pending", {}), dict):
            raise NgraphError(
                f"set_random_state: expected a dict from random_state() (format 1), received {state!r:.80}")
        streams = {**state.get("pending", {}), **state["streams"]}
        for key, value in streams.items():
            if not isinstance(key, str):
                raise NgraphError(f"set_random_state: expected stream names as str, received {key!r}")
            self._set_generator_state(self.xp.random.default_rng(0), value, key)
        return streams

    def set_random_state(self, state: dict[str, Any]) -> None:
        """Restore ``random_state()``'s result: streams that exist now at once, the others when first used.

        Raises:
            NgraphError: data that is not a ``random_state()`` result (checked first: nothing changes then).
        """
        streams = self.check_random_state(state)
        for key, value in streams.items():
            gen = self._generators.get(key)
            if gen is None:
                self._pending_random_state[key] = value
            else:
                self._set_generator_state(gen, value, key)

    def _generator_state(self, gen: Any) -> Any:
        return gen.bit_generator.state

    def _set_generator_state(self, gen: Any, value: Any, key: str) -> None:
        try:
            gen.bit_generator.state = value
        except (TypeError, ValueError, KeyError) as exc:
            raise NgraphError(f"set_random_state: stream {key!r}: the saved state does not fit this generator: {exc}; "
                              "hint: restore states saved by the same backend") from None

    # -- memory ----------------------------------------------------------------------------------
    def check_memory(self, graph: CompiledGraph) -> None:
        """Refuse ``graph`` before anything is allocated when one of its values would take more than
        ``max_bytes``, or its arena and new variables more than the machine's memory.

        Raises:
            MemoryBudgetError: naming the op, its shape and dtype, and the budget.
        """
        fresh = 0
        for op in graph.order:
            nbytes = tensor_bytes(op.axes.lengths, self.dtype_of(op))
            check_bytes(nbytes, self.max_bytes, f"{self.name} transformer: {op.op.value} {op.name!r}",
                        f"shape {op.axes.lengths} of {self.dtype_of(op)}", hint=_BUDGET_HINT)
            if op.op is OpType.VARIABLE and op not in self._storage:
                fresh += nbytes
        limit, total = max(physical_memory() or 0, self.max_bytes), graph.memory.arena_bytes + fresh
        if total > limit:
            raise MemoryBudgetError(
                f"{self.name} transformer: the computation's arena and new variables: expected at most "
                f"{format_bytes(limit)} (the machine's memory, or max_bytes if larger), received {format_bytes(total)} "
                f"(arena {format_bytes(graph.memory.arena_bytes)}, variables {format_bytes(fresh)}); hint: a smaller "
                "batch, or fewer or smaller variables")

    # -- variables ----------------------------------------------------------------------------
    def _variable(self, var: Op) -> Any:
        if var.op is not OpType.VARIABLE:
            raise NgraphError(f"expected a variable, received {format_op(var)}")
        storage = self._storage.get(var)
        if storage is None:
            storage = self._storage[var] = self._initial_value(var)
        return storage

    def _initial_value(self, var: Op) -> Any:
        xp, dtype, shape = self.xp, self.dtype_of(var), var.axes.lengths
        check_bytes(tensor_bytes(shape, dtype), self.max_bytes, f"{self.name} transformer: variable {var.name!r}",
                    f"shape {shape} of {dtype}", hint=_BUDGET_HINT)
        with typed_out_of_memory(f"{self.name} transformer: variable {var.name!r}: allocating "
                                 f"{format_bytes(tensor_bytes(shape, dtype))}"):
            return self._allocate_initial_value(var, xp, dtype, shape)

    def _allocate_initial_value(self, var: Op, xp: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        init = var.arg.initial_value
        value = init(var.axes) if callable(init) else init
        array = np.asarray(self.to_numpy(value) if not isinstance(value, (int, float)) else value)
        if array.ndim == 0:
            return xp.full(shape, array.item(), dtype=dtype)
        if array.shape != shape:
            raise AxesError(
                f"variable {var.name}: initial value has shape {array.shape}, expected {shape} "
                f"for axes {format_axes(var.axes)}"
            )
        # C order whatever the initial value's layout: a transposed initial array (a filter made [K, C, R, S] and
        # viewed [C, R, S, K]) was kept strided, and the update kernels that write the storage in place then
        # wrote it with a stride of a whole filter (DCGAN's Adam update of a 64x4x4x128 filter: 1.5 ms
        # against 0.29 ms for the same update of a C-ordered one)
        return xp.array(array, dtype=dtype, order="C")

    # -- code generation -----------------------------------------------------------------------
    def _feeder(self, p: Op) -> Callable[[Any], Any]:
        xp, dtype, shape = self.xp, self.dtype_of(p), p.axes.lengths

        target = np.dtype(dtype)

        def feed(value: Any) -> Any:
            given = getattr(value, "dtype", None)
            if given is None:  # a list or a number: let NumPy type it first
                try:
                    given = np.asarray(value).dtype
                except (TypeError, ValueError) as exc:
                    raise FeedError(f"placeholder {p.name}: cannot make an array of the fed value: {exc}") from None
            given = np.dtype(given)
            if given.kind in "OcVSUM" or not np.can_cast(given, target, casting="same_kind"):
                raise FeedError(
                    f"placeholder {p.name}: expected {dtype} data (or a type that converts without changing kind), "
                    f"received {given}; hint: convert explicitly, e.g. array.astype('{dtype}')"
                )
            try:
                array = xp.asarray(value, dtype=dtype)
            except (TypeError, ValueError) as exc:
                raise FeedError(f"placeholder {p.name}: cannot convert the fed value to {dtype}: {exc}") from None
            if array.shape != shape:
                raise FeedError(
                    f"placeholder {p.name}: expected an array of shape {shape} for axes {format_axes(p.axes)}, "
                    f"received shape {array.shape}; hint: feed arrays in the placeholder's axes order"
                )
            return array

        return feed

    def _result(self, op: Op, on_device: bool = False) -> Callable[[Any], Any]:
        to_numpy = self.to_numpy
        if op.op is OpType.DOALL:
            return lambda v: None
        if on_device:  # a sub-graph's result: a fresh buffer handed over, a view copied on the device
            return (lambda v: v) if owns_buffer(op) else self.xp.copy
        if owns_buffer(op):
            # a result's buffer is a fresh array each call (see _buffers): hand it over
            return lambda v: to_numpy(v)
        # views, variables and constants share memory that outlives the call: copy
        return lambda v: np.array(to_numpy(v), copy=True)

    def _buffers(self, graph: CompiledGraph) -> tuple[dict[Op, str], dict[str, Any]]:
        """For each buffer-owning op, the expression giving its output buffer, and the globals it uses.

        Results get a fresh array every call (the user keeps it). Every other op writes into
        its view of one arena allocated once, at the offset the memory plan chose (an op
        running in place shares its source's offset), so a call allocates nothing else.
        """
        exprs: dict[Op, str] = {}
        env: dict[str, Any] = {}
        plan, xp = graph.memory, self.xp
        position = {op: i for i, op in enumerate(graph.order)}
        with typed_out_of_memory(f"{self.name} transformer: allocating the computation's arena of "
                                 f"{format_bytes(plan.arena_bytes)}", "hint: a smaller batch, or more memory"):
            arena = xp.empty(max(plan.arena_bytes, 1), dtype=xp.uint8)
        for i, op in enumerate(graph.order):
            if not owns_buffer(op):
                continue
            shape, dtype = op.axes.lengths, self.dtype_of(op)
            var = graph.into_variables.get(op)
            if var is not None:  # an assign's value, computed straight into the variable's storage
                exprs[op] = f"var{position[var]}"  # the global its variable step binds
            elif op not in plan.offsets:  # a result
                env[f"new{i}"] = lambda shape=shape, dtype=dtype: xp.empty(shape, dtype=dtype)
                exprs[op] = f"new{i}()"
            else:
                offset = plan.offsets[op]
                env[f"buf{i}"] = arena[offset:offset + plan.sizes[op]].view(dtype).reshape(shape)
                exprs[op] = f"buf{i}"
        return exprs, env

    def _build(self, graph: CompiledGraph, placeholders: Sequence[Op], workspace: Workspace | None = None,
               on_device: bool = False, into: tuple[tuple[int, bool], ...] = ()) -> tuple[str, Callable[..., tuple]]:
        # a body compiled while its computation is built runs its GEMMs as that computation does
        # (a body compiled later, on its own, keeps the workers: its computation may have sections of ours)
        blas_threads = self._building[-1] if self._building else not on_device and self.blas_threads(graph.order)
        kc = KernelContext(self.xp, self.dtype_of, self.generator_for, workspace, self._subgraph,
                           communicator=self.communicator, im2col=self.im2col,
                           conv_variant=self.conv_variant, blas_threads=blas_threads, runner=self.runner)
        self._building.append(blas_threads)
        try:
            return self._build_with(kc, graph, placeholders, on_device, into)
        finally:
            self._building.pop()

    def blas_threads(self, order: Sequence[Op]) -> bool:
        """Whether a computation of ``order`` runs its big GEMMs on BLAS's own threads (``KernelContext``); a
        backend with its own parallel sections overrides it (the base: never)."""
        return False

    def _build_with(self, kc: KernelContext, graph: CompiledGraph, placeholders: Sequence[Op], on_device: bool,
                    into: tuple[tuple[int, bool], ...]) -> tuple[str, Callable[..., tuple]]:
        buffer_of, env = self._buffers(graph)
        accepted = _accepted_into(graph, into) if on_device else []
        for k, j in enumerate(accepted):
            buffer_of[graph.results[j]] = f"into{k}"
        # a result concat's parts computed straight into their slices of its buffer (its line is no copy)
        strided = {graph.results[j] for j, contiguous in into if j in accepted and not contiguous}
        in_place = _concat_parts(graph, self.dtype_of, strided)
        whole: dict[Op, str] = {}  # such a concat -> the name of its buffer in the plan
        names: dict[Op, str] = {}
        # (code, comment) pairs: the code is made only of generated identifiers; the comment
        # holds user text (op names, labels, scopes, axis names) and is never executed
        lines: list[tuple[str, str]] = []
        missing = [p for p in graph.order if p.op is OpType.PLACEHOLDER and p not in placeholders]
        if missing:
            raise NgraphError(
                f"computation: the results need placeholder(s) {', '.join(p.name for p in missing)} "
                "that were not passed; hint: list every placeholder after the results in t.computation"
            )
        params = [f"in{i}" for i in range(len(placeholders))] + [f"into{k}" for k in range(len(accepted))]
        snap_names: dict[Op, str] = {}
        snapshots = graph.snapshots
        late = False
        for i, op in enumerate(graph.order):
            name = names[op] = f"v{i}"
            late = late or op.op is OpType.ASSIGN
            src_names = [snap_names.get(x, names[x]) if late and not (op.op is OpType.ASSIGN and j == 0)
                         else names[x] for j, x in enumerate(op.src)]
            comment = format_op(op, names).replace("  # ", "  | ")
            if op.op is OpType.PLACEHOLDER:
                k = placeholders.index(op)
                if on_device:  # a sub-graph's inputs: backend arrays its caller checked when it was compiled
                    lines.append((f"{name} = in{k}", comment))
                else:
                    env[f"feed{k}"] = self._feeder(op)
                    lines.append((f"{name} = feed{k}(in{k})", comment))
            elif op.op is OpType.VARIABLE:
                env[f"var{i}"] = self._variable(op)
                lines.append((f"{name} = var{i}", comment))
            elif op in whole:  # every part already wrote its slice
                lines.append((f"{name} = {whole[op]}", comment))
            elif op.op in _INLINE_VIEWS and not self.profile and op.op not in self.kernel_overrides:
                # a rename or a basic slice is a view: an expression on the line, no kernel call (~0.3 us)
                if op.op is OpType.CAST_AXES:
                    lines.append((f"{name} = {src_names[0]}", comment))
                else:
                    env[f"index{i}"] = slice_index(op)
                    lines.append((f"{name} = {src_names[0]}[index{i}]", comment))
            else:
                factory = self.kernel_overrides.get(op.op) or KERNELS.get(op.op)
                if factory is None:
                    raise UnsupportedOpError(
                        f"{self.name} transformer: no kernel for {op.op.value}; "
                        "hint: add one in ngraph_core/transformers/kernels/"
                    )
                kernel = f"{op.op.value}{i}"
                env[kernel] = factory(op, kc)
                if self.profile:
                    env[kernel] = _timed(env[kernel], self.profile_counters.setdefault(op, [0, 0, 0]))
                target = buffer_of.get(op)
                if op in in_place:
                    concat, k, part = in_place[op]
                    if concat not in whole:  # the first part: the concat's buffer exists from here on
                        whole[concat] = f"whole{k}"
                        lines.append((f"whole{k} = {buffer_of[concat]}", "the buffer its parts are computed into"))
                    env[f"part{i}"] = part
                    target = f"{whole[concat]}[part{i}]"
                args = ([target] if target is not None else []) + src_names
                lines.append((f"{name} = {kernel}({', '.join(args)})", comment))
            if op in snapshots:
                env["copy"] = self.xp.copy
                snap_names[op] = f"{name}_before"
                lines.append((f"{name}_before = copy({name})", "read after an assign to the variable it views"))
        outs = []
        for j, r in enumerate(graph.results):
            env[f"out{j}"] = self._result(r, on_device)
            outs.append(f"out{j}({names[r]})")
        lines.append((f"return ({', '.join(outs)},)", ""))
        header = f"def computation({', '.join(params)}):\n"
        code = header + "".join(f"    {c}\n" for c, _ in lines)
        # the readable plan: the same lines (so traceback line numbers match), each with its
        # comment escaped to one printable line; it is shown, never executed
        source = header + "".join(f"    {c}  # {printable(t)}\n" if t else f"    {c}\n" for c, t in lines)
        exec(compile(code, f"<ngraph computation {id(graph)}>", "exec"), env)  # noqa: S102 - generated names only
        fn = env["computation"]
        if accepted:
            fn.accepted_into = tuple(accepted)
        return source, fn


_BUDGET_HINT = ("hint: if the size is meant, raise the budget: make_transformer(max_bytes=...) or NG_MAX_BYTES in "
                "the environment (e.g. NG_MAX_BYTES=4GiB)")
_INLINE_VIEWS = frozenset({OpType.CAST_AXES, OpType.SLICE})  # written as expressions in the plan

# kernels that write a strided ``out`` correctly (one ufunc or copy into it); the others may
# reshape ``out`` (a copy when it is strided: their values would be lost) and get a contiguous one
_STRIDED_OUT = frozenset({OpType.CONCAT, OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.MAXIMUM,
                          OpType.MINIMUM, OpType.NEG, OpType.EXP, OpType.TANH, OpType.SIGMOID, OpType.RELU})


def _concat_parts(graph: CompiledGraph, dtype_of: Callable[[Op], str],
                  strided: set[Op]) -> dict[Op, tuple[Op, int, tuple]]:
    """The ops that compute a part of a result ``concat`` straight into its slice of the result's buffer:
    op -> (the concat, the concat's index in the plan, the slice of its buffer).

    A result's buffer is fresh (or the caller's), not the arena's, so writing it before the concat's
    turn overwrites nothing live. Every part must be a kernel's own buffer (possibly renamed by a
    ``cast_axes``) that only the concat reads, of the concat's dtype; a slice that is not one
    contiguous block is taken only by the kernels of ``_STRIDED_OUT``, and a concat written into a
    caller's strided buffer (``strided``) keeps its parts in their own buffers. Measured on the LSTM's reverse
    step (the four gate gradients into one ``[G, N]`` block): the concat's 15 us a step go.
    """
    users, position = consumers(graph.order), {op: i for i, op in enumerate(graph.order)}
    found: dict[Op, tuple[Op, int, tuple]] = {}
    for op in graph.order:
        if (op.op is not OpType.CONCAT or op in graph.memory.offsets or op in graph.into_variables
                or op in strided):
            continue
        axis = op.axes.index(op.arg)
        contiguous = all(a.length == 1 for a in op.axes[:axis])
        parts, start = {}, 0
        for s in op.src:
            p = s.src[0] if s.op is OpType.CAST_AXES and users[s] == [op] else s
            length = s.axes[axis].length
            if (p in parts or users[p] != [s if p is not s else op] or not owns_buffer(p) or p in graph.results
                    or p.op in (OpType.PLACEHOLDER, OpType.VARIABLE, OpType.CONSTANT, OpType.CONCAT)
                    or p in graph.into_variables or p in graph.snapshots or dtype_of(p) != dtype_of(op)
                    or p.axes.lengths != s.axes.lengths or not (contiguous or p.op in _STRIDED_OUT)):
                break
            parts[p] = (slice(None),) * axis + (slice(start, start + length),)
            start += length
        else:
            found.update({p: (op, position[op], part) for p, part in parts.items()})
    return found


def _accepted_into(graph: CompiledGraph, into: tuple[tuple[int, bool], ...]) -> list[int]:
    """The result indices of ``into`` whose values the plan can compute straight into the caller's buffer.

    A result qualifies when its kernel writes a buffer of its own (not a view, variable, placeholder
    or an assign into a variable), it is not already written elsewhere (a value that is two results
    is written once), and the buffer fits the kernel: any C-contiguous one, a strided one only for
    the kernels of ``_STRIDED_OUT``.
    """
    accepted, taken = [], set()
    for j, contiguous in into:
        op = graph.results[j]
        if (op in taken or not owns_buffer(op) or op.op in (OpType.VARIABLE, OpType.PLACEHOLDER, OpType.CONSTANT)
                or op in graph.into_variables or op in graph.memory.offsets
                or not (contiguous or op.op in _STRIDED_OUT)):
            continue
        taken.add(op)
        accepted.append(j)
    return accepted


def _timed(kernel: Callable[..., Any], counter: list[int]) -> Callable[..., Any]:
    """``kernel`` adding its time (ns), a call and its output's bytes to ``counter`` on every call."""
    clock = time.perf_counter_ns

    def timed(*args: Any) -> Any:
        start = clock()
        out = kernel(*args)
        counter[0] += clock() - start
        counter[1] += 1
        counter[2] += getattr(out, "nbytes", 0)
        return out

    return timed


_SHARED = "shared"  # the stream of the random ops without a seed of their own
