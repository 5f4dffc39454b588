"""Inference of ResNet-20 for CIFAR-10 (issue 5): batch ``RESNET_BATCH`` (default 64; the issue asks 1 and 64).

The network and weights of ``resnet_step.py`` (ResNet-20, option A, PyTorch's seeded He draws
copied into ours), batch norm in its inference form (running statistics), one forward pass
returning the class probabilities:

* ``ngraph``: ``model_zoo.resnet_cifar10(20)`` built under ``training_mode(False)`` and compiled
  by the NumPy transformer (where the compiler folds BN into the convolutions, it does so here).
* ``torch``: the same network in PyTorch, ``model.eval()`` under ``torch.inference_mode()``, with a
  softmax, as ours ends in one.

``run.py`` passes no options of its own, so the batch comes from the environment, which it
hands to each child (the backend column names it):

Usage:
    RESNET_BATCH=1 python benchmarks/run.py resnet_infer --pairs 3 --threads 1 2
    RESNET_BATCH=64 python benchmarks/run.py resnet_infer --pairs 3 --threads 1 2

``RESNET_INFER_CHECK=1`` prints a side's first 3 probabilities of the first image instead of
timing it (both sides agree).
"""

from __future__ import annotations

import os

from harness import Step, blas_info, child_main
from resnet_step import build_ngraph_network, make_batch, torch_resnet20

BATCH = int(os.environ.get("RESNET_BATCH", "64"))
STEPS, WARMUP = 30, 5


def build_ngraph(threads: int) -> tuple[Step, str]:
    import numpy as np

    X, out, _, t = build_ngraph_network(False, BATCH)
    infer = t.computation(out, X, mode="inference")
    x, _ = make_batch(np.random.default_rng(0), BATCH)
    x_ours = np.ascontiguousarray(np.moveaxis(x, 0, -1))  # (C, H, W, N)
    return (lambda: np.asarray(infer(x_ours)).T), f"ngraph_core numpy, {blas_info()}, batch {BATCH}"


def build_torch(threads: int) -> tuple[Step, str]:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, _, _ = torch_resnet20(torch)  # the same draws as resnet_step.reference_weights
    model.eval()
    x, _ = make_batch(np.random.default_rng(0), BATCH)
    x = torch.from_numpy(x)

    def step() -> object:
        with torch.inference_mode():
            return torch.softmax(model(x), dim=1)

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {BATCH}"


BUILDERS = {"ngraph": build_ngraph, "torch": build_torch}

if __name__ == "__main__":
    if os.environ.get("RESNET_INFER_CHECK") == "1":
        import sys

        side = sys.argv[sys.argv.index("--side") + 1]
        step, _ = BUILDERS[side](1)
        print(side, [round(float(p), 5) for p in step()[0][:3]])
    else:
        child_main(BUILDERS, __doc__.splitlines()[0])
