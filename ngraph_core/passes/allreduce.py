"""``bucket_allreduce``: a step's allreduces fused into buckets, each started as soon as it is ready.

Averaging gradients one ``allreduce`` at a time pays one message latency per tensor and
leaves the network idle while backward runs. As PyTorch DDP and Horovod do, this pass
packs the allreduces of a computation into buckets of at most ``bucket_bytes`` and
starts each bucket, non-blocking, as soon as its gradients exist, so that the
communication of the last layers' gradients overlaps the backward of the first layers.

1. **Ready order.** Backward computes the last layer's gradients first. A gradient is
   ready early when few ops lead to it, so the allreduces are ordered by the number of
   ops their input depends on (ties: topological position). This needs no schedule and
   does not depend on the order the optimizer lists its variables in.
2. **Buckets.** Walking that order, allreduces of one reduction, dtype and bucket size
   are packed greedily: a bucket closes when the next member would exceed its size (a
   tensor larger than the size gets a bucket of its own). The size is the op's
   ``bucket_bytes`` (``ng.distributed.allreduce(..., bucket_bytes=)``), else the pass's
   argument, else ``NG_ALLREDUCE_BUCKET_MB`` (MiB, may be fractional), else 25 MiB.
3. **Rewrite.** Bucket ``k`` becomes ``start_k = allreduce_start(g1, g2, ...)`` (one
   flat buffer, reduction started) and ``wait_k = allreduce_wait(start_0, ..., start_m)``
   (its own start at source ``k``; the others only order the plan: the depth-first
   linearization then places every start, each right after its gradients, before the
   first wait). Each allreduce becomes a slice of ``wait_k`` reshaped to its axes (views).

An allreduce whose input depends on another allreduce keeps its blocking kernel (a
wait depends on every start, so bucketing it would close a cycle). The plain
``allreduce`` kernel is correct on its own: the pass runs only when optimizing.

Example:
    >>> [len(b.members) for b in plan_buckets(roots, bucket_bytes=1 << 20)]
    >>> roots = bucket_allreduce(roots)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DistributedError
from ..ir import Op, OpType, make, scope_override, substitute, toposort
from ..ir.collective import BucketArg

MiB = 1 << 20
DEFAULT_BUCKET_BYTES = 25 * MiB
BUCKET_ENV = "NG_ALLREDUCE_BUCKET_MB"


def default_bucket_bytes() -> int:
    """``NG_ALLREDUCE_BUCKET_MB`` (MiB, e.g. ``4`` or ``0.5``) in bytes when set, else 25 MiB.

    Raises:
        DistributedError: the variable is not a number >= 0.
    """
    text = os.environ.get(BUCKET_ENV, "").strip()
    if not text:
        return DEFAULT_BUCKET_BYTES
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise DistributedError(f"{BUCKET_ENV}: expected a bucket size in MiB (a number >= 0), received {text!r}; "
                               f"hint: e.g. {BUCKET_ENV}=4, or unset it for {DEFAULT_BUCKET_BYTES // MiB} MiB")
    return int(value * MiB)


@dataclass(frozen=True)
class Bucket:
    """Allreduces sent as one message.

    Attributes:
        reduction: ``"mean"`` or ``"sum"``, shared by the members.
        dtype: the members' dtype.
        limit: the bucket size the members were packed under, in bytes.
        members: the allreduce ops, in ready order (their place in the flat buffer).
    """

    reduction: str
    dtype: str
    limit: int
    members: tuple[Op, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the flat buffer (the members' elements times the dtype's item size)."""
        return sum(m.axes.size for m in self.members) * np.dtype(self.dtype).itemsize


def _nbytes(op: Op) -> int:
    return op.axes.size * np.dtype(op.dtype).itemsize


def ready_order(roots: Sequence[Op]) -> list[Op]:
    """The allreduces of ``roots`` that can be bucketed, in the order backward makes their inputs ready.

    An op's readiness is the number of ops its input depends on (itself included); ties go
    by topological position. Allreduces whose input depends on another allreduce are left out.
    """
    ops = toposort(roots)
    if not any(op.op is OpType.ALLREDUCE for op in ops):
        return []  # most graphs: skip the ancestor sets
    ancestors: dict[Op, int] = {}  # bit i: op i of ``ops`` is needed
    after_allreduce: dict[Op, bool] = {}  # depends on some allreduce
    for i, op in enumerate(ops):
        mask = 1 << i
        late = False
        for s in op.src:
            mask |= ancestors[s]
            late = late or after_allreduce[s] or s.op is OpType.ALLREDUCE
        ancestors[op], after_allreduce[op] = mask, late
    position = {op: i for i, op in enumerate(ops)}
    candidates = [op for op in ops if op.op is OpType.ALLREDUCE and not after_allreduce[op]]
    return sorted(candidates, key=lambda op: (ancestors[op.src[0]].bit_count(), position[op]))


def plan_buckets(roots: Sequence[Op], bucket_bytes: int | None = None) -> list[Bucket]:
    """The buckets ``bucket_allreduce`` makes of ``roots``' allreduces, in the order they become ready.

    Args:
        roots: the computation's results.
        bucket_bytes: the size of buckets whose members do not set one (None: ``default_bucket_bytes()``).

    Returns:
        the buckets, ordered by when their last member becomes ready.
    """
    default = default_bucket_bytes() if bucket_bytes is None else bucket_bytes
    open_buckets: dict[tuple[str, str, int], tuple[list[Op], int]] = {}  # key -> (members, bytes)
    done: list[Bucket] = []
    order = ready_order(roots)
    for op in order:
        limit = op.arg.bucket_bytes if op.arg.bucket_bytes is not None else default
        key = (op.arg.reduction, op.dtype, limit)
        members, total = open_buckets.get(key, ([], 0))
        if members and total + _nbytes(op) > limit:
            done.append(Bucket(*key, tuple(members)))
            members, total = [], 0
        open_buckets[key] = (members + [op], total + _nbytes(op))
    done += [Bucket(*key, tuple(members)) for key, (members, _) in open_buckets.items()]
    ready = {op: i for i, op in enumerate(order)}
    return sorted(done, key=lambda b: ready[b.members[-1]])  # a bucket is ready with its last member


def bucket_allreduce(roots: list[Op], bucket_bytes: int | None = None) -> list[Op]:
    """``roots`` with their allreduces fused into buckets started as they become ready (module docstring).

    Args:
        roots: the computation's results.
        bucket_bytes: the default bucket size in bytes (None: ``NG_ALLREDUCE_BUCKET_MB``, else 25 MiB).

    Returns:
        the rewritten roots (the same list when there is nothing to bucket).

    Raises:
        DistributedError: a malformed ``NG_ALLREDUCE_BUCKET_MB``.
    """
    buckets = plan_buckets(roots, bucket_bytes)
    if not buckets:
        return roots
    with scope_override(()):
        starts = [make(OpType.ALLREDUCE_START, [m.src[0] for m in b.members], arg=BucketArg(b.reduction, k),
                       name=f"allreduce_start_{k}") for k, b in enumerate(buckets)]
        replacement: dict[Op, Op] = {}
        for k, b in enumerate(buckets):
            wait = make(OpType.ALLREDUCE_WAIT, starts, arg=BucketArg(b.reduction, k), name=f"allreduce_wait_{k}")
            offset = 0
            for m in b.members:
                size = m.axes.size
                flat = make(OpType.SLICE, [wait], arg=((offset, offset + size, 1),))
                with scope_override(m.meta.scope):
                    replacement[m] = make(OpType.RESHAPE, [flat], axes=m.axes, name=m.meta.name)
                offset += size
    return substitute(roots, replacement)
