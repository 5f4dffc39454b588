"""The current communicator of this process: ``init``, ``current``, ``rank``, ``size``, ``is_initialized``.

``init()`` joins the MPI world once per process and makes it current; before it (or in a
process that never calls it) ``current()`` is a ``LocalCommunicator``, a world of one, so
the same graphs run in a single process. ``init`` also installs a ``sys.excepthook`` that,
in a world of several ranks, prints an uncaught exception's traceback with every line
prefixed by the rank and then aborts the whole run (``MPI.COMM_WORLD.Abort(1)``): the other
ranks stop at once instead of hanging in a collective or in ``MPI_Finalize``.
"""

from __future__ import annotations

import sys
import traceback
from types import TracebackType
from typing import Any

from .communicator import Communicator, LocalCommunicator, MPICommunicator, check_timeout, import_mpi

_state: dict[str, Any] = {"current": None, "local": None, "hook": None, "local_size": None}


def init(timeout: float | None = None, comm: Any = None) -> Communicator:
    """Join the MPI world (once per process) and make it the current communicator.

    Args:
        timeout: seconds any collective may wait for the other ranks (None: ``NG_DIST_TIMEOUT``,
            else 120). A second call with a timeout updates it.
        comm: an ``mpi4py.MPI.Comm`` to use instead of ``MPI.COMM_WORLD``.

    Returns:
        the current ``MPICommunicator`` (a world of size 1 when not started by mpiexec). In a world of
        several ranks, the ranks on this machine are counted (MPI's shared-memory split) and each
        rank's default thread count becomes its share of the cores (``NG_THREADS`` overrides).

    Raises:
        DistributedError: mpi4py is missing (hint: ``pip install -e '.[distributed]'``), or a bad timeout.

    Example:
        >>> comm = ng.distributed.init()   # mpiexec -n 2 python train.py
        >>> comm.rank, comm.size           # (0, 2) and (1, 2)
    """
    current_comm = _state["current"]
    if current_comm is not None:
        if timeout is not None:
            current_comm.timeout = check_timeout(timeout)
        return current_comm
    import_mpi("distributed.init")
    current_comm = MPICommunicator(comm, timeout)
    _state["current"] = current_comm
    _share_cores(current_comm)
    _install_excepthook(current_comm)
    return current_comm


def _share_cores(comm: MPICommunicator) -> None:
    """Count the ranks on this machine (MPI's shared-memory split, collective) for ``local_size``."""
    if comm.size > 1:
        node = comm.comm.Split_type(comm.MPI.COMM_TYPE_SHARED)
        _state["local_size"] = node.Get_size()
        node.Free()


def local_size() -> int | None:
    """How many ranks of the world ``init`` joined run on this machine, this one included (None before
    ``init``, or in a world of one). The NumPy transformer's runtime shares the cores out among them.

    Example:
        >>> ng.distributed.local_size()  # mpiexec -n 2 on one machine, after init(): 2
    """
    return _state["local_size"]


def current() -> Communicator:
    """The communicator ``init`` made current, else a ``LocalCommunicator`` (a world of one).

    Example:
        >>> ng.distributed.current().size  # 1 until init() under mpiexec
    """
    if _state["current"] is not None:
        return _state["current"]
    if _state["local"] is None:
        _state["local"] = LocalCommunicator()
    return _state["local"]


def rank() -> int:
    """This process's rank in the current communicator (0 without ``init``)."""
    return current().rank


def size() -> int:
    """The number of ranks of the current communicator (1 without ``init``)."""
    return current().size


def is_initialized() -> bool:
    """True once ``init`` made an MPI communicator current."""
    return _state["current"] is not None


def _install_excepthook(comm: Communicator) -> None:
    """Wrap ``sys.excepthook`` (once): prefix the traceback with the rank, then abort every rank."""
    if _state["hook"] is not None:
        return
    previous = sys.excepthook

    def abort_on_uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        prefix = f"[rank {comm.rank}] "
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write("".join(prefix + line for line in text.splitlines(keepends=True)))
        sys.stderr.flush()
        sys.stdout.flush()
        if comm.size > 1:  # alone, the interpreter's own exit status 1 is enough
            import_mpi("excepthook").COMM_WORLD.Abort(1)
        elif previous is not sys.__excepthook__:
            previous(kind, value, tb)

    _state["hook"] = abort_on_uncaught
    sys.excepthook = abort_on_uncaught
