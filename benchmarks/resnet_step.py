"""Training step of ResNet-20 for CIFAR-10 (issue 5; target ours/PyTorch <= 1.3): batch 64 of 3x32x32.

The network is He et al.'s ResNet-20 with option-A shortcuts (269,722 parameters): conv3x3(16)-BN-
ReLU, 3 stages x 3 basic blocks (16/32/64 channels, strides 1/2/2), global average pool,
Affine(10). Softmax cross-entropy, SGD with momentum 0.9, lr 0.1, weight decay 1e-4. Two sides,
each timed in its own process by ``run.py`` (never both in one process):

* ``ngraph``: ``model_zoo.resnet_cifar10(20)`` (neon layers on ``[C, H, W, N]`` activations),
  ``CrossEntropyMulti`` and ``GradientDescentMomentum``, compiled by the NumPy transformer into
  one computation that returns the loss and performs the updates (the step alone, no
  ``Model.fit`` loop, as the PyTorch side).
* ``torch``: the same network written with ``nn.Conv2d``/``nn.BatchNorm2d`` (torchvision has no
  CIFAR ResNet and is not installed), eager on CPU, NCHW, ``optim.SGD(momentum=0.9,
  weight_decay=1e-4)``.

Both sides start from the same weights (PyTorch's He-normal draws copied into ours; BN eps 1e-3
as ours) and see the same batch, so their losses agree step by step (``RESNET_STEP_CHECK=1``
prints the first 5 losses of a side instead of timing it).

Usage: ``python benchmarks/run.py resnet_step --pairs 3 --threads 1 2``
(one process: ``python benchmarks/resnet_step.py --side torch --steps 3 --warmup 1``).
"""

from __future__ import annotations

import os

from harness import Step, blas_info, child_main

BATCH, LR, MOMENTUM, WDECAY, BN_EPS = 64, 0.1, 0.9, 1e-4, 1e-3
STEPS, WARMUP = 20, 3


def torch_resnet20(torch):
    """ResNet-20, option A, in PyTorch: the module and its conv/linear layers in our layers' order."""
    nn = torch.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout, eps=BN_EPS)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout, eps=BN_EPS)
            self.stride, self.pad = stride, cout - cin

        def forward(self, x):
            h = F.relu(self.bn1(self.conv1(x)))
            s = x if self.stride == 1 and not self.pad else \
                F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, 0, self.pad))  # option A
            return F.relu(self.bn2(self.conv2(h)) + s)

    stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
    blocks, cin = [], 16
    for stage, cout in enumerate((16, 32, 64)):
        for i in range(3):
            blocks.append(Block(cin, cout, 2 if stage and not i else 1))
            cin = cout
    fc = nn.Linear(64, 10)
    model = nn.Sequential(stem, nn.BatchNorm2d(16, eps=BN_EPS), nn.ReLU(), *blocks, nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), fc)
    convs = [stem] + [c for b in blocks for c in (b.conv1, b.conv2)]
    for conv in convs:
        nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
    return model, convs, fc


def make_batch(rng, batch: int = BATCH):
    """Random images (batch, 3, 32, 32) and integer labels."""
    return rng.standard_normal((batch, 3, 32, 32)).astype("float32"), rng.integers(0, 10, size=batch)


def reference_weights() -> tuple[list, object, object]:
    """PyTorch's seeded draws: conv filters ``(K, C, R, S)``, the linear weight ``(10, 64)`` and bias.

    Drawn in a child process (``--write-weights``) and read back from an ``.npz`` without pickle,
    so that our side's process never imports torch: torch's ~200 MiB counted in our peak RSS
    (430 MiB of it, 2026-11-25), and its thread pool shared our cores.
    """
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import numpy as np

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "weights.npz"
        subprocess.run([sys.executable, __file__, "--write-weights", str(path)], check=True)
        with np.load(path, allow_pickle=False) as f:
            count = sum(1 for name in f.files if name.startswith("conv"))
            return [f[f"conv{i}"] for i in range(count)], f["fc_w"], f["fc_b"]


def write_reference_weights(path: str) -> None:
    """Draw the weights with PyTorch (seed 0) and save them to ``path`` (an ``.npz``)."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    _, convs, fc = torch_resnet20(torch)
    arrays = {f"conv{i}": c.weight.detach().numpy() for i, c in enumerate(convs)}
    np.savez(path, fc_w=fc.weight.detach().numpy(), fc_b=fc.bias.detach().numpy(), **arrays)


def build_ngraph_network(training: bool, batch: int, backend: str = "numpy"):
    """Our ResNet-20 on a placeholder ``[C, H, W, N]``, with PyTorch's weights: (X, output, net, transformer)."""
    import numpy as np

    import ngraph_core as ng
    from model_zoo.resnet_cifar10 import resnet_cifar10
    from neon.layers import Conv, ResidualBlock, training_mode

    net = resnet_cifar10(20, seed=0)
    axes = [ng.make_axis(n, name) for n, name in zip((3, 32, 32, batch), ("C", "H", "W", "N"))]
    X = ng.placeholder(axes, name="X")
    with training_mode(training):
        out = net(X)
    convs = [layer for item in net.layers for layer in (item.branch if isinstance(item, ResidualBlock) else [item])
             if isinstance(layer, Conv)]
    t = ng.transformers.make_transformer(backend)
    if os.environ.get("RESNET_STEP_OWN_WEIGHTS") == "1":  # compiler.py's first-step figure: no torch
        return X, out, net, t
    filters, fc_w, fc_b = reference_weights()
    for conv, w in zip(convs, filters, strict=True):
        t.write_variable(conv.filter.W, np.moveaxis(w, 0, -1))  # (K, C, R, S) -> [C, R, S, K]
    affine = net.layers[-1]
    t.write_variable(affine.linear.W, fc_w)
    t.write_variable(affine.bias.b, fc_b)
    return X, out, net, t


def training_graph(batch: int = BATCH, backend: str = "numpy") -> tuple[list, list, object]:
    """The training step's graph: ``([loss, update], [X, Y], transformer holding PyTorch's weights)``."""
    import ngraph_core as ng
    from neon.costs import CrossEntropyMulti
    from neon.optimizers import GradientDescentMomentum

    X, out, net, t = build_ngraph_network(True, batch, backend)
    Y = ng.placeholder([ng.make_axis(10, "Y"), X.axes[-1]], name="Y")
    loss = CrossEntropyMulti()(out, Y)
    update = GradientDescentMomentum(LR, MOMENTUM, wdecay=WDECAY)(loss, net.trainable_variables)
    return [loss, update], [X, Y], t


def build_ngraph(threads: int, backend: str = "numpy") -> tuple[Step, str]:
    import numpy as np

    results, inputs, t = training_graph(backend=backend)
    train = t.computation(results, *inputs)
    x, labels = make_batch(np.random.default_rng(0))
    x_ours = np.ascontiguousarray(np.moveaxis(x, 0, -1))  # (C, H, W, N), as ImageIterator yields
    targets = np.ascontiguousarray(np.eye(10, dtype="float32")[labels].T)
    return (lambda: train(x_ours, targets)[0]), f"ngraph_core {backend}, {blas_info()}"


def build_torch(threads: int, device: str = "cpu") -> tuple[Step, str]:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, _, _ = torch_resnet20(torch)  # the same draws as reference_weights
    model = model.to(device)
    cost = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WDECAY)
    x, labels = make_batch(np.random.default_rng(0))
    x, labels = torch.from_numpy(x).to(device), torch.from_numpy(labels).to(device)
    model.train()

    def step() -> object:
        optimizer.zero_grad()
        loss = cost(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


BUILDERS = {"ngraph": build_ngraph, "torch": build_torch}

if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--write-weights"]:
        write_reference_weights(sys.argv[2])
    elif os.environ.get("RESNET_STEP_CHECK") == "1":
        side = sys.argv[sys.argv.index("--side") + 1]
        step, _ = BUILDERS[side](1)
        print(side, [round(float(step()), 4) for _ in range(5)])
    else:
        child_main(BUILDERS, __doc__.splitlines()[0])
