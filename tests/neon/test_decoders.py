"""Greedy and prefix beam-search CTC decoding against enumerating every path of tiny alphabets."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest

from neon.decoders import DecoderError, beam_search_decode, collapse, greedy_decode


def label_probabilities(probs: np.ndarray, blank: int) -> dict[tuple[int, ...], float]:
    """p(labels) for every label sequence of one example's ``(C, T)`` probabilities, by enumerating paths."""
    c, t = probs.shape
    out: dict[tuple[int, ...], float] = defaultdict(float)
    for path in itertools.product(range(c), repeat=t):
        out[tuple(collapse(path, blank))] += float(np.prod(probs[list(path), range(t)]))
    return out


def random_probs(seed: int, c: int, t: int, n: int, sharp: float = 2.0) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=(c, t, n)) * sharp
    e = np.exp(z - z.max(axis=0))
    return e / e.sum(axis=0)


def test_collapse() -> None:
    assert collapse([1, 1, 0, 1, 2, 2, 0], blank=0) == [1, 1, 2]
    assert collapse([2, 2, 2], blank=2) == []
    assert collapse([], blank=0) == []


def test_greedy_decode_is_the_best_path_collapsed() -> None:
    probs = random_probs(0, 4, 6, 3)
    lengths = [6, 4, 0]
    out = greedy_decode(probs, lengths, blank=1)
    for i, length in enumerate(lengths):
        assert out[i] == collapse(probs[:, :length, i].argmax(axis=0), 1)
    assert out[2] == []
    np.testing.assert_equal(greedy_decode(np.log(probs), lengths, blank=1, scores_kind="log_probs"), out)
    np.testing.assert_equal(greedy_decode(np.log(probs) * 1.0 + 3.0, lengths, blank=1, scores_kind="logits"), out)


@pytest.mark.parametrize("seed, c, t, blank", [(1, 3, 5, 0), (2, 3, 6, 2), (3, 4, 5, 1), (4, 2, 7, 0)])
def test_beam_search_matches_brute_force(seed: int, c: int, t: int, blank: int) -> None:
    """A beam wide enough to hold every prefix finds the most probable label sequence."""
    probs = random_probs(seed, c, t, 3, sharp=1.0)
    lengths = [t, t - 1, t - 2]
    out = beam_search_decode(probs, lengths, beam_width=c ** t, blank=blank)
    for i, length in enumerate(lengths):
        table = label_probabilities(probs[:, :length, i], blank)
        best = max(table, key=table.get)
        assert table[tuple(out[i])] == pytest.approx(table[best], rel=1e-12)


def test_beam_search_beats_best_path() -> None:
    """Two frames where the best path is blank-blank (0.36) but label 1 has 0.64 summed over paths."""
    probs = np.array([[0.6, 0.6], [0.4, 0.4]])[:, :, None]  # classes (blank, 1) x 2 frames
    assert greedy_decode(probs, blank=0) == [[]]
    assert beam_search_decode(probs, beam_width=4, blank=0) == [[1]]
    assert beam_search_decode(probs, beam_width=1, blank=0) == [[]]  # a beam of one is greedy here


def test_beam_search_separates_repeats_by_blanks() -> None:
    """"a a" needs a blank between: a a a collapses to "a", a blank a to "a a"."""
    probs = np.array([[0.01, 0.98, 0.01], [0.98, 0.01, 0.98], [0.01, 0.01, 0.01]])[:, :, None]
    assert beam_search_decode(probs, beam_width=8, blank=0) == [[1, 1]]
    assert greedy_decode(probs, blank=0) == [[1, 1]]
    probs = np.array([[0.01, 0.01, 0.01], [0.98, 0.98, 0.98], [0.01, 0.01, 0.01]])[:, :, None]
    assert beam_search_decode(probs, beam_width=8, blank=0) == [[1]]


@pytest.mark.parametrize("kw, match", [
    ({"scores": np.zeros((3, 4))}, r"shape \(C, T, N\)"),
    ({"lengths": [5]}, r"integer lengths in \[0, 4\]"),
    ({"blank": 3}, r"blank class id in \[0, 3\)"),
    ({"scores": -np.ones((3, 4, 1))}, "probabilities >= 0"),
    ({"scores_kind": "softmax"}, "scores= one of"),
    ({"beam_width": 0}, "beam_width >= 1"),
])
def test_errors(kw: dict, match: str) -> None:
    args = {"scores": np.full((3, 4, 1), 1 / 3), "lengths": None, "blank": 0, "scores_kind": "probs"}
    args.update(kw)
    width = args.pop("beam_width", 2)
    with pytest.raises(DecoderError, match=match):
        beam_search_decode(args["scores"], args["lengths"], beam_width=width, blank=args["blank"],
                           scores_kind=args["scores_kind"])
