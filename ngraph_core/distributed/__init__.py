"""Data-parallel training over MPI: communicators, the current world, and collective ops.

``ng.distributed.init()`` joins the MPI world (under ``mpiexec``); ``allreduce`` and
``broadcast`` build graph ops that run on the transformer's communicator; the
``bucket_allreduce`` pass (``passes/allreduce.py``) fuses a step's allreduces into
buckets started as their gradients become ready.

Example:
    >>> import ngraph_core as ng
    >>> comm = ng.distributed.init()                  # mpiexec -n 2 python train.py
    >>> g = ng.distributed.allreduce(ng.deriv(loss, w))  # the mean gradient over the ranks
"""

from .communicator import (
    DEFAULT_TIMEOUT,
    TIMEOUT_ENV,
    Communicator,
    LocalCommunicator,
    MPICommunicator,
    Request,
    default_timeout,
)
from .ops import allreduce, broadcast
from .world import current, init, is_initialized, local_size, rank, size

__all__ = [
    "Communicator", "LocalCommunicator", "MPICommunicator", "Request", "DEFAULT_TIMEOUT", "TIMEOUT_ENV",
    "default_timeout", "allreduce", "broadcast", "current", "init", "is_initialized", "local_size", "rank", "size",
]
