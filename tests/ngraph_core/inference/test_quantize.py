"""Quantization: per-channel INT8 error bounds, FP16 storage, activation quantize-dequantize and
calibration, and the accuracy drop on the MNIST MLP and a small CNN.

Measured (numpy, this repository's seeds): MLP fp32 91.8% on the 1,000 test digits, fp16 drop
0.0 points, int8 drop 0.1 points; CNN fp32 88.2%, fp16 0.0, int8 0.1. The bars below are
1 point for fp16 and 2 points for int8.
"""

from __future__ import annotations

import numpy as np
import pytest
from inference_models import IMAGE, datasets, mnist, trained_cnn, trained_mlp

import ngraph_core as ng
from ngraph_core.inference import (
    calibrate_ranges,
    compile_for_inference,
    quantization_report,
    quantize_dequantize,
    quantize_weight,
)
from ngraph_core.inference.quantize import QuantizationError

FP16_BAR, INT8_BAR = 0.01, 0.02


@pytest.mark.parametrize("channel_axes", [(0,), (1,), (0, 2)])
def test_int8_per_channel_error_is_at_most_half_a_step(channel_axes: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    # channels of very different magnitudes: a per-tensor scale would lose the small ones
    w = (rng.standard_normal((5, 7, 3)) * rng.uniform(1e-3, 10, size=(5, 1, 1))).astype(np.float32)
    q = quantize_weight(w, "int8", channel_axes)
    assert q.data.dtype == np.int8 and q.scale.dtype == np.float32
    reduce = tuple(i for i in range(3) if i not in channel_axes)
    peak = np.max(np.abs(w), axis=reduce, keepdims=True)
    np.testing.assert_allclose(q.scale, peak / 127, rtol=1e-6)
    assert np.all(np.max(np.abs(q.data), axis=reduce) == 127)  # each channel's largest value uses the full range
    err = np.abs(w - q.dequantize())
    assert np.all(err <= q.scale / 2 * (1 + 1e-5))
    assert q.nbytes == w.size + q.scale.size * 4


def test_int8_known_values_and_zero_channel() -> None:
    w = np.array([[1.0, -0.5, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    q = quantize_weight(w, "int8", (0,))
    assert q.data.tolist() == [[127, -64, 0], [0, 0, 0]]  # -0.5 * 127 = -63.5 rounds to even: -64
    np.testing.assert_allclose(q.scale.ravel(), [1 / 127, 1.0])
    np.testing.assert_array_equal(q.dequantize()[1], 0.0)


def test_fp16_and_fp32_storage() -> None:
    w = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    half = quantize_weight(w, "fp16")
    assert half.data.dtype == np.float16 and half.scale is None and half.nbytes == w.nbytes // 2
    np.testing.assert_array_equal(half.dequantize(), w.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(quantize_weight(w, "fp32").dequantize(), w)
    with pytest.raises(QuantizationError, match="precision"):
        quantize_weight(w, "bf16")
    with pytest.raises(QuantizationError, match="channel axis 2 out of range"):
        quantize_weight(w, "int8", (2,))


def test_quantize_dequantize_op_rounds_and_clips() -> None:
    F = ng.make_axis(9, "F")
    x = ng.placeholder([F])
    values = np.array([-10.0, -0.26, -0.25, -0.24, 0.0, 0.049, 0.05, 0.1001, 7.0], dtype=np.float32)
    scale = 0.05
    with ng.transformers.make_transformer() as t:
        got = t.computation(quantize_dequantize(x, scale), x, mode="inference")(values)
    q = np.clip(values / np.float32(scale), -127, 127)
    expected = np.sign(q) * np.floor(np.abs(q) + 0.5) * scale  # half away from zero
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    assert got[0] == pytest.approx(-127 * scale) and got[-1] == pytest.approx(127 * scale)
    with pytest.raises(QuantizationError, match="positive scale"):
        quantize_dequantize(x, 0.0)


def test_calibrate_ranges_is_the_largest_magnitude() -> None:
    F, H, N = ng.make_axis(4, "F"), ng.make_axis(3, "H"), ng.make_axis(2, "N")
    x = ng.placeholder([F, N], name="x")
    w = ng.variable([H, F], initial_value=np.arange(12, dtype=np.float32).reshape(3, 4) / 10, name="W")
    hidden = ng.relu(ng.dot(w, x))
    fp32 = compile_for_inference(([x], [hidden]), batch_size=2)
    (dot,) = [op for op in ng.ordered_ops(list(fp32.template_outputs)) if op.op is ng.OpType.DOT]
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(3)]  # 5 samples: a padded chunk
    ranges = calibrate_ranges(fp32, [dot.src[1], hidden], batches)
    assert ranges[dot.src[1]] == pytest.approx(max(np.abs(b).max() for b in batches))
    w_value = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    assert ranges[hidden] == pytest.approx(max(np.maximum(w_value @ b, 0).max() for b in batches), rel=1e-6)
    with pytest.raises(QuantizationError, match="no batch"):
        calibrate_ranges(fp32, [hidden], [])


def test_mlp_fp16_and_int8_within_the_accuracy_bars() -> None:
    model = trained_mlp()
    train, test = datasets()
    fp32 = compile_for_inference(model, batch_size=100)
    fp16 = compile_for_inference(model, precision="fp16", batch_size=100, validation=test)
    int8 = compile_for_inference(model, precision="int8", calibration=train, batch_size=100, validation=test)
    reports = [quantization_report(fp32, q, test) for q in (fp16, int8)]
    assert reports[0].accuracy_drop <= FP16_BAR and reports[1].accuracy_drop <= INT8_BAR
    assert fp16.accuracy_drop == pytest.approx(reports[0].accuracy_drop)
    assert int8.accuracy_drop == pytest.approx(reports[1].accuracy_drop)
    assert reports[1].reference_accuracy > 0.85
    # the quantization is real: outputs move, but by little
    x = mnist()[2][:100]
    assert 0 < np.abs(int8.predict(x) - fp32.predict(x)).max() < 0.2
    # both dot weights are stored int8 with one scale per output unit; the bias stays float32
    dtypes = sorted(str(w.data.dtype) for w in int8.weights.values())
    assert dtypes.count("int8") == 2
    assert reports[0].size_ratio == pytest.approx(0.5, abs=0.01) and reports[1].size_ratio < 0.27
    assert "drop" in str(reports[1]) and "int8" in str(reports[1])
    # INT8 quantize-dequantizes each dot's data: cast to int32 and back before both dots
    kinds = [op.op.value for op in ng.ordered_ops(list(int8.template_outputs))]
    assert kinds.count("cast") == 4 and len(int8.activation_scales) == 2
    # made in the consuming layer's scope (the -pc counters and selectors count them there)
    casts = ng.select(list(int8.template_outputs), "cast.quantize")
    dots = ng.select(list(int8.template_outputs), "dot")
    assert len(casts) == 4 and {c.meta.scope for c in casts} == {d.meta.scope for d in dots}


def test_calibration_may_be_one_array_of_samples_batch_first() -> None:
    """``calibration=X_train[:512]`` (rows, as ``predict`` takes them) measures the same ranges as
    the same samples given as batches in the input's axes order."""
    model = trained_mlp()
    x = mnist()[0][:300]
    from_rows = compile_for_inference(model, precision="int8", calibration=x, batch_size=100)
    as_batches = [x[i:i + 100].T for i in range(0, 300, 100)]  # the MLP's input axes: (features, N)
    from_batches = compile_for_inference(model, precision="int8", calibration=as_batches, batch_size=100)
    assert from_rows.accuracy_drop is None  # no labels: nothing to measure the drop on
    assert sorted(from_rows.activation_scales.values()) == sorted(from_batches.activation_scales.values())
    assert len(from_rows.activation_scales) == 2 and min(from_rows.activation_scales.values()) > 0
    with pytest.raises(ng.inference.InferenceError, match="expected rows of 784 values"):
        compile_for_inference(model, precision="int8", calibration=x[:, :100], batch_size=100)


def test_cnn_fp16_and_int8_within_the_accuracy_bars() -> None:
    model = trained_cnn()
    train, test = datasets(IMAGE, n_train=2000)
    fp32 = compile_for_inference(model, batch_size=100)
    int8 = compile_for_inference(model, precision="int8", calibration=train, batch_size=100)
    fp16 = compile_for_inference(model, precision="fp16", batch_size=100)
    assert int8.accuracy_drop is not None  # calibration data had labels
    assert quantization_report(fp32, fp16, test).accuracy_drop <= FP16_BAR
    report = quantization_report(fp32, int8, test)
    assert report.accuracy_drop <= INT8_BAR and report.reference_accuracy > 0.8
    # conv filters [Ci, R, S, K] get one scale per output channel K; the Affine weight [10, C, H, W]
    # (its dot contracts C, H, W) one per output unit
    scales = [w.scale for w in int8.weights.values() if w.scale is not None]
    assert sorted(s.shape for s in scales) == [(1, 1, 1, 8), (1, 1, 1, 16), (10, 1, 1, 1)]
