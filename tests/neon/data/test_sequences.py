"""SequenceIterator: exact padding and lengths, bucketing, partial batches, per-epoch determinism."""

from __future__ import annotations

import numpy as np
import pytest

from neon.data import DataError, SequenceIterator, pad_sequences, sequence_mask


def token_data(n: int = 23, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 50, size=int(rng.integers(1, 30))) for _ in range(n)]


def test_token_padding_lengths_and_mask_are_exact() -> None:
    data, lengths = pad_sequences([np.array([1, 2, 3]), np.array([4]), np.array([5, 6])], value=-1)
    assert data.dtype == np.int32 and lengths.dtype == np.int32
    assert data.tolist() == [[1, 4, 5], [2, -1, 6], [3, -1, -1]]
    assert lengths.tolist() == [3, 1, 2]
    assert sequence_mask(lengths, 3).tolist() == (data != -1).tolist()


def test_frame_padding_is_features_rec_batch() -> None:
    a, b = np.arange(6, dtype=np.float32).reshape(3, 2), np.full((1, 2), 9.0)
    data, lengths = pad_sequences([a, b], length=4)
    assert data.shape == (2, 4, 2) and data.dtype == np.float32  # [F, REC, N]
    np.testing.assert_array_equal(data[:, :3, 0], a.T)
    np.testing.assert_array_equal(data[:, :, 1], [[9, 0, 0, 0], [9, 0, 0, 0]])
    assert lengths.tolist() == [3, 1]


def test_labels_one_hot_and_target_sequences_with_lengths() -> None:
    seqs = [[1, 2, 3], [4], [5, 6]]
    (x, lengths), y = next(iter(SequenceIterator(seqs, targets=[1, 0, 1], nclass=2, batch_size=3)))
    assert x.shape == (3, 3) and lengths.tolist() == [3, 1, 2]
    assert y.tolist() == [[0, 1, 0], [1, 0, 1]]
    frames = [np.ones((t, 4)) for t in (5, 2, 3)]
    it = SequenceIterator(frames, targets=[[7], [8, 9, 10], [11, 12]], batch_size=2)
    ((x, lengths), (y, y_lengths)), ((x2, _), (y2, _)) = list(it)
    assert x.shape == (4, 5, 2) and lengths.tolist() == [5, 2]
    assert y.tolist() == [[7, 8], [0, 9], [0, 10]] and y_lengths.tolist() == [1, 3]
    assert x2.shape == (4, 3, 1) and y2.tolist() == [[11], [12]]
    assert next(iter(SequenceIterator(seqs, batch_size=2)))[1] is None


def test_last_partial_batch_has_its_true_size_and_every_sequence_appears_once() -> None:
    it = SequenceIterator(token_data(10), batch_size=4, shuffle=True, seed=3)
    sizes = [lengths.size for (_, lengths), _ in it]
    assert sizes == [4, 4, 2] and len(it) == 3
    assert sorted(np.concatenate(it.batch_indices(0)).tolist()) == list(range(10))


def test_bucketing_groups_similar_lengths_and_pads_to_the_bucket_bound() -> None:
    seqs = token_data(200)
    it = SequenceIterator(seqs, batch_size=8, bucket_boundaries=[5, 10, 20], shuffle=True, seed=1)
    batches, indices = list(iter(it)), it.batch_indices(0)
    assert len(batches) == len(indices) == it.nbatches
    assert sorted(np.concatenate(indices).tolist()) == list(range(200))
    for ((x, lengths), _), index in zip(batches, indices):
        bucket = np.searchsorted([5, 10, 20], lengths, side="left")
        assert np.all(bucket == bucket[0]), lengths  # one bucket per batch
        bound = [5, 10, 20, int(lengths.max())][bucket[0]]
        assert x.shape == (bound, lengths.size)
        assert lengths.tolist() == [len(seqs[i]) for i in index]
        for n, i in enumerate(index):  # values exact, padding zero
            assert x[: len(seqs[i]), n].tolist() == seqs[i].tolist() and not x[len(seqs[i]):, n].any()
    assert {x.shape[0] for (x, _), _ in batches} >= {5, 10, 20}


def test_set_epoch_reproduces_an_epoch_and_epochs_differ() -> None:
    seqs = token_data(50)

    def epoch_lengths(it: SequenceIterator) -> list[list[int]]:
        return [lengths.tolist() for (_, lengths), _ in it]

    it = SequenceIterator(seqs, batch_size=8, bucket_boundaries=[10], shuffle=True, seed=7)
    epochs = [epoch_lengths(it) for _ in range(3)]
    resumed = SequenceIterator(seqs, batch_size=8, bucket_boundaries=[10], shuffle=True, seed=7)
    resumed.set_epoch(2)
    assert epoch_lengths(resumed) == epochs[2]
    assert epochs[0] != epochs[1]
    other = SequenceIterator(seqs, batch_size=8, bucket_boundaries=[10], shuffle=True, seed=8)
    assert [i.tolist() for i in other.batch_indices(0)] != [i.tolist() for i in it.batch_indices(0)]


def test_in_order_is_data_order_without_advancing_the_epoch() -> None:
    seqs = token_data(9)
    it = SequenceIterator(seqs, batch_size=4, bucket_boundaries=[5], shuffle=True, seed=0)
    lengths = np.concatenate([lengths for (_, lengths), _ in it.in_order()])
    assert lengths.tolist() == [len(s) for s in seqs] and it.epoch == 0


@pytest.mark.parametrize("kwargs, match", [
    ({"sequences": [[1, 2], np.ones((2, 3))]}, "sequence 1"),
    ({"sequences": [[1, 2], np.array([], dtype=np.int64)]}, "sequence 1 is empty"),
    ({"sequences": [np.ones((2, 3)), np.ones((2, 4))]}, "feature sizes"),
    ({"sequences": [[1], [2]], "targets": [0]}, "expected 2 labels"),
    ({"sequences": [[1], [2]], "targets": [0, 2], "nclass": 2}, "nclass=2"),
    ({"sequences": [[1], [2]], "bucket_boundaries": [5, 5]}, "increasing"),
    ({"sequences": [[1], [2]], "batch_size": 0}, "batch_size"),
])
def test_bad_inputs_raise_data_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(DataError, match=match):
        SequenceIterator(**kwargs)
