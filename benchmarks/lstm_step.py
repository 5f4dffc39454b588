"""Training step of an LSTM (issue 10): sequence 32, batch 32, input 64, hidden 256, fc to 10 classes.

Softmax cross-entropy on the final hidden state, SGD momentum 0.9, lr 0.01. Two sides, each
timed in its own process by ``run.py`` (never both in one process):

* ``ngraph``: neon ``LSTM(256)`` over ``[F:64, REC:32, N:32]`` (``ng.scan``: one body graph,
  one dot per step for all four gates, the input projection hoisted out of the loop), its
  final hidden state into ``Affine(10, Softmax)``, ``CrossEntropyMulti`` and
  ``GradientDescentMomentum``, compiled by the NumPy transformer into one computation that
  returns the loss and performs the updates (no ``Model.fit`` loop: the step alone).
* ``torch``: ``nn.LSTM(64, 256)`` + ``nn.Linear(256, 10)``, ``CrossEntropyLoss``,
  ``optim.SGD(momentum=0.9)`` in PyTorch eager on CPU.

Both sides start from the same weights (drawn in PyTorch's layout, copied into ours; torch's
``b_hh`` is zero since our LSTM has one bias) and see the same batch, so their losses agree
step by step (``BENCH_CHECK=1`` prints the first 5 losses of a side instead of timing it).
Each side reports its peak RSS (``ru_maxrss``) after the timed steps.

Usage: ``python benchmarks/run.py lstm_step --pairs 5 --threads 1 2``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness import Step, blas_info, child_main

SEQ, BATCH, FEATURES, HIDDEN, CLASSES = 32, 32, 64, 256, 10
LR, MOMENTUM = 0.01, 0.9
STEPS, WARMUP = 50, 10


def make_weights(rng) -> dict:
    """Uniform(-1/sqrt(H), 1/sqrt(H)) weights in PyTorch's layout (gates i, f, g, o stacked); fc bias zero."""
    def uniform(shape, bound):
        return rng.uniform(-bound, bound, size=shape).astype("float32")

    k = HIDDEN ** -0.5
    return {"W_x": uniform((4 * HIDDEN, FEATURES), k), "W_h": uniform((4 * HIDDEN, HIDDEN), k),
            "b": uniform((4 * HIDDEN,), k), "fc_W": uniform((CLASSES, HIDDEN), k)}


def make_batch(rng):
    """A random sequence (SEQ, BATCH, FEATURES) (PyTorch's layout) and integer labels (BATCH,)."""
    return rng.standard_normal((SEQ, BATCH, FEATURES)).astype("float32"), rng.integers(0, CLASSES, size=BATCH)


def ngraph_step(layer_class: type, weights: dict, batch: tuple, keys: tuple[str, ...], backend: str = "numpy"
                ) -> tuple[Step, str]:
    """The training step of ``layer_class(HIDDEN)`` (neon's ``LSTM`` or ``GRU``) + ``Affine(10, Softmax)`` on
    ``batch`` (``make_batch``'s), its cell's variables named ``keys`` written from ``weights`` (and ``fc_W``)."""
    import numpy as np

    import ngraph_core as ng
    from neon.costs import CrossEntropyMulti
    from neon.layers import Affine
    from neon.optimizers import GradientDescentMomentum

    x, labels = batch
    F, REC, N = ng.make_axis(FEATURES, "F"), ng.make_axis(SEQ, "REC"), ng.make_axis(BATCH, "N")
    X, Y = ng.placeholder([F, REC, N], name="X"), ng.placeholder([ng.make_axis(CLASSES, "Y"), N], name="Y")
    rnn, fc = layer_class(HIDDEN), Affine(CLASSES, bias=0.0, activation="softmax")
    probs = fc(rnn(X))
    loss = CrossEntropyMulti()(probs, Y)
    update = GradientDescentMomentum(LR, MOMENTUM)(loss, rnn.trainable_variables + fc.trainable_variables)
    t = ng.transformers.make_transformer(backend)
    train = t.computation([loss, update], X, Y)
    for key in keys:
        t.write_variable(getattr(rnn.cell, key), weights[key])
    t.write_variable(fc.linear.W, weights["fc_W"])
    x_ours = np.ascontiguousarray(np.transpose(x, (2, 0, 1)))  # (SEQ, N, F) -> [F, REC, N]
    targets = np.ascontiguousarray(np.eye(CLASSES, dtype="float32")[labels].T)
    return (lambda: train(x_ours, targets)[0]), f"ngraph_core {backend}, {blas_info()}"


def torch_step(threads: int, module: Any, biases: tuple[Any, Any], weights: dict, batch: tuple,
               device: str = "cpu") -> tuple[Step, str]:
    """The same step in PyTorch eager: ``module`` (``nn.LSTM`` or ``nn.GRU``) with ``weights``' ``W_x``/``W_h``
    and the two ``biases`` (arrays, or None for zeros), ``nn.Linear``, ``CrossEntropyLoss``, SGD momentum."""
    import torch

    torch.set_num_threads(threads)
    x, labels = batch
    fc = torch.nn.Linear(HIDDEN, CLASSES)
    with torch.no_grad():  # the ngraph side's weights: same losses
        module.weight_ih_l0.copy_(torch.from_numpy(weights["W_x"]))
        module.weight_hh_l0.copy_(torch.from_numpy(weights["W_h"]))
        for bias, value in zip((module.bias_ih_l0, module.bias_hh_l0), biases):
            bias.copy_(torch.from_numpy(value)) if value is not None else bias.zero_()
        fc.weight.copy_(torch.from_numpy(weights["fc_W"]))
        fc.bias.zero_()
    module, fc = module.to(device), fc.to(device)
    cost = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD([*module.parameters(), *fc.parameters()], lr=LR, momentum=MOMENTUM)
    x, labels = torch.from_numpy(x).to(device), torch.from_numpy(labels).to(device)

    def step() -> object:
        optimizer.zero_grad()
        _, state = module(x)
        h_n = state[0] if isinstance(state, tuple) else state  # LSTM: (h, c); GRU: h
        loss = cost(fc(h_n[0]), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


def build_ngraph(threads: int, backend: str = "numpy") -> tuple[Step, str]:
    import numpy as np

    from neon.layers import LSTM

    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    return ngraph_step(LSTM, weights, make_batch(rng), ("W_x", "W_h", "b"), backend)


def build_torch(threads: int, device: str = "cpu") -> tuple[Step, str]:
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    return torch_step(threads, torch.nn.LSTM(FEATURES, HIDDEN), (weights["b"], None), weights, make_batch(rng), device)


BUILDERS: dict[str, Callable[[int], tuple[Step, str]]] = {"ngraph": build_ngraph, "torch": build_torch}


def main() -> None:
    child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)


if __name__ == "__main__":
    main()
