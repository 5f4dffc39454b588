"""neon.distributed: data-parallel training over MPI, Horovod-style (one process per rank, ``mpiexec``).

Each rank holds a full copy of the model and trains on its own shard of the data; after
every backward pass the gradients are averaged across ranks (an MPI allreduce the compiler
buckets and overlaps with the rest of the backward pass), so every rank takes the same step
and the weights stay identical. ``Model.fit`` does the rest once ``init()`` has run: it
broadcasts rank 0's variables at the start and after resuming, averages the epoch's costs
and metrics over the ranks, and lets only rank 0 print and write files.

Example:
    >>> from neon import distributed
    >>> distributed.init()                                  # under mpiexec -n 2
    >>> train = distributed.shard(ArrayIterator(X, y, nclass=10, batch_size=64, shuffle=True))
    >>> opt = distributed.DistributedOptimizer(GradientDescentMomentum(0.1 * distributed.size(), 0.9))
    >>> model.fit(train, CrossEntropyMulti(), opt, num_epochs=10, valid_set=test, metric=Accuracy())
"""

from .optimizer import DistributedOptimizer
from .runtime import (
           DistributedError,
           DistributedTimeoutError,
           communicator,
           init,
           is_distributed,
           is_writer,
           rank,
           size,
)
from .sharding import shard
from .sync import average_metrics, broadcast_variables, sum_across_ranks

__all__ = ["DistributedError", "DistributedOptimizer", "DistributedTimeoutError", "average_metrics",
           "broadcast_variables", "communicator", "init", "is_distributed", "is_writer", "rank", "shard", "size",
           "sum_across_ranks"]
