"""Initializers: statistics on large shapes, bounds, orthonormality, seeds, names and configs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ngraph_core as ng
from neon import initializers
from neon.initializers import (
    Constant,
    Gaussian,
    GlorotUniform,
    InitializerError,
    Kaiming,
    Orthonormal,
    Uniform,
    Xavier,
    compute_fans,
    set_seed,
)
from neon.layers import Affine

SHAPE = (200, 50, 3)  # fan_out 200, fan_in 150


def test_fans_follow_the_output_axis_first_convention() -> None:
    assert compute_fans((10, 784)) == (784, 10)
    assert compute_fans((64, 3, 3, 3)) == (27, 64)
    assert compute_fans((7,)) == (7, 7)
    assert compute_fans(()) == (1, 1)


def test_constant() -> None:
    w = Constant(0.25).fill((3, 2))
    assert w.dtype == np.float32 and w.shape == (3, 2) and np.all(w == 0.25)
    assert Constant().fill(()).shape == ()


@pytest.mark.parametrize("init, bound, std", [
    (Uniform(-0.3, 0.1, seed=0), None, 0.4 / math.sqrt(12)),
    (GlorotUniform(seed=0), math.sqrt(6 / (150 + 200)), math.sqrt(6 / 350) / math.sqrt(3)),
    (Xavier(seed=0), math.sqrt(3 / 150), math.sqrt(1 / 150)),
    (Gaussian(0.5, 2.0, seed=0), None, 2.0),
    (Kaiming(seed=0), None, math.sqrt(2 / 150)),
], ids=["uniform", "glorot", "xavier", "gaussian", "kaiming"])
def test_statistics_on_a_large_shape(init, bound, std) -> None:
    w = init.fill(SHAPE)
    assert w.dtype == np.float32 and w.shape == SHAPE
    expected_mean = {Uniform: -0.1, Gaussian: 0.5}.get(type(init), 0.0)
    assert abs(w.mean() - expected_mean) < 4 * std / math.sqrt(w.size)
    assert abs(w.std() - std) < 0.02 * std
    if bound is not None:
        assert w.min() >= -bound and w.max() <= bound and w.max() > 0.99 * bound
    if isinstance(init, Uniform):
        assert w.min() >= -0.3 and w.max() < 0.1


@pytest.mark.parametrize("shape", [(4, 8), (8, 4), (3, 2, 2), (5, 5)])
def test_orthonormal_rows_or_columns(shape) -> None:
    w = Orthonormal(scale=1.1, seed=0).fill(shape).reshape(shape[0], -1).astype(np.float64)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, 1.21 * np.eye(gram.shape[0]), atol=1e-5)


def test_seeded_initializers_repeat_and_differ_between_calls() -> None:
    a, b = Gaussian(seed=3), Gaussian(seed=3)
    first = a.fill((5,))
    np.testing.assert_array_equal(first, b.fill((5,)))
    assert not np.array_equal(first, a.fill((5,)))  # one instance, two variables: two draws


def test_set_seed_reproduces_a_models_weights() -> None:
    def weights() -> list[np.ndarray]:
        set_seed(42)
        x = ng.placeholder([ng.make_axis(6, name="F"), ng.make_axis(2, name="N")])
        layers = [Affine(4, init=GlorotUniform()), Affine(3, init=Kaiming())]
        layers[1](layers[0](x))
        with ng.transformers.make_transformer() as t:
            return [t.read_variable(v) for layer in layers for v in layer.variables]

    first, second = weights(), weights()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    set_seed(43)
    assert not np.array_equal(GlorotUniform().fill((4, 6)), first[0])


@pytest.mark.parametrize("init", [Constant(1.5), Uniform(-1, 2, seed=4), Gaussian(0, 3), GlorotUniform(seed=1),
                                  Xavier(), Kaiming(seed=2), Orthonormal(scale=0.5, seed=9)], ids=repr)
def test_config_round_trip(init) -> None:
    data = initializers.serialize(init)
    clone = initializers.get(data)
    assert type(clone) is type(init) and clone.get_config() == init.get_config()
    if init.seed is not None:
        np.testing.assert_array_equal(clone.fill((3, 4)), type(init)(**init.get_config()).fill((3, 4)))


def test_get_accepts_names_and_numbers() -> None:
    assert type(initializers.get("glorot_uniform")) is GlorotUniform
    assert type(initializers.get("Kaiming")) is Kaiming
    assert type(initializers.get("orthogonal")) is Orthonormal
    assert initializers.get(0.5).get_config() == {"val": 0.5}


@pytest.mark.parametrize("make, words", [
    (lambda: Uniform(1, 0), "expected low < high"),
    (lambda: Gaussian(0, -1), "scale >= 0"),
    (lambda: Constant("a"), "val must be a finite number"),
    (lambda: Kaiming(seed=1.5), "seed must be an int"),
    (lambda: initializers.get("nope"), "unknown initializer 'nope'"),
    (lambda: initializers.get([1, 2]), "expected an Initializer"),
])
def test_bad_configs(make, words) -> None:
    with pytest.raises(InitializerError, match=words):
        make()
