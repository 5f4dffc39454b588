"""Who am I among the ranks: ``init``, ``rank``, ``size``, ``is_writer``, over ``ngraph_core.distributed``.

These are thin re-exports of the core's process-wide communicator, plus the two questions
neon's training loop asks: is this a run of more than one rank (``is_distributed``), and is
this the rank that prints and writes files (``is_writer``: rank 0, or any single process).
Nothing here imports mpi4py until ``init`` is called, so single-process training pays nothing.

Example:
    >>> from neon import distributed
    >>> distributed.init(timeout=60)    # under mpiexec; NG_DIST_TIMEOUT sets the default
    >>> distributed.rank(), distributed.size()
    (0, 2)
"""

from __future__ import annotations

from typing import Any

import ngraph_core as ng

DistributedError = ng.DistributedError
DistributedTimeoutError = ng.DistributedTimeoutError
core = ng.distributed  # the process's communicator and the collective ops

__all__ = ["DistributedError", "DistributedTimeoutError", "communicator", "init", "is_distributed", "is_writer",
           "rank", "size"]


def init(timeout: float | None = None, comm: Any = None) -> Any:
    """Join the ranks started by ``mpiexec`` (MPI_COMM_WORLD, or ``comm``): ``ng.distributed.init``.

    Args:
        timeout: seconds a collective may wait for the other ranks before every rank stops with
            ``DistributedTimeoutError`` (default: ``NG_DIST_TIMEOUT``, else the core's default).
        comm: an mpi4py communicator to use instead of the world.

    Returns:
        the ``Communicator`` (``.rank``, ``.size``, ``allreduce_``, ``broadcast_``...).

    Raises:
        DistributedError: mpi4py cannot be imported, or MPI fails to start.

    Example:
        >>> comm = distributed.init()
        >>> comm.rank, comm.size
    """
    return core.init(timeout=timeout, comm=comm)


def rank() -> int:
    """This process's rank (0 when ``init`` has not run).

    Example:
        >>> if distributed.rank() == 0: print("I log")
    """
    return int(core.rank())


def size() -> int:
    """The number of ranks (1 when ``init`` has not run).

    Example:
        >>> lr = 0.1 * distributed.size()  # the linear scaling rule
    """
    return int(core.size())


def is_distributed() -> bool:
    """True in a run of more than one rank (``init`` ran under ``mpiexec -n 2`` or more).

    Example:
        >>> distributed.is_distributed()  # False in a plain ``python train.py``
    """
    return bool(core.is_initialized()) and size() > 1


def is_writer() -> bool:
    """True on the rank that prints progress and writes files: rank 0, or any single process.

    ``Model.fit`` runs callbacks marked ``writer_only`` (progress bars, checkpoints, history
    files, TensorBoard) only where this is True, so ranks never race on one file.

    Example:
        >>> if distributed.is_writer(): model.save_params("out/model.h5")
    """
    return not core.is_initialized() or rank() == 0


def communicator(comm: Any = None) -> Any:
    """``comm`` when given, else the process's current communicator (a size-1 one before ``init``).

    Example:
        >>> communicator().size
        1
    """
    return comm if comm is not None else core.current()
