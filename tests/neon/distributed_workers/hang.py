"""Worker: rank 1 stops taking steps mid-epoch (it hangs); rank 0's ``fit`` must fail with a timeout.

Run as ``NG_DIST_TIMEOUT=3 mpiexec -n 2 python hang.py OUT``. Rank 0 waits in the gradient
allreduce of its third step, raises ``DistributedTimeoutError`` after 3 s, and the excepthook
``init`` installed aborts the run (non-zero exit) instead of leaving it hanging. Rank 0 would
write ``OUT/rank0_finished`` only if its fit returned.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import mlp, problem  # noqa: E402

from neon import distributed  # noqa: E402
from neon.callbacks import Callback  # noqa: E402
from neon.costs import CrossEntropyMulti  # noqa: E402
from neon.data import ArrayIterator  # noqa: E402
from neon.optimizers import GradientDescentMomentum  # noqa: E402


class HangAfter(Callback):
    """On rank 1, sleeps far past the timeout after ``steps`` steps (a stuck rank)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict) -> None:
        if distributed.rank() == 1 and minibatch + 1 == self.steps:
            time.sleep(60)


def main(out: Path) -> None:
    distributed.init()
    X, y = problem(64)
    train = distributed.shard(ArrayIterator(X, y, nclass=3, batch_size=8, shuffle=True, seed=0))
    optimizer = distributed.DistributedOptimizer(GradientDescentMomentum(0.1))
    mlp(seed=0).fit(train, CrossEntropyMulti(), optimizer, num_epochs=1, callbacks=[HangAfter(2)], progress=False)
    (out / f"rank{distributed.rank()}_finished").write_text("fit returned\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
