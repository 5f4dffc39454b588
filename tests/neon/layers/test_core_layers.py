"""Linear, Bias, Activation and Affine: the layer helper, finite differences, PyTorch, sharing, errors."""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import (
    axis,
    check_layer_gradients,
    feature_major,
    random_input,
    run_float64,
    run_layer_test,
    torch_tensor,
)

import ngraph_core as ng
from neon.activations import Explin, Rectlin, Softmax, Tanh
from neon.initializers import Constant, GlorotUniform, Uniform
from neon.layers import Activation, Affine, Bias, Layer, LayerError, Linear, training_mode


def F(n: int = 5) -> ng.Axis:
    return axis("F", n)


def N(n: int = 4) -> ng.Axis:
    return axis("N", n)


# -- the layer helper, one line per layer and input layout ---------------------------------------

@pytest.mark.parametrize("factory, input_axes, out_lengths", [
    (lambda: Linear(3, Uniform(-0.5, 0.5)), [F(), N()], (3, 4)),
    (lambda: Linear(3), [axis("C", 2), axis("H", 3), axis("W", 3), N()], (3, 4)),
    (lambda: Linear(2), [F(), axis("REC", 3), N()], (2, 3, 4)),
    (lambda: Bias(Uniform(-1, 1)), [F(), N()], (5, 4)),
    (lambda: Bias(), [axis("C", 2), axis("H", 3), N()], (2, 3, 4)),
    (lambda: Activation("tanh"), [F(), N()], (5, 4)),
    (lambda: Activation(Rectlin(slope=0.1)), [F(), N()], (5, 4)),
    (lambda: Affine(3, bias=0.0, activation="relu"), [F(), N()], (3, 4)),
    (lambda: Affine(3, bias=Constant(0.1), activation=Softmax()), [F(), N()], (3, 4)),
    (lambda: Affine(3, bias=0.0, activation=Tanh(), batch_norm=True), [F(), N()], (3, 4)),
    (lambda: Affine(6), [axis("C", 2), axis("H", 2), N()], (6, 4)),
], ids=["linear", "linear-image", "linear-rec", "bias", "bias-image", "act-tanh", "act-leaky", "affine-relu",
        "affine-softmax", "affine-bn", "affine-image"])
def test_run_layer_test(factory, input_axes, out_lengths) -> None:
    run_layer_test(factory, input_axes, out_lengths)


# -- gradients against finite differences (float64) -----------------------------------------------

@pytest.mark.parametrize("factory, input_axes", [
    (lambda: Linear(3, Uniform(-1, 1)), [F(4), N(3)]),
    (lambda: Linear(2, Uniform(-1, 1)), [axis("C", 2), axis("H", 2), N(3)]),
    (lambda: Bias(Uniform(-1, 1)), [F(3), N(3)]),
    (lambda: Affine(3, Uniform(-1, 1), bias=Uniform(-1, 1), activation=Explin()), [F(4), N(3)]),
    (lambda: Affine(3, Uniform(-1, 1), bias=Uniform(-1, 1), activation=Softmax()), [F(4), N(3)]),
    (lambda: Affine(3, Uniform(-1, 1), activation="logistic", batch_norm=True), [F(4), N(5)]),
], ids=["linear", "linear-image", "bias", "affine-elu", "affine-softmax", "affine-bn"])
def test_gradients_match_finite_differences(factory, input_axes) -> None:
    check_layer_gradients(factory, input_axes)


# -- against PyTorch -----------------------------------------------------------------------------

@pytest.mark.parametrize("activation, torch_name", [(None, None), ("relu", "ReLU"), (Rectlin(slope=0.2), "LeakyReLU"),
                                                    ("elu", "ELU"), ("tanh", "Tanh"), ("softplus", "Softplus"),
                                                    ("sigmoid", "Sigmoid"), ("softmax", "Softmax")])
def test_affine_matches_torch_linear(activation, torch_name) -> None:
    torch = pytest.importorskip("torch")
    f_axis, n_axis = F(5), N(4)
    layer = Affine(3, Uniform(-1, 1), bias=Uniform(-1, 1), activation=activation)
    x = ng.placeholder([f_axis, n_axis])
    out = layer(x)
    R = random_input(out.axes, seed=7)
    grads = ng.gradients(ng.sum(out * ng.constant(R, out.axes)), [x, layer.linear.W, layer.bias.b])
    x_value = random_input([f_axis, n_axis])
    y, gx, gW, gb = run_float64([out, *grads], x, x_value)

    module = torch.nn.Linear(5, 3).double()
    with torch.no_grad():
        module.weight.copy_(torch.tensor(ng_value(layer.linear.W)))
        module.bias.copy_(torch.tensor(ng_value(layer.bias.b)))
    act = {None: torch.nn.Identity(), "LeakyReLU": torch.nn.LeakyReLU(0.2), "Softmax": torch.nn.Softmax(dim=1)}.get(
        torch_name, getattr(torch.nn, torch_name or "Identity")())
    xt = torch_tensor(x_value, requires_grad=True)
    yt = act(module(xt))
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gW, module.weight.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gb, module.bias.grad.numpy(), rtol=1e-10, atol=1e-12)


def ng_value(var: ng.Op) -> np.ndarray:
    """A variable's initial value (layers fill their variables when they build)."""
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        return t.read_variable(var)


def test_linear_on_an_image_matches_torch_flatten_then_linear() -> None:
    torch = pytest.importorskip("torch")
    C, H, W, n = axis("C", 2), axis("H", 3), axis("W", 2), N(3)
    layer = Linear(4, GlorotUniform())
    x = ng.placeholder([C, H, W, n])
    out = layer(x)
    x_value = random_input(x.axes)
    (y,) = run_float64([out], x, x_value)
    weight = ng_value(layer.W)  # [Out, C, H, W]
    expected = torch.tensor(x_value).permute(3, 0, 1, 2).reshape(3, -1) @ torch.tensor(weight).reshape(4, -1).T
    np.testing.assert_allclose(y, expected.numpy().T, rtol=1e-10)


# -- structure: names, scopes, labels, sharing ---------------------------------------------------

def test_affine_is_composed_of_sub_layers_in_its_scope() -> None:
    layer = Affine(3, bias=0.0, activation="relu", batch_norm=True, name="fc1")
    out = layer(ng.placeholder([F(), N()]))
    assert out.axes.names == ("fc1", "N") and out.axes[0] == layer.out_axis
    kinds = [type(s).__name__ for s in layer.sublayers]
    assert kinds == ["Linear", "BatchNorm", "Bias", "Activation"]
    scopes = {v.name: tuple((e.name, e.kind) for e in v.meta.scope) for v in layer.variables}
    assert scopes["W"] == (("fc1", "Affine"), ("Linear_0", "Linear"))
    assert scopes["b"] == (("fc1", "Affine"), ("Bias_0", "Bias"))
    assert scopes["gamma"][-1] == ("BatchNorm_0", "BatchNorm")
    by_name = {v.name: v for v in layer.variables}
    assert {"weight", "trainable"} <= by_name["W"].meta.labels
    assert {"bias", "trainable"} <= by_name["b"].meta.labels
    assert "trainable" not in by_name["mean"].meta.labels
    assert [v.name for v in layer.trainable_variables] == ["W", "gamma", "beta", "b"]


def test_calling_a_layer_twice_shares_its_weights() -> None:
    layer = Affine(3, Uniform(-1, 1), bias=Uniform(-1, 1))
    f_axis = F()
    a, b = ng.placeholder([f_axis, N(4)]), ng.placeholder([f_axis, N(4)])
    ya, yb = layer(a), layer(b)
    assert len(layer.variables) == 2
    value = random_input(a.axes)
    out_a, out_b = run_float64([ya, yb], a, value, b, value)
    np.testing.assert_array_equal(out_a, out_b)
    # a different batch size is fine: the weights do not depend on N
    assert layer(ng.placeholder([f_axis, N(7)])).axes.lengths == (3, 7)


def test_default_names_are_unique_and_name_the_output_axis() -> None:
    x = ng.placeholder([F(), N()])
    a, b = Affine(4), Affine(4)
    assert a.name != b.name
    assert b(a(x)).axes.names == (b.name, "N")


# -- bad configs and bad inputs raise LayerError with expected vs received --------------------------

@pytest.mark.parametrize("make, words", [
    (lambda: Linear(0), ["nout", "positive int", "0"]),
    (lambda: Affine(-3), ["nout", "-3"]),
    (lambda: Affine(2.5), ["nout", "2.5"]),
    (lambda: Affine(3, activation="relux"), ["unknown activation", "relux"]),
    (lambda: Affine(3, init="nope"), ["unknown initializer", "nope"]),
    (lambda: Affine(3, batch_norm="yes"), ["batch_norm", "bool"]),
    (lambda: Activation(42), ["activation", "42"]),
    (lambda: Bias(init=[1, 2]), ["initializer"]),
    (lambda: Linear(3, name="a/b"), ["name"]),
])
def test_bad_configs_raise_layer_error(make, words) -> None:
    with pytest.raises(LayerError) as info:
        make()
    for word in words:
        assert word in str(info.value)


def test_bad_inputs_raise_layer_error_naming_the_layer() -> None:
    only_batch = ng.placeholder([N()])
    with pytest.raises(LayerError, match=r"fc \(Affine\).*expected an input with a feature axis.*received: \[N:4\]"):
        Affine(3, name="fc")(only_batch)
    layer = Linear(3, name="lin")
    layer(ng.placeholder([F(5), N()]))
    with pytest.raises(LayerError, match=r"lin \(Linear\): expected feature axes \[F:5\].*received: \[F:6\].*hint"):
        layer(ng.placeholder([F(6), N()]))
    with pytest.raises(LayerError, match=r"without an axis named 'F'"):
        Linear(2, name="F")(ng.placeholder([F(), N()]))
    with pytest.raises(LayerError, match="expected an ngraph op"):
        Linear(2)(np.zeros((5, 4)))


def test_bias_rejects_a_later_input_with_another_feature_axis() -> None:
    layer = Bias()
    layer(ng.placeholder([F(5), N()]))
    with pytest.raises(LayerError, match=r"expected feature axis \[F:5\]"):
        layer(ng.placeholder([axis("G", 5), N()]))


def test_activation_layer_applies_its_function_in_training_and_inference() -> None:
    x = ng.placeholder([F(), N()])
    layer = Activation("relu")
    with training_mode(True):
        y_train = layer(x)
    y_eval = layer(x)
    value = random_input(x.axes)
    a, b = run_float64([y_train, y_eval], x, value)
    np.testing.assert_array_equal(a, np.maximum(value, 0))
    np.testing.assert_array_equal(b, a)


def test_user_defined_layer_round_trips_through_the_registry() -> None:
    from neon.layers import deserialize_layer, serialize_layer

    class Scale(Layer):
        def __init__(self, factor: float = 2.0, name: str | None = None) -> None:
            super().__init__(name)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return {"name": self.name, "factor": self.factor}

    clone = deserialize_layer(serialize_layer(Scale(3.0, name="s")))
    assert isinstance(clone, Scale) and clone.factor == 3.0 and clone.name == "s"
