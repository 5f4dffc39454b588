"""Worker: train the MLP for a few steps with ``DistributedOptimizer``, saving the state after every step.

Run as ``mpiexec -n 2 python train_steps.py OUT BATCH``: each rank builds the model from its *own*
seed (so ``fit``'s initial broadcast is what makes them equal), shards a shuffled data set and
trains two epochs with SGD (momentum, global-norm clipping) and then with Adam, writing
``OUT/<optimizer>_rank<r>.npz`` with the weights and optimizer state after every step. The tests
import ``run`` for the single-process reference (rank 0's seed, the global batch).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import mlp, problem, save_arrays, snapshot  # noqa: E402

from neon import distributed  # noqa: E402
from neon.callbacks import Callback  # noqa: E402
from neon.costs import CrossEntropyMulti  # noqa: E402
from neon.data import ArrayIterator  # noqa: E402
from neon.optimizers import Adam, GradientDescentMomentum  # noqa: E402

NDATA, EPOCHS = 60, 2
OPTIMIZERS = {
    # a clip small enough to act: the averaged gradient's norm decides, as with one process
    "sgd": lambda: GradientDescentMomentum(0.2, momentum_coef=0.9, gradient_clip_norm=0.5, wdecay=1e-3),
    "adam": lambda: Adam(0.01),
}


class StepRecorder(Callback):
    """Keeps the model's weights and optimizer state after every step (and before the first)."""

    def __init__(self) -> None:
        self.arrays: dict[str, object] = {}
        self.steps = 0

    def on_train_begin(self, logs: dict) -> None:
        self.arrays.update({f"start|{k}": v for k, v in snapshot(self.model).items()})

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict) -> None:
        self.steps += 1
        self.arrays.update({f"step{self.steps}|{k}": v for k, v in snapshot(self.model).items()})


def run(name: str, batch_size: int, seed: int, sharded: bool) -> dict[str, object]:
    """Train two epochs with optimizer ``name``; the arrays after every step."""
    X, y = problem(NDATA)
    train = ArrayIterator(X, y, nclass=3, batch_size=batch_size, shuffle=True, seed=11)
    if sharded:
        distributed.shard(train)
    model = mlp(seed)
    recorder = StepRecorder()
    optimizer = distributed.DistributedOptimizer(OPTIMIZERS[name]())
    model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=EPOCHS, callbacks=[recorder], progress=False)
    return {**recorder.arrays, "steps": recorder.steps}


def main(out: Path, batch_size: int) -> None:
    distributed.init()
    for name in OPTIMIZERS:
        arrays = run(name, batch_size, seed=100 + 7 * distributed.rank(), sharded=True)
        save_arrays(out / f"{name}_rank{distributed.rank()}.npz", arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
