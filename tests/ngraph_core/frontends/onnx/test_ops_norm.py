"""Normalization converters (ops_norm.py) against onnxruntime: ranks, axes, opsets and outputs the node suite skips."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, build_model, import_model

RNG = np.random.default_rng(11)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 2, 2)])
def test_batch_norm_inference_any_rank(shape):
    c = shape[1]
    static = {"s": rand(c), "b": rand(c), "m": rand(c), "v": np.abs(rand(c)) + 0.5}
    check_node("BatchNormalization", {"x": rand(*shape)}, opset=9, static=static, epsilon=1e-3, rtol=1e-5,
               atol=1e-5)


def test_batch_norm_per_activation_statistics_before_opset_9():
    x = rand(3, 2, 4)
    s, b, m, v = rand(2, 4), rand(2, 4), rand(2, 4), np.abs(rand(2, 4)) + 0.5
    expected = (x - m) / np.sqrt(v + 1e-5) * s + b
    model = make_model("BatchNormalization", {"x": x}, 7, static={"s": s, "b": b, "m": m, "v": v}, spatial=0)
    (got,) = import_model(model, initializers="constants").run({"x": x})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_batch_norm_rejects_parameters_that_are_not_per_channel():
    model = make_model("BatchNormalization", {"x": rand(2, 3, 4)}, 9,
                       static={"s": rand(4), "b": rand(4), "m": rand(4), "v": rand(4)})
    with pytest.raises(OnnxError, match=r"shape \(3,\)"):
        build_model(model)


def test_batch_norm_training_mode_outputs_running_statistics():
    x = rand(3, 2, 4)
    mean, var = np.zeros(2, "float32") + 0.5, np.ones(2, "float32") * 2
    static = {"s": np.ones(2, "float32"), "b": np.zeros(2, "float32"), "m": mean, "v": var}
    y, running_mean, running_var = check_node(
        "BatchNormalization", {"x": x}, opset=15, static=static, n_outputs=3, training_mode=1, momentum=0.8,
        expected=[(x - x.mean((0, 2), keepdims=True)) / np.sqrt(x.var((0, 2), keepdims=True) + 1e-5),
                  0.8 * mean + 0.2 * x.mean((0, 2)), 0.8 * var + 0.2 * x.var((0, 2))], rtol=1e-4, atol=1e-5)
    assert running_mean.shape == (2,)


def test_instance_norm_3d_and_5d():
    for shape in [(2, 3, 7), (1, 2, 3, 2, 4)]:
        check_node("InstanceNormalization", {"x": rand(*shape)}, opset=6,
                   static={"s": rand(shape[1]), "b": rand(shape[1])}, epsilon=1e-4, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_layer_norm_axes_and_stash_outputs(axis):
    x = rand(2, 3, 4)
    tail = x.shape[axis:] if axis >= 0 else x.shape[len(x.shape) + axis:]
    check_node("LayerNormalization", {"x": x}, opset=17, static={"s": rand(*tail), "b": rand(*tail)}, n_outputs=3,
               axis=axis, rtol=1e-4, atol=1e-5)


def test_layer_norm_float16_computes_statistics_in_float32():
    x = (rand(4, 64) * 30 + 1000).astype("float16")  # float16 sums of squares would overflow
    got = check_node("LayerNormalization", {"x": x}, opset=17, static={"s": np.ones(64, "float16")}, rtol=1e-2,
                     atol=1e-2)
    assert got[0].dtype == np.float16 and np.isfinite(got[0]).all()


def _group_norm(x, groups, scale, bias, eps=1e-5):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    return y * scale.reshape(1, c, 1, 1) + bias.reshape(1, c, 1, 1)


def group_norm_model(x, s, b, opset, groups):
    """A GroupNormalization model (onnx's shape inference leaves its output untyped: typed here)."""
    model = make_model("GroupNormalization", {"x": x}, opset, static={"s": s, "b": b}, num_groups=groups)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", 1, x.shape))
    return model


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm_scales_per_group_at_opset_18_per_channel_at_21(opset):
    x = rand(2, 6, 3, 3)
    s, b = (rand(3), rand(3)) if opset == 18 else (rand(6), rand(6))
    per_channel = (np.repeat(s, 2), np.repeat(b, 2)) if opset == 18 else (s, b)
    # build_model skips onnx.checker, which rejects opset 18's (deprecated) GroupNormalization
    (got,) = build_model(group_norm_model(x, s, b, opset, 3), initializers="constants").run({"x": x})
    np.testing.assert_allclose(got, _group_norm(x, 3, *per_channel), rtol=1e-4, atol=1e-4)


def test_rms_norm_matches_numpy():
    x, s = rand(2, 3, 8), rand(8)
    expected = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5) * s
    check_node("RMSNormalization", {"x": x}, opset=23, static={"s": s}, expected=expected, rtol=1e-5, atol=1e-6)


def lrn_reference(x, size, alpha, beta, bias):
    c = x.shape[1]
    low, high = (size - 1) // 2, size - 1 - (size - 1) // 2
    sums = np.stack([(x[:, max(0, i - low):min(c, i + high + 1)] ** 2).sum(1) for i in range(c)], 1)
    return x / (bias + alpha / size * sums) ** beta


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn_window_sizes(size):
    x = rand(2, 6, 3, 3)
    expected = lrn_reference(x, size, 0.01, 0.5, 2.0) if size % 2 == 0 else None  # onnxruntime: odd sizes only
    check_node("LRN", {"x": x}, opset=13, size=size, alpha=0.01, beta=0.5, bias=2.0, expected=expected,
               rtol=1e-5, atol=1e-6)


def test_mean_variance_normalization_custom_axes():
    check_node("MeanVarianceNormalization", {"x": rand(2, 3, 4, 5)}, opset=13, axes=[1, 3], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p):
    x = rand(3, 4, 5)
    x[1, :, 2] = 0  # an all-zero slice normalizes to zeros, not NaN
    (got,) = check_node("LpNormalization", {"x": x}, opset=13, axis=1, p=p, rtol=1e-5, atol=1e-6)
    assert not np.isnan(got).any()


def test_group_norm_rejects_groups_that_do_not_divide_the_channels():
    x = rand(1, 4, 2)
    with pytest.raises(OnnxError, match="num_groups=3"):
        import_model(group_norm_model(x, rand(4), rand(4), 21, 3))
