"""viz.memory_plot: writes a valid PNG, atomically, from a plan or anything carrying one."""

from __future__ import annotations

import types

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.passes import compile_graph
from ngraph_core.passes.memory import plan_memory
from ngraph_core.viz import memory_plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _training_plan():
    """A small two-layer network's training step (gradients and updates), planned."""
    F, H, K, N = (ng.make_axis(32, name="F"), ng.make_axis(64, name="H"), ng.make_axis(10, name="K"),
                  ng.make_axis(16, name="N"))
    X, Y = ng.placeholder([F, N]), ng.placeholder([K, N])
    rng = np.random.default_rng(0)
    W1 = ng.variable([H, F], initial_value=lambda a: rng.standard_normal(a.lengths) * 0.1)
    W2 = ng.variable([K, H], initial_value=lambda a: rng.standard_normal(a.lengths) * 0.1)
    y_hat = ng.softmax(ng.dot(W2, ng.tanh(ng.dot(W1, X))))
    loss = ng.cross_entropy_multi(y_hat, Y) / ng.batch_size(y_hat)
    g1, g2 = ng.gradients(loss, [W1, W2])
    graph = compile_graph([loss, ng.doall([ng.assign(W1, W1 - 0.1 * g1), ng.assign(W2, W2 - 0.1 * g2)])],
                          optimize=False)
    return plan_memory(graph.order, graph.results)


def _assert_png(path):
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"


def test_memory_plot_writes_a_png(tmp_path):
    plan = _training_plan()
    assert len(plan.order) <= 200  # every step gets its op's label
    path = memory_plot(plan, tmp_path / "memory.png")
    assert path == tmp_path / "memory.png"
    _assert_png(path)
    assert [p.name for p in tmp_path.iterdir()] == ["memory.png"]  # no temporary file left behind


def test_memory_plot_accepts_anything_with_a_memory_plan_and_replaces_the_file(tmp_path):
    plan = _training_plan()
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    memory_plot(types.SimpleNamespace(memory_plan=plan), str(target), title="training step", max_labels=0)
    _assert_png(target)
    memory_plot(types.SimpleNamespace(memory_plan=lambda: plan), target)  # a method works too
    _assert_png(target)
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_memory_plot_rejects_what_has_no_plan(tmp_path):
    with pytest.raises(TypeError, match="MemoryPlan"):
        memory_plot(object(), tmp_path / "x.png")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    plan = _training_plan()
    with pytest.raises(OSError):
        memory_plot(plan, tmp_path / "missing" / "x.png")
    assert list(tmp_path.iterdir()) == []
