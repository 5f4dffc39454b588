"""Costs: values (and a gradient) against PyTorch's losses in float64; target matching and its errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ngraph_core as ng
from neon.costs import (
    CostError,
    CrossEntropyBinary,
    CrossEntropyMulti,
    MeanSquared,
    SmoothL1,
    SumSquared,
)

K, BATCH = 5, 4
RNG = np.random.default_rng(3)
LABELS = np.array([0, 3, 4, 3])
ONE_HOT = np.eye(K)[LABELS].T  # [Y, N]


def axes(k=K, name="Out"):
    return ng.make_axis(k, name), ng.make_axis(BATCH, "N")


def evaluate(op, *feeds):
    """Run ``op`` in float64, feeding (placeholder, value) pairs."""
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        return t.computation(op, *[p for p, _ in feeds])(*[v for _, v in feeds])


def evaluate_with_grad(cost, var):
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        return t.computation([cost, *ng.gradients(cost, [var])])()


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="costs are checked against PyTorch's losses")


def test_cross_entropy_multi_matches_torch_value_and_gradient(torch):
    Out, N = axes()
    z = RNG.normal(size=(K, BATCH)) * 3
    logits = ng.variable([Out, N], z, dtype="float64")
    Y = ng.placeholder([ng.make_axis(K, "Y"), N], "float64")
    cost = CrossEntropyMulti()(ng.softmax(logits), Y)
    assert cost.axes == ng.make_axes([])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        value, grad = t.computation([cost, *ng.gradients(cost, [logits])], Y)(ONE_HOT)
    tz = torch.tensor(z.T, requires_grad=True)
    expected = torch.nn.functional.cross_entropy(tz, torch.tensor(LABELS))
    expected.backward()
    np.testing.assert_allclose(value, expected.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, tz.grad.numpy().T, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("scale", [1e3, 1e5])
def test_cross_entropy_multi_huge_logits_stay_finite(torch, scale):
    Out, N = axes()
    z = RNG.normal(size=(K, BATCH)) * scale
    logits = ng.placeholder([Out, N], "float64")
    Y = ng.placeholder([ng.make_axis(K, "Y"), N], "float64")
    value = evaluate(CrossEntropyMulti()(ng.softmax(logits), Y), (logits, z), (Y, ONE_HOT))
    expected = torch.nn.functional.cross_entropy(torch.tensor(z.T), torch.tensor(LABELS)).item()
    assert math.isfinite(value)
    np.testing.assert_allclose(value, expected, rtol=1e-12)


def test_cross_entropy_multi_usebits_and_probabilities():
    Out, N = axes()
    p = RNG.dirichlet(np.ones(K), size=BATCH).T
    y_hat, Y = ng.placeholder([Out, N], "float64"), ng.placeholder([ng.make_axis(K, "Y"), N], "float64")
    nats = evaluate(CrossEntropyMulti()(y_hat, Y), (y_hat, p), (Y, ONE_HOT))
    bits = evaluate(CrossEntropyMulti(usebits=True)(y_hat, Y), (y_hat, p), (Y, ONE_HOT))
    expected = -np.mean(np.log(p[LABELS, np.arange(BATCH)]))
    np.testing.assert_allclose(nats, expected, rtol=1e-12)
    np.testing.assert_allclose(bits, expected / math.log(2), rtol=1e-12)


def test_integer_class_ids_are_one_hot_encoded():
    Out, N = axes()
    p = RNG.dirichlet(np.ones(K), size=BATCH).T
    y_hat, ids = ng.placeholder([Out, N], "float64"), ng.placeholder([N], "int64")
    value = evaluate(CrossEntropyMulti()(y_hat, ids), (y_hat, p), (ids, LABELS))
    np.testing.assert_allclose(value, -np.mean(np.log(p[LABELS, np.arange(BATCH)])), rtol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_cross_entropy_binary_matches_bce_with_logits(torch, scale):
    Out, N = axes(1)
    z = RNG.normal(size=(1, BATCH)) * scale
    t = np.array([0.0, 1.0, 1.0, 0.0])
    logits, Y = ng.placeholder([Out, N], "float64"), ng.placeholder([N], "float64")
    value = evaluate(CrossEntropyBinary()(ng.sigmoid(logits), Y), (logits, z), (Y, t))
    expected = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z[0]), torch.tensor(t)).item()
    assert math.isfinite(value)
    np.testing.assert_allclose(value, expected, rtol=1e-12)


def test_cross_entropy_binary_several_units_and_probabilities(torch):
    Out, N = axes(3)
    p = RNG.uniform(0.05, 0.95, size=(3, BATCH))
    t = RNG.integers(0, 2, size=(3, BATCH)).astype(float)
    y_hat, Y = ng.placeholder([Out, N], "float64"), ng.placeholder([ng.make_axis(3, "Y"), N], "float64")
    value = evaluate(CrossEntropyBinary()(y_hat, Y), (y_hat, p), (Y, t))
    expected = torch.nn.functional.binary_cross_entropy(torch.tensor(p), torch.tensor(t), reduction="sum") / BATCH
    np.testing.assert_allclose(value, expected.item(), rtol=1e-12)


def test_squared_errors_match_mse_loss(torch):
    Out, N = axes()
    a, b = RNG.normal(size=(K, BATCH)), RNG.normal(size=(K, BATCH))
    y_hat, Y = ng.placeholder([Out, N], "float64"), ng.placeholder([ng.make_axis(K, "Y"), N], "float64")
    sum_sq = evaluate(SumSquared()(y_hat, Y), (y_hat, a), (Y, b))
    mean_sq = evaluate(MeanSquared()(y_hat, Y), (y_hat, a), (Y, b))
    ta, tb = torch.tensor(a), torch.tensor(b)
    np.testing.assert_allclose(sum_sq, 0.5 * torch.nn.functional.mse_loss(ta, tb, reduction="sum").item() / BATCH,
                               rtol=1e-12)
    np.testing.assert_allclose(mean_sq, 0.5 * torch.nn.functional.mse_loss(ta, tb).item(), rtol=1e-12)


@pytest.mark.parametrize("sigma", [1.0, 2.0, 0.5])
def test_smooth_l1_matches_torch_with_beta(torch, sigma):
    Out, N = axes()
    a = RNG.normal(size=(K, BATCH)) * 2
    b = RNG.normal(size=(K, BATCH))
    pred = ng.variable([Out, N], a, dtype="float64")
    Y = ng.placeholder([ng.make_axis(K, "Y"), N], "float64")
    cost = SmoothL1(sigma)(pred, Y)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        value, grad = t.computation([cost, *ng.gradients(cost, [pred])], Y)(b)
    ta = torch.tensor(a, requires_grad=True)
    expected = torch.nn.functional.smooth_l1_loss(ta, torch.tensor(b), beta=1 / sigma**2, reduction="sum") / BATCH
    expected.backward()
    np.testing.assert_allclose(value, expected.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, ta.grad.numpy(), rtol=1e-12)


def test_target_length_mismatch_is_a_typed_error():
    Out, N = axes(10)
    y_hat = ng.softmax(ng.placeholder([Out, N]))
    y = ng.placeholder([ng.make_axis(5, "Y"), N])
    with pytest.raises(CostError) as info:
        CrossEntropyMulti()(y_hat, y)
    message = str(info.value)
    assert isinstance(info.value, ng.NgraphError)
    assert "CrossEntropyMulti" in message and "expected targets with lengths (10,)" in message
    assert "received (5,)" in message and "nclass" in message and "nout" in message


def test_batch_mismatch_is_a_typed_error():
    Out, N = axes()
    y = ng.placeholder([ng.make_axis(K, "Y"), ng.make_axis(BATCH + 1, "N")])
    with pytest.raises(CostError, match="batch axis N of length 4"):
        SumSquared()(ng.placeholder([Out, N]), y)


def test_binary_targets_without_class_axis_match_a_single_unit():
    Out, N = axes(1)
    p = RNG.uniform(0.1, 0.9, size=(1, BATCH))
    t = np.array([1.0, 0.0, 1.0, 1.0])
    y_hat, Y = ng.placeholder([Out, N], "float64"), ng.placeholder([N], "float64")
    value = evaluate(SumSquared()(y_hat, Y), (y_hat, p), (Y, t))
    np.testing.assert_allclose(value, 0.5 * np.sum((p[0] - t) ** 2) / BATCH, rtol=1e-12)


@pytest.mark.parametrize("cost", [CrossEntropyMulti(usebits=True), CrossEntropyBinary(), SumSquared(), MeanSquared(),
                                  SmoothL1(sigma=3.0)], ids=lambda c: type(c).__name__)
def test_get_config_round_trip(cost):
    rebuilt = type(cost).from_config(cost.get_config())
    assert rebuilt.get_config() == cost.get_config() and repr(rebuilt) == repr(cost)


def test_bad_config():
    with pytest.raises(CostError, match="sigma"):
        SmoothL1(sigma=0.0)
    with pytest.raises(CostError, match="usebits"):
        CrossEntropyMulti(usebits="yes")
