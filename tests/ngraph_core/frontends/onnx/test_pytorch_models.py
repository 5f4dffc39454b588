"""Models exported from PyTorch (``torch.onnx.export``, opset 17, dynamic batch) import and match PyTorch.

The three hand-built models of ``benchmarks/onnx_models.py`` (ResNet-18 on 32x32 images, an
LSTM classifier, an MLP) are exported once per module, imported with ``import_model`` at
batch 1 and 4 (the exporter's dynamic dim ``N`` set by ``dims``), and their outputs compared
with PyTorch's (1e-4) and onnxruntime's on the same file.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ngraph_core.frontends.onnx import import_model  # noqa: E402

MODELS_FILE = Path(__file__).resolve().parents[4] / "benchmarks" / "onnx_models.py"
TOLERANCE = 1e-4


def _load_models_module():
    spec = importlib.util.spec_from_file_location("onnx_models", MODELS_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zoo = _load_models_module()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, object]]:
    """Each model name -> (its exported ONNX file, the torch model it came from)."""
    folder = tmp_path_factory.mktemp("pytorch_onnx")
    result = {}
    for name in zoo.MODELS:
        model = zoo.build_torch_model(name)
        result[name] = (zoo.export_onnx(name, folder / f"{name}.onnx", model=model), model)
    return result


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("name", zoo.MODELS)
def test_imported_model_matches_pytorch(exported, name: str, batch: int):
    path, model = exported[name]
    x = zoo.sample_input(name, batch)
    expected = zoo.torch_forward(model, x)
    imported = import_model(path, dims={"N": batch})
    (y,) = imported.run({"x": x})
    assert y.shape == expected.shape == (batch, zoo.CLASSES)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=0, atol=TOLERANCE)
    assert np.abs(expected).max() > 10 * TOLERANCE  # the comparison is not between near-zero outputs


@pytest.mark.parametrize("name", zoo.MODELS)
def test_imported_model_matches_onnxruntime(exported, name: str):
    path, _ = exported[name]
    x = zoo.sample_input(name, 3, seed=7)
    session = ort.InferenceSession(Path(path).read_bytes(), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {"x": x})
    (ours,) = import_model(path, dims={"N": 3}).run({"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOLERANCE)


def test_dynamic_batch_dim_becomes_the_named_axis(exported):
    imported = import_model(exported["mlp"][0], dims={"N": 5})
    (x,) = imported.inputs
    assert [(a.name, a.length) for a in x.axes] == [("N", 5), (x.axes[1].name, 784)]
    assert imported.outputs[0].axes.lengths == (5, zoo.CLASSES)
    assert imported.dims == {"N": 5}


def test_resnet18_keeps_its_layers_and_weights(exported):
    path, model = exported["resnet18"]
    graph_ops = {n.op_type for n in onnx.load(path).graph.node}
    assert {"Conv", "BatchNormalization", "MaxPool", "GlobalAveragePool", "Gemm", "Add"} <= graph_ops
    imported = import_model(path, dims={"N": 1})
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 20  # stem + 16 block convs + 3 projection shortcuts
    assert len(imported.select("Conv variable")) == len(convs)  # one weight each (bias=False)
    n_params = sum(int(np.prod(v.axes.lengths)) for v in imported.variables)
    batch_norm_stats = sum(2 * m.num_features for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    assert n_params == sum(p.numel() for p in model.parameters()) + batch_norm_stats


def test_lstm_weights_are_trainable_variables(exported):
    path, model = exported["lstm"]
    imported = import_model(path, dims={"N": 2})
    n_params = sum(int(np.prod(v.axes.lengths)) for v in imported.variables)
    assert n_params == sum(p.numel() for p in model.parameters())


def test_resnet18_compiled_for_inference_folds_every_batch_norm(exported):
    """Each BatchNormalization normalizes a renamed, reordered convolution (ONNX's NCHW under fresh names):
    ``compile_for_inference`` folds all 20 into their filters, and the result still matches onnxruntime."""
    import ngraph_core as ng
    from ngraph_core.ir import OpType, toposort

    path, _ = exported["resnet18"]
    imported = import_model(path, dims={"N": 2})
    compiled = ng.inference.compile_for_inference((imported.inputs, imported.outputs), batch_size=2)
    ops = toposort(list(compiled.graph_outputs))
    assert sum(op.op is OpType.CONV for op in ops) == 20
    # no (h - mean) * inv * gamma over an activation is left (the scaled filters were frozen into constants)
    assert [op for op in ops if op.op in (OpType.SUB, OpType.MUL, OpType.RSQRT) and len(op.axes) == 4] == []
    x = zoo.sample_input("resnet18", 2, seed=3)
    (theirs,) = ort.InferenceSession(Path(path).read_bytes(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(compiled.infer(x)[0], theirs, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("norm_first, activation", [(False, "relu"), (True, "gelu")])
def test_an_exported_transformer_encoder_imports_and_matches_pytorch(tmp_path, norm_first: bool, activation: str):
    """``nn.TransformerEncoder`` (2 layers, d 16, 2 heads, batch first) exported by the TorchScript exporter:
    its batched MatMuls, Softmax and LayerNormalization import, and the outputs match PyTorch at batch 1 and 3
    (no padding mask: the exporter takes the source alone)."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation=activation, batch_first=True,
                                             norm_first=norm_first)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    path = tmp_path / "encoder.onnx"
    torch.onnx.export(encoder, (torch.randn(1, 5, 16),), path, dynamo=False, input_names=["x"], output_names=["y"],
                      opset_version=17, dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert {"MatMul", "Softmax"} <= ops
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 5, 16)).astype(np.float32)
        with torch.no_grad():
            expected = encoder(torch.from_numpy(x)).numpy()
        (y,) = import_model(path, dims={"N": batch}).run({"x": x})
        np.testing.assert_allclose(y, expected, rtol=0, atol=TOLERANCE)
        assert np.abs(expected).max() > 10 * TOLERANCE
