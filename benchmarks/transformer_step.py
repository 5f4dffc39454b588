"""Training step of a Transformer encoder (issue 35): 4 layers, d=256, 4 heads, feed-forward 1024,
sequence 128, batch 32, a per-token classifier over 64 classes.

Post-norm blocks (PyTorch's default), ReLU, no dropout; softmax cross-entropy summed over the
tokens and averaged over the batch; SGD momentum 0.9, lr 0.01. Two sides, each timed in its own
process by ``run.py`` (never both in one process):

* ``ngraph``: neon ``TransformerEncoder(4, 4, 1024)`` over ``[F:256, REC:128, N:32]``, then
  ``Affine(64, Softmax)`` on every token, ``CrossEntropyMulti`` and ``GradientDescentMomentum``,
  compiled by the NumPy transformer into one computation that returns the loss and performs the
  updates (the step alone, no ``Model.fit`` loop).
* ``torch``: ``nn.TransformerEncoder`` of ``nn.TransformerEncoderLayer(256, 4, 1024, dropout=0,
  batch_first=True)`` + ``nn.Linear(256, 64)``, ``CrossEntropyLoss(reduction="sum") / batch``,
  ``optim.SGD(momentum=0.9)``, eager on the CPU.

Both sides start from the same weights (drawn by PyTorch, copied into ours) and see the same batch,
so their losses agree step by step (``BENCH_CHECK=1`` prints the first 5 losses of a side instead of
timing it). Each side reports its peak RSS.

Usage: ``python benchmarks/run.py transformer_step --pairs 3 --threads 1 2``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness import Step, blas_info, child_main

LAYERS, D_MODEL, HEADS, FF, SEQ, BATCH, CLASSES = 4, 256, 4, 1024, 128, 32, 64
LR, MOMENTUM = 0.01, 0.9
STEPS, WARMUP = 10, 3


def torch_model(threads: int) -> tuple[Any, Any]:
    """PyTorch's encoder and classifier, seeded: the weights both sides start from."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, FF, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
    return encoder, torch.nn.Linear(D_MODEL, CLASSES)


def make_batch() -> tuple[Any, Any]:
    """Features (BATCH, SEQ, D_MODEL) (PyTorch's batch-first layout) and a label per token (BATCH, SEQ)."""
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.standard_normal((BATCH, SEQ, D_MODEL)).astype("float32"), rng.integers(0, CLASSES, (BATCH, SEQ))


def _heads_first(w: Any) -> Any:
    """torch's ``[H * D, ...]`` rows as our ``[D, H, ...]``."""
    import numpy as np

    return np.swapaxes(w.reshape(HEADS, -1, *w.shape[1:]), 0, 1)


def weight_pairs(block: Any, theirs: Any) -> list[tuple[Any, Any]]:
    """(our variable, its value from ``theirs``) for every weight of one encoder layer."""
    import numpy as np

    def get(p: Any) -> Any:
        return p.detach().numpy()

    mha, ff = block.self_attn, block.feed_forward
    w, b = get(theirs.self_attn.in_proj_weight), get(theirs.self_attn.in_proj_bias)
    pairs = [(getattr(mha, f"W{n}"), _heads_first(w[i * D_MODEL:(i + 1) * D_MODEL])) for i, n in enumerate("qkv")]
    pairs += [(getattr(mha, f"b{n}"), _heads_first(b[i * D_MODEL:(i + 1) * D_MODEL])) for i, n in enumerate("qkv")]
    wo = get(theirs.self_attn.out_proj.weight)
    pairs += [(mha.Wo, np.swapaxes(wo.reshape(D_MODEL, HEADS, -1), 1, 2)),
              (mha.bo, get(theirs.self_attn.out_proj.bias))]
    pairs += [(ff.W1, get(theirs.linear1.weight)), (ff.b1, get(theirs.linear1.bias)),
              (ff.W2, get(theirs.linear2.weight)), (ff.b2, get(theirs.linear2.bias))]
    for ours, norm in ((block.norm1, theirs.norm1), (block.norm2, theirs.norm2)):
        pairs += [(ours.gamma, get(norm.weight)), (ours.beta, get(norm.bias))]
    return pairs


def build_ngraph(threads: int) -> tuple[Step, str]:
    import numpy as np

    import ngraph_core as ng
    from neon.costs import CrossEntropyMulti
    from neon.layers import Affine, TransformerEncoder
    from neon.optimizers import GradientDescentMomentum

    encoder_t, fc_t = torch_model(1)
    x, labels = make_batch()
    F, REC, N = ng.make_axis(D_MODEL, "F"), ng.make_axis(SEQ, "REC"), ng.make_axis(BATCH, "N")
    X = ng.placeholder([F, REC, N], name="X")
    Y = ng.placeholder([ng.make_axis(CLASSES, "Y"), REC, N], name="Y")
    encoder = TransformerEncoder(LAYERS, HEADS, FF, dropout=0.0)
    fc = Affine(CLASSES, bias=0.0, activation="softmax")
    loss = CrossEntropyMulti()(fc(encoder(X)), Y)
    variables = encoder.trainable_variables + fc.trainable_variables
    update = GradientDescentMomentum(LR, MOMENTUM)(loss, variables)
    t = ng.transformers.make_transformer()
    train = t.computation([loss, update], X, Y)
    pairs = [pair for ours, theirs in zip(encoder.layers, encoder_t.layers) for pair in weight_pairs(ours, theirs)]
    pairs += [(fc.linear.W, fc_t.weight.detach().numpy()), (fc.bias.b, fc_t.bias.detach().numpy())]
    for variable, value in pairs:
        t.write_variable(variable, np.ascontiguousarray(value.reshape(variable.axes.lengths)))
    x_ours = np.ascontiguousarray(x.transpose(2, 1, 0))  # (N, T, F) -> [F, REC, N]
    targets = np.ascontiguousarray(np.eye(CLASSES, dtype="float32")[labels].transpose(2, 1, 0))
    return (lambda: train(x_ours, targets)[0]), f"ngraph_core numpy, {blas_info()}"


def build_torch(threads: int) -> tuple[Step, str]:
    import torch

    encoder, fc = torch_model(threads)
    x, labels = (torch.from_numpy(a) for a in make_batch())
    cost = torch.nn.CrossEntropyLoss(reduction="sum")
    optimizer = torch.optim.SGD([*encoder.parameters(), *fc.parameters()], lr=LR, momentum=MOMENTUM)

    def step() -> object:
        optimizer.zero_grad()
        loss = cost(fc(encoder(x)).reshape(-1, CLASSES), labels.reshape(-1)) / BATCH
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


BUILDERS: dict[str, Callable[[int], tuple[Step, str]]] = {"ngraph": build_ngraph, "torch": build_torch}


def main() -> None:
    child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)


if __name__ == "__main__":
    main()
