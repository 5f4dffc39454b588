"""The GEMMs of one MLP training step (``mlp_step.py``: 784-512-512-10, batch 128), alone: BLAS against BLAS.

Where ``mlp_step`` goes: nearly all of a step is these five products (forward: three; backward:
the weight gradients of the three layers and the data gradients of the top two, as the step
computes them). Timing them alone says how much of the step's ratio is the BLAS itself.

Sides, each timed in its own process by ``run.py``:

* ``ngraph``: ``runtime.matmul`` on NumPy arrays, as our ``dot`` kernel calls it (OpenBLAS at one
  thread, the product split over ``NG_THREADS`` workers when it is big enough);
* ``torch``: ``torch.mm(..., out=...)`` with ``torch.set_num_threads``.

Usage: ``python benchmarks/run.py mlp_gemms --pairs 5 --threads 1 2``.
"""

from __future__ import annotations

from itertools import pairwise

from harness import Step, blas_info, child_main

SIZES = (784, 512, 512, 10)
BATCH = 128
STEPS, WARMUP = 200, 20


def shapes() -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``(a shape, b shape)`` of each product of a step: ``W x`` per layer, ``dY xᵀ`` per layer, ``Wᵀ dY``
    for the layers above the first."""
    found = []
    for n_in, n_out in pairwise(SIZES):
        found.append(((n_out, n_in), (n_in, BATCH)))  # forward
        found.append(((n_out, BATCH), (BATCH, n_in)))  # weight gradient
    for n_in, n_out in list(pairwise(SIZES))[1:]:
        found.append(((n_in, n_out), (n_out, BATCH)))  # data gradient
    return found


def build_ngraph(threads: int) -> tuple[Step, str]:
    import numpy as np

    from ngraph_core.transformers.numpy import runtime

    runtime.own_cores()
    rng = np.random.default_rng(0)
    products = [(rng.standard_normal(a).astype("float32"), rng.standard_normal(b).astype("float32"),
                 np.empty((a[0], b[1]), "float32")) for a, b in shapes()]

    def step() -> object:
        for a, b, out in products:
            runtime.matmul(a, b, out)
        return products[0][2]

    return step, f"runtime.matmul, {blas_info()}, {runtime.threads()} workers"


def build_torch(threads: int) -> tuple[Step, str]:
    import torch

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    products = [(torch.randn(a, generator=gen), torch.randn(b, generator=gen), torch.empty(a[0], b[1]))
                for a, b in shapes()]

    def step() -> object:
        for a, b, out in products:
            torch.mm(a, b, out=out)
        return products[0][2]

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0])
