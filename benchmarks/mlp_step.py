"""Training step of an MLP 784-512-512-10 (ReLU, softmax cross-entropy, batch 128, SGD momentum 0.9, lr 0.01).

Two sides, each timed in its own process by ``run.py`` (never both in one process):

* ``ngraph``: built directly with ``ng`` ops over named axes and compiled by the NumPy
  transformer; one computation returns the loss and performs the momentum updates.
* ``torch``: the same model in PyTorch eager on CPU (``nn.Linear``, ``CrossEntropyLoss``,
  ``optim.SGD(momentum=0.9)``).

Both sides start from the same Glorot weights and see the same batch, so their losses agree
step by step (2.6319, 1.8054, 0.8813, ... every 5 steps), a check that they do the same work.

Run one side: ``python benchmarks/mlp_step.py --side ngraph --threads 1`` prints one JSON
line with the median step time after warmup.
"""

from __future__ import annotations

from itertools import pairwise

from harness import Step, blas_info, child_main

SIZES = (784, 512, 512, 10)
BATCH, LR, MOMENTUM = 128, 0.01, 0.9


def glorot(rng, fan_out: int, fan_in: int):
    """Glorot-uniform weights of shape (fan_out, fan_in), as nn.Linear stores them."""
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    return rng.uniform(-limit, limit, size=(fan_out, fan_in)).astype("float32")


def make_batch(rng):
    """Random inputs (BATCH, 784) and integer labels: the step's cost does not depend on the values."""
    return rng.standard_normal((BATCH, SIZES[0])).astype("float32"), rng.integers(0, SIZES[-1], size=BATCH)


def build_graph(rng):
    """The ngraph model: (loss, update, logits, X, T), weights drawn from ``rng`` (same order as torch)."""
    import ngraph_core as ng

    F, H1, H2, Y = (ng.make_axis(n, name) for n, name in zip(SIZES, ("F", "H1", "H2", "Y"), strict=True))
    N = ng.make_axis(BATCH, name="N")
    X = ng.placeholder([F, N], name="X")
    T = ng.placeholder([Y, N], name="T")  # one-hot targets

    params = []
    h = X
    for i, (fan_in, fan_out) in enumerate(pairwise((F, H1, H2, Y))):
        W = ng.variable([fan_out, fan_in], initial_value=glorot(rng, fan_out.length, fan_in.length), name=f"W{i}")
        b = ng.variable([fan_out], initial_value=0.0, name=f"b{i}")
        params += [W, b]
        h = ng.dot(W, h) + b  # [fan_out, N]
        if fan_out is not Y:
            h = ng.relu(h)
    loss = ng.cross_entropy_multi(ng.softmax(h), T) / ng.batch_size(h)

    grads = ng.gradients(loss, params)
    updates = []
    for p, g in zip(params, grads, strict=True):
        v = ng.variable(p.axes, initial_value=0.0, name=f"v_{p.name}")
        updates.append(ng.assign(p, p + ng.assign(v, MOMENTUM * v - LR * g)))

    return loss, ng.doall(updates), h, X, T


def build_ngraph(threads: int, backend: str = "numpy") -> tuple[Step, str]:
    import numpy as np

    import ngraph_core as ng

    rng = np.random.default_rng(0)
    loss, update, _, X, T = build_graph(rng)
    t = ng.transformers.make_transformer(backend)
    train = t.computation([loss, update], X, T)
    x, labels = make_batch(rng)
    xT, targets = np.ascontiguousarray(x.T), np.eye(SIZES[-1], dtype="float32")[labels].T.copy()
    return (lambda: train(xT, targets)), f"ngraph_core {backend}, {blas_info()}"


def build_torch(threads: int, device: str = "cpu") -> tuple[Step, str]:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    layers = []
    for fan_in, fan_out in pairwise(SIZES):
        linear = torch.nn.Linear(fan_in, fan_out)
        with torch.no_grad():  # the ngraph side's weights, drawn in the same order: same losses
            linear.weight.copy_(torch.from_numpy(glorot(rng, fan_out, fan_in)))
            linear.bias.zero_()
        layers += [linear, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(device)
    cost = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x, labels = make_batch(rng)
    x, labels = torch.from_numpy(x).to(device), torch.from_numpy(labels).to(device)

    def step() -> object:
        optimizer.zero_grad()
        loss = cost(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0])
