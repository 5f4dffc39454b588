"""The shared layer-test helpers (in the spirit of Keras' ``run_layer_test``).

A layer test is one call::

    run_layer_test(lambda: Affine(3, bias=0.0), [F(5), N(4)], (3, 4))

``run_layer_test`` builds the layer on a placeholder and checks

(a) the output axes' lengths (and that the batch axis ``N`` stays last),
(b) ``get_config()`` is plain data (JSON) and ``serialize -> deserialize`` builds a layer
    with the same config and the same output axes, which — given the original's weights —
    computes the same output (deterministic layers),
(c) a forward run on the NumPy transformer (right shape, finite values),
(d) one plain-SGD training step built directly from ng ops
    (``ng.gradients(ng.sum(out * R), layer.trainable_variables)`` then ``ng.assign``):
    every trainable variable with a nonzero gradient changes and, for deterministic
    layers, the loss on the same batch decreases.

``check_layer_gradients`` compares ``ng.gradients`` of ``sum(out * R)`` with respect to the
input and every trainable variable against central finite differences in float64
(``make_transformer(float_dtype="float64")``, elements perturbed through ``write_variable``).

``torch_tensor`` / ``feature_major`` convert between our ``[F, N]`` layout and PyTorch's ``(N, F)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import ngraph_core as ng
from neon.layers import Layer, deserialize_layer, serialize_layer, training_mode

SEED = 1234


def axis(name: str, length: int) -> ng.Axis:
    return ng.make_axis(length, name=name)


def random_input(axes: Sequence[ng.Axis], dtype: str = "float32", low: float = -1.0, high: float = 1.0,
                 seed: int = SEED) -> np.ndarray:
    """Seeded values for an input of ``axes``: uniform floats, or integers in [low, high)."""
    rng = np.random.default_rng(seed)
    shape = tuple(a.length for a in axes)
    if dtype.startswith("float"):
        return rng.uniform(low, high, shape).astype(np.float32).astype(np.float64)
    return rng.integers(int(low), int(high), shape).astype(dtype)


def random_weights(axes: Sequence[ng.Axis], seed: int = SEED + 1) -> np.ndarray:
    """A fixed random ``R`` for the loss ``sum(out * R)`` (float32-representable, as constants are float32)."""
    r = np.random.default_rng(seed).standard_normal(tuple(a.length for a in axes))
    return r.astype(np.float32).astype(np.float64)


@dataclass
class LayerTestResult:
    layer: Layer
    x: ng.Op
    out: ng.Op
    x_value: np.ndarray
    forward: np.ndarray
    loss_before: float | None = None
    loss_after: float | None = None


def _copy_weights(t: Any, source: Layer, target: Layer) -> None:
    for a, b in zip(source.variables, target.variables):
        assert a.axes.lengths == b.axes.lengths and a.name == b.name, (a, b)
        t.write_variable(b, t.read_variable(a))


def run_layer_test(layer_factory: Callable[[], Layer], input_axes: Sequence[ng.Axis],
                   expected_output_lengths: tuple[int, ...], *, training: bool = True, input_dtype: str = "float32",
                   input_value: np.ndarray | None = None, low: float = -1.0, high: float = 1.0,
                   deterministic: bool = True, lr: float = 1e-3) -> LayerTestResult:
    """Build, check axes, round-trip the config, run forward and one SGD step (see the module docstring)."""
    layer = layer_factory()
    x = ng.placeholder(input_axes, dtype=input_dtype, name="x")
    with training_mode(training):
        out = layer(x)
    assert isinstance(out, ng.Op), f"{layer.name} returned {type(out).__name__}"
    assert out.axes.lengths == tuple(expected_output_lengths), f"output axes {out.axes}"
    if x.axes.batch_axis is not None:
        assert out.axes[-1].is_batch, f"the batch axis must stay last: {out.axes}"

    # (b) config: plain data; the round trip gives the same config and output axes
    config = layer.get_config()
    assert json.loads(json.dumps(config)) == config, "get_config() must be plain (JSON) data"
    clone = deserialize_layer(json.loads(json.dumps(serialize_layer(layer))))
    assert type(clone) is type(layer) and clone is not layer
    assert clone.get_config() == config
    with training_mode(training):
        clone_out = clone(x)
    assert clone_out.axes == out.axes

    x_value = random_input(input_axes, input_dtype, low, high) if input_value is None else input_value
    with ng.transformers.make_transformer() as t:
        # (c) forward
        forward = t.computation(out, x)(x_value)
        assert forward.shape == tuple(expected_output_lengths)
        assert np.all(np.isfinite(forward))
        if deterministic:
            _copy_weights(t, layer, clone)
            np.testing.assert_allclose(t.computation(clone_out, x)(x_value), forward, rtol=1e-6, atol=1e-6)
        # (d) one SGD step
        result = LayerTestResult(layer, x, out, x_value, forward)
        variables = layer.trainable_variables
        if not variables:
            return result
        R = ng.constant(random_weights(out.axes).astype(np.float32), out.axes)
        loss = ng.sum(out * R)
        grads = ng.gradients(loss, variables)
        updates = [ng.assign(v, v - lr * g) for v, g in zip(variables, grads)]
        step = t.computation([loss, *grads, ng.doall(updates + layer.updates)], x)
        before = [t.read_variable(v) for v in variables]
        loss_before, *grad_values, _ = step(x_value)
        # a gradient zero but for rounding (attention's key bias: softmax ignores a shift per query) is zero
        noise = 1e-5 * max(float(np.abs(g).max(initial=0.0)) for g in grad_values)
        for v, old, g in zip(variables, before, grad_values):
            assert g.shape == old.shape
            if np.any(np.abs(g) > noise):
                assert not np.allclose(t.read_variable(v), old), f"{v.name} did not change"
        result.loss_before = float(loss_before)
        if deterministic:
            result.loss_after = float(t.computation(loss, x)(x_value))
            assert result.loss_after < result.loss_before, (result.loss_before, result.loss_after)
    return result


def check_layer_gradients(layer_factory: Callable[[], Layer], input_axes: Sequence[ng.Axis], *,
                          training: bool = True, input_dtype: str = "float32",
                          input_value: np.ndarray | None = None, low: float = -1.0, high: float = 1.0,
                          eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7) -> dict[str, np.ndarray]:
    """``ng.gradients`` of ``sum(out * R)`` against central finite differences (float64).

    The input is a variable (so it can be perturbed); it is differentiated when it is a float.
    Returns the analytic gradients by name (``"x"`` and the variables' names).
    """
    layer = layer_factory()
    x_value = random_input(input_axes, input_dtype, low, high) if input_value is None else input_value
    x = ng.variable(input_axes, initial_value=x_value, dtype=input_dtype, name="x", trainable=False)
    with training_mode(training):
        out = layer(x)
    R = ng.constant(random_weights(out.axes), out.axes)
    loss = ng.sum(out * R)
    wrt = ([x] if input_dtype.startswith("float") else []) + layer.trainable_variables
    grads = ng.gradients(loss, wrt)
    found: dict[str, np.ndarray] = {}
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f_loss = t.computation(loss)
        analytic = t.computation(grads)()
        for v, g in zip(wrt, analytic):
            value = t.read_variable(v)
            numeric = np.zeros_like(value)
            for i in np.ndindex(value.shape):
                plus, minus = value.copy(), value.copy()
                plus[i] += eps
                minus[i] -= eps
                t.write_variable(v, plus)
                lp = f_loss()
                t.write_variable(v, minus)
                lm = f_loss()
                numeric[i] = (lp - lm) / (2 * eps)
            t.write_variable(v, value)
            np.testing.assert_allclose(g, numeric, rtol=rtol, atol=atol, err_msg=f"gradient of {v.name}")
            found[v.name] = g
    return found


def torch_tensor(array: np.ndarray, requires_grad: bool = False) -> Any:
    """A float64 PyTorch tensor of ``array`` with our (features..., N) layout moved to (N, features...)."""
    import torch

    moved = np.moveaxis(np.asarray(array, dtype=np.float64), -1, 0).copy()
    return torch.tensor(moved, dtype=torch.float64, requires_grad=requires_grad)


def feature_major(tensor: Any) -> np.ndarray:
    """A PyTorch (N, features...) tensor back in our (features..., N) layout."""
    return np.moveaxis(tensor.detach().numpy(), 0, -1)


def run_float64(outputs: Sequence[ng.Op], *placeholders_and_values: Any, before: Callable[[Any], None] | None = None
                ) -> tuple[np.ndarray, ...]:
    """Run ``outputs`` once on a float64 NumPy transformer; ``before(t)`` may write variables first."""
    placeholders = placeholders_and_values[0::2]
    values = placeholders_and_values[1::2]
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        if before is not None:
            before(t)
        return t.computation(list(outputs), *placeholders)(*values)
