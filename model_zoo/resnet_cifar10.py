"""ResNet-20/32/56 for CIFAR-10 (He et al. 2016, section 4.2), as functions and as a script.

The network (``resnet_cifar10``): a 3x3 convolution with 16 filters, batch norm and ReLU; three
stages of ``n`` basic blocks (two 3x3 conv-BN pairs and a shortcut) with 16, 32 and 64
channels, the first block of stages 2 and 3 striding by 2 (32x32 -> 16x16 -> 8x8); global
average pooling; ``Affine(10)`` with softmax. ``depth = 6n + 2``: 20, 32, 56 for n = 3, 5, 9.
Convolutions are drawn with He (Kaiming) normal init, as in the paper. With shortcut option
"A" (zero-padded identity, no parameters) ResNet-20 has 269,722 trainable parameters
("0.27M" in the paper's Table 6), ResNet-32 464,154 and ResNet-56 853,018.

The schedule (``paper_schedule``): the paper trains 64k iterations at batch 128 (about 182
epochs of its 45k training images) with SGD, momentum 0.9, weight decay 1e-4, and a learning
rate of 0.1 divided by 10 at 32k and 48k iterations — 50% and 75% of the run. A run of
``E`` epochs keeps those fractions: ``lr = 0.1`` (at batch 128) until epoch ``E // 2``,
``0.01`` until ``3E // 4``, then ``0.001`` (a drop that would land on epoch 0 is left out, so a
1-epoch run trains at the initial rate throughout). 182 epochs reproduce the paper's 91 / 136.

Data: with ``--data DIR`` (alias ``--data-dir``; the official ``cifar-10-batches-bin`` binary batches)
CIFAR-10 is read with ``load_cifar10``; without it the built-in generated shapes data set
(``make_shapes_dataset``: CIFAR-10's layout, 10 classes) is used, so the recipe runs out of the
box. Training images are augmented on the fly as in the paper: 4-pixel zero padding and a random
32x32 crop, a random horizontal flip, per-channel normalization (test images: normalization
with the training statistics only).

Small runs need steps, not epochs. ``--epochs 2 --n-train 512`` at the paper's batch 128 is 8
steps, the last 4 at lr 0.01 (the 50% drop lands on epoch 1); batch norm's running averages
(``rho`` 0.9, PyTorch's momentum 0.1) then still hold 0.9^8 = 43% of their initial mean 0 and
variance 1, so the test-time network, which normalizes with them, sits at chance (10-12%)
while the training cost falls (2.65 -> 2.00). ``SMALL_SETTINGS`` (3 epochs of 2,048 shapes
images at batch 64: 96 steps; 512 test images) reach 77-83% test accuracy over seeds 0-2 (83%
with seed 0) in 45 s on 2 cores (86 s of CPU time); ``--epochs 2 --n-train 512 --batch-size
32`` (32 steps, 12 s) 35-47%. A run of fewer than ``MIN_STEPS`` steps prints a note saying so.
The initial rate scales with the batch size (``scaled_learning_rate``: 0.1 at the paper's 128,
0.05 at 64): at 0.1, batch 64 diverged in the first epoch with seed 1 and ended at 34%.

Writes, under ``--out`` (default ``./out/resnet_cifar10``): ``resnet<depth>.h5`` (weights,
optimizer state, history: ``Model.load_params`` reads it), ``resnet<depth>_curve.png`` and
``resnet<depth>_history.csv``.

Distributed (``--distributed``, under ``mpiexec -n N``): data-parallel over MPI with
``neon.distributed``. Each rank trains on its own shard of the training set (and evaluates its
shard of the test set; the metrics are combined over the ranks), ``--batch-size`` is per rank, so
the global batch is ``N`` times larger and the default learning rate scales with it
(``scaled_learning_rate(N * batch)``); rank 0 prints and writes the files.

Usage:
    python -m model_zoo.resnet_cifar10 --depth 20 --epochs 182 --data ~/data/cifar-10-batches-bin
    python -m model_zoo.resnet_cifar10 --depth 20 --epochs 3 --n-train 2048 --n-test 512 --batch-size 64
    .venv/bin/mpiexec -n 2 .venv/bin/python -m model_zoo.resnet_cifar10 --distributed --epochs 3 --n-train 2048 \
        --n-test 512 --batch-size 32
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ngraph_core as ng
from neon import Sequential
from neon import distributed as dist
from neon.callbacks import Checkpoint, EpochPrinter, MetricHistory, TrainingCurve
from neon.costs import CrossEntropyMulti
from neon.data import ImageIterator, load_cifar10, make_shapes_dataset
from neon.initializers import Constant, Kaiming, set_seed
from neon.layers import Affine, Conv, GlobalAvgPool, ResidualBlock
from neon.metrics import Accuracy
from neon.model import Model
from neon.optimizers import GradientDescentMomentum, Schedule

from .progress import add_progress_flag, show_progress

DEPTHS = (20, 32, 56)
STAGE_CHANNELS = (16, 32, 64)
LEARNING_RATE, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 1e-4
PAPER_BATCH = 128  # LEARNING_RATE is the paper's rate at this batch size; others scale it linearly
DEFAULT_OUT = Path("out") / "resnet_cifar10"
# a small run that visibly learns on the built-in shapes set (module docstring; README; a slow test)
SMALL_SETTINGS: dict[str, int] = {"epochs": 3, "n_train": 2048, "n_test": 512, "batch_size": 64}
MIN_STEPS = 30  # fewer training steps leave batch norm's running averages near their initial values


def small_flags() -> str:
    """``SMALL_SETTINGS`` as command-line flags, as the module docstring and the README print them.

    Example:
        >>> small_flags()
        '--epochs 3 --n-train 2048 --n-test 512 --batch-size 64'
    """
    return " ".join(f"--{key.replace('_', '-')} {value}" for key, value in SMALL_SETTINGS.items())


class ResNetConfigError(ng.NgraphError, ValueError):
    """A ResNet recipe was asked for a configuration the paper does not define."""


def resnet_cifar10(depth: int = 20, shortcut: str = "A", nclass: int = 10, seed: int | None = None) -> Sequential:
    """He et al.'s CIFAR-10 ResNet of ``depth = 6n + 2`` layers (see the module docstring).

    Args:
        depth: 20, 32 or 56 (n = 3, 5, 9).
        shortcut: ``ResidualBlock``'s option: "A" (the paper's CIFAR choice, zero-padded
            identity), "B" (projection where the shape changes) or "C" (projection always).
        nclass: outputs of the final ``Affine`` (softmax).
        seed: seeds the shared initializer generator (``set_seed``) before the layers are
            built, so the same seed gives the same initial weights; None leaves it as it is.

    Returns:
        a ``Sequential`` taking images ``[C:3, H:32, W:32, N]`` to class probabilities ``[nclass, N]``.

    Raises:
        ResNetConfigError: a depth other than 20, 32 or 56, or a shortcut other than "A"/"B"/"C".

    Example:
        >>> net = resnet_cifar10(20)          # 269,722 parameters once built
        >>> model = Model(resnet_cifar10(56, shortcut="B"))
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth not in DEPTHS:
        raise ResNetConfigError(f"resnet_cifar10: expected depth to be one of {DEPTHS} (6n + 2 for n = 3, 5, 9), "
                                f"received {depth!r}; hint: the paper's CIFAR-10 ResNets are 20, 32 and 56 (and "
                                f"110) layers deep")
    if shortcut not in ("A", "B", "C"):
        raise ResNetConfigError(f"resnet_cifar10: expected shortcut 'A', 'B' or 'C', received {shortcut!r}; "
                                "hint: 'A' is the paper's parameter-free CIFAR-10 option")
    if seed is not None:
        set_seed(seed)
    n = (depth - 2) // 6
    init = Kaiming()  # He et al. 2015 normal init, std sqrt(2 / fan_in)
    layers: list[Any] = [Conv((3, 3, STAGE_CHANNELS[0]), padding=1, init=init, batch_norm=True, activation="relu")]
    for stage, nout in enumerate(STAGE_CHANNELS):
        for block in range(n):
            strides = 2 if stage > 0 and block == 0 else 1
            layers.append(ResidualBlock.basic(nout, strides=strides, shortcut=shortcut, init=init))
    layers += [GlobalAvgPool(), Affine(nclass, init=init, bias=Constant(0.0), activation="softmax")]
    return Sequential(layers, name=f"ResNet{depth}")


def paper_schedule(epochs: int) -> Schedule:
    """The paper's steps (lr / 10 at 50% and 75% of training) as epochs of a run of ``epochs``.

    Example:
        >>> paper_schedule(182).step_config  # the paper's 32k and 48k of 64k iterations
        [91, 136]
    """
    milestones = sorted({m for m in (epochs // 2, (3 * epochs) // 4) if m >= 1})
    return Schedule(milestones, change=0.1) if milestones else Schedule()


def scaled_learning_rate(batch_size: int) -> float:
    """The paper's initial rate for its batch of 128, scaled linearly to ``batch_size`` (Goyal et al. 2017).

    Small batches take more, noisier steps per epoch; at 0.1 a batch of 64 made the first epoch of
    a small run diverge (training cost above ln 10) in one of two seeds (module docstring).

    Example:
        >>> scaled_learning_rate(128), scaled_learning_rate(64)
        (0.1, 0.05)
    """
    return LEARNING_RATE * batch_size / PAPER_BATCH


def load_data(data_dir: str | Path | None, n_train: int | None = None, n_test: int | None = None,
              seed: int = 0) -> tuple[tuple[Any, Any], tuple[Any, Any], str]:
    """CIFAR-10 from ``data_dir`` (binary batches) or, with None, the generated shapes set.

    Args:
        data_dir: the ``cifar-10-batches-bin`` folder (or its parent), or None.
        n_train, n_test: keep only the first so many images (None: all; shapes default 5,000 / 1,000).
        seed: the shapes set's seed.

    Returns:
        ``(X_train, y_train), (X_test, y_test), description`` with uint8 images ``(n, 3, 32, 32)``.

    Raises:
        DataError: from ``load_cifar10`` (no binary batches there, truncated files...).
    """
    if data_dir is not None:
        (X, y), (Xt, yt) = load_cifar10(Path(data_dir).expanduser())
        X, y, Xt, yt = X[:n_train], y[:n_train], Xt[:n_test], yt[:n_test]
        return (X, y), (Xt, yt), f"CIFAR-10 from {data_dir}"
    (X, y), (Xt, yt) = make_shapes_dataset(n_train or 5000, n_test or 1000, seed=seed)
    return (X, y), (Xt, yt), "the built-in generated shapes data set (no --data given)"


@dataclass
class TrainResult:
    """What ``train`` returns: the trained model, its history, the test accuracy and the files written."""

    model: Model
    history: Any
    accuracy: float
    files: list[Path]


def train(depth: int = 20, epochs: int = 182, data_dir: str | Path | None = None, batch_size: int = 128,
          out: str | Path = DEFAULT_OUT, n_train: int | None = None, n_test: int | None = None,
          learning_rate: float | None = None, shortcut: str = "A", seed: int = 0,
          progress: bool = False, distributed: bool = False) -> TrainResult:
    """Train ``resnet_cifar10(depth)`` with the paper's recipe, evaluate it, save it and its curve.

    Args:
        depth: 20, 32 or 56.
        epochs: epochs to train; the learning-rate steps fall at 50% and 75% of them.
        data_dir: CIFAR-10 binary batches, or None for the built-in shapes set.
        batch_size: the paper's 128.
        out: the folder for ``resnet<depth>.h5``, ``_curve.png`` and ``_history.csv``.
        n_train, n_test: use only the first so many images (small runs, tests).
        learning_rate: the initial rate; None: ``scaled_learning_rate(batch_size)``, the paper's 0.1
            at its batch 128, scaled linearly with the batch size.
        shortcut: "A", "B" or "C".
        seed: seeds the weights, the data order and the augmentation.
        progress: show ``fit``'s progress bar as well as the per-epoch lines.
        distributed: data-parallel over MPI (run under ``mpiexec``): ``batch_size`` per rank, data
            sharded by rank, gradients averaged with ``DistributedOptimizer``; rank 0 prints and writes.

    A run of fewer than ``MIN_STEPS`` steps prints a note: its test accuracy will be near chance
    (see the module docstring).

    Returns:
        a ``TrainResult``.

    Raises:
        ResNetConfigError: a bad depth or shortcut; DataError: unreadable data.

    Example:
        >>> result = train(20, out="out/r20", **SMALL_SETTINGS)  # about a minute on 2 cores
        >>> result.accuracy  # 0.87
    """
    if distributed:
        dist.init()
    say = print if dist.is_writer() else (lambda *a, **k: None)  # rank 0 talks for everyone
    net = resnet_cifar10(depth, shortcut, seed=seed)
    (X, y), (Xt, yt), description = load_data(data_dir, n_train, n_test, seed)
    say(f"data: {description}: {len(X)} training and {len(Xt)} test images", flush=True)
    train_set = ImageIterator(X, y, nclass=10, batch_size=batch_size, shuffle=True, seed=seed, normalize=True,
                              crop_padding=4, flip=True)
    test_set = ImageIterator(Xt, yt, nclass=10, batch_size=min(500, len(Xt)), mean=train_set.mean,
                             std=train_set.std)
    if distributed:  # statistics above come from the whole set; each rank then takes its shard
        dist.shard(train_set)
        dist.shard(test_set)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"resnet{depth}"
    files = [out / f"{stem}.h5", out / f"{stem}_curve.png", out / f"{stem}_history.csv"]
    schedule = paper_schedule(epochs)
    learning_rate = scaled_learning_rate(batch_size * dist.size()) if learning_rate is None else learning_rate
    optimizer: Any = GradientDescentMomentum(learning_rate, momentum_coef=MOMENTUM, wdecay=WEIGHT_DECAY,
                                             schedule=schedule)
    ranks = f" per rank x {dist.size()} ranks" if distributed else ""
    if distributed:
        optimizer = dist.DistributedOptimizer(optimizer)
    say(f"ResNet-{depth} (shortcut {shortcut}), {epochs} epochs, batch {batch_size}{ranks}, SGD lr {learning_rate} "
        f"momentum {MOMENTUM} wdecay {WEIGHT_DECAY}, lr / 10 at epochs {schedule.step_config or []}", flush=True)
    steps = epochs * len(train_set)
    if 0 < steps < MIN_STEPS:
        say(f"note: {steps} training steps; batch norm's running averages need about {MIN_STEPS} to forget their "
            f"initial values, so expect a test accuracy near chance; hint: {small_flags()} learns in about a "
            "minute", flush=True)
    model = Model(net)
    callbacks = [EpochPrinter(), Checkpoint(files[0]), TrainingCurve(files[1], title=f"ResNet-{depth}: {description}"),
                 MetricHistory(csv_path=files[2])]
    history = model.fit(train_set, CrossEntropyMulti(), optimizer, num_epochs=epochs, valid_set=test_set,
                        metric=Accuracy(), callbacks=callbacks, progress=progress)
    accuracy = float(model.eval(test_set, Accuracy()))  # sharded: combined over the ranks
    if dist.is_writer():
        model.save_params(files[0])  # also when epochs == 0, where no checkpoint was written
    say(f"test accuracy: {100 * accuracy:.2f}%")
    say(f"saved {', '.join(str(f) for f in files if f.exists())}")
    return TrainResult(model, history, accuracy, files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=20, choices=DEPTHS)
    parser.add_argument("--epochs", type=int, default=182, help="182: the paper's 64k iterations at batch 128")
    parser.add_argument("--data", "--data-dir", dest="data", type=Path, default=None,
                        help="CIFAR-10 binary batches (cifar-10-batches-bin); none: the built-in shapes set")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=None,
                        help=f"the initial learning rate (default: {LEARNING_RATE} * batch size / {PAPER_BATCH})")
    parser.add_argument("--shortcut", choices=("A", "B", "C"), default="A")
    parser.add_argument("--n-train", type=int, default=None, help="use the first N training images")
    parser.add_argument("--n-test", type=int, default=None, help="use the first N test images")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel over MPI: run under mpiexec -n N (--batch-size is per rank)")
    add_progress_flag(parser)
    args = parser.parse_args(argv)
    train(args.depth, args.epochs, args.data, args.batch_size, args.out, args.n_train, args.n_test, args.lr,
          args.shortcut, args.seed, progress=show_progress(args.progress), distributed=args.distributed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
