"""ONNX shape converters (ops_shape.py) against onnxruntime.

Beyond the node suite: the attribute forms of older opsets (Squeeze/Unsqueeze/Split axes
before 13, Reshape's ``allowzero``), shape arithmetic folded at import time, zero-length
parts, and the typed errors for malformed nodes.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from ort_check import check_node, make_model, run_ort

from ngraph_core.frontends.onnx import OnnxError, UnsupportedOnnxOpError, import_model

RNG = np.random.default_rng(7)


def malformed(op_type: str, inputs: dict, opset: int, static: dict | None = None, n_outputs: int = 1, **attrs):
    """A one-node model whose outputs are typed by hand (shape inference would reject the node)."""
    static = dict(static or {})
    node = helper.make_node(op_type, list(inputs) + list(static), [f"y{i}" for i in range(n_outputs)], **attrs)
    graph = helper.make_graph(
        [node], "malformed", [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, ["n"]) for i in range(n_outputs)],
        [onnx.numpy_helper.from_array(v, n) for n, v in static.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
X = RNG.standard_normal((2, 3, 4)).astype("float32")


@pytest.mark.parametrize("opset, shape", [(13, [4, 0, -1]), (5, [-1, 4]), (14, [0, 12])])
def test_reshape_copies_zero_dims_and_infers_minus_one(opset, shape):
    got = check_node("Reshape", {"x": X}, opset=opset, static={"shape": np.array(shape, "int64")})
    assert got[0].size == X.size


def test_reshape_shape_attribute_before_opset_5():
    (got,) = import_model(malformed("Reshape", {"x": X}, 1, shape=[4, -1])).run({"x": X})
    np.testing.assert_array_equal(got, X.reshape(4, 6))


def test_reshape_allowzero_keeps_a_literal_zero():
    x = np.zeros((0, 3), "float32")
    got = check_node("Reshape", {"x": x}, opset=14, static={"shape": np.array([3, 0], "int64")}, allowzero=1)
    assert got[0].shape == (3, 0)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_flatten_every_axis(axis):
    a = axis if axis >= 0 else axis + X.ndim
    check_node("Flatten", {"x": X}, opset=13, axis=axis, expected=X.reshape(int(np.prod(X.shape[:a])), -1))


def test_transpose_default_reverses_and_perm_permutes():
    check_node("Transpose", {"x": X}, opset=13, expected=X.transpose())
    check_node("Transpose", {"x": X}, opset=1, perm=[1, 2, 0], expected=X.transpose(1, 2, 0))


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_and_unsqueeze_axes_as_attribute_or_input(opset):
    x = RNG.standard_normal((1, 3, 1, 2)).astype("float32")
    if opset < 13:
        check_node("Squeeze", {"x": x}, opset=opset, axes=[0, -2])
        check_node("Unsqueeze", {"x": X}, opset=opset, axes=[0, -1])
    else:
        check_node("Squeeze", {"x": x}, opset=opset, static={"axes": np.array([0, -2], "int64")})
        check_node("Unsqueeze", {"x": X}, opset=opset, static={"axes": np.array([4, 0], "int64")})
    got = check_node("Squeeze", {"x": x}, opset=opset)  # no axes: every size-1 dim
    assert got[0].shape == (3, 2)


def test_squeeze_of_a_long_dim_is_an_error():
    model = malformed("Squeeze", {"x": X}, 11, axes=[1])
    with pytest.raises(OnnxError, match="length 3, expected 1"):
        import_model(model)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_mixes_inputs_and_constants(axis):
    other = np.ones((2, 3, 4), "float32")
    check_node("Concat", {"a": X, "b": X * 2}, opset=13, static={"c": other}, axis=axis)


def test_concat_with_mismatched_dims_names_the_node():
    model = malformed("Concat", {"a": X}, 13, static={"b": np.ones((2, 5, 5), "float32")}, axis=1)
    with pytest.raises(OnnxError, match="differ outside axis 1"):
        import_model(model)


@pytest.mark.parametrize("opset, attrs, static", [
    (11, {"axis": 2, "split": [1, 3]}, None),
    (13, {"axis": 2}, {"split": np.array([3, 0, 1], "int64")}),
    (13, {"axis": -1}, None),
    (18, {"axis": 1, "num_outputs": 2}, None),
])
def test_split_forms(opset, attrs, static):
    n = len(attrs.get("split", static["split"] if static else [0] * attrs.get("num_outputs", 2)))
    got = check_node("Split", {"x": X}, opset=opset, static=static, n_outputs=n, **attrs)
    assert sum(g.shape[attrs["axis"]] for g in got) == X.shape[attrs["axis"]]


def test_split_into_uneven_equal_parts_is_an_error_before_18():
    model = malformed("Split", {"x": X}, 13, n_outputs=3, axis=2)
    with pytest.raises(OnnxError, match="3 equal parts"):
        import_model(model)


@pytest.mark.parametrize("shape", [[3, 1], [2, 1, 1], [1, 3, 4], [2, 2, 3, 4]])
def test_expand_broadcasts_both_ways(shape):
    x = RNG.standard_normal((3, 1)).astype("float32")
    check_node("Expand", {"x": x}, opset=13, static={"shape": np.array(shape, "int64")})


@pytest.mark.parametrize("repeats", [[1, 2, 3], [2, 1, 1], [3, 2, 2]])
def test_tile(repeats):
    check_node("Tile", {"x": X}, opset=13, static={"repeats": np.array(repeats, "int64")},
               expected=np.tile(X, repeats))


def test_shape_start_end_and_size():
    check_node("Shape", {"x": X}, opset=15, start=-2)
    check_node("Shape", {"x": X}, opset=15, start=1, end=2)
    check_node("Size", {"x": X}, opset=13)


def test_shape_arithmetic_folds_into_a_static_reshape():
    # y = Reshape(x, Concat(Shape(x)[0:1], [-1])): the shape is known at import time
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=1),
             helper.make_node("Constant", [], ["m"], value_ints=[-1]),
             helper.make_node("Concat", ["s", "m"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    np.testing.assert_array_equal(import_model(model).run({"x": X})[0], X.reshape(2, 12))


@pytest.mark.parametrize("value", [None, np.array([3], "int32"), np.array([0.5], "float64")])
def test_constant_of_shape(value):
    attrs = {} if value is None else {"value": onnx.numpy_helper.from_array(value)}
    model = make_model("ConstantOfShape", {}, 13, static={"shape": np.array([2, 3], "int64")}, **attrs)
    got = import_model(model).run({})
    expected = np.full((2, 3), 0 if value is None else value[0], dtype="float32" if value is None else value.dtype)
    np.testing.assert_array_equal(got[0], expected)
    assert got[0].dtype == expected.dtype


@pytest.mark.parametrize("start, limit, delta", [(1, 10, 3), (10.0, 4.0, -1.5), (5, 5, 1)])
def test_range(start, limit, delta):
    dtype = "int64" if isinstance(start, int) else "float32"
    static = {n: np.array(v, dtype) for n, v in zip(("s", "l", "d"), (start, limit, delta))}
    model = make_model("Range", {}, 11, static=static)
    got, expected = import_model(model, initializers="constants").run({})[0], run_ort(model, {})[0]
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize("k, dtype", [(0, None), (1, TensorProto.INT32), (-2, TensorProto.DOUBLE)])
def test_eye_like(k, dtype):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check_node("EyeLike", {"x": np.zeros((3, 5), "float32")}, opset=9, **attrs)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_round_trips_with_space_to_depth(mode):
    x = RNG.standard_normal((2, 8, 3, 2)).astype("float32")
    (y,) = check_node("DepthToSpace", {"x": x}, opset=13, blocksize=2, mode=mode)
    assert y.shape == (2, 2, 6, 4)
    if mode == "DCR":
        check_node("SpaceToDepth", {"x": y}, opset=13, blocksize=2, expected=x)


def test_constant_forms_and_unsupported_ones():
    check_node("Constant", {}, opset=13, value_floats=[1.5, 2.0], expected=np.array([1.5, 2.0], "float32"))
    check_node("Constant", {}, opset=13, value_int=4, expected=np.array(4, "int64"))
    with pytest.raises(UnsupportedOnnxOpError, match="string"):
        import_model(_string_constant())


def _string_constant() -> onnx.ModelProto:
    node = helper.make_node("Constant", [], ["y"], value_strings=["a", "b"])
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
