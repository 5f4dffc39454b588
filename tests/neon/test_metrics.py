"""Metrics on hand-made predictions: batch sums, aggregation over batches, and target matching."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ngraph_core as ng
from neon.metrics import Accuracy, LogLoss, MetricError, Misclassification, TopKMisclassification

# 5 samples over 4 classes (columns are samples), targets 0, 1, 2, 3, 0
PRED = np.array([
    [0.70, 0.10, 0.30, 0.25, 0.20],
    [0.10, 0.60, 0.30, 0.25, 0.50],
    [0.10, 0.20, 0.30, 0.25, 0.20],
    [0.10, 0.10, 0.10, 0.25, 0.10],
])
LABELS = np.array([0, 1, 2, 3, 0])
TARGETS = np.eye(4)[LABELS].T


def batch_sum(metric, pred=PRED, targets=TARGETS, y_name="Y"):
    out = ng.make_axis(pred.shape[0], "Out")
    N = ng.make_axis(pred.shape[1], "N")
    y_hat = ng.placeholder([out, N], "float64")
    y = ng.placeholder([ng.make_axis(targets.shape[0], y_name), N] if targets.ndim == 2 else [N], "float64")
    op = metric(y_hat, y)
    assert op.axes == ng.make_axes([])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        return float(t.computation(op, y_hat, y)(pred, targets))


def test_accuracy_and_misclassification():
    # argmax per sample: 0, 1, 0 (three-way tie -> first), 0 (four-way tie -> first), 1
    assert batch_sum(Accuracy()) == 2.0
    assert batch_sum(Misclassification()) == 3.0
    assert Accuracy().name == "accuracy" and Misclassification().name == "misclassification"


def test_top_k_misclassification_with_ties_as_neon():
    # k=2: sample 0 hit, 1 hit, 2: three tied at 0.3 for 2 slots -> miss 1/3,
    # 3: four tied for 2 slots -> miss 1/2, 4: target 0.2 ties class 2 behind 0.5 -> one slot for two -> miss 1/2
    assert batch_sum(TopKMisclassification(2)) == pytest.approx(1 / 3 + 1 / 2 + 1 / 2)
    assert batch_sum(TopKMisclassification(1)) == pytest.approx(2 / 3 + 3 / 4 + 1)
    assert batch_sum(TopKMisclassification(4)) == 0.0
    assert TopKMisclassification(5).name == "top5_misclassification"


def test_log_loss():
    expected = -np.sum(np.log(PRED[LABELS, np.arange(5)]))
    assert batch_sum(LogLoss()) == pytest.approx(expected, rel=1e-12)
    assert LogLoss().name == "log_loss"


def test_log_loss_of_softmax_with_huge_logits_is_finite():
    Out, N = ng.make_axis(3, "Out"), ng.make_axis(2, "N")
    logits = ng.placeholder([Out, N], "float64")
    y = ng.placeholder([ng.make_axis(3, "Y"), N], "float64")
    z = np.array([[1e4, 0.0], [0.0, 2e4], [-1e4, 0.0]])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        value = float(t.computation(LogLoss()(ng.softmax(logits), y), logits, y)(z, np.eye(3)[[1, 2]].T))
    assert math.isfinite(value) and value == pytest.approx(1e4 + 2e4)


def test_binary_single_unit_predictions():
    pred = np.array([[0.9, 0.2, 0.6, 0.4]])
    targets = np.array([1.0, 0.0, 0.0, 0.0])
    assert batch_sum(Accuracy(), pred, targets) == 3.0
    assert batch_sum(Misclassification(), pred, targets) == 1.0
    expected = -(np.log(0.9) + np.log(0.8) + np.log(0.4) + np.log(0.6))
    assert batch_sum(LogLoss(), pred, targets) == pytest.approx(expected, rel=1e-12)


def test_aggregate_over_batches_counts_a_partial_last_batch():
    acc = Accuracy()
    assert acc.aggregate([2.0, 1.0], 7) == pytest.approx(3 / 7)
    assert acc.aggregate(5.0, 10) == 0.5
    with pytest.raises(MetricError, match="positive sample count"):
        acc.aggregate([1.0], 0)


def test_target_length_mismatch_is_a_typed_error():
    with pytest.raises(MetricError) as info:
        batch_sum(Accuracy(), PRED, np.eye(3)[[0, 1, 2, 0, 1]].T)
    message = str(info.value)
    assert isinstance(info.value, ng.NgraphError)
    assert "Accuracy" in message and "expected targets with lengths (4,)" in message and "received (3,)" in message
    assert "nclass" in message


def test_bad_k():
    for k in (0, 1.5, True):
        with pytest.raises(MetricError, match="k to be an int"):
            TopKMisclassification(k)


def test_get_config_round_trip():
    for metric in (Accuracy(), Misclassification(), TopKMisclassification(3), LogLoss()):
        rebuilt = type(metric).from_config(metric.get_config())
        assert rebuilt.name == metric.name and repr(rebuilt) == repr(metric)
