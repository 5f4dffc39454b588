"""model_zoo.ctc_speech: labels, features, packed targets, a few steps, the CI-sized CER bar, the CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model_zoo.ctc_speech import (
    ALPHABET,
    CI_CER_BAR,
    CI_SETTINGS,
    NCLASS,
    CTCIterator,
    SpeechRecipeError,
    ctc_speech_net,
    decode_labels,
    encode_text,
    load_digit_speech,
    main,
    prepare,
    split_by_voice,
    train,
)
from neon.costs import CTC
from neon.model import Model
from neon.optimizers import Adam

ROOT = Path(__file__).resolve().parents[2]
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason="espeak-ng is not installed (make venv installs it as root)")


def test_the_alphabet_spells_every_digit_word() -> None:
    assert ALPHABET == " efghinorstuvwxz" and NCLASS == 17
    text = "zero one two three four five six seven eight nine"
    labels = encode_text(text)
    assert 0 not in labels and decode_labels(labels) == text
    with pytest.raises(SpeechRecipeError, match=r"expected characters of .* received \['A'\].*hint"):
        encode_text("Ae")


def test_prepare_normalises_each_band_and_stacks_frames() -> None:
    x = np.random.default_rng(0).normal(3.0, 2.0, size=(101, 80))
    y = prepare(x, stack=2)
    assert y.shape == (51, 160) and y.dtype == np.float32
    frames = y.reshape(102, 80)[:101]  # unstacked
    np.testing.assert_allclose(frames.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(frames.std(axis=0), 1.0, atol=1e-4)
    np.testing.assert_array_equal(y[-1, 80:], 0.0)  # the odd last frame is padded with zeros
    np.testing.assert_allclose(y[1, :80], prepare(x, 1)[2], rtol=1e-6)


def test_the_iterator_packs_ctc_targets_with_the_model_frame_counts() -> None:
    frames = [np.zeros((t, 4), np.float32) for t in (5, 9, 7)]
    labels = [encode_text("one"), encode_text("six two"), encode_text("four")]
    it = CTCIterator(frames, labels, batch_size=3)
    (x, lengths), y = next(iter(it))
    assert x.shape == (4, 9, 3) and y.shape == (2 + 7, 3)
    assert y[0].tolist() == lengths.tolist() == [5, 9, 7] and y[1].tolist() == [3, 7, 4]
    assert y[2:5, 0].tolist() == labels[0] and y[5:, 0].tolist() == [0] * 4


def test_the_held_out_voices_are_split_off() -> None:
    train_ids, test_ids = split_by_voice(["en-us+f3", "en-gb+f1", "en-029+m1", "en-us+m1"])
    assert train_ids == [1, 3] and test_ids == [0, 2]
    with pytest.raises(SpeechRecipeError, match="hint: use more utterances"):
        split_by_voice(["en-gb+f1"])


def test_a_few_steps_reduce_the_ctc_loss() -> None:
    """Synthetic 'speech': each label is a burst of its own random feature pattern, 4 frames long."""
    rng = np.random.default_rng(0)
    patterns = rng.normal(size=(NCLASS, 12)).astype(np.float32)
    frames, labels = [], []
    for _ in range(32):
        seq = [int(k) for k in rng.integers(1, NCLASS, size=int(rng.integers(2, 5)))]
        x = np.concatenate([np.repeat(patterns[k][None], 4, axis=0) for k in seq])
        frames.append(x + 0.1 * rng.normal(size=x.shape).astype(np.float32))
        labels.append(seq)
    data = CTCIterator(frames, labels, batch_size=16, shuffle=True, seed=0)
    model = Model(ctc_speech_net(hidden=16, conv_filters=16, seed=0))
    history = model.fit(data, CTC(), Adam(1e-2, gradient_clip_norm=5.0), 4, progress=False)
    costs = history["train_cost"]
    assert np.all(np.isfinite(costs)) and costs[-1] < 0.8 * costs[0], costs


@needs_espeak
def test_the_ci_sized_run_reaches_the_stated_cer(tmp_path) -> None:
    result = train(**CI_SETTINGS, out=tmp_path)
    assert result.cer < CI_CER_BAR, result.samples[:5]
    assert len(result.history["train_cost"]) == CI_SETTINGS["epochs"]


@needs_espeak
def test_the_cli_writes_its_files(tmp_path, capsys) -> None:
    assert main(["--n-utterances", "40", "--epochs", "1", "--hidden", "8", "--batch-size", "20",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "held-out voices" in out and "epoch 1/1" in out and "test CER:" in out
    assert {p.name for p in tmp_path.iterdir()} == {"ctc_speech.h5", "ctc_speech_history.csv",
                                                    "ctc_speech_samples.txt"}
    assert "->" in (tmp_path / "ctc_speech_samples.txt").read_text()
    feats, texts, _ = load_digit_speech(40)  # cached: no synthesis the second time
    model = Model(ctc_speech_net(8))
    model.build(prepare(feats[0]).T.shape, kind="frames")
    model.load_params(tmp_path / "ctc_speech.h5")  # the saved file fits a fresh network


@needs_espeak
@pytest.mark.slow
def test_the_script_runs_as_a_module(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "model_zoo.ctc_speech", "--n-utterances", "40", "--epochs", "1",
                             "--hidden", "8", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "test CER:" in result.stdout and (tmp_path / "ctc_speech.h5").exists()
