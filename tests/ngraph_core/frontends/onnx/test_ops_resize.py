"""ONNX Resize / Upsample converters (ops_resize.py) against onnxruntime.

Beyond the node suite: Resize-10 and Upsample-7/9 (asymmetric coordinates, nearest
floor/ceil), integer images resized by nearest (a gather: exact), every coordinate mapping
with linear on non-square images, ``axes`` with linear and cubic, and the typed error for
a node giving both scales and sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node
from test_ops_shape import malformed

from ngraph_core.frontends.onnx import OnnxError, import_model

RNG = np.random.default_rng(9)
IMG = RNG.standard_normal((1, 2, 4, 5)).astype("float32")
EMPTY = np.zeros(0, "float32")


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.6], [1, 1, 1.5, 0.8]])
def test_resize_10(mode, scales):
    check_node("Resize", {"x": IMG}, opset=10, static={"scales": np.array(scales, "float32")}, mode=mode)


def test_upsample_7_and_9_repeat_pixels():
    scales = [1.0, 1.0, 2.0, 3.0]
    expected = IMG.repeat(2, axis=2).repeat(3, axis=3)
    check_node("Upsample", {"x": IMG}, opset=7, scales=scales, expected=expected)
    check_node("Upsample", {"x": IMG}, opset=9, static={"scales": np.array(scales, "float32")}, expected=expected)
    check_node("Upsample", {"x": IMG}, opset=9, static={"scales": np.array(scales, "float32")}, mode="linear")


@pytest.mark.parametrize("coordinate", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                        "half_pixel_symmetric"])
@pytest.mark.parametrize("sizes", [[1, 2, 7, 3], [1, 2, 2, 9], [1, 2, 1, 1]])
def test_resize_linear_coordinate_modes(coordinate, sizes):
    check_node("Resize", {"x": IMG}, opset=19, static={"roi": EMPTY, "scales": EMPTY,
                                                       "sizes": np.array(sizes, "int64")},
               mode="linear", coordinate_transformation_mode=coordinate, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest_of_integers_is_exact(nearest_mode):
    img = RNG.integers(0, 255, (1, 3, 5, 4)).astype("uint8")
    (got,) = check_node("Resize", {"x": img}, opset=13, static={"roi": EMPTY, "scales": np.array(
        [1, 1, 1.7, 0.7], "float32")}, mode="nearest", nearest_mode=nearest_mode, atol=0)
    assert got.dtype == np.uint8 and set(np.unique(got)) <= set(np.unique(img))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_axes_and_exclude_outside(mode):
    check_node("Resize", {"x": IMG}, opset=18, static={"roi": EMPTY, "scales": np.array([2.5, 0.5], "float32")},
               mode=mode, axes=[3, 2], exclude_outside=int(mode == "cubic"), rtol=1e-4, atol=1e-5)


def test_resize_with_both_scales_and_sizes_is_an_error():
    model = malformed("Resize", {"x": IMG}, 13, static={"roi": EMPTY, "scales": np.ones(4, "float32"),
                                                       "sizes": np.array([1, 2, 4, 5], "int64")})
    with pytest.raises(OnnxError, match="exactly one of scales and sizes"):
        import_model(model, initializers="constants")
