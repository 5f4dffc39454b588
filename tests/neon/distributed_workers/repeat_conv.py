"""Worker: a short data-parallel training of a small convolutional net, for run-to-run reproducibility.

Run as ``mpiexec -n 2 python repeat_conv.py OUT``: each rank trains two epochs (batch-norm
convolutions that have a Winograd and an im2col kernel, augmented images, sharded, momentum
SGD) and writes ``OUT/rank<r>.npz``: the weights and optimizer state, the cost of every step,
the epoch history, how many convolution kernels this process chose by timing (``timed``:
a run of several ranks must time none; each run starts from an empty record of measured
choices, in OUT, as on a fresh machine) and its thread settings (``threads``: our workers,
``blas``: BLAS's). The tests launch it twice and compare the two runs bit for bit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import save_arrays, snapshot  # noqa: E402
from threadpoolctl import threadpool_info  # noqa: E402

from neon import Sequential, distributed  # noqa: E402
from neon.callbacks import Callback  # noqa: E402
from neon.costs import CrossEntropyMulti  # noqa: E402
from neon.data import ImageIterator  # noqa: E402
from neon.initializers import Constant, Kaiming, set_seed  # noqa: E402
from neon.layers import Affine, Conv, GlobalAvgPool  # noqa: E402
from neon.model import Model  # noqa: E402
from neon.optimizers import GradientDescentMomentum  # noqa: E402
from ngraph_core.transformers.numpy import conv_choice, runtime  # noqa: E402

NDATA, NCLASS, EPOCHS, BATCH = 64, 4, 2, 8


class CostRecorder(Callback):
    """The cost of every step, as ``fit`` reports it."""

    def __init__(self) -> None:
        self.costs: list[float] = []

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict) -> None:
        self.costs.append(float(logs["cost"]))


def main(out: Path) -> None:
    conv_choice.choices_path = lambda: out / "conv_choices.json"  # an empty record, as on a fresh machine
    distributed.init()
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (NDATA, 3, 12, 12), dtype=np.uint8)
    y = (X[:, 0].mean(axis=(1, 2)) // 64).astype(np.int64) % NCLASS  # the red channel's brightness
    train = distributed.shard(ImageIterator(X, y, nclass=NCLASS, batch_size=BATCH, shuffle=True, seed=5,
                                            normalize=True, crop_padding=2, flip=True))
    set_seed(7)
    net = Sequential([Conv((3, 3, 8), padding=1, init=Kaiming(), batch_norm=True, activation="relu"),
                      Conv((3, 3, 8), padding=1, init=Kaiming(), batch_norm=True, activation="relu"),
                      GlobalAvgPool(), Affine(NCLASS, init=Kaiming(), bias=Constant(0.0), activation="softmax")])
    model, recorder = Model(net), CostRecorder()
    optimizer = distributed.DistributedOptimizer(GradientDescentMomentum(0.05, momentum_coef=0.9, wdecay=1e-4))
    history = model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=EPOCHS, callbacks=[recorder],
                        progress=False)
    blas = [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]
    save_arrays(out / f"rank{distributed.rank()}.npz", {
        **snapshot(model), "costs": np.array(recorder.costs), "train_cost": np.array(history["train_cost"]),
        "timed": len(conv_choice._DECIDED), "threads": runtime.threads(), "blas": np.array(blas)})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
