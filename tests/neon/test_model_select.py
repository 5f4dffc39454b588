"""``Model.select``: queries over a real Conv/Pool/Affine model, freezing, rate attributes, and standing taps."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.costs import CrossEntropyMulti, SumSquared
from neon.data import ArrayIterator
from neon.initializers import Constant, set_seed
from neon.layers import Affine, Conv, Pool
from neon.model import Model, ModelError
from neon.optimizers import GradientDescentMomentum


def cnn(seed: int = 0) -> Model:
    set_seed(seed)
    model = Model([Conv((3, 3, 4), bias=Constant(0.0), activation="relu"), Pool((2, 2)),
                   Conv((3, 3, 4), bias=Constant(0.0), activation="relu"),
                   Affine(3, bias=Constant(0.0), activation="softmax")])
    model.build((1, 8, 8), batch_size=4)
    return model


def images(n: int = 8, seed: int = 0) -> ArrayIterator:
    rng = np.random.default_rng(seed)
    return ArrayIterator(rng.normal(size=(n, 64)).astype("float32"), rng.integers(0, 3, n), nclass=3, batch_size=4,
                         lshape=(1, 8, 8))


def scope_names(op: ng.Op) -> list[str]:
    return [entry.name for entry in op.meta.scope]


def test_conv_followed_by_pool_selects_exactly_the_first_convs_variables() -> None:
    model = cnn()
    first, second = model.layers[0], model.layers[2]
    selected = model.select("Conv > Pool variable")
    assert {id(v) for v in selected.variables} == {id(v) for v in first.variables}
    assert len(first.variables) == 2  # the filter and the bias
    assert not {id(v) for v in selected.variables} & {id(v) for v in second.variables}


def test_elementwise_outside_conv_excludes_every_conv_op_and_finds_the_affine_bias() -> None:
    model = cnn()
    selected = model.select(".elementwise:not(Conv *)")
    assert len(selected) > 0
    assert not any(name.startswith("Conv_") for op in selected for name in scope_names(op))
    bias_adds = [op for op in selected if op.op is ng.OpType.ADD and scope_names(op)[-2:] == ["Affine_0", "Bias_0"]]
    assert len(bias_adds) == 1
    # and the relu inside the first conv is elementwise, but inside a Conv
    relus = model.select("Conv .elementwise")
    assert any(op.op is ng.OpType.MAXIMUM or "Activation_0" in scope_names(op) for op in relus)


def test_attribute_tests_read_the_layer_config() -> None:
    model = cnn()
    assert model.select("Affine[nout=3]").names == ["Sequential_0/Affine_0"]
    assert len(model.select("Affine[nout=10]")) == 0
    assert model.select("Pool > Conv").names == ["Sequential_0/Pool_0"]


def test_select_needs_a_built_model_and_a_wellformed_query() -> None:
    with pytest.raises(ModelError, match=r"hint: call model.build\(input_shape\)"):
        Model([Affine(3)]).select("variable")
    with pytest.raises(ng.SelectorError, match="column"):
        cnn().select("Conv >")


def test_a_layer_type_the_model_lacks_warns_once_or_is_an_error() -> None:
    model = cnn()
    with pytest.warns(ng.SelectorWarning, match="type Conc names no layer type.*did you mean Conv") as caught:
        assert len(model.select("Conc variable")) == 0
    assert len(caught) == 1
    with pytest.raises(ng.SelectorError, match="did you mean Conv"):
        model.select("Conc variable", unknown_types="error")


def test_freezing_a_selection_keeps_those_weights_bit_identical_through_fit() -> None:
    model = cnn()
    read = model.transformer.read_variable
    frozen = model.select("Conv > Pool variable")
    before = {id(v): read(v).copy() for v in model.variables}
    assert len(frozen.freeze()) == 2
    model.fit(images(), CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), 3, progress=False)
    for var in model.variables:
        if any(var is f for f in frozen.variables):
            assert np.array_equal(read(var), before[id(var)])
        elif "weight" in var.meta.labels:
            assert not np.array_equal(read(var), before[id(var)])
    frozen.unfreeze()
    model.fit(images(), CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), 4, progress=False)
    assert not np.array_equal(read(frozen.variables[0]), before[id(frozen.variables[0])])


# -- learning rates per group and per variable, on a tiny MLP in float64 ---------------------------------------
X = np.random.default_rng(1).normal(size=(6, 4))
Y = np.random.default_rng(2).normal(size=(6, 3))


def one_step(optimizer, setup=None) -> tuple[Model, dict[str, np.ndarray]]:
    """A fresh MLP (same seed every time), one SGD step on one batch; the change of every variable by path."""
    set_seed(3)
    model = Model([Affine(5, bias=Constant(0.1), activation="relu"), Affine(3, bias=Constant(0.0))],
                  float_dtype="float64")
    model.build((4,), batch_size=6)
    if setup is not None:
        setup(model)
    read = model.transformer.read_variable
    keys = ["/".join([*scope_names(v), v.name]) for v in model.variables]
    before = [read(v).copy() for v in model.variables]
    model.fit(ArrayIterator(X, Y, batch_size=6), SumSquared(), optimizer, 1, progress=False)
    return model, {k: read(v) - b for k, v, b in zip(keys, model.variables, before)}


GROUP = "#Affine_1 variable"


def in_group(key: str) -> bool:
    return "/Affine_1/" in key


def test_group_lr_of_zero_leaves_the_group_unchanged() -> None:
    _, delta = one_step(GradientDescentMomentum(0.1, groups={GROUP: {"lr": 0.0}}))
    assert all(not np.any(d) for k, d in delta.items() if in_group(k))
    assert all(np.any(d) for k, d in delta.items() if not in_group(k))


@pytest.mark.parametrize("how", ["group", "lr_scale"])
def test_a_tenth_of_the_rate_gives_exactly_a_tenth_of_the_update(how: str) -> None:
    _, base = one_step(GradientDescentMomentum(0.1))
    if how == "group":
        _, scaled = one_step(GradientDescentMomentum(0.1, groups={GROUP: {"lr": 0.01}}))
    else:
        _, scaled = one_step(GradientDescentMomentum(0.1), setup=lambda m: m.select(GROUP).set(lr_scale=0.1))
    assert len(base) == 4
    for key, d in base.items():
        assert np.any(d)
        expected = d / 10 if in_group(key) else d
        np.testing.assert_allclose(scaled[key], expected, rtol=1e-12, atol=1e-15)


def test_an_attribute_set_after_fit_rebuilds_the_training_step() -> None:
    model, _ = one_step(GradientDescentMomentum(0.1))
    model.select("#Affine_0 variable").set(lr_scale=0)  # compiled already: the step must be rebuilt
    read = model.transformer.read_variable
    before = [read(v).copy() for v in model.variables]
    model.fit(ArrayIterator(X, Y, batch_size=6), SumSquared(), model.optimizer, 1, progress=False)
    changed = [bool(np.any(read(v) != b)) for v, b in zip(model.variables, before)]
    assert changed == [False, False, True, True]


# -- standing taps ------------------------------------------------------------------------------------------------
def first_layer_numpy(model: Model, x: np.ndarray) -> np.ndarray:
    """relu(W x + b) of the first Affine, batch first, from its weights."""
    w, b = (model.transformer.read_variable(v) for v in model.layers[0].variables)
    x = x.astype(np.float32).astype(np.float64)  # the data iterators hold float32 samples
    return np.maximum(x @ w.T + b, 0.0)


def test_a_tap_sees_the_layer_output_in_predict_fit_and_other_batch_sizes() -> None:
    set_seed(4)
    model = Model([Affine(5, bias=Constant(0.1), activation="relu"), Affine(3, bias=Constant(0.0))],
                  float_dtype="float64")
    model.build((4,), batch_size=6)
    seen: list[np.ndarray] = []
    handle = model.select("#Affine_0").tap(lambda name, value: seen.append(value))
    expected = first_layer_numpy(model, X)

    model.predict(X, batch_size=6)
    assert len(seen) == 1 and seen[0].shape == (5, 6)  # the op's axes: (Affine_0, N)
    np.testing.assert_allclose(seen[0].T, expected, rtol=1e-12)

    seen.clear()
    model.predict(X, batch_size=4)  # a graph built after the tap: 4 + 2
    assert [s.shape for s in seen] == [(5, 4), (5, 2)]
    np.testing.assert_allclose(np.concatenate([s.T for s in seen]), expected, rtol=1e-12)

    seen.clear()
    model.fit(ArrayIterator(X, Y, batch_size=3), SumSquared(), GradientDescentMomentum(0.0), 1, progress=False)
    assert [s.shape for s in seen] == [(5, 3), (5, 3)]  # the training graph, forward values
    np.testing.assert_allclose(np.concatenate([s.T for s in seen]), expected, rtol=1e-12)  # lr 0: same weights

    handle.remove()
    seen.clear()
    model.predict(X, batch_size=6)
    model.fit(ArrayIterator(X, Y, batch_size=3), SumSquared(), GradientDescentMomentum(0.0), 2, progress=False)
    assert seen == [] and not handle.active


def test_a_tap_added_after_fit_fires_in_the_next_fit() -> None:
    model, _ = one_step(GradientDescentMomentum(0.1))
    calls: list[tuple[str, tuple]] = []
    handle = model.select("relu").tap(lambda name, value: calls.append((name, value.shape)))
    model.fit(ArrayIterator(X, Y, batch_size=6), SumSquared(), model.optimizer, 2, progress=False)
    assert [shape for _, shape in calls] == [(5, 6)] * 2  # two epochs of one batch
    handle.remove()


def test_model_selection_reads_like_a_selection() -> None:
    model = cnn()
    sel = model.select("Conv")
    assert len(sel) == 2 and sel.names == ["Sequential_0/Conv_0", "Sequential_0/Conv_1"]
    assert sel[0].kind == "Conv" and sel[0] in sel
    assert len(sel.outputs) == 2  # each conv's output op
    assert sel.roots[0] is model.__ngraph_ops__()[0]
    assert model.select("Conv").set(lr_scale=0.5) is not None
    assert all(v.meta.attrs["lr_scale"] == 0.5 for v in sel.variables)
    assert "ModelSelection 'Conv'" in repr(sel)


def test_a_model_tap_is_a_context_manager_and_needs_a_callable() -> None:
    model, _ = one_step(GradientDescentMomentum(0.1))
    seen: list[str] = []
    with model.select("#Affine_1").tap(lambda name, value: seen.append(name)) as handle:
        model.predict(X)
        assert handle.active and len(seen) == 1
    model.predict(X)
    assert not handle.active and len(seen) == 1
    with pytest.raises(ng.SelectorError, match=r"expected a callable fn\(name, array\), received int"):
        model.select("#Affine_1").tap(3)
