"""Collective kernels: allreduce, broadcast_from, and the bucketed allreduce's start and wait.

Each runs on the communicator of the kernel context (the transformer's ``communicator=``
option, else ``ng.distributed.current()`` when the kernel is made). In a world of one
rank they only copy. Communicators work on NumPy buffers: a device array (CuPy) goes
through a host copy, since no CUDA-aware MPI is assumed.

``allreduce_start`` copies its bucket's gradients into its flat output and starts a
non-blocking allreduce (a sum) of it, in place; it leaves the request in the context's
``pending`` dict, keyed by the start op, where ``allreduce_wait`` finds it. The wait
completes the request (within the communicator's timeout) and writes the bucket's sum,
or mean, into its own output. The memory plan keeps the start's buffer alive until the
wait (a source of it), and neither op runs in place, so nothing writes over a buffer MPI
is still reducing.
"""

from __future__ import annotations

from typing import Any

from ...distributed.communicator import Communicator, Request
from ...distributed.world import current
from ...errors import DistributedError, DistributedTimeoutError
from ...ir import Op, OpType
from .context import Kernel, KernelContext


def communicator_of(kc: KernelContext) -> Communicator:
    """The context's communicator, else the process's current one."""
    return kc.communicator if kc.communicator is not None else current()


def _host(value: Any) -> tuple[Any, bool]:
    """``value`` as a host (NumPy) buffer, and whether it is a copy of a device array to write back."""
    return (value.get(), True) if hasattr(value, "get") and hasattr(value, "set") else (value, False)


def _start(comm: Communicator, out: Any, reduction: str) -> tuple[Request, Any]:
    """Start the in-place allreduce of ``out`` (through a host copy for device arrays)."""
    host, copied = _host(out)
    return comm.start_allreduce_(host, reduction), host if copied else None


def _wait(request: Request, where: str) -> None:
    """``request.wait()``, a timeout naming the op that waited."""
    try:
        request.wait()
    except DistributedTimeoutError as exc:
        raise DistributedTimeoutError(f"{where}: {exc}") from None


def allreduce(op: Op, kc: KernelContext) -> Kernel:
    xp, comm, reduction = kc.xp, communicator_of(kc), op.arg.reduction
    where = f"allreduce {op.name} of {op.src[0].name}"

    def allreduce_kernel(out, x):
        xp.copyto(out, x, casting="unsafe")
        if comm.size > 1:
            request, host = _start(comm, out, reduction)
            _wait(request, where)
            if host is not None:
                out.set(host)
        return out

    return allreduce_kernel


def broadcast_from(op: Op, kc: KernelContext) -> Kernel:
    xp, comm, root = kc.xp, communicator_of(kc), op.arg
    if root >= comm.size:
        raise DistributedError(
            f"broadcast_from {op.name}: expected a root rank in [0, {comm.size}), received {root}; "
            f"hint: this run has {comm.size} rank(s) (mpiexec -n); broadcast from rank 0"
        )

    def broadcast_kernel(out, x):
        xp.copyto(out, x, casting="unsafe")
        if comm.size > 1:
            host, copied = _host(out)
            comm.broadcast_(host, root)
            if copied:
                out.set(host)
        return out

    return broadcast_kernel


def allreduce_start(op: Op, kc: KernelContext) -> Kernel:
    xp, comm, pending = kc.xp, communicator_of(kc), kc.pending
    spans, start = [], 0
    for s in op.src:  # each member's place in the flat buffer
        spans.append((start, start + s.axes.size, s.axes.lengths))
        start += s.axes.size

    def allreduce_start_kernel(out, *grads):
        for (begin, end, shape), g in zip(spans, grads):
            xp.copyto(out[begin:end].reshape(shape), g, casting="unsafe")
        if comm.size > 1:
            pending[op] = _start(comm, out, "sum")
        return out

    return allreduce_start_kernel


def allreduce_wait(op: Op, kc: KernelContext) -> Kernel:
    xp, comm, pending = kc.xp, communicator_of(kc), kc.pending
    index, start_op = op.arg.index, op.src[op.arg.index]
    where = f"{op.name} (bucket {index} of {len(op.src)}: {len(start_op.src)} tensor(s), {start_op.axes.size} elements)"
    divisor = comm.size if op.arg.reduction == "mean" and comm.size > 1 else None

    def allreduce_wait_kernel(out, *starts):
        flat = starts[index]
        entry = pending.pop(start_op, None)
        if entry is not None:
            request, host = entry
            _wait(request, where)
            if host is not None:
                flat.set(host)
        if divisor is None:
            xp.copyto(out, flat)
        else:  # divided as the unbucketed allreduce divides: the same rounding
            xp.divide(flat, divisor, out=out)
        return out

    return allreduce_wait_kernel


KERNELS = {
    OpType.ALLREDUCE: allreduce,
    OpType.BROADCAST_FROM: broadcast_from,
    OpType.ALLREDUCE_START: allreduce_start,
    OpType.ALLREDUCE_WAIT: allreduce_wait,
}
