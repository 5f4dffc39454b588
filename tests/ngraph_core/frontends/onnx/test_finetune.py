"""An imported model fine-tunes with neon's optimizers: its initializers are trainable variables.

A PyTorch MLP (``benchmarks/onnx_models.py``) is exported, imported, and trained for a few
steps with ``GradientDescentMomentum`` on a squared-error cost; PyTorch takes the same steps
with ``torch.optim.SGD(momentum=...)``. The weights after each step agree within float32
rounding, so autodiff through every imported operator (Gemm, Relu) and the optimizer's update
of variables made from ONNX initializers are both checked.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import ngraph_core as ng  # noqa: E402
from neon.optimizers import GradientDescentMomentum  # noqa: E402
from ngraph_core.frontends.onnx import import_model  # noqa: E402

MODELS_FILE = Path(__file__).resolve().parents[4] / "benchmarks" / "onnx_models.py"
LR, MOMENTUM, STEPS, BATCH = 0.05, 0.9, 3, 8


def _zoo():
    spec = importlib.util.spec_from_file_location("onnx_models_finetune", MODELS_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_imported_mlp_fine_tunes_like_pytorch(tmp_path):
    zoo = _zoo()
    torch.manual_seed(0)
    model = zoo.build_torch_model("mlp")
    path = zoo.export_onnx("mlp", tmp_path / "mlp.onnx", model=model)
    rng = np.random.default_rng(1)
    x = zoo.sample_input("mlp", BATCH)
    target = rng.standard_normal((BATCH, zoo.CLASSES)).astype("float32")

    imported = import_model(path, dims={"N": BATCH})
    assert len(imported.variables) == 6 and all("trainable" in v.meta.labels for v in imported.variables)
    (y,) = imported.outputs
    t = ng.placeholder(y.axes, name="target")
    cost = ng.sum(ng.square(y - t)) / BATCH
    update = GradientDescentMomentum(LR, momentum_coef=MOMENTUM)(cost, imported.variables)
    with ng.transformers.make_transformer() as tr:
        step = tr.computation([cost, update], *imported.inputs, t)
        ours = [float(step(x, target)[0]) for _ in range(STEPS)]
        weights = {v.name: tr.read_variable(v) for v in imported.variables}

    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    theirs = []
    xt, tt = torch.from_numpy(x), torch.from_numpy(target)
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = ((model(xt) - tt) ** 2).sum() / BATCH
        loss.backward()
        optimizer.step()
        theirs.append(float(loss.detach()))
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    assert ours[-1] < ours[0]  # it learns
    for name, param in model.state_dict().items():
        np.testing.assert_allclose(weights[name], param.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
