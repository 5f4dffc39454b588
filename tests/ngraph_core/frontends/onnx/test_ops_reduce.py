"""ONNX Reduce* and ArgMax/ArgMin converters (ops_reduce.py) against onnxruntime.

Beyond the node suite: ``axes`` as an attribute at opsets 11/13 and as an input after,
``noop_with_empty_axes``, empty dims, large values (a stable ReduceLogSumExp), integer
inputs, and ArgMax/ArgMin ties with ``select_last_index``.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, import_model

RNG = np.random.default_rng(3)
ALL = ["ReduceSum", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean",
       "ReduceMax", "ReduceMin", "ReduceProd"]


def positive(*shape):
    return RNG.uniform(0.5, 2.0, shape).astype("float32")


@pytest.mark.parametrize("op", ALL)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_attribute_at_opset_11(op, keepdims):
    check_node(op, {"x": positive(2, 3, 4)}, opset=11, axes=[0, -1], keepdims=keepdims, rtol=1e-4)


@pytest.mark.parametrize("op", ALL)
def test_axes_input_at_opset_18_and_all_axes_by_default(op):
    x = positive(3, 2, 2)
    check_node(op, {"x": x}, static={"axes": np.array([1], "int64")}, opset=18, rtol=1e-4)
    check_node(op, {"x": x}, opset=18, keepdims=0, rtol=1e-4)  # no axes: every dim


def test_reduce_sum_takes_axes_as_an_input_from_opset_13():
    x = positive(2, 3)
    check_node("ReduceSum", {"x": x}, opset=12, axes=[1])
    check_node("ReduceSum", {"x": x}, static={"axes": np.array([-2], "int64")}, opset=13, keepdims=0)


@pytest.mark.parametrize("op", ALL)
def test_noop_with_empty_axes_reduces_nothing(op):
    x = positive(2, 3)
    opset = 13 if op == "ReduceSum" else 18
    got = check_node(op, {"x": x}, static={"axes": np.zeros(0, "int64")}, opset=opset, noop_with_empty_axes=1,
                     rtol=1e-5)
    assert got[0].shape == (2, 3)


@pytest.mark.parametrize("op, value", [("ReduceSum", 0.0), ("ReduceProd", 1.0), ("ReduceMax", -np.inf),
                                       ("ReduceMin", np.inf), ("ReduceLogSumExp", -np.inf), ("ReduceL2", 0.0)])
def test_reducing_an_empty_dim_gives_the_identity(op, value):
    x = np.zeros((2, 0, 3), "float32")
    got = check_node(op, {"x": x}, static={"axes": np.array([1], "int64")}, opset=18,
                     expected=np.full((2, 1, 3), value, "float32"))
    assert got[0].shape == (2, 1, 3)


def test_log_sum_exp_is_stable_for_large_values():
    x = np.array([[1000.0, 1000.0], [-1000.0, -999.0]], "float32")
    got = check_node("ReduceLogSumExp", {"x": x}, opset=13, axes=[1], keepdims=0)
    np.testing.assert_allclose(got[0], [1000.0 + np.log(2.0), -999.0 + np.log1p(np.exp(-1.0))], rtol=1e-6)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean"])
def test_integer_reductions_keep_the_dtype(op):
    x = RNG.integers(-4, 5, (3, 4)).astype("int32")
    got = check_node(op, {"x": x}, opset=11, axes=[1], keepdims=1)
    assert got[0].dtype == np.int32


def test_reduce_max_on_bool_from_opset_20():
    x = np.array([[True, False], [False, False]])
    check_node("ReduceMax", {"x": x}, opset=20, static={"axes": np.array([1], "int64")}, keepdims=0,
               expected=np.array([True, False]))


def test_reduce_axis_out_of_range_raises():
    model = make_model("ReduceSum", {"x": positive(2, 3)}, 11, axes=[2])
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", TensorProto.FLOAT, [2, 3]))  # not inferable
    with pytest.raises(OnnxError, match="ReduceSum node .*axis 2 is out of range"):
        import_model(model)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis, keepdims", [(0, 1), (1, 0), (-1, 1)])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_reductions_with_ties(op, axis, keepdims, last):
    x = RNG.integers(0, 3, (3, 4, 2)).astype("float32")  # many ties
    got = check_node(op, {"x": x}, opset=12, axis=axis, keepdims=keepdims, select_last_index=last)
    assert got[0].dtype == np.int64


def test_arg_max_at_opset_11_defaults_to_axis_0():
    x = np.array([[1.0, 9.0], [5.0, 2.0], [5.0, 0.0]], "float32")
    check_node("ArgMax", {"x": x}, opset=11, expected=np.array([[1, 0]], "int64"))
    check_node("ArgMax", {"x": x}, opset=13, select_last_index=1, expected=np.array([[2, 0]], "int64"))
