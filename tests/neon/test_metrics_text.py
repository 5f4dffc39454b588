"""CER and WER: corpus-level edit-distance rates on strings and label sequences."""

from __future__ import annotations

import pytest

from neon.metrics import CER, WER, MetricError, edit_distance


@pytest.mark.parametrize("ref, hyp, distance", [
    ("kitten", "sitting", 3), ("", "abc", 3), ("abc", "", 3), ("abc", "abc", 0), ("flaw", "lawn", 2),
    ([1, 2, 3], [1, 3], 1), (["the", "cat"], ["a", "cat", "sat"], 2),
])
def test_edit_distance(ref, hyp, distance) -> None:
    assert edit_distance(ref, hyp) == distance
    assert edit_distance(hyp, ref) == distance


def test_cer_is_corpus_level() -> None:
    """Total edits over total reference characters, not a mean of per-pair rates."""
    refs, hyps = ["hello world", "ab"], ["hallo word", "ba"]  # 2 + 2 edits over 11 + 2 characters
    assert CER()(refs, hyps) == pytest.approx(4 / 13)
    assert CER()(["abc"], ["abc"]) == 0.0
    assert CER()([[3, 1, 4]], [[3, 4]]) == pytest.approx(1 / 3)  # decoded label ids
    assert CER().name == "cer" and repr(CER()) == "CER()"


def test_wer_counts_words() -> None:
    refs = ["the cat sat on the mat", "hello"]
    hyps = ["the cat sat on mat", "hello   there"]  # one deletion, one insertion; whitespace runs split once
    assert WER()(refs, hyps) == pytest.approx(2 / 7)
    assert WER()(["a b c"], ["x y z w"]) == pytest.approx(4 / 3)  # can exceed 1


@pytest.mark.parametrize("metric, refs, hyps, match", [
    (CER(), ["ab"], ["ab", "c"], "one hypothesis per reference"),
    (CER(), "ab", "ab", "a single string"),
    (CER(), [""], ["x"], "no characters"),
    (WER(), [" "], ["x"], "no words"),
    (WER(), [[1, 2]], [[1]], "expected strings"),
])
def test_errors(metric, refs, hyps, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        metric(refs, hyps)
