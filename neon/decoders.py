"""CTC decoders: label sequences from per-frame class scores, on the host (NumPy).

A CTC model outputs, per frame, a distribution over the classes (the blank included).
Decoding turns the ``[C, T, N]`` scores a model's ``get_outputs`` / ``predict`` returns
into one label sequence per example:

* ``greedy_decode``: the best class per frame, then repeats merged and blanks dropped
  (best path decoding; fast, and exact when one path dominates);
* ``beam_search_decode``: CTC prefix beam search (Hannun et al., 2014, without a language
  model) in log space: it keeps the ``beam_width`` most probable label *prefixes*, summing
  every path that collapses to a prefix, so it finds sequences a single best path misses.

Scores may be probabilities, log-probabilities or unnormalized logits (``scores=``);
both decoders normalize them to log-probabilities first. Only each example's first
``lengths[n]`` frames are read.

Example:
    >>> probs = model.get_outputs(test_set)            # [C, T, N] softmax outputs
    >>> greedy_decode(probs, lengths, blank=0)          # [[3, 1, 4], [1, 5], ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SCORES = ("probs", "log_probs", "logits")


class DecoderError(ValueError):
    """A decoder was given scores, lengths or settings it cannot use."""


def _log_probs(scores: Any, lengths: Any, blank: int, kind: str, who: str) -> tuple[np.ndarray, np.ndarray]:
    """``(log-probabilities (C, T, N) float64, lengths (N,) int)``, checked."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 3:
        raise DecoderError(f"{who}: expected scores of shape (C, T, N), received shape {x.shape}; "
                           "hint: the classes first, then time, then the batch, as the model outputs them")
    c, t, n = x.shape
    if kind not in SCORES:
        raise DecoderError(f"{who}: expected scores= one of {SCORES}, received {kind!r}")
    if isinstance(blank, bool) or not isinstance(blank, (int, np.integer)) or not 0 <= blank < c:
        raise DecoderError(f"{who}: expected a blank class id in [0, {c}), received {blank!r}")
    lengths = np.full(n, t) if lengths is None else np.asarray(lengths)
    if lengths.shape != (n,) or lengths.dtype.kind not in "iu" or np.any((lengths < 0) | (lengths > t)):
        raise DecoderError(f"{who}: expected {n} integer lengths in [0, {t}], received {lengths.tolist()}")
    if kind == "probs":
        if np.any(x < 0):
            raise DecoderError(f"{who}: expected probabilities >= 0, received a minimum of {x.min()}; "
                               "hint: pass scores='logits' for unnormalized outputs")
        with np.errstate(divide="ignore"):
            x = np.log(x / x.sum(axis=0, keepdims=True))
    else:
        m = x.max(axis=0, keepdims=True)
        x = x - (m + np.log(np.exp(x - m).sum(axis=0, keepdims=True)))
    return x, lengths.astype(np.int64)


def collapse(path: Sequence[int], blank: int) -> list[int]:
    """Merge repeated classes, then drop blanks: ``[1, 1, 0, 1, 2, 2] -> [1, 1, 2]`` with blank 0.

    Example:
        >>> collapse([0, 3, 3, 0, 3], blank=0)
        [3, 3]
    """
    out: list[int] = []
    last = None
    for k in path:
        if k != last and k != blank:
            out.append(int(k))
        last = k
    return out


def greedy_decode(scores: Any, lengths: Any = None, blank: int = 0, scores_kind: str = "probs") -> list[list[int]]:
    """Best-path decoding: the most probable class per frame, collapsed.

    Args:
        scores: ``(C, T, N)`` per-frame class scores (an array, or anything ``np.asarray`` takes).
        lengths: ``(N,)`` valid frames per example (default: all ``T``).
        blank: the blank's class id.
        scores_kind: ``"probs"`` (default), ``"log_probs"`` or ``"logits"``.

    Returns:
        one list of class ids per example.

    Raises:
        DecoderError: scores not 3-D, lengths out of range, a blank out of range.

    Example:
        >>> greedy_decode(probs, [50, 42], blank=0)
        [[7, 7, 2], [5]]
    """
    logp, lengths = _log_probs(scores, lengths, blank, scores_kind, "greedy_decode")
    best = logp.argmax(axis=0)  # (T, N)
    return [collapse(best[:length, i], blank) for i, length in enumerate(lengths)]


def _logaddexp(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))


def _beam_one(logp: np.ndarray, blank: int, beam_width: int) -> list[int]:
    """Prefix beam search over one example's ``(C, T)`` log-probabilities."""
    neg = -np.inf
    # prefix -> (log p(prefix, path ends in blank), log p(prefix, path ends in its last label))
    beams: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, neg)}
    for t in range(logp.shape[1]):
        frame = logp[:, t]
        grown: dict[tuple[int, ...], list[float]] = {}

        def add(prefix: tuple[int, ...], blank_part: float, label_part: float) -> None:
            entry = grown.setdefault(prefix, [neg, neg])
            entry[0], entry[1] = _logaddexp(entry[0], blank_part), _logaddexp(entry[1], label_part)

        for prefix, (pb, pl) in beams.items():
            total = _logaddexp(pb, pl)
            add(prefix, total + frame[blank], neg)  # a blank: the prefix stays
            if prefix:
                add(prefix, neg, pl + frame[prefix[-1]])  # the last label repeated: merged
            for k in range(logp.shape[0]):
                if k == blank:
                    continue
                # a repeat of the last label extends the prefix only after a blank
                from_paths = pb if prefix and k == prefix[-1] else total
                add((*prefix, k), neg, from_paths + frame[k])
        ranked = sorted(grown.items(), key=lambda item: -_logaddexp(*item[1]))
        beams = {prefix: (parts[0], parts[1]) for prefix, parts in ranked[:beam_width]}
    best = max(beams.items(), key=lambda item: _logaddexp(*item[1]))
    return list(best[0])


def beam_search_decode(scores: Any, lengths: Any = None, beam_width: int = 8, blank: int = 0,
                       scores_kind: str = "probs") -> list[list[int]]:
    """CTC prefix beam search: the most probable label sequence among the beams kept.

    Each frame extends every kept prefix by a blank, by its last label (merged) or by a new
    label, summing the probabilities of all paths that reach each prefix (split by whether
    they end in a blank, so "a a" needs a blank between), and keeps the ``beam_width``
    most probable prefixes. With a beam as wide as every prefix it is exact.

    Args:
        scores: ``(C, T, N)`` per-frame class scores.
        lengths: ``(N,)`` valid frames per example (default: all ``T``).
        beam_width: prefixes kept per frame (>= 1).
        blank: the blank's class id.
        scores_kind: ``"probs"`` (default), ``"log_probs"`` or ``"logits"``.

    Returns:
        one list of class ids per example.

    Raises:
        DecoderError: bad scores, lengths, blank or beam width.

    Example:
        >>> beam_search_decode(probs, lengths, beam_width=16, blank=0)
        [[7, 2], [5, 5]]
    """
    if isinstance(beam_width, bool) or not isinstance(beam_width, (int, np.integer)) or beam_width < 1:
        raise DecoderError(f"beam_search_decode: expected an int beam_width >= 1, received {beam_width!r}")
    logp, lengths = _log_probs(scores, lengths, blank, scores_kind, "beam_search_decode")
    return [_beam_one(logp[:, :length, i], blank, int(beam_width)) for i, length in enumerate(lengths)]


__all__ = ["DecoderError", "beam_search_decode", "collapse", "greedy_decode"]
