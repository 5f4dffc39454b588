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

from harness import Step, blas_info, child_main

SEQ, BATCH, FEATURES, HIDDEN, CLASSES = 32, 32, 64, 256, 10
LR, MOMENTUM = 0.01, 0.9
STEPS, WARMUP = 50, 10


def make_weights(rng) -> dict:
    """Uniform(-1/sqrt(H), 1/sqrt(H)) weights in PyTorch's layout (gates r, z, n stacked); fc bias zero."""
    def uniform(shape, bound):
        return rng.uniform(-bound, bound, size=shape).astype("float32")

    k = HIDDEN ** -0.5
    return {"W_x": uniform((3 * HIDDEN, FEATURES), k), "W_h": uniform((3 * HIDDEN, HIDDEN), k),
            "b": uniform((3 * HIDDEN,), k), "b_h": uniform((3 * HIDDEN,), k), "fc_W": uniform((CLASSES, HIDDEN), k)}


def make_batch(rng):
    """A random sequence (SEQ, BATCH, FEATURES) (PyTorch's layout) and integer labels (BATCH,)."""
    return rng.standard_normal((SEQ, BATCH, FEATURES)).astype("float32"), rng.integers(0, CLASSES, size=BATCH)


def build_ngraph(threads: int, backend: str = "numpy") -> tuple[Step, str]:
    import numpy as np

    import ngraph_core as ng
    from neon.costs import CrossEntropyMulti
    from neon.layers import GRU, Affine
    from neon.optimizers import GradientDescentMomentum

    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    x, labels = make_batch(rng)
    F, REC, N = ng.make_axis(FEATURES, "F"), ng.make_axis(SEQ, "REC"), ng.make_axis(BATCH, "N")
    X, Y = ng.placeholder([F, REC, N], name="X"), ng.placeholder([ng.make_axis(CLASSES, "Y"), N], name="Y")
    gru, fc = GRU(HIDDEN), Affine(CLASSES, bias=0.0, activation="softmax")
    probs = fc(gru(X))
    loss = CrossEntropyMulti()(probs, Y)
    update = GradientDescentMomentum(LR, MOMENTUM)(loss, gru.trainable_variables + fc.trainable_variables)
    t = ng.transformers.make_transformer(backend)
    train = t.computation([loss, update], X, Y)
    cell = gru.cell
    for var, key in ((cell.W_x, "W_x"), (cell.W_h, "W_h"), (cell.b, "b"), (cell.b_h, "b_h"), (fc.linear.W, "fc_W")):
        t.write_variable(var, weights[key])
    x_ours = np.ascontiguousarray(np.transpose(x, (2, 0, 1)))  # (SEQ, N, F) -> [F, REC, N]
    targets = np.ascontiguousarray(np.eye(CLASSES, dtype="float32")[labels].T)
    return (lambda: train(x_ours, targets)[0]), f"ngraph_core {backend}, {blas_info()}"


def build_torch(threads: int, device: str = "cpu") -> tuple[Step, str]:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    x, labels = make_batch(rng)
    gru, fc = torch.nn.GRU(FEATURES, HIDDEN), torch.nn.Linear(HIDDEN, CLASSES)
    with torch.no_grad():  # the ngraph side's weights: same losses
        gru.weight_ih_l0.copy_(torch.from_numpy(weights["W_x"]))
        gru.weight_hh_l0.copy_(torch.from_numpy(weights["W_h"]))
        gru.bias_ih_l0.copy_(torch.from_numpy(weights["b"]))
        gru.bias_hh_l0.copy_(torch.from_numpy(weights["b_h"]))
        fc.weight.copy_(torch.from_numpy(weights["fc_W"]))
        fc.bias.zero_()
    gru, fc = gru.to(device), fc.to(device)
    cost = torch.nn.CrossEntropyLoss()
    params = [*gru.parameters(), *fc.parameters()]
    optimizer = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    x, labels = torch.from_numpy(x).to(device), torch.from_numpy(labels).to(device)

    def step() -> object:
        optimizer.zero_grad()
        _, h_n = gru(x)
        loss = cost(fc(h_n[0]), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


BUILDERS: dict[str, Callable[[int], tuple[Step, str]]] = {"ngraph": build_ngraph, "torch": build_torch}


def main() -> None:
    child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)


if __name__ == "__main__":
    main()
