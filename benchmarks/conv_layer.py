"""One convolution layer's forward + backward: the small CNN's first conv (batch 64, 3x32x32 -> 32, 3x3, pad 1).

Two sides, each timed in its own process by ``run.py``:

* ``ngraph``: ``ng.convolution`` on ``[C, H, W, N]`` activations, compiled by the NumPy
  transformer; one computation returns the output and the filter gradient for a fed
  output gradient (and the data gradient too with ``CONV_LAYER_DX=1``).
* ``torch``: ``F.conv2d`` on NCHW in PyTorch eager, then ``y.backward(dy)`` (with the input
  requiring a gradient when ``CONV_LAYER_DX=1``). A few no-grad forwards first: they put
  the process's allocator in the state where a step takes ~2 ms; without them the same loop
  measured 9-13 ms a step (2026-11-24), so this side is PyTorch at its best.

The first layer of a network needs no data gradient (its input is the data): that is the
default. ``CONV_LAYER_SHAPE=C,H,K`` measures another layer, e.g. ``32,16,64`` (the second conv),
and ``CONV_LAYER_WINDOW=F,S,P`` another filter size, stride and padding (default ``3,1,1``), e.g.
``CONV_LAYER_SHAPE=64,14,128 CONV_LAYER_WINDOW=4,2,1 CONV_LAYER_DX=1``: DCGAN's discriminator conv
(whose data gradient is also the shape of the generator's transposed convolution).

Usage: ``python benchmarks/run.py conv_layer --pairs 5 --threads 1 2``.
"""

from __future__ import annotations

import os

from harness import Step, blas_info, child_main

BATCH = 64
C, H, K = (int(v) for v in os.environ.get("CONV_LAYER_SHAPE", "3,32,32").split(","))
F, S, P = (int(v) for v in os.environ.get("CONV_LAYER_WINDOW", "3,1,1").split(","))
WITH_DX = os.environ.get("CONV_LAYER_DX", "0") == "1"
STEPS, WARMUP = 50, 10


def build_ngraph(threads: int) -> tuple[Step, str]:
    import numpy as np

    import ngraph_core as ng

    rng = np.random.default_rng(0)
    Ca, Ha, Wa, Na = ng.make_axis(C, "C"), ng.make_axis(H, "H"), ng.make_axis(H, "W"), ng.make_axis(BATCH, "N")
    w = ng.variable([Ca, ng.make_axis(F, "R"), ng.make_axis(F, "S"), ng.make_axis(K, "K")],
                    initial_value=rng.normal(0, 0.1, (C, F, F, K)))
    x_value = rng.standard_normal((C, H, H, BATCH)).astype("float32")
    x = ng.variable([Ca, Ha, Wa, Na], initial_value=x_value) if WITH_DX else ng.placeholder([Ca, Ha, Wa, Na])
    y = ng.convolution(x, w, strides=S, padding=P)
    dy = ng.placeholder(y.axes)
    grads = ng.gradients(y, [w, x] if WITH_DX else [w], error=dy)
    t = ng.transformers.make_transformer()
    dy_value = rng.standard_normal(y.axes.lengths).astype("float32")
    if WITH_DX:
        f = t.computation([y, *grads], dy)
        return (lambda: f(dy_value)), f"ngraph_core numpy, {blas_info()}"
    f = t.computation([y, *grads], x, dy)
    return (lambda: f(x_value, dy_value)), f"ngraph_core numpy, {blas_info()}"


def build_torch(threads: int) -> tuple[Step, str]:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.randn(BATCH, C, H, H, requires_grad=WITH_DX)
    w = torch.randn(K, C, F, F, requires_grad=True)
    out = (H + 2 * P - F) // S + 1
    dy = torch.randn(BATCH, K, out, out)
    with torch.no_grad():
        for _ in range(10):
            torch.nn.functional.conv2d(x, w, stride=S, padding=P)

    def step() -> object:
        w.grad = None
        if WITH_DX:
            x.grad = None
        y = torch.nn.functional.conv2d(x, w, stride=S, padding=P)
        y.backward(dy)
        return y

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0])
