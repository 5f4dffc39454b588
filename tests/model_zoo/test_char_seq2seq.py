"""model_zoo.char_seq2seq: the tasks, the masked cost, a few steps, greedy decoding, checkpoints, the CLI."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ngraph_core as ng
from model_zoo.char_models import CharModelError, masked_cross_entropy
from model_zoo.char_seq2seq import (
    BOS,
    EOS,
    Seq2Seq,
    main,
    make_pairs,
    task_vocabulary,
)
from neon.callbacks import Checkpoint
from neon.data.sequences import pad_sequences
from neon.data.text import Vocabulary
from neon.optimizers import Adam

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("task", ["reverse", "sort", "dates"])
def test_the_tasks_have_one_right_answer_and_unseen_held_out_sources(task) -> None:
    train, test = make_pairs(task, 300, 100, seed=1)
    assert len(train) == 300 and 0 < len(test) <= 100
    assert not {s for s, _ in test} & {s for s, _ in train}
    alphabet = set(task_vocabulary(task).tokens[3:])
    for source, target in train + test:
        assert set(source + target) <= alphabet
        if task == "reverse":
            assert target == source[::-1] and 3 <= len(source) <= 10
        elif task == "sort":
            assert target == "".join(sorted(source))
        else:
            assert datetime.datetime.strptime(target, "%d %b %Y").date().isoformat() == source
    assert make_pairs(task, 300, 100, seed=1) == (train, test)


def test_an_unknown_task_or_count_raises() -> None:
    with pytest.raises(CharModelError, match=r"expected a task among \['dates', 'reverse', 'sort'\].*hint"):
        make_pairs("translate", 10, 10)
    with pytest.raises(CharModelError, match="expected n_test to be an int >= 1, received 0"):
        make_pairs("dates", 10, 0)


def test_the_masked_cross_entropy_ignores_padded_steps() -> None:
    rng = np.random.default_rng(0)
    V, REC, N = ng.make_axis(5, "V"), ng.make_axis(4, "REC"), ng.make_axis(3, "N")
    logits, targets = ng.placeholder([V, REC, N]), ng.placeholder([REC, N], dtype="int32")
    lengths = ng.placeholder([N], dtype="int32")
    t = ng.transformers.make_transformer("numpy")
    comp = t.computation(masked_cross_entropy(logits, targets, lengths), logits, targets, lengths)
    z, y, n = rng.normal(size=(5, 4, 3)).astype(np.float32), rng.integers(0, 5, (4, 3)).astype(np.int32), \
        np.array([4, 2, 1], np.int32)
    log_p = z - np.log(np.exp(z).sum(0, keepdims=True))
    nll = [-log_p[y[s, k], s, k] for k in range(3) for s in range(n[k])]
    assert float(comp(z, y, n)) == pytest.approx(np.mean(nll), rel=1e-5)
    z[:, 3, 1] += 100.0  # a padded step of example 1: no effect
    assert float(comp(z, y, n)) == pytest.approx(np.mean(nll), rel=1e-5)
    with pytest.raises(CharModelError, match="expected targets with axes"):
        masked_cross_entropy(logits, ng.placeholder([N], dtype="int32"))


def small_model(task: str = "dates", hidden: int = 32) -> Seq2Seq:
    return Seq2Seq(task_vocabulary(task), embedding_dim=8, hidden=hidden, seed=0)


def test_a_few_teacher_forced_steps_reduce_the_loss() -> None:
    pairs, _ = make_pairs("dates", 96, 1, seed=0)
    model = small_model()
    history = model.fit_pairs(pairs, 6, Adam(1e-2, gradient_clip_norm=5.0), batch_size=32, seed=0)  # 18 steps
    costs = history["train_cost"]
    assert np.all(np.isfinite(costs)) and costs[-1] < 0.85 * costs[0], costs
    assert model.cost(pairs) < costs[0]
    assert len(model._steps) == 1  # one (batch, source, target) shape: one compiled step


def test_greedy_decoding_gives_strings_of_the_alphabet_and_bounded_length() -> None:
    model = small_model("reverse")
    outputs = model.decode(["abc", "zyxwvutsrq", "k"], max_length=7)
    assert len(outputs) == 3 and all(len(o) <= 7 for o in outputs)
    assert set("".join(outputs)) <= set("abcdefghijklmnopqrstuvwxyz")
    assert model.decode([]) == []
    assert model.decode(["abc"], max_length=7) == outputs[:1]  # batch-independent
    with pytest.raises(CharModelError, match="received one string"):
        model.decode("abc")


def test_greedy_decoding_agrees_with_the_teacher_forced_graph() -> None:
    """Feeding the greedy output back as the decoder input, each step's argmax is the next token."""
    model = small_model("reverse", hidden=16)
    model.build()
    sources = ["abcd", "qq", "hello"]
    steps = 6
    vocab = model.vocab
    comp = model._compile_decode(len(sources), 5, steps)
    x, lengths = pad_sequences([vocab.encode(s) for s in sources])
    tokens = np.asarray(comp(x, lengths))  # [steps, N], end of sequence not cut
    decoder_input = np.concatenate([np.full((1, 3), vocab.index[BOS], np.int32), tokens[:-1].astype(np.int32)])
    src, src_len = model._ids(5, 3, "s"), model._lengths(3, "sl")
    dec, dec_len = model._ids(steps, 3, "d"), model._lengths(3, "dl")
    logits = model.teacher_forced_logits(src, src_len, dec, dec_len)
    forced = model.transformer.computation(logits, src, src_len, dec, dec_len, mode="inference")
    out = np.asarray(forced(x, lengths, decoder_input, np.full(3, steps, np.int32)))
    np.testing.assert_array_equal(out.argmax(axis=0), tokens)


def test_a_vocabulary_without_the_specials_raises() -> None:
    with pytest.raises(CharModelError, match=r"expected a vocabulary with <pad> \(id 0\), <s> and </s>"):
        Seq2Seq(Vocabulary.from_text("abc"))


def test_a_checkpoint_restores_the_same_decoder(tmp_path) -> None:
    pairs, test = make_pairs("dates", 64, 8, seed=2)
    model = small_model()
    model.fit_pairs(pairs, 1, Adam(1e-2), batch_size=32)
    model.save_params(tmp_path / "s2s.h5")
    again = small_model()
    again.load_params(tmp_path / "s2s.h5")
    sources = [s for s, _ in test]
    assert again.decode(sources) == model.decode(sources) and again.epoch == 1


def test_the_cli_trains_and_reports_exact_match_and_cer(tmp_path, capsys) -> None:
    assert main(["--task", "sort", "--epochs", "1", "--n-train", "64", "--n-test", "16", "--hidden", "16",
                 "--batch-size", "32", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "task sort: 64 training" in out and "epoch 1/1" in out and "held-out: exact match" in out and "CER" in out
    assert (tmp_path / "sort.h5").exists()


def test_the_script_runs_as_a_module() -> None:
    result = subprocess.run([sys.executable, "-m", "model_zoo.char_seq2seq", "--task", "reverse", "--epochs", "1",
                             "--n-train", "32", "--n-test", "8", "--hidden", "16", "--batch-size", "32"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "held-out: exact match" in result.stdout and "RuntimeWarning" not in result.stderr
    assert EOS not in result.stdout


def test_fit_resumes_from_a_checkpoint(tmp_path) -> None:
    pairs, _ = make_pairs("sort", 64, 1, seed=3)
    first = small_model("sort", hidden=16)
    first.fit_pairs(pairs, 1, Adam(1e-2), batch_size=32, callbacks=[Checkpoint(tmp_path / "last.h5")])
    resumed = small_model("sort", hidden=16)
    history = resumed.fit_pairs(pairs, 2, Adam(1e-2), batch_size=32, resume_from=tmp_path / "last.h5")
    assert resumed.epoch == 2 and history["epoch"] == [1, 2]
    assert history["train_cost"][0] == first.history["train_cost"][0]
