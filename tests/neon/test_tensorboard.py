"""``neon.tensorboard``: event files TensorBoard itself reads back — scalars equal to the history,
histograms equal to the weights, the training graph by layer scope — and the errors."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from fit_helper import datasets, mlp

import ngraph_core as ng
from neon.activations import Logistic, Rectlin, Tanh
from neon.callbacks import Callback, TensorBoard
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator
from neon.gan import GAN
from neon.layers import Affine
from neon.metrics import Accuracy
from neon.optimizers import Adam, GradientDescentMomentum
from neon.saving import variable_keys
from neon.tensorboard import (
    TensorBoardError,
    TensorBoardUnavailableError,
    graph_def,
    node_names,
    scalar_tag,
    write_graph,
)

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                        reason="tensorboard (the test extra) reads the event files back")

DT_FLOAT = 1  # TensorFlow's DataType enum value for float32


def load(log_dir: Path):
    """The event files in ``log_dir``, loaded the way TensorBoard loads them (everything kept)."""
    acc = event_accumulator.EventAccumulator(str(log_dir), size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0, event_accumulator.GRAPH: 1})
    return acc.Reload()


def steps_and_values(acc, tag):
    return [e.step for e in acc.Scalars(tag)], [e.value for e in acc.Scalars(tag)]


class Snapshot(Callback):
    """The model's variable values after every epoch, by 1-based epoch number."""

    def __init__(self) -> None:
        self.values: dict[int, dict[int, np.ndarray]] = {}

    def on_epoch_end(self, epoch, logs):
        self.values[epoch + 1] = {id(v): self.model.transformer.read_variable(v).copy() for v in self.model.variables}


def fit(model, callbacks, epochs=2, **kwargs):
    train, valid = datasets()
    return model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), epochs,
                     callbacks=callbacks, valid_set=valid, metric=Accuracy(), progress=False, **kwargs)


def weight_keys(model):
    (params,) = variable_keys(model.variables)
    return {key: var for key, var in params.items() if "trainable" in var.meta.labels}


# -- a Model: scalars, histograms and the graph -------------------------------------------------------------
def test_model_scalars_histograms_and_graph(tmp_path):
    model, snapshot = mlp(), Snapshot()
    tb = TensorBoard(tmp_path / "run", histograms=True, batch_freq=1)
    history = fit(model, [snapshot, tb])
    assert tb._writer is None, "the event file must be closed when fit ends"
    assert list((tmp_path / "run").iterdir()) == [tb.path]
    acc = load(tmp_path / "run")

    # scalars: one per epoch at the epoch's number, equal to the history (float32 in the file)
    assert set(acc.Tags()["scalars"]) == {"train/cost", "valid/cost", "valid/accuracy", "lr", "batch/cost"}
    for tag, key in [("train/cost", "train_cost"), ("valid/cost", "valid_cost"), ("valid/accuracy", "valid_accuracy"),
                     ("lr", "lr")]:
        steps, values = steps_and_values(acc, tag)
        assert steps == history["epoch"] == [1, 2]
        np.testing.assert_allclose(values, history[key], rtol=1e-6, err_msg=tag)
    # per batch: 3 batches (32, 32, 26) per epoch, numbered over the run; their weighted mean is the epoch's
    steps, costs = steps_and_values(acc, "batch/cost")
    assert steps == [1, 2, 3, 4, 5, 6]
    for epoch, chunk in enumerate((costs[:3], costs[3:])):
        np.testing.assert_allclose(np.dot(chunk, [32, 32, 26]) / 90, history["train_cost"][epoch], rtol=1e-5)

    # histograms: exactly the four weights, tagged by scope path, with the weights' statistics each epoch
    expected = weight_keys(model)
    assert sorted(expected) == ["Sequential_0/Affine_0/Bias_0/b", "Sequential_0/Affine_0/Linear_0/W",
                                "Sequential_0/Affine_1/Bias_0/b", "Sequential_0/Affine_1/Linear_0/W"]
    assert set(acc.Tags()["histograms"]) == set(expected) == set(tb.variables)
    for tag, var in expected.items():
        events = acc.Histograms(tag)
        assert [e.step for e in events] == [1, 2]
        for event in events:
            weights, h = snapshot.values[event.step][id(var)], event.histogram_value
            assert (h.num, h.min, h.max) == (weights.size, float(weights.min()), float(weights.max()))
            np.testing.assert_allclose(h.sum, weights.astype(np.float64).sum(), rtol=1e-6, atol=1e-9)
            assert sum(h.bucket) == weights.size
    final = model.transformer.read_variable(expected["Sequential_0/Affine_0/Linear_0/W"])
    assert acc.Histograms("Sequential_0/Affine_0/Linear_0/W")[-1].histogram_value.max == float(final.max())

    # the graph: the training step (forward, backward, updates), grouped by layer scope
    graph = acc.Graph()
    nodes = {n.name: n for n in graph.node}
    assert len(nodes) == len(graph.node)
    assert all(i in nodes for n in graph.node for i in n.input), "every input names a node"
    ops = {n.op for n in graph.node}
    assert {"dot", "variable", "placeholder", "assign", "relu", "doall"} <= ops
    variables = {name for name, n in nodes.items() if n.op == "variable"}
    assert set(expected) <= variables
    assert "GradientDescentMomentum/Sequential_0/Affine_0/Linear_0/W/velocity" in variables
    forward = nodes["Sequential_0/Affine_0/Linear_0/dot_0"]
    assert forward.op == "dot" and list(forward.input) == ["Sequential_0/Affine_0/Linear_0/W", "X"]
    assert [(d.name, d.size) for d in forward.attr["_output_shapes"].list.shape[0].dim] == [("Affine_0", 8), ("N", 32)]
    assert forward.attr["dtype"].type == DT_FLOAT and forward.attr["axes"].s == b"Affine_0:8, N:32"
    assert nodes["Sequential_0/Affine_0/Linear_0/W"].attr["labels"].list.s  # weight, trainable...
    backward = [name for name, n in nodes.items() if n.op == "dot" and "/grad/" in name]
    assert backward and all(name.startswith("Sequential_0/Affine_") for name in backward)
    updated = {n.input[0] for n in graph.node if n.op == "assign"}
    assert set(expected) <= updated, "every weight is assigned in the training graph"


def test_chosen_variables_every_other_epoch_without_graph(tmp_path):
    model = mlp()
    model.build((4,), batch_size=32)
    w0 = model.layers.layers[0].variables[0]
    tb = TensorBoard(tmp_path, histograms=[w0], histogram_freq=2, graph=False)
    fit(model, [tb])
    acc = load(tmp_path)
    assert acc.Tags()["histograms"] == ["Sequential_0/Affine_0/Linear_0/W"]
    assert [e.step for e in acc.Histograms("Sequential_0/Affine_0/Linear_0/W")] == [2]
    assert acc.Tags()["graph"] is False
    assert "batch/cost" not in acc.Tags()["scalars"]


def test_histograms_query_goes_through_model_select(tmp_path):
    model = mlp()
    model.build((4,), batch_size=32)
    second = model.layers.layers[1].variables
    queries = []

    def select(query):
        queries.append(query)
        return SimpleNamespace(variables=list(second), names=[v.name for v in second])

    model.select = select  # the Selection contract: .variables and .names
    tb = TensorBoard(tmp_path, histograms="Affine:not(#Affine_0) variable", graph=False)
    fit(model, [tb])
    assert queries == ["Affine:not(#Affine_0) variable"]
    assert set(load(tmp_path).Tags()["histograms"]) == {"Sequential_0/Affine_1/Linear_0/W",
                                                         "Sequential_0/Affine_1/Bias_0/b"}


def test_histograms_query_with_the_real_selectors(tmp_path):
    model = mlp()
    if not callable(getattr(model, "select", None)):
        pytest.skip("Model.select (neon selectors) is not available in this tree yet")
    model.build((4,), batch_size=32)
    select, selections = model.select, []
    model.select = lambda query: selections.append(select(query)) or selections[-1]
    tb = TensorBoard(tmp_path, histograms="Affine variable", graph=False)
    fit(model, [tb], epochs=1)
    params, state = model.checkpoint_keys()
    keys = {var: key for key, var in (*params.items(), *state.items())}
    (selection,) = selections
    expected = {keys[v] for v in selection.variables}
    assert expected and set(load(tmp_path).Tags()["histograms"]) == expected == set(tb.variables)


def test_two_fits_write_two_files_and_continue_the_steps(tmp_path):
    model = mlp()
    tb = TensorBoard(tmp_path, graph=False)
    first = fit(model, [tb])
    first_file = tb.path
    second = fit(model, [tb], epochs=4, initial_epoch=2)
    assert tb.path != first_file and sorted(tmp_path.iterdir()) == sorted([first_file, tb.path])
    steps, values = steps_and_values(load(tmp_path), "train/cost")
    assert steps == [1, 2, 3, 4] == second["epoch"]
    np.testing.assert_allclose(values[:2], first["train_cost"], rtol=1e-6)
    np.testing.assert_allclose(values, second["train_cost"], rtol=1e-6)


def test_non_finite_weights_warn_and_draw_the_finite_values(tmp_path):
    class Poison(Callback):
        def on_epoch_end(self, epoch, logs):
            bias = self.model.layers.layers[0].variables[1]
            value = self.model.transformer.read_variable(bias).copy()
            value[0] = np.nan
            self.model.transformer.write_variable(bias, value)

    model = mlp()
    with pytest.warns(RuntimeWarning, match=r"1 of 8 values of Sequential_0/Affine_0/Bias_0/b are NaN"):
        fit(model, [Poison(), TensorBoard(tmp_path, histograms=True, graph=False)], epochs=1, terminate_on_nan=False)
    (event,) = load(tmp_path).Histograms("Sequential_0/Affine_0/Bias_0/b")
    assert event.histogram_value.num == 7


# -- a GAN: its own log names, both networks, both steps' graphs -----------------------------------------------
def test_gan_scalars_histograms_and_both_step_graphs(tmp_path):
    gen = [Affine(6, activation=Rectlin()), Affine(5, bias=0.0, activation=Tanh())]
    disc = [Affine(6, activation=Rectlin()), Affine(1, bias=0.0, activation=Logistic())]
    gan = GAN(gen, disc, noise_dim=3, seed=0)
    X = np.tanh(np.random.default_rng(0).standard_normal((16, 5))).astype(np.float32)
    tb = TensorBoard(tmp_path, histograms=True)
    history = gan.fit(ArrayIterator(X, batch_size=8), 2, Adam(1e-2, name="d_opt"), Adam(1e-2, name="g_opt"),
                      callbacks=[tb])
    acc = load(tmp_path)
    tags = {"train/d_cost": "d_cost", "train/g_cost": "g_cost", "lr/d": "d_lr", "lr/g": "g_lr"}
    assert set(acc.Tags()["scalars"]) == set(tags)
    for tag, key in tags.items():
        steps, values = steps_and_values(acc, tag)
        assert steps == [1, 2]
        np.testing.assert_allclose(values, history[key], rtol=1e-6, err_msg=tag)
    (params,) = variable_keys(gan.variables)
    weights = {k for k, v in params.items() if "trainable" in v.meta.labels}
    assert set(acc.Tags()["histograms"]) == weights
    assert {k.split("/")[0] for k in weights} == {"generator", "discriminator"}
    nodes = acc.Graph().node
    assigned = {n.input[0] for n in nodes if n.op == "assign"}
    assert weights <= assigned, "the graph holds both the D step and the G step"


# -- the graph builder on its own ----------------------------------------------------------------------------
def test_node_names_follow_scopes_kinds_and_grad():
    F, N, H = ng.make_axis(3, "F"), ng.make_axis(2, "N"), ng.make_axis(4, "H")
    x = ng.placeholder([F, N], name="x")
    with ng.name_scope("Dense_0", kind="Dense"):
        w = ng.variable([H, F], initial_value=0.5, name="W")
        y = ng.exp(ng.exp(ng.dot(w, x)))
    odd = ng.negative(y).named("odd name")
    loss = ng.sum(odd)
    names = node_names(ng.ordered_ops([loss, ng.deriv(loss, w)]))
    assert names[w] == "Dense_0/W" and names[x] == "x" and names[odd] == "odd_name"
    assert names[y] == "Dense_0/exp_1" and names[y.src[0]] == "Dense_0/exp_0"
    grads = [name for op, name in names.items() if "grad" in op.meta.labels and op.op is ng.OpType.DOT]
    assert grads == ["Dense_0/grad/dot_0"]
    assert len(set(names.values())) == len(names)


def test_graph_def_and_write_graph(tmp_path):
    F, N = ng.make_axis(3, "F"), ng.make_axis(2, "N")
    x = ng.placeholder([F, N], name="x")
    w = ng.variable([F], initial_value=1.0, name="w", dtype="float64")
    result = ng.dot(w, ng.cast(x, "float64"))
    gd = graph_def([result])
    assert [n.op for n in gd.node][-1] == "dot"
    assert gd.node[-1].attr["dtype"].type == 2  # DT_DOUBLE
    path = write_graph(tmp_path / "g", [result])
    assert path.parent == tmp_path / "g" and path.stat().st_size > 0
    loaded = load(tmp_path / "g").Graph()
    assert [n.name for n in loaded.node] == [n.name for n in gd.node]


@pytest.mark.parametrize("key, tag", [("train_cost", "train/cost"), ("valid_accuracy", "valid/accuracy"),
                                      ("valid_cost", "valid/cost"), ("lr", "lr"), ("d_lr", "lr/d"),
                                      ("g_cost", "train/g_cost"), ("valid_", "train/valid_")])
def test_scalar_tags(key, tag):
    assert scalar_tag(key) == tag


# -- errors ------------------------------------------------------------------------------------------------
def test_unwritable_log_dir_fails_at_fit_start(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    for log_dir in (blocker, blocker / "run"):
        model = mlp()
        with pytest.raises(TensorBoardError, match=r"expected a writable directory.*a_file.*hint") as info:
            fit(model, [TensorBoard(log_dir)])
        assert isinstance(info.value, ng.NgraphError)
        assert model.epoch == 0, "nothing trained before the error"


def test_missing_tensorboardx_is_an_import_error_with_the_pip_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(TensorBoardUnavailableError, match=r"pip install tensorboardX==2\.6\.5") as info:
        TensorBoard(tmp_path)
    assert isinstance(info.value, ImportError) and isinstance(info.value, ng.NgraphError)


@pytest.mark.parametrize("kwargs, match", [
    ({"histogram_freq": 0}, "histogram_freq to be an int >= 1"),
    ({"histogram_freq": True}, "histogram_freq to be an int >= 1"),
    ({"batch_freq": 0}, "batch_freq to be an int >= 1 or None"),
    ({"flush_secs": 0}, "flush_secs > 0"),
    ({"histograms": " "}, "selector query"),
    ({"histograms": 5}, "received int"),
    ({"histograms": {"W": 1}}, "received dict"),
])
def test_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(TensorBoardError, match=match):
        TensorBoard(tmp_path, **kwargs)


def test_histograms_that_are_not_this_models_variables(tmp_path):
    model, other = mlp(), mlp()
    model.build((4,), batch_size=32)
    other.build((4,), batch_size=32)
    x = ng.placeholder([ng.make_axis(4, "F")], name="x")  # not a variable
    empty = SimpleNamespace(variables=[], names=[])
    cases = [([x], r"expected variables, received a placeholder op"),
             (other.variables[:1], r"expected variables of this Model, received 1 that are not"),
             (empty, r"matched no variable of the model")]
    for histograms, match in cases:
        with pytest.raises(TensorBoardError, match=match):
            fit(model, [TensorBoard(tmp_path / "run", histograms=histograms)], epochs=1)
    assert not (tmp_path / "run").exists(), "the choice is checked before any file is created"


def test_no_warning_in_a_plain_run(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(mlp(), [TensorBoard(tmp_path)], epochs=1)
    assert load(tmp_path).Tags()["graph"] is True
