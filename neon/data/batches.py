"""What models read off any dataset: batches in data order, the batch size, one sample's shapes.

A dataset is an ``ArrayIterator`` or any iterable of ``(x, y)`` batches with the batch
axis last (``y`` may be None). ``Model`` and ``GAN`` (through ``neon.training``) use these
helpers so that both accept the same datasets.

Example:
    >>> shape, y_shape = dataset_shapes(train, "train_set")   # (784,), (10,)
    >>> batch_size(train), count_batches(train)
    (128, 32)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .iterators import DataError


def in_order(dataset: Any) -> Iterable[tuple[np.ndarray, Any]]:
    """The dataset's batches in data order when it can (``in_order``), else as it iterates."""
    return dataset.in_order() if hasattr(dataset, "in_order") else iter(dataset)


def batch_size(dataset: Any) -> int:
    """The size of the dataset's first (full) batch."""
    size, ndata = getattr(dataset, "batch_size", None), getattr(dataset, "ndata", None)
    if size is None:
        x, _ = next(iter(in_order(dataset)))
        return batch_length(x)
    return int(min(size, ndata)) if ndata is not None else int(size)


def count_batches(dataset: Any) -> int | None:
    """The number of batches an epoch has (None when the dataset has no length)."""
    try:
        return len(dataset)
    except TypeError:
        return None


def dataset_shapes(dataset: Any, what: str) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """One sample's input shape and target shape (None when the dataset has no targets).

    Args:
        dataset: the dataset.
        what: its argument name, for the error.

    Raises:
        DataError: the dataset does not yield ``(x, y)`` batches.
    """
    if hasattr(dataset, "shape") and hasattr(dataset, "y_shape"):
        return tuple(dataset.shape), (None if dataset.y_shape is None else tuple(dataset.y_shape))
    try:
        x, y = next(iter(in_order(dataset)))
    except (StopIteration, TypeError, ValueError):
        raise DataError(f"Model: {what} must yield (x, y) batches with the batch axis last, e.g. an "
                        "ArrayIterator") from None
    x = x[0] if isinstance(x, tuple) else x  # a sequence batch: (array, lengths)
    return tuple(np.shape(x)[:-1]), (None if y is None else tuple(np.shape(y)[:-1]))


def batch_length(x: Any) -> int:
    """How many samples a batch's ``x`` holds (its last axis; for ``(array, lengths)`` the array's)."""
    return int(np.shape(x[0] if isinstance(x, tuple) else x)[-1])
