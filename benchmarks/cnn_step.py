"""Training step of the small CIFAR CNN (issue 5): conv3x3(32)-relu-pool-conv3x3(64)-relu-pool-fc256-fc10.

Batch 64 of 3x32x32 images, softmax cross-entropy, SGD momentum 0.9, lr 0.01. Two sides,
each timed in its own process by ``run.py`` (never both in one process):

* ``ngraph``: neon layers (``Conv``, ``Pool``, ``Affine``) on ``[C, H, W, N]`` activations,
  ``CrossEntropyMulti`` and ``GradientDescentMomentum``, compiled by the NumPy transformer
  into one computation that returns the loss and performs the updates (no ``Model.fit``
  loop: the step alone, as the PyTorch side).
* ``torch``: the same model in PyTorch eager on CPU (``nn.Conv2d``, ``nn.MaxPool2d``,
  ``nn.Linear``, ``CrossEntropyLoss``, ``optim.SGD(momentum=0.9)``), NCHW.

Both sides start from the same weights (drawn in PyTorch's layout, copied into ours) and
see the same batch, so their losses agree step by step (``CNN_STEP_CHECK=1`` prints the
first 5 losses of a side instead of timing it).

Usage: ``python benchmarks/run.py cnn_step --pairs 3 --threads 1 2``.
"""

from __future__ import annotations

import os

from harness import Step, blas_info, child_main

BATCH, LR, MOMENTUM = 64, 0.01, 0.9
STEPS, WARMUP = 50, 10


def make_weights(rng) -> dict:
    """Glorot-uniform weights in PyTorch's layout (Conv2d ``(K, C, R, S)``, Linear ``(out, in)``), zero biases."""
    def glorot(shape, fan_in, fan_out):
        limit = (6.0 / (fan_in + fan_out)) ** 0.5
        return rng.uniform(-limit, limit, size=shape).astype("float32")

    return {"conv1": glorot((32, 3, 3, 3), 27, 288), "conv2": glorot((64, 32, 3, 3), 288, 576),
            "fc1": glorot((256, 64 * 8 * 8), 4096, 256), "fc2": glorot((10, 256), 256, 10)}


def make_batch(rng):
    """Random images (BATCH, 3, 32, 32) and integer labels."""
    return rng.standard_normal((BATCH, 3, 32, 32)).astype("float32"), rng.integers(0, 10, size=BATCH)


def build_ngraph(threads: int) -> tuple[Step, str]:
    import numpy as np

    import ngraph_core as ng
    from neon.costs import CrossEntropyMulti
    from neon.layers import Affine, Conv, Pool, training_mode
    from neon.optimizers import GradientDescentMomentum

    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    x, labels = make_batch(rng)
    conv1 = Conv((3, 3, 32), padding=1, bias=0.0, activation="relu")
    conv2 = Conv((3, 3, 64), padding=1, bias=0.0, activation="relu")
    fc1, fc2 = Affine(256, bias=0.0, activation="relu"), Affine(10, bias=0.0, activation="softmax")
    layers = [conv1, Pool(2), conv2, Pool(2), fc1, fc2]
    axes = [ng.make_axis(n, name) for n, name in zip((3, 32, 32, BATCH), ("C", "H", "W", "N"))]
    X, Y = ng.placeholder(axes, name="X"), ng.placeholder([ng.make_axis(10, "Y"), axes[-1]], name="Y")
    h = X
    with training_mode(True):
        for layer in layers:
            h = layer(h)
    loss = CrossEntropyMulti()(h, Y)
    update = GradientDescentMomentum(LR, MOMENTUM)(loss, [v for layer in layers for v in layer.trainable_variables])
    t = ng.transformers.make_transformer()
    train = t.computation([loss, update], X, Y)
    # PyTorch's layouts into ours: filters (K, C, R, S) -> [C, R, S, K]; fc1 (256, 4096) -> [256, C, H, W]
    t.write_variable(conv1.filter.W, np.moveaxis(weights["conv1"], 0, -1))
    t.write_variable(conv2.filter.W, np.moveaxis(weights["conv2"], 0, -1))
    t.write_variable(fc1.linear.W, weights["fc1"].reshape(256, 64, 8, 8))
    t.write_variable(fc2.linear.W, weights["fc2"])
    x_ours = np.ascontiguousarray(np.moveaxis(x, 0, -1))  # (C, H, W, N), as ImageIterator yields
    targets = np.ascontiguousarray(np.eye(10, dtype="float32")[labels].T)
    return (lambda: train(x_ours, targets)[0]), f"ngraph_core numpy, {blas_info()}"


def build_torch(threads: int) -> tuple[Step, str]:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10))
    with torch.no_grad():  # the ngraph side's weights: same losses
        for module, key in zip((model[0], model[3], model[7], model[9]), ("conv1", "conv2", "fc1", "fc2")):
            module.weight.copy_(torch.from_numpy(weights[key]))
            module.bias.zero_()
    cost = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x, labels = make_batch(rng)
    x, labels = torch.from_numpy(x), torch.from_numpy(labels)

    def step() -> object:
        optimizer.zero_grad()
        loss = cost(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    if os.environ.get("CNN_STEP_CHECK") == "1":
        import sys

        side = sys.argv[sys.argv.index("--side") + 1]
        step, _ = {"ngraph": build_ngraph, "torch": build_torch}[side](1)
        print(side, [round(float(step()), 4) for _ in range(5)])
    else:
        child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0])
