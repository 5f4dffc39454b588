"""BatchNorm: the layer helper in both modes, finite differences, PyTorch (train, eval, running stats)."""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import (
    axis,
    check_layer_gradients,
    feature_major,
    random_input,
    random_weights,
    run_layer_test,
    torch_tensor,
)

import ngraph_core as ng
from neon.layers import BatchNorm, LayerError, training_mode


@pytest.mark.parametrize("training", [True, False], ids=["train", "inference"])
@pytest.mark.parametrize("input_axes, out_lengths", [
    ([axis("F", 4), axis("N", 6)], (4, 6)),
    ([axis("C", 2), axis("H", 3), axis("W", 3), axis("N", 2)], (2, 3, 3, 2)),
    ([axis("F", 3), axis("REC", 2), axis("N", 4)], (3, 2, 4)),
], ids=["dense", "image", "sequence"])
def test_run_layer_test(training, input_axes, out_lengths) -> None:
    run_layer_test(lambda: BatchNorm(), input_axes, out_lengths, training=training)


@pytest.mark.parametrize("training", [True, False], ids=["train", "inference"])
@pytest.mark.parametrize("input_axes", [
    [axis("F", 3), axis("N", 5)],
    [axis("C", 2), axis("H", 2), axis("N", 3)],
], ids=["dense", "image"])
def test_gradients_match_finite_differences(training, input_axes) -> None:
    check_layer_gradients(lambda: BatchNorm(eps=1e-2), input_axes, training=training)


def _run_bn(layer: BatchNorm, x_value: np.ndarray, x_axes, training: bool, steps: int = 1):
    """Output, input/gamma/beta gradients (first step) and the running stats after ``steps`` training steps."""
    x = ng.placeholder(x_axes)
    with training_mode(training):
        out = layer(x)
    R = ng.constant(random_weights(out.axes), out.axes)
    grads = ng.gradients(ng.sum(out * R), [x, layer.gamma, layer.beta])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        step = t.computation([out, *grads, ng.doall(layer.updates)] if layer.updates else [out, *grads], x)
        first = step(x_value)
        for _ in range(steps - 1):
            step(x_value)
        return first[:4], t.read_variable(layer.mean), t.read_variable(layer.var)


@pytest.mark.parametrize("image", [False, True], ids=["BatchNorm1d", "BatchNorm2d"])
def test_matches_torch_in_training_mode_with_running_stats(image) -> None:
    torch = pytest.importorskip("torch")
    if image:
        x_axes = [axis("C", 3), axis("H", 2), axis("W", 2), axis("N", 4)]
        module = torch.nn.BatchNorm2d(3, eps=1e-3, momentum=0.1).double()
    else:
        x_axes = [axis("F", 3), axis("N", 6)]
        module = torch.nn.BatchNorm1d(3, eps=1e-3, momentum=0.1).double()
    x_value = random_input(x_axes) * 3 + 1
    layer = BatchNorm(rho=0.9, eps=1e-3)
    (y, gx, ggamma, gbeta), mean, var = _run_bn(layer, x_value, x_axes, training=True, steps=2)

    module.train()
    xt = torch_tensor(x_value, requires_grad=True)
    yt = module(xt)
    (yt * torch_tensor(random_weights(x_axes))).sum().backward()
    module(torch_tensor(x_value))  # the second step moves the running stats again
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ggamma, module.weight.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gbeta, module.bias.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mean, module.running_mean.numpy(), rtol=1e-9)
    np.testing.assert_allclose(var, module.running_var.numpy(), rtol=1e-9)


def test_matches_torch_in_eval_mode_with_given_running_stats() -> None:
    torch = pytest.importorskip("torch")
    x_axes = [axis("F", 3), axis("N", 5)]
    x_value = random_input(x_axes)
    layer = BatchNorm(eps=1e-3)
    x = ng.placeholder(x_axes)
    out = layer(x)  # inference mode (the default)
    assert layer.updates == []
    R = random_weights(x_axes)
    grads = ng.gradients(ng.sum(out * ng.constant(R, out.axes)), [x, layer.gamma, layer.beta])
    stats = {layer.mean: [0.5, -1.0, 0.1], layer.var: [2.0, 0.5, 1.5], layer.gamma: [1.5, 0.5, -1.0],
             layer.beta: [0.1, 0.2, 0.3]}
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        for var, value in stats.items():
            t.write_variable(var, np.array(value))
        y, gx, ggamma, gbeta = t.computation([out, *grads], x)(x_value)

    module = torch.nn.BatchNorm1d(3, eps=1e-3).double().eval()
    with torch.no_grad():
        module.running_mean.copy_(torch.tensor(stats[layer.mean], dtype=torch.float64))
        module.running_var.copy_(torch.tensor(stats[layer.var], dtype=torch.float64))
        module.weight.copy_(torch.tensor(stats[layer.gamma], dtype=torch.float64))
        module.bias.copy_(torch.tensor(stats[layer.beta], dtype=torch.float64))
    xt = torch_tensor(x_value, requires_grad=True)
    yt = module(xt)
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-10)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-10)
    np.testing.assert_allclose(ggamma, module.weight.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gbeta, module.bias.grad.numpy(), rtol=1e-10)


def test_train_and_inference_outputs_share_variables() -> None:
    x_axes = [axis("F", 2), axis("N", 64)]
    layer = BatchNorm(rho=0.0)  # rho 0: the running stats become the last batch's
    x = ng.placeholder(x_axes)
    with training_mode(True):
        train_out = layer(x)
    eval_out = layer(x)
    assert len(layer.variables) == 4
    x_value = random_input(x_axes) * 4 + 2
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        train = t.computation([train_out, ng.doall(layer.updates)], x)
        evaluate = t.computation(eval_out, x)
        fresh = evaluate(x_value)  # running mean 0, var 1: nearly the identity
        np.testing.assert_allclose(fresh, x_value / np.sqrt(1 + 1e-3), rtol=1e-12)
        y_train, _ = train(x_value)
        np.testing.assert_allclose(y_train.mean(axis=1), 0, atol=1e-12)
        np.testing.assert_allclose(y_train.var(axis=1), 1, rtol=1e-2)
        y_eval = evaluate(x_value)
    # inference uses the unbiased running variance: the same normalization up to n/(n-1)
    n = x_value.shape[1]
    centered = x_value - x_value.mean(axis=1, keepdims=True)
    expected = centered / np.sqrt(x_value.var(axis=1, keepdims=True) * n / (n - 1) + 1e-3)
    np.testing.assert_allclose(y_eval, expected, rtol=1e-10)


def test_variables_and_labels() -> None:
    layer = BatchNorm()
    layer(ng.placeholder([axis("C", 3), axis("H", 2), axis("N", 2)]))
    by_name = {v.name: v for v in layer.variables}
    assert set(by_name) == {"gamma", "beta", "mean", "var"}
    assert all(v.axes.names == ("C",) for v in by_name.values())
    assert [v.name for v in layer.trainable_variables] == ["gamma", "beta"]
    assert "running" in by_name["mean"].meta.labels and "trainable" not in by_name["var"].meta.labels


@pytest.mark.parametrize("make, words", [
    (lambda: BatchNorm(rho=1.5), ["rho", "[0.0, 1.0]", "1.5"]),
    (lambda: BatchNorm(eps=0), ["eps", "0"]),
    (lambda: BatchNorm(eps=float("nan")), ["eps", "nan"]),
])
def test_bad_configs(make, words) -> None:
    with pytest.raises(LayerError) as info:
        make()
    assert all(w in str(info.value) for w in words)


def test_bad_inputs() -> None:
    with pytest.raises(LayerError, match=r"expected an input with a batch axis named 'N', received: \[F:3\]"):
        BatchNorm()(ng.placeholder([axis("F", 3)]))
    with pytest.raises(LayerError, match="feature axis"):
        BatchNorm()(ng.placeholder([axis("N", 3)]))
