"""Training step of an embedding table: ``LookupTable(5000, 64)`` over ids ``[REC:20, N:32]``, a sum of
squares as the loss, plain SGD on the table (the part of a word model that grows with the vocabulary).

* ``ngraph``: neon's ``LookupTable`` (``ng.gather`` forward, ``ng.scatter_add`` gradient), compiled by
  the NumPy transformer.
* ``torch``: ``nn.Embedding(5000, 64)`` and ``optim.SGD`` in eager mode on CPU.

Both read the same table and ids, so the first losses agree (``BENCH_CHECK=1``).
"""

from __future__ import annotations

from harness import Step, blas_info, child_main

VOCAB, DIM, STEPS_T, BATCH, LR = 5000, 64, 20, 32, 0.01
STEPS = 200
WARMUP = 20


def data():
    import numpy as np

    rng = np.random.default_rng(0)
    return (rng.standard_normal((VOCAB, DIM)).astype("float32") * 0.1,
            rng.integers(0, VOCAB, size=(STEPS_T, BATCH)).astype("int32"))


def build_ngraph(threads: int) -> tuple[Step, str]:
    import ngraph_core as ng
    from neon.layers import LookupTable

    table, ids = data()
    x = ng.placeholder([ng.make_axis(STEPS_T, "REC"), ng.make_axis(BATCH, "N")], dtype="int32", name="ids")
    layer = LookupTable(VOCAB, DIM)
    loss = ng.sum(ng.square(layer(x)))
    (W,) = layer.variables
    (grad,) = ng.gradients(loss, [W])
    t = ng.transformers.make_transformer()
    t.write_variable(W, table.T)  # the layer stores W as [E, V]; the same table as torch's
    train = t.computation([loss, ng.assign(W, W - LR * grad)], x)
    return lambda: train(ids)[0], f"ngraph_core numpy, {blas_info()}, {threads} threads"


def build_torch(threads: int) -> tuple[Step, str]:
    import torch

    torch.set_num_threads(threads)
    table, ids = data()
    emb = torch.nn.Embedding(VOCAB, DIM)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(table))
    optimizer = torch.optim.SGD(emb.parameters(), lr=LR)
    idx = torch.from_numpy(ids.astype("int64"))

    def step() -> object:
        optimizer.zero_grad()
        loss = emb(idx).square().sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)
