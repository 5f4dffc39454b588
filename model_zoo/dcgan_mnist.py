"""DCGAN on MNIST (Radford et al. 2016, scaled to 28x28), trained with ``neon.gan.GAN``.

Generator: ``z(100) -> Affine(7*7*128) + BN + relu -> [C:128, H:7, W:7] -> Deconv 4x4/2 (64) + BN +
relu -> 14x14 -> Deconv 4x4/2 (1) + tanh -> 28x28``. Discriminator: ``Conv 4x4/2 (64) + leaky relu
0.2 -> 14x14 -> Conv 4x4/2 (128) + BN + leaky relu 0.2 -> 7x7 -> Affine(1) + sigmoid``. Weights
N(0, 0.02) as in the paper; Adam(2e-4, beta_1=0.5) for both networks. The data is the built-in
MNIST subset (``load_mnist_subset``, 4,000 training digits) scaled to [-1, 1]. After every epoch
a grid of digits generated from a fixed noise batch is written (atomically) to
``<out>/epoch_<k>.png`` and ``<out>/latest.png``, and the history to ``<out>/history.json``.

Usage:
    python -m model_zoo.dcgan_mnist --epochs 5 --n-train 4000 --out out/dcgan_mnist/

    >>> from model_zoo.dcgan_mnist import train
    >>> gan, history = train(epochs=1, n_train=256)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from neon.activations import Logistic, Rectlin, Tanh
from neon.callbacks import Callback
from neon.data import ArrayIterator, load_mnist_subset
from neon.gan import GAN
from neon.initializers import Gaussian, set_seed
from neon.layers import Affine, Conv, Deconv, Unflatten
from neon.optimizers import Adam
from neon.saving import atomic_path

from .progress import add_progress_flag, show_progress

NOISE_DIM = 100
LEARNING_RATE, BETA_1 = 2e-4, 0.5


def generator(noise_dim: int = NOISE_DIM) -> list:
    """The generator's layers: noise ``[Z, N]`` -> images ``[C:1, H:28, W:28, N]`` in [-1, 1]."""
    del noise_dim  # the first Affine adapts to the noise axis
    init = Gaussian(0.0, 0.02)
    return [Affine(7 * 7 * 128, init=init, batch_norm=True, activation=Rectlin()),
            Unflatten((128, 7, 7)),
            Deconv((4, 4, 64), strides=2, padding=1, init=init, batch_norm=True, activation=Rectlin()),
            Deconv((4, 4, 1), strides=2, padding=1, init=init, bias=0.0, activation=Tanh())]


def discriminator() -> list:
    """The discriminator's layers: images ``[C:1, H:28, W:28, N]`` -> P(real) ``[Out:1, N]``."""
    init = Gaussian(0.0, 0.02)
    return [Conv((4, 4, 64), strides=2, padding=1, init=init, bias=0.0, activation=Rectlin(slope=0.2)),
            Conv((4, 4, 128), strides=2, padding=1, init=init, batch_norm=True, activation=Rectlin(slope=0.2)),
            Affine(1, init=init, bias=0.0, activation=Logistic())]


def image_grid(images: np.ndarray, ncols: int = 8) -> np.ndarray:
    """``(n, 1, H, W)`` images in [-1, 1] as one uint8 grid ``(rows*(H+2), ncols*(W+2))``."""
    n, _, h, w = images.shape
    rows = -(-n // ncols)
    grid = np.zeros((rows * (h + 2), ncols * (w + 2)), dtype=np.uint8)
    pixels = np.clip((images[:, 0] + 1.0) * 127.5, 0, 255).astype(np.uint8)
    for i in range(n):
        r, c = divmod(i, ncols)
        grid[r * (h + 2) + 1:r * (h + 2) + 1 + h, c * (w + 2) + 1:c * (w + 2) + 1 + w] = pixels[i]
    return grid


def write_grid(images: np.ndarray, path: str | Path, ncols: int = 8) -> Path:
    """Write ``image_grid(images)`` as a PNG (Pillow), atomically (scaled up x2 for viewing)."""
    from PIL import Image

    grid = Image.fromarray(image_grid(images, ncols), mode="L")
    grid = grid.resize((grid.width * 2, grid.height * 2), Image.NEAREST)
    with atomic_path(path) as tmp:
        grid.save(tmp, format="PNG")
    return Path(path)


class SampleGrid(Callback):
    """After every epoch: a grid of samples from fixed noise to ``out/epoch_<k>.png`` and ``out/latest.png``."""

    def __init__(self, out: str | Path, n: int = 64, seed: int = 1234) -> None:
        self.out, self.n, self.seed = Path(out), n, seed
        self.written: list[Path] = []

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        images = self.model.generate(self.n, seed=self.seed)
        path = write_grid(images, self.out / f"epoch_{epoch + 1:03d}.png")
        write_grid(images, self.out / "latest.png")
        self.written.append(path)
        self.model.history.to_json(self.out / "history.json")


def load_data(n_train: int | None = None) -> np.ndarray:
    """MNIST subset training digits ``(n, 784)`` scaled to [-1, 1] (the first ``n_train``)."""
    (x, _), _ = load_mnist_subset()
    if n_train is not None:
        x = x[:n_train]
    return (x * 2.0 - 1.0).astype(np.float32)


def train(epochs: int = 5, n_train: int | None = None, batch_size: int = 64, out: str | Path = "out/dcgan_mnist",
          seed: int = 0, k: int = 1, progress: bool = False, epoch_lines: bool = False) -> tuple[GAN, Any]:
    """Build and train the DCGAN; returns ``(gan, history)`` (per epoch ``d_cost``, ``g_cost``).

    ``progress`` draws ``GAN.fit``'s tqdm bar over the batches; ``epoch_lines`` prints one line
    per epoch (``main`` always does: the log a non-terminal run leaves)."""
    x = load_data(n_train)
    data = ArrayIterator(x, batch_size=batch_size, lshape=(1, 28, 28), shuffle=True, seed=seed)
    set_seed(seed)  # the initial weights (drawn when fit builds the networks); the noise is seeded by GAN(seed)
    gan = GAN(generator(), discriminator(), noise_dim=NOISE_DIM, seed=seed)
    callbacks: list[Callback] = [SampleGrid(out)]
    if epoch_lines:
        callbacks.append(_EpochLog())
    history = gan.fit(data, epochs, Adam(LEARNING_RATE, beta_1=BETA_1, name="d_adam"),
                      Adam(LEARNING_RATE, beta_1=BETA_1, name="g_adam"), callbacks=callbacks, k=k, progress=progress)
    return gan, history


class _EpochLog(Callback):
    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        print(f"epoch {epoch + 1}: d_cost {logs['d_cost']:.4f}  g_cost {logs['g_cost']:.4f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--n-train", type=int, default=None, help="training digits (default: all 4,000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default="out/dcgan_mnist")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=1, help="discriminator steps per generator step")
    add_progress_flag(parser)
    args = parser.parse_args(argv)
    gan, _ = train(args.epochs, args.n_train, args.batch_size, args.out, args.seed, args.k,
                   progress=show_progress(args.progress), epoch_lines=True)
    gan.save_params(Path(args.out) / "dcgan_mnist.h5")
    print(f"wrote {args.out}/latest.png and {args.out}/dcgan_mnist.h5")


if __name__ == "__main__":
    main()
