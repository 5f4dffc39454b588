"""An op's argument knows itself: ``ARG_TYPES`` names, per ``OpType``, the class that owns ``op.arg``.

Each arg class answers three questions about the args it owns, as static methods:

* ``check(op) -> str | None``: what is wrong with ``op.arg``'s form, None when it fits
  (``verify`` reports it as a ``VerifyError`` naming the op);
* ``to_json(op, ctx) -> data``: ``op.arg`` as JSON data for the graph format (it takes the
  op, not the arg alone: a variable's initializer is called with the op's axes, and errors
  name the op);
* ``from_json(data, ctx, where) -> arg``: the arg back, raising ``SerializationError``
  that says ``where``, what was expected and what was received.

``ctx`` is a ``CodecContext`` (``ir/codec.py``, which every arg module imports and which
imports none of them): what a codec may read besides its arg (the per-kind numbering of
unique ids, and the document's other ops). Args that are objects
(``VariableInfo``, ``RandomInfo``, ``ArrayValue``, ``ConvArg``, ``PoolArg``, ``CallArg``,
``FusedProgram``) carry these methods themselves, next to their ``repr``. Args that are
plain Python values (None, an int uid, a name, index tuples, a number) stay plain values,
since code all over reads them as such; the small classes below own them instead.

Example:
    >>> ARG_TYPES[OpType.CONV].check(op)          # None, or what is wrong
    >>> ARG_TYPES[op.op].to_json(op, CodecContext())
"""

from __future__ import annotations

from typing import Any

from ..errors import SerializationError
from .attention import AttentionArg
from .codec import CodecContext, check_type, decode_value, encode_value, fail, wrong_arg
from .collective import AllreduceArg, BucketArg, RootRank
from .conv import ConvArg, PoolArg
from .ctc import CTCArg
from .fused_program import FusedProgram
from .graph import CallArg
from .indexing import CumArg, ElementsArg, LookupArg, NdArg, TopKArg
from .logical import InfFlags, ShiftDirection
from .names import check_name
from .node import Op
from .ops import OpGroup, OpType
from .scan import ResultIndex, ScanArg
from .values import ArrayValue, RandomInfo, VariableInfo


class NoArg:
    """Ops without an arg (element-wise, reductions, dot, ...): ``arg`` is None, JSON ``null``."""

    @staticmethod
    def check(op: Op) -> str | None:
        return None if op.arg is None else wrong_arg(op, "no arg (None)")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> None:
        if op.arg is not None:
            raise fail(f"{op.op.value} op", "no arg", op.arg,
                       "hint: give its OpType an arg class in ngraph_core/ir/args.py ARG_TYPES")
        return None

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> None:
        if data is not None:
            raise fail(where, "arg null", data)
        return None


class PlaceholderId:
    """A placeholder's ``arg``: its unique int id; JSON: its number among the document's placeholders."""

    @staticmethod
    def check(op: Op) -> str | None:
        ok = isinstance(op.arg, int) and not isinstance(op.arg, bool)
        return None if ok else wrong_arg(op, "an int id (ng.placeholder makes one)")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> int:
        return ctx.local("placeholder", op.arg)

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> int:
        return ctx.fresh("placeholder", check_type(data, int, where, "an int placeholder id"))


class ConstantValue:
    """A constant's ``arg``: a bool, int or float, or an ``ArrayValue`` of the op's shape; JSON tagged by type."""

    @staticmethod
    def check(op: Op) -> str | None:
        if isinstance(op.arg, ArrayValue):
            return ArrayValue.check(op)
        return None if isinstance(op.arg, (int, float, bool)) else wrong_arg(op, "a number or an ArrayValue")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        if isinstance(op.arg, ArrayValue):
            return ArrayValue.to_json(op, ctx)
        return encode_value(op.arg, f"constant {op.name}")

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> bool | int | float | ArrayValue:
        if isinstance(data, dict) and set(data) == {"array"}:
            return ArrayValue.from_json(data, ctx, where)
        return decode_value(data, where)  # a number: ``{"array": ...}`` is read above


class _Name:
    """An arg that is a name string, checked for control characters when read."""

    expected = "a name"

    @classmethod
    def check(cls, op: Op) -> str | None:
        return None if isinstance(op.arg, str) else wrong_arg(op, cls.expected)

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> str:
        return op.arg

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> str:
        return check_name(check_type(data, str, where, "a name string"), f"{where}: arg", SerializationError)


class AxisName(_Name):
    """A concat's ``arg``: the name of the axis it joins along; JSON: the string."""

    expected = "the name (str) of the axis to concatenate along"


class LookupAxis(_Name):
    """A gather's or scatter_add's ``arg``: the name of the table axis the ids index; JSON: the string."""

    expected = "the name (str) of the table axis the ids index"


class GatherLookup:
    """A gather's ``arg``: the table axis's name (ids out of range read zero rows; JSON: the string), or a
    ``LookupArg`` (they raise; JSON: ``{"axis": name, "out_of_range": "raise"}``)."""

    @staticmethod
    def check(op: Op) -> str | None:
        return LookupAxis.check(op) if isinstance(op.arg, str) else LookupArg.check(op)

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> str | dict:
        return LookupAxis.to_json(op, ctx) if isinstance(op.arg, str) else LookupArg.to_json(op, ctx)

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> str | LookupArg:
        if not isinstance(data, dict):
            return LookupAxis.from_json(data, ctx, where)
        arg = LookupArg.from_json(data, ctx, where)
        check_name(arg.axis, f"{where}: arg axis", SerializationError)
        return arg


class GradientKey(_Name):
    """A custom_gradient's ``arg``: the registry key of its ``ng.custom_gradient`` function; JSON: the string."""

    expected = "the registry key (str) of an ng.custom_gradient function"


class _IndexTuple:
    """An arg with one entry per axis: an int, or a tuple of ``width`` ints (``form`` names them)."""

    width = 0
    form = ""

    @classmethod
    def check(cls, op: Op) -> str | None:
        def fits(item: Any) -> bool:
            items = item if isinstance(item, tuple) and len(item) == cls.width else (item,)
            return all(isinstance(n, int) and not isinstance(n, bool) for n in items)

        ok = isinstance(op.arg, tuple) and all(fits(item) for item in op.arg)
        return None if ok else wrong_arg(op, f"a tuple with one int or ({cls.form}) per axis")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> list:
        return [int(s) if isinstance(s, int) else [int(n) for n in s] for s in op.arg]

    @classmethod
    def from_json(cls, data: Any, ctx: CodecContext, where: str) -> tuple:
        expected = f"a list with one int or [{cls.form}] per axis"
        out: list[int | tuple[int, ...]] = []
        for item in check_type(data, list, where, expected):
            if isinstance(item, list) and len(item) == cls.width:
                out.append(tuple(check_type(n, int, where, expected) for n in item))
            else:
                out.append(check_type(item, int, where, expected))
        return tuple(out)


class SliceIndices(_IndexTuple):
    """A slice's ``arg``: per input axis, an index (drops the axis) or ``(start, stop, step)``."""

    width = 3
    form = "start, stop, step"


class PadWidths(_IndexTuple):
    """A pad's ``arg``: per output axis, an int (an axis the input lacks) or ``(start, step)``
    placing the input axis of the same name."""

    width = 2
    form = "start, step"


ARG_TYPES: dict[OpType, type] = {
    **{t: NoArg for t in OpGroup.ELEMENTWISE | OpGroup.REDUCE | OpGroup.CONTRACTION},
    **{t: NoArg for t in (OpType.BROADCAST, OpType.CAST_AXES, OpType.RESHAPE, OpType.MOMENTS,
                          OpType.CENTERED_SUMS, OpType.ASSIGN, OpType.SEQUENTIAL, OpType.DOALL)},
    OpType.CONSTANT: ConstantValue,
    OpType.VARIABLE: VariableInfo,
    OpType.PLACEHOLDER: PlaceholderId,
    OpType.UNIFORM: RandomInfo,
    OpType.NORMAL: RandomInfo,
    OpType.SLICE: SliceIndices,
    OpType.PAD: PadWidths,
    OpType.CONCAT: AxisName,
    OpType.GATHER: GatherLookup,  # the axis name, or LookupArg (ids out of range raise)
    OpType.SCATTER_ADD: LookupAxis,
    OpType.ISINF: InfFlags,  # which infinities count
    OpType.BIT_SHIFT: ShiftDirection,  # "left" | "right"
    OpType.CUMSUM: CumArg,  # axis name, exclusive, reverse
    OpType.CUMPROD: CumArg,
    OpType.TOPK: TopKArg,  # axis name, k, largest, sorted
    OpType.GATHER_ELEMENTS: ElementsArg,  # axis name, reduction
    OpType.SCATTER_ELEMENTS: ElementsArg,
    OpType.GATHER_ND: NdArg,  # batch_dims, reduction
    OpType.SCATTER_ND: NdArg,
    OpType.CONV: ConvArg,
    OpType.CONV_BPROP_DATA: ConvArg,
    OpType.CONV_BPROP_FILTER: ConvArg,
    OpType.POOL: PoolArg,
    OpType.POOL_BPROP: PoolArg,
    OpType.CTC: CTCArg,  # the blank class id and zero_infinity
    OpType.CTC_GRAD: CTCArg,
    OpType.CUSTOM_GRADIENT: GradientKey,
    OpType.CALL: CallArg,  # a sub-graph: ids of its params and roots
    OpType.SCAN: ScanArg,  # the body (ids of its params and roots), counts, axis, flags
    OpType.SCAN_RESULT: ResultIndex,
    OpType.FUSED: FusedProgram,  # compiler-made: checked, never written
    OpType.ALLREDUCE: AllreduceArg,  # the reduction ("mean" | "sum") and an optional bucket size
    OpType.BROADCAST_FROM: RootRank,
    OpType.ALLREDUCE_START: BucketArg,  # compiler-made: checked, never written
    OpType.ALLREDUCE_WAIT: BucketArg,
    OpType.FUSED_ATTENTION: AttentionArg,  # compiler-made: checked, never written
}
