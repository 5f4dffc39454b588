"""What the arg classes share: ``CodecContext``, the wrong-form message and the JSON building blocks.

Every arg class (``ir/args.py``, ``ConvArg``, ``VariableInfo``...) reports a wrong
``arg`` with ``wrong_arg`` and writes its ``arg`` as JSON with these helpers;
``serialize.py`` uses them for the document around the args. Reading is strict: anything
unexpected raises ``SerializationError`` saying where, what was expected and what was
received.

* a float is a JSON number, or ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON has none);
* a value (a number or an array) is tagged so it keeps its type:
  ``{"bool": true}``, ``{"int": 3}``, ``{"float": 0.5}``, ``{"array": {"data", "dtype", "shape"}}``
  with the array's bytes little-endian in base64.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SerializationError
from .dtypes import ALL_DTYPES
from .uids import next_uid

if TYPE_CHECKING:
    from .node import Op

HINT = "hint: load only files written by ngraph_core.serialize, unedited and complete"
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class CodecContext:
    """What an arg's codec may read besides the arg, for one document being written or read.

    Unique ids are process-local, so the format numbers them 0, 1, ... per kind by order of
    appearance (``local``, writing) and gives each a fresh uid when read (``fresh``).
    ``index`` (writing: op -> its id) and ``built`` (reading: the ops decoded so far) let an
    arg refer to other ops of the document, such as a sub-graph's params and roots.

    Args:
        index: writing: each op of the document -> its id.
        built: reading: the ops decoded so far, by id.

    Example:
        >>> ctx = CodecContext(index={op: i for i, op in enumerate(walk(roots))})
    """

    def __init__(self, index: dict[Op, int] | None = None, built: list[Op] | None = None) -> None:
        self.index = {} if index is None else index
        self.built = [] if built is None else built
        self._ids: dict[str, dict[int, int]] = {}

    def local(self, kind: str, uid: int) -> int:
        """Writing: the document's id for the process-local ``uid`` of a ``kind`` (0, 1, ... by appearance)."""
        table = self._ids.setdefault(kind, {})
        return table.setdefault(uid, len(table))

    def fresh(self, kind: str, local: int) -> int:
        """Reading: the new process-local uid for the document's id ``local`` of a ``kind``."""
        table = self._ids.setdefault(kind, {})
        return table[local] if local in table else table.setdefault(local, next_uid())


def wrong_arg(op: Any, expected: str) -> str:
    """The ``check`` message of an arg class for an ``op.arg`` of the wrong form.

    Args:
        op: the op whose arg is wrong.
        expected: the form its OpType takes (``"a ConvArg"``).

    Returns:
        ``"expected <expected> as the <kind> arg, received <type> <value>; hint: ..."``.
    """
    return (f"expected {expected} as the {op.op.value} arg, received {type(op.arg).__name__} "
            f"{repr(op.arg)[:80]}; hint: build {op.op.value} ops through ngraph_core's API")


def fail(where: str, expected: str, received: Any, hint: str = HINT) -> SerializationError:
    """The error to raise: ``"<where>: expected <expected>, received <received>; <hint>"``.

    Args:
        where: the record or field at fault (``"op record 3 (conv)"``).
        expected: what would have been accepted.
        received: what was found (its repr is cut at 200 characters).
        hint: what to do about it.

    Returns:
        the ``SerializationError`` (the caller raises it).
    """
    return SerializationError(f"{where}: expected {expected}, received {repr(received)[:200]}; {hint}")


def check_type(value: Any, types: type | tuple[type, ...], where: str, expected: str) -> Any:
    """``value`` if it is an instance of ``types`` (a bool is never taken for an int).

    Raises:
        SerializationError: ``value`` has another type.
    """
    if not isinstance(value, types) or (isinstance(value, bool) and types is not bool):
        raise fail(where, expected, value)
    return value


def check_keys(record: Any, keys: tuple[str, ...], where: str) -> dict:
    """``record`` if it is a JSON object with exactly ``keys``.

    Raises:
        SerializationError: not an object, or missing or unexpected keys.
    """
    check_type(record, dict, where, f"an object with keys {list(keys)}")
    if set(record) != set(keys):
        missing, extra = sorted(set(keys) - set(record)), sorted(set(record) - set(keys))
        raise fail(where, f"keys {list(keys)} (missing {missing}, unexpected {extra})", sorted(record))
    return record


def decode_ints(data: Any, where: str, what: str) -> tuple[int, ...]:
    """A JSON list of ints as a tuple; ``what`` names it in errors (``"strides"``).

    Raises:
        SerializationError: not a list of ints.
    """
    items = check_type(data, list, where, f"{what} as a list of ints")
    return tuple(check_type(n, int, where, f"{what} as a list of ints") for n in items)


def encode_float(x: float) -> float | str:
    """``x`` as JSON: itself when finite, else ``"inf"``, ``"-inf"`` or ``"nan"``."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def decode_float(data: Any, where: str) -> float:
    """The float ``encode_float`` wrote.

    Raises:
        SerializationError: neither a number nor one of the three non-finite names.
    """
    if isinstance(data, str) and data in _NONFINITE:
        return _NONFINITE[data]
    return float(check_type(data, (int, float), where, 'a number or "inf", "-inf", "nan"'))


def encode_array(array: np.ndarray, where: str) -> dict:
    """``{"data": base64 little-endian bytes, "dtype", "shape"}``.

    Raises:
        SerializationError: a dtype the IR does not know.
    """
    if array.dtype.name not in ALL_DTYPES:
        raise fail(where, f"an array of dtype among {ALL_DTYPES}", array.dtype.name, "hint: cast it first")
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return {"data": base64.b64encode(raw).decode("ascii"), "dtype": array.dtype.name, "shape": list(array.shape)}


def decode_array(data: Any, where: str) -> np.ndarray:
    """The array ``encode_array`` wrote.

    Raises:
        SerializationError: bad keys, an unknown dtype, a bad shape, bad base64, or a
            byte count that does not fit the shape.
    """
    check_keys(data, ("data", "dtype", "shape"), where)
    if data["dtype"] not in ALL_DTYPES:
        raise fail(where, f"an array dtype among {ALL_DTYPES}", data["dtype"])
    shape = tuple(check_type(data["shape"], list, where, "a shape list"))
    if not all(type(n) is int and n >= 0 for n in shape):
        raise fail(where, "a shape of non-negative ints", list(shape))
    dtype = np.dtype(data["dtype"])
    try:
        raw = base64.b64decode(check_type(data["data"], str, where, "base64 text"), validate=True)
    except binascii.Error as exc:
        raise fail(where, "valid base64 array data", str(exc)) from None
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise fail(where, f"{math.prod(shape) * dtype.itemsize} bytes for shape {shape} {dtype.name}", len(raw))
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(shape).astype(dtype)


def encode_value(value: Any, where: str) -> dict:
    """A number as ``{"bool"|"int"|"float": x}`` (the tag keeps its type), an array as ``{"array": ...}``.

    Raises:
        SerializationError: neither a number nor an ndarray.
    """
    if isinstance(value, (bool, np.bool_)):
        return {"bool": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"int": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"float": encode_float(float(value))}
    if isinstance(value, np.ndarray):
        return {"array": encode_array(value, where)}
    raise fail(where, "a number or an array", type(value).__name__, "hint: this value cannot be serialized")


_VALUE_DECODERS: dict[str, Callable[[Any, str], Any]] = {
    "bool": lambda data, where: check_type(data, bool, where, "true or false"),
    "int": lambda data, where: check_type(data, int, where, "an int"),
    "float": decode_float,
    "array": decode_array,
}


def decode_value(data: Any, where: str) -> bool | int | float | np.ndarray:
    """The number or array ``encode_value`` wrote.

    Raises:
        SerializationError: not one of the four tagged forms, or a bad body.
    """
    if not isinstance(data, dict) or len(data) != 1 or next(iter(data)) not in _VALUE_DECODERS:
        raise fail(where, 'one of {"bool": b}, {"int": i}, {"float": x}, {"array": {...}}', data)
    ((kind, body),) = data.items()
    return _VALUE_DECODERS[kind](body, where)


class CompilerMadeArg:
    """The codec half of the args of compiler-made ops (``fused``, ``allreduce_start``/``allreduce_wait``):
    such ops exist only in compiled graphs, so they are never written and no document may hold one.

    A subclass names, in ``USER_OPS``, ops a user graph could hold instead (for the error message).
    """

    USER_OPS = "'add' or 'dot'"

    @staticmethod
    def to_json(op: Any, ctx: Any) -> Any:
        """Always raises: compiler-made ops are not part of the graph format.

        Raises:
            SerializationError: always; serialize the graph before compiling it.
        """
        raise fail("serialize", "ops of a user graph", op.op.value, "hint: serialize the graph before compiling it")

    @classmethod
    def from_json(cls, data: Any, ctx: Any, where: str) -> Any:
        """Always raises: no document holds a compiler-made op.

        Raises:
            SerializationError: always.
        """
        raise fail(where, f"an op name of a user graph such as {cls.USER_OPS} (not a compiler-made op)", data,
                   "hint: serialize graphs before compiling them")
