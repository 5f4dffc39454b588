"""ONNX signal converters (ops_signal.py) against numpy.fft and onnxruntime.

Beyond the node suite: DFT lengths that truncate and zero-pad, complex inputs on a middle
axis, one-sided forward and inverse transforms of odd and even lengths (the Nyquist bin),
STFT with a run-time window, and windows in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from ort_check import check_node
from test_ops_shape import malformed

from ngraph_core.frontends.onnx import OnnxError, import_model

RNG = np.random.default_rng(17)


def as_pairs(z: np.ndarray) -> np.ndarray:
    """A complex array as ONNX's [..., 2] float32 (real, imaginary)."""
    return np.stack([z.real, z.imag], axis=-1).astype("float32")


@pytest.mark.parametrize("length", [None, 4, 9])
@pytest.mark.parametrize("inverse", [0, 1])
def test_complex_dft_along_a_middle_axis(length, inverse):
    z = RNG.standard_normal((2, 6, 3)) + 1j * RNG.standard_normal((2, 6, 3))
    fft = np.fft.ifft if inverse else np.fft.fft
    expected = as_pairs(fft(z, n=length, axis=1))
    static = {"axis": np.array(1, "int64")}
    if length is not None:
        static = {"n": np.array(length, "int64"), **static}
    inputs = {"x": as_pairs(z)} if length is not None else {"x": as_pairs(z), "_n": np.zeros(0)}
    check_node("DFT", inputs, opset=20, static=static, inverse=inverse, expected=expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [7, 8])
def test_real_one_sided_dft_and_its_inverse(n):
    signal = RNG.standard_normal((3, n))
    spectrum = np.fft.rfft(signal, axis=1)
    check_node("DFT", {"x": signal[..., None].astype("float32")}, opset=17, onesided=1, axis=1,
               expected=as_pairs(spectrum), rtol=1e-4, atol=1e-5)
    check_node("DFT", {"x": as_pairs(spectrum)}, opset=17, static={"n": np.array(n, "int64")}, onesided=1,
               inverse=1, axis=1, expected=signal[..., None].astype("float32"), rtol=1e-4, atol=1e-5)


def _stft_model():
    nodes = [helper.make_node("STFT", ["x", "step", "w"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 40, 1]),
                                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 6, 2])],
                              [numpy_helper.from_array(np.array(6, "int64"), "step")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_stft_with_a_runtime_window():
    signal = RNG.standard_normal((2, 40, 1)).astype("float32")
    window = np.hanning(10).astype("float32")
    frames = np.stack([signal[:, s:s + 10, 0] * window for s in range(0, 31, 6)], axis=1)
    expected = as_pairs(np.fft.rfft(frames.astype(np.float64), axis=-1))
    got = import_model(_stft_model()).run({"x": signal, "w": window})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, periodic):
    check_node(op, {}, opset=17, static={"size": np.array(9, "int64")}, periodic=periodic,
               output_datatype=TensorProto.DOUBLE, rtol=1e-6, atol=1e-7)


def test_dft_of_the_complex_dim_is_an_error():
    with pytest.raises(OnnxError, match="real, imaginary"):
        import_model(malformed("DFT", {"x": np.zeros((2, 4, 2), "float32")}, 17, axis=2))
