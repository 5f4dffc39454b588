"""ONNX comparison, logic, bit-op, Where and cast converters (ops_logic.py) against onnxruntime.

Beyond the node suite: older opsets, broadcasting, the uint dtypes, casts that truncate,
and the typed errors for inexpressible casts and malformed attributes.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, UnsupportedOnnxOpError, import_model

RNG = np.random.default_rng(1)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
@pytest.mark.parametrize("opset", [7, 13])
def test_comparisons_give_bool_and_broadcast(op, opset):
    a = RNG.integers(-2, 3, (3, 4)).astype("float32")
    b = RNG.integers(-2, 3, (4,)).astype("float32")
    opset = max(opset, 11) if op == "Equal" else opset  # Equal takes floats from opset 11
    got = check_node(op, {"a": a, "b": b}, opset=opset)
    assert got[0].dtype == np.bool_


@pytest.mark.parametrize("op", ["LessOrEqual", "GreaterOrEqual"])
def test_or_equal_comparisons_on_integers(op):
    a = np.array([[1, 5, -3]], "int64")
    b = np.array([[1], [0]], "int64")
    expected = (a <= b) if op == "LessOrEqual" else (a >= b)
    check_node(op, {"a": a, "b": b}, opset=16, expected=expected)


def test_equal_on_bools():
    a, b = np.array([True, False, True]), np.array([True, True, False])
    check_node("Equal", {"a": a, "b": b}, opset=11, expected=a == b)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical_ops_broadcast(op):
    a = RNG.integers(0, 2, (2, 3, 4)).astype(bool)
    b = RNG.integers(0, 2, (3, 1)).astype(bool)
    check_node(op, {"a": a, "b": b}, opset=7)


def test_not():
    x = np.array([[True, False], [False, False]])
    check_node("Not", {"x": x}, opset=1, expected=~x)


@pytest.mark.parametrize("op, fn", [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                                    ("BitwiseXor", np.bitwise_xor)])
@pytest.mark.parametrize("dtype", ["int32", "uint16", "uint64"])
def test_bitwise_ops(op, fn, dtype):
    a = np.array([[12, 10, 255]], dtype)
    b = np.array([[10], [7]], dtype)
    check_node(op, {"a": a, "b": b}, opset=18, expected=fn(a, b))


def test_bitwise_not_two_complement():
    check_node("BitwiseNot", {"x": np.array([5, -1, 0], "int32")}, opset=18,
               expected=np.array([-6, 0, -1], "int32"))
    check_node("BitwiseNot", {"x": np.array([5], "uint8")}, opset=18, expected=np.array([250], "uint8"))


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", ["uint8", "uint32", "uint64"])
def test_bit_shift(direction, dtype):
    x = np.array([16, 4, 1], dtype)
    y = np.array([1, 2, 3], dtype)
    expected = (x << y) if direction == "LEFT" else (x >> y)
    check_node("BitShift", {"x": x, "y": y}, opset=11, direction=direction, expected=expected)


def test_bit_shift_rejects_an_unknown_direction():
    model = make_model("BitShift", {"x": np.array([1], "uint8"), "y": np.array([1], "uint8")}, 11, direction="UP")
    with pytest.raises(OnnxError, match="BitShift node .*LEFT' or 'RIGHT'"):
        import_model(model)


def test_where_broadcasts_condition_and_scalar():
    condition = np.array([[True], [False]])
    x = RNG.standard_normal((2, 3)).astype("float32")
    y = np.array(-1.0, "float32")
    check_node("Where", {"c": condition, "x": x, "y": y}, opset=9)
    check_node("Where", {"c": condition, "x": np.array([1, 2, 3], "int64"), "y": np.array([7], "int64")}, opset=16)


@pytest.mark.parametrize("to, dtype", [(TensorProto.INT32, "int32"), (TensorProto.UINT16, "uint16"),
                                       (TensorProto.UINT32, "uint32"), (TensorProto.INT8, "int8"),
                                       (TensorProto.BOOL, "bool"), (TensorProto.FLOAT16, "float16"),
                                       (TensorProto.DOUBLE, "float64")])
def test_cast_float_to(to, dtype):
    x = np.array([[-2.7, -0.5, 0.0], [0.4, 1.9, 100.2]], "float32")
    if dtype.startswith("uint"):
        x = np.abs(x)
    got = check_node("Cast", {"x": x}, opset=13, to=to)
    assert got[0].dtype == np.dtype(dtype)


def test_cast_truncates_toward_zero_and_round_trips_uint64():
    got = check_node("Cast", {"x": np.array([-2.7, 2.7], "float32")}, opset=6, to=TensorProto.INT64)
    assert list(got[0]) == [-2, 2]
    check_node("Cast", {"x": np.array([2**63 + 5], "uint64")}, opset=19, to=TensorProto.UINT64,
               expected=np.array([2**63 + 5], "uint64"))


def test_cast_like_takes_the_second_input_type():
    x = np.array([1.5, -2.5], "float32")
    got = check_node("CastLike", {"x": x, "like": np.zeros(1, "int16")}, opset=15)
    assert got[0].dtype == np.int16


def test_cast_to_string_is_unsupported():
    model = make_model("Cast", {"x": np.zeros(2, "float32")}, 13, to=TensorProto.STRING)
    with pytest.raises(UnsupportedOnnxOpError, match="Cast .*casting to STRING"):
        import_model(model)
