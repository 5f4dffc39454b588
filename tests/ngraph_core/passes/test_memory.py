"""The memory planner: invariants on many random graphs, in-place legality, the report, and the MLP's savings.

The invariants are checked against independent recomputations (owners, reads, live
bytes), and plans are *run*: a small executor carves every kernel's output out of one
arena (filled with NaN bytes) exactly as the plan says, and must match the NumPy
transformer.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core import OpGroup, OpType
from ngraph_core.ir import FusedProgram, Op
from ngraph_core.passes import compile_graph, linearize
from ngraph_core.passes.memory import MemoryPlan, MemoryReport, can_run_in_place, format_bytes, nbytes, plan_memory
from ngraph_core.transformers.kernels import KERNELS, KernelContext

A, B, C, D = (ng.make_axis(3, name="A"), ng.make_axis(8, name="B"), ng.make_axis(16, name="C"),
              ng.make_axis(8, name="D"))
AXES = (A, B, C, D)
FLOAT64 = lambda op: "float64" if op.dtype == "float32" else op.dtype  # a float64 transformer's dtype_of


# -- independent oracles ------------------------------------------------------------------------------


def _owner(op: Op) -> Op | None:
    """The op whose arena buffer holds ``op``'s value (None: outside the arena), by walking views."""
    while op.op in OpGroup.VIEW:
        op = op.src[-1] if op.op is OpType.SEQUENTIAL else op.src[0]
    return None if op.op in OpGroup.NO_BUFFER else op


def check_plan(plan: MemoryPlan, order, results, dtype_of=lambda op: op.dtype, alignment=64,
               results_in_arena=True) -> None:
    """Every invariant a memory plan must satisfy, recomputed without the planner's helpers."""
    order = list(order)
    step = {op: i for i, op in enumerate(order)}
    owning = [op for op in order if _owner(op) is op and (results_in_arena or op not in results)]
    assert plan.order == tuple(order) and plan.results == tuple(results)
    assert list(plan.offsets) == owning == list(plan.sizes) == list(plan.intervals)
    last = len(order) - 1
    for op in owning:
        assert plan.sizes[op] == math.prod(op.axes.lengths) * np.dtype(dtype_of(op)).itemsize
        assert plan.offsets[op] % alignment == 0
        assert plan.offsets[op] + plan.sizes[op] <= plan.arena_bytes
        reads = [i for i, o in enumerate(order) for s in o.src if _owner(s) is op]
        end = last if any(_owner(r) is op for r in results) else max(reads, default=step[op])
        assert (plan.intervals[op].start, plan.intervals[op].end) == (step[op], end)

    # in place only where legal: the op computes position-wise, the source dies here, unaliased
    for op, source in plan.in_place.items():
        i = step[op]
        assert can_run_in_place(op) and source in op.src and _owner(source) is source
        assert results_in_arena or op not in results
        assert plan.offsets[op] == plan.offsets[source] and plan.sizes[op] == plan.sizes[source]
        assert source.axes.lengths == op.axes.lengths and dtype_of(source) == dtype_of(op)
        assert not any(_owner(r) is source for r in results)
        assert not any(_owner(s) is source for o in order[i + 1:] for s in o.src), "source read later"
        assert not any(_owner(s) is source for s in op.src if s is not source), "source read via a view"

    # two buffers live at one step never share a byte, except an op and the source it overwrites
    for k, a in enumerate(owning):
        for b in owning[k + 1:]:
            ia, ib = plan.intervals[a], plan.intervals[b]
            if not ia.overlaps(ib) or not plan.sizes[a] or not plan.sizes[b]:
                continue
            lo_a, lo_b = plan.offsets[a], plan.offsets[b]
            if lo_a < lo_b + plan.sizes[b] and lo_b < lo_a + plan.sizes[a]:
                assert plan.in_place.get(b) is a and ia.end == ib.start, (a, b)

    # live bytes: every buffer live at a step, once per in-place pair meeting there
    live = []
    for i in range(len(order)):
        total = sum(plan.sizes[op] for op in owning if plan.intervals[op].start <= i <= plan.intervals[op].end)
        shared = sum(plan.sizes[op] for op, src in plan.in_place.items()
                     if plan.intervals[op].start == i == plan.intervals[src].end)
        live.append(total - shared)
    assert plan.live_bytes == live
    assert plan.peak_live_bytes == max(live, default=0) <= plan.arena_bytes
    assert plan.arena_bytes <= plan.unplanned_bytes
    assert plan.unplanned_bytes == sum(-(-plan.sizes[op] // alignment) * alignment for op in owning)
    variables = {op for op in order if op.op is OpType.VARIABLE}
    assert plan.persistent_bytes == sum(nbytes(v, dtype_of) for v in variables)


def run_planned(graph, plan: MemoryPlan, transformer, feeds: dict, variables: dict) -> list:
    """Run ``graph`` like the executor does, but with every output carved out of one arena per ``plan``.

    ``variables`` (op -> array) are updated in place by assigns. Every kernel is built
    before any runs (as in the executor), so a kernel that prepares its buffer at build
    time would be caught.
    """
    arena = np.full(max(plan.arena_bytes, 1), 0xFF, dtype=np.uint8)  # NaN in every float: stale reads show

    def out(op: Op):
        offset, size = plan.offsets[op], plan.sizes[op]
        return arena[offset:offset + size].view(transformer.dtype_of(op)).reshape(op.axes.lengths)

    def fresh(op: Op):
        return np.empty(op.axes.lengths, dtype=transformer.dtype_of(op))

    kc = KernelContext(np, transformer.dtype_of, transformer.generator_for)
    kernels = {op: KERNELS[op.op](op, kc) for op in graph.order if op.op not in OpGroup.LEAF - {OpType.CONSTANT}}
    # a buffer-owning op's kernel is called as kernel(out, *inputs); results outside the arena get fresh arrays
    outs = {op: out(op) if op in plan.offsets else fresh(op) for op in graph.order if _owner(op) is op}
    values, snapshots, late = {}, {}, False
    for op in graph.order:
        late = late or op.op is OpType.ASSIGN
        if op.op is OpType.PLACEHOLDER:
            values[op] = np.asarray(feeds[op], dtype=transformer.dtype_of(op))
        elif op.op is OpType.VARIABLE:
            values[op] = variables[op]
        else:
            args = [snapshots.get(s, values[s]) if late and not (op.op is OpType.ASSIGN and j == 0) else values[s]
                    for j, s in enumerate(op.src)]
            values[op] = kernels[op](*([outs[op]] if op in outs else []), *args)
        if op in graph.snapshots:
            snapshots[op] = values[op].copy()
    return [None if r.op is OpType.DOALL else np.array(values[r], copy=True) for r in graph.results]


# -- random graphs -----------------------------------------------------------------------------------


def random_graph(seed: int) -> tuple[list[Op], list[Op]]:
    """Random element-wise, reduce, dot, broadcast, transpose, slice/pad/concat ops: (results, placeholders)."""
    rng = random.Random(seed)

    def axes_subset(k_min=1, k_max=3):
        return rng.sample(AXES, rng.randint(k_min, k_max))

    placeholders = [ng.placeholder(axes_subset()) for _ in range(rng.randint(1, 3))]
    pool = list(placeholders) + [ng.variable(axes_subset(), initial_value=lambda axes: np.linspace(-1, 1, axes.size)
                                              .reshape(axes.lengths)) for _ in range(rng.randint(0, 2))]

    def pick():
        return pool[-1 - min(int(rng.expovariate(0.4)), len(pool) - 1)]  # mostly recent values: longer chains

    def grow():
        kind = rng.choice(["unary"] * 4 + ["binary"] * 4 + ["reduce", "dot", "transpose", "broadcast",
                                                           "transpose_add", "pad_slice", "concat", "sequential",
                                                           "where", "square_self"])
        a = pick()
        if kind == "unary":
            return rng.choice([ng.tanh, ng.sin, ng.cos, ng.negative, ng.absolute, ng.relu, ng.exp])(
                ng.tanh(a) if rng.random() < 0.3 else a)
        if kind == "binary":
            partners = [b for b in pool if set(b.axes).issubset(a.axes)] or [ng.constant(0.5)]
            b = rng.choice(partners)
            x, y = (a, b) if rng.random() < 0.5 else (b, a)
            return rng.choice([ng.add, ng.subtract, ng.multiply, ng.maximum])(x, y)
        if kind == "square_self":
            return a * a
        if kind == "reduce" and len(a.axes):
            reduced = rng.sample(list(a.axes), rng.randint(1, len(a.axes)))
            return rng.choice([ng.sum, ng.max])(a, reduction_axes=reduced)
        if kind == "dot":
            return ng.dot(a, pick())
        if kind == "transpose" and len(a.axes) >= 2:
            return ng.axes_with_order(a, rng.sample(list(a.axes), len(a.axes)))
        if kind == "broadcast":
            missing = [x for x in AXES if x not in a.axes]
            if missing:
                new = list(a.axes)
                new.insert(rng.randint(0, len(new)), rng.choice(missing))
                return ng.broadcast(a, new)
        if kind == "transpose_add" and B in a.axes and D in a.axes:
            # a real transpose of a's data under a's own axes: x + transpose(x), which must not run in place
            swapped = [D if x == B else B if x == D else x for x in a.axes]
            return a + ng.cast_axes(ng.axes_with_order(a, swapped), a.axes)
        if kind == "pad_slice" and len(a.axes):
            axis = rng.choice([x for x in a.axes])
            inner = ng.slice_along_axis(a, axis, slice(1, axis.length - 1))
            return ng.pad(inner, [(1, 1) if x == axis else 0 for x in a.axes], axes=a.axes)
        if kind == "concat" and len(a.axes):
            axis = rng.choice(list(a.axes))
            k = rng.randint(1, axis.length - 1)
            b = pick()
            return ng.concat_along_axis([ng.slice_along_axis(a, axis, slice(0, k)),
                                         ng.slice_along_axis(ng.exp(a) if b.axes != a.axes else b, axis,
                                                             slice(k, None))], axis)
        if kind == "sequential" and not any(op.op is OpType.SEQUENTIAL for op in ng.ordered_ops(pool)):
            # one per graph: two sequentials may order the same pure ops both ways, which linearize cannot meet
            return ng.sequential([ng.exp(pick()), a])
        if kind == "where":
            return ng.where(ng.greater(a, 0.0), a, ng.negative(a))
        return None

    for _ in range(rng.randint(3, 28)):
        try:
            op = grow()
        except ng.AxesError:
            continue
        if op is not None:
            pool.append(op)
    computed = [op for op in pool if op.op not in OpGroup.LEAF] or [ng.exp(pool[0])]
    results = rng.sample(computed, min(len(computed), rng.randint(1, 3)))
    if rng.random() < 0.3 and len(results[0].axes) >= 2:
        results.append(ng.axes_with_order(results[0], list(reversed(results[0].axes))))  # a result that is a view
    return results, placeholders


@pytest.mark.parametrize("seed", range(300))
def test_plan_invariants_on_random_graphs(seed):
    results, _ = random_graph(seed)
    rng = random.Random(seed)
    alignment = rng.choice([1, 8, 64, 256])
    dtype_of = rng.choice([lambda op: op.dtype, FLOAT64])
    graph = compile_graph(results, optimize=rng.random() < 0.5)
    order, results = graph.order, graph.results
    in_arena = rng.random() < 0.5
    plan = plan_memory(order, results, dtype_of=dtype_of, alignment=alignment, results_in_arena=in_arena)
    check_plan(plan, order, results, dtype_of, alignment, in_arena)
    no_reuse = plan_memory(order, results, dtype_of=dtype_of, alignment=alignment, in_place=False,
                           results_in_arena=in_arena)
    check_plan(no_reuse, order, results, dtype_of, alignment, in_arena)
    assert no_reuse.in_place == {}
    assert plan.unplanned_bytes == no_reuse.unplanned_bytes


@pytest.mark.parametrize("optimize", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("seed", range(60))
def test_running_the_plan_matches_the_transformer(seed, optimize):
    results, placeholders = random_graph(seed)
    rng = np.random.default_rng(seed)
    feeds = {p: rng.standard_normal(p.axes.lengths) for p in placeholders}
    with ng.transformers.make_transformer(float_dtype="float64") as t, np.errstate(all="ignore"):
        expected = t.computation(results, *placeholders)(*(feeds[p] for p in placeholders))
        graph = compile_graph(results, optimize=optimize)
        plan = plan_memory(graph.order, graph.results, dtype_of=t.dtype_of, results_in_arena=seed % 2 == 0)
        variables = {v: t.read_variable(v) for v in graph.variables}
        got = run_planned(graph, plan, t, feeds, variables)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12, equal_nan=True)


# -- in place -----------------------------------------------------------------------------------------


def _plan(results, **options):
    order = linearize(results)
    plan = plan_memory(order, results, **options)
    check_plan(plan, order, results, options.get("dtype_of", lambda op: op.dtype), options.get("alignment", 64),
               options.get("results_in_arena", True))
    return order, plan


def test_an_exp_chain_runs_fully_in_place():
    x = ng.placeholder([B, C])
    e1 = ng.exp(x)
    e2 = ng.exp(e1)
    e3 = ng.exp(e2)
    _, plan = _plan([e3])
    assert plan.in_place == {e2: e1, e3: e2}  # e1 cannot: the placeholder is not the arena's
    assert plan.offsets[e1] == plan.offsets[e2] == plan.offsets[e3] == 0
    assert plan.arena_bytes == nbytes(e1) == 8 * 16 * 4
    assert plan.unplanned_bytes == 3 * plan.arena_bytes
    assert plan.live_bytes == [0, nbytes(e1), nbytes(e1), nbytes(e1)]


def test_x_plus_its_own_transpose_is_not_computed_in_place():
    x = ng.placeholder([B, D])
    e = ng.exp(x)
    y = e + ng.cast_axes(ng.axes_with_order(e, [D, B]), [B, D])  # reads e transposed while writing
    order, plan = _plan([y])
    assert y not in plan.in_place
    assert plan.offsets[y] != plan.offsets[e]
    # and run it: a plan that overwrote e here would give wrong numbers
    x_value = np.arange(64.0).reshape(8, 8) / 64
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        graph = compile_graph([y], optimize=False)
        got = run_planned(graph, plan_memory(graph.order, graph.results, dtype_of=t.dtype_of), t, {x: x_value}, {})
    np.testing.assert_allclose(got[0], np.exp(x_value) + np.exp(x_value).T)


def test_the_same_source_twice_may_be_overwritten():
    # x * x reads one array twice, element by element, exactly where it writes: safe for a ufunc
    x = ng.placeholder([B, C])
    e = ng.exp(x)
    y = e * e
    _, plan = _plan([y])
    assert plan.in_place == {y: e}


def test_no_in_place_over_a_source_read_later_or_under_a_result():
    x = ng.placeholder([B, C])
    a = ng.exp(x)
    b = ng.tanh(a)
    c = a + b  # a is read again after b: b cannot overwrite it
    _, plan = _plan([c])
    assert b not in plan.in_place and plan.in_place.get(c) in (a, b)

    a2 = ng.exp(x)
    b2 = ng.negative(a2)
    _, plan = _plan([a2, b2])  # a2 is a result: never overwritten
    assert plan.in_place == {}

    view = ng.axes_with_order(a2, [C, B])
    _, plan = _plan([view, b2])  # a result views a2
    assert plan.in_place == {}


def test_results_in_fresh_arrays_leave_the_arena():
    x = ng.placeholder([B, C])
    a = ng.exp(x)
    y = ng.tanh(a)
    view = ng.axes_with_order(a, [C, B])
    _, inside = _plan([y])
    assert inside.in_place == {y: a} and y in inside.offsets
    _, outside = _plan([y], results_in_arena=False)
    assert outside.in_place == {} and y not in outside.offsets and a in outside.offsets
    assert outside.arena_bytes == nbytes(a) and outside.unplanned_bytes == nbytes(a)
    _, viewed = _plan([view, y], results_in_arena=False)  # a result views a: a stays, to the end
    assert viewed.intervals[a].end == len(viewed.order) - 1


def test_no_in_place_across_dtypes_or_shapes_or_when_disabled():
    x = ng.placeholder([B, C])
    a = ng.exp(x)
    y = ng.cast(a, "float64")
    _, plan = _plan([y])
    assert plan.in_place == {}  # float32 -> float64
    _, plan = _plan([y], dtype_of=FLOAT64)
    assert plan.in_place == {y: a}  # both run as float64 on this transformer
    s = ng.sum(a, reduction_axes=[C])
    _, plan = _plan([s])
    assert plan.in_place == {}  # a reduction is not position-wise
    chain = ng.exp(ng.exp(a))
    _, plan = _plan([chain], in_place=False)
    assert plan.in_place == {}
    _, plan = _plan([chain], may_run_in_place=lambda op: False)
    assert plan.in_place == {}


def test_a_fused_op_with_a_dot_head_never_runs_in_place():
    x = ng.placeholder([B, C])
    a, w, bias = ng.exp(x), ng.exp(ng.placeholder([C, D])), ng.exp(ng.placeholder([B, D]))
    program = FusedProgram(steps=((OpType.ADD, (("d",), ("in", 0))),), dot=True)
    fused = Op(OpType.FUSED, [a, w, bias], bias.axes, bias.dtype, program)  # dot(a, w) + bias: [B, D]
    assert not can_run_in_place(fused)
    elementwise = Op(OpType.FUSED, [a], a.axes, a.dtype, FusedProgram(steps=((OpType.EXP, (("in", 0),)),)))
    assert can_run_in_place(elementwise)
    assert can_run_in_place(ng.exp(a)) and not can_run_in_place(ng.sum(a)) and not can_run_in_place(x)


# -- placement ---------------------------------------------------------------------------------------


def test_alignment_and_best_fit_reuse_a_freed_gap():
    x = ng.placeholder([C])
    big = ng.sum(ng.broadcast(ng.exp(x), [B, C]) * 2.0, reduction_axes=[B])  # big temporaries die here
    small = ng.tanh(big) + ng.sum(ng.exp(big))
    order, plan = _plan([small], alignment=256)
    assert all(o % 256 == 0 for o in plan.offsets.values())
    assert plan.arena_bytes < plan.unplanned_bytes
    assert max(plan.live_bytes) == plan.peak_live_bytes <= plan.arena_bytes
    with pytest.raises(ValueError, match="alignment"):
        plan_memory(order, [small], alignment=0)


def test_sizes_follow_dtype_of_and_a_scalar_is_one_element():
    x = ng.placeholder([B, C])
    s = ng.sum(ng.exp(x))
    _, plan32 = _plan([s])
    _, plan64 = _plan([s], dtype_of=FLOAT64)
    assert s.axes.lengths == () and plan32.sizes[s] == 4 and plan64.sizes[s] == 8
    assert plan64.unplanned_bytes >= plan32.unplanned_bytes
    assert {op: 2 * n for op, n in plan32.sizes.items()} == plan64.sizes


def test_variables_count_as_persistent_not_arena():
    w = ng.variable([B, C], initial_value=0.0)
    v = ng.variable([C], dtype="float64", initial_value=0.0)
    x = ng.placeholder([B, C])
    y = ng.doall([ng.assign(w, w + ng.exp(x)), ng.assign(v, ng.sum(x, reduction_axes=[B]))])
    _, plan = _plan([y])
    assert plan.persistent_bytes == 8 * 16 * 4 + 16 * 8
    assert w not in plan.offsets and v not in plan.offsets


def test_the_report_adds_up():
    x = ng.placeholder([B, C])
    w = ng.variable([C], initial_value=1.0)
    y = ng.tanh(ng.exp(x) * w) + ng.sum(ng.exp(x), reduction_axes=[B])
    _, plan = _plan([y])
    report = plan.report()
    assert isinstance(report, MemoryReport)
    assert (report.arena_bytes, report.unplanned_bytes, report.persistent_bytes) == (
        plan.arena_bytes, plan.unplanned_bytes, plan.persistent_bytes)
    assert report.live_bytes == plan.live_bytes and len(report.live_bytes) == len(plan.order)
    assert report.peak_live_bytes == max(report.live_bytes)
    assert report.buffers == len(plan.offsets) and report.in_place == len(plan.in_place)
    assert report.reuse_ratio == pytest.approx(plan.unplanned_bytes / plan.arena_bytes)
    assert sum(plan.op_bytes) == sum(plan.sizes.values())
    text = str(plan)
    assert text == str(report) and "MiB" in text and f"{report.reuse_ratio:.2f}x" in text
    assert report.as_dict()["arena_bytes"] == plan.arena_bytes
    assert format_bytes(3 * 2**20 + 2**18) == "3.25 MiB" and format_bytes(12) == "12 B"


def test_planning_writes_nothing_onto_ops():
    x = ng.placeholder([B, C])
    y = ng.exp(ng.exp(x))
    order = linearize([y])
    before = [(op.meta.name, set(op.meta.labels), op.meta.scope) for op in order]
    plan_memory(order, [y])
    assert [(op.meta.name, set(op.meta.labels), op.meta.scope) for op in order] == before


# -- the MLP -----------------------------------------------------------------------------------------


def build_mlp():
    """784-512-512-10, batch 128, softmax cross-entropy; SGD with momentum: (loss, update, y_hat, X, Y)."""
    F, H1, H2, K, N = (ng.make_axis(784, name="F"), ng.make_axis(512, name="H1"), ng.make_axis(512, name="H2"),
                       ng.make_axis(10, name="K"), ng.make_axis(128, name="N"))
    X, Y = ng.placeholder([F, N], name="X"), ng.placeholder([K, N], name="Y")
    rng = np.random.default_rng(0)

    def weight(axes):
        return ng.variable(axes, initial_value=lambda a: rng.standard_normal(a.lengths) * 0.05)

    params = [weight([H1, F]), weight([H1]), weight([H2, H1]), weight([H2]), weight([K, H2]), weight([K])]
    W1, b1, W2, b2, W3, b3 = params
    h1 = ng.relu(ng.dot(W1, X) + b1)
    h2 = ng.relu(ng.dot(W2, h1) + b2)
    y_hat = ng.softmax(ng.dot(W3, h2) + b3)
    loss = ng.cross_entropy_multi(y_hat, Y) / ng.batch_size(y_hat)
    updates = []
    for p, g in zip(params, ng.gradients(loss, params), strict=True):
        velocity = ng.variable(p.axes, initial_value=0.0)
        updates.append(ng.assign(p, p + ng.assign(velocity, 0.9 * velocity - 0.01 * g)))
    return loss, ng.doall(updates), y_hat, X, Y


def test_mlp_plans_save_memory():
    loss, update, y_hat, X, Y = build_mlp()
    lines = []
    for optimize in (True, False):
        for name, results in (("training", [loss, update]), ("inference", [y_hat])):
            graph = compile_graph(results, optimize=optimize)
            plan = plan_memory(graph.order, graph.results)
            check_plan(plan, graph.order, graph.results)
            ratio = plan.report().reuse_ratio
            assert ratio > 1
            lines.append(f"MLP 784-512-512-10 b128 {name:<9} ({'fused' if optimize else 'unfused'}): "
                         f"{len(graph.order)} steps, arena {format_bytes(plan.arena_bytes)}, "
                         f"no reuse {format_bytes(plan.unplanned_bytes)}, unplanned/arena {ratio:.2f}x, "
                         f"{len(plan.in_place)} in place")
    print("\n" + "\n".join(lines))  # shown with -s or on failure (benchmarks/memory.py reports the figures)


def test_mlp_training_step_runs_from_the_arena():
    loss, update, _, X, Y = build_mlp()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((784, 128)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[:, rng.integers(0, 10, 128)]
    with ng.transformers.make_transformer() as t:
        graph = compile_graph([loss, update])
        plan = plan_memory(graph.order, graph.results, dtype_of=t.dtype_of)
        variables = {v: t.read_variable(v) for v in graph.variables}
        got_loss, _ = run_planned(graph, plan, t, {X: x, Y: y}, variables)
        expected_loss, _ = t.computation([loss, update], X, Y)(x, y)
        np.testing.assert_allclose(got_loss, expected_loss, rtol=1e-5)
        for v, value in variables.items():
            np.testing.assert_allclose(value, t.read_variable(v), rtol=1e-4, atol=1e-6)
