"""Dropout: the layer helper, inference identity, mask statistics (and PyTorch's), gradient, fresh masks."""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import axis, check_layer_gradients, random_input, run_layer_test

import ngraph_core as ng
from neon.layers import Dropout, LayerError, training_mode


@pytest.mark.parametrize("training", [True, False], ids=["train", "inference"])
def test_run_layer_test(training) -> None:
    run_layer_test(lambda: Dropout(0.7), [axis("F", 5), axis("N", 4)], (5, 4), training=training,
                   deterministic=not training)


def test_inference_mode_is_the_identity_with_gradient_one() -> None:
    check_layer_gradients(lambda: Dropout(0.3), [axis("F", 3), axis("N", 2)], training=False)
    x = ng.placeholder([axis("F", 3), axis("N", 2)])
    assert Dropout(0.3)(x) is x
    with training_mode(True):
        assert Dropout(1.0)(x) is x


def _train_outputs(keep: float, shape=(200, 100), runs: int = 1, seed=None):
    x = ng.placeholder([axis("F", shape[0]), axis("N", shape[1])])
    with training_mode(True):
        out = Dropout(keep, seed=seed)(x)
    grad = ng.deriv(ng.sum(out), x)
    ones = np.ones(shape)
    with ng.transformers.make_transformer() as t:
        f = t.computation([out, grad], x)
        return [f(ones) for _ in range(runs)]


@pytest.mark.parametrize("keep", [0.2, 0.5, 0.9])
def test_training_mode_keeps_a_fraction_keep_scaled_by_one_over_keep(keep) -> None:
    (out, grad), = _train_outputs(keep)
    kept = out != 0
    assert abs(kept.mean() - keep) < 4 * np.sqrt(keep * (1 - keep) / out.size)
    np.testing.assert_allclose(out[kept], 1 / keep, rtol=1e-6)
    assert abs(out.mean() - 1) < 0.05  # inverted dropout keeps the expectation
    np.testing.assert_array_equal(grad, out)  # d out / d x = mask / keep


def test_statistics_match_torch_dropout() -> None:
    torch = pytest.importorskip("torch")
    keep = 0.6
    (ours, _), = _train_outputs(keep)
    torch.manual_seed(0)
    theirs = torch.nn.Dropout(p=1 - keep).train()(torch.ones(ours.T.shape)).numpy()
    for values in (ours, theirs):
        np.testing.assert_allclose(np.unique(values), [0.0, 1 / keep], rtol=1e-6)
    assert abs((ours != 0).mean() - (theirs != 0).mean()) < 0.02
    assert abs(ours.mean() - theirs.mean()) < 0.05


def test_a_fresh_mask_every_run_and_seeded_runs_repeat() -> None:
    (a, _), (b, _) = _train_outputs(0.5, shape=(20, 10), runs=2)
    assert not np.array_equal(a, b)
    first = [o for o, _ in _train_outputs(0.5, shape=(20, 10), runs=2, seed=3)]
    again = [o for o, _ in _train_outputs(0.5, shape=(20, 10), runs=2, seed=3)]
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])


def test_gradient_in_training_mode_is_the_mask_over_keep() -> None:
    x = ng.placeholder([axis("F", 6), axis("N", 5)])
    with training_mode(True):
        out = Dropout(0.5)(x)
    R = random_input(out.axes, seed=5)
    grad = ng.deriv(ng.sum(out * ng.constant(R, out.axes)), x)
    value = random_input(x.axes) + 2.0  # nonzero, so out / x recovers the mask / keep
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        y, g = t.computation([out, grad], x)(value)
    np.testing.assert_allclose(g, R.astype(np.float32) * (y / value), rtol=1e-6)


@pytest.mark.parametrize("keep", [0, -0.5, 1.5, float("nan"), "half"])
def test_bad_keep_raises_layer_error(keep) -> None:
    with pytest.raises(LayerError, match=r"keep to be a number in \(0.0, 1.0\]"):
        Dropout(keep)
    with pytest.raises(LayerError, match="seed"):
        Dropout(0.5, seed=1.5)
