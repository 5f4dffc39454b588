"""Containers: Sequential (training, nesting, config), MergeSum, MergeBroadcast, Tree."""

from __future__ import annotations

import json

import numpy as np
import pytest
from layer_helper import axis, check_layer_gradients, random_input, run_float64, run_layer_test

import ngraph_core as ng
from neon import Sequential
from neon.containers import BranchNode, MergeBroadcast, MergeSum, Tree
from neon.initializers import Constant, GlorotUniform, Uniform, set_seed
from neon.layers import Activation, Affine, BatchNorm, Dropout, Flatten, LayerError, deserialize_layer, training_mode


def F(n: int = 5) -> ng.Axis:
    return axis("F", n)


def N(n: int = 8) -> ng.Axis:
    return axis("N", n)


def _values(t, layer):
    return [t.read_variable(v) for v in layer.variables]


# -- Sequential ----------------------------------------------------------------------------------

def test_sequential_run_layer_test_and_gradients() -> None:
    def make():
        return Sequential([Affine(4, Uniform(-1, 1), bias=Uniform(-1, 1), activation="tanh"),
                           [Affine(3, Uniform(-1, 1), batch_norm=True), Activation("softmax")]])

    run_layer_test(make, [F(), N()], (3, 8))
    check_layer_gradients(make, [F(3), N(4)])


def test_sequential_of_affines_trains_a_regression_to_low_loss() -> None:
    set_seed(0)
    rng = np.random.default_rng(0)
    x_value = rng.uniform(-1, 1, (3, 64))
    y_value = np.sin(2 * x_value[:1]) + 0.5 * x_value[1:2] * x_value[2:3]
    x, y = ng.placeholder([F(3), N(64)]), ng.placeholder([axis("Y", 1), N(64)])
    model = Sequential([Affine(32, GlorotUniform(), bias=Constant(0), activation="tanh"),
                        Affine(1, GlorotUniform(), bias=Constant(0))])
    with training_mode(True):
        out = model(x)
    loss = ng.mean(ng.square(ng.cast_axes(out, y.axes) - y))
    variables = model.trainable_variables
    assert [v.name for v in variables] == ["W", "b", "W", "b"]
    grads = ng.gradients(loss, variables)
    step = ng.doall([ng.assign(v, v - 0.5 * g) for v, g in zip(variables, grads)])
    with ng.transformers.make_transformer() as t:
        train = t.computation([loss, step], x, y)
        first = float(train(x_value, y_value)[0])
        for _ in range(400):
            last = float(train(x_value, y_value)[0])
    assert first > 0.1 and last < 0.01, (first, last)  # variance of the target: about 0.4


def test_sequential_flattens_nesting_and_collects_variables_and_updates() -> None:
    inner = Sequential([Affine(4, batch_norm=True), Dropout(0.5)])
    outer = Sequential([[Affine(6)], inner, [[Flatten()]]])
    assert len(outer) == 3 and outer[1] is inner and [type(layer).__name__ for layer in outer] == \
        ["Affine", "Sequential", "Flatten"]
    with training_mode(True):
        outer(ng.placeholder([F(), N()]))
    assert len(outer.variables) == 1 + 5 and len(outer.updates) == 2
    assert {type(layer).__name__ for layer in outer.walk()} >= {"Sequential", "Affine", "BatchNorm", "Dropout"}
    scope = [e.kind for e in outer.variables[-1].meta.scope]
    assert scope == ["Sequential", "Sequential", "Affine", "BatchNorm"]


def test_nested_config_round_trip_gives_the_same_model() -> None:
    fork = BranchNode(name="fork")
    model = Sequential([
        Affine(6, Uniform(-1, 1), bias=0.0, activation="relu", batch_norm=True),
        MergeSum([[Affine(6, activation="tanh"), Affine(6)], []]),
        MergeBroadcast([[Affine(2)], [Affine(3, activation="elu")]], merge="concat"),
        Dropout(0.9),
        Tree([[Affine(4), fork, Affine(3, activation="softmax")], [fork, Affine(2)]], alphas=[1.0, 0.5]),
    ], name="net")
    config = model.get_config()
    text = json.dumps(config)
    clone = Sequential.from_config(json.loads(text))
    assert json.dumps(clone.get_config()) == text
    assert deserialize_layer({"class_name": "Sequential", "config": config}).get_config() == config
    x = ng.placeholder([F(), N()])
    a, b = model(x), clone(x)
    assert [o.axes for o in a] == [o.axes for o in b]
    # the BranchNode shared by the two branches is still one object after the round trip
    tree = clone[-1]
    assert tree.branches[0][1] is tree.branches[1][0]
    with ng.transformers.make_transformer() as t:
        for va, vb in zip(model.variables, clone.variables):
            t.write_variable(vb, t.read_variable(va))
        value = random_input(x.axes)
        for ya, yb in zip(t.computation(list(a), x)(value), t.computation(list(b), x)(value)):
            np.testing.assert_allclose(ya, yb, rtol=1e-6)


def test_sequential_rejects_non_layers_and_a_tree_in_the_middle() -> None:
    with pytest.raises(LayerError, match="expected a layer or a list of layers, received: int"):
        Sequential([Affine(3), 4])
    model = Sequential([Tree([[Affine(2)], [Affine(3)]]), Affine(2)])
    with pytest.raises(LayerError, match="a Tree returns one output per branch"):
        model(ng.placeholder([F(), N()]))


# -- MergeSum --------------------------------------------------------------------------------------

def test_merge_sum_residual_value() -> None:
    block = MergeSum([[Affine(5, Uniform(-1, 1), bias=Uniform(-1, 1), activation="relu")], []])
    x = ng.placeholder([F(5), N(4)])
    out = block(x)
    branch = block.branches[0][0]
    assert out.axes.names == (branch.name, "N")  # conformed to branch 0's axes
    value = random_input(x.axes)
    (y,) = run_float64([out], x, value)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        W, b = t.read_variable(branch.linear.W), t.read_variable(branch.bias.b)
    np.testing.assert_allclose(y, np.maximum(W @ value + b[:, None], 0) + value, rtol=1e-10)


def test_merge_sum_layer_test_gradients_and_config() -> None:
    def make():
        return MergeSum([[Affine(4, Uniform(-1, 1), activation="tanh"), Affine(4, Uniform(-1, 1))],
                         [Affine(4, Uniform(-1, 1))], []])

    run_layer_test(make, [F(4), N()], (4, 8))
    check_layer_gradients(make, [F(4), N(3)])
    assert "merge" not in make().get_config()


def test_merge_sum_rejects_outputs_that_cannot_be_matched() -> None:
    block = MergeSum([[Affine(3)], [Affine(4)]], name="res")
    with pytest.raises(LayerError, match=r"res \(MergeSum\): expected branch 1's output to match branch 0's axes"):
        block(ng.placeholder([F(), N()]))
    with pytest.raises(LayerError, match=r"expected branch 1's output.*received: \[F:5, N:8\]"):
        MergeSum([[Affine(3)], []])(ng.placeholder([F(5), N()]))


# -- MergeBroadcast ------------------------------------------------------------------------------

def test_merge_broadcast_concat_values_and_axis() -> None:
    a = Affine(2, Uniform(-1, 1))
    b = Sequential([Affine(3, Uniform(-1, 1), activation="tanh")])
    block = MergeBroadcast([[a], [b], []], merge="concat", name="cat")
    x = ng.placeholder([F(4), N(6)])
    out = block(x)
    assert out.axes.names == ("cat", "N") and out.axes.lengths == (2 + 3 + 4, 6)
    value = random_input(x.axes)
    (y,) = run_float64([out], x, value)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        Wa, Wb = t.read_variable(a.linear.W), t.read_variable(b[0].linear.W)
    np.testing.assert_allclose(y, np.concatenate([Wa @ value, np.tanh(Wb @ value), value]), rtol=1e-10)


def test_merge_broadcast_concat_of_images_along_channels() -> None:
    x = ng.placeholder([axis("C", 2), axis("H", 3), axis("W", 3), N(2)])
    block = MergeBroadcast([[BatchNorm()], [Activation("relu")]], merge="concat")
    out = block(x)
    assert out.axes.lengths == (4, 3, 3, 2)
    value = random_input(x.axes)
    (y,) = run_float64([out], x, value)
    np.testing.assert_allclose(y[2:], np.maximum(value, 0))


def test_merge_broadcast_sum_and_helpers() -> None:
    def make():
        return MergeBroadcast([[Affine(3, Uniform(-1, 1))], [Affine(3, Uniform(-1, 1), activation="tanh")]],
                              merge="sum")

    run_layer_test(make, [F(), N()], (3, 8))
    check_layer_gradients(make, [F(3), N(2)])
    def make_concat():
        return MergeBroadcast([[Affine(3, Uniform(-1, 1))], [Affine(2, Uniform(-1, 1), activation="tanh")], []])

    run_layer_test(make_concat, [F(), N()], (10, 8))
    check_layer_gradients(make_concat, [F(3), N(2)])


def test_merge_broadcast_bad_configs() -> None:
    with pytest.raises(LayerError, match="merge to be 'concat' or 'sum', received: 'mul'"):
        MergeBroadcast([[Affine(2)]], merge="mul")
    with pytest.raises(LayerError, match="non-empty list of branches"):
        MergeBroadcast([])
    with pytest.raises(LayerError, match="feature axis to concatenate along"):
        MergeBroadcast([[], []])(ng.placeholder([N()]))


# -- Tree ----------------------------------------------------------------------------------------

def test_tree_branches_fork_off_the_trunk_and_combine_costs() -> None:
    fork = BranchNode()
    trunk_layer = Affine(4, Uniform(-1, 1), activation="tanh")
    head = Affine(3, Uniform(-1, 1))
    aux = Affine(2, Uniform(-1, 1))
    parallel = Affine(5, Uniform(-1, 1))
    tree = Tree([[trunk_layer, fork, head], [fork, aux], [parallel]], alphas=[1.0, 0.3, 0.1])
    x = ng.placeholder([F(3), N(4)])
    main, side, other = tree(x)
    assert (main.axes.lengths, side.axes.lengths, other.axes.lengths) == ((3, 4), (2, 4), (5, 4))
    assert len(tree.variables) == 4
    costs = [ng.sum(ng.square(o)) for o in (main, side, other)]
    total = tree.combine(costs)
    value = random_input(x.axes)
    out = run_float64([main, side, other, total, *costs], x, value)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        W1, Wh, Wa, Wp = (t.read_variable(layer.linear.W) for layer in (trunk_layer, head, aux, parallel))
    h = np.tanh(W1 @ value)
    np.testing.assert_allclose(out[0], Wh @ h, rtol=1e-10)
    np.testing.assert_allclose(out[1], Wa @ h, rtol=1e-10)
    np.testing.assert_allclose(out[2], Wp @ value, rtol=1e-10)
    np.testing.assert_allclose(out[3], out[4] + 0.3 * out[5] + 0.1 * out[6], rtol=1e-10)


def test_tree_errors() -> None:
    with pytest.raises(LayerError, match="2 numbers as alphas"):
        Tree([[Affine(2)], [Affine(3)]], alphas=[1.0])
    with pytest.raises(LayerError, match="branches with at least one layer"):
        Tree([[Affine(2)], []])
    stray = BranchNode(name="stray")
    with pytest.raises(LayerError, match="branch 1 to start at a BranchNode an earlier branch passed through"):
        Tree([[Affine(2)], [stray, Affine(3)]])(ng.placeholder([F(), N()]))
    with pytest.raises(LayerError, match="2 costs"):
        Tree([[Affine(2)], [Affine(3)]]).combine([ng.constant(1.0)])


def test_set_seed_makes_containers_reproducible() -> None:
    def build():
        set_seed(7)
        model = Sequential([Affine(3), MergeSum([[Affine(3)], []])])
        model(ng.placeholder([F(), N()]))
        with ng.transformers.make_transformer() as t:
            return _values(t, model)

    for a, b in zip(build(), build()):
        np.testing.assert_array_equal(a, b)
