"""The values an op's ``arg`` holds when a plain Python value will not do: hashable arrays
(constants), variable and random-op ids, and the process-unique id counter.

Each class owns its validation (``check``), JSON codec (``to_json``/``from_json``) and repr;
``args.ARG_TYPES`` says which class owns which OpType's arg.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .codec import check_keys, check_type, decode_float, decode_value, encode_float, encode_value, fail, wrong_arg

if TYPE_CHECKING:
    from .codec import CodecContext
    from .node import Op

# -- op arguments that need care to be hashable ----------------------------------------


class ArrayValue:
    """An immutable, hashable array held in ``arg`` of a constant.

    Hash and equality use dtype, shape and bytes, so two equal constants hash-cons
    to one op.
    """

    __slots__ = ("array", "_digest")

    def __init__(self, value: Any, dtype: str | None = None) -> None:
        array = np.array(value, dtype=dtype, copy=True, order="C")
        array.flags.writeable = False
        object.__setattr__(self, "array", array)
        digest = hashlib.blake2b(array, digest_size=16).digest()  # the buffer itself: tobytes() would copy it
        object.__setattr__(self, "_digest", (str(array.dtype), array.shape, digest))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("ArrayValue is immutable")

    def __hash__(self) -> int:
        return hash(self._digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayValue) and self._digest == other._digest

    def __repr__(self) -> str:
        flat = self.array.ravel()
        body = ", ".join(f"{v:g}" if self.array.dtype.kind == "f" else str(v) for v in flat[:4])
        more = ", ..." if flat.size > 4 else ""
        return f"array({body}{more}; shape={self.array.shape})"

    # -- as a constant's arg (the protocol of ir/args.py) --------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not an ArrayValue of the op's shape, else None."""
        if not isinstance(op.arg, ArrayValue):
            return wrong_arg(op, "an ArrayValue")
        if op.arg.array.shape != op.axes.lengths:
            return f"constant array shape {op.arg.array.shape} differs from axes lengths {op.axes.lengths}"
        return None

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"array": {"data", "dtype", "shape"}}`` (see ``ir/codec.py``)."""
        return encode_value(op.arg.array, f"constant {op.name}")

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> ArrayValue:
        """The ArrayValue ``to_json`` wrote; raises ``SerializationError`` on any other data."""
        return ArrayValue(decode_value(check_keys(data, ("array",), where), where))


class VariableInfo:
    """``arg`` of a variable: its unique id and how to initialise it.

    ``initial_value`` is a number, an array, or a callable ``(axes) -> array``.
    Equality and hash use the id alone.
    """

    __slots__ = ("uid", "initial_value")

    def __init__(self, uid: int, initial_value: Any) -> None:
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "initial_value", initial_value)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("VariableInfo is immutable")

    def __hash__(self) -> int:
        return hash(("var", self.uid))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VariableInfo) and other.uid == self.uid

    def __repr__(self) -> str:
        return f"var#{self.uid}"

    # -- as a variable's arg (the protocol of ir/args.py) --------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a VariableInfo, else None."""
        return None if isinstance(op.arg, VariableInfo) else wrong_arg(op, "a VariableInfo")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"id": its number among the document's variables, "initial_value": a tagged value}``.

        A callable initializer is called once, here, with the op's axes: the file holds
        values, never code.

        Raises:
            SerializationError: an initializer that returns an array of the wrong shape, or
                an initial value that is neither a number nor an array.
        """
        init = op.arg.initial_value
        if callable(init):
            init = np.asarray(init(op.axes))
            if init.ndim and init.shape != op.axes.lengths:
                raise fail(f"variable {op.name}", f"an initial value of shape {op.axes.lengths}", init.shape,
                           "hint: the initializer must return an array of the variable's shape")
        if isinstance(init, ArrayValue):
            init = init.array
        return {"id": ctx.local("variable", op.arg.uid), "initial_value": encode_value(init, f"variable {op.name}")}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> VariableInfo:
        """A VariableInfo with a fresh uid (one per document id) and the stored initial value."""
        check_keys(data, ("id", "initial_value"), where)
        uid = ctx.fresh("variable", check_type(data["id"], int, where, "an int variable id"))
        return VariableInfo(uid, decode_value(data["initial_value"], where))


@dataclass(frozen=True, slots=True)
class RandomInfo:
    """``arg`` of a random op: unique id, the two distribution parameters and an optional seed."""

    uid: int
    a: float
    b: float
    seed: int | None = None

    def __repr__(self) -> str:
        seed = "" if self.seed is None else f", seed={self.seed}"
        return f"rand#{self.uid}(a={self.a:g}, b={self.b:g}{seed})"

    # -- as a random op's arg (the protocol of ir/args.py) -------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a RandomInfo or its seed is not a non-negative int below 2**64
        (what a generator takes), else None."""
        if not isinstance(op.arg, RandomInfo):
            return wrong_arg(op, "a RandomInfo")
        seed = op.arg.seed
        if seed is not None and (type(seed) is not int or not 0 <= seed < 2**64):
            return f"expected a seed in [0, 2**64) or None, received {seed!r}; hint: pass seed=0 or a positive int"
        return None

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"a", "b", "id": its number among the document's random ops, "seed": int or null}``."""
        arg = op.arg
        return {"a": encode_float(float(arg.a)), "b": encode_float(float(arg.b)),
                "id": ctx.local("random", arg.uid), "seed": arg.seed}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> RandomInfo:
        """A RandomInfo with a fresh uid (one per document id); raises ``SerializationError`` on bad data."""
        check_keys(data, ("a", "b", "id", "seed"), where)
        seed = None if data["seed"] is None else check_type(data["seed"], int, where, "an int seed or null")
        if seed is not None and not 0 <= seed < 2**64:
            raise fail(where, "a seed in [0, 2**64) or null", seed)
        uid = ctx.fresh("random", check_type(data["id"], int, where, "an int random-op id"))
        return RandomInfo(uid, decode_float(data["a"], where), decode_float(data["b"], where), seed)
