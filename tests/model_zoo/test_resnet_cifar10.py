"""model_zoo.resnet_cifar10: the paper's parameter counts, depth errors, the schedule, a few steps, the CLI,
and the documented small settings (held-out accuracy well above chance)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import model_zoo.resnet_cifar10 as recipe
import ngraph_core as ng
from model_zoo.resnet_cifar10 import ResNetConfigError, main, paper_schedule, resnet_cifar10
from neon.costs import CrossEntropyMulti
from neon.data import DataError, ImageIterator, make_shapes_dataset
from neon.layers import training_mode
from neon.model import Model
from neon.optimizers import GradientDescentMomentum

ROOT = Path(__file__).resolve().parents[2]


def count_parameters(depth: int, shortcut: str = "A") -> int:
    net = resnet_cifar10(depth, shortcut)
    axes = [ng.make_axis(n, name) for n, name in zip((3, 32, 32, 2), ("C", "H", "W", "N"))]
    with training_mode(True):
        y = net(ng.placeholder(axes))
    assert y.axes.lengths == (10, 2)
    return sum(v.axes.size for v in net.trainable_variables)


def paper_count(n: int) -> int:
    """Option A by arithmetic: bias-free 3x3 convs, BN gamma and beta, Affine(64 -> 10) with bias."""
    convs = 3 * 16 * 9 + sum(cin * cout * 9 + (2 * n - 1) * cout * cout * 9
                             for cin, cout in ((16, 16), (16, 32), (32, 64)))
    batch_norms = 2 * (16 + 2 * n * (16 + 32 + 64))
    return convs + batch_norms + 64 * 10 + 10


def torch_count(torch, n: int) -> int:
    """The usual PyTorch CIFAR ResNet (option A shortcuts have no parameters)."""
    nn = torch.nn
    modules = [nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)]
    cin = 16
    for stage, cout in enumerate((16, 32, 64)):
        for block in range(n):
            stride = 2 if stage and not block else 1
            modules += [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                        nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)]
            cin = cout
    modules.append(nn.Linear(64, 10))
    return sum(p.numel() for m in modules for p in m.parameters())


@pytest.mark.parametrize("depth, expected", [(20, 269_722), (32, 464_154), (56, 853_018)])
def test_option_a_has_the_papers_parameter_count(depth, expected) -> None:
    n = (depth - 2) // 6
    assert count_parameters(depth) == paper_count(n) == expected
    assert round(expected / 1e6, 2) == {20: 0.27, 32: 0.46, 56: 0.85}[depth]  # He et al.'s Table 6
    torch = pytest.importorskip("torch")
    assert torch_count(torch, n) == expected


def test_option_b_adds_the_two_projections() -> None:
    assert count_parameters(20, "B") == 269_722 + 16 * 32 + 2 * 32 + 32 * 64 + 2 * 64


@pytest.mark.parametrize("depth", [18, 110, 0, "20", True])
def test_a_depth_the_paper_does_not_define_raises(depth) -> None:
    with pytest.raises(ResNetConfigError, match=r"expected depth to be one of \(20, 32, 56\).*hint"):
        resnet_cifar10(depth)


def test_a_bad_shortcut_raises() -> None:
    with pytest.raises(ResNetConfigError, match=r"expected shortcut 'A', 'B' or 'C', received 'D'"):
        resnet_cifar10(20, shortcut="D")


@pytest.mark.parametrize("epochs, milestones, rates", [
    (182, [91, 136], {0: 0.1, 90: 0.1, 91: 0.01, 135: 0.01, 136: 0.001, 181: 0.001}),
    (4, [2, 3], {0: 0.1, 1: 0.1, 2: 0.01, 3: 0.001}),
    (1, None, {0: 0.1}),
])
def test_the_schedule_steps_at_half_and_three_quarters(epochs, milestones, rates) -> None:
    schedule = paper_schedule(epochs)
    assert schedule.step_config == milestones
    for epoch, rate in rates.items():
        assert schedule.get_learning_rate(0.1, epoch) == pytest.approx(rate)


def test_a_few_steps_reduce_the_loss() -> None:
    (X, y), _ = make_shapes_dataset(48, 1, seed=4)  # 3 epochs of 3 batches: 9 steps
    train = ImageIterator(X, y, nclass=10, batch_size=16, shuffle=True, seed=0, normalize=True)
    model = Model(resnet_cifar10(20, seed=0))
    history = model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.02, 0.9, wdecay=1e-4), 3,
                        progress=False)
    costs = history["train_cost"]
    assert np.all(np.isfinite(costs)) and costs[-1] < 0.9 * costs[0], costs


def test_the_same_seed_gives_the_same_weights() -> None:
    def first_filter(seed: int) -> np.ndarray:
        model = Model(resnet_cifar10(20, seed=seed))
        model.build((3, 32, 32), batch_size=2)
        return model.transformer.read_variable(model.layers.layers[0].filter.W)

    np.testing.assert_array_equal(first_filter(1), first_filter(1))
    assert not np.array_equal(first_filter(1), first_filter(2))


def test_the_cli_trains_evaluates_and_writes_its_files(tmp_path, capsys) -> None:
    assert main(["--depth", "20", "--epochs", "1", "--n-train", "48", "--n-test", "16", "--batch-size", "16",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "built-in generated shapes data set" in out and "epoch 1/1" in out and "test accuracy:" in out
    assert "note: 3 training steps" in out  # too few for batch norm's running averages: said, not hidden
    assert {p.name for p in tmp_path.iterdir()} == {"resnet20.h5", "resnet20_curve.png", "resnet20_history.csv"}
    assert (tmp_path / "resnet20_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((tmp_path / "resnet20_history.csv").open()))
    assert len(rows) == 1 and float(rows[0]["lr"]) == pytest.approx(0.1 * 16 / 128)  # scaled to the batch
    assert rows[0]["epoch"] == "1"  # numbered as the console printed it ("epoch 1/1")
    model = Model(resnet_cifar10(20))
    model.load_params(tmp_path / "resnet20.h5")  # the saved file fits a fresh network


def test_the_script_runs_as_a_module(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "model_zoo.resnet_cifar10", "--depth", "20", "--epochs", "1",
                             "--n-train", "16", "--n-test", "8", "--batch-size", "16", "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "test accuracy:" in result.stdout and "RuntimeWarning" not in result.stderr
    assert (tmp_path / "resnet20.h5").exists() and (tmp_path / "resnet20_curve.png").exists()


def test_data_dir_is_an_alias_of_data(tmp_path) -> None:
    """``neon train`` passes ``--data-dir`` to every recipe; both spellings reach the CIFAR-10 loader."""
    for flag in ("--data", "--data-dir"):
        folder = tmp_path / f"no-cifar-here{flag}"
        folder.mkdir()
        with pytest.raises(DataError, match=f"no-cifar-here{flag}"):
            main(["--epochs", "0", flag, str(folder), "--out", str(tmp_path / "out")])


def test_the_learning_rate_scales_with_the_batch_size(tmp_path, capsys) -> None:
    assert recipe.scaled_learning_rate(128) == 0.1 and recipe.scaled_learning_rate(64) == 0.05
    main(["--epochs", "0", "--n-train", "8", "--n-test", "8", "--batch-size", "8", "--lr", "0.3",
          "--out", str(tmp_path)])
    assert "SGD lr 0.3 " in capsys.readouterr().out  # --lr overrides the scaled default


def test_the_small_settings_are_the_ones_documented() -> None:
    flags = recipe.small_flags()
    assert flags == "--epochs 3 --n-train 2048 --n-test 512 --batch-size 64"
    assert flags in recipe.__doc__
    assert flags in (ROOT / "README.md").read_text()
    small = recipe.SMALL_SETTINGS
    assert small["epochs"] * -(-small["n_train"] // small["batch_size"]) >= 3 * recipe.MIN_STEPS  # 96 steps


@pytest.mark.slow
def test_a_small_run_beats_chance_on_held_out_images(tmp_path) -> None:
    """32 steps (2 epochs of 512 images at batch 32; 12 s): test accuracy 35-47% over seeds 0-2, chance is 10%.
    The README's old small setting (8 steps at batch 128) scored 12%."""
    result = recipe.train(20, epochs=2, n_train=512, n_test=256, batch_size=32, out=tmp_path)
    costs = result.history["train_cost"]
    assert costs[-1] < 0.85 * costs[0], costs
    assert result.accuracy >= 0.25, result.accuracy


@pytest.mark.slow
def test_the_documented_small_settings_learn(tmp_path) -> None:
    """``SMALL_SETTINGS`` (45 s on 2 cores): 77-83% held-out accuracy over seeds 0-2; chance is 10%."""
    result = recipe.train(20, out=tmp_path, **recipe.SMALL_SETTINGS)
    assert result.accuracy >= 0.6, result.accuracy
    assert result.history["epoch"] == [1, 2, 3]
