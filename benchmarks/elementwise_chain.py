"""A chain of element-wise ops on 10M floats: ngraph's fused kernel against plain NumPy.

The expression is ``tanh(a * b + c) * 0.5 + exp(-|a|)`` (8 element-wise ops) over
three float32 vectors of 10M elements. Plain NumPy evaluates it op by op, writing a
full-size temporary each time; ngraph fuses the chain into one kernel evaluated in
cache-sized blocks (``ngraph_core/transformers/kernels/fused.py``). Both sides return
a fresh result array each call.

Run one side: ``python benchmarks/elementwise_chain.py --side ngraph --threads 1``;
both, alternating: ``python benchmarks/run.py elementwise_chain --pairs 5``.
"""

from __future__ import annotations

from harness import Step, child_main

SIDES = ("ngraph", "numpy")
SIZE = 10_000_000


def _inputs():
    import numpy as np

    rng = np.random.default_rng(0)
    return [rng.standard_normal(SIZE).astype(np.float32) for _ in range(3)]


def build_ngraph(threads: int) -> tuple[Step, str]:
    import os

    os.environ["NG_THREADS"] = str(threads)
    import ngraph_core as ng

    E = ng.make_axis(SIZE, name="E")
    a, b, c = (ng.placeholder([E], name=n) for n in "abc")
    y = ng.tanh(a * b + c) * 0.5 + ng.exp(-ng.abs(a))
    t = ng.transformers.make_transformer()
    f = t.computation(y, a, b, c)
    av, bv, cv = _inputs()
    return (lambda: f(av, bv, cv)), "ngraph fused (blocked numpy)"


def build_numpy(threads: int) -> tuple[Step, str]:
    import numpy as np

    av, bv, cv = _inputs()
    return (lambda: np.tanh(av * bv + cv) * 0.5 + np.exp(-np.abs(av))), "numpy " + np.__version__


if __name__ == "__main__":
    child_main({"ngraph": build_ngraph, "numpy": build_numpy}, __doc__.splitlines()[0])
