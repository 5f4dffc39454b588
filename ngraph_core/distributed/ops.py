"""Graph builders of the collectives: ``allreduce`` and ``broadcast`` ops (ir/collective.py).

The ops run on the communicator of the transformer that compiles them
(``make_transformer(communicator=...)``, default ``ng.distributed.current()``), so one
graph runs unchanged in a single process (the identity) and under ``mpiexec``.
"""

from __future__ import annotations

from typing import Any

from ..api.tensors import as_op
from ..errors import DistributedError
from ..ir import Op, OpType, make
from ..ir.collective import REDUCTIONS, AllreduceArg


def allreduce(x: Any, op: str = "mean", name: str | None = None, *, bucket_bytes: int | None = None) -> Op:
    """Every rank's ``x`` reduced element-wise, the same value on every rank.

    Its gradient is the allreduce of the upstream gradient with the same reduction (it is
    linear). When optimizing, the ``bucket_allreduce`` pass packs the allreduces of a
    computation into buckets of at most ``bucket_bytes`` (default: ``NG_ALLREDUCE_BUCKET_MB``,
    else 25 MiB) and starts each bucket as soon as its gradients are ready.

    Args:
        x: the op to reduce (float data for ``"mean"``).
        op: ``"mean"`` (the sum divided by the number of ranks) or ``"sum"``.
        name: the op's name.
        bucket_bytes: the most bytes a bucket holding this op may have (0: a bucket of its own).

    Returns:
        an op with ``x``'s axes and dtype.

    Raises:
        DistributedError: an unknown ``op`` or a bad ``bucket_bytes``. DTypeError: a mean of integers.

    Example:
        >>> grad = ng.distributed.allreduce(ng.deriv(loss, w), op="mean")
    """
    if op not in REDUCTIONS:
        raise DistributedError(f"allreduce: expected op in {REDUCTIONS}, received {op!r}; "
                               "hint: 'mean' averages gradients across ranks, 'sum' adds counts")
    if bucket_bytes is not None and (isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int)
                                     or bucket_bytes < 0):
        raise DistributedError(f"allreduce: expected bucket_bytes None or an int >= 0, received {bucket_bytes!r}; "
                               "hint: e.g. bucket_bytes=4 << 20 for 4 MiB buckets")
    return make(OpType.ALLREDUCE, [as_op(x, where="allreduce")], arg=AllreduceArg(op, bucket_bytes), name=name)


def broadcast(x: Any, root: int = 0, name: str | None = None) -> Op:
    """Rank ``root``'s value of ``x``, on every rank (no gradient flows through it).

    Args:
        x: the op whose root value is sent.
        root: the rank that sends (checked against the run's size when compiled).
        name: the op's name.

    Returns:
        an op with ``x``'s axes and dtype.

    Raises:
        DistributedError: ``root`` is not an int >= 0.

    Example:
        >>> w0 = ng.distributed.broadcast(w, root=0)   # every rank starts from rank 0's weights
    """
    if isinstance(root, bool) or not isinstance(root, int) or root < 0:
        raise DistributedError(f"broadcast: expected a root rank (an int >= 0), received {root!r}; "
                               "hint: ranks count from 0")
    return make(OpType.BROADCAST_FROM, [as_op(x, where="broadcast")], arg=root, name=name)
