"""model_zoo.lstm_sentiment: a few steps reduce the loss, the CLI writes its files, the aclImdb path, helpers."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import model_zoo.lstm_sentiment as recipe
from model_zoo.lstm_sentiment import (
    SentimentConfigError,
    TrainResult,
    bucket_bounds,
    encode_texts,
    lstm_sentiment,
    main,
    subset,
)
from neon.costs import CrossEntropyMulti
from neon.data import SequenceIterator, Vocabulary, load_movie_snippets, tokenize_words
from neon.model import Model
from neon.optimizers import Adam

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--epochs", "1", "--n-train", "64", "--n-test", "32", "--batch-size", "32", "--hidden", "16",
        "--max-vocab", "300", "--max-length", "16"]


def test_a_few_steps_reduce_the_loss() -> None:
    (texts, y), _ = load_movie_snippets()
    texts, y = subset(texts, y, 64, seed=1)
    vocab = Vocabulary.from_tokens(tokenize_words(t) for t in texts)
    train = SequenceIterator(encode_texts(texts, vocab, max_length=16), y, nclass=2, batch_size=16,
                             bucket_boundaries=[16], shuffle=True, seed=0)
    model = Model(lstm_sentiment(len(vocab), embedding_dim=16, hidden=16, keep=1.0, seed=0))
    history = model.fit(train, CrossEntropyMulti(), Adam(0.01), 4, progress=False)  # 16 steps
    costs = history["train_cost"]
    assert np.all(np.isfinite(costs)) and costs[-1] < 0.8 * costs[0], costs


def test_the_cli_trains_evaluates_and_writes_its_files(tmp_path, capsys) -> None:
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "built-in movie-review snippets" in out and "epoch 1/1" in out and "held-out accuracy:" in out
    names = {"lstm_sentiment.h5", "lstm_sentiment_vocab.txt", "lstm_sentiment_curve.png", "lstm_sentiment_history.csv"}
    assert {p.name for p in tmp_path.iterdir()} == names
    assert (tmp_path / "lstm_sentiment_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((tmp_path / "lstm_sentiment_history.csv").open()))
    assert len(rows) == 1 and 0.0 <= float(rows[0]["valid_accuracy"]) <= 1.0
    tokens = (tmp_path / "lstm_sentiment_vocab.txt").read_text(encoding="utf-8").splitlines()
    assert tokens[:2] == ["<pad>", "<unk>"] and len(tokens) <= 302
    model = Model(lstm_sentiment(len(tokens), hidden=16))
    model.load_params(tmp_path / "lstm_sentiment.h5")  # the saved file fits a fresh network of the vocab's size


def write_fake_aclimdb(root: Path) -> Path:
    """aclImdb's layout with a handful of short reviews per split and label."""
    reviews = {"pos": ["A great, wonderful film.<br />Loved it!", "Brilliant acting and a moving story."],
               "neg": ["An awful, boring mess.", "Terrible plot<br />and worse acting; a waste."]}
    for split in ("train", "test"):
        for label, texts in reviews.items():
            folder = root / "aclImdb" / split / label
            folder.mkdir(parents=True)
            for i, text in enumerate(texts * 4):
                (folder / f"{i}_{7 if label == 'pos' else 2}.txt").write_text(text, encoding="utf-8")
            (folder / "notes.md").write_text("not a review", encoding="utf-8")  # skipped: not *.txt
    return root / "aclImdb"


def test_the_cli_reads_an_aclimdb_folder(tmp_path, capsys) -> None:
    data = write_fake_aclimdb(tmp_path)
    assert main([*TINY, "--data-dir", str(data), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert f"IMDB reviews from {data}" in out and "16 training and 16 test texts (50.0% / 50.0% positive)" in out
    tokens = (tmp_path / "out" / "lstm_sentiment_vocab.txt").read_text(encoding="utf-8").splitlines()
    assert "great" in tokens and "br" not in tokens  # <br /> is read as a space


def test_a_missing_aclimdb_folder_is_a_data_error(tmp_path) -> None:
    from neon.data import DataError

    with pytest.raises(DataError, match=r"aclImdb/train/neg"):
        main([*TINY, "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")])


def test_below_the_target_the_default_run_exits_with_1(monkeypatch, tmp_path) -> None:
    def fake_train(*args, **kwargs) -> TrainResult:
        return TrainResult(None, None, recipe.TARGET - 0.01, Vocabulary([]), [])  # type: ignore[arg-type]

    monkeypatch.setattr(recipe, "train", fake_train)
    assert main(["--out", str(tmp_path)]) == 1
    assert main(["--out", str(tmp_path), "--epochs", "1"]) == 0  # not the default settings: no bar


def test_encode_texts_keeps_the_last_words_and_never_returns_an_empty_text() -> None:
    vocab = Vocabulary(["good", "bad", "film"])
    ids = encode_texts(["Bad film, good film!", "", "zzz"], vocab, max_length=3)  # <pad> 0, <unk> 1, good 2...
    assert [a.tolist() for a in ids] == [[2, 4, 1], [1], [1]]  # "good film !", the empty text, an unknown word
    assert all(a.dtype == np.int32 for a in ids)


def test_bucket_bounds_and_subset() -> None:
    assert bucket_bounds(64) == [8, 16, 24, 32, 48]
    assert bucket_bounds(200) == [8, 16, 24, 32, 48, 64, 96, 128, 192]
    assert bucket_bounds(8) == []
    texts, labels = [f"t{i}" for i in range(10)], np.array([0] * 5 + [1] * 5)
    some, y = subset(texts, labels, 4, seed=0)
    assert len(some) == 4 and some == sorted(some, key=lambda t: int(t[1:])) and y.tolist() == [
        int(t[1:]) >= 5 for t in some]
    assert subset(texts, labels, None)[0] == texts


@pytest.mark.parametrize("kwargs", [{"vocab_size": 0}, {"vocab_size": 10, "hidden": -1},
                                    {"vocab_size": 10, "embedding_dim": True}])
def test_bad_sizes_raise(kwargs) -> None:
    with pytest.raises(SentimentConfigError, match=r"expected \w+ to be an int >= 1.*hint"):
        lstm_sentiment(**kwargs)


def test_an_empty_split_or_negative_epochs_raise(tmp_path) -> None:
    with pytest.raises(SentimentConfigError, match="expected epochs to be an int >= 0, received -1"):
        recipe.train(epochs=-1, out=tmp_path)
    with pytest.raises(SentimentConfigError, match="expected training and test texts, received 0"):
        recipe.train(epochs=1, n_train=0, n_test=8, out=tmp_path)


def test_the_script_runs_as_a_module(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "model_zoo.lstm_sentiment", *TINY, "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "held-out accuracy:" in result.stdout and "RuntimeWarning" not in result.stderr
    assert (tmp_path / "lstm_sentiment.h5").exists() and (tmp_path / "lstm_sentiment_vocab.txt").exists()
