"""Linear quantization converters (ops_quant.py) against onnxruntime: scales per tensor, per axis, blocked."""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import UnsupportedOnnxOpError, build_model

RNG = np.random.default_rng(21)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16"])
def test_quantize_rounds_half_to_even_and_saturates(dtype):
    x = np.array([[-1000.0, -2.5, -0.5, 0.5, 1.5, 2.5, 1e6]], "float32")
    zero = np.array(3 if dtype.startswith("u") else -1, dtype)
    got = check_node("QuantizeLinear", {"x": x}, opset=21, static={"s": np.array(1.0, "float32"), "z": zero})
    info = np.iinfo(dtype)
    assert got[0][0, 0] == max(info.min, -1000 + int(zero)) and got[0][0, -1] == info.max


def test_quantize_per_axis_and_blocked():
    x = (RNG.standard_normal((2, 6, 3)) * 10).astype("float32")
    per_axis = {"s": RNG.random(6).astype("float32") + 0.1, "z": RNG.integers(0, 20, 6).astype("uint8")}
    check_node("QuantizeLinear", {"x": x}, opset=21, static=per_axis, axis=1)
    blocked = {"s": RNG.random((2, 3, 3)).astype("float32") + 0.1, "z": RNG.integers(-5, 5, (2, 3, 3)).astype("int8")}
    check_node("QuantizeLinear", {"x": x}, opset=21, static=blocked, axis=1, block_size=2)


def test_dequantize_per_axis_to_the_scale_type():
    q = RNG.integers(0, 255, (3, 4)).astype("uint8")
    static = {"s": (RNG.random(4) + 0.5).astype("float16"), "z": RNG.integers(0, 255, 4).astype("uint8")}
    got = check_node("DequantizeLinear", {"q": q}, opset=21, static=static, axis=1, rtol=1e-3, atol=1e-3)
    assert got[0].dtype == np.float16


def test_dynamic_quantize_outputs_scale_and_zero_point():
    x = (RNG.standard_normal((4, 5)) * 3 + 1).astype("float32")
    y, scale, zero = check_node("DynamicQuantizeLinear", {"x": x}, opset=11, n_outputs=3)
    np.testing.assert_allclose(scale, (max(x.max(), 0) - min(x.min(), 0)) / 255, rtol=1e-6)
    assert y.dtype == zero.dtype == np.uint8


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_matmul_matches_onnxruntime(dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (2, 3, 4)).astype(dtype)
    b = RNG.integers(info.min, info.max, (4, 5)).astype(dtype)
    f = lambda v: np.array(v, "float32")  # noqa: E731
    z = lambda v: np.array(v, dtype)  # noqa: E731
    check_node("QLinearMatMul", {"a": a, "as": f(0.02), "az": z(3), "b": b, "bs": f(0.03), "bz": z(-2 if info.min
               else 7), "ys": f(0.5), "yz": z(1)}, opset=21)


def test_qlinear_conv_per_channel_weight_scale_matches_onnxruntime():
    x = RNG.integers(0, 255, (1, 2, 6, 6)).astype("uint8")
    w = RNG.integers(-100, 100, (3, 2, 3, 3)).astype("int8")
    static = {"xs": np.array(0.05, "float32"), "xz": np.array(128, "uint8"), "w": w,
              "ws": (RNG.random(3) * 0.02 + 0.01).astype("float32"), "wz": np.zeros(3, "int8"),
              "ys": np.array(0.7, "float32"), "yz": np.array(10, "uint8"),
              "b": RNG.integers(-500, 500, 3).astype("int32")}
    check_node("QLinearConv", {"x": x}, opset=10, static=static, pads=[1, 1, 1, 1], strides=[2, 1])


def test_quantizing_to_a_32_bit_type_is_unsupported():
    model = make_model("QuantizeLinear", {"x": np.ones(3, "float32")}, 21,
                       static={"s": np.array(1.0, "float32"), "z": np.array(0, "int32")})
    with pytest.raises(UnsupportedOnnxOpError, match="int32"):
        build_model(model)
