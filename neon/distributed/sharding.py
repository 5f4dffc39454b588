"""``shard``: give each rank its own disjoint, equal share of every epoch of a data iterator.

``ArrayIterator`` (and ``ImageIterator``) shard by ``(rank, size)``: every rank draws the same
shuffled order of an epoch (the same seed), cuts it to a multiple of ``size`` (dropping at most
``size - 1`` samples that epoch, so every rank takes the same number of steps: each step is a
collective allreduce) and takes every ``size``-th sample from its rank. ``shard`` makes the
ranks agree on the seed first (rank 0's), so an iterator built with ``seed=None`` still shards
correctly. Evaluation (``in_order``) drops nothing; ``Model`` sums totals over ranks.

Example:
    >>> train = shard(ArrayIterator(X, y, nclass=10, batch_size=64, shuffle=True))
    >>> len(train)  # batches per epoch on each rank: ceil((ndata // size) / 64)
"""

from __future__ import annotations

from typing import Any

from .runtime import DistributedError, communicator


def shard(iterator: Any, comm: Any = None, root: int = 0) -> Any:
    """Shard ``iterator`` by this rank among all ranks (in place), with ``root``'s shuffle seed everywhere.

    Collective: every rank calls it on its copy of the same data set.

    Args:
        iterator: an ``ArrayIterator`` or ``ImageIterator`` (anything with ``set_shard`` and ``seed``).
        comm: a communicator (default: the current one; a size-1 one shards to the whole set).
        root: the rank whose seed every rank takes.

    Returns:
        ``iterator`` itself, now yielding only this rank's share.

    Raises:
        DistributedError: an iterator that cannot shard (no ``set_shard``).
        DataError: fewer samples than ranks.

    Example:
        >>> train = shard(ArrayIterator(X, y, nclass=10, batch_size=32, shuffle=True))
    """
    if not callable(getattr(iterator, "set_shard", None)):
        raise DistributedError(f"shard: expected an ArrayIterator or ImageIterator (with set_shard), received "
                               f"{type(iterator).__name__}; hint: load the data into an ArrayIterator, or give your "
                               "iterator set_shard(rank, size, seed)")
    comm = communicator(comm)
    seed = getattr(iterator, "seed", None)
    if comm.size > 1:
        seed = comm.allgather_object(seed)[root]
    iterator.set_shard(comm.rank, comm.size, seed=seed)
    return iterator
