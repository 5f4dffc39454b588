"""Training step of a GRU (issue 33): sequence 32, batch 32, input 64, hidden 256, fc to 10 classes.

The LSTM benchmark's model (``lstm_step.py``) with a GRU: softmax cross-entropy on the final hidden state, SGD
momentum 0.9, lr 0.01. Two sides, each timed in its own process by ``run.py``:

* ``ngraph``: neon ``GRU(256)`` over ``[F:64, REC:32, N:32]`` (``ng.scan``; gates ``r, z, n`` as
  ``torch.nn.GRU``, with its second bias ``b_h``), its final hidden state into ``Affine(10, Softmax)``,
  ``CrossEntropyMulti`` and ``GradientDescentMomentum``, one computation returning the loss and updating.
* ``torch``: ``nn.GRU(64, 256)`` + ``nn.Linear(256, 10)``, ``CrossEntropyLoss``, ``optim.SGD(momentum=0.9)``
  in PyTorch eager on CPU.

Both sides start from the same weights (drawn in PyTorch's layout and copied into ours) and see the same
batch, so their losses agree step by step (``BENCH_CHECK=1`` prints a side's first 5 losses).

Usage: ``python benchmarks/run.py gru_step --pairs 5 --threads 1 2``.
"""

from __future__ import annotations

from collections.abc import Callable

from harness import Step, child_main
from lstm_step import FEATURES, HIDDEN, make_batch, ngraph_step, torch_step

STEPS, WARMUP = 50, 10


def make_weights(rng) -> dict:
    """Uniform(-1/sqrt(H), 1/sqrt(H)) weights in PyTorch's layout (gates r, z, n stacked); fc bias zero."""
    from lstm_step import CLASSES

    def uniform(shape, bound):
        return rng.uniform(-bound, bound, size=shape).astype("float32")

    k = HIDDEN ** -0.5
    return {"W_x": uniform((3 * HIDDEN, FEATURES), k), "W_h": uniform((3 * HIDDEN, HIDDEN), k),
            "b": uniform((3 * HIDDEN,), k), "b_h": uniform((3 * HIDDEN,), k), "fc_W": uniform((CLASSES, HIDDEN), k)}


def build_ngraph(threads: int, backend: str = "numpy") -> tuple[Step, str]:
    import numpy as np

    from neon.layers import GRU

    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    return ngraph_step(GRU, weights, make_batch(rng), ("W_x", "W_h", "b", "b_h"), backend)


def build_torch(threads: int, device: str = "cpu") -> tuple[Step, str]:
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    return torch_step(threads, torch.nn.GRU(FEATURES, HIDDEN), (weights["b"], weights["b_h"]), weights,
                      make_batch(rng), device)


BUILDERS: dict[str, Callable[[int], tuple[Step, str]]] = {"ngraph": build_ngraph, "torch": build_torch}


def main() -> None:
    child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)


if __name__ == "__main__":
    main()
