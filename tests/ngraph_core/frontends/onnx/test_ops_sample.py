"""ONNX GridSample and AffineGrid converters (ops_sample.py) against onnxruntime.

Beyond the node suite: random grids reaching well outside ``[-1, 1]`` (so every padding
mode folds, clamps or zeroes), every mode x padding x align_corners on non-square images,
the opset-16 mode names, and AffineGrid chained into GridSample. For cubic with border
padding onnxruntime disagrees with the ONNX reference implementation (which the node suite
follows), so that pair is checked against ``onnx.reference``.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from ort_check import check_node, make_model, run_ort
from test_ops_shape import malformed

from ngraph_core.frontends.onnx import OnnxError, import_model

RNG = np.random.default_rng(13)
IMG = RNG.standard_normal((2, 3, 5, 4)).astype("float32")
GRID = RNG.uniform(-1.7, 1.7, (2, 6, 3, 2)).astype("float32")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_modes_and_paddings(mode, padding, align):
    expected = None
    if mode == "cubic" and padding == "border":  # onnxruntime departs from the spec here: use ONNX's reference
        model = make_model("GridSample", {"x": IMG, "grid": GRID}, 20, mode=mode, padding_mode=padding,
                           align_corners=align)
        expected = ReferenceEvaluator(model).run(None, {"x": IMG, "grid": GRID})
    check_node("GridSample", {"x": IMG, "grid": GRID}, opset=20, mode=mode, padding_mode=padding,
               align_corners=align, expected=expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_grid_sample_opset_16_names(mode):
    check_node("GridSample", {"x": IMG, "grid": GRID}, opset=16, mode=mode, rtol=1e-4, atol=1e-5)


def test_grid_sample_volumetric():
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype("float32")
    grid = RNG.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype("float32")
    check_node("GridSample", {"x": x, "grid": grid}, opset=20, mode="linear", padding_mode="border",
               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size, align", [([2, 3, 5, 4], 0), ([2, 1, 3, 6], 1)])
def test_affine_grid_2d(size, align):
    theta = RNG.standard_normal((2, 2, 3)).astype("float32")
    check_node("AffineGrid", {"theta": theta}, opset=20, static={"size": np.array(size, "int64")},
               align_corners=align, rtol=1e-5, atol=1e-6)


def test_affine_grid_feeds_grid_sample():
    theta_info = helper.make_tensor_value_info("theta", TensorProto.FLOAT, [2, 2, 3])
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(IMG.shape))
    size = helper.make_tensor("size", TensorProto.INT64, [4], list(IMG.shape))
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["grid"]),
             helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear")]
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(IMG.shape))
    model = helper.make_model(helper.make_graph(nodes, "g", [theta_info, x_info], [y_info], [size]),
                              opset_imports=[helper.make_opsetid("", 20)])
    identity = np.tile(np.array([[1, 0, 0], [0, 1, 0]], "float32"), (2, 1, 1))
    (same,) = import_model(model).run({"theta": identity, "x": IMG})
    np.testing.assert_allclose(same, IMG, rtol=1e-5, atol=1e-6)  # the identity map resamples nothing
    theta = RNG.standard_normal((2, 2, 3)).astype("float32")
    inputs = {"theta": theta, "x": IMG}
    np.testing.assert_allclose(import_model(model).run(inputs)[0], run_ort(model, inputs)[0], rtol=1e-4, atol=1e-5)


def test_grid_sample_with_a_mismatched_grid_is_an_error():
    with pytest.raises(OnnxError, match="grid"):
        import_model(malformed("GridSample", {"x": IMG, "grid": GRID[..., :1]}, 20))


ROIS = np.array([[0.5, 1.0, 3.5, 4.0], [-1.0, 0.0, 2.0, 9.0], [1.0, 1.0, 1.2, 1.1]], "float32")


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("coordinates", ["half_pixel", "output_half_pixel"])
def test_roi_align_with_runtime_rois(mode, coordinates):
    check_node("RoiAlign", {"x": IMG, "rois": ROIS, "b": np.array([1, 0, 1], "int64")}, opset=16, mode=mode,
               coordinate_transformation_mode=coordinates, output_height=3, output_width=2, sampling_ratio=2,
               spatial_scale=0.8, rtol=1e-4, atol=1e-5)


def test_roi_align_adaptive_sampling_needs_static_rois():
    # sampling_ratio=0: each roi's sample count follows its size, so the rois are initializers here
    check_node("RoiAlign", {"x": IMG}, opset=16, static={"rois": ROIS * 2, "b": np.array([0, 1, 1], "int64")},
               output_height=2, output_width=2, rtol=1e-4, atol=1e-5)
    check_node("RoiAlign", {"x": IMG}, opset=16, static={"rois": ROIS * 2, "b": np.array([0, 1, 1], "int64")},
               mode="max", output_height=2, output_width=3, rtol=1e-4, atol=1e-5)
