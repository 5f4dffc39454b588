"""``ArrayIterator``: minibatches of in-memory arrays, batch axis last, as neon's models consume them.

Layout: neon puts the batch axis ``N`` last, so a batch of ``X`` rows ``(ndata, features)``
comes out as ``(features..., batch)`` float32 (with ``lshape=(C, H, W)``: ``(C, H, W, batch)``),
and labels with ``nclass`` come out one-hot as ``(nclass, batch)``.

The last partial batch is yielded at its true size: 1,000 rows in batches of 128 give seven
batches of 128 and one of 104 — nothing is dropped and nothing is wrapped around, so an
epoch sees every sample exactly once and ``Model.eval`` averages over exactly ``ndata``
samples. (``Model`` compiles one computation per batch size it meets; see ``neon/model.py``.)

Shuffling is reproducible per epoch: epoch ``e`` visits the rows in the order of a
permutation drawn from ``numpy.random.default_rng([seed, e])``, whatever happened before,
so a run resumed at epoch ``e`` sees the same batches as an uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

import ngraph_core as ng

Batch = tuple[np.ndarray, np.ndarray | None]


class DataError(ng.NgraphError, ValueError):
    """A dataset whose contents or shape do not fit what was asked (labels, sizes, files)."""


class ArrayIterator:
    """Minibatches of in-memory arrays, batch axis last.

    Args:
        X: inputs, ``(ndata, features)`` (or ``(ndata, *shape)``).
        y: targets, ``(ndata,)`` integer labels with ``nclass``, or any ``(ndata, ...)``
            array yielded as given (batch axis moved last); None for unlabelled data.
        nclass: one-hot encode ``y`` into ``(nclass, batch)``; labels must lie in ``[0, nclass)``.
        batch_size: samples per batch; the last batch may be smaller.
        lshape: the shape of one sample, e.g. ``(1, 28, 28)`` for ``(C, H, W)``; default
            ``X.shape[1:]``.
        shuffle: visit the rows in a new random order every epoch.
        seed: seeds the per-epoch permutations (default: drawn once from the OS).

    Attributes:
        ndata, nbatches, batch_size, shape (one sample's shape), nclass, y_shape (one target's
        shape as yielded, ``(nclass,)`` when one-hot), epoch (the next epoch to iterate).

    Raises:
        DataError: empty data, ``y`` whose length is not ``ndata``, labels out of range or
            not integers, an ``lshape`` of the wrong size, a batch size below 1.

    Example:
        >>> train = ArrayIterator(X, y, nclass=10, batch_size=128, shuffle=True, seed=0)
        >>> for x, t in train:  # x (784, 128) float32, t (10, 128) one-hot
        ...     pass
    """

    def __init__(self, X: Any, y: Any = None, nclass: int | None = None, batch_size: int = 128,
                 lshape: tuple[int, ...] | None = None, shuffle: bool = False, seed: int | None = None) -> None:
        X = np.asarray(X)
        if X.ndim < 2 or X.shape[0] == 0:
            raise DataError(f"ArrayIterator: expected X of shape (ndata, features) with ndata >= 1, "
                            f"received shape {X.shape}")
        if not np.issubdtype(X.dtype, np.number) and X.dtype != np.bool_:
            raise DataError(f"ArrayIterator: expected numeric X, received dtype {X.dtype}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise DataError(f"ArrayIterator: batch_size must be an int >= 1, received {batch_size!r}")
        self.ndata = int(X.shape[0])
        self.shape = tuple(int(n) for n in (lshape if lshape is not None else X.shape[1:]))
        if math.prod(self.shape) != math.prod(X.shape[1:]):
            raise DataError(f"ArrayIterator: lshape {self.shape} has {math.prod(self.shape)} elements, but each "
                            f"row of X has {math.prod(X.shape[1:])} (X shape {X.shape})")
        # one contiguous float32 copy, rows in (ndata, *shape): batches are gathers from it
        self._X = np.ascontiguousarray(X.reshape((self.ndata, *self.shape)), dtype=np.float32)
        self.nclass = None if nclass is None else int(nclass)
        self._y = None if y is None else self._check_targets(np.asarray(y), self.nclass)
        self.y_shape: tuple[int, ...] | None = (
            None if self._y is None else (self.nclass,) if self.nclass is not None else self._y.shape[1:])
        self.batch_size = int(batch_size)
        self.nbatches = -(-self.ndata // self.batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)
        self.epoch = 0

    def _check_targets(self, y: np.ndarray, nclass: int | None) -> np.ndarray:
        if y.ndim == 0 or y.shape[0] != self.ndata:
            raise DataError(f"ArrayIterator: y has {y.shape[0] if y.ndim else 0} entries (shape {y.shape}), "
                            f"expected one per row of X: {self.ndata}")
        if nclass is None:
            return np.ascontiguousarray(y)
        if nclass < 1:
            raise DataError(f"ArrayIterator: nclass must be >= 1, received {nclass}")
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise DataError(f"ArrayIterator: with nclass, expected integer labels of shape ({self.ndata},), "
                            f"received shape {y.shape}")
        if not (np.issubdtype(y.dtype, np.integer) or (np.issubdtype(y.dtype, np.floating)
                                                       and np.all(np.mod(y, 1) == 0))):
            raise DataError(f"ArrayIterator: with nclass, expected integer labels, received dtype {y.dtype}")
        bad = np.flatnonzero((y < 0) | (y >= nclass))
        if bad.size:
            raise DataError(f"ArrayIterator: label {y[bad[0]].item()!r} at row {bad[0]} is out of range: expected "
                            f"labels in [0, {nclass}) for nclass={nclass} ({bad.size} bad row(s)); hint: nclass "
                            "must be the number of classes the model outputs")
        return y.astype(np.int64)

    # -- iteration -------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (its shuffle order); ``Model.fit`` calls it."""
        self.epoch = int(epoch)

    def order(self, epoch: int) -> np.ndarray:
        """The row order of epoch ``epoch``: a seeded permutation when shuffling, else 0..ndata-1."""
        if not self.shuffle:
            return np.arange(self.ndata)
        return np.random.default_rng([self.seed, int(epoch)]).permutation(self.ndata)

    def __iter__(self) -> Iterator[Batch]:
        rows = self.order(self.epoch)
        self.epoch += 1
        return self._batches(rows)

    def in_order(self) -> Iterator[Batch]:
        """The batches in data order, without shuffling or advancing the epoch (for eval/outputs)."""
        return self._batches(None)

    def __len__(self) -> int:
        return self.nbatches

    def _batches(self, rows: np.ndarray | None) -> Iterator[Batch]:
        for start in range(0, self.ndata, self.batch_size):
            stop = min(start + self.batch_size, self.ndata)
            index: Any = slice(start, stop) if rows is None else rows[start:stop]
            x = np.ascontiguousarray(np.moveaxis(self._X[index], 0, -1))
            yield x, None if self._y is None else self._targets(self._y[index])

    def _targets(self, y: np.ndarray) -> np.ndarray:
        if self.nclass is None:
            return np.ascontiguousarray(np.moveaxis(y, 0, -1))
        onehot = np.zeros((self.nclass, y.shape[0]), dtype=np.float32)
        onehot[y, np.arange(y.shape[0])] = 1.0
        return onehot

    def __repr__(self) -> str:
        return (f"ArrayIterator(ndata={self.ndata}, shape={self.shape}, nclass={self.nclass}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle})")
