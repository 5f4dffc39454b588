"""The versioned JSON graph format: ``serialize(ops) -> str`` and ``deserialize(text) -> list[Op]``.

A document is one JSON object ``{"format_version": 1, "ops": [...], "roots": [ids]}``.
``ops`` holds every op reachable from the roots in topological order, one record
per line: ``{"arg", "axes": [[name, length]], "dtype", "meta": {"labels", "name",
"scope": [[name, kind]]}, "op": "add", "src": [ids]}``. An op's id is its position;
``src`` holds ids of earlier ops only. Each ``arg`` is written by one small encoder
per arg kind (``ARG_CODECS``, keyed by ``OpType``); nothing is pickled or reflected
over. Compiler-made ops (``fused``) are refused: serialize graphs before compiling.

Decisions:

* Unique ids are process-local and never written: placeholders, variables and
  random ops are numbered 0, 1, ... per kind by order of appearance, and loading
  gives each a fresh ``next_uid()``, so a loaded variable is a new op, never
  merged with a live one. Unseeded random ops draw from the transformer's seed and
  their uid, so only seeded ones reproduce their samples after a load.
* A variable's initial value is materialized: a number stays a number, an array is
  stored, a callable ``(axes) -> array`` is called once, at serialize time, and its
  result stored. This is the *graph* format; trained weights travel in HDF5.
* To find loaded placeholders, list them among the roots:
  ``loss, X = ng.deserialize(ng.serialize([loss, X]))`` (names survive too).
* Output is deterministic (sorted keys, one op per line, ids in topological order),
  so ``serialize(deserialize(text)) == text`` for text ``serialize`` wrote. Ops
  without variables, placeholders or random ops hash-cons with equal live ops and
  share their metadata.
* Reading is strict: unknown or missing keys, a version other than 1, a ``src``
  id that is not an earlier op, or axes that disagree with inference raise
  ``SerializationError``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .errors import NgraphError, SerializationError
from .ir import (
    ArrayValue,
    Axes,
    Axis,
    ConvArg,
    Op,
    OpGroup,
    OpType,
    PoolArg,
    RandomInfo,
    ScopeEntry,
    VariableInfo,
    next_uid,
    toposort,
)
from .ir import infer as infer_op
from .ir import verify as verify_graph
from .ir.infer import ALL_DTYPES
from .ir.names import check_name
from .ir.ops import OP_BY_NAME

FORMAT_VERSION = 1
_TOP_KEYS = ("format_version", "ops", "roots")
_OP_KEYS = ("arg", "axes", "dtype", "meta", "op", "src")
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_HINT = "hint: load only files written by ngraph_core.serialize, unedited and complete"


def _fail(where: str, expected: str, received: Any, hint: str = _HINT) -> SerializationError:
    return SerializationError(f"{where}: expected {expected}, received {repr(received)[:200]}; {hint}")


def _check(value: Any, types: type | tuple[type, ...], where: str, expected: str) -> Any:
    """``value`` if it is an instance of ``types`` (a bool is never taken for an int)."""
    if not isinstance(value, types) or (isinstance(value, bool) and types is not bool):
        raise _fail(where, expected, value)
    return value


def _check_keys(record: Any, keys: tuple[str, ...], where: str) -> dict:
    _check(record, dict, where, f"an object with keys {list(keys)}")
    if set(record) != set(keys):
        missing, extra = sorted(set(keys) - set(record)), sorted(set(record) - set(keys))
        raise _fail(where, f"keys {list(keys)} (missing {missing}, unexpected {extra})", sorted(record))
    return record


class _Ids(dict):
    """Per kind: process-local uid -> 0, 1, ... by appearance (writing); file id -> fresh uid (reading)."""

    def local(self, kind: str, uid: int) -> int:
        table = self.setdefault(kind, {})
        return table.setdefault(uid, len(table))

    def fresh(self, kind: str, local: int) -> int:
        table = self.setdefault(kind, {})
        return table[local] if local in table else table.setdefault(local, next_uid())


# -- values: numbers and arrays ---------------------------------------------------------------
def _encode_float(x: float) -> float | str:
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def _decode_float(data: Any, where: str) -> float:
    if isinstance(data, str) and data in _NONFINITE:
        return _NONFINITE[data]
    return float(_check(data, (int, float), where, 'a number or "inf", "-inf", "nan"'))


def _encode_array(array: np.ndarray, where: str) -> dict:
    if array.dtype.name not in ALL_DTYPES:
        raise _fail(where, f"an array of dtype among {ALL_DTYPES}", array.dtype.name, "hint: cast it first")
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return {"data": base64.b64encode(raw).decode("ascii"), "dtype": array.dtype.name, "shape": list(array.shape)}


def _decode_array(data: Any, where: str) -> np.ndarray:
    _check_keys(data, ("data", "dtype", "shape"), where)
    if data["dtype"] not in ALL_DTYPES:
        raise _fail(where, f"an array dtype among {ALL_DTYPES}", data["dtype"])
    shape = tuple(_check(data["shape"], list, where, "a shape list"))
    if not all(type(n) is int and n >= 0 for n in shape):
        raise _fail(where, "a shape of non-negative ints", list(shape))
    dtype = np.dtype(data["dtype"])
    try:
        raw = base64.b64decode(_check(data["data"], str, where, "base64 text"), validate=True)
    except binascii.Error as exc:
        raise _fail(where, "valid base64 array data", str(exc)) from None
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise _fail(where, f"{math.prod(shape) * dtype.itemsize} bytes for shape {shape} {dtype.name}", len(raw))
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(shape).astype(dtype)


def _encode_value(value: Any, where: str) -> dict:
    """A number as ``{"bool"|"int"|"float": x}`` (the tag keeps its type), an array as ``{"array": ...}``."""
    if isinstance(value, (bool, np.bool_)):
        return {"bool": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"int": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"float": _encode_float(float(value))}
    if isinstance(value, (np.ndarray, ArrayValue)):
        return {"array": _encode_array(value.array if isinstance(value, ArrayValue) else value, where)}
    raise _fail(where, "a number or an array", type(value).__name__, "hint: this value cannot be serialized")


_VALUE_DECODERS: dict[str, Callable[[Any, str], Any]] = {
    "bool": lambda data, where: _check(data, bool, where, "true or false"),
    "int": lambda data, where: _check(data, int, where, "an int"),
    "float": _decode_float,
    "array": _decode_array,
}


def _decode_value(data: Any, where: str) -> bool | int | float | np.ndarray:
    if not isinstance(data, dict) or len(data) != 1 or next(iter(data)) not in _VALUE_DECODERS:
        raise _fail(where, 'one of {"bool": b}, {"int": i}, {"float": x}, {"array": {...}}', data)
    ((kind, body),) = data.items()
    return _VALUE_DECODERS[kind](body, where)


# -- args: one encoder and one decoder per arg kind ----------------------------------------------

def _encode_none(op: Op, ids: _Ids) -> None:
    if op.arg is not None:
        raise _fail(f"{op.op.value} op", "no arg", op.arg, "hint: add an arg codec for it in serialize.py")


def _decode_none(data: Any, ids: _Ids, where: str) -> None:
    if data is not None:
        raise _fail(where, "arg null", data)


def _encode_constant(op: Op, ids: _Ids) -> dict:
    return _encode_value(op.arg, f"constant {op.name}")


def _decode_constant(data: Any, ids: _Ids, where: str) -> bool | int | float | ArrayValue:
    value = _decode_value(data, where)
    return ArrayValue(value) if isinstance(value, np.ndarray) else value


def _encode_variable(op: Op, ids: _Ids) -> dict:
    init = op.arg.initial_value
    if callable(init):  # materialized once: the file holds values, never code
        init = np.asarray(init(op.axes))
        if init.ndim and init.shape != op.axes.lengths:
            raise _fail(f"variable {op.name}", f"an initial value of shape {op.axes.lengths}", init.shape,
                        "hint: the initializer must return an array of the variable's shape")
    return {"id": ids.local("variable", op.arg.uid), "initial_value": _encode_value(init, f"variable {op.name}")}


def _decode_variable(data: Any, ids: _Ids, where: str) -> VariableInfo:
    _check_keys(data, ("id", "initial_value"), where)
    uid = ids.fresh("variable", _check(data["id"], int, where, "an int variable id"))
    return VariableInfo(uid, _decode_value(data["initial_value"], where))


def _encode_placeholder(op: Op, ids: _Ids) -> int:
    return ids.local("placeholder", op.arg)


def _decode_placeholder(data: Any, ids: _Ids, where: str) -> int:
    return ids.fresh("placeholder", _check(data, int, where, "an int placeholder id"))


def _encode_random(op: Op, ids: _Ids) -> dict:
    return {"a": _encode_float(float(op.arg.a)), "b": _encode_float(float(op.arg.b)),
            "id": ids.local("random", op.arg.uid), "seed": op.arg.seed}


def _decode_random(data: Any, ids: _Ids, where: str) -> RandomInfo:
    _check_keys(data, ("a", "b", "id", "seed"), where)
    seed = None if data["seed"] is None else _check(data["seed"], int, where, "an int seed or null")
    uid = ids.fresh("random", _check(data["id"], int, where, "an int random-op id"))
    return RandomInfo(uid, _decode_float(data["a"], where), _decode_float(data["b"], where), seed)


def _encode_index_tuple(op: Op, ids: _Ids) -> list:
    return [int(s) if isinstance(s, (int, np.integer)) else [int(n) for n in s] for s in op.arg]


def _index_decoder(width: int, form: str) -> Callable[[Any, _Ids, str], tuple]:
    """Decoder of a SLICE (width 3: start, stop, step) or PAD (width 2: start, step) arg."""

    def decode(data: Any, ids: _Ids, where: str) -> tuple:
        expected = f"a list with one int or [{form}] per axis"
        out: list[int | tuple[int, ...]] = []
        for item in _check(data, list, where, expected):
            if isinstance(item, list) and len(item) == width:
                out.append(tuple(_check(n, int, where, expected) for n in item))
            else:
                out.append(_check(item, int, where, expected))
        return tuple(out)

    return decode


def _encode_name(op: Op, ids: _Ids) -> str:
    return op.arg


def _decode_name(data: Any, ids: _Ids, where: str) -> str:
    return check_name(_check(data, str, where, "a name string"), f"{where}: arg", SerializationError)


def _ints(data: Any, where: str, what: str) -> tuple[int, ...]:
    items = _check(data, list, where, f"{what} as a list of ints")
    return tuple(_check(n, int, where, f"{what} as a list of ints") for n in items)


def _encode_conv(op: Op, ids: _Ids) -> dict:
    arg = op.arg
    return {"dilation": list(arg.dilation), "groups": arg.groups, "padding": [list(p) for p in arg.padding],
            "strides": list(arg.strides)}


def _decode_conv(data: Any, ids: _Ids, where: str) -> ConvArg:
    _check_keys(data, ("dilation", "groups", "padding", "strides"), where)
    pads = []
    for pair in _check(data["padding"], list, where, "padding as a list of [before, after]"):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise _fail(where, "padding entries [before, after]", pair)
        pads.append(_ints(pair, where, "padding"))
    return ConvArg(_ints(data["strides"], where, "strides"), tuple(pads), _ints(data["dilation"], where, "dilation"),
                   _check(data["groups"], int, where, "an int groups"))


def _encode_pool(op: Op, ids: _Ids) -> dict:
    arg = op.arg
    return {"ceil_mode": arg.ceil_mode, "count_include_pad": arg.count_include_pad, "fshape": list(arg.fshape),
            "op": arg.op, "padding": list(arg.padding), "strides": list(arg.strides)}


def _decode_pool(data: Any, ids: _Ids, where: str) -> PoolArg:
    _check_keys(data, ("ceil_mode", "count_include_pad", "fshape", "op", "padding", "strides"), where)
    return PoolArg(_check(data["op"], str, where, "a pooling op name"), _ints(data["fshape"], where, "fshape"),
                   _ints(data["strides"], where, "strides"), _ints(data["padding"], where, "padding"),
                   _check(data["ceil_mode"], bool, where, "true or false"),
                   _check(data["count_include_pad"], bool, where, "true or false"))


_NO_ARG = OpGroup.ELEMENTWISE | OpGroup.REDUCE | OpGroup.CONTRACTION | {
    OpType.BROADCAST, OpType.CAST_AXES, OpType.RESHAPE, OpType.ASSIGN, OpType.SEQUENTIAL, OpType.DOALL,
    OpType.MOMENTS, OpType.CENTERED_SUMS,
}

ARG_CODECS: dict[OpType, tuple[Callable[[Op, _Ids], Any], Callable[[Any, _Ids, str], Any]]] = {
    **{t: (_encode_none, _decode_none) for t in _NO_ARG},
    OpType.CONSTANT: (_encode_constant, _decode_constant),
    OpType.VARIABLE: (_encode_variable, _decode_variable),
    OpType.PLACEHOLDER: (_encode_placeholder, _decode_placeholder),
    OpType.UNIFORM: (_encode_random, _decode_random),
    OpType.NORMAL: (_encode_random, _decode_random),
    OpType.SLICE: (_encode_index_tuple, _index_decoder(3, "start, stop, step")),
    OpType.PAD: (_encode_index_tuple, _index_decoder(2, "start, step")),
    OpType.CONCAT: (_encode_name, _decode_name),  # the axis name
    OpType.CUSTOM_GRADIENT: (_encode_name, _decode_name),  # the registry key of ng.custom_gradient
    **{t: (_encode_conv, _decode_conv) for t in (OpType.CONV, OpType.CONV_BPROP_DATA, OpType.CONV_BPROP_FILTER)},
    **{t: (_encode_pool, _decode_pool) for t in (OpType.POOL, OpType.POOL_BPROP)},
}


# -- records --------------------------------------------------------------------------------------
def _encode_op(op: Op, index: dict[Op, int], ids: _Ids) -> dict:
    if op.op not in ARG_CODECS:  # compiler-made ops (``fused``) are not part of the format
        raise _fail("serialize", "ops of a user graph", op.op.value, "hint: serialize the graph before compiling it")
    encode_arg, _ = ARG_CODECS[op.op]
    meta = {"labels": sorted(op.meta.labels), "name": op.meta.name,
            "scope": [[s.name, s.kind] for s in op.meta.scope]}
    return {"arg": encode_arg(op, ids), "axes": [[a.name, a.length] for a in op.axes], "dtype": op.dtype,
            "meta": meta, "op": op.op.value, "src": [index[s] for s in op.src]}


def _decode_meta(data: Any, where: str) -> dict[str, Any]:
    _check_keys(data, ("labels", "name", "scope"), where)
    name = None if data["name"] is None else _check(data["name"], str, where, "a name string or null")
    labels = [_check(x, str, where, "label strings") for x in _check(data["labels"], list, where, "a label list")]
    scope = []
    for entry in _check(data["scope"], list, where, "a scope list of [name, kind]"):
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(s, str) for s in entry)):
            raise _fail(where, "scope entries [name, kind] of two strings", entry)
        scope.append(ScopeEntry(*entry))
    return {"name": name, "labels": labels, "scope": tuple(scope)}


def _decode_axes(data: Any, where: str) -> Axes:
    expected = "axes as a list of [name, length] (a str and an int)"
    for item in _check(data, list, where, expected):
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is str and type(item[1]) is int):
            raise _fail(where, expected, item)
    return Axes(Axis(name, length) for name, length in data)


def _decode_op(i: int, record: Any, built: list[Op], ids: _Ids) -> Op:
    where = f"op record {i}"
    _check_keys(record, _OP_KEYS, where)
    kind = OP_BY_NAME.get(record["op"]) if isinstance(record["op"], str) else None
    if kind not in ARG_CODECS:
        raise _fail(where, "an op name such as 'add' or 'dot' (an ngraph_core.OpType value)", record["op"],
                    "hint: the file may need a newer ngraph_core")
    where = f"op record {i} ({kind.value})"
    src_ids = _check(record["src"], list, where, "a src list of op ids")
    if not all(type(s) is int and 0 <= s < i for s in src_ids):
        raise _fail(where, f"src ids of earlier ops (0 <= id < {i})", src_ids, "hint: ops must be in topological order")
    src = [built[s] for s in src_ids]
    dtype = record["dtype"]
    if not isinstance(dtype, str) or dtype not in ALL_DTYPES:
        raise _fail(where, f"a dtype among {ALL_DTYPES}", dtype)
    try:
        axes = _decode_axes(record["axes"], where)
        arg = ARG_CODECS[kind][1](record["arg"], ids, where)
        out_axes, out_dtype = infer_op(kind, src, arg, axes, dtype)
        if (out_axes, out_dtype) != (axes, dtype):
            raise _fail(where, f"the axes and dtype inferred from its sources, {out_axes} {out_dtype}",
                        f"{axes} {dtype}")
        return Op(kind, src, axes, dtype, arg, **_decode_meta(record["meta"], where))
    except SerializationError:
        raise
    except Exception as exc:  # any failure of a hand-edited record becomes one error type
        raise _fail(where, "an op whose sources, axes, dtype and arg fit together", str(exc)) from exc


# -- public API -------------------------------------------------------------------------------
def serialize(ops: Op | Iterable[Op]) -> str:
    """The graph below ``ops`` as versioned JSON text (see the module docstring for the format).

    Args:
        ops: one op or a list of ops: the roots. List placeholders among them to find
            them again after loading.

    Returns:
        the document, deterministic for a given graph.

    Raises:
        SerializationError: a root that is not an op, a compiler-made op (``fused``), or
            a variable whose initializer returns an array of the wrong shape.

    Example:
        >>> text = ng.serialize([loss, X])
        >>> loss2, X2 = ng.deserialize(text)
    """
    roots = [ops] if isinstance(ops, Op) else list(ops)
    if not all(isinstance(r, Op) for r in roots):
        raise _fail("serialize", "an Op or a list of Ops", [type(r).__name__ for r in roots], "hint: pass graph ops")
    order = toposort(roots)
    index = {op: i for i, op in enumerate(order)}
    ids = _Ids()
    body = ",\n".join(json.dumps(_encode_op(op, index, ids), sort_keys=True, allow_nan=False) for op in order)
    return (f'{{"format_version": {FORMAT_VERSION}, "ops": [\n{body}\n], '
            f'"roots": {json.dumps([index[r] for r in roots])}}}\n')


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _fail("graph document", "each key once per object", keys)
    return dict(pairs)


def _reject_constant(name: str) -> Any:
    raise _fail("graph document", 'strict JSON (non-finite floats written as "inf", "-inf", "nan")', name)


def deserialize(text: str) -> list[Op]:
    """Rebuild the ops ``serialize`` wrote; return the roots in their original order.

    Variables, placeholders and random ops get fresh unique ids, so they are new ops,
    distinct from any live ones.

    Args:
        text: a document written by ``serialize``.

    Returns:
        the roots, in order.

    Raises:
        SerializationError: malformed or truncated JSON, a missing or newer
            ``format_version``, missing or unexpected keys, wrong types, an unknown op,
            a ``src`` id that is not an earlier op, or ops that fail verification.

    Example:
        >>> loss, X = ng.deserialize(path.read_text())
    """
    _check(text, str, "deserialize", "the text (str) of a graph document")
    try:
        doc = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _fail("graph document", "complete JSON text", f"{exc.msg} at line {exc.lineno} column {exc.colno}",
                    "hint: the file may be truncated or not a graph file") from None
    _check(doc, dict, "graph document", "a JSON object")
    version = doc.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # type(): true is not version 1
        newer = type(version) is int and version > FORMAT_VERSION
        raise _fail("graph document", f"format_version {FORMAT_VERSION}", version,
                    "hint: it was written by a newer ngraph_core; upgrade to load it" if newer else _HINT)
    _check_keys(doc, _TOP_KEYS, "graph document")
    built: list[Op] = []
    ids = _Ids()
    for i, record in enumerate(_check(doc["ops"], list, "graph document", "an ops list")):
        built.append(_decode_op(i, record, built, ids))
    root_ids = _check(doc["roots"], list, "graph document", "a roots list of op ids")
    if not all(type(r) is int and 0 <= r < len(built) for r in root_ids):
        raise _fail("graph document", f"root ids of ops (0 <= id < {len(built)})", root_ids)
    roots = [built[r] for r in root_ids]
    try:
        verify_graph(roots)
    except NgraphError as exc:
        raise _fail("graph document", "a graph that passes ng.verify", str(exc)) from exc
    return roots
