"""ArrayIterator: batch-last layout, the partial last batch, one-hot targets, seeded per-epoch shuffling, errors."""

from __future__ import annotations

import numpy as np
import pytest

from neon.data import ArrayIterator, DataError


def rows(n: int = 10, features: int = 3) -> np.ndarray:
    return np.arange(n * features, dtype=np.float64).reshape(n, features)


def test_batches_are_batch_last_with_a_partial_last_batch() -> None:
    X, y = rows(10), np.arange(10) % 4
    it = ArrayIterator(X, y, nclass=4, batch_size=4)
    assert (it.ndata, it.nbatches, it.batch_size, it.shape, it.nclass, it.y_shape) == (10, 3, 4, (3,), 4, (4,))
    batches = list(it)
    assert [x.shape for x, _ in batches] == [(3, 4), (3, 4), (3, 2)]  # 4 + 4 + 2: nothing dropped or wrapped
    assert all(x.dtype == np.float32 and x.flags.c_contiguous for x, _ in batches)
    np.testing.assert_array_equal(np.concatenate([x for x, _ in batches], axis=1), X.T)
    assert len(it) == 3


def test_targets_are_one_hot_classes_by_batch() -> None:
    y = np.array([2, 0, 1, 2, 1])
    (_, t), = ArrayIterator(rows(5), y, nclass=3, batch_size=5)
    assert t.shape == (3, 5) and t.dtype == np.float32
    np.testing.assert_array_equal(t.argmax(axis=0), y)
    np.testing.assert_array_equal(t.sum(axis=0), np.ones(5))


def test_targets_without_nclass_are_yielded_as_given_batch_last() -> None:
    y = np.arange(20, dtype=np.float32).reshape(10, 2)
    it = ArrayIterator(rows(10), y, batch_size=4)
    assert it.y_shape == (2,)
    np.testing.assert_array_equal(np.concatenate([t for _, t in it], axis=1), y.T)
    _, t = next(iter(ArrayIterator(rows(10), np.arange(10), batch_size=4)))
    np.testing.assert_array_equal(t, [0, 1, 2, 3])
    _, t = next(iter(ArrayIterator(rows(10), batch_size=4)))
    assert t is None


def test_lshape_gives_channel_height_width_batch() -> None:
    X = np.arange(5 * 12, dtype=np.float32).reshape(5, 12)
    x, _ = next(iter(ArrayIterator(X, batch_size=5, lshape=(3, 2, 2))))
    assert x.shape == (3, 2, 2, 5)
    np.testing.assert_array_equal(x[..., 1], X[1].reshape(3, 2, 2))


def test_shuffle_is_seeded_per_epoch_and_covers_every_row_once() -> None:
    X = rows(50, 1)
    first = ArrayIterator(X, batch_size=8, shuffle=True, seed=3)
    epochs = [np.concatenate([x[0] for x, _ in first]) for _ in range(3)]
    for order in epochs:
        np.testing.assert_array_equal(np.sort(order), X[:, 0])
    assert not np.array_equal(epochs[0], epochs[1])  # a new order every epoch
    assert not np.array_equal(epochs[0], X[:, 0])
    again = ArrayIterator(X, batch_size=8, shuffle=True, seed=3)
    again.set_epoch(2)  # resuming at epoch 2 sees epoch 2's order, whatever came before
    np.testing.assert_array_equal(np.concatenate([x[0] for x, _ in again]), epochs[2])
    other = ArrayIterator(X, batch_size=8, shuffle=True, seed=4)
    assert not np.array_equal(np.concatenate([x[0] for x, _ in other]), epochs[0])


def test_in_order_ignores_shuffle_and_epochs() -> None:
    it = ArrayIterator(rows(9, 1), batch_size=4, shuffle=True, seed=0)
    np.testing.assert_array_equal(np.concatenate([x[0] for x, _ in it.in_order()]), rows(9, 1)[:, 0])
    assert it.epoch == 0


def test_labels_follow_their_rows_when_shuffled() -> None:
    X = rows(30, 1)
    y = np.arange(30) % 5
    for x, t in ArrayIterator(X, y, nclass=5, batch_size=7, shuffle=True, seed=1):
        np.testing.assert_array_equal(t.argmax(axis=0), x[0].astype(int) % 5)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"y": np.arange(9)}, "expected one per row of X: 10"),
    ({"y": np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 10]), "nclass": 10}, "label 10 at row 9 is out of range"),
    ({"y": -np.ones(10, dtype=int), "nclass": 3}, "out of range"),
    ({"y": np.full(10, 0.5), "nclass": 3}, "expected integer labels"),
    ({"batch_size": 0}, "batch_size must be an int >= 1"),
    ({"lshape": (2, 2)}, "lshape (2, 2) has 4 elements"),
])
def test_bad_input_raises_data_error(kwargs: dict, message: str) -> None:
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ArrayIterator(rows(10), **kwargs)


def test_empty_or_one_dimensional_data_is_rejected() -> None:
    with pytest.raises(DataError, match="ndata >= 1"):
        ArrayIterator(np.zeros((0, 3)))
    with pytest.raises(DataError, match="shape"):
        ArrayIterator(np.zeros(5))
