"""What a Selection does: reading (names, ops, variables, outputs), set / freeze / unfreeze through
``update_meta``, run-time taps (values, removal, recompiles, sub-graphs, serialization) and
``replace`` (numbers of the rebuilt graph, typed errors)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import Graph
from ngraph_core.selectors import TAP_ATTR


def run(results, x_value, x):
    with ng.transformers.make_transformer() as t:
        return t.computation(results, x)(x_value)


# -- reading ------------------------------------------------------------------------------------------


def test_a_selection_reads_like_an_immutable_list(net: SimpleNamespace) -> None:
    sel = ng.select(net.out, "#conv1, relu")
    assert len(sel) == 3 and sel.query == "#conv1, relu" and sel.roots == [net.out]
    conv1, relu1, relu2 = sel
    assert isinstance(conv1, ng.ScopeMatch) and (relu1, relu2) == (net.relu1, net.relu2)
    assert sel[1] is net.relu1 and sel[1:] == [net.relu1, net.relu2]
    assert net.relu2 in sel and net.add2 not in sel and "relu" not in sel
    assert ng.select(net.out, "Conv")[0] in sel  # scope matches are equal by path
    assert ng.select(net.out, "Conv")[1] not in sel
    assert sel.names == ["model/conv1", "conv1_relu", "conv2_relu"]
    assert sel.paths == ["model/conv1", "model/conv1/conv1_relu", "model/conv2/conv2_relu"]
    assert "3 item(s)" in repr(sel) and "model/conv1" in repr(sel)
    with pytest.raises(TypeError):
        sel[0] = net.out  # type: ignore[index]


def test_ops_cover_scope_items_in_graph_order_each_once(net: SimpleNamespace) -> None:
    sel = ng.select(net.out, "#conv1, relu, #b")
    inside = [net.W1, net.conv1, net.b1, next(o for o in ng.select(net.out, "Conv > * broadcast")), net.add1,
              net.relu1]
    assert set(sel.ops) == set(inside) | {net.relu2, net.b2, net.b3}
    order = ng.ordered_ops([net.out])
    assert sel.ops == sorted(sel.ops, key=order.index) and len(sel.ops) == len(set(sel.ops))
    assert sel.variables == [v for v in sel.ops if v.op is ng.OpType.VARIABLE]
    assert set(sel.variables) == {net.W1, net.b1, net.b2, net.b3}


def test_outputs_are_the_ops_leaving_each_scope(net: SimpleNamespace) -> None:
    assert ng.select(net.out, "#conv1").outputs == [net.relu1]
    assert ng.select(net.out, "Conv").outputs == [net.relu1, net.relu2]
    assert ng.select(net.out, "Sequential").outputs == [net.add3]
    assert ng.select(net.out, "relu, Pool").outputs == [net.relu1, net.pool1, net.relu2]
    # a root inside the scope is an output even though nothing outside reads it
    assert ng.select([net.out, net.conv1], "#conv1").outputs == [net.conv1, net.relu1]


# -- set, freeze, unfreeze --------------------------------------------------------------------------------


def test_set_writes_attributes_through_update_meta(net: SimpleNamespace) -> None:
    with ng.transformers.make_transformer() as t:
        f = t.computation(net.out, net.x)
        sel = ng.select(net.out, "Conv variable")
        assert sel.set(lr_scale=0.1, weight_decay=0) is sel
        assert {v for v in ng.select(net.out, "[lr_scale=0.1][weight_decay=0]")} == {net.W1, net.b1, net.W2, net.b2}
        f(net.x_value)
        assert f.recompiles == 1  # metadata changed: the computation rebuilt its plan
        sel.set(lr_scale=None)
        assert list(ng.select(net.out, "[lr_scale]")) == []
    ng.select(net.out, "Pool").set(note="pooled")  # a scope item: every op inside
    assert list(ng.select(net.out, "[note=pooled]")) == [net.pool1]
    with pytest.raises(ng.SelectorError, match="reserved"):
        sel.set(tap=print)


def test_freeze_and_unfreeze_swap_the_labels(net: SimpleNamespace) -> None:
    sel = ng.select(net.out, "Conv > Pool variable")
    assert sel.freeze() == [net.W1, net.b1]
    assert {"frozen", "variable", "weight"} <= net.W1.meta.labels and "trainable" not in net.W1.meta.labels
    assert sel.freeze() == []  # already frozen
    assert set(ng.select(net.out, "variable.trainable")) == {net.W2, net.b2, net.W3, net.b3}
    assert ng.select(net.out, "Conv").unfreeze() == [net.W1, net.b1]
    assert "trainable" in net.W1.meta.labels and "frozen" not in net.W1.meta.labels


# -- taps -------------------------------------------------------------------------------------------------


def test_taps_see_the_values_the_ops_compute(net: SimpleNamespace) -> None:
    seen: list[tuple[str, np.ndarray]] = []
    with ng.transformers.make_transformer() as t:
        f = t.computation(net.out, net.x)
        relu1, add2, out = t.computation([net.relu1, net.add2, net.out], net.x)(net.x_value)
        y0 = f(net.x_value)
        handle = ng.select(net.out, "#conv1_relu, #conv2_bias").tap(lambda name, a: seen.append((name, a)))
        y = f(net.x_value)
        assert f.recompiles == 1
        assert [name for name, _ in seen] == ["conv1_relu", "conv2_bias"]
        np.testing.assert_allclose(seen[0][1], relu1, rtol=1e-6)
        np.testing.assert_allclose(seen[1][1], add2, rtol=1e-6)  # fused with its relu otherwise
        assert np.array_equal(y, y0) and np.allclose(y, out)  # the user's results, and only them
        assert isinstance(y, np.ndarray) and y.shape == (5, 3)
        f(net.x_value)
        assert len(seen) == 4  # called on every run
        handle.remove()
        seen.clear()
        f(net.x_value)
        assert seen == [] and f.recompiles == 2
        handle.remove()  # idempotent


def test_a_tap_gets_its_own_copy_and_removal_takes_out_only_that_tap(net: SimpleNamespace) -> None:
    calls: list[str] = []

    def spoil(name: str, a: np.ndarray) -> None:
        calls.append("spoil")
        a[...] = -1.0

    def record(name: str, a: np.ndarray) -> None:
        calls.append(f"record {float(a.min()) >= 0}")

    with ng.transformers.make_transformer() as t:
        f = t.computation([net.out, net.relu1], net.x)
        first = ng.select(net.out, "#conv1").tap(spoil)  # conv1's output is relu1, also a result here
        ng.select(net.out, "#conv1_relu").tap(record)
        again = ng.select(net.out, "#conv1_relu").tap(record)  # the same function twice
        _, relu1 = f(net.x_value)
        assert calls == ["spoil", "record True", "record True"] and relu1.min() >= 0
        first.remove()
        again.remove()
        calls.clear()
        f(net.x_value)
        assert calls == ["record True"]
    assert len(net.relu1.meta.attrs[TAP_ATTR]) == 1


def test_taps_inside_a_sub_graph_run_with_each_call(net: SimpleNamespace) -> None:
    F, N = net.axes.F, net.axes.N
    p = ng.placeholder([F, N], name="p")
    mid = (p * 2.0).named("inner_mid")
    body = Graph((p,), (ng.sigmoid(mid).named("inner_out"),))
    y = ng.call(body, net.out)
    seen = []
    with ng.transformers.make_transformer() as t:
        f = t.computation([y, net.out], net.x)
        f(net.x_value)
        with ng.select(y, "#inner_mid").tap(lambda name, a: seen.append(a)):
            value, out = f(net.x_value)
        assert len(seen) == 1 and np.allclose(seen[0], 2 * out) and np.allclose(value, 1 / (1 + np.exp(-2 * out)))
        f(net.x_value)
        assert len(seen) == 1  # removed on leaving the block


def test_serialize_skips_taps_and_keeps_other_attributes(net: SimpleNamespace) -> None:
    ng.select(net.out, "Conv variable").set(lr_scale=0.5)
    ng.select(net.out, "Conv").tap(lambda name, a: None)
    (out,) = ng.deserialize(ng.serialize(net.out))
    assert all(TAP_ATTR not in op.meta.attrs for op in ng.ordered_ops([out]))
    assert len(ng.select(out, "[lr_scale=0.5]")) == 4


# -- replace ----------------------------------------------------------------------------------------------


def test_replace_rebuilds_the_roots_with_the_replacements(net: SimpleNamespace) -> None:
    (tripled,) = ng.select(net.out, "#out").replace(lambda op: op.src[0] * 3.0)
    old, new = run([net.out, tripled], net.x_value, net.x)
    np.testing.assert_allclose(new, 1.5 * old, rtol=1e-6)
    assert net.out.op is ng.OpType.MUL and ng.select(net.out, "relu").names == ["conv1_relu", "conv2_relu"]


def test_replacing_a_scope_replaces_its_outputs(net: SimpleNamespace) -> None:
    (out,) = ng.select(net.out, "Pool").replace(lambda op: op * 0.0)
    # zero pooled maps: conv2 sees only its bias (-0.05, cut by relu), so fc gives its bias 0.2
    np.testing.assert_allclose(run(out, net.x_value, net.x), np.full((5, 3), 2 * np.tanh(0.2)), rtol=1e-6)


def test_replacements_compose_along_the_graph(net: SimpleNamespace) -> None:
    (out,) = ng.select(net.out, "relu").replace(lambda op: ng.tanh(op.src[0]))
    assert ng.select(out, "relu").names == []
    # the same network built by hand with tanh activations
    h1 = ng.tanh(net.add1)
    h2 = ng.tanh(ng.convolution(ng.pooling(h1, 2), net.W2, padding=1) + net.b2)
    expected = ng.tanh(ng.dot(net.W3, h2) + net.b3) * 2.0
    got, want = run([out, expected], net.x_value, net.x)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # relu2's replacement was built on relu1's (fn receives the op with rewritten sources), so two
    # tanh ops read another: relu2's replacement and the output's
    assert len(ng.select(out, "tanh:has(tanh)")) == 2 and "out_tanh" in ng.select(out, "tanh:has(tanh)").names


def test_bad_replacements_raise_typed_errors_naming_the_op(net: SimpleNamespace) -> None:
    sel = ng.select(net.out, "#conv2_relu")
    with pytest.raises(ng.AxesError, match="conv2_relu.*expected an op with axes"):
        sel.replace(lambda op: ng.sum(op))
    with pytest.raises(ng.DTypeError, match="conv2_relu.*float32"):
        sel.replace(lambda op: ng.cast(op, "float64"))
    with pytest.raises(ng.SelectorError, match="expected an Op, received int"):
        sel.replace(lambda op: 3)
    p = ng.placeholder([net.axes.F, net.axes.N], name="p")
    y = ng.call(Graph((p,), (ng.sigmoid(p * 2.0).named("inner"),)), net.out)
    with pytest.raises(ng.SelectorError, match="inside a sub-graph"):
        ng.select(y, "#inner").replace(lambda op: op)
    with pytest.raises(ng.SelectorError, match="expected a callable"):
        sel.tap("print")  # type: ignore[arg-type]
