"""ONNX Pad and CenterCropPad converters (ops_pad.py) against onnxruntime and NumPy.

Beyond the node suite: the attribute forms (opset 2), negative pads (crops) in every
mode, a fill value given as a run-time input, reflection wider than the dim, and the
typed errors for an unknown mode and a wrong number of widths.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from ort_check import check_node
from test_ops_shape import malformed

from ngraph_core.frontends.onnx import OnnxError, import_model

RNG = np.random.default_rng(5)
X = RNG.standard_normal((2, 3, 4)).astype("float32")


def numpy_pad(x, pads, mode, value=0.0):
    """ONNX's Pad in NumPy: negative widths crop first."""
    rank = x.ndim
    pairs = [(pads[i], pads[rank + i]) for i in range(rank)]
    x = x[tuple(slice(max(0, -b), x.shape[i] - max(0, -a)) for i, (b, a) in enumerate(pairs))]
    pairs = [(max(0, b), max(0, a)) for b, a in pairs]
    return np.pad(x, pairs, mode=mode, **({"constant_values": value} if mode == "constant" else {}))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 0, 2, 1], [1, -1, 0, 0, 1, -2], [0, 0, 5, 0, 0, 6]])
def test_pad_modes_with_crops(mode, pads):
    if mode == "reflect" and max(pads) > 3:
        pads = [min(p, 3) for p in pads]
    expected = numpy_pad(X, pads, mode, 1.5)
    check_node("Pad", {"x": X}, opset=19, static={"pads": np.array(pads, "int64"), "v": np.array(1.5, "float32")},
               mode=mode, expected=expected)


def test_pad_attributes_before_opset_11():
    pads = [0, 2, 1, 0, 0, 3]
    check_node("Pad", {"x": X}, opset=2, pads=pads, value=-2.0, expected=numpy_pad(X, pads, "constant", -2.0))
    check_node("Pad", {"x": X}, opset=2, pads=pads, mode="edge", expected=numpy_pad(X, pads, "edge"))


def test_pad_axes_input_and_integer_data():
    x = RNG.integers(-9, 9, (3, 4)).astype("int32")
    check_node("Pad", {"x": x}, opset=18, static={"pads": np.array([1, 2], "int64"), "v": np.array(7, "int32"),
                                                  "axes": np.array([-1], "int64")},
               expected=np.pad(x, [(0, 0), (1, 2)], constant_values=7))


def test_pad_fill_value_can_be_a_runtime_input():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    v = helper.make_tensor_value_info("v", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 4])
    pads = onnx.numpy_helper.from_array(np.array([0, 1, 0, 0, 1, 0], "int64"), "pads")
    node = helper.make_node("Pad", ["x", "pads", "v"], ["y"])
    model = helper.make_model(helper.make_graph([node], "g", [x, v], [y], [pads]),
                              opset_imports=[helper.make_opsetid("", 13)])
    (got,) = import_model(model).run({"x": X, "v": np.array(-4.0, "float32")})
    np.testing.assert_array_equal(got, numpy_pad(X, [0, 1, 0, 0, 1, 0], "constant", -4.0))


@pytest.mark.parametrize("shape, axes", [([3, 2, 6], None), ([5, 1], [1, -1]), ([1, 7], [0, 2])])
def test_center_crop_pad(shape, axes):
    attrs = {} if axes is None else {"axes": axes}
    check_node("CenterCropPad", {"x": X}, opset=18, static={"shape": np.array(shape, "int64")}, **attrs)


def test_unknown_mode_and_wrong_widths_are_errors():
    with pytest.raises(OnnxError, match="unknown mode 'mirror'"):
        import_model(malformed("Pad", {"x": X}, 13, static={"p": np.zeros(6, "int64")}, mode="mirror"))
    with pytest.raises(OnnxError, match="expected 6 pads"):
        import_model(malformed("Pad", {"x": X}, 13, static={"p": np.zeros(4, "int64")}))
