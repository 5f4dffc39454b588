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

Sharding (data-parallel training, ``neon.distributed``): with ``shard=(rank, size)`` each
epoch's order (the same permutation on every rank: give every rank the same ``seed``) is cut
to a multiple of ``size`` and rank ``r`` takes every ``size``-th row from ``r``. Ranks see
disjoint slices of equal length, so every rank takes the same number of steps (each step is a
collective allreduce); the at most ``size - 1`` rows left over are *dropped* from that epoch
(another random few each epoch when shuffling). The slices interleave, so ``size`` ranks with
batch ``B`` together see, at every step, exactly the rows one process with batch ``size * B``
sees. ``in_order`` (evaluation) drops nothing: the ranks' slices cover the whole set, one rank
holding one row more than another where ``ndata`` is not a multiple of ``size``.
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
        shard: ``(rank, size)``: iterate only rank's share of every epoch (module docstring);
            with ``shuffle`` it needs an explicit ``seed``, the same on every rank.

    Attributes:
        ndata, nbatches, batch_size, shape (one sample's shape), nclass, y_shape (one target's
        shape as yielded, ``(nclass,)`` when one-hot), epoch (the next epoch to iterate),
        shard (``(rank, size)`` or None).

    Raises:
        DataError: empty data, ``y`` whose length is not ``ndata``, labels out of range or
            not integers, an ``lshape`` of the wrong size, a batch size below 1, a bad ``shard``.

    Example:
        >>> train = ArrayIterator(X, y, nclass=10, batch_size=128, shuffle=True, seed=0)
        >>> for x, t in train:  # x (784, 128) float32, t (10, 128) one-hot
        ...     pass
    """

    def __init__(self, X: Any, y: Any = None, nclass: int | None = None, batch_size: int = 128,
                 lshape: tuple[int, ...] | None = None, shuffle: bool = False, seed: int | None = None,
                 shard: tuple[int, int] | None = None) -> None:
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
        self._seed_given = seed is not None
        self.epoch = 0
        self.shard: tuple[int, int] | None = None
        if shard is not None:
            self.set_shard(*shard)

    def set_shard(self, rank: int, size: int, seed: int | None = None) -> None:
        """Iterate only ``rank``'s share of every epoch among ``size`` ranks (module docstring).

        Args:
            rank: this process's rank, in ``[0, size)``.
            size: the number of ranks (1: the whole set, as unsharded).
            seed: the shuffle seed every rank uses (default: the one given to the constructor).

        Raises:
            DataError: a rank outside ``[0, size)``, fewer rows than ranks, or shuffling with a seed
                drawn from the OS (each rank would shuffle differently).

        Example:
            >>> train.set_shard(rank=1, size=2)  # odd positions of every epoch's order
        """
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (rank, size))
        if not ok or size < 1 or not 0 <= rank < size:
            raise DataError(f"{type(self).__name__}: expected shard (rank, size) with 0 <= rank < size, received "
                            f"({rank!r}, {size!r})")
        if size > self.ndata:
            raise DataError(f"{type(self).__name__}: cannot shard {self.ndata} rows over {size} ranks; expected "
                            f"at least one row per rank")
        if seed is not None:
            self.seed, self._seed_given = int(seed), True
        if self.shuffle and size > 1 and not self._seed_given:
            raise DataError(f"{type(self).__name__}: sharding a shuffled iterator over {size} ranks needs the same "
                            "seed on every rank, received seed=None (drawn from the OS, different per rank); hint: "
                            "pass seed=..., or use neon.distributed.shard(iterator), which agrees on rank 0's")
        self.shard = (int(rank), int(size))
        self.nbatches = -(-(self.ndata // self.shard[1]) // self.batch_size)

    def shard_rows(self, rows: np.ndarray, drop: bool = True) -> np.ndarray:
        """This rank's rows of an epoch's order ``rows``: every ``size``-th from ``rank`` (all without a shard).

        Args:
            rows: an epoch's row order.
            drop: first cut ``rows`` to a multiple of ``size`` (training: equal step counts per rank).

        Returns:
            the rows this rank iterates, in order.

        Example:
            >>> ArrayIterator(X, shard=(1, 2)).shard_rows(np.arange(7))  # array([1, 3, 5])
        """
        if self.shard is None:
            return rows
        rank, size = self.shard
        if drop:
            rows = rows[:len(rows) - len(rows) % size]
        return rows[rank::size]

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
        rows = self.shard_rows(self.order(self.epoch))
        self.epoch += 1
        return self._batches(rows)

    def in_order(self) -> Iterator[Batch]:
        """The batches in data order, without shuffling or advancing the epoch (for eval/outputs); sharded,
        this rank's share of every row (none dropped)."""
        return self._batches(None if self.shard is None else self.shard_rows(np.arange(self.ndata), drop=False))

    def __len__(self) -> int:
        return self.nbatches

    def _batches(self, rows: np.ndarray | None) -> Iterator[Batch]:
        count = self.ndata if rows is None else len(rows)
        for start in range(0, count, self.batch_size):
            stop = min(start + self.batch_size, count)
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
                f"batch_size={self.batch_size}, shuffle={self.shuffle}"
                f"{'' if self.shard is None else f', shard={self.shard}'})")
