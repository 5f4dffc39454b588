"""ONNX activation and Clip converters (ops_activations.py) against onnxruntime.

Beyond the node suite: attribute defaults and non-defaults, extreme inputs (no overflow in
the discarded branch), float16 and float64, PRelu's slope broadcasting, both Clip forms,
gradients of an imported activation, and the typed errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

import ngraph_core
import ngraph_core.api as ng
from ngraph_core.frontends.onnx import OnnxError, import_model
from ngraph_core.transformers import make_transformer

RNG = np.random.default_rng(2)
EXTREME = np.array([-1000.0, -30.0, -1.0, -0.25, 0.0, 0.25, 1.0, 30.0, 1000.0], "float32")


@pytest.mark.parametrize("op, attrs", [
    ("Relu", {}), ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}), ("Elu", {}), ("Elu", {"alpha": 0.5}),
    ("Selu", {}), ("Selu", {"alpha": 2.0, "gamma": 3.0}), ("ThresholdedRelu", {"alpha": 0.1}),
    ("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.5, "beta": 0.6}), ("Sigmoid", {}), ("Tanh", {}),
    ("Softplus", {}), ("Softsign", {}),
])
def test_activations_at_opset_13_on_extreme_inputs(op, attrs):
    got = check_node(op, {"x": EXTREME}, opset=13, **attrs)
    assert np.isfinite(got[0]).all()


@pytest.mark.parametrize("op, opset, attrs", [
    ("Celu", 12, {"alpha": 2.0}), ("HardSwish", 14, {}), ("Mish", 18, {}), ("Gelu", 20, {}),
    ("Gelu", 20, {"approximate": "tanh"}), ("Shrink", 9, {"lambd": 0.8, "bias": 0.3}),
])
def test_newer_activations(op, opset, attrs):
    check_node(op, {"x": RNG.standard_normal((3, 4)).astype("float32") * 3}, opset=opset, rtol=1e-4, atol=1e-5, **attrs)


def test_swish_with_alpha():
    x = RNG.standard_normal((5,)).astype("float32")
    check_node("Swish", {"x": x}, opset=24, alpha=2.0, expected=x / (1 + np.exp(-2.0 * x)))


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_activations_keep_the_input_dtype(dtype):
    x = RNG.standard_normal((2, 3)).astype(dtype)
    got = check_node("LeakyRelu", {"x": x}, opset=16, alpha=0.2, rtol=1e-3)
    assert got[0].dtype == np.dtype(dtype)
    elu = np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(dtype)
    check_node("Elu", {"x": x}, opset=6, rtol=1e-3, atol=1e-3, expected=elu)


def test_relu_on_integers():
    check_node("Relu", {"x": np.array([-3, 0, 4], "int32")}, opset=14, expected=np.array([0, 0, 4], "int32"))


@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (5,)])
def test_prelu_broadcasts_the_slope(slope_shape):
    x = RNG.standard_normal((2, 3, 4, 5)).astype("float32")
    slope = RNG.uniform(0.1, 0.5, slope_shape).astype("float32")
    check_node("PRelu", {"x": x, "slope": slope}, opset=9)


def test_clip_with_attributes_before_opset_11():
    x = RNG.standard_normal((3, 4)).astype("float32") * 3
    check_node("Clip", {"x": x}, opset=6, min=-1.0, max=0.5)
    check_node("Clip", {"x": x}, opset=6, max=0.5)
    check_node("Clip", {"x": x}, opset=6, expected=x)  # no bounds: the identity


def test_clip_with_optional_inputs():
    x = RNG.standard_normal((3, 4)).astype("float32") * 3
    check_node("Clip", {"x": x, "lo": np.array(-1.0, "float32"), "hi": np.array(1.0, "float32")}, opset=11)
    check_node("Clip", {"x": x, "_lo": None, "hi": np.array(0.2, "float32")}, opset=13)
    check_node("Clip", {"x": x}, static={"lo": np.array(-0.5, "float32")}, opset=13)
    check_node("Clip", {"x": np.array([-5, 3, 9], "int8"), "lo": np.array(-2, "int8"), "hi": np.array(4, "int8")},
               opset=13, expected=np.array([-2, 3, 4], "int8"))


def test_clip_min_above_max_gives_max():
    x = np.array([-3.0, 0.0, 3.0], "float32")
    check_node("Clip", {"x": x, "lo": np.array(2.0, "float32"), "hi": np.array(1.0, "float32")}, opset=13,
               expected=np.ones(3, "float32"))


def test_imported_activation_differentiates():
    x = np.array([-2.0, -0.5, 0.5, 2.0], "float32")
    model = import_model(make_model("Elu", {"x": x}, 13, alpha=0.5))
    y = model.outputs[0]
    grad = ngraph_core.deriv(ng.sum(y), model.inputs[0])
    with make_transformer("numpy") as t:
        dx = t.computation(grad, *model.inputs)(x)
    np.testing.assert_allclose(dx, np.where(x > 0, 1.0, 0.5 * np.exp(x)), rtol=1e-5)


def test_malformed_attributes_raise_onnx_errors():
    x = {"x": np.ones(2, "float32")}
    with pytest.raises(OnnxError, match="Gelu node .*'none' or 'tanh'"):
        import_model(make_model("Gelu", x, 20, approximate="exact"))
    with pytest.raises(OnnxError, match="Celu node .*alpha must be nonzero"):
        import_model(make_model("Celu", x, 12, alpha=0.0))
