"""Communicators: how the ranks of a data-parallel run exchange NumPy buffers.

``Communicator`` is the protocol the collective kernels call; ``LocalCommunicator`` is a
world of one process (every collective is the identity, so a single process runs the same
graphs); ``MPICommunicator`` wraps an mpi4py communicator. Buffers travel through the
buffer interface, in place and never pickled (``comm.Iallreduce(MPI.IN_PLACE, buf)``).

Every wait is bounded. MPI's own waits block forever when a peer died or hangs, so
requests are polled (``req.Test()``) with a short sleep back-off until the communicator's
``timeout`` (seconds; default ``NG_DIST_TIMEOUT``, else 120), then fail with a
``DistributedTimeoutError`` naming what was waited for, the rank and the timeout. The first
50 ms of polling yield the core between tests (``sched_yield``): a rank waiting for a slower
one keeps its latency when its core is free and hands the core over when another rank (or a
worker thread) on an oversubscribed machine needs it, instead of spinning it away.

MPI progresses a non-blocking collective only inside MPI calls, so a started allreduce
moves while its rank polls or starts the next one; set ``MPICH_ASYNC_PROGRESS=1`` to give
MPICH a progress thread that overlaps communication with computation fully.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import safe_json
from ..errors import DistributedError, DistributedTimeoutError

TIMEOUT_ENV = "NG_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
OPS = ("sum", "mean", "max", "min")
MAX_OBJECT_DEPTH = 128  # allgather_object: nesting of the lists and dicts one rank sends
_SPIN_SECONDS = 0.05  # poll (yielding) this long before sleeping: MPI progresses a collective only inside MPI calls
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))  # the core to whoever else can run; else straight back
_MAX_SLEEP = 2e-4  # then the polling back-off's ceiling, in seconds (long sleeps stall the transfer)


def _to_json(obj: Any, rank: int) -> str:
    """``obj`` as JSON text (NumPy scalars and arrays as plain numbers and lists), for ``allgather_object``."""
    def plain(value: Any) -> Any:
        if isinstance(value, (np.generic, np.ndarray)):
            return value.tolist()
        raise TypeError(type(value).__name__)

    try:
        return json.dumps(obj, default=plain)
    except (TypeError, ValueError) as exc:
        raise DistributedError(f"allgather_object on rank {rank}: expected JSON-like values (None, bool, numbers, "
                               f"str, lists, dicts with str keys), received one holding {exc}; hint: send plain "
                               "numbers and names, not objects") from None


def _from_json(text: str | bytes, rank: int, sender: int) -> Any:
    """The object rank ``sender`` sent to ``allgather_object``, decoded by the bounded decoder (``safe_json``)."""
    return safe_json.loads(text, what=f"allgather_object on rank {rank}: the object from rank {sender}",
                           error=DistributedError, max_depth=MAX_OBJECT_DEPTH,
                           hint="hint: send plain numbers and names, nested at most MAX_OBJECT_DEPTH deep")


def default_timeout() -> float:
    """``NG_DIST_TIMEOUT`` in seconds when set, else 120.

    Raises:
        DistributedError: the variable is not a positive number.
    """
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise DistributedError(f"{TIMEOUT_ENV}: expected a positive number of seconds, received {text!r}; "
                               f"hint: e.g. {TIMEOUT_ENV}=300, or unset it for {DEFAULT_TIMEOUT:g} s")
    return value


def check_timeout(timeout: Any) -> float:
    """``timeout`` as a positive float (None: ``default_timeout()``); raises ``DistributedError``."""
    if timeout is None:
        return default_timeout()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise DistributedError(f"communicator: expected a positive timeout in seconds, received {timeout!r}; "
                               "hint: pass e.g. timeout=60")
    return float(timeout)


class Request:
    """A started non-blocking collective; ``wait()`` completes it (within the communicator's timeout).

    Args:
        what: what is waited for, for the timeout message (``"allreduce (sum) of 1000 float32"``).
        test: returns True once the operation completed (called repeatedly; None: already done).
        comm: the communicator (its rank, size and timeout).
        finish: called once after completion (e.g. the division of a mean).

    Example:
        >>> req = comm.start_allreduce_(grads)
        >>> ...  # compute while the reduction runs
        >>> req.wait()
    """

    def __init__(self, what: str, test: Callable[[], bool] | None, comm: Communicator,
                 finish: Callable[[], None] | None = None) -> None:
        self.what = what
        self._test = test
        self._comm = comm
        self._finish = finish
        self._done = test is None
        if self._done and finish is not None:
            finish()

    @property
    def done(self) -> bool:
        """True once ``wait`` (or a successful ``test``) completed the operation."""
        return self._done

    def test(self) -> bool:
        """True when the operation completed (finishing it then); never blocks."""
        if not self._done and self._test is not None and self._test():
            self._done = True
            if self._finish is not None:
                self._finish()
        return self._done

    def wait(self) -> None:
        """Block until the operation completed, polling with a back-off.

        Raises:
            DistributedTimeoutError: not complete after the communicator's ``timeout`` seconds.
        """
        if self.test():
            return
        timeout = self._comm.timeout
        start = time.monotonic()
        deadline = start + timeout
        pause = 0.0
        while not self.test():
            now = time.monotonic()
            if now > deadline:
                raise DistributedTimeoutError(
                    f"{self.what}: rank {self._comm.rank} of {self._comm.size} waited {timeout:g} s and the "
                    "collective did not complete; expected every rank to join it; hint: another rank died or "
                    f"hangs (see its output above), or a step legitimately takes longer: raise {TIMEOUT_ENV}"
                )
            if now - start > _SPIN_SECONDS:  # poll first: each Test() moves the transfer (a 1 MiB allreduce
                pause = min(_MAX_SLEEP, max(1e-5, pause * 2))  # took 4.3 ms with 1 ms sleeps, 0.14 ms raw)
                time.sleep(pause)
            else:
                _yield()


class Communicator:
    """What collective kernels ask of the ranks of a run. Subclasses implement ``start_allreduce_``,
    ``broadcast_``, ``barrier``, ``allgather_object`` and ``abort``.

    Attributes:
        rank: this process's number, ``0 <= rank < size``.
        size: the number of processes.
        timeout: seconds any wait may take before ``DistributedTimeoutError``.

    Example:
        >>> comm = ng.distributed.current()
        >>> comm.allreduce_(grad, op="mean")  # grad now holds the mean over the ranks
    """

    rank: int = 0
    size: int = 1
    timeout: float = DEFAULT_TIMEOUT

    def allreduce_(self, array: np.ndarray, op: str = "sum") -> np.ndarray:
        """Reduce ``array`` over the ranks, in place, blocking (within ``timeout``).

        Args:
            array: a C-contiguous, writeable NumPy array, of one shape on every rank.
            op: ``"sum"``, ``"mean"`` (floats), ``"max"`` or ``"min"``.

        Returns:
            ``array``, now holding the reduction.

        Raises:
            DistributedError: a bad buffer or op. DistributedTimeoutError: a rank did not join.
        """
        self.start_allreduce_(array, op).wait()
        return array

    def start_allreduce_(self, array: np.ndarray, op: str = "sum") -> Request:
        """Start reducing ``array`` in place; the returned ``Request``'s ``wait()`` completes it.
        Leave ``array`` untouched until then."""
        raise NotImplementedError

    def broadcast_(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        """Overwrite ``array`` on every rank with rank ``root``'s, blocking; returns ``array``."""
        raise NotImplementedError

    def barrier(self) -> None:
        """Return once every rank called it (within ``timeout``)."""
        raise NotImplementedError

    def allgather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank.

        ``obj`` travels as JSON (never pickled: nothing received is executed), so it must be made of
        None, bools, numbers (NumPy scalars included), strings, lists, tuples and dicts with string
        keys; it comes back as JSON reads it (tuples as lists), on a world of one too.

        Raises:
            DistributedError: ``obj`` holds something else.
        """
        raise NotImplementedError

    def abort(self, code: int = 1) -> None:
        """Terminate every rank of the run with exit status ``code`` (never returns)."""
        raise NotImplementedError

    # -- argument checks shared by the implementations --------------------------------------------
    def _check_buffer(self, array: Any, what: str) -> np.ndarray:
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not array.flags.writeable:
            kind = type(array).__name__ if not isinstance(array, np.ndarray) else \
                f"an ndarray (contiguous={array.flags.c_contiguous}, writeable={array.flags.writeable})"
            raise DistributedError(
                f"{what} on rank {self.rank}: expected a C-contiguous, writeable NumPy array, received {kind}; "
                "hint: pass np.ascontiguousarray(x) and copy the result back"
            )
        return array

    def _check_op(self, op: Any, array: np.ndarray) -> str:
        if op not in OPS:
            raise DistributedError(f"allreduce_ on rank {self.rank}: expected op in {OPS}, received {op!r}")
        if op == "mean" and array.dtype.kind != "f":
            raise DistributedError(f"allreduce_ on rank {self.rank}: a mean needs float data, received "
                                   f"{array.dtype}; hint: use op='sum' and divide, or cast to float32")
        return op

    def _check_root(self, root: Any) -> int:
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < self.size:
            raise DistributedError(f"broadcast_ on rank {self.rank}: expected a root rank in [0, {self.size}), "
                                   f"received {root!r}; hint: ranks count from 0 to size - 1")
        return root

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.size}, timeout {self.timeout:g} s>"


class LocalCommunicator(Communicator):
    """A world of one process: every collective is the identity (the reduction of one value is itself).

    Args:
        timeout: seconds (None: ``NG_DIST_TIMEOUT``, else 120); kept for the protocol, nothing waits.

    Example:
        >>> LocalCommunicator().allreduce_(np.ones(3), op="mean")  # array([1., 1., 1.])
    """

    def __init__(self, timeout: float | None = None) -> None:
        self.rank, self.size, self.timeout = 0, 1, check_timeout(timeout)

    def start_allreduce_(self, array: np.ndarray, op: str = "sum") -> Request:
        self._check_op(op, self._check_buffer(array, "allreduce_"))
        return Request(f"allreduce ({op})", None, self)

    def broadcast_(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        self._check_root(root)
        return self._check_buffer(array, "broadcast_")

    def barrier(self) -> None:
        return None

    def allgather_object(self, obj: Any) -> list[Any]:
        return [_from_json(_to_json(obj, self.rank), self.rank, 0)]

    def abort(self, code: int = 1) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class MPICommunicator(Communicator):
    """An mpi4py communicator (default ``MPI.COMM_WORLD``) with bounded, polled waits.

    Args:
        comm: an ``mpi4py.MPI.Comm`` (None: ``MPI.COMM_WORLD``).
        timeout: seconds any wait may take (None: ``NG_DIST_TIMEOUT``, else 120).

    Raises:
        DistributedError: mpi4py is not installed.

    Example:
        >>> comm = MPICommunicator()          # under mpiexec -n 2
        >>> comm.allreduce_(np.full(3, comm.rank + 1.0))  # array([3., 3., 3.]) on both ranks
    """

    def __init__(self, comm: Any = None, timeout: float | None = None) -> None:
        self.MPI = import_mpi("MPICommunicator")
        self.comm = self.MPI.COMM_WORLD if comm is None else comm
        self.rank, self.size, self.timeout = self.comm.Get_rank(), self.comm.Get_size(), check_timeout(timeout)
        self._ops = {"sum": self.MPI.SUM, "mean": self.MPI.SUM, "max": self.MPI.MAX, "min": self.MPI.MIN}

    def start_allreduce_(self, array: np.ndarray, op: str = "sum") -> Request:
        self._check_op(op, self._check_buffer(array, "allreduce_"))
        req = self.comm.Iallreduce(self.MPI.IN_PLACE, array, op=self._ops[op])
        size = self.size
        finish = (lambda: np.divide(array, size, out=array)) if op == "mean" and size > 1 else None
        return Request(f"allreduce ({op}) of {array.size} {array.dtype} elements", req.Test, self, finish)

    def broadcast_(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        self._check_root(root)
        req = self.comm.Ibcast(self._check_buffer(array, "broadcast_"), root=root)
        Request(f"broadcast from rank {root} of {array.size} {array.dtype} elements", req.Test, self).wait()
        return array

    def barrier(self) -> None:
        Request("barrier", self.comm.Ibarrier().Test, self).wait()

    def allgather_object(self, obj: Any) -> list[Any]:
        data = np.frombuffer(_to_json(obj, self.rank).encode("utf-8"), dtype=np.uint8)
        lengths = np.zeros(self.size, dtype=np.int64)
        req = self.comm.Iallgather(np.array([data.size], dtype=np.int64), lengths)
        Request("allgather_object (sizes)", req.Test, self).wait()
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        gathered = np.empty(int(lengths.sum()), dtype=np.uint8)
        req = self.comm.Iallgatherv(data, [gathered, lengths, offsets, self.MPI.BYTE])
        Request(f"allgather_object ({int(lengths.sum())} bytes)", req.Test, self).wait()
        return [_from_json(gathered[o:o + n].tobytes(), self.rank, i) for i, (o, n) in enumerate(zip(offsets, lengths))]

    def abort(self, code: int = 1) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.comm.Abort(code)


def import_mpi(what: str) -> Any:
    """``mpi4py.MPI``, imported on first use.

    Raises:
        DistributedError: mpi4py (or its MPI library) is missing, with the install hint.
    """
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistributedError(
            f"{what}: expected mpi4py and an MPI library for distributed training, received ImportError ({exc}); "
            "hint: pip install -e '.[distributed]' (mpi4py and the mpich wheel; then launch with mpiexec -n 2)"
        ) from None
    return MPI
