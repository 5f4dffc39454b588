"""``Model`` on variable-length sequences: ``((x, lengths), y)`` batches of frames or tokens, one
computation per (batch size, length), lengths reaching the recurrent layers, the CTC cost's own
targets, and checkpoints that remember the input kind."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neon.activations import Softmax
from neon.costs import CTC, CrossEntropyMulti, pack_ctc_targets
from neon.data import SequenceIterator
from neon.layers import GRU, LSTM, Affine, BiRNN, LookupTable
from neon.metrics import Accuracy
from neon.model import Model
from neon.optimizers import Adam


def sign_task(n: int = 96, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """Sequences of 3-D frames, 4 to 12 steps; the label is the sign of the first feature's sum."""
    rng = np.random.default_rng(seed)
    seqs = [rng.standard_normal((int(rng.integers(4, 13)), 3)).astype(np.float32) for _ in range(n)]
    return seqs, np.array([int(s[:, 0].sum() > 0) for s in seqs])


def test_frames_train_evaluate_and_compile_per_length() -> None:
    seqs, y = sign_task()
    train = SequenceIterator(seqs, y, nclass=2, batch_size=16, bucket_boundaries=[6, 9], shuffle=True, seed=0)
    model = Model([LSTM(16), Affine(2, activation=Softmax())])
    history = model.fit(train, CrossEntropyMulti(), Adam(0.02), 12, progress=False)
    assert model.input_kind == "frames" and model.input_shape[0] == 3
    assert history["train_cost"][-1] < 0.6 * history["train_cost"][0], history["train_cost"]
    assert model.eval(SequenceIterator(*sign_task(64, seed=1), nclass=2, batch_size=32), Accuracy()) > 0.8
    lengths = {key[1][1] for key in model._train.sizes()}
    assert len(lengths) > 1  # bucketing: several T, each its own cached computation
    assert model.get_outputs(SequenceIterator(seqs[:5], y[:5], nclass=2, batch_size=5)).shape == (5, 2)


def test_padding_beyond_the_lengths_does_not_change_outputs() -> None:
    seqs, y = sign_task(8)
    model = Model([GRU(8), Affine(2, activation=Softmax())])
    data = SequenceIterator(seqs, y, nclass=2, batch_size=8)
    out = model.get_outputs(data)
    padded = SequenceIterator(seqs, y, nclass=2, batch_size=8, pad_value=7.0)  # garbage past each length
    np.testing.assert_allclose(model.get_outputs(padded), out, rtol=1e-5, atol=1e-6)


def test_tokens_through_an_embedding() -> None:
    rng = np.random.default_rng(2)
    seqs = [rng.integers(1, 20, int(rng.integers(3, 9))) for _ in range(64)]
    y = np.array([int((s == 3).any()) for s in seqs])  # does token 3 occur?
    data = SequenceIterator(seqs, y, nclass=2, batch_size=16, shuffle=True, seed=1)
    model = Model([LookupTable(20, 8), LSTM(16), Affine(2, activation=Softmax())])
    history = model.fit(data, CrossEntropyMulti(), Adam(0.03), 10, progress=False)
    assert model.input_kind == "tokens"
    assert history["train_cost"][-1] < 0.7 * history["train_cost"][0], history["train_cost"]


def test_ctc_cost_builds_its_own_targets() -> None:
    rng = np.random.default_rng(3)
    labels = [list(rng.integers(1, 4, int(rng.integers(1, 3)))) for _ in range(32)]
    # each label k is "spoken" as 3 frames where feature k is high; blank frames between
    seqs = []
    for lab in labels:
        frames = [np.eye(4, dtype=np.float32)[0]] * 2
        for k in lab:
            frames += [np.eye(4, dtype=np.float32)[k]] * 3 + [np.eye(4, dtype=np.float32)[0]] * 2
        seqs.append(np.stack(frames) + 0.1 * rng.standard_normal((len(frames), 4)).astype(np.float32))
    targets = pack_ctc_targets(labels, [len(s) for s in seqs])
    data = SequenceIterator(seqs, targets, batch_size=16, shuffle=True, seed=0)
    model = Model([BiRNN(12, return_sequence=True), Affine(4)])
    history = model.fit(data, CTC(blank=0), Adam(0.03), 15, progress=False)
    assert history["train_cost"][-1] < 0.5 * history["train_cost"][0], history["train_cost"]


def test_a_sequence_checkpoint_rebuilds_a_fresh_model(tmp_path: Path) -> None:
    seqs, y = sign_task(32)
    data = SequenceIterator(seqs, y, nclass=2, batch_size=16)
    model = Model([LSTM(8), Affine(2, activation=Softmax())])
    model.fit(data, CrossEntropyMulti(), Adam(0.01), 1, progress=False)
    model.save_params(tmp_path / "seq.h5")
    fresh = Model([LSTM(8), Affine(2, activation=Softmax())])
    fresh.load_params(tmp_path / "seq.h5")
    assert fresh.input_kind == "frames"
    np.testing.assert_allclose(fresh.get_outputs(data), model.get_outputs(data), rtol=1e-6)


def test_sequence_outputs_of_batches_of_other_lengths_are_padded_to_the_longest() -> None:
    seqs, y = sign_task(20)
    data = SequenceIterator(seqs, y, nclass=2, batch_size=6, bucket_boundaries=[6, 9])
    model = Model([GRU(5, return_sequence=True)])
    out = model.get_outputs(data)  # (ndata, H, REC)
    longest = max(len(s) for s in seqs)
    assert out.shape == (20, 5, longest)
    for i, s in enumerate(seqs):  # zero past each sequence's own end
        assert np.all(out[i, :, len(s):] == 0) and np.any(out[i, :, len(s) - 1] != 0)
