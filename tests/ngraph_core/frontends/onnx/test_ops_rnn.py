"""ONNX RNN / GRU / LSTM converters (ops_rnn.py) against onnxruntime on random weights.

The node suite (curated_rnn.txt) has a dozen forward-only cases; these cover every
direction, ``sequence_lens`` (the scan's valid-length mask), initial states, ``layout=1``,
GRU's ``linear_before_reset``, LSTM peepholes / ``input_forget`` / ``clip``, non-default
activations, weights as graph inputs, as constants and as trainable variables, and that
each direction is one ``scan`` op (never unrolled).
"""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import assert_same, check_node, make_model, run_ngraph, run_ort

import ngraph_core as ng
from ngraph_core.frontends.onnx import OnnxError, UnsupportedOnnxOpError, import_model
from ngraph_core.ir import OpType, toposort

RNG = np.random.default_rng(7)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
T, B, FEATURES, H = 5, 3, 4, 6  # steps, batch, input features, hidden


def weights(kind: str, dirs: int, bias: bool = True) -> dict[str, np.ndarray | None]:
    g = GATES[kind]
    return {"W": RNG.uniform(-0.6, 0.6, (dirs, g * H, FEATURES)).astype("float32"),
            "R": RNG.uniform(-0.6, 0.6, (dirs, g * H, H)).astype("float32"),
            "B": RNG.uniform(-0.4, 0.4, (dirs, 2 * g * H)).astype("float32") if bias else None}


def node_inputs(kind: str, direction: str, lengths: np.ndarray | None = None, initial: bool = False,
                layout: int = 0, peepholes: bool = False, bias: bool = True) -> dict[str, np.ndarray]:
    """Inputs in the node's order; ``_x`` names are omitted optional inputs."""
    dirs = 2 if direction == "bidirectional" else 1
    x = RNG.standard_normal((B, T, FEATURES) if layout else (T, B, FEATURES)).astype("float32")
    state_shape = (B, dirs, H) if layout else (dirs, B, H)
    inputs = {"X": x, **weights(kind, dirs, bias)}
    inputs["seq"] = lengths if lengths is not None else None
    inputs["h0"] = RNG.standard_normal(state_shape).astype("float32") if initial else None
    if kind == "LSTM":
        inputs["c0"] = RNG.standard_normal(state_shape).astype("float32") if initial else None
        inputs["P"] = RNG.uniform(-0.5, 0.5, (dirs, 3 * H)).astype("float32") if peepholes else None
    while inputs[list(inputs)[-1]] is None:
        inputs.pop(list(inputs)[-1])
    return {(f"_{k}" if v is None else k): (np.zeros(0, "float32") if v is None else v) for k, v in inputs.items()}


def n_outputs(kind: str) -> int:
    return 3 if kind == "LSTM" else 2


LENGTHS = np.array([5, 2, 4], "int32")


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lengths,initial", [(None, False), (LENGTHS, True), (LENGTHS, False)])
def test_matches_onnxruntime_in_every_direction(kind, direction, lengths, initial):
    inputs = node_inputs(kind, direction, lengths, initial)
    got = check_node(kind, inputs, opset=14, n_outputs=n_outputs(kind), hidden_size=H, direction=direction,
                     rtol=1e-4, atol=1e-5)
    if lengths is not None:  # steps past an example's length write zeros to Y
        assert np.all(got[0][2:, :, 1] == 0) and np.any(got[0][:2, :, 1] != 0)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_layout_1_is_batch_first(kind, direction):
    """onnxruntime has no layout=1 kernel: compare with its layout=0 run on transposed data."""
    inputs = node_inputs(kind, direction, LENGTHS, initial=True, layout=1)
    seq_first = {k: (v.transpose(1, 0, 2) if k in ("X", "h0", "c0") else v) for k, v in inputs.items()}
    attrs = {"hidden_size": H, "direction": direction}
    expected = run_ort(make_model(kind, seq_first, 14, n_outputs(kind), **attrs), seq_first)
    expected = [expected[0].transpose(2, 0, 1, 3)] + [e.transpose(1, 0, 2) for e in expected[1:]]
    got = run_ngraph(make_model(kind, inputs, 14, n_outputs(kind), layout=1, **attrs), inputs)
    assert_same(got, expected, 1e-4, 1e-5)
    dirs = 2 if direction == "bidirectional" else 1
    assert got[0].shape == (B, T, dirs, H) and got[1].shape == (B, dirs, H)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru_linear_before_reset(direction):
    inputs = node_inputs("GRU", direction, LENGTHS, initial=True)
    got1 = check_node("GRU", inputs, opset=14, n_outputs=2, hidden_size=H, direction=direction,
                      linear_before_reset=1, rtol=1e-4, atol=1e-5)
    got0 = check_node("GRU", inputs, opset=14, n_outputs=2, hidden_size=H, direction=direction,
                      linear_before_reset=0, rtol=1e-4, atol=1e-5)
    assert not np.allclose(got0[0], got1[0])  # the two formulas differ on these weights


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_peepholes_with_lengths(direction):
    inputs = node_inputs("LSTM", direction, LENGTHS, initial=True, peepholes=True)
    check_node("LSTM", inputs, opset=14, n_outputs=3, hidden_size=H, direction=direction, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_without_bias(kind):
    inputs = node_inputs(kind, "bidirectional", LENGTHS, initial=True, bias=False)
    assert "_B" in inputs  # an omitted optional input before sequence_lens
    attrs = {"linear_before_reset": 1} if kind == "GRU" else {}
    check_node(kind, inputs, opset=14, n_outputs=n_outputs(kind), hidden_size=H, direction="bidirectional",
               rtol=1e-4, atol=1e-5, **attrs)


def test_lstm_input_forget_and_clip():
    inputs = node_inputs("LSTM", "forward", initial=True, peepholes=True)
    inputs["X"] = inputs["X"] * 4.0  # large pre-activations, so clip matters
    check_node("LSTM", inputs, opset=14, n_outputs=3, hidden_size=H, input_forget=1, rtol=1e-4, atol=1e-5)
    got = check_node("LSTM", inputs, opset=14, n_outputs=3, hidden_size=H, clip=0.5, rtol=1e-4, atol=1e-5)
    unclipped = check_node("LSTM", inputs, opset=14, n_outputs=3, hidden_size=H, rtol=1e-4, atol=1e-5)
    assert not np.allclose(got[0], unclipped[0])


@pytest.mark.parametrize("kind,activations,alpha,beta", [
    ("RNN", ["Relu"], [], []),
    ("RNN", ["LeakyRelu", "ScaledTanh"], [0.2, 0.7], [1.3]),
    ("GRU", ["HardSigmoid", "Softsign"], [0.3], [0.4]),
    ("LSTM", ["Sigmoid", "Elu", "Softplus"], [0.5], []),
    ("LSTM", ["HardSigmoid", "Tanh", "Affine", "Sigmoid", "ThresholdedRelu", "Tanh"], [0.25, 0.8, 0.1], [0.5, 0.3]),
])
def test_activation_attributes(kind, activations, alpha, beta):
    direction = "bidirectional" if len(activations) > {"RNN": 1, "GRU": 2, "LSTM": 3}[kind] else "forward"
    inputs = node_inputs(kind, direction, initial=True)
    attrs = {"activations": activations}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    check_node(kind, inputs, opset=14, n_outputs=n_outputs(kind), hidden_size=H, direction=direction,
               rtol=1e-4, atol=1e-5, **attrs)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_weights_as_initializers_and_variables(kind):
    inputs = node_inputs(kind, "bidirectional", LENGTHS, initial=True)
    static = {k: v for k, v in inputs.items() if k != "X"}  # weights, lengths and states as initializers
    model = make_model(kind, {"X": inputs["X"]}, 14, n_outputs(kind), static, hidden_size=H,
                       direction="bidirectional")
    expected = run_ort(model, {"X": inputs["X"]})
    variables = import_model(model, initializers="variables")
    assert {v.name for v in variables.variables} >= {"W", "R"}  # trainable weights, fine-tunable
    assert_same(variables.run({"X": inputs["X"]}), expected, 1e-4, 1e-5)
    scans = [o for o in toposort(variables.outputs) if o.op is OpType.SCAN]
    assert len(scans) == 2  # one compiled loop per direction, whatever the sequence length
    constants = import_model(model, initializers="constants")
    assert_same(constants.run({"X": inputs["X"]}), expected, 1e-4, 1e-5)


def test_full_lengths_need_no_mask_and_zero_lengths_keep_the_initial_state():
    inputs = node_inputs("GRU", "forward", np.array([T, T, T], "int32"), initial=True)
    check_node("GRU", inputs, opset=14, n_outputs=2, hidden_size=H, rtol=1e-4, atol=1e-5)
    # a length-0 example runs no step: Y is zeros and Y_h its initial state (onnxruntime writes zeros to Y_h)
    inputs = node_inputs("RNN", "reverse", np.array([0, 3, 1], "int32"), initial=True)
    y, y_h = run_ngraph(make_model("RNN", inputs, 14, 2, hidden_size=H, direction="reverse"), inputs)
    np.testing.assert_array_equal(y_h[0, 0], inputs["h0"][0, 0])
    assert np.all(y[:, 0, 0] == 0) and np.all(y[1:, 0, 2] == 0) and np.any(y[0, 0, 2] != 0)


def test_float64_sequences():
    """onnxruntime's LSTM has no double kernel: compare with its float32 run."""
    inputs = node_inputs("LSTM", "bidirectional", initial=True)
    attrs = {"hidden_size": H, "direction": "bidirectional"}
    expected = run_ort(make_model("LSTM", inputs, 14, 3, **attrs), inputs)
    wide = {k: v.astype("float64") for k, v in inputs.items()}
    got = run_ngraph(make_model("LSTM", wide, 14, 3, **attrs), wide)
    assert all(g.dtype == np.float64 for g in got)
    assert_same([g.astype("float32") for g in got], expected, 1e-4, 1e-5)


def test_bad_attributes_are_typed_errors():
    inputs = node_inputs("RNN", "forward")
    with pytest.raises(OnnxError, match="direction"):
        import_model(make_model("RNN", inputs, 14, 2, hidden_size=H, direction="sideways"))
    with pytest.raises(OnnxError, match="expected W of shape"):
        import_model(make_model("RNN", inputs, 14, 2, hidden_size=H + 1))
    with pytest.raises(UnsupportedOnnxOpError, match="activation 'Swish'"):
        import_model(make_model("RNN", inputs, 14, 2, hidden_size=H, activations=["Swish"]))


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_imported_weights_fine_tune_gradient_matches_finite_differences(kind):
    """d sum(Y^2) / dW through the scans (float64, bidirectional, masked) against central differences."""
    inputs = {k: v.astype("float64") for k, v in node_inputs(kind, "bidirectional").items()}
    x, static = inputs.pop("X"), {**inputs, "seq": np.array([T, 2, 4], "int32")}

    def model_with(w):
        return make_model(kind, {"X": x}, 14, 2, {**static, "W": w}, hidden_size=H, direction="bidirectional")

    imported = import_model(model_with(static["W"]))
    (w_var,) = [v for v in imported.variables if v.name == "W"]
    loss = ng.sum(imported.outputs[0] * imported.outputs[0])
    with ng.transformers.make_transformer("numpy") as t:
        grad = t.computation(ng.deriv(loss, w_var), *imported.inputs)(x)

    def loss_at(w):
        (y, _) = run_ngraph(model_with(w), {"X": x})[:2]
        return float((y * y).sum())

    for index in [(0, 1, 2), (1, 3, 0), (1, GATES[kind] * H - 1, 3)]:
        step = np.zeros_like(static["W"])
        step[index] = 1e-6
        numeric = (loss_at(static["W"] + step) - loss_at(static["W"] - step)) / 2e-6
        np.testing.assert_allclose(grad[index], numeric, rtol=1e-5, atol=1e-8)
