"""``Model.summary`` (layers, output axes, exact parameter counts, memory plan) and ``Model.memory_plot``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import ngraph_core as ng
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator
from neon.initializers import Constant, set_seed
from neon.layers import Affine, Conv, Pool
from neon.model import Model, ModelError
from neon.optimizers import GradientDescentMomentum

PNG = b"\x89PNG\r\n\x1a\n"


def cnn() -> Model:
    """Conv(3x3x4, batch norm, bias) -> Pool 2 -> Conv(3x3x4, bias) -> Affine(10, bias) on 1x8x8 images.

    Parameters: conv0 3*3*1*4 + 4 (bias) + 4 + 4 (gamma, beta) = 48, plus 8 running averages;
    conv1 3*3*4*4 + 4 = 148; the affine 4*10 + 10 = 50 (8x8 -> 6x6 -> 3x3 -> 1x1 with 4 channels).
    """
    set_seed(0)
    model = Model([Conv((3, 3, 4), bias=Constant(0.0), activation="relu", batch_norm=True), Pool((2, 2)),
                   Conv((3, 3, 4), bias=Constant(0.0), activation="relu"),
                   Affine(10, bias=Constant(0.0), activation="softmax")])
    model.build((1, 8, 8), batch_size=2)
    return model


def row(text: str, name: str) -> list[str]:
    """The cells of the first table row whose layer column is ``name`` (split on runs of 2+ spaces)."""
    for line in text.splitlines():
        if line.strip().startswith(name + " "):
            return re.split(r"\s{2,}", line.strip())
    raise AssertionError(f"no row {name!r} in\n{text}")


def test_summary_lists_layers_outputs_and_exact_parameter_counts() -> None:
    text = cnn().summary()
    assert row(text, "Sequential_0") == ["Sequential_0", "Sequential", "(Affine_0:10)", "246", "0", "8"]
    assert row(text, "Conv_0") == ["Conv_0", "Conv", "(Conv_0:4, H:6, W:6)", "48", "0", "8"]
    assert row(text, "Pool_0") == ["Pool_0", "Pool", "(Conv_0:4, H:3, W:3)", "0", "0", "0"]
    assert row(text, "Conv_1") == ["Conv_1", "Conv", "(Conv_1:4, H:1, W:1)", "148", "0", "0"]
    assert row(text, "Affine_0") == ["Affine_0", "Affine", "(Affine_0:10)", "50", "0", "0"]
    assert row(text, "Linear_0") == ["Linear_0", "Linear", "(Affine_0:10)", "40", "0", "0"]
    assert "    Convolution_0" in text  # indented by depth (two spaces a level)
    assert "Trainable params: 246" in text and "Frozen params: 0" in text
    assert "Other state (running averages...): 8" in text and "Total: 254" in text


def test_summary_counts_frozen_parameters_and_limits_depth() -> None:
    model = cnn()
    model.select("#Conv_1 variable").freeze()
    text = model.summary(max_depth=1)
    assert row(text, "Conv_1")[3:5] == ["0", "148"]
    assert "Trainable params: 98" in text and "Frozen params: 148" in text
    assert "Convolution_0" not in text and "Linear_0" not in text


def test_summary_reports_the_inference_memory_plan() -> None:
    model = cnn()
    text = model.summary()
    y_hat = model.__ngraph_ops__()[0]
    (x,) = [op for op in ng.ordered_ops([y_hat]) if op.op is ng.OpType.PLACEHOLDER]
    report = model.transformer.computation(y_hat, x, mode="inference").memory_report()
    assert "Inference memory plan (batch 2):" in text
    assert f"({report.arena_bytes:,} bytes)" in text.split("arena:")[1].splitlines()[0]
    assert f"({report.unplanned_bytes:,} bytes)" in text.split("without reuse:")[1].splitlines()[0]
    assert text.rstrip().endswith(f"variables: {report.persistent_bytes:,} bytes")
    # the variables: every weight and running average, float32
    assert report.persistent_bytes == 4 * 254


def test_summary_and_plots_need_a_built_model() -> None:
    with pytest.raises(ModelError, match=r"Model.summary: .*hint: call model.build\(input_shape\)"):
        Model([Affine(3)]).summary()
    with pytest.raises(ModelError, match=r"Model.memory_plot: .*model.build"):
        Model([Affine(3)]).memory_plot("unused.png")


def test_memory_plot_draws_inference_and_after_fit_training(tmp_path: Path) -> None:
    model = cnn()
    assert model.memory_plot(tmp_path / "inference.png").read_bytes().startswith(PNG)
    with pytest.raises(ModelError, match=r"no training computation .*hint: call model.fit"):
        model.memory_plot(tmp_path / "training.png", which="training")
    with pytest.raises(ModelError, match=r"expected which='inference' or 'training', received 'train'"):
        model.memory_plot(tmp_path / "training.png", which="train")
    rng = np.random.default_rng(0)
    data = ArrayIterator(rng.normal(size=(4, 64)).astype("float32"), rng.integers(0, 10, 4), nclass=10,
                         batch_size=2, lshape=(1, 8, 8))
    model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.01), 1, progress=False)
    path = model.memory_plot(tmp_path / "training.png", which="training")
    assert path == tmp_path / "training.png" and path.read_bytes().startswith(PNG)
