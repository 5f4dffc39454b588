"""A brute-force NumPy reference for the CTC loss and its gradient (tests only).

It enumerates every path of class ids over an example's frames (``C ** T`` of them, so only
tiny cases), keeps those whose collapse (merge repeats, then drop blanks) is the label
sequence, and sums their probabilities: no recursion, nothing shared with the kernels.
The gradient with respect to the logits is ``softmax - posteriors`` where a class's
posterior at a frame is the probability mass of the kept paths through it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def collapse(path: Sequence[int], blank: int) -> list[int]:
    """Merge repeated symbols, then drop blanks: ``(1, 1, 0, 1, 2, 2) -> [1, 1, 2]`` with blank 0."""
    out, last = [], None
    for k in path:
        if k != last and k != blank:
            out.append(int(k))
        last = k
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the first axis of ``(C, T)`` logits."""
    e = np.exp(logits - logits.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def ctc_example(logits: np.ndarray, labels: Sequence[int], blank: int) -> tuple[float, np.ndarray]:
    """``(loss, d loss / d logits)`` of one example with logits ``(C, T)`` (its valid frames only)."""
    c, t = logits.shape
    probs = softmax(logits)
    total, occupancy = 0.0, np.zeros((c, t))
    want = [int(k) for k in labels]
    for path in itertools.product(range(c), repeat=t):
        if collapse(path, blank) != want:
            continue
        p = float(np.prod(probs[list(path), range(t)]))
        total += p
        occupancy[list(path), range(t)] += p
    if total == 0.0:
        return float("inf"), np.full((c, t), np.nan)
    return -np.log(total), probs - occupancy / total


def ctc_batch(logits: np.ndarray, labels: np.ndarray, input_lengths: Sequence[int], label_lengths: Sequence[int],
              blank: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Losses ``[N]`` and the gradient of their sum, for logits ``(C, T, N)`` and labels ``(L, N)``."""
    n = logits.shape[-1]
    losses, grad = np.zeros(n), np.zeros(logits.shape)
    for i in range(n):
        frames = int(input_lengths[i])
        loss, g = ctc_example(logits[:, :frames, i], labels[:int(label_lengths[i]), i], blank)
        losses[i] = loss
        grad[:, :frames, i] = g
    return losses, grad
