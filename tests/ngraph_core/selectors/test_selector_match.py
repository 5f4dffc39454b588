"""Selector semantics on hand-built graphs whose answers are known exactly: types, names, labels and
groups, attributes, each combinator, :not/:has, unions, the two seed queries, and the sources
``select`` accepts (ops, computations, sub-graphs, deserialized graphs)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import Graph


def names(sel: ng.Selection) -> list[str]:
    return sel.names


def ops(net: SimpleNamespace, *attrs: str) -> set[ng.Op]:
    return {getattr(net, a) for a in attrs}


def pick(net: SimpleNamespace, query: str) -> ng.Selection:
    return ng.select(net.out, query)


# -- the seed queries (docs/selectors.md) ---------------------------------------------------------


def test_variables_of_convolutions_followed_by_pooling(net: SimpleNamespace) -> None:
    sel = pick(net, "Conv > Pool variable")
    assert list(sel) == [net.W1, net.b1]  # conv2 (a Conv subclass) is not followed by pooling
    assert names(sel) == ["W", "b"]


def test_elementwise_ops_outside_convolutions(net: SimpleNamespace) -> None:
    sel = pick(net, ".elementwise:not(Conv *)")
    assert list(sel) == [net.add3, net.tanh, net.out]


# -- simple selectors -------------------------------------------------------------------------------


def test_types_match_scopes_by_class_or_base_class_and_ops_by_kind(net: SimpleNamespace) -> None:
    assert names(pick(net, "Conv")) == ["model/conv1", "model/conv2"]  # conv2 is a SepConv(Conv)
    assert names(pick(net, "SepConv")) == ["model/conv2"]
    assert names(pick(net, "Layer")) == ["model", "model/conv1", "model/pool1", "model/conv2", "model/fc"]
    assert set(pick(net, "conv")) == ops(net, "conv1", "conv2")
    assert set(pick(net, "variable")) == ops(net, "W1", "b1", "W2", "b2", "W3", "b3")
    with pytest.warns(ng.SelectorWarning, match="type Unknown names no layer type of this graph"):
        assert pick(net, "Unknown").names == []
    everything = pick(net, "*")
    assert len(everything) == len(ng.ordered_ops([net.out])) and all(isinstance(o, ng.Op) for o in everything)
    scope = pick(net, "Pool")[0]
    assert isinstance(scope, ng.ScopeMatch) and (scope.name, scope.kind) == ("pool1", "Pool")
    assert scope.ops == (net.pool1,)


def test_a_misspelt_layer_type_warns_with_the_closest_types(net: SimpleNamespace) -> None:
    """The issue: ``"Afine variable"`` selected 0 items silently."""
    with pytest.warns(ng.SelectorWarning, match=r'"Cnov variable": type Cnov names no layer type of this graph, so '
                                                r"it selects nothing there; did you mean Conv\? the graph's layer "
                                                r"types: .*Conv, .*; hint: Capitalized types are layer classes"):
        assert pick(net, "Cnov variable").names == []
    with pytest.warns(ng.SelectorWarning, match="type Pol names") as caught:  # inside :not(...) too, once per type
        pick(net, "variable:not(Pol *), Pol")
    assert len(caught) == 1
    with pytest.raises(ng.SelectorError, match="type Cnov names no layer type.*did you mean Conv"):
        ng.select(net.out, "Cnov variable", unknown_types="error")
    with pytest.raises(ng.SelectorError, match=r"expected unknown_types among \('warn', 'error', 'ignore'\)"):
        ng.select(net.out, "Conv", unknown_types="loud")


def test_known_types_and_op_kinds_do_not_warn(net: SimpleNamespace, recwarn: pytest.WarningsRecorder) -> None:
    assert pick(net, "Layer variable, SepConv, conv, #fc").names  # a base class, a subclass, an op kind, a name
    assert ng.select(net.out, "Nowhere", unknown_types="ignore").names == []
    assert not [w for w in recwarn if issubclass(w.category, ng.SelectorWarning)]


def test_names_match_ops_and_scopes(net: SimpleNamespace) -> None:
    assert names(pick(net, "#conv1")) == ["model/conv1"]
    assert list(pick(net, "#W")) == [net.W3, net.W1, net.W2]  # graph order: the dot reads fc's W first
    assert list(pick(net, "#conv1_relu")) == [net.relu1]
    assert list(pick(net, "relu#conv2_relu")) == [net.relu2]
    assert list(pick(net, "add#conv2_relu")) == []
    assert list(pick(net, '#"conv1_relu"')) == [net.relu1]


def test_labels_and_op_groups(net: SimpleNamespace) -> None:
    assert set(pick(net, ".bias")) == ops(net, "b1", "b2", "b3")
    assert set(pick(net, ".weight.trainable")) == ops(net, "W1", "W2", "W3")
    assert set(pick(net, ".contraction")) == {net.dot3}
    assert set(pick(net, ".nn")) == ops(net, "conv1", "conv2", "pool1")
    assert set(pick(net, ".elementwise")) == ops(net, "add1", "relu1", "add2", "relu2", "add3", "tanh", "out")
    leaves = pick(net, ".leaf")
    assert {o.op.value for o in leaves} == {"variable", "placeholder", "constant"} and len(leaves) == 8
    assert len(pick(net, ".movement")) == 4  # three bias broadcasts and the scalar's
    assert pick(net, "Conv.bias").names == []  # scopes carry no labels


def test_attribute_tests_on_ops(net: SimpleNamespace) -> None:
    assert set(pick(net, "[name^=conv1_]")) == ops(net, "conv1", "add1", "relu1")
    assert set(pick(net, "[name$=_relu]")) == ops(net, "relu1", "relu2")
    assert set(pick(net, "[name*=bia]")) == ops(net, "add1", "add2", "add3")
    assert set(pick(net, "[kind=relu]")) == ops(net, "relu1", "relu2")
    assert set(pick(net, "variable[axes=K]")) == {net.b1}
    assert set(pick(net, "variable[shape=5]")) == {net.b3}
    assert set(pick(net, "[axes='F,N']")) == {net.dot3, net.add3, net.tanh, net.out} | {
        o for o in pick(net, "broadcast") if o.axes.names == ("F", "N")}
    assert set(pick(net, "variable[scope=model/conv2]")) == ops(net, "W2", "b2")
    assert len(pick(net, "[dtype=float32]")) == len(ng.ordered_ops([net.out]))
    assert list(pick(net, "*[dtype!=float32]")) == []
    assert len(pick(net, "[dtype!=float32]")) == 5  # untyped: the five scopes, which have no dtype
    ng.update_meta(net.W2, attrs={"lr_scale": 0.1, "groups": (1, 2)})
    assert list(pick(net, "[lr_scale=0.1]")) == [net.W2]
    assert list(pick(net, "[lr_scale]")) == [net.W2]
    assert list(pick(net, "[groups='1,2']")) == [net.W2]
    assert set(pick(net, "variable[lr_scale!=0.1]")) == ops(net, "W1", "b1", "b2", "W3", "b3")  # absent counts


def test_attribute_tests_on_scopes_read_the_callback(net: SimpleNamespace) -> None:
    configs = {"conv1": {"nout": 3, "fshape": (3, 3, 3)}, "conv2": {"nout": 3}, "fc": {"nout": 5}}
    seen = []

    def scope_attrs(path):
        seen.append(path)
        return configs.get(path[-1].name, {})

    sel = ng.select(net.out, "Affine[nout=5], Conv[fshape='3,3,3']", scope_attrs=scope_attrs)
    assert names(sel) == ["model/conv1", "model/fc"]
    assert names(ng.select(net.out, "[path^=model/c]")) == ["model/conv1", "model/conv2"]
    assert names(ng.select(net.out, "Layer[kind=Pool]")) == ["model/pool1"]
    assert names(pick(net, "Affine[nout=5]")) == []  # without the callback scopes have name, kind, path only
    with pytest.raises(ng.SelectorError, match="expected a mapping"):
        ng.select(net.out, "Conv[nout]", scope_attrs=lambda path: 3)


# -- combinators ----------------------------------------------------------------------------------


def test_descendant_means_inside_a_scope(net: SimpleNamespace) -> None:
    assert set(pick(net, "Conv variable")) == ops(net, "W1", "b1", "W2", "b2")
    assert names(pick(net, "Sequential Conv")) == ["model/conv1", "model/conv2"]
    assert names(pick(net, "Conv Conv")) == []  # a scope is not inside itself
    assert list(pick(net, "relu *")) == []  # an op contains nothing
    assert set(pick(net, "Sequential Affine *")) == ops(net, "W3", "dot3", "b3", "add3") | {
        o for o in pick(net, "broadcast") if o.meta.scope and o.meta.scope[-1].name == "fc"}
    assert set(pick(net, "#model relu")) == ops(net, "relu1", "relu2")


def test_child_combinator_keeps_the_left_subject(net: SimpleNamespace) -> None:
    assert names(pick(net, "Conv > Pool")) == ["model/conv1"]
    assert names(pick(net, "Conv > Affine")) == ["model/conv2"]
    assert list(pick(net, "relu > pool")) == [net.relu1]
    assert list(pick(net, "conv > Pool")) == []  # the conv op feeds the bias add, not the pool
    assert list(pick(net, "variable > conv")) == [net.W1, net.W2]
    assert names(pick(net, "Conv > *")) == ["model/conv1", "model/conv2"]
    assert names(pick(net, "Sequential > Conv")) == []  # a container is not followed by what it holds
    assert names(pick(net, "Conv > Sequential")) == []
    assert names(pick(net, "Sequential > tanh")) == ["model"]
    assert list(pick(net, "pool > Conv")) == [net.pool1]


def test_parent_combinator(net: SimpleNamespace) -> None:
    assert names(pick(net, "Pool < Conv")) == ["model/pool1"]
    assert names(pick(net, "Conv < Pool")) == ["model/conv2"]
    assert names(pick(net, "Affine < Conv")) == ["model/fc"]
    assert list(pick(net, "tanh < Affine")) == [net.tanh]
    assert list(pick(net, "conv < placeholder")) == [net.conv1]
    assert list(pick(net, "tanh < Pool")) == []


def test_transitive_combinators(net: SimpleNamespace) -> None:
    assert names(pick(net, "Conv >> Affine")) == ["model/conv1", "model/conv2"]
    assert names(pick(net, "Conv >> Pool")) == ["model/conv1"]
    assert set(pick(net, "variable >> Pool")) == ops(net, "W1", "b1")
    assert list(pick(net, "placeholder >> #out")) == [net.x]
    assert names(pick(net, "Affine << Pool")) == ["model/fc"]
    assert names(pick(net, "Pool << Affine")) == []
    assert set(pick(net, "relu << #conv1_conv")) == ops(net, "relu1", "relu2")
    assert names(pick(net, "Sequential >> Conv")) == []


def test_combinators_read_left_to_right(net: SimpleNamespace) -> None:
    # (Conv >> Affine) variable: the variables of both convs; (Conv > Pool) variable: conv1's only
    assert set(pick(net, "Conv >> Affine variable")) == ops(net, "W1", "b1", "W2", "b2")
    assert set(pick(net, "Conv > Pool .bias")) == {net.b1}
    assert names(pick(net, "Sequential Conv > Affine")) == ["model/conv2"]


# -- pseudo-classes and unions ----------------------------------------------------------------------


def test_not_and_has(net: SimpleNamespace) -> None:
    assert names(pick(net, "Layer:not(Conv)")) == ["model", "model/pool1", "model/fc"]
    assert names(pick(net, "Layer:has(conv)")) == ["model", "model/conv1", "model/conv2"]
    assert names(pick(net, "Sequential:has(Pool)")) == ["model"]
    assert names(pick(net, "Pool:has(Pool)")) == []  # something *inside* must match
    assert names(pick(net, "Conv:has(variable[shape=3])")) == ["model/conv1", "model/conv2"]
    assert list(pick(net, "relu:has(Pool)")) == [net.relu2]  # its inputs reach pool1's ops
    assert list(pick(net, "tanh:has(#conv1_conv)")) == [net.tanh]
    assert list(pick(net, "conv:has(conv)")) == [net.conv2]
    assert set(pick(net, "variable:not(Conv *)")) == ops(net, "W3", "b3")
    assert list(pick(net, "relu:not(:has(Pool))")) == [net.relu1]
    net.W1.labeled("frozen")
    assert names(pick(net, "Conv:not(:has(.frozen))")) == ["model/conv2"]


def test_unions_come_out_in_graph_order_each_once(net: SimpleNamespace) -> None:
    assert names(pick(net, "Pool, Conv")) == ["model/conv1", "model/pool1", "model/conv2"]
    assert list(pick(net, "tanh, relu, tanh")) == [net.relu1, net.relu2, net.tanh]
    sel = pick(net, "#conv1, #conv1_relu, Conv")
    assert names(sel) == ["model/conv1", "conv1_relu", "model/conv2"]


# -- sources ------------------------------------------------------------------------------------------


def test_sources_ops_lists_computations_and_graphs(net: SimpleNamespace) -> None:
    assert list(ng.select([net.relu1, net.relu2], "relu")) == [net.relu1, net.relu2]
    assert list(ng.select(net.relu1, "relu")) == [net.relu1]  # only what the roots reach
    assert ng.select(net.relu1, "relu").roots == [net.relu1]
    with ng.transformers.make_transformer() as t:
        f = t.computation(net.out, net.x)
        assert list(ng.select(f, "Conv > Pool variable")) == [net.W1, net.b1]
    body_in = ng.placeholder([net.axes.F, net.axes.N], name="h")
    with ng.name_scope("head", kind="Head"):
        body = Graph((body_in,), (ng.sigmoid(body_in).named("inner"),))
    assert names(ng.select(body, "Head sigmoid")) == ["inner"]
    called = ng.call(body, net.out)
    assert names(ng.select(called, "Head *")) == ["inner"]  # the universe includes sub-graph bodies
    for bad in ("relu", 3, [net.out, "x"], {"a": net.out}):
        with pytest.raises(ng.SelectorError, match="expected"):
            ng.select(bad, "relu")


def test_selectors_work_on_a_deserialized_graph(net: SimpleNamespace) -> None:
    out, x = ng.deserialize(ng.serialize([net.out, net.x]))
    assert out is not net.out
    assert names(ng.select(out, "Conv > Pool variable")) == ["W", "b"]
    assert names(ng.select(out, ".elementwise:not(Conv *)")) == ["fc_bias", "out_tanh", "out"]
    assert names(ng.select(out, "Conv")) == ["model/conv1", "model/conv2"]  # class hierarchies survive
    w1 = ng.select(out, "#conv1 variable.weight")[0]
    with ng.transformers.make_transformer() as t:
        assert np.array_equal(t.read_variable(w1), t.read_variable(net.W1))


def test_thousands_of_ops_with_transitive_queries() -> None:
    # a chain of 600 blocks of 5 ops, each block a scope: every query below would be quadratic
    # (millions of walks) if reachability were recomputed per item
    D = ng.make_axis(4, name="D")
    h = ng.placeholder([D], name="in")
    for i in range(600):
        with ng.name_scope(f"blk{i}", kind="Block"):
            h = ng.tanh(ng.exp(h * 0.5) + ng.variable([D], 0.0, name=f"v{i}"))
    last = h.named("last")
    assert len(ng.ordered_ops([last])) > 3000
    assert len(ng.select(last, "Block >> tanh#last")) == 599  # the last block holds it
    assert len(ng.select(last, "variable >> #last")) == 600
    assert len(ng.select(last, "Block << #in")) == 600
    assert len(ng.select(last, "tanh:has(#in)")) == 600
    assert names(ng.select(last, "#blk3 > Block")) == ["blk3"]
    assert names(ng.select(last, "Block < #blk3")) == ["blk4"]
