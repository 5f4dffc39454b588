"""Sub-graphs as values (``Graph``, ``call``), the one ``rebuild`` loop, and what depends on them:
verify and serialize descend, the executor compiles a sub-graph once, computations recompile when
metadata they were compiled from changes, and a closed transformer's computations refuse to run."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import CallArg, Graph, GraphError, Op, OpType, make, rebuild, toposort, walk

C = ng.make_axis(3, name="C")


def body_graph() -> tuple[Graph, Op]:
    p = ng.placeholder([C], name="p")
    W = ng.variable([C], 2.0, name="W")
    return Graph((p,), (ng.tanh(p) * W, p * 3.0)), W


def call(graph: Graph, *args: Op, index: int = 0) -> Op:
    return make(OpType.CALL, list(args), CallArg(graph, index))


def test_graph_checks_its_params() -> None:
    p, q = ng.placeholder([C]), ng.placeholder([C])
    with pytest.raises(GraphError, match="not params"):
        Graph((p,), (p + q,))
    with pytest.raises(GraphError, match="placeholders as params"):
        Graph((p * 2.0,), (p,))
    with pytest.raises(GraphError, match="twice"):
        Graph((p, p), (p,))
    with pytest.raises(GraphError, match="result"):
        Graph((p,), ())


def test_call_checks_its_inputs() -> None:
    graph, _ = body_graph()
    with pytest.raises(ng.AxesError, match="expected \\[C:3\\]"):
        call(graph, ng.placeholder([ng.make_axis(4, name="C")]))
    with pytest.raises(ng.AxesError, match="takes 1 input"):
        call(graph, ng.placeholder([C]), ng.placeholder([C]))
    with pytest.raises(ng.AxesError, match="out of range"):
        call(graph, ng.placeholder([C]), index=2)


def test_a_subgraph_compiles_once_and_runs_with_different_inputs() -> None:
    graph, W = body_graph()
    x = ng.placeholder([C], name="x")
    y0, y1 = call(graph, x + 1.0, index=0), call(graph, x, index=1)
    with ng.transformers.make_transformer() as t:
        f = t.computation([y0, y1], x)
        for xv in (np.arange(3.0), np.array([-1.0, 0.5, 4.0])):
            a, b = f(xv)
            np.testing.assert_allclose(a, np.tanh(xv + 1.0) * 2.0, rtol=1e-6)
            np.testing.assert_allclose(b, xv * 3.0, rtol=1e-6)
        assert list(t._subgraphs) == [graph]  # two call sites, one compiled sub-plan
        t.write_variable(W, np.full(3, -1.0))  # the body reads the transformer's variables
        np.testing.assert_allclose(f(np.zeros(3))[0], np.tanh(1.0) * -1.0, rtol=1e-6)


def test_the_memory_report_counts_the_called_subgraphs() -> None:
    p = ng.placeholder([C])
    e = ng.exp(p)
    graph = Graph((p,), (e / ng.sum(e),))  # exp's value is a temporary of the sub-plan's arena
    x = ng.placeholder([C], name="x")
    with ng.transformers.make_transformer() as t:
        f = t.computation(call(graph, x) * 2.0, x)
        inner = t._subgraphs[graph].memory_report()
        report = f.memory_report()
    assert inner.arena_bytes > 0
    assert report.subgraph_bytes == inner.arena_bytes + inner.workspace_bytes and "subgraphs" in str(report)


def test_walk_and_verify_descend_into_subgraphs() -> None:
    graph, W = body_graph()
    x = ng.placeholder([C])
    y = call(graph, x)
    order = walk([y])
    assert set(graph.order) <= set(order) and order.index(W) < order.index(y)
    assert W not in toposort([y])  # toposort stays the outer graph
    p = graph.params[0]
    bad = Op(OpType.TANH, [p], [ng.make_axis(5, name="Z")])  # axes inference would give [C:3]
    with pytest.raises(ng.VerifyError, match="tanh"):
        ng.verify([call(Graph((p,), (bad,)), x)])


def test_a_subgraph_round_trips_through_serialize_and_runs_twice() -> None:
    graph, _ = body_graph()
    x = ng.placeholder([C], name="x")
    y = call(graph, x * 2.0)
    y2, x2 = ng.deserialize(ng.serialize([y, x]))
    assert y2.op is OpType.CALL and y2.arg.graph is not graph and len(y2.arg.graph.order) == len(graph.order)
    with ng.transformers.make_transformer() as t:
        f = t.computation(y2, x2)
        for xv in (np.arange(3.0), np.full(3, 0.25)):
            np.testing.assert_allclose(f(xv), np.tanh(xv * 2.0) * 2.0, rtol=1e-6)


def test_rebuild_maps_every_op_and_keeps_unchanged_ones() -> None:
    x = ng.placeholder([C])
    a = ng.exp(x)
    b = (a + 1.0).named("b")
    order = toposort([b])
    assert all(k is v for k, v in rebuild(order).items())
    new = rebuild(order, lambda op, cur: ng.tanh(x) if op is a else cur)
    assert new[b].src[0] is ng.tanh(x) and new[b].meta.name == "b" and new[x] is x


def test_bn_fold_rules_are_pure() -> None:
    from ngraph_core.passes.bn_fold import RULES

    for _, fn in RULES.rules:
        assert fn.__closure__ is None, "a bn_fold rule closes over state; pass it through ctx"


def test_dce_linearizes_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    import ngraph_core.passes.dce as dce_module

    calls = []
    real = dce_module.linearize
    monkeypatch.setattr(dce_module, "linearize", lambda roots, *a: calls.append(1) or real(roots, *a))
    v = ng.variable([C], 1.0)
    dead = [ng.exp(v) * float(k) for k in range(40)]
    roots = [ng.doall([ng.assign(v, v + 1.0), *dead])]
    (out,) = dce_module.dce(roots)
    assert out.src == (ng.assign(v, v + 1.0),)
    assert len(calls) <= 3  # was one linearization per dropped element (40)


def test_a_computation_recompiles_when_its_metadata_changes() -> None:
    x = ng.placeholder([C], name="x")
    y = x * 2.0
    other = ng.placeholder([C]) * 5.0
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
        f(np.ones(3))
        ng.update_meta(other, add_labels=["unrelated"])
        assert not f.stale
        f(np.ones(3))
        assert f.recompiles == 0
        ng.update_meta(y, name="doubled")
        assert f.stale
        np.testing.assert_allclose(f(np.ones(3)), 2.0)
        assert f.recompiles == 1 and "doubled" in f.source


def test_a_closed_transformers_computation_refuses_to_run() -> None:
    x = ng.placeholder([C])
    t = ng.transformers.make_transformer()
    f = t.computation(x * 2.0, x)
    t.close()
    with pytest.raises(ng.NgraphError, match="closed"):
        f(np.ones(3))
