"""MaxPool, AveragePool, LpPool, global pools and MaxUnpool (ops_pool.py) against onnxruntime.

Random geometries exercise both lowerings: ``ng.pooling`` (symmetric small pads, no
dilation) and the window-slices one (dilations, asymmetric pads, ``Indices``, integers).
"""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, import_model
from ngraph_core.ir import OpType, toposort

RNG = np.random.default_rng(3)


def pool_case(seed: int, op_type: str) -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    dilations = [int(d) for d in rng.integers(1, 3, rank)] if rng.random() < 0.5 else [1] * rank
    strides = [int(s) for s in rng.integers(1, 3, rank)]
    pads = [int(rng.integers(0, k)) for k in kernel] + [int(rng.integers(0, k)) for k in kernel]
    lengths = [int(rng.integers((k - 1) * d + 1, (k - 1) * d + 5)) for k, d in zip(kernel, dilations)]
    x = rng.standard_normal([int(rng.integers(1, 3)), int(rng.integers(1, 3)), *lengths]).astype("float32")
    attrs = dict(kernel_shape=kernel, strides=strides, pads=pads, ceil_mode=int(rng.random() < 0.5))
    if op_type == "MaxPool":
        attrs["dilations"] = dilations
    else:
        attrs["count_include_pad"] = int(rng.random() < 0.5)
    return x, attrs


@pytest.mark.parametrize("seed", range(30))
def test_max_pool_and_indices_match_onnxruntime(seed):
    x, attrs = pool_case(seed, "MaxPool")
    check_node("MaxPool", {"x": x}, opset=12, n_outputs=2, storage_order=seed % 2 if len(x.shape) == 4 else 0,
               **attrs)


@pytest.mark.parametrize("seed", range(30))
def test_average_pool_matches_onnxruntime(seed):
    x, attrs = pool_case(1000 + seed, "AveragePool")
    check_node("AveragePool", {"x": x}, opset=19, rtol=1e-5, atol=1e-6, **attrs)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_pool_auto_pad(op_type, auto_pad):
    x = RNG.standard_normal((1, 2, 7, 6)).astype("float32")
    check_node(op_type, {"x": x}, opset=11, kernel_shape=[3, 2], strides=[2, 2], auto_pad=auto_pad)


def test_max_pool_of_uint8_keeps_its_type():
    x = RNG.integers(0, 255, (1, 2, 5, 5)).astype("uint8")
    got = check_node("MaxPool", {"x": x}, opset=12, kernel_shape=[2, 2], pads=[1, 1, 0, 0])
    assert got[0].dtype == np.uint8 and got[0][0, 0, 0, 0] == x[0, 0, 0, 0]  # the padding never wins


def test_simple_pools_use_the_native_pooling_op_and_others_do_not():
    x = RNG.standard_normal((1, 2, 6, 6)).astype("float32")
    simple = import_model(make_model("MaxPool", {"x": x}, 11, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    dilated = import_model(make_model("MaxPool", {"x": x}, 11, kernel_shape=[2, 2], dilations=[2, 2]))
    assert any(o.op is OpType.POOL for o in toposort(simple.outputs))
    assert not any(o.op is OpType.POOL for o in toposort(dilated.outputs))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_matches_onnxruntime(p):
    x = RNG.standard_normal((2, 3, 6, 5)).astype("float32")
    check_node("LpPool", {"x": x}, opset=18, kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 0, 1], p=p,
               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
def test_global_pools_keep_the_spatial_dims_as_ones(op_type):
    x = RNG.standard_normal((2, 3, 4, 5, 2)).astype("float32")
    got = check_node(op_type, {"x": x}, opset=11, rtol=1e-5, atol=1e-5)
    assert got[0].shape == (2, 3, 1, 1, 1)


def test_max_unpool_inverts_max_pool_with_indices():
    x = RNG.standard_normal((1, 2, 4, 4)).astype("float32")
    pooled, indices = check_node("MaxPool", {"x": x}, opset=12, n_outputs=2, kernel_shape=[2, 2], strides=[2, 2])
    got = check_node("MaxUnpool", {"y": pooled, "i": indices}, opset=11, kernel_shape=[2, 2], strides=[2, 2])
    kept = got[0] != 0
    assert kept.sum() == pooled.size and np.array_equal(got[0][kept], x[kept])


def test_pool_window_larger_than_the_input_is_an_error():
    x = RNG.standard_normal((1, 1, 2, 2)).astype("float32")
    with pytest.raises(OnnxError, match="larger than"):
        import_model(make_model("MaxPool", {"x": x}, 11, kernel_shape=[3, 3]))
