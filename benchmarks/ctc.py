"""CTC loss and its gradient with respect to the logits (C=29, T=200, N=16, L up to 40).

Two sides, each timed in its own process by ``run.py`` (never both in one process):

* ``ngraph``: ``ng.ctc_loss`` on logits ``[C, REC, N]`` fed through placeholders with the
  labels and lengths; one computation returns the summed loss and ``d loss / d logits``
  (the ``ctc`` and ``ctc_grad`` kernels, NumPy transformer, float32).
* ``torch``: ``F.ctc_loss(log_softmax(x), ..., reduction="sum")`` and ``autograd.grad`` on
  CPU, float32.

Both sides see the same batch (input lengths 150..200, label lengths 20..40, repeats
included) and their losses agree (printed by ``--check``).

Run one side: ``python benchmarks/ctc.py --side ngraph --threads 1``; both alternating:
``python benchmarks/run.py ctc --pairs 3 --threads 1``.
"""

from __future__ import annotations

import sys

from harness import Step, child_main

C, T, N, L = 29, 200, 16, 40
STEPS = 50
WARMUP = 5


def make_batch():
    """Logits (C, T, N) float32, labels (L, N), input lengths and label lengths (N,), int32."""
    import numpy as np

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((C, T, N)).astype("float32")
    labels = rng.integers(1, C, size=(L, N)).astype("int32")
    labels[1] = labels[0]  # a repeat: a blank must separate them
    return logits, labels, rng.integers(150, T + 1, N).astype("int32"), rng.integers(20, L + 1, N).astype("int32")


def build_ngraph(threads: int) -> tuple[Step, str]:
    import ngraph_core as ng

    ca, ta, na, la = ng.make_axis(C, "C"), ng.make_axis(T, "REC"), ng.make_axis(N, "N"), ng.make_axis(L, "L")
    x = ng.placeholder([ca, ta, na], name="logits")
    y = ng.placeholder([la, na], dtype="int32", name="labels")
    il, ll = ng.placeholder([na], dtype="int32"), ng.placeholder([na], dtype="int32")
    loss = ng.sum(ng.ctc_loss(x, y, il, ll))
    t = ng.transformers.make_transformer()
    step = t.computation([loss, ng.deriv(loss, x)], x, y, il, ll)
    batch = make_batch()
    return (lambda: step(*batch)), "ngraph_core numpy (ctc, ctc_grad kernels)"


def build_torch(threads: int) -> tuple[Step, str]:
    import torch

    torch.set_num_threads(threads)
    logits, labels, il, ll = make_batch()
    x = torch.from_numpy(logits).permute(1, 2, 0).contiguous().requires_grad_()
    y, il, ll = (torch.from_numpy(a).long() for a in (labels.T.copy(), il, ll))

    def step() -> object:
        loss = torch.nn.functional.ctc_loss(x.log_softmax(2), y, il, ll, reduction="sum")
        return loss, torch.autograd.grad(loss, x)[0]

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


def check() -> None:
    """Print both sides' loss: they must agree."""
    ours, _ = build_ngraph(1)
    theirs, _ = build_torch(1)
    print(f"ngraph loss {float(ours()[0]):.4f}, torch loss {float(theirs()[0].detach()):.4f}")


if __name__ == "__main__":
    if "--check" in sys.argv:
        check()
    else:
        child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0])
