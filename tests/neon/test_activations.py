"""Activations: PyTorch forward and gradient, finite differences, names, configs, edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import axis, check_layer_gradients, random_input, random_weights

import ngraph_core as ng
from neon import activations
from neon.activations import ActivationError, Explin, Identity, Logistic, Rectlin, Softmax, Softplus, Tanh
from neon.layers import Activation

CASES = [
    (Identity(), lambda t: t),
    (Rectlin(), lambda t: t.relu()),
    (Rectlin(slope=0.1), lambda t: __import__("torch").nn.functional.leaky_relu(t, 0.1)),
    (Explin(), lambda t: __import__("torch").nn.functional.elu(t)),
    (Explin(alpha=0.5), lambda t: __import__("torch").nn.functional.elu(t, 0.5)),
    (Logistic(), lambda t: t.sigmoid()),
    (Tanh(), lambda t: t.tanh()),
    (Softmax(), lambda t: t.softmax(dim=1)),
    (Softplus(), lambda t: __import__("torch").nn.functional.softplus(t)),
]
IDS = [repr(a) for a, _ in CASES]


def _value(shape=(4, 6)) -> np.ndarray:
    v = random_input([axis("F", shape[0]), axis("N", shape[1])], low=-3, high=3)
    v[np.abs(v) < 1e-3] = 0.5  # away from the kinks
    return v


@pytest.mark.parametrize("act, reference", CASES, ids=IDS)
def test_forward_and_gradient_match_torch(act, reference) -> None:
    torch = pytest.importorskip("torch")
    x = ng.placeholder([axis("F", 4), axis("N", 6)])
    out = act(x)
    R = random_weights(out.axes)
    grad = ng.deriv(ng.sum(out * ng.constant(R, out.axes)), x)
    value = _value()
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        y, g = t.computation([out, grad], x)(value)
    xt = torch.tensor(value.T, requires_grad=True)
    yt = reference(xt)
    (yt * torch.tensor(R.T)).sum().backward()
    np.testing.assert_allclose(y, yt.detach().numpy().T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g, xt.grad.numpy().T, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("act", [a for a, _ in CASES], ids=IDS)
def test_gradient_matches_finite_differences(act) -> None:
    check_layer_gradients(lambda: Activation(act), [axis("F", 3), axis("N", 2)], input_value=_value((3, 2)))


def test_large_inputs_stay_finite() -> None:
    x = ng.placeholder([axis("F", 3), axis("N", 1)])
    outs = [Explin()(x), Softplus()(x), Softmax()(x), Logistic()(x)]
    value = np.array([[-1000.0], [0.0], [1000.0]])
    with ng.transformers.make_transformer() as t:
        for y in t.computation(outs, x)(value):
            assert np.all(np.isfinite(y))


def test_softmax_normalizes_over_features_per_time_step() -> None:
    x = ng.placeholder([axis("F", 3), axis("REC", 4), axis("N", 2)])
    with ng.transformers.make_transformer() as t:
        y = t.computation(Softmax()(x), x)(random_input(x.axes))
    np.testing.assert_allclose(y.sum(axis=0), 1, rtol=1e-6)
    with pytest.raises(ActivationError, match="feature axis"):
        Softmax()(ng.placeholder([axis("N", 3)]))


@pytest.mark.parametrize("name, cls", [("relu", Rectlin), ("Rectlin", Rectlin), ("ELU", Explin), ("explin", Explin),
                                       ("sigmoid", Logistic), ("logistic", Logistic), ("tanh", Tanh),
                                       ("softmax", Softmax), ("softplus", Softplus), ("linear", Identity),
                                       ("identity", Identity)])
def test_get_accepts_names(name, cls) -> None:
    assert type(activations.get(name)) is cls


@pytest.mark.parametrize("act", [a for a, _ in CASES], ids=IDS)
def test_config_round_trip(act) -> None:
    data = activations.serialize(act)
    assert activations.get(data) == act
    assert type(act).from_config(act.get_config()) == act


@pytest.mark.parametrize("bad, words", [("relux", "unknown activation 'relux'"), (3, "received 3"),
                                        ({"class_name": "Nope"}, "unknown activation class 'Nope'")])
def test_get_rejects_unknown(bad, words) -> None:
    with pytest.raises(ActivationError, match=words):
        activations.get(bad)


def test_bad_parameters() -> None:
    with pytest.raises(ActivationError, match="slope must be a finite number"):
        Rectlin(slope="x")
    with pytest.raises(ActivationError, match="alpha must be a finite number"):
        Explin(alpha=float("inf"))
