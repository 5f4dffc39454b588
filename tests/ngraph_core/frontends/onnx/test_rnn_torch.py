"""Recurrent models exported by PyTorch (``torch.onnx.export``) import and match PyTorch within 1e-4.

The models are hand-built classifiers over ``torch.nn.LSTM`` / ``GRU`` / ``RNN`` (batch
first, stacked, bidirectional), exported with the TorchScript exporter (``dynamo=False``:
the default one needs packages CI does not install) into a temporary folder.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from ngraph_core.frontends.onnx import import_model  # noqa: E402
from ngraph_core.ir import OpType, toposort  # noqa: E402

CELLS = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN": torch.nn.RNN}


class Classifier(torch.nn.Module):
    """``cell`` over a ``[batch, seq, features]`` input, a softmax classifier on the last step."""

    def __init__(self, cell: str, features: int = 5, hidden: int = 8, classes: int = 3, layers: int = 2,
                 bidirectional: bool = True) -> None:
        super().__init__()
        self.rnn = CELLS[cell](features, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.fc = torch.nn.Linear(hidden * (2 if bidirectional else 1), classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return torch.softmax(self.fc(y[:, -1]), dim=-1)


def export(module: torch.nn.Module, x: torch.Tensor, path: str, dynamic_batch: bool = False) -> str:
    axes = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic_batch else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation and batch-size notes
        torch.onnx.export(module, (x,), path, dynamo=False, input_names=["x"], output_names=["y"],
                          dynamic_axes=axes)
    return path


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
def test_exported_classifier_matches_pytorch(cell, tmp_path):
    torch.manual_seed(0)
    module = Classifier(cell).eval()
    x = torch.randn(4, 7, 5)
    path = export(module, x, str(tmp_path / f"{cell.lower()}.onnx"))
    model = import_model(path)
    (got,) = model.run({"x": x.numpy()})
    with torch.no_grad():
        expected = module(x).numpy()
    assert got.shape == (4, 3) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    scans = [o for o in toposort(model.outputs) if o.op is OpType.SCAN]
    assert len(scans) == 4  # 2 layers x 2 directions, each one compiled loop


def test_lstm_with_dynamic_batch_and_fine_tunable_weights(tmp_path):
    torch.manual_seed(1)
    module = Classifier("LSTM", features=6, hidden=10, layers=1, bidirectional=False).eval()
    path = export(module, torch.randn(2, 9, 6), str(tmp_path / "lstm.onnx"), dynamic_batch=True)
    x = torch.randn(5, 9, 6)
    model = import_model(path, dims={"batch": 5})
    (got,) = model.run([x.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(got, module(x).numpy(), rtol=1e-4, atol=1e-4)
    shapes = sorted(tuple(v.axes.lengths) for v in model.variables)
    assert (1, 40, 6) in shapes and (1, 40, 10) in shapes  # W and R are trainable variables
