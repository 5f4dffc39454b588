"""Collectives across the ranks of a data-parallel run: the ops' args and inference rules.

Four op types (``ir/ops.py``):

* ``allreduce(x)`` -> x's axes and dtype: every rank's ``x`` reduced element-wise
  (``"mean"`` or ``"sum"``), the same value on every rank (arg: ``AllreduceArg``);
* ``broadcast_from(x)`` -> x's axes and dtype: rank ``root``'s ``x`` on every rank (arg: the
  root rank, an int);
* ``allreduce_start(g1, ..., gk)`` -> ``[allreduce_bucket: total]``: compiler-made by
  ``passes/allreduce.py``; the sources flattened into one buffer whose non-blocking
  allreduce it starts (arg: ``BucketArg``);
* ``allreduce_wait(start_0, ..., start_m)`` -> ``start_k``'s axes: bucket ``k``'s reduced
  buffer once its request completed (``k = arg.index``). The other starts are ordering-only
  sources, so a depth-first linearization starts every bucket before it waits for any.

Example:
    >>> make(OpType.ALLREDUCE, [grad], arg=AllreduceArg("mean"))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AxesError, DTypeError
from .axes import Axes, Axis, format_axes
from .codec import CodecContext, CompilerMadeArg, check_keys, check_type, fail, wrong_arg

if TYPE_CHECKING:
    from .node import Op

REDUCTIONS = ("mean", "sum")
BUCKET_AXIS = "allreduce_bucket"
"""The name of the one axis of an ``allreduce_start``'s flat buffer."""

_NUMERIC = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
_FLOATS = ("float16", "float32", "float64")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class AllreduceArg:
    """``arg`` of ``allreduce``.

    Attributes:
        reduction: ``"mean"`` (the sum divided by the number of ranks) or ``"sum"``.
        bucket_bytes: the most bytes the bucketing pass packs into one message with this op
            (None: the ``NG_ALLREDUCE_BUCKET_MB`` environment variable, else 25 MiB).
    """

    reduction: str = "mean"
    bucket_bytes: int | None = None

    def __repr__(self) -> str:
        return self.reduction + ("" if self.bucket_bytes is None else f" bucket_bytes={self.bucket_bytes}")

    # -- as an op's arg (the protocol of ir/args.py) ------------------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not an AllreduceArg of a known reduction and a byte count, else None."""
        arg = op.arg
        ok = isinstance(arg, AllreduceArg) and arg.reduction in REDUCTIONS and \
            (arg.bucket_bytes is None or (_is_int(arg.bucket_bytes) and arg.bucket_bytes >= 0))
        return None if ok else wrong_arg(op, f"an AllreduceArg(reduction in {REDUCTIONS}, bucket_bytes: int >= 0)")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"reduction", "bucket_bytes"}`` (null bytes: the default)."""
        return {"reduction": op.arg.reduction, "bucket_bytes": op.arg.bucket_bytes}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> AllreduceArg:
        """The AllreduceArg ``to_json`` wrote; raises ``SerializationError`` on any other data."""
        check_keys(data, ("reduction", "bucket_bytes"), where)
        reduction = check_type(data["reduction"], str, where, f"a reduction in {REDUCTIONS}")
        if reduction not in REDUCTIONS:
            raise fail(where, f"a reduction in {REDUCTIONS}", reduction)
        size = data["bucket_bytes"]
        if size is not None and (not _is_int(size) or size < 0):
            raise fail(where, "bucket_bytes: null or an int >= 0", size)
        return AllreduceArg(reduction, size)


class RootRank:
    """A ``broadcast_from``'s ``arg``: the rank whose value every rank receives (an int >= 0); JSON: the int."""

    @staticmethod
    def check(op: Op) -> str | None:
        return None if _is_int(op.arg) and op.arg >= 0 else wrong_arg(op, "an int root rank >= 0")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> int:
        return op.arg

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> int:
        root = check_type(data, int, where, "an int root rank >= 0")
        if root < 0:
            raise fail(where, "an int root rank >= 0", root)
        return root


@dataclass(frozen=True)
class BucketArg(CompilerMadeArg):
    """``arg`` of the compiler-made ``allreduce_start`` and ``allreduce_wait``.

    Attributes:
        reduction: ``"mean"`` or ``"sum"`` (every member of a bucket has the same).
        index: the bucket's number in the order its gradients become ready; a wait's own
            start is its source number ``index``.
    """

    reduction: str
    index: int
    USER_OPS = "'allreduce'"

    def __repr__(self) -> str:
        return f"{self.reduction} bucket={self.index}"

    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a BucketArg, else None."""
        ok = isinstance(op.arg, BucketArg) and op.arg.reduction in REDUCTIONS and _is_int(op.arg.index)
        return None if ok else wrong_arg(op, "a BucketArg(reduction, index) (made by the bucket_allreduce pass)")


# -- inference -------------------------------------------------------------------------------------


def infer_allreduce(src: Sequence[Op], arg: Any, axes: Any, dtype: str | None) -> tuple[Axes, str]:
    """x's axes and dtype; a mean needs floats (an int mean would truncate)."""
    (x,) = src
    reduction = getattr(arg, "reduction", "mean")
    allowed = _FLOATS if reduction == "mean" else _NUMERIC
    if x.dtype not in allowed:
        raise DTypeError(
            f"allreduce ({reduction}): expected {' or '.join(('float',) if reduction == 'mean' else ('numeric',))} "
            f"data ({', '.join(allowed)}), received {x.dtype}; hint: ng.cast(x, 'float32') first"
            + (", or use op='sum'" if reduction == "mean" else "")
        )
    return x.axes, x.dtype


def infer_broadcast_from(src: Sequence[Op], arg: Any, axes: Any, dtype: str | None) -> tuple[Axes, str]:
    """x's axes and dtype."""
    (x,) = src
    if x.dtype not in _NUMERIC + ("bool",):
        raise DTypeError(f"broadcast_from: expected numeric data, received {x.dtype}")
    return x.axes, x.dtype


def infer_allreduce_start(src: Sequence[Op], arg: Any, axes: Any, dtype: str | None) -> tuple[Axes, str]:
    """One flat axis holding every source's elements; every source has one dtype."""
    dtypes = sorted({s.dtype for s in src})
    if len(dtypes) != 1:
        raise DTypeError(f"allreduce_start: expected sources of one dtype, received {dtypes}; "
                         "hint: the bucketing pass groups allreduces by dtype")
    return Axes([Axis(BUCKET_AXIS, sum(s.axes.size for s in src))]), dtypes[0]


def infer_allreduce_wait(src: Sequence[Op], arg: Any, axes: Any, dtype: str | None) -> tuple[Axes, str]:
    """The axes and dtype of its own start (source ``arg.index``)."""
    index = getattr(arg, "index", None)
    if not _is_int(index) or not 0 <= index < len(src):
        raise AxesError(f"allreduce_wait: its bucket index {index!r} is out of range for {len(src)} start(s)")
    for s in src:
        if s.axes.names != (BUCKET_AXIS,):
            raise AxesError(f"allreduce_wait: expected allreduce_start sources [{BUCKET_AXIS}], received "
                            f"{format_axes(s.axes)}")
    return src[index].axes, src[index].dtype
