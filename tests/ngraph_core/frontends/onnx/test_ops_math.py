"""ONNX element-wise arithmetic and math converters (ops_math.py) against onnxruntime.

The node suite (curated_math.txt) covers the latest opsets; these cover older opsets,
broadcasting of mixed ranks, integer semantics (truncating Div, Pow's result type, Mod's
signs), the uint dtypes and constant folding.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from ort_check import check_node

from ngraph_core.frontends.onnx import import_model

RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_integer_div_truncates_toward_zero(dtype):
    a = np.array([-7, 7, -7, 7, -6, 0], dtype)
    b = np.array([2, -2, -2, 2, 3, -5], dtype)
    got = check_node("Div", {"a": a, "b": b}, opset=14, expected=np.array([-3, -3, 3, 3, -2, 0], dtype))
    assert got[0][0] == -3  # flooring would give -4


def test_div_broadcasts_and_matches_onnxruntime_at_opset_7():
    check_node("Div", {"a": rand(2, 3, 4), "b": rand(4) + 3.0}, opset=7)


def test_unsigned_arithmetic_keeps_its_dtype():
    a, b = np.array([4000000000, 7], "uint32"), np.array([1, 2], "uint32")
    check_node("Add", {"a": a, "b": b}, opset=14)
    check_node("Div", {"a": a, "b": b}, opset=14, expected=np.array([4000000000, 3], "uint32"))
    check_node("Mul", {"a": np.array([2**40], "uint64"), "b": np.array([3], "uint64")}, opset=14)


def test_pow_returns_the_base_dtype():
    base = np.array([1, 2, 3], "int32")
    got = check_node("Pow", {"x": base, "y": np.array([2.5, 2.0, 0.5], "float32")}, opset=15)
    assert got[0].dtype == np.int32 and list(got[0]) == [1, 4, 1]  # 1, 4, 1.73 truncated
    check_node("Pow", {"x": rand(3, 4) ** 2 + 0.5, "y": np.array(3, "int64")}, opset=15)
    check_node("Pow", {"x": rand(2, 3), "y": np.array([2.0, 3.0, 1.0], "float32")}, opset=7)


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_sign_follows_fmod(fmod):
    a = np.array([-5, 5, -5, 5, 9], "int32")
    b = np.array([3, -3, -3, 3, 4], "int32")
    expected = np.fmod(a, b) if fmod else np.mod(a, b)
    check_node("Mod", {"a": a, "b": b}, opset=13, fmod=fmod, expected=expected.astype("int32"))
    if fmod:
        check_node("Mod", {"a": rand(3, 4) * 5, "b": rand(4) + 2.0}, opset=10, fmod=1)


@pytest.mark.parametrize("op", ["Neg", "Abs", "Reciprocal", "Sqrt", "Exp", "Log", "Floor", "Ceil", "Sign",
                                "Sigmoid", "Tanh"])
@pytest.mark.parametrize("opset", [7, 13])
def test_unary_functions(op, opset):
    x = rand(3, 5)
    if op in ("Sqrt", "Log", "Reciprocal"):
        x = np.abs(x) + 0.1
    check_node(op, {"x": x}, opset=max(opset, 9) if op == "Sign" else opset)  # Sign exists from opset 9


@pytest.mark.parametrize("op", ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh",
                                "Erf"])
def test_trigonometric_functions(op):
    check_node(op, {"x": np.tanh(rand(4, 3)) * 0.9}, opset=13 if op == "Erf" else 9)


def test_acosh_and_round_half_to_even():
    check_node("Acosh", {"x": np.abs(rand(6)) + 1.0}, opset=9)
    got = check_node("Round", {"x": np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4], "float32")}, opset=11)
    assert list(got[0]) == [0.0, 2.0, 2.0, -0.0, -2.0, 2.0]


def test_isnan_isinf_flags():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], "float32")
    check_node("IsNaN", {"x": x}, opset=13)
    for pos, neg in ((1, 1), (1, 0), (0, 1)):
        check_node("IsInf", {"x": x}, opset=10, detect_positive=pos, detect_negative=neg)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("opset", [8, 13])
def test_variadic_ops_broadcast_three_ranks(op, opset):
    check_node(op, {"a": rand(2, 3, 4), "b": rand(4), "c": rand(3, 1)}, opset=opset)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_variadic_on_integers_and_one_input(op):
    check_node(op, {"a": np.array([[1, -5, 3]], "int64"), "b": np.array([[2], [-9]], "int64")}, opset=13)
    check_node(op, {"a": rand(3)}, opset=13)


def test_static_inputs_fold_to_constants():
    a = onnx.numpy_helper.from_array(np.array([2.0, 3.0], "float32"), "a")
    b = onnx.numpy_helper.from_array(np.array(4.0, "float32"), "b")
    graph = helper.make_graph([helper.make_node("Mul", ["a", "b"], ["y"])], "fold", [],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])], [a, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    imported = import_model(model, initializers="constants")
    assert isinstance(imported.values["y"], np.ndarray)  # computed at import time, no graph op
    np.testing.assert_array_equal(imported.run({})[0], [8.0, 12.0])
