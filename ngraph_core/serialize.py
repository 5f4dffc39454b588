"""The versioned JSON graph format: ``serialize(ops) -> str`` and ``deserialize(text) -> list[Op]``.

A document is one JSON object ``{"format_version": 1, "ops": [...], "roots": [ids]}``.
``ops`` holds every op reachable from the roots in topological order, one record
per line: ``{"arg", "axes": [[name, length]], "dtype", "meta": {"labels", "name",
"scope": [[name, kind]]}, "op": "add", "src": [ids]}``. An op's id is its position;
``src`` holds ids of earlier ops only. Each ``arg`` is written and read by the class
that owns it (``ir/args.py`` ``ARG_TYPES``, keyed by ``OpType``: ``to_json`` and
``from_json``); nothing is pickled or reflected over. Compiler-made ops (``fused``)
are refused: serialize graphs before compiling.

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
* Debug taps (``Selection.tap``, the meta attribute ``tap``) are callables set at run time and
  are not written: a loaded graph has no taps.
* Reading is strict: unknown or missing keys, a version other than 1, a ``src``
  id that is not an earlier op, or axes that disagree with inference raise
  ``SerializationError``.
* Reading is bounded: the text's length (``max_chars``, 256 Mi characters), its nesting
  depth (``max_depth``, 64; a document ``serialize`` writes nests 8 deep) and the op count
  (``max_ops``, one million) are checked before they cost anything — the depth by a scan of
  the brackets outside strings, before the JSON parser could recurse — so hostile text ends
  in a ``SerializationError``, never a ``RecursionError`` or a parser's own exception.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from . import safe_json
from .errors import NgraphError, SerializationError
from .ir import ARG_TYPES, Axes, Axis, CodecContext, Op, ScopeEntry, update_meta, walk
from .ir import infer as infer_op
from .ir import verify as verify_graph
from .ir.codec import HINT, check_keys, check_type, fail
from .ir.dtypes import ALL_DTYPES
from .ir.names import check_name
from .ir.ops import OP_BY_NAME
from .memory_budget import budget_message, resolve_max_bytes, tensor_bytes
from .safe_json import nesting_depth  # noqa: F401  (re-exported: its home was here)
from .selectors import TAP_ATTR

FORMAT_VERSION = 1
MAX_CHARS = 256 << 20
MAX_DEPTH = 64
MAX_OPS = 1_000_000
_LIMIT_HINT = ("hint: the file may be truncated or not a graph file; for a genuine graph file written by "
               "ngraph_core.serialize, pass a larger max_chars or max_depth")
_TOP_KEYS = ("format_version", "ops", "roots")
_OP_KEYS = ("arg", "axes", "dtype", "meta", "op", "src")


# -- records --------------------------------------------------------------------------------------
def _encode_op(op: Op, ctx: CodecContext) -> dict:
    meta = {"labels": sorted(op.meta.labels), "name": op.meta.name,
            "scope": [[s.name, s.kind, list(s.kinds)] if s.kinds else [s.name, s.kind] for s in op.meta.scope]}
    attrs = {k: v for k, v in op.meta.attrs.items() if k != TAP_ATTR}  # taps are runtime callables, not data
    if attrs:
        meta["attrs"] = {k: _encode_attr(v, f"{op.name} attribute {k!r}") for k, v in sorted(attrs.items())}
    return {"arg": ARG_TYPES[op.op].to_json(op, ctx), "axes": [[a.name, a.length] for a in op.axes],
            "dtype": op.dtype, "meta": meta, "op": op.op.value, "src": [ctx.index[s] for s in op.src]}


_ATTR_TYPES = (bool, int, float, str)


def _encode_attr(value: Any, where: str) -> Any:
    """An attribute value as JSON: a bool, number or string, or a list of them."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, _ATTR_TYPES) and not (isinstance(v, float) and not math.isfinite(v)) for v in items):
        raise fail(where, "a bool, finite number or string, or a list of them", repr(value),
                   "hint: keep attributes plain data")
    return list(value) if isinstance(value, (list, tuple)) else value


def _decode_attrs(data: Any, where: str) -> dict[str, Any]:
    attrs = {}
    for key, value in check_type(data, dict, where, "an attrs object").items():
        check_name(key, f"{where}: attribute name", SerializationError)
        attrs[key] = tuple(value) if isinstance(value, list) else value
        _encode_attr(value, f"{where}: attribute {key!r}")
    return attrs


def _decode_meta(data: Any, where: str) -> dict[str, Any]:
    keys = ("attrs", "labels", "name", "scope") if isinstance(data, dict) and "attrs" in data else (
        "labels", "name", "scope")
    check_keys(data, keys, where)
    name = None if data["name"] is None else check_type(data["name"], str, where, "a name string or null")
    labels = check_type(data["labels"], list, where, "a label list")
    labels = [check_type(x, str, where, "label strings") for x in labels]
    scope = []
    expected = "scope entries [name, kind] or [name, kind, [classes]] of strings"
    for entry in check_type(data["scope"], list, where, "a scope list of [name, kind]"):
        if not (isinstance(entry, list) and len(entry) in (2, 3) and all(isinstance(s, str) for s in entry[:2])):
            raise fail(where, expected, entry)
        kinds = entry[2] if len(entry) == 3 else []
        if not (isinstance(kinds, list) and all(isinstance(k, str) for k in kinds)):
            raise fail(where, expected, entry)
        scope.append(ScopeEntry(entry[0], entry[1], tuple(kinds)))
    attrs = _decode_attrs(data["attrs"], where) if "attrs" in data else {}
    return {"name": name, "labels": labels, "scope": tuple(scope), "attrs": attrs}


def _decode_axes(data: Any, where: str) -> Axes:
    expected = "axes as a list of [name, length] (a str and an int)"
    for item in check_type(data, list, where, expected):
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is str and type(item[1]) is int):
            raise fail(where, expected, item)
    return Axes(Axis(name, length) for name, length in data)


def _decode_op(i: int, record: Any, built: list[Op], ctx: CodecContext) -> Op:
    where = f"op record {i}"
    check_keys(record, _OP_KEYS, where)
    kind = OP_BY_NAME.get(record["op"]) if isinstance(record["op"], str) else None
    if kind is None:
        raise fail(where, "an op name such as 'add' or 'dot' (an ngraph_core.OpType value)", record["op"],
                   "hint: the file may need a newer ngraph_core")
    where = f"op record {i} ({kind.value})"
    src_ids = check_type(record["src"], list, where, "a src list of op ids")
    if not all(type(s) is int and 0 <= s < i for s in src_ids):
        raise fail(where, f"src ids of earlier ops (0 <= id < {i})", src_ids, "hint: ops must be in topological order")
    src = [built[s] for s in src_ids]
    dtype = record["dtype"]
    if not isinstance(dtype, str) or dtype not in ALL_DTYPES:
        raise fail(where, f"a dtype among {ALL_DTYPES}", dtype)
    try:
        axes = _decode_axes(record["axes"], where)
        arg = ARG_TYPES[kind].from_json(record["arg"], ctx, where)
        out_axes, out_dtype = infer_op(kind, src, arg, axes, dtype)
        if (out_axes, out_dtype) != (axes, dtype):
            raise fail(where, f"the axes and dtype inferred from its sources, {out_axes} {out_dtype}",
                       f"{axes} {dtype}")
        meta = _decode_meta(record["meta"], where)
        attrs = meta.pop("attrs")
        op = Op(kind, src, axes, dtype, arg, **meta)
        return update_meta(op, attrs=attrs) if attrs else op
    except SerializationError:
        raise
    except Exception as exc:  # any failure of a hand-edited record becomes one error type
        raise fail(where, "an op whose sources, axes, dtype and arg fit together", str(exc)) from exc


def _check_bytes(op: Op, i: int, max_bytes: int) -> None:
    """Refuse an op whose value would take more than ``max_bytes`` (a declared size costs nothing to write)."""
    nbytes = tensor_bytes(op.axes.lengths, op.dtype)
    if nbytes > max_bytes:
        expected, received = budget_message(nbytes, max_bytes, f"axes {list(op.axes.lengths)} of {op.dtype}")
        raise fail(f"op record {i} ({op.op.value})", expected, received,
                   "hint: is the file damaged? If the size is meant, pass a larger max_bytes to deserialize "
                   "or set NG_MAX_BYTES")


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
        raise fail("serialize", "an Op or a list of Ops", [type(r).__name__ for r in roots], "hint: pass graph ops")
    order = walk(roots)  # sub-graphs' ops before the ops that carry them
    index = {op: i for i, op in enumerate(order)}
    ctx = CodecContext(index=index)
    body = ",\n".join(json.dumps(_encode_op(op, ctx), sort_keys=True, allow_nan=False) for op in order)
    return (f'{{"format_version": {FORMAT_VERSION}, "ops": [\n{body}\n], '
            f'"roots": {json.dumps([index[r] for r in roots])}}}\n')


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise fail("graph document", "each key once per object", keys)
    return dict(pairs)


def _reject_constant(name: str) -> Any:
    raise fail("graph document", 'strict JSON (non-finite floats written as "inf", "-inf", "nan")', name)


def _check_limit(name: str, value: int, limit: int, what: str) -> None:
    if value > limit:
        raise fail("graph document", f"at most {name}={limit} {what}", value,
                   f"hint: is this a graph file written by ngraph_core.serialize? If so, pass a larger {name}")


def _parse(text: str, max_chars: int, max_depth: int) -> Any:
    """The JSON of ``text``, its length and nesting depth checked first."""
    check_type(text, str, "deserialize", "the text (str) of a graph document")
    return safe_json.loads(text, what="graph document", error=SerializationError, max_depth=max_depth,
                           max_chars=max_chars, hint=_LIMIT_HINT, object_pairs_hook=_reject_duplicates,
                           parse_constant=_reject_constant)


def deserialize(text: str, max_chars: int = MAX_CHARS, max_depth: int = MAX_DEPTH,
                max_ops: int = MAX_OPS, max_bytes: int | None = None) -> list[Op]:
    """Rebuild the ops ``serialize`` wrote; return the roots in their original order.

    Variables, placeholders and random ops get fresh unique ids, so they are new ops,
    distinct from any live ones.

    Args:
        text: a document written by ``serialize``.
        max_chars: the longest text to read (256 Mi characters).
        max_depth: the deepest nesting of JSON arrays and objects to read (64).
        max_ops: the most op records to decode (one million).
        max_bytes: the most bytes one op's value may take (its axes' lengths times its dtype's item
            size), checked as each record is read, before anything is allocated: by default
            ``NG_MAX_BYTES`` or 1 GiB (``ngraph_core/memory_budget.py``).

    Returns:
        the roots, in order.

    Raises:
        SerializationError: malformed or truncated JSON, text longer, deeper or with more
            ops than the limits, an op over ``max_bytes``, a missing or newer ``format_version``, missing or unexpected
            keys, wrong types, an unknown op, a ``src`` id that is not an earlier op, or ops
            that fail verification.

    Example:
        >>> loss, X = ng.deserialize(path.read_text())
    """
    doc = _parse(text, max_chars, max_depth)
    check_type(doc, dict, "graph document", "a JSON object")
    version = doc.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # type(): true is not version 1
        newer = type(version) is int and version > FORMAT_VERSION
        raise fail("graph document", f"format_version {FORMAT_VERSION}", version,
                   "hint: it was written by a newer ngraph_core; upgrade to load it" if newer else HINT)
    check_keys(doc, _TOP_KEYS, "graph document")
    records = check_type(doc["ops"], list, "graph document", "an ops list")
    _check_limit("max_ops", len(records), max_ops, "op records")
    built: list[Op] = []
    ctx = CodecContext(built=built)
    budget = resolve_max_bytes(max_bytes, "deserialize: max_bytes")
    for i, record in enumerate(records):
        built.append(_decode_op(i, record, built, ctx))
        _check_bytes(built[-1], i, budget)
    root_ids = check_type(doc["roots"], list, "graph document", "a roots list of op ids")
    if not all(type(r) is int and 0 <= r < len(built) for r in root_ids):
        raise fail("graph document", f"root ids of ops (0 <= id < {len(built)})", root_ids)
    roots = [built[r] for r in root_ids]
    try:
        verify_graph(roots)
    except NgraphError as exc:
        raise fail("graph document", "a graph that passes ng.verify", str(exc)) from exc
    return roots
