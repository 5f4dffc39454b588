"""model_zoo.transformer_sentiment: padding is invisible, a few steps reduce the loss, the CLI writes its files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model_zoo.lstm_sentiment import SentimentConfigError, encode_texts, subset
from model_zoo.transformer_sentiment import main, transformer_sentiment
from neon.costs import CrossEntropyMulti
from neon.data import SequenceIterator, Vocabulary, load_movie_snippets, tokenize_words
from neon.model import Model
from neon.optimizers import Adam

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--epochs", "1", "--n-train", "64", "--n-test", "32", "--batch-size", "32", "--d-model", "16",
        "--layers", "1", "--heads", "2", "--max-vocab", "300", "--max-length", "16", "--no-progress"]


def snippets(n: int) -> tuple[list[np.ndarray], np.ndarray, Vocabulary]:
    (texts, y), _ = load_movie_snippets()
    texts, y = subset(texts, y, n, seed=1)
    vocab = Vocabulary.from_tokens(tokenize_words(t) for t in texts)
    return encode_texts(texts, vocab, max_length=16), y, vocab


def test_padding_does_not_change_a_texts_prediction() -> None:
    """The same texts bucketed to 16 or to 48 steps get the same probabilities: attention and the mean skip padding."""
    ids, y, vocab = snippets(16)
    model = Model(transformer_sentiment(len(vocab), d_model=16, num_layers=2, num_heads=2, max_length=48, keep=1.0,
                                        seed=0))
    short = model.get_outputs(SequenceIterator(ids, y, nclass=2, batch_size=16, bucket_boundaries=[16]))
    long = model.get_outputs(SequenceIterator(ids, y, nclass=2, batch_size=16, bucket_boundaries=[48]))
    np.testing.assert_allclose(short, long, rtol=1e-4, atol=1e-6)


def test_a_few_steps_reduce_the_loss() -> None:
    ids, y, vocab = snippets(64)
    train = SequenceIterator(ids, y, nclass=2, batch_size=16, bucket_boundaries=[16], shuffle=True, seed=0)
    model = Model(transformer_sentiment(len(vocab), d_model=16, num_layers=1, num_heads=2, max_length=16, keep=1.0,
                                        seed=0))
    history = model.fit(train, CrossEntropyMulti(), Adam(0.01), 4, progress=False)  # 16 steps
    costs = history["train_cost"]
    assert np.all(np.isfinite(costs)) and costs[-1] < 0.8 * costs[0], costs


def test_the_cli_trains_evaluates_and_writes_its_files(tmp_path, capsys) -> None:
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "built-in movie-review snippets" in out and "epoch 1/1" in out
    accuracy = float(re.search(r"held-out accuracy: ([\d.]+)%", out).group(1))
    assert 0.0 <= accuracy <= 100.0 and re.search(r"parameters: [\d,]+", out)
    names = {f"transformer_sentiment{s}" for s in (".h5", "_vocab.txt", "_curve.png", "_history.csv")}
    assert {p.name for p in tmp_path.iterdir()} == names
    tokens = (tmp_path / "transformer_sentiment_vocab.txt").read_text(encoding="utf-8").splitlines()
    model = Model(transformer_sentiment(len(tokens), d_model=16, num_layers=1, num_heads=2, max_length=16))
    model.load_params(tmp_path / "transformer_sentiment.h5")  # the saved file fits a fresh network of its sizes


@pytest.mark.parametrize("kwargs, match", [({"vocab_size": 0}, r"expected vocab_size to be an int >= 1.*hint"),
                                           ({"vocab_size": 10, "d_model": 30, "num_heads": 4},
                                            r"expected d_model to be a multiple of num_heads=4.*hint")])
def test_bad_sizes_raise(kwargs, match) -> None:
    with pytest.raises(SentimentConfigError, match=match):
        transformer_sentiment(**kwargs)


def test_the_script_runs_as_a_module(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "model_zoo.transformer_sentiment", *TINY, "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "held-out accuracy:" in result.stdout and "RuntimeWarning" not in result.stderr
