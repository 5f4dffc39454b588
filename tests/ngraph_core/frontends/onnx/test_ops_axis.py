"""ONNX along-one-dim converters (ops_axis.py) against onnxruntime.

Beyond the node suite: CumSum on 3-D inputs with every flag pair, TopK's attribute form
(opset 1) and ties, ReverseSequence with a run-time lengths input, OneHot with float
indices and a middle axis, Trilu with a k input on batched matrices.
"""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4, 5)).astype("float32")


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum_flags(exclusive, reverse, axis):
    check_node("CumSum", {"x": X}, opset=14, static={"axis": np.array(axis, "int64")}, exclusive=exclusive,
               reverse=reverse)


def test_cumsum_of_integers_with_a_runtime_free_axis_constant():
    x = RNG.integers(-5, 5, (4, 3)).astype("int32")
    check_node("CumSum", {"x": x}, opset=11, static={"axis": np.array([1], "int32")}, expected=np.cumsum(x, 1,
                                                                                                           "int32"))


@pytest.mark.parametrize("opset", [1, 10, 11])
def test_topk_forms(opset):
    if opset == 1:
        got = check_node("TopK", {"x": X}, opset=1, n_outputs=2, k=2)
    else:
        attrs = {"largest": 0, "axis": 1} if opset == 11 else {"axis": 1}
        got = check_node("TopK", {"x": X}, opset=opset, static={"k": np.array([3], "int64")}, n_outputs=2, **attrs)
    assert got[1].dtype == np.int64


def test_topk_ties_take_the_lower_index():
    x = np.array([[3, 1, 3, 2, 3]], "float32")
    check_node("TopK", {"x": x}, opset=11, static={"k": np.array([2], "int64")}, n_outputs=2,
               expected=[np.array([[3, 3]], "float32"), np.array([[0, 2]], "int64")])


@pytest.mark.parametrize("batch_axis, time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence_with_runtime_lengths(batch_axis, time_axis):
    x = RNG.standard_normal((4, 4, 2)).astype("float32")
    lens = np.array([4, 1, 2, 3], "int64")
    check_node("ReverseSequence", {"x": x, "lens": lens}, opset=10, batch_axis=batch_axis, time_axis=time_axis)


def numpy_one_hot(indices, depth, values, axis):
    ids = indices.astype("int64")
    ids = np.where(ids < 0, ids + depth, ids)
    hot = np.expand_dims(ids, axis) == np.arange(depth).reshape([-1 if i == axis % (ids.ndim + 1) else 1
                                                                 for i in range(ids.ndim + 1)])
    return np.where(hot, values[1], values[0]).astype(values.dtype)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_one_hot_float_indices_and_axes(axis):
    indices = np.array([[0.0, 2.0, -1.0], [4.0, 1.0, 7.0]], "float32")  # 7 is out of range: all off
    values = np.array([-1, 5], "int32")
    check_node("OneHot", {"i": indices}, opset=11, static={"depth": np.array(5, "int64"), "v": values}, axis=axis,
               expected=numpy_one_hot(indices, 5, values, axis))
    floats = values.astype("float32")
    check_node("OneHot", {"i": indices}, opset=11, static={"depth": np.array(5.0, "float32"), "v": floats}, axis=axis)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-1, 0, 2])
def test_trilu_batched_with_k(upper, k):
    check_node("Trilu", {"x": X}, opset=14, static={"k": np.array(k, "int64")}, upper=upper,
               expected=np.triu(X, k) if upper else np.tril(X, k))
