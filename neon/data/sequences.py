"""``SequenceIterator``: variable-length sequences padded into batches, optionally bucketed by length.

Batch format (what ``Model.fit`` receives for each step) is a tuple ``(x, y)`` where

* ``x = (data, lengths)``: ``data`` is float32 ``[F, REC, N]`` for sequences of feature frames
  ``(T_i, F)``, or int32 ``[REC, N]`` for token-id sequences; ``lengths`` is int32 ``[N]``, the
  true length of each column. Steps ``t >= lengths[n]`` of column ``n`` hold ``pad_value``;
  ``sequence_mask(lengths, REC)`` gives the matching ``[REC, N]`` boolean mask.
* ``y`` is ``None`` (no targets); one label per sequence: ``[N]`` as given, or one-hot float32
  ``[nclass, N]`` with ``nclass`` (as ``ArrayIterator``); or, for target *sequences*,
  ``(targets, target_lengths)`` padded the same way (``[REC_y, N]`` int32 tokens or
  ``[F_y, REC_y, N]`` float32 frames) to the longest target in the batch.

``REC`` is the longest sequence in the batch, or, with ``bucket_boundaries=(b_0, b_1, ...)``,
the upper bound of the batch's bucket: sequences of length in ``(b_{i-1}, b_i]`` are batched
together and padded to ``b_i`` (few distinct shapes, so few compiled computations); longer ones
form a last bucket padded to its batch maximum. Each bucket's last batch has its true size, so
an epoch sees every sequence exactly once. Epoch ``e``'s order (within buckets, and the order of
the batches) comes from ``numpy.random.default_rng([seed, e])``, so a resumed run sees the same
batches (``set_epoch``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .iterators import DataError

SeqBatch = tuple[tuple[np.ndarray, np.ndarray], Any]


def sequence_mask(lengths: Any, length: int) -> np.ndarray:
    """A ``[length, N]`` boolean mask, True where step ``t < lengths[n]``.

    Example:
        >>> sequence_mask([1, 3], 3).astype(int).T.tolist()
        [[1, 0, 0], [1, 1, 1]]
    """
    return np.arange(int(length))[:, None] < np.asarray(lengths)[None, :]


def _as_sequences(items: Any, what: str) -> tuple[list[np.ndarray], str]:
    """Check a list of sequences: 1-D integer token arrays ("tokens") or 2-D ``(T, F)`` frames ("frames")."""
    seqs = [np.asarray(s) for s in items]
    if not seqs:
        raise DataError(f"SequenceIterator: expected at least one {what} sequence, received none")
    kinds = ["tokens" if s.ndim == 1 and s.dtype.kind in "iu" else "frames" if s.ndim == 2 and s.dtype.kind in "iuf"
             else "?" for s in seqs]
    bad = next((i for i, k in enumerate(kinds) if k == "?" or k != kinds[0]), None)
    if bad is not None:
        raise DataError(f"SequenceIterator: {what} sequence {bad} has shape {seqs[bad].shape} dtype {seqs[bad].dtype}; "
                        f"expected all sequences to be integer token lists (T,) or all numeric frames (T, F), "
                        f"like sequence 0 ({kinds[0]})")
    kind = kinds[0]
    if kind == "frames" and len({s.shape[1] for s in seqs}) != 1:
        raise DataError(f"SequenceIterator: {what} frames have different feature sizes "
                        f"{sorted({s.shape[1] for s in seqs})}; expected one F for all (T_i, F) sequences")
    empty = [i for i, s in enumerate(seqs) if s.shape[0] == 0]
    if empty:
        raise DataError(f"SequenceIterator: {what} sequence {empty[0]} is empty; expected at least one step "
                        "(hint: drop empty sequences before batching)")
    return seqs, kind


def pad_sequences(seqs: Sequence[np.ndarray], length: int | None = None,
                  value: float = 0) -> tuple[np.ndarray, np.ndarray]:
    """Pad sequences into one batch, batch axis last.

    Args:
        seqs: integer token arrays ``(T_i,)`` or frame arrays ``(T_i, F)``.
        length: the padded length ``REC`` (default: the longest sequence); must be >= every ``T_i``.
        value: the padding value.

    Returns:
        ``(data, lengths)``: int32 ``[REC, N]`` or float32 ``[F, REC, N]``, and int32 lengths ``[N]``.

    Raises:
        DataError: mixed kinds, empty sequences, or a ``length`` shorter than a sequence.

    Example:
        >>> data, lengths = pad_sequences([np.array([1, 2]), np.array([3])])
        >>> data.tolist(), lengths.tolist()
        ([[1, 3], [2, 0]], [2, 1])
    """
    arrays, kind = _as_sequences(seqs, "input")
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int32)
    rec = int(lengths.max()) if length is None else int(length)
    if rec < lengths.max():
        raise DataError(f"pad_sequences: expected length >= the longest sequence ({lengths.max()}), received {rec}")
    if kind == "tokens":
        data = np.full((rec, len(arrays)), value, dtype=np.int32)
        for n, a in enumerate(arrays):
            data[: a.shape[0], n] = a
    else:
        data = np.full((arrays[0].shape[1], rec, len(arrays)), value, dtype=np.float32)
        for n, a in enumerate(arrays):
            data[:, : a.shape[0], n] = a.T
    return data, lengths


class SequenceIterator:
    """Minibatches of variable-length sequences, padded, with lengths (see the module docstring).

    Args:
        sequences: a list of integer token sequences ``(T_i,)`` or float frames ``(T_i, F)``.
        targets: None; one label per sequence (``(ndata,)``); a 2-D array of fixed-width rows
            (``(ndata, K)``, yielded as ``[K, N]``: e.g. ``neon.costs.pack_ctc_targets``); or a list
            of target sequences (yielded padded, with their lengths).
        nclass: one-hot encode integer labels into ``[nclass, N]``.
        batch_size: sequences per batch.
        bucket_boundaries: increasing lengths; group sequences of similar length and pad to the bound.
        shuffle: a new seeded order every epoch.
        seed: seeds the per-epoch orders (default: drawn once from the OS).
        pad_value, target_pad_value: what padded steps hold.

    Attributes:
        ndata, nbatches, batch_size, lengths (int32 ``[ndata]``), kind (``"tokens"`` or
        ``"frames"``), nfeatures (F, or None for tokens), seed, epoch.

    Raises:
        DataError: empty or mixed sequences, targets of the wrong count, labels out of range,
            boundaries that are not increasing positive ints, a batch size below 1.

    Example:
        >>> it = SequenceIterator([[1, 2, 3], [4], [5, 6]], targets=[1, 0, 1], nclass=2, batch_size=2)
        >>> (x, lengths), y = next(iter(it))   # x int32 [3, 2], lengths [3, 1], y [2, 2] one-hot
    """

    def __init__(self, sequences: Sequence[Any], targets: Any = None, nclass: int | None = None,
                 batch_size: int = 32, bucket_boundaries: Sequence[int] | None = None, shuffle: bool = False,
                 seed: int | None = None, pad_value: float = 0, target_pad_value: float = 0) -> None:
        self._x, self.kind = _as_sequences(sequences, "input")
        self.ndata = len(self._x)
        self.lengths = np.array([s.shape[0] for s in self._x], dtype=np.int32)
        self.nfeatures = None if self.kind == "tokens" else int(self._x[0].shape[1])
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise DataError(f"SequenceIterator: batch_size must be an int >= 1, received {batch_size!r}")
        self.batch_size = int(batch_size)
        bounds = [] if bucket_boundaries is None else [int(b) for b in bucket_boundaries]
        if any(b < 1 for b in bounds) or any(a >= b for a, b in zip(bounds, bounds[1:])):
            raise DataError(f"SequenceIterator: bucket_boundaries must be increasing ints >= 1, received {bounds}")
        self.bucket_boundaries = tuple(bounds)
        self._bucket = np.searchsorted(np.array(bounds, dtype=np.int64), self.lengths, side="left")
        self.nclass = None if nclass is None else int(nclass)
        self._y, self._y_kind = self._check_targets(targets)
        self.pad_value, self.target_pad_value = pad_value, target_pad_value
        self.shuffle = bool(shuffle)
        self.seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)
        self.epoch = 0
        self.nbatches = sum(-(-int(n) // self.batch_size) for n in np.bincount(self._bucket) if n)

    def _check_targets(self, targets: Any) -> tuple[Any, str | None]:
        if targets is None:
            return None, None
        if (isinstance(targets, np.ndarray) and targets.ndim == 1) or (
                not isinstance(targets, np.ndarray) and all(np.ndim(t) == 0 for t in targets)):
            y = np.asarray(targets)
            if y.shape[0] != self.ndata:
                raise DataError(f"SequenceIterator: expected {self.ndata} labels (one per sequence), "
                                f"received {y.shape[0]}")
            if self.nclass is not None:
                if y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= self.nclass:
                    raise DataError(f"SequenceIterator: with nclass={self.nclass}, expected integer labels in "
                                    f"[0, {self.nclass}), received dtype {y.dtype}, range [{y.min()}, {y.max()}]")
            return y, "labels"
        if isinstance(targets, np.ndarray) and targets.ndim == 2:  # fixed-width rows, e.g. packed CTC targets
            if targets.shape[0] != self.ndata or not np.issubdtype(targets.dtype, np.number):
                raise DataError(f"SequenceIterator: expected numeric target rows of shape ({self.ndata}, K), "
                                f"received {targets.dtype} {targets.shape}; hint: a list of arrays gives target "
                                "sequences (padded, with lengths)")
            return targets, "vectors"
        seqs, _ = _as_sequences(targets, "target")
        if len(seqs) != self.ndata:
            raise DataError(f"SequenceIterator: expected {self.ndata} target sequences, received {len(seqs)}")
        return seqs, "sequences"

    # -- ordering -------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (its order); ``Model.fit`` calls it."""
        self.epoch = int(epoch)

    def batch_indices(self, epoch: int) -> list[np.ndarray]:
        """The sequence indices of each batch of epoch ``epoch``, in the order they are yielded."""
        rng = np.random.default_rng([self.seed, int(epoch)]) if self.shuffle else None
        batches: list[np.ndarray] = []
        for bucket in range(len(self.bucket_boundaries) + 1):
            members = np.flatnonzero(self._bucket == bucket)
            if rng is not None:
                members = rng.permutation(members)
            batches += [members[i: i + self.batch_size] for i in range(0, members.size, self.batch_size)]
        if rng is not None and self.bucket_boundaries:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def __iter__(self) -> Iterator[SeqBatch]:
        batches = self.batch_indices(self.epoch)
        self.epoch += 1
        return (self.make_batch(index, bucketed=True) for index in batches)

    def in_order(self) -> Iterator[SeqBatch]:
        """Consecutive batches in data order, padded to each batch's longest (for eval and outputs)."""
        for start in range(0, self.ndata, self.batch_size):
            yield self.make_batch(np.arange(start, min(start + self.batch_size, self.ndata)), bucketed=False)

    def __len__(self) -> int:
        return self.nbatches

    # -- batches --------------------------------------------------------------------------------
    def make_batch(self, index: np.ndarray, bucketed: bool = True) -> SeqBatch:
        """The batch of sequences ``index``: ``((data, lengths), y)``, padded to the bucket bound if ``bucketed``."""
        bucket = int(self._bucket[index[0]])
        length = self.bucket_boundaries[bucket] if bucketed and bucket < len(self.bucket_boundaries) else None
        x = pad_sequences([self._x[i] for i in index], length, self.pad_value)
        if self._y_kind == "labels":
            y = self._y[index]
            if self.nclass is not None:
                onehot = np.zeros((self.nclass, index.size), dtype=np.float32)
                onehot[y, np.arange(index.size)] = 1.0
                y = onehot
        elif self._y_kind == "vectors":
            y = np.ascontiguousarray(self._y[index].T)
        elif self._y_kind == "sequences":
            y = pad_sequences([self._y[i] for i in index], None, self.target_pad_value)
        else:
            y = None
        return x, y

    def __repr__(self) -> str:
        return (f"SequenceIterator(ndata={self.ndata}, kind={self.kind!r}, batch_size={self.batch_size}, "
                f"bucket_boundaries={self.bucket_boundaries}, shuffle={self.shuffle})")
