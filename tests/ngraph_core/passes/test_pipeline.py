"""The compile pipeline as a user sees it: modes, backends, optimize on/off, user rules, NG_DEBUG, memory, plot."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import OpType, toposort
from ngraph_core.passes.pipeline import PIPELINES, PipelineError, compile_graph, passes_for
from ngraph_core.pattern import Pat, PatternMatcher
from ngraph_core.transformers.kernels import KERNELS, KernelContext
from ngraph_core.transformers.kernels import fused as fused_kernels
from ngraph_core.transformers.numpy import runtime

F, H, Y, N = (ng.make_axis(n, name=s) for n, s in [(6, "F"), (5, "H"), (3, "Y"), (4, "N")])


def mlp_step():
    """A two-layer MLP training step with momentum; returns (loss, update, X, T, variables)."""
    rng = np.random.default_rng(0)
    X, T = ng.placeholder([F, N]), ng.placeholder([Y, N])
    W1 = ng.variable([H, F], rng.standard_normal((5, 6)).astype(np.float32) * 0.5)
    W2 = ng.variable([Y, H], rng.standard_normal((3, 5)).astype(np.float32) * 0.5)
    b1, b2 = ng.variable([H], 0.1), ng.variable([Y], -0.1)
    logits = ng.dot(W2, ng.relu(ng.dot(W1, X) + b1)) + b2
    loss = ng.cross_entropy_multi(ng.softmax(logits), T) / ng.batch_size(logits)
    params = [W1, b1, W2, b2]
    updates = []
    for p, g in zip(params, ng.gradients(loss, params)):
        v = ng.variable(p.axes, 0.0)
        updates.append(ng.assign(p, p + ng.assign(v, 0.9 * v - 0.1 * g)))
    return loss, ng.doall(updates), X, T, params


def train(optimize: bool, steps: int = 4):
    loss, update, X, T, params = mlp_step()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 4)].T.copy()
    with ng.transformers.make_transformer(optimize=optimize) as tr:
        step = tr.computation([loss, update], X, T)
        losses = [float(step(x, t)[0]) for _ in range(steps)]
        return losses, [tr.read_variable(p) for p in params], step


def test_optimized_training_matches_unoptimized():
    losses_opt, weights_opt, step_opt = train(optimize=True)
    losses_ref, weights_ref, step_ref = train(optimize=False)
    np.testing.assert_allclose(losses_opt, losses_ref, rtol=1e-5)
    for a, b in zip(weights_opt, weights_ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert losses_opt[-1] < losses_opt[0]
    # the optimized plan is shorter and fused; the unoptimized one runs the graph as built
    assert len(step_opt.graph.order) < len(step_ref.graph.order)
    assert any(op.op is OpType.FUSED for op in step_opt.graph.order)
    assert not any(op.op is OpType.FUSED for op in step_ref.graph.order)


def test_a_user_rule_is_applied_by_the_transformer():
    x = ng.placeholder([F])
    y = ng.tanh(x) * 3.0
    swap = [(Pat(OpType.TANH, (Pat.var("a"),)), lambda a: ng.sigmoid(a))]  # tanh(a) -> sigmoid(a)
    xv = np.linspace(-2, 2, 6).astype(np.float32)
    for optimize in (True, False):
        with ng.transformers.make_transformer(extra_rules=swap, optimize=optimize) as t:
            f = t.computation(y, x)
            np.testing.assert_allclose(f(xv), 3.0 / (1.0 + np.exp(-xv)), rtol=1e-6)
    with ng.transformers.make_transformer() as t:  # without the rule: tanh
        np.testing.assert_allclose(t.computation(y, x)(xv), 3.0 * np.tanh(xv), rtol=1e-6)


def test_ng_debug_levels_print_passes_counts_and_graphs(monkeypatch, capfd):
    x = ng.placeholder([F])
    y = ng.exp(x * 1.0) + 0.0
    for level, expect, absent in [("1", "pass simplify", "->"), ("2", "ops", "%0 ="), ("3", "%0 =", None)]:
        monkeypatch.setenv("NG_DEBUG", level)
        with ng.transformers.make_transformer() as t:
            t.computation(y, x)
        err = capfd.readouterr().err
        assert expect in err and "pass fuse_elementwise" in err
        if absent:
            assert absent not in err


def test_ng_check_verifies_after_every_pass(monkeypatch):
    import ngraph_core.passes.pipeline as pipeline

    calls = []
    monkeypatch.setattr(pipeline, "verify", lambda roots: calls.append(len(roots)))
    monkeypatch.setenv("NG_CHECK", "1")
    x = ng.placeholder([F])
    with ng.transformers.make_transformer() as t:
        t.computation(ng.exp(x), x)
    ran = pipeline.passes_for("numpy", "training", kernels=KERNELS, kernel_context=KernelContext)
    assert len(calls) == 1 + len(ran)


def test_memory_report_figures_add_up():
    loss, update, X, T, params = mlp_step()
    with ng.transformers.make_transformer() as t:
        step = t.computation([loss, update], X, T)
        report = step.memory_report()
        plan = step.memory_plan
    assert 0 < report.arena_bytes <= report.unplanned_bytes
    assert report.arena_bytes >= max(report.live_bytes)
    assert len(report.live_bytes) == len(step.graph.order)
    variables = {op for op in step.graph.order if op.op is OpType.VARIABLE}
    assert report.persistent_bytes == sum(v.axes.size * 4 for v in variables)
    assert set(plan.offsets) <= set(step.graph.order)
    assert "reuse ratio" in str(report)


def test_memory_plot_of_a_computation(tmp_path):
    loss, update, X, T, _ = mlp_step()
    with ng.transformers.make_transformer() as t:
        step = t.computation([loss, update], X, T)
        path = ng.viz.memory_plot(step, tmp_path / "memory.png")
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_kernel_blocks_and_threads_agree_with_numpy(monkeypatch, threads):
    monkeypatch.setenv("NG_KERNELS", "numpy")  # the shared blocked kernel (large programs compile by default)
    monkeypatch.setattr(runtime, "threads", lambda: threads)  # the NumPy runner's (KernelContext.runner)
    split: list[int] = []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: split.append(len(tasks)) or real_run(tasks))
    E = ng.make_axis(fused_kernels.PARALLEL_MIN_ELEMENTS + 12345, name="E")  # several blocks, ragged end
    a, b = ng.placeholder([E]), ng.placeholder([E])
    y = ng.tanh(a * b + 1.0) * 0.5 + ng.exp(-ng.abs(a))
    rng = np.random.default_rng(0)
    av, bv = rng.standard_normal(E.length).astype(np.float32), rng.standard_normal(E.length).astype(np.float32)
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, a, b)
        assert [op.op for op in f.graph.order].count(OpType.FUSED) == 1
        np.testing.assert_allclose(f(av, bv), np.tanh(av * bv + 1) * 0.5 + np.exp(-np.abs(av)), rtol=2e-6, atol=1e-6)
    assert split == ([] if threads == 1 else [2])  # the blocks went to the runtime's two workers


def test_update_values_are_computed_straight_into_their_variables():
    loss, update, X, T, params = mlp_step()
    with ng.transformers.make_transformer() as t:
        step = t.computation([loss, update], X, T)
    into = step.graph.into_variables
    # every momentum update p + assign(v, ...) writes into p; nothing of them is in the arena
    assert {var for var in into.values()} >= set(params)
    assert not set(into) & set(step.memory_plan.offsets)
    for value, var in into.items():
        assert f"var{step.graph.order.index(var)}, " in next(
            line for line in step.source.splitlines() if line.strip().startswith(f"v{step.graph.order.index(value)} ="))


def test_a_value_that_reads_its_variable_transposed_is_not_computed_into_it():
    S = ng.make_axis(3, name="S")
    S2 = ng.make_axis(3, name="S2")
    m = ng.variable([S, S2], np.arange(9, dtype=np.float32).reshape(3, 3))
    transposed = ng.cast_axes(ng.axes_with_order(m, [S2, S]), [S, S2])
    with ng.transformers.make_transformer() as t:
        f = t.computation(ng.doall([ng.assign(m, m + transposed)]))
        assert not f.graph.into_variables
        f()
        np.testing.assert_array_equal(t.read_variable(m), np.arange(9).reshape(3, 3) + np.arange(9).reshape(3, 3).T)


# -- pipelines per backend and mode ---------------------------------------------------------


def names(backend: str = "numpy", mode: str = "training", **options) -> list[str]:
    """The pass names ``backend`` runs on a ``mode`` graph, with the NumPy kernel table handed in."""
    options = {"kernels": KERNELS, "kernel_context": KernelContext, **options}
    return [name for name, _ in passes_for(backend, mode, **options)]


def test_training_and_inference_lists_differ_only_by_batch_norm_folding():
    training = ["simplify", "fold", "cse", "dce", "prune_scans", "bucket_allreduce", "layout", "scan_layout",
                "fuse_elementwise"]
    inference = training[:2] + ["fold_batch_norm"] + training[2:]
    assert names("cupy", "training") == training and names("cupy", "inference") == inference
    # NumPy fuses attention first (its tiled CPU kernel: passes/attention.py), in both modes
    assert names("numpy", "training") == ["fuse_attention", *training]
    assert names("numpy", "inference") == ["fuse_attention", *inference]
    assert set(PIPELINES) >= {"numpy", "cupy"}
    # nothing to evaluate with, nothing folds; nothing optimizing when optimize=False
    assert names("cupy", "training", kernels=None, kernel_context=None) == [n for n in training if n != "fold"]
    assert names("numpy", "inference", optimize=False) == []
    rule = [(Pat(OpType.TANH, (Pat.var("a"),)), lambda a: ng.sigmoid(a))]  # tanh(a) -> sigmoid(a)
    assert names("numpy", "training", optimize=False, extra_rules=PatternMatcher(rule)) == ["extra_rules"]


def test_decompose_runs_only_for_a_backend_missing_a_kernel():
    x = ng.placeholder([F])
    y = ng.rsqrt(x) * 2.0
    partial = {kind: factory for kind, factory in KERNELS.items() if kind is not OpType.RSQRT}
    assert "decompose" not in names("numpy", "training")
    for optimize in (True, False):  # legalizing: it runs even when nothing else does
        assert "decompose" in names("numpy", "training", kernels=partial, optimize=optimize)
        graph = compile_graph([y], optimize=optimize, kernels=partial, kernel_context=KernelContext)
        assert not any(op.op is OpType.RSQRT for op in toposort(list(graph.results)))


@pytest.mark.parametrize("backend, mode, wrong, received", [("tpu", "training", "backend", "tpu"),
                                                           ("numpy", "eval", "mode", "eval")])
def test_an_unknown_backend_or_mode_is_a_typed_error(backend, mode, wrong, received):
    with pytest.raises(PipelineError, match=f"expected a {wrong} in .*, received '{received}'; hint: "):
        passes_for(backend, mode)
    assert issubclass(PipelineError, ng.NgraphError) and issubclass(PipelineError, ValueError)


def test_a_computation_validates_its_mode():
    x = ng.placeholder([F])
    with ng.transformers.make_transformer() as t, pytest.raises(PipelineError, match="received 'infer'.*hint: "):
        t.computation(ng.exp(x), x, mode="infer")


def dense_batch_norm():
    """relu(batch_norm(dot(W, X))) in inference form (running statistics); returns (y, h, X, mean)."""
    K = ng.make_axis(5, name="K")
    rng = np.random.default_rng(2)
    X = ng.placeholder([F, N])
    W = ng.variable([K, F], rng.standard_normal((5, 6)).astype(np.float32))
    mean, beta = (ng.variable([K], rng.standard_normal(5).astype(np.float32)) for _ in range(2))
    var, gamma = (ng.variable([K], rng.uniform(0.5, 2.0, 5).astype(np.float32)) for _ in range(2))
    h = ng.dot(W, X)
    return ng.relu((h - mean) * ng.rsqrt(var + 1e-5) * gamma + beta), h, X, mean


def test_inference_mode_folds_batch_norm_and_every_mode_computes_the_same_values():
    y, h, X, mean = dense_batch_norm()
    xv = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    values, normalizes = {}, {}
    for mode, optimize in [("training", True), ("inference", True), ("inference", False)]:
        with ng.transformers.make_transformer(optimize=optimize) as t:
            f = t.computation(y, X, mode=mode)
            values[mode, optimize] = f(xv)
        # the unfolded normalization subtracts the mean broadcast over the activation
        normalizes[mode, optimize] = any(op.op is OpType.BROADCAST and op.src[0] is mean and op.axes.same_set(h.axes)
                                         for op in toposort(list(f.graph.results)))
    assert normalizes == {("training", True): True, ("inference", True): False, ("inference", False): True}
    reference = values["inference", False]
    for got in values.values():
        np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-6)


def test_training_mode_steps_match_the_inference_pass_list_on_a_graph_without_batch_norm():
    # the only difference between the lists is batch norm folding: a training step without
    # batch norm compiles to the same plan, and trains to the same numbers, in either mode
    loss, update, X, T, params = mlp_step()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t_ = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 4)].T.copy()
    runs = {}
    for mode in ("training", "inference"):
        with ng.transformers.make_transformer() as t:
            step = t.computation([loss, update], X, T, mode=mode)
            runs[mode] = ([float(step(x, t_)[0]) for _ in range(3)], [t.read_variable(p) for p in params],
                          [op.op for op in step.graph.order])
    assert runs["training"][2] == runs["inference"][2]
    np.testing.assert_array_equal(runs["training"][0], runs["inference"][0])
    for a, b in zip(runs["training"][1], runs["inference"][1]):
        np.testing.assert_array_equal(a, b)


def test_constant_folding_through_the_transformer_still_folds():
    x = ng.placeholder([F])
    y = x * (ng.constant(2.0) + 1.0) * ng.exp(ng.constant(0.0))
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
        np.testing.assert_allclose(f(np.arange(6, dtype=np.float32)), 3.0 * np.arange(6), rtol=1e-6)
    constant_ops = {OpType.CONSTANT, OpType.BROADCAST}
    computed = [op for op in toposort(list(f.graph.results)) if op.op not in constant_ops and op.src
                and all(s.op in constant_ops for s in op.src)]
    assert computed == []  # no op of constants is left to run time
