"""The issue's seed example, verbatim: logistic regression over named axes trains and generalises."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng

TRUE_W = np.array([1.5, -2.0, 0.7, 1.0])
TRUE_B = 0.3


def _batch(rng: np.random.Generator, size: int = 32, margin: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """A batch of linearly separable points: x laid out [C, N] (4 features, ``size`` samples), labels [N]."""
    xs = []
    while sum(len(x) for x in xs) < size:
        x = rng.standard_normal((4 * size, 4))
        score = x @ TRUE_W + TRUE_B
        xs.append(x[np.abs(score) > margin])  # a margin keeps the classes cleanly separable
    x = np.concatenate(xs)[:size]
    y = (x @ TRUE_W + TRUE_B > 0).astype(np.float32)
    return x.T.astype(np.float32), y


def test_seed_example_trains_to_high_accuracy():
    # -- the seed example, verbatim ------------------------------------------------------
    C, N = ng.make_axis(4, name="C"), ng.make_axis(32, name="N")
    X = ng.placeholder([C, N]); Y = ng.placeholder([N])  # noqa: E702
    W = ng.variable([C], initial_value=0); b = ng.variable([], initial_value=0)  # noqa: E702
    Y_hat = ng.sigmoid(ng.dot(W, X) + b)
    L = ng.cross_entropy_binary(Y_hat, Y) / ng.batch_size(Y_hat)
    grad_W, grad_b = ng.gradients(L, [W, b])
    update = ng.doall([ng.assign(W, W - 0.1 * grad_W), ng.assign(b, b - 0.1 * grad_b)])
    # ------------------------------------------------------------------------------------
    ng.verify([L, update])
    assert Y_hat.axes == ng.make_axes([N]) and L.axes == ng.make_axes([])

    rng = np.random.default_rng(2024)
    losses = []
    with ng.transformers.make_transformer() as t:
        train = t.computation([L, update], X, Y)
        predict = t.computation(Y_hat, X)  # shares W and b with train
        for _ in range(300):
            loss, nothing = train(*_batch(rng))
            assert nothing is None
            losses.append(float(loss))

        correct = total = 0
        held_out = np.random.default_rng(99)
        for _ in range(20):  # 640 fresh points
            x, y = _batch(held_out)
            p = predict(x)
            assert p.shape == (32,)
            assert np.all((p > 0) & (p < 1))
            correct += int(np.sum((p > 0.5) == (y > 0.5)))
            total += 32
        final_W, final_b = t.read_variable(W), t.read_variable(b)

    assert losses[0] == pytest.approx(np.log(2), rel=1e-5)  # W = 0, b = 0: every prediction is 1/2
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])
    accuracy = correct / total
    assert accuracy >= 0.95, f"held-out accuracy {accuracy:.3f}"
    # the learned direction points along the true one
    cosine = final_W @ TRUE_W / (np.linalg.norm(final_W) * np.linalg.norm(TRUE_W))
    assert cosine > 0.9
    assert np.isfinite(final_b)


def test_seed_example_predictions_are_probabilities():
    C, N = ng.make_axis(4, name="C"), ng.make_axis(32, name="N")
    X = ng.placeholder([C, N])
    W = ng.variable([C], initial_value=np.array([1.0, -1.0, 0.5, 0.0])); b = ng.variable([], initial_value=0.25)  # noqa: E702
    Y_hat = ng.sigmoid(ng.dot(W, X) + b)
    x, _ = _batch(np.random.default_rng(5))
    with ng.transformers.make_transformer() as t:
        p = t.computation(Y_hat, X)(x)
    expected = 1 / (1 + np.exp(-(np.array([1.0, -1.0, 0.5, 0.0]) @ x + 0.25)))
    np.testing.assert_allclose(p, expected, rtol=1e-5)


def test_seed_example_gradient_matches_the_closed_form():
    C, N = ng.make_axis(4, name="C"), ng.make_axis(32, name="N")
    X = ng.placeholder([C, N]); Y = ng.placeholder([N])  # noqa: E702
    W = ng.variable([C], initial_value=np.array([0.2, -0.1, 0.4, 0.0])); b = ng.variable([], initial_value=0.1)  # noqa: E702
    Y_hat = ng.sigmoid(ng.dot(W, X) + b)
    L = ng.cross_entropy_binary(Y_hat, Y) / ng.batch_size(Y_hat)
    grad_W, grad_b = ng.gradients(L, [W, b])
    x, y = _batch(np.random.default_rng(3))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        gw, gb = t.computation([grad_W, grad_b], X, Y)(x, y)
    p = 1 / (1 + np.exp(-(np.array([0.2, -0.1, 0.4, 0.0]) @ x + 0.1)))
    np.testing.assert_allclose(gw, x @ (p - y) / 32, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gb, np.sum(p - y) / 32, rtol=1e-5, atol=1e-7)


def test_seed_example_slide_bug_raises_axes_error():
    C, N = ng.make_axis(4, name="C"), ng.make_axis(32, name="N")
    X = ng.placeholder([C, N])
    W = ng.variable([C], initial_value=0)
    b = ng.variable([C])  # the slide's bug: a bias over the features instead of a scalar
    with pytest.raises(ng.AxesError) as info:
        ng.dot(W, X) + b
    assert "ng.broadcast" in str(info.value)
