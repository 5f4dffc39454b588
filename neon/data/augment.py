"""``ImageIterator``: image minibatches, batch axis last, with seeded on-the-fly augmentation.

Each training batch is gathered from the stored images (kept in their own dtype: uint8 CIFAR
stays 150 MB, not 600 MB of float32), converted to float32, normalized per channel, randomly
cropped from a zero-padded copy and randomly flipped left-right — every step vectorized over
the batch with NumPy (strided views and one gather; no Python loop over images) — then laid
out ``(C, H, W, batch)`` as neon's models consume it.

**Order of the steps.** Normalization comes first, so the padding is zero in the normalized
units, i.e. the channel mean when normalizing — as in He et al. 2016, who pad mean-subtracted
images with zeros; without normalization it is plain zero (black).

**Reproducibility.** Epoch ``e`` visits the rows in ``order(e)``, the same seeded permutation
as ``ArrayIterator``'s, and batch ``i`` of epoch ``e`` draws its crops and flips from
``numpy.random.default_rng([seed, e, 1, i])``: a run resumed at epoch ``e`` (``set_epoch``,
as ``Model.fit`` does) sees exactly the same augmented batches as an uninterrupted one.

**Cost, and why there is no background thread.** Measured on the project's 2-core CPU machine,
one batch of 64 CIFAR images (3x32x32 uint8) takes 0.62 ms with normalization, pad-4 crop and
flip (0.48 ms of it is the gather, float conversion and batch-last transpose that any
iterator pays; crop and flip add 0.15 ms). One training step of the small CIFAR CNN
(conv32-pool-conv64-pool-fc256-fc10) at batch 64 takes 30 ms in PyTorch on the same machine,
and of ResNet-20 114 ms: the augmentation is about 2% of the cheapest step and 0.5% of
ResNet-20's. So batches are made in the training thread when asked for; a
prefetching thread could hide at most that 2% while competing with the BLAS threads for the
same cores, and would add ordering and shutdown logic.

``in_order()`` (what ``Model.eval`` and ``get_outputs`` use) yields the batches in data order,
normalized but never augmented.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .iterators import ArrayIterator, Batch, DataError

AUGMENT_STREAM = 1  # keeps the augmentation seeds [seed, e, 1, i] apart from the order's [seed, e]
STATS_CHUNK = 4096  # images per chunk when computing channel statistics (bounds the float64 temporaries)


def channel_stats(X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of images ``(n, C, H, W)``, in their own units.

    Args:
        X: images ``(n, C, H, W)``, any numeric dtype (uint8 0-255 gives means near 128).

    Returns:
        ``(mean, std)``: float32 ``(C,)`` each, over all images and pixels (population std).

    Raises:
        DataError: ``X`` that is not ``(n, C, H, W)`` with n >= 1.

    Example:
        >>> mean, std = channel_stats(X_train)  # then ImageIterator(X_test, ..., mean=mean, std=std)
    """
    X = np.asarray(X)
    if X.ndim != 4 or X.shape[0] == 0:
        raise DataError(f"channel_stats: expected images of shape (n, C, H, W) with n >= 1, received {X.shape}")
    total = np.zeros(X.shape[1])
    squares = np.zeros(X.shape[1])
    for start in range(0, X.shape[0], STATS_CHUNK):
        chunk = X[start:start + STATS_CHUNK].astype(np.float64)
        total += chunk.sum(axis=(0, 2, 3))
        squares += np.square(chunk).sum(axis=(0, 2, 3))
    count = X.shape[0] * X.shape[2] * X.shape[3]
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
    return mean.astype(np.float32), std.astype(np.float32)


def _per_channel(value: Any, channels: int, name: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    if array.size == 1:
        array = np.repeat(array, channels)
    if array.size != channels or not np.all(np.isfinite(array)):
        raise DataError(f"ImageIterator: {name} must be one finite number or one per channel ({channels}), "
                        f"received {value!r}")
    return array.astype(np.float32)


class ImageIterator(ArrayIterator):
    """Minibatches of images ``(C, H, W, batch)`` with per-channel normalization, random crop and flip.

    Args:
        X: images ``(ndata, C, H, W)`` (or ``(ndata, features)`` with ``lshape``), kept in their dtype.
        y, nclass, batch_size, shuffle, seed: as for ``ArrayIterator`` (one-hot ``(nclass, batch)``
            targets, the last batch at its true size, seeded per-epoch order).
        lshape: ``(C, H, W)`` of one image when ``X`` is flat.
        normalize: subtract a per-channel mean and divide by a per-channel std; the statistics
            are ``mean``/``std`` when given, else computed from ``X`` (``channel_stats``).
        mean, std: per-channel statistics in ``X``'s units (one number, or one per channel);
            giving either turns normalization on. Pass a training iterator's ``mean``/``std``
            to its test iterator.
        crop_padding: pad each image with this many zeros on every side and crop a random
            ``H x W`` window from it (0: no cropping; CIFAR-10 recipes use 4).
        flip: mirror each image left-right with probability 1/2.

    Attributes:
        those of ``ArrayIterator``; ``mean`` and ``std`` (float32 ``(C,)``, or None without
        normalization); ``augment`` (whether iteration crops or flips).

    Raises:
        DataError: ``X`` that is not one image per row, a bad ``lshape``, ``crop_padding`` or
            statistics (a std of zero), and ``ArrayIterator``'s errors for ``y`` and ``batch_size``.

    Example:
        >>> (X, y), (Xt, yt) = load_cifar10("~/data")  # uint8 (n, 3, 32, 32)
        >>> train = ImageIterator(X, y, nclass=10, batch_size=64, shuffle=True, seed=0,
        ...                       normalize=True, crop_padding=4, flip=True)
        >>> test = ImageIterator(Xt, yt, nclass=10, batch_size=500, mean=train.mean, std=train.std)
        >>> x, t = next(iter(train))  # x (3, 32, 32, 64) float32, t (10, 64) one-hot
    """

    def __init__(self, X: Any, y: Any = None, nclass: int | None = None, batch_size: int = 128,
                 lshape: tuple[int, ...] | None = None, shuffle: bool = False, seed: int | None = None,
                 normalize: bool = False, mean: Any = None, std: Any = None, crop_padding: int = 0,
                 flip: bool = False) -> None:
        X = np.asarray(X)
        if X.ndim < 2 or X.shape[0] == 0 or not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_):
            raise DataError(f"ImageIterator: expected numeric images of shape (ndata, C, H, W) with ndata >= 1, "
                            f"received shape {X.shape} and dtype {X.dtype}")
        shape = tuple(int(n) for n in (lshape if lshape is not None else X.shape[1:]))
        if len(shape) != 3 or math.prod(shape) != math.prod(X.shape[1:]):
            raise DataError(f"ImageIterator: expected one (C, H, W) image per row of X, received X of shape "
                            f"{X.shape} with lshape {lshape}; hint: pass lshape=(C, H, W) for flat rows")
        if isinstance(crop_padding, bool) or not isinstance(crop_padding, (int, np.integer)) or crop_padding < 0:
            raise DataError(f"ImageIterator: crop_padding must be an int >= 0, received {crop_padding!r}")
        # ArrayIterator validates y, nclass and batch_size and owns the order and epoch; it is
        # handed no features (an (ndata, 0) array costs nothing) because the images are kept
        # here in their own dtype rather than as its float32 copy.
        super().__init__(np.zeros((X.shape[0], 0), dtype=np.float32), y, nclass=nclass, batch_size=batch_size,
                         shuffle=shuffle, seed=seed)
        self.shape = shape
        self._images = np.ascontiguousarray(X.reshape((self.ndata, *shape)))
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None
        if normalize or mean is not None or std is not None:
            computed = channel_stats(self._images) if mean is None or std is None else (None, None)
            self.mean = _per_channel(computed[0] if mean is None else mean, shape[0], "mean")
            self.std = _per_channel(computed[1] if std is None else std, shape[0], "std")
            if np.any(self.std <= 0):
                raise DataError(f"ImageIterator: std {self.std.tolist()} has a channel <= 0, which cannot normalize; "
                                "hint: a constant channel has std 0: give std=1 for it")
        self.crop_padding = int(crop_padding)
        self.flip = bool(flip)
        self.augment = self.crop_padding > 0 or self.flip

    # -- iteration (order, set_epoch, __iter__, in_order and __len__ come from ArrayIterator) -----------
    def __iter__(self) -> Iterator[Batch]:
        epoch = self.epoch
        rows = self.shard_rows(self.order(epoch))  # this rank's share when sharded (ArrayIterator.set_shard)
        self.epoch += 1
        return self._batches(rows, epoch)

    def _batches(self, rows: np.ndarray | None, epoch: int | None = None) -> Iterator[Batch]:
        count = self.ndata if rows is None else len(rows)
        stream = () if self.shard is None else (self.shard[0],)  # ranks draw their own crops and flips
        for i, start in enumerate(range(0, count, self.batch_size)):
            stop = min(start + self.batch_size, count)
            index: Any = slice(start, stop) if rows is None else rows[start:stop]
            rng = None if epoch is None or not self.augment else np.random.default_rng(
                [self.seed, epoch, AUGMENT_STREAM, i, *stream])
            x = self.transform(self._images[index], rng)
            yield x, None if self._y is None else self._targets(self._y[index])

    def transform(self, images: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Normalize (and, given ``rng``, crop and flip) images ``(b, C, H, W)`` into ``(C, H, W, b)`` float32.

        Args:
            images: a batch, batch axis first, in ``X``'s units.
            rng: draws the crop offsets and flips; None applies normalization only.

        Returns:
            float32 ``(C, H, W, b)``, C-contiguous.
        """
        x = images.astype(np.float32)
        if self.mean is not None:
            x -= self.mean[:, None, None]
            x *= (1.0 / self.std)[:, None, None]
        if rng is not None and self.crop_padding:
            x = random_crop(x, self.crop_padding, rng)
        if rng is not None and self.flip:
            x = random_flip(x, rng)
        return np.ascontiguousarray(x.transpose(1, 2, 3, 0))

    def __repr__(self) -> str:
        return (f"ImageIterator(ndata={self.ndata}, shape={self.shape}, nclass={self.nclass}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, normalize={self.mean is not None}, "
                f"crop_padding={self.crop_padding}, flip={self.flip})")


def random_crop(x: np.ndarray, padding: int, rng: np.random.Generator,
                offsets: np.ndarray | None = None) -> np.ndarray:
    """Crop each image of ``x`` ``(b, C, H, W)`` at a random offset from a copy padded with zeros.

    Image ``k`` becomes ``padded[k, :, dy:dy + H, dx:dx + W]`` with ``dy, dx`` uniform in
    ``[0, 2 * padding]`` (``padding, padding`` is the image unchanged).

    Args:
        x: images, batch first.
        padding: zeros added on every side.
        rng: draws the offsets (2 integers per image, rows then columns).
        offsets: ``(b, 2)`` offsets to use instead of drawing them (for tests).

    Returns:
        a new array of ``x``'s shape and dtype.
    """
    b, _, h, w = x.shape
    if offsets is None:
        offsets = rng.integers(0, 2 * padding + 1, size=(b, 2))
    padded = np.zeros((b, x.shape[1], h + 2 * padding, w + 2 * padding), dtype=x.dtype)
    padded[:, :, padding:padding + h, padding:padding + w] = x
    # every H x W window of every image, as a view: (b, C, 2p+1, 2p+1, H, W); one gather picks
    # image k's window (dy_k, dx_k), giving (b, C, H, W)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (h, w), axis=(2, 3))
    return windows[np.arange(b), :, offsets[:, 0], offsets[:, 1]]


def random_flip(x: np.ndarray, rng: np.random.Generator, flips: np.ndarray | None = None) -> np.ndarray:
    """Mirror left-right (the last axis) each image of ``x`` ``(b, ...)`` with probability 1/2, in place.

    Args:
        x: images, batch first.
        rng: draws one coin per image.
        flips: ``(b,)`` booleans to use instead of drawing them (for tests).

    Returns:
        ``x``, with the chosen images mirrored.
    """
    if flips is None:
        flips = rng.random(x.shape[0]) < 0.5
    x[flips] = x[flips, ..., ::-1]
    return x
