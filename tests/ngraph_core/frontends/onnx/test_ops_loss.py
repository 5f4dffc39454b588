"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ops_loss.py) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, build_model

RNG = np.random.default_rng(13)


def case(shape, ignore=None):
    n, c, *rest = shape
    x = RNG.standard_normal(shape).astype("float32")
    target = RNG.integers(0, c, (n, *rest)).astype("int64")
    if ignore is not None:
        target.flat[::3] = ignore
        target.flat[1] = (ignore + 1) % c  # at least one target counts (else mean is 0 / 0)
    return x, target


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", [(4, 5), (3, 4, 2), (2, 3, 2, 2)])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_reductions_and_weights(reduction, shape, weighted):
    x, target = case(shape)
    static = {"w": RNG.random(shape[1]).astype("float32")} if weighted else None
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": target}, opset=13, static=static, reduction=reduction,
               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ignore", [0, 2, -1])
def test_nll_loss_ignore_index_drops_targets_from_sum_and_mean(ignore):
    x, target = case((6, 3, 2), ignore=ignore)
    w = np.array([0.5, 2.0, 1.0], "float32")
    (mean,) = check_node("NegativeLogLikelihoodLoss", {"x": x, "t": target}, opset=13, static={"w": w},
                         reduction="mean", ignore_index=ignore, rtol=1e-5, atol=1e-6)
    keep = target != ignore
    picked = np.take_along_axis(x, np.where(keep, target, 0)[:, None], 1)[:, 0]
    weights = np.where(keep, w[np.where(keep, target, 0)], 0)
    np.testing.assert_allclose(mean, -(picked * weights).sum() / weights.sum(), rtol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4)])
def test_softmax_cross_entropy_with_log_prob_output(reduction, shape):
    x, target = case(shape, ignore=1)
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": target}, opset=13, n_outputs=2, reduction=reduction,
               ignore_index=1, rtol=1e-5, atol=1e-5)


def test_softmax_cross_entropy_weighted_float64():
    x, target = case((5, 4))
    check_node("SoftmaxCrossEntropyLoss", {"x": x.astype("float64"), "t": target}, opset=13,
               static={"w": RNG.random(4)}, rtol=1e-7, atol=1e-9)


def test_unknown_reduction_is_an_error():
    x, target = case((2, 3))
    model = make_model("NegativeLogLikelihoodLoss", {"x": x, "t": target}, 13, reduction="median")
    with pytest.raises(OnnxError, match="median"):
        build_model(model)  # onnx.checker would refuse it first; the converter's own check is tested here


def test_target_shape_must_match():
    x = RNG.standard_normal((2, 3, 4)).astype("float32")
    model = make_model("NegativeLogLikelihoodLoss", {"x": x, "t": np.zeros((2, 5), "int64")}, 13)
    with pytest.raises(OnnxError, match=r"expected target of shape \(2, 4\)"):
        build_model(model)
