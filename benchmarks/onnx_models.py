"""Hand-built PyTorch models exported to ONNX (issue 16): ResNet-18, an LSTM classifier and an MLP.

No torchvision: the models are written here with ``torch.nn`` so the test suite and the
latency benchmark (``onnx_latency.py``) export exactly the same graphs. Every model is
built in eval mode from a seed; batch-norm layers get seeded running statistics and affine
terms away from the identity (so an importer that drops or mis-folds them is caught), and
the scales stay moderate so the outputs are O(1) and an absolute tolerance of 1e-4 means
something.

* ``mlp``: 784-512-512-10, ReLU (Gemm, Relu).
* ``lstm``: a one-layer LSTM over 16 steps of 32 features (batch first), hidden 64, the last
  step's output into a 10-way linear layer (Transpose, LSTM, Squeeze, Gather, Gemm).
* ``resnet18``: ResNet-18 (BasicBlock x [2, 2, 2, 2], widths 64-512, a 7x7/2 stem conv and a
  3x3/2 max pool, 1x1/2 projection shortcuts) on 32x32 images, 10 classes (Conv,
  BatchNormalization, Relu, MaxPool, Add, GlobalAveragePool, Flatten, Gemm).

Example:
    >>> from onnx_models import build_torch_model, export_onnx, sample_input, torch_forward
    >>> path = export_onnx("resnet18", "/tmp/resnet18.onnx")
    >>> x = sample_input("resnet18", batch=4)
    >>> y = torch_forward(build_torch_model("resnet18"), x)    # what the ONNX model must reproduce
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import torch
from torch import nn

MODELS = ("mlp", "lstm", "resnet18")
OPSET = 17
INPUT_NAME, OUTPUT_NAME = "x", "y"
LSTM_STEPS, LSTM_FEATURES, LSTM_HIDDEN = 16, 32, 64
IMAGE_SIZE, CLASSES = 32, 10


class MLP(nn.Module):
    """784-512-512-10 with ReLU between the linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                    nn.Linear(512, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class LSTMClassifier(nn.Module):
    """A one-layer LSTM over ``(batch, steps, features)``; the last step's output goes to a linear classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(LSTM_FEATURES, LSTM_HIDDEN, batch_first=True)
        self.fc = nn.Linear(LSTM_HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


class BasicBlock(nn.Module):
    """Two 3x3 conv + batch-norm layers with a residual connection (a 1x1 conv + batch norm when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18: a 7x7/2 stem and 3x3/2 max pool, four stages of two BasicBlocks, global average pool, linear."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for stage, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            for i in range(2):
                blocks.append(BasicBlock(cin, cout, 2 if stage > 0 and i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def build_torch_model(name: str, seed: int = 0) -> nn.Module:
    """The model ``name`` (one of ``MODELS``) in eval mode, with seeded weights and batch-norm statistics.

    Args:
        name: ``"mlp"``, ``"lstm"`` or ``"resnet18"``.
        seed: seeds the weights (``torch.manual_seed``) and the batch-norm statistics.

    Returns:
        the ``torch.nn.Module``, in eval mode.

    Raises:
        ValueError: an unknown name.

    Example:
        >>> build_torch_model("mlp")(torch.zeros(2, 784)).shape
        torch.Size([2, 10])
    """
    makers = {"mlp": MLP, "lstm": LSTMClassifier, "resnet18": ResNet18}
    if name not in makers:
        raise ValueError(f"onnx_models: expected a model among {MODELS}, received {name!r}")
    torch.manual_seed(seed)
    model = makers[name]()
    rng = np.random.default_rng(seed + 1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):  # running statistics and affine terms far from the identity
                k = module.num_features
                module.weight.copy_(torch.from_numpy(rng.uniform(0.6, 1.0, k).astype(np.float32)))
                module.bias.copy_(torch.from_numpy(rng.normal(0.0, 0.1, k).astype(np.float32)))
                module.running_mean.copy_(torch.from_numpy(rng.normal(0.0, 0.1, k).astype(np.float32)))
                module.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, k).astype(np.float32)))
    return model.eval()


def sample_input(name: str, batch: int, seed: int = 2) -> np.ndarray:
    """Seeded float32 inputs for ``name``, batch first: ``(N, 784)``, ``(N, 16, 32)`` or ``(N, 3, 32, 32)``.

    Example:
        >>> sample_input("lstm", 4).shape
        (4, 16, 32)
    """
    shapes = {"mlp": (784,), "lstm": (LSTM_STEPS, LSTM_FEATURES), "resnet18": (3, IMAGE_SIZE, IMAGE_SIZE)}
    if name not in shapes:
        raise ValueError(f"onnx_models: expected a model among {MODELS}, received {name!r}")
    return np.random.default_rng(seed).standard_normal((batch, *shapes[name])).astype(np.float32)


def torch_forward(model: nn.Module, x: np.ndarray) -> np.ndarray:
    """``model(x)`` as a NumPy array, without autograd.

    Example:
        >>> torch_forward(build_torch_model("mlp"), sample_input("mlp", 2)).shape
        (2, 10)
    """
    with torch.no_grad():
        return model(torch.from_numpy(np.ascontiguousarray(x))).numpy()


def export_onnx(name: str, path: str | os.PathLike, seed: int = 0, model: nn.Module | None = None,
                fold_batch_norm: bool = False) -> str:
    """Export ``name`` (built by ``build_torch_model(name, seed)`` unless ``model`` is given) to ``path``.

    The TorchScript exporter (``dynamo=False``, which needs no extra packages) at opset 17, the
    input named ``x`` and the output ``y``, their first (batch) dim dynamic, named ``N``. The
    exporter folds eval-mode batch norms into the convolutions unless told to preserve the
    training mode; we preserve it by default (the model is in eval mode, so the graph holds
    inference ``BatchNormalization`` nodes), so the importer's batch norm is what is tested.

    Args:
        name: one of ``MODELS`` (picks the sample input's shape).
        path: the ``.onnx`` file to write.
        seed: the weights' seed.
        model: an already built model to export instead.
        fold_batch_norm: let the exporter fold batch norms into the convolutions.

    Returns:
        ``path`` as a string.

    Example:
        >>> export_onnx("mlp", tmp_path / "mlp.onnx")
    """
    model = build_torch_model(name, seed) if model is None else model
    example = torch.from_numpy(sample_input(name, 2))
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        mode = torch.onnx.TrainingMode.EVAL if fold_batch_norm else torch.onnx.TrainingMode.PRESERVE
        torch.onnx.export(model, (example,), os.fspath(path), dynamo=False, opset_version=OPSET, training=mode,
                          input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                          dynamic_axes={INPUT_NAME: {0: "N"}, OUTPUT_NAME: {0: "N"}})
    return os.fspath(path)


def describe(name: str) -> dict[str, Any]:
    """The model's parameter count and input shape (for reports).

    Example:
        >>> describe("mlp")["parameters"]
        669706
    """
    model = build_torch_model(name)
    return {"parameters": sum(p.numel() for p in model.parameters()),
            "input": tuple(sample_input(name, 1).shape[1:])}
