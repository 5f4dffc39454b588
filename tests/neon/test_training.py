"""``neon.training``: one loop for Model and GAN, exact resume, freezing between fits, relative names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fit_helper import FEATURES, datasets, mlp, weights

import ngraph_core as ng
from neon.activations import Logistic, Rectlin, Tanh
from neon.callbacks import Checkpoint
from neon.containers import Sequential
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator
from neon.gan import GAN
from neon.initializers import set_seed
from neon.layers import Affine, BatchNorm, Conv, ResidualBlock, training_mode
from neon.layers.serialization import deserialize_layer, serialize_layer
from neon.model import Model
from neon.optimizers import Adam, GradientDescentMomentum
from neon.saving import read_checkpoint, variable_keys
from neon.training import ComputationCache, graph_updates, trainable_set


def sgd() -> GradientDescentMomentum:
    return GradientDescentMomentum(0.1, momentum_coef=0.9)


def test_model_resume_is_exact(tmp_path: Path) -> None:
    train, _ = datasets(seed=3)
    whole = mlp(depth=2)
    whole.fit(train, CrossEntropyMulti(), sgd(), 2, progress=False)
    path = tmp_path / "one.h5"
    train, _ = datasets(seed=3)
    first = mlp(depth=2)
    first.fit(train, CrossEntropyMulti(), sgd(), 1, progress=False, callbacks=[Checkpoint(path)])
    train, _ = datasets(seed=3)
    resumed = mlp(depth=2, seed=9)  # other initial weights: they come from the file
    resumed.fit(train, CrossEntropyMulti(), sgd(), 2, progress=False, resume_from=path)
    for a, b in zip(weights(resumed), weights(whole), strict=True):
        assert np.max(np.abs(a - b)) == 0.0
    assert resumed.history.as_dict() == whole.history.as_dict()


def make_gan(seed: int = 0) -> GAN:
    g = [Affine(6, batch_norm=True, activation=Rectlin()), Affine(FEATURES, bias=0.0, activation=Tanh())]
    d = [Affine(6, batch_norm=True, activation=Rectlin(slope=0.2)), Affine(1, bias=0.0, activation=Logistic())]
    return GAN(g, d, noise_dim=3, seed=seed)


def gan_data() -> ArrayIterator:
    x = np.tanh(np.random.default_rng(4).standard_normal((24, FEATURES))).astype(np.float32)
    return ArrayIterator(x, batch_size=10, shuffle=True, seed=1)  # 10, 10, 4: two batch sizes


def test_gan_resume_is_exact(tmp_path: Path) -> None:
    def opts() -> tuple[Adam, Adam]:
        return Adam(1e-2, beta_1=0.5, name="d_adam"), Adam(1e-2, beta_1=0.5, name="g_adam")

    set_seed(5)
    whole = make_gan(seed=2)
    whole.fit(gan_data(), 2, *opts())
    path = tmp_path / "gan.h5"
    set_seed(5)
    first = make_gan(seed=2)
    first.fit(gan_data(), 1, *opts(), callbacks=[Checkpoint(path)])
    set_seed(6)
    resumed = make_gan(seed=7)  # other weights and noise seed: both come from the file
    resumed.fit(gan_data(), 2, *opts(), resume_from=path)
    assert resumed.epoch == 2 and resumed.history.as_dict() == whole.history.as_dict()
    for a, b in zip(resumed.variables, whole.variables, strict=True):
        va, vb = resumed.transformer.read_variable(a), whole.transformer.read_variable(b)
        assert np.max(np.abs(va - vb)) == 0.0


def test_freezing_after_fit_takes_effect_and_unfreezing_undoes_it() -> None:
    train, _ = datasets()
    model = mlp(depth=2)
    model.fit(train, CrossEntropyMulti(), sgd(), 1, progress=False)
    first = model.layers[0]
    frozen = model.freeze(first)
    assert frozen and all("trainable" not in v.meta.labels for v in first.variables)
    before = weights(model)
    model.fit(train, CrossEntropyMulti(), model.optimizer, 2, initial_epoch=1, progress=False)
    after = weights(model)
    ids = {id(v) for v in first.variables}
    for var, a, b in zip(model.variables, before, after, strict=True):
        assert np.array_equal(a, b) == (id(var) in ids), var.name
    model.unfreeze(first)
    model.fit(train, CrossEntropyMulti(), model.optimizer, 3, initial_epoch=2, progress=False)
    assert not any(np.array_equal(a, b) for a, b in zip(after, weights(model), strict=True))


def test_the_cache_rebuilds_only_when_its_key_or_signature_changes() -> None:
    var = ng.variable([ng.make_axis(2, "A")], initial_value=0.0, name="v", trainable=True)
    built: list[int] = []
    cache = ComputationCache(lambda: trainable_set([var]))
    cost = object()
    assert cache.get(4, lambda n: built.append(n) or n, key=(cost,)) == 4
    cache.get(4, lambda n: built.append(n) or n, key=(cost,))
    assert built == [4] and cache.sizes() == [4]
    ng.update_meta(var, remove_labels=("trainable",))
    cache.get(4, lambda n: built.append(n) or n, key=(cost,))
    cache.get(4, lambda n: built.append(n) or n, key=(object(),))
    assert built == [4, 4, 4]


def test_identical_models_in_one_process_have_identical_keys(tmp_path: Path) -> None:
    def build() -> Model:
        model = Model([Affine(5, activation=Rectlin()), Sequential([Affine(5), BatchNorm()]), Affine(3)])
        model.build((FEATURES,))
        return model

    a, b = build(), build()
    keys_a, keys_b = (sorted(variable_keys(m.variables)[0]) for m in (a, b))
    assert keys_a == keys_b and "Sequential_0/Sequential_0/Affine_0/Linear_0/W" in keys_a
    path = tmp_path / "a.h5"
    a.save_params(path)
    b.load_params(path)
    for x, y in zip(weights(a), weights(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert sorted(read_checkpoint(path).params) == keys_a


def test_nested_generated_names_do_not_clash_and_round_trip() -> None:
    x = ng.placeholder([ng.make_axis(3, "C"), ng.make_axis(6, "H"), ng.make_axis(6, "W"), ng.make_axis(2, "N")])
    net = Sequential([Conv((3, 3, 4), padding=1), ResidualBlock.basic(4), ResidualBlock.basic(4)])
    assert [layer.name for layer in net] == ["Conv_0", "ResidualBlock_0", "ResidualBlock_1"]
    assert [layer.name for layer in net[1].branch] == ["Conv_0", "Conv_1"]
    with training_mode(True):
        y = net(x)
    assert y.axes.lengths == (4, 6, 6, 2)
    clone = deserialize_layer(serialize_layer(net))
    assert clone[1] is not clone[2] and clone[1].branch[0] is not clone[2].branch[0]
    assert clone(x).axes.lengths == (4, 6, 6, 2)


def test_scopes_know_the_class_hierarchy_and_updates_are_declared() -> None:
    net = Sequential([Conv((3, 3, 4), padding=1, batch_norm=True)])
    x = ng.placeholder([ng.make_axis(3, "C"), ng.make_axis(4, "H"), ng.make_axis(4, "W"), ng.make_axis(2, "N")])
    with training_mode(True):
        net(x)
    w = net[0].filter.W
    conv_entry = w.meta.scope[1]
    assert conv_entry.name == "Conv_0" and conv_entry.is_a("Conv") and conv_entry.is_a("LayerStack")
    assert conv_entry.is_a("Layer") and not conv_entry.is_a("Affine")
    updates = graph_updates(net, [x])
    assert len(updates) == 2 and all("update" in u.meta.labels for u in updates)
    assert all(u.meta.scope[-1].kind == "BatchNorm" for u in updates)
    other = ng.placeholder([*x.axes[:-1], ng.make_axis(3, "N")])
    with training_mode(True):
        net(other)
    assert len(net.updates) == 4 and graph_updates(net, [x]) == updates  # each graph runs its own


def test_optimizer_state_exists_once_built() -> None:
    model = mlp()
    model.build((FEATURES,))
    opt = Adam(1e-3)
    opt.build(model.variables)
    names = {v.name for v in opt.state_variables}
    assert len(opt.state_variables) == 2 * len(model.layers.trainable_variables) + 1 and "Adam/t" in names
    opt.build(model.variables)  # idempotent
    assert len(opt.state_variables) == 2 * len(model.layers.trainable_variables) + 1
