"""ImageIterator: batch-last images, crop and flip on hand-made images, seeded per-epoch augmentation,
normalization, and Model.fit training on it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from neon.activations import Softmax
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator, DataError, ImageIterator, channel_stats, make_shapes_dataset
from neon.data.augment import random_crop, random_flip
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine
from neon.metrics import Accuracy
from neon.model import Model
from neon.optimizers import GradientDescentMomentum


def images(n: int = 20, c: int = 2, h: int = 5, w: int = 6, seed: int = 0) -> np.ndarray:
    """uint8 images with no zero pixel, so zero padding is recognisable."""
    return np.random.default_rng(seed).integers(1, 256, (n, c, h, w), dtype=np.uint8)


def epoch_batches(it: ImageIterator) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(x.copy(), t.copy()) for x, t in it]


def test_batches_are_channel_height_width_batch_with_one_hot_targets() -> None:
    X, y = images(10), np.arange(10) % 3
    it = ImageIterator(X, y, nclass=3, batch_size=4, crop_padding=1, flip=True, seed=0)
    assert isinstance(it, ArrayIterator)  # the same protocol: Model.fit calls set_epoch, reads shape/y_shape
    assert (it.ndata, it.nbatches, it.shape, it.y_shape, len(it)) == (10, 3, (2, 5, 6), (3,), 3)
    batches = list(it)
    assert [x.shape for x, _ in batches] == [(2, 5, 6, 4), (2, 5, 6, 4), (2, 5, 6, 2)]
    assert all(x.dtype == np.float32 and x.flags.c_contiguous for x, _ in batches)
    np.testing.assert_array_equal(np.concatenate([t.argmax(axis=0) for _, t in batches]), y)
    # in_order: data order, never augmented, epoch untouched
    plain = np.concatenate([x for x, _ in it.in_order()], axis=-1)
    np.testing.assert_array_equal(plain, np.moveaxis(X, 0, -1).astype(np.float32))
    assert it.epoch == 1


def test_flat_rows_with_lshape_and_bad_shapes() -> None:
    X = images(4)
    x, _ = next(iter(ImageIterator(X.reshape(4, -1), lshape=(2, 5, 6), batch_size=4)))
    np.testing.assert_array_equal(x, np.moveaxis(X, 0, -1))
    with pytest.raises(DataError, match=r"expected one \(C, H, W\) image per row"):
        ImageIterator(X.reshape(4, -1))
    with pytest.raises(DataError, match="crop_padding must be an int >= 0"):
        ImageIterator(X, crop_padding=-1)
    with pytest.raises(DataError, match=r"label 7 at row 0 is out of range"):  # ArrayIterator's checks apply
        ImageIterator(X, np.array([7, 0, 0, 0]), nclass=3)
    with pytest.raises(DataError, match="std .* has a channel <= 0"):
        ImageIterator(X, std=[1.0, 0.0])
    with pytest.raises(DataError, match=r"mean must be one finite number or one per channel \(2\)"):
        ImageIterator(X, mean=[1.0, 2.0, 3.0])


def test_random_crop_on_a_hand_made_image() -> None:
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    crop = lambda dy, dx: random_crop(x, 1, None, offsets=np.array([[dy, dx]]))[0, 0]
    np.testing.assert_array_equal(crop(1, 1), x[0, 0])  # the centre window is the image
    np.testing.assert_array_equal(crop(0, 0), [[0, 0, 0, 0], [0, 1, 2, 3], [0, 5, 6, 7], [0, 9, 10, 11]])
    np.testing.assert_array_equal(crop(2, 1), [[5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16], [0, 0, 0, 0]])
    np.testing.assert_array_equal(crop(1, 2), [[2, 3, 4, 0], [6, 7, 8, 0], [10, 11, 12, 0], [14, 15, 16, 0]])
    # per image offsets in one call, every channel shifted alike
    two = np.stack([x[0], x[0] + 100]).repeat(2, axis=1)  # (2 images, 2 channels, 4, 4)
    out = random_crop(two, 1, None, offsets=np.array([[0, 0], [2, 2]]))
    np.testing.assert_array_equal(out[0, 1], crop(0, 0))
    np.testing.assert_array_equal(out[1, 0, :3, :3], two[1, 0, 1:, 1:])
    assert out[1, 0, 3].tolist() == [0, 0, 0, 0]


def test_random_flip_mirrors_the_chosen_images_left_right() -> None:
    x = np.arange(2 * 1 * 2 * 3, dtype=np.float32).reshape(2, 1, 2, 3)
    out = random_flip(x.copy(), None, flips=np.array([True, False]))
    np.testing.assert_array_equal(out[0, 0], [[2, 1, 0], [5, 4, 3]])
    np.testing.assert_array_equal(out[1], x[1])


def test_every_augmented_image_is_a_shift_and_maybe_a_mirror_of_its_source() -> None:
    X = images(40, h=6, w=6)
    it = ImageIterator(X, np.arange(40), batch_size=16, shuffle=True, seed=5, crop_padding=2, flip=True)
    padded = np.pad(X, ((0, 0), (0, 0), (2, 2), (2, 2))).astype(np.float32)
    seen_offsets, flipped = set(), 0
    for x, rows in it:
        for k, row in enumerate(rows):
            matches = [(dy, dx, f) for dy, dx, f in itertools.product(range(5), range(5), (False, True))
                       if np.array_equal(x[..., k], (lambda w: w[..., ::-1] if f else w)(
                           padded[row, :, dy:dy + 6, dx:dx + 6]))]
            assert matches, f"image {row} is no shift/mirror of its source"
            seen_offsets.add(matches[0][:2])
            flipped += matches[0][2]
    assert len(seen_offsets) > 12 and 10 <= flipped <= 30  # offsets spread over the 25, about half mirrored


def test_augmentation_is_seeded_per_epoch_and_resumes_exactly() -> None:
    X, y = images(30), np.arange(30) % 5
    make = lambda seed: ImageIterator(X, y, nclass=5, batch_size=8, shuffle=True, seed=seed, normalize=True,
                                      crop_padding=2, flip=True)
    run = make(3)
    epochs = [epoch_batches(run) for _ in range(3)]
    assert not np.array_equal(epochs[0][0][0], epochs[1][0][0])
    again = make(3)
    for e in (2, 0):  # resuming at any epoch sees that epoch's batches, whatever came before
        again.set_epoch(e)
        for (x, t), (x2, t2) in zip(epochs[e], epoch_batches(again), strict=True):
            np.testing.assert_array_equal(x, x2)
            np.testing.assert_array_equal(t, t2)
    np.testing.assert_array_equal(again.order(1), ArrayIterator(X, y, shuffle=True, seed=3).order(1))
    assert not np.array_equal(epoch_batches(make(4))[0][0], epochs[0][0][0])


def test_normalization_uses_training_statistics() -> None:
    X = images(50, c=3, seed=1)
    X[:, 1] //= 4  # channels with different statistics
    mean, std = channel_stats(X)
    Xf = X.astype(np.float64)
    np.testing.assert_allclose(mean, Xf.mean(axis=(0, 2, 3)), rtol=1e-6)
    np.testing.assert_allclose(std, Xf.std(axis=(0, 2, 3)), rtol=1e-6)
    train = ImageIterator(X, batch_size=16, normalize=True)
    np.testing.assert_array_equal(train.mean, mean)
    out = np.concatenate([x for x, _ in train.in_order()], axis=-1).astype(np.float64)
    np.testing.assert_allclose(out.mean(axis=(1, 2, 3)), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=(1, 2, 3)), 1.0, atol=1e-5)
    # a test set normalized with the training statistics, and scalar statistics for every channel
    test = ImageIterator(X[:7], batch_size=7, mean=train.mean, std=train.std)
    np.testing.assert_allclose(next(iter(test))[0], out[..., :7], atol=1e-5)
    x, _ = next(iter(ImageIterator(X[:2], batch_size=2, mean=128, std=64)))
    np.testing.assert_allclose(x, (np.moveaxis(Xf[:2], 0, -1) - 128) / 64, atol=1e-5)


def test_padding_is_zero_in_normalized_units() -> None:
    X = np.full((8, 1, 4, 4), 200, dtype=np.uint8)
    it = ImageIterator(X, batch_size=8, mean=100, std=50, crop_padding=3, seed=0)
    x, _ = next(iter(it))
    assert set(np.unique(x).tolist()) <= {0.0, 2.0} and (x == 0).any()


def test_model_fit_trains_on_augmented_images() -> None:
    (X, y), (Xt, yt) = make_shapes_dataset(1000, 200)
    train = ImageIterator(X, y, nclass=10, batch_size=50, shuffle=True, seed=0, normalize=True, crop_padding=2,
                          flip=True)
    test = ImageIterator(Xt, yt, nclass=10, batch_size=100, mean=train.mean, std=train.std)
    model = Model([Affine(10, GlorotUniform(seed=0), bias=Constant(0.0), activation=Softmax())])
    history = model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.005, 0.9), num_epochs=4,
                        valid_set=test, metric=Accuracy(), progress=False)
    assert history["train_cost"][-1] < history["train_cost"][0]
    assert history["valid_accuracy"][-1] > 0.25  # measured 0.365 (chance 0.10) for this linear model
