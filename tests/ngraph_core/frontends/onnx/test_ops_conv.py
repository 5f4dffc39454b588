"""Conv, ConvTranspose and ConvInteger converters (ops_conv.py) against onnxruntime on random geometries.

The node suite has a dozen fixed Conv shapes; these draw many (1-D/2-D/3-D, groups,
strides, dilations, asymmetric pads, auto_pad, bias) from a seeded generator so the
NCHW -> ngraph layout mapping and the padding arithmetic are checked where they differ.
"""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, UnsupportedOnnxOpError, build_model

RNG = np.random.default_rng(7)


def conv_case(seed: int) -> tuple[dict, dict, dict]:
    """Random (inputs, initializers, attributes) of one valid Conv."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    group = int(rng.choice([1, 2, 3]))
    cin, cout = group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    dilations = [int(d) for d in rng.integers(1, 3, rank)]
    strides = [int(s) for s in rng.integers(1, 3, rank)]
    pads = [int(p) for p in rng.integers(0, 3, 2 * rank)]
    lengths = [int(rng.integers((k - 1) * d + 1, (k - 1) * d + 6)) for k, d in zip(kernel, dilations)]
    x = rng.standard_normal([int(rng.integers(1, 3)), cin, *lengths]).astype("float32")
    w = rng.standard_normal([cout, cin // group, *kernel]).astype("float32")
    attrs = dict(group=group, strides=strides, dilations=dilations)
    mode = rng.choice(["pads", "SAME_UPPER", "SAME_LOWER", "VALID"])
    if mode == "pads":
        attrs["pads"] = pads
    else:
        attrs["auto_pad"] = str(mode)
        if mode != "VALID":  # onnxruntime has no dilated SAME convolution
            attrs["dilations"] = [1] * rank
    static = {"w": w}
    if rng.random() < 0.5:
        static["b"] = rng.standard_normal([cout]).astype("float32")
    return {"x": x}, static, attrs


@pytest.mark.parametrize("seed", range(40))
def test_conv_matches_onnxruntime_on_random_geometry(seed):
    inputs, static, attrs = conv_case(seed)
    check_node("Conv", inputs, opset=11, static=static, rtol=1e-4, atol=1e-5, **attrs)


def test_conv_asymmetric_pads_change_the_output_shape_as_onnx_says():
    x = RNG.standard_normal((1, 2, 7, 5)).astype("float32")
    w = RNG.standard_normal((4, 1, 3, 2)).astype("float32")
    got = check_node("Conv", {"x": x}, opset=11, static={"w": w}, group=2, strides=[2, 1],
                     pads=[0, 2, 1, 0], dilations=[1, 2], rtol=1e-4, atol=1e-5)
    # H: (7 + 0 + 1 - 3) // 2 + 1 = 3; W: (5 + 2 + 0 - 3) // 1 + 1 = 5
    assert got[0].shape == (1, 4, 3, 5)


def test_conv_with_a_filter_fed_at_run_time():
    x = RNG.standard_normal((2, 3, 6, 6)).astype("float32")
    w = RNG.standard_normal((5, 3, 3, 3)).astype("float32")
    check_node("Conv", {"x": x, "w": w}, opset=11, pads=[1, 1, 1, 1], rtol=1e-4, atol=1e-5)


def reference(op_type: str, inputs: dict, static: dict, **attrs) -> list[np.ndarray]:
    """The ONNX reference evaluator's outputs for one node (the spec, where onnxruntime deviates)."""
    from onnx.reference import ReferenceEvaluator

    model = make_model(op_type, inputs, 11, static=static, **attrs)
    return ReferenceEvaluator(model).run(None, inputs)


@pytest.mark.parametrize("seed", range(24))
def test_conv_transpose_matches_onnxruntime_on_random_geometry(seed):
    rng = np.random.default_rng(100 + seed)
    rank = int(rng.integers(1, 3))
    mode = seed % 3
    group = int(rng.choice([1, 2])) if mode != 2 else 1  # the ONNX reference (judge of mode 2) mishandles groups
    cin, cout = group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    strides = [int(s) for s in rng.integers(1, 4, rank)]
    dilations = [int(d) for d in rng.integers(1, 3, rank)]
    x = rng.standard_normal([1, cin, *rng.integers(2, 5, rank)]).astype("float32")
    w = rng.standard_normal([cin, cout // group, *kernel]).astype("float32")
    attrs = dict(group=group, strides=strides, dilations=dilations)
    if mode == 0:
        attrs["pads"] = [int(p) for p in rng.integers(0, 2, 2 * rank)]
        attrs["output_padding"] = [int(rng.integers(0, s)) for s in strides]
    elif mode == 1:
        full = [s * (n - 1) + (k - 1) * d + 1 for s, n, k, d in zip(strides, x.shape[2:], kernel, dilations)]
        attrs["output_shape"] = [int(f - rng.integers(0, 2)) for f in full]
    else:
        attrs["auto_pad"] = "SAME_UPPER" if seed % 2 else "SAME_LOWER"
    static = {"w": w, "b": rng.standard_normal([cout]).astype("float32")}
    # onnxruntime clamps a negative SAME padding to 0 where the ONNX spec (and its reference) pads the
    # output to input * stride; there the reference is the judge
    full = [s * (n - 1) + (k - 1) * d + 1 for s, n, k, d in zip(strides, x.shape[2:], kernel, dilations)]
    spec_only = mode == 2 and any(n * s > f for n, s, f in zip(x.shape[2:], strides, full))
    expected = reference("ConvTranspose", {"x": x}, static, **attrs) if spec_only else None
    check_node("ConvTranspose", {"x": x}, opset=11, static=static, expected=expected, rtol=1e-4, atol=1e-5,
               **attrs)


def test_conv_transpose_output_padding_at_least_the_stride_appends_zeros():
    x = RNG.standard_normal((1, 1, 3)).astype("float32")
    w = RNG.standard_normal((1, 1, 2)).astype("float32")
    got = check_node("ConvTranspose", {"x": x}, opset=11, static={"w": w}, strides=[1], output_padding=[2],
                     expected=np.concatenate([np.convolve(x[0, 0], w[0, 0]), [0, 0]]).reshape(1, 1, 6)
                     .astype("float32"), rtol=1e-5, atol=1e-6)
    assert got[0][0, 0, -1] == 0.0


def test_conv_integer_with_per_channel_zero_points_matches_onnxruntime():
    x = RNG.integers(0, 255, (1, 2, 5, 5)).astype("uint8")
    w = RNG.integers(0, 255, (3, 2, 2, 2)).astype("uint8")
    got = check_node("ConvInteger", {"x": x}, opset=10, static={"w": w, "xz": np.array(128, "uint8"),
                                                                "wz": np.array(100, "uint8")}, pads=[1, 0, 0, 1])
    assert got[0].dtype == np.int32


def test_conv_rejects_channels_that_do_not_match_the_groups():
    x = RNG.standard_normal((1, 4, 5, 5)).astype("float32")
    w = RNG.standard_normal((2, 3, 3, 3)).astype("float32")
    with pytest.raises(OnnxError, match="group"):
        check_node("Conv", {"x": x}, opset=11, static={"w": w}, group=2, expected=[x])


def test_conv_of_integers_is_unsupported_with_the_node_named():
    x = np.ones((1, 1, 3, 3), "int32")
    model = make_model("Conv", {"x": x}, 11, static={"w": np.ones((1, 1, 1, 1), "int32")})
    with pytest.raises(UnsupportedOnnxOpError, match="Conv"):
        build_model(model)


@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("with_past", [False, True])
def test_causal_conv_with_state_is_a_depthwise_conv_over_the_past(activation, with_past):
    rng = np.random.default_rng(9)
    b, c, length, k = 2, 3, 5, 3
    x, w, bias = (rng.standard_normal(s).astype("float32") for s in ((b, c, length), (c, 1, k), (c,)))
    past = rng.standard_normal((b, c, k - 1)).astype("float32") if with_past else np.zeros((b, c, k - 1), "float32")
    padded = np.concatenate([past, x], axis=2)
    y = np.stack([np.stack([np.correlate(padded[n, i], w[i, 0], "valid") for i in range(c)]) for n in range(b)])
    y = y + bias[None, :, None]
    if activation == "silu":
        y = y / (1 + np.exp(-y))
    inputs = {"x": x, "w": w, "b": bias, **({"p": past} if with_past else {})}
    model = make_model("CausalConvWithState", inputs, 27, n_outputs=2, activation=activation)
    got, state = build_model(model).run(inputs)
    np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(state, padded[:, :, -(k - 1):])


@pytest.mark.parametrize("seed", range(6))
def test_col2im_matches_onnxruntime(seed):
    rng = np.random.default_rng(500 + seed)
    block = [int(k) for k in rng.integers(1, 4, 2)]
    strides = [int(s) for s in rng.integers(1, 3, 2)]
    dilations = [int(d) for d in rng.integers(1, 3, 2)]
    pads = [int(p) for p in rng.integers(0, 2, 4)]
    image = [int(rng.integers((k - 1) * d + 1, (k - 1) * d + 5)) for k, d in zip(block, dilations)]
    counts = [(n + b + e - (k - 1) * d - 1) // s + 1
              for n, b, e, k, d, s in zip(image, pads[:2], pads[2:], block, dilations, strides)]
    x = rng.standard_normal((2, 3 * block[0] * block[1], counts[0] * counts[1])).astype("float32")
    static = {"image": np.array(image, "int64"), "block": np.array(block, "int64")}
    check_node("Col2Im", {"x": x}, opset=18, static=static, strides=strides, dilations=dilations, pads=pads,
               rtol=1e-5, atol=1e-5)
