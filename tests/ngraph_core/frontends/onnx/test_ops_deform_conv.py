"""DeformConv (ops_deform_conv.py) against onnxruntime on random geometries, offsets and masks."""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, build_model


@pytest.mark.parametrize("seed", range(12))
def test_deform_conv_matches_onnxruntime(seed):
    rng = np.random.default_rng(300 + seed)
    group, offset_group = int(rng.choice([1, 2])), int(rng.choice([1, 2]))
    c = 2 * group * offset_group // np.gcd(group, offset_group)
    out_c = group * int(rng.integers(1, 3))
    kernel = [int(k) for k in rng.integers(1, 4, 2)]
    strides = [int(s) for s in rng.integers(1, 3, 2)]
    dilations = [int(d) for d in rng.integers(1, 3, 2)]
    pads = [int(p) for p in rng.integers(0, 2, 4)]
    h, w = (int(rng.integers((k - 1) * d + 1, (k - 1) * d + 5)) for k, d in zip(kernel, dilations))
    oh = (h + pads[0] + pads[2] - (kernel[0] - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - (kernel[1] - 1) * dilations[1] - 1) // strides[1] + 1
    x = rng.standard_normal((2, c, h, w)).astype("float32")
    inputs = {"x": x, "w": rng.standard_normal((out_c, c // group, *kernel)).astype("float32"),
              "offset": (rng.standard_normal((2, offset_group * 2 * kernel[0] * kernel[1], oh, ow)) * 1.5)
              .astype("float32")}
    if seed % 2:
        inputs["b"] = rng.standard_normal(out_c).astype("float32")
        inputs["mask"] = rng.random((2, offset_group * kernel[0] * kernel[1], oh, ow)).astype("float32")
    check_node("DeformConv", inputs, opset=19, kernel_shape=kernel, strides=strides, dilations=dilations,
               pads=pads, group=group, offset_group=offset_group, rtol=1e-4, atol=1e-5)


def test_zero_offsets_are_a_plain_convolution():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 3, 5, 5)).astype("float32"), rng.standard_normal((2, 3, 3, 3)).astype("float32")
    (plain,) = check_node("Conv", {"x": x, "w": w}, opset=11, pads=[1, 1, 1, 1], rtol=1e-4, atol=1e-5)
    check_node("DeformConv", {"x": x, "w": w, "offset": np.zeros((1, 18, 5, 5), "float32")}, opset=19,
               pads=[1, 1, 1, 1], expected=plain, rtol=1e-4, atol=1e-5)


def test_offsets_of_the_wrong_size_are_an_error():
    x, w = np.ones((1, 2, 4, 4), "float32"), np.ones((2, 2, 2, 2), "float32")
    model = make_model("DeformConv", {"x": x, "w": w, "offset": np.zeros((1, 4, 3, 3), "float32")}, 19)
    with pytest.raises(OnnxError, match="offset"):
        build_model(model)
