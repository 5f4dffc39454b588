"""``neon.gan.GAN``: alternating updates touch only their own network, costs, sampling, checkpoints."""

import math

import numpy as np
import pytest

import ngraph_core as ng
from neon.activations import Logistic, Rectlin, Tanh
from neon.data import ArrayIterator
from neon.gan import GAN
from neon.initializers import set_seed
from neon.layers import Affine, LayerError, Unflatten
from neon.model import ModelError
from neon.optimizers import Adam

N, FEATURES, NOISE = 8, 12, 4


def make_gan(seed=0):
    g = [Affine(10, batch_norm=True, activation=Rectlin()), Affine(FEATURES, bias=0.0, activation=Tanh())]
    d = [Affine(10, batch_norm=True, activation=Rectlin(slope=0.2)), Affine(1, bias=0.0, activation=Logistic())]
    return GAN(g, d, noise_dim=NOISE, seed=seed)


def real_data(n=32):
    rng = np.random.default_rng(1)
    return np.tanh(rng.standard_normal((n, FEATURES)) + 0.5).astype(np.float32)


def values(gan, variables):
    return [gan.transformer.read_variable(v).copy() for v in variables]


def changed(before, after):
    return [not np.array_equal(b, a) for b, a in zip(before, after, strict=True)]


def test_d_step_updates_only_the_discriminator():
    gan = make_gan()
    d_opt, g_opt = Adam(1e-2, beta_1=0.5, name="d_opt"), Adam(1e-2, beta_1=0.5, name="g_opt")
    gan.build((FEATURES,))
    gan.set_optimizers(d_opt, g_opt)
    step = gan.d_step_computation(N)
    g_vars, d_vars = gan.generator.variables, gan.discriminator.variables
    g0, d0 = values(gan, g_vars), values(gan, d_vars)
    cost = float(step(real_data(N).T.copy(), gan.draw_noise(N))[0])
    assert math.isfinite(cost) and cost > 0
    assert not any(changed(g0, values(gan, g_vars))), "the D step wrote a generator variable"
    d_changed = dict(zip(map(id, d_vars), changed(d0, values(gan, d_vars))))
    assert all(d_changed[id(v)] for v in gan.discriminator.trainable_variables)
    # each optimizer holds state for its own network's variables only, from set_optimizers on
    slots = {id(var) for (var, _slot) in d_opt._state}
    assert slots == {id(v) for v in gan.discriminator.trainable_variables}
    assert {id(var) for (var, _slot) in g_opt._state} == {id(v) for v in gan.generator.trainable_variables}


def test_g_step_updates_only_the_generator():
    gan = make_gan()
    d_opt, g_opt = Adam(1e-2, beta_1=0.5, name="d_opt"), Adam(1e-2, beta_1=0.5, name="g_opt")
    gan.build((FEATURES,))
    gan.set_optimizers(d_opt, g_opt)
    step = gan.g_step_computation(N)
    g_vars, d_vars = gan.generator.variables, gan.discriminator.variables
    g0, d0 = values(gan, g_vars), values(gan, d_vars)
    cost = float(step(gan.draw_noise(N))[0])
    assert math.isfinite(cost) and cost > 0
    assert not any(changed(d0, values(gan, d_vars))), "the G step wrote a discriminator variable (or running stat)"
    g_changed = dict(zip(map(id, g_vars), changed(g0, values(gan, g_vars))))
    assert all(g_changed[id(v)] for v in gan.generator.trainable_variables)
    assert any(g_changed[id(v)] for v in g_vars if v not in gan.generator.trainable_variables)  # BN running stats
    assert {id(var) for (var, _slot) in g_opt._state} == {id(v) for v in gan.generator.trainable_variables}


def test_fit_history_generate_and_reproducibility():
    runs = []
    for _ in range(2):
        set_seed(11)  # the initial weights (drawn at build) ...
        gan = make_gan(seed=3)  # ... and the training noise
        data = ArrayIterator(real_data(40), batch_size=16, shuffle=True, seed=0)  # 16, 16, 8: two batch sizes
        history = gan.fit(data, 2, Adam(1e-3, beta_1=0.5), Adam(1e-3, beta_1=0.5), k=2)
        assert history["epoch"] == [1, 2] and gan.epoch == 2
        assert all(math.isfinite(c) for c in history["d_cost"] + history["g_cost"])
        images = gan.generate(5, seed=7)
        assert images.shape == (5, FEATURES) and images.min() >= -1.0 and images.max() <= 1.0
        np.testing.assert_array_equal(images, gan.generate(5, seed=7))
        assert not np.array_equal(images, gan.generate(5, seed=8))
        np.testing.assert_allclose(gan.generate(5, seed=7, batch_size=2), images, rtol=1e-5, atol=1e-6)
        runs.append((history["d_cost"], images))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_save_and_load_params(tmp_path):
    gan = make_gan()
    gan.fit(ArrayIterator(real_data(16), batch_size=16), 1, Adam(1e-3), Adam(1e-3))
    path = tmp_path / "gan.h5"
    gan.save_params(path)
    other = make_gan()
    other.load_params(path)
    assert other.epoch == 1 and other.history["g_cost"] == gan.history["g_cost"]
    np.testing.assert_array_equal(other.generate(4, seed=2), gan.generate(4, seed=2))


def test_load_params_restores_optimizer_state_before_the_steps_exist(tmp_path):
    """A fresh GAN loading a checkpoint takes the same next step as the run that saved it (Adam's
    moments and step count included): set_optimizers creates the state, load_params writes it at once."""
    data = real_data(16)
    x = np.ascontiguousarray(data.T)  # train_step takes a batch-last batch
    gan = make_gan()
    gan.fit(ArrayIterator(data, batch_size=16), 1, Adam(1e-3), Adam(1e-3))
    path = tmp_path / "gan.h5"
    gan.save_params(path)
    resumed, weights_only = make_gan(seed=5), make_gan(seed=5)
    for other in (resumed, weights_only):
        other.build((FEATURES,))
        other.set_optimizers(Adam(1e-3), Adam(1e-3))
    resumed.load_params(path)
    weights_only.load_params(path, optimizer_state=False)
    for other in (resumed, weights_only):
        assert other.rng.bit_generator.state == gan.rng.bit_generator.state  # the noise generator is restored
    expected = gan.train_step(x)
    assert resumed.train_step(x) == expected
    np.testing.assert_array_equal(resumed.generate(4, seed=2), gan.generate(4, seed=2))
    assert weights_only.train_step(x) != expected  # fresh Adam state steps elsewhere: the test can fail


def test_bad_arguments():
    gan = make_gan()
    with pytest.raises(ModelError, match="generate"):
        gan.generate(3)
    data = ArrayIterator(real_data(16), batch_size=16)
    opt = Adam()
    with pytest.raises(ModelError, match="two distinct optimizers"):
        gan.fit(data, 1, opt, opt)
    with pytest.raises(ModelError, match="k must be"):
        gan.fit(data, 1, Adam(), Adam(), k=0)
    with pytest.raises(ModelError, match="noise_dim"):
        GAN([Affine(2)], [Affine(1)], noise_dim=0)


def test_unflatten_layer():
    x = ng.placeholder([ng.make_axis(12, "F"), ng.make_axis(2, "N")])
    y = Unflatten((3, 2, 2))(x)
    assert [(a.name, a.length) for a in y.axes] == [("C", 3), ("H", 2), ("W", 2), ("N", 2)]
    t = ng.transformers.make_transformer()
    data = np.arange(24, dtype=np.float32).reshape(12, 2)
    np.testing.assert_array_equal(t.computation(y, x)(data), data.reshape(3, 2, 2, 2))
    assert Unflatten.from_config(Unflatten((3, 4), names=("A", "B")).get_config()).names == ("A", "B")
    with pytest.raises(LayerError, match="expected"):
        Unflatten((5, 2))(x)
    with pytest.raises(LayerError, match="shape"):
        Unflatten(())
