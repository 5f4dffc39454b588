"""model_zoo.char_lm: the Shakespeare text, a few steps, sampling (Gumbel-max through ng.scan), the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model_zoo.char_lm import CharLM, load_text, main, split_text
from model_zoo.char_models import CharModelError
from neon.data import MissingDataError
from neon.data.text import Vocabulary
from neon.optimizers import Adam

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def text() -> str:
    try:
        return load_text(20_000)
    except MissingDataError as err:
        pytest.skip(f"packaged data archive missing: run `make venv` to fetch it ({err})")


def small_model(text: str, hidden: int = 32) -> CharLM:
    return CharLM(Vocabulary.from_text(text), embedding_dim=8, hidden=hidden, seed=0)


def test_the_text_is_shakespeare_cut_and_split(text) -> None:
    assert len(text) == 20_000 and "ALL'S WELL THAT ENDS WELL" in text[:200]
    train, held_out = split_text(text)
    assert train + held_out == text and len(held_out) == 2_000
    with pytest.raises(CharModelError, match="expected max_chars to be an int >= 2"):
        load_text(1)


def test_a_few_steps_reduce_the_loss(text) -> None:
    model = small_model(text)
    history = model.fit_text(text[:8_000], 3, Adam(1e-2, gradient_clip_norm=5.0), seq_length=32, batch_size=64,
                             seed=0)  # 3 epochs of 4 steps
    costs = history["train_cost"]
    assert np.all(np.isfinite(costs)) and costs[-1] < 0.9 * costs[0], costs
    assert costs[0] == pytest.approx(np.log(len(model.vocab)), rel=0.1)  # starts near uniform
    assert model.cost(text[8_000:10_000], seq_length=32) < costs[0]


def test_sampling_is_seeded_and_stays_in_the_vocabulary(text) -> None:
    model = small_model(text)
    passage = model.sample("KING.\n", 50, temperature=1.0, seed=3)
    assert len(passage) == 50 and set(passage) <= set(model.vocab.tokens)
    assert model.sample("KING.\n", 50, temperature=1.0, seed=3) == passage
    assert model.sample("KING.\n", 50, temperature=1.0, seed=4) != passage
    assert len(model.sample("K", 5)) == 5  # a one-character prompt starts from a zero state
    with pytest.raises(CharModelError, match="expected a prompt of at least one character"):
        model.sample("", 5)
    with pytest.raises(CharModelError, match="expected a finite temperature > 0"):
        model.sample("K", 5, temperature=0.0)


def test_a_cold_sample_is_the_greedy_continuation(text) -> None:
    """At a temperature near 0 each sampled character is the argmax of the model's next-character logits."""
    model = small_model(text, hidden=16)
    prompt = "ROMEO.\n"
    passage = model.sample(prompt, 12, temperature=1e-9)
    full = model.vocab.encode(prompt + passage)
    x = model._ids(len(full), 1, "x")
    comp = model.transformer.computation(model.logits(x), x, mode="inference")
    logits = np.asarray(comp(full[:, None]))[:, :, 0]  # [V, T]
    np.testing.assert_array_equal(logits.argmax(axis=0)[len(prompt) - 1:-1], full[len(prompt):])


def test_the_cli_trains_reports_bpc_and_prints_a_passage(tmp_path, capsys, text) -> None:
    assert main(["--max-chars", "8000", "--epochs", "1", "--hidden", "16", "--embedding-dim", "8",
                 "--seq-length", "32", "--sample-length", "40", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "7,200 training and 800 held-out characters" in out and "epoch 1/1" in out
    assert "bits per character" in out and "sample (temperature 0.8):\nKING.\n" in out
    assert (tmp_path / "char_lm.h5").exists()
    with pytest.raises(CharModelError, match="held-out tenth of at least seq_length"):
        main(["--max-chars", "500", "--seq-length", "64"])


def test_the_script_runs_as_a_module(text) -> None:
    result = subprocess.run([sys.executable, "-m", "model_zoo.char_lm", "--max-chars", "4000", "--epochs", "1",
                             "--hidden", "16", "--seq-length", "32", "--sample-length", "20"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "bits per character" in result.stdout and "RuntimeWarning" not in result.stderr
