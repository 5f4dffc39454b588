"""Graph documents mutated as an attacker would, then decoded, compiled and run on the compiled kernels.

Used by ``test_graph_run_fuzz.py`` (which runs ``main`` in a child process, so that a crash is a
failed test and not a dead test run) and by ``benchmarks/reliability_loaders.py``.

A mutation replaces one integer of one op's ``arg`` (a slice bound, a pad offset, a conv stride or
padding, a pool window, a top-k count, an axis index...) with an edge value, then *adjusts the declared
lengths to match*: each record's ``axes`` and ``dtype`` are set to what inference gives from its
sources, as a hand-crafted file would have them. Such a document must either be refused with a
``SerializationError`` or decode into a graph that compiles and runs (here 4 calls, the compiled scan
taking over from the third, ``NG_KERNELS=numba`` for every compiled kernel) with correct memory
accesses: a run ends with its results or an ``NgraphError`` (a feed the graph refuses), never a raw
exception or a signal.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

EDGES = (-(2**31), -2, -1, 0, 1, 2, 3, 4, 5, 7, 63, 64, 2**24)


def _int_paths(node: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every int (not bool) inside a JSON tree."""
    if isinstance(node, bool):
        return []
    if isinstance(node, int):
        return [path]
    if isinstance(node, dict):
        return [p for k in sorted(node) for p in _int_paths(node[k], (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _int_paths(v, (*path, i))]
    return []


def _set(node: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _get(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


def fix_lengths(doc: dict) -> dict:
    """``doc`` with each record's declared axes and dtype set to what inference gives (where it gives any)."""
    import importlib

    ser = importlib.import_module("ngraph_core.serialize")  # the package re-exports a function named serialize
    from ngraph_core.errors import SerializationError
    from ngraph_core.ir import ARG_TYPES, CodecContext
    from ngraph_core.ir import infer as infer_op
    from ngraph_core.ir.ops import OP_BY_NAME

    built: list = []
    ctx = CodecContext(built=built)
    for i, record in enumerate(doc["ops"]):
        try:
            built.append(ser._decode_op(i, record, built, ctx))
            continue
        except SerializationError:
            pass
        try:
            kind = OP_BY_NAME[record["op"]]
            src = [built[s] for s in record["src"]]
            arg = ARG_TYPES[kind].from_json(record["arg"], ctx, "fuzz")
            axes = ser._decode_axes(record["axes"], "fuzz")
            out_axes, out_dtype = infer_op(kind, src, arg, axes, record["dtype"])
            record["axes"], record["dtype"] = [[a.name, a.length] for a in out_axes], out_dtype
            built.append(ser._decode_op(i, record, built, ctx))
        except Exception:  # noqa: BLE001 - inference refuses the mutation: the document stays refused
            return doc
    return doc


def mutants(seeds: list[str], count: int, seed: int) -> list[str]:
    """``count`` documents, each a seed with one int of one op's arg replaced and the lengths adjusted."""
    rng = random.Random(seed)
    docs = [json.loads(s) for s in seeds]
    candidates = [(d, i, p) for d, doc in enumerate(docs) for i, record in enumerate(doc["ops"])
                  for p in _int_paths(record["arg"], (i, "arg"))]
    out = []
    for _ in range(count):
        d, i, path = rng.choice(candidates)
        doc = json.loads(seeds[d])
        old = _get(doc["ops"], path)
        new = rng.choice([*EDGES, old + 1, old - 1, old * 2, old + rng.randint(2, 9)])
        _set(doc["ops"], path, new)
        out.append(json.dumps(fix_lengths(doc)))
    return out


def _feed(op: Any, rng: np.random.Generator) -> np.ndarray:
    shape, dtype = op.axes.lengths, np.dtype(op.dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 3, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.standard_normal(shape).astype(dtype)


def run_one(text: str, calls: int = 4) -> str:
    """``"ok"``, ``"refused"`` (typed error at decode), ``"typed"`` (typed error at compile or run), or
    ``"raw <Type>: <message>"``."""
    import ngraph_core as ng
    from ngraph_core.errors import NgraphError, SerializationError
    from ngraph_core.ir import OpType

    try:
        roots = ng.deserialize(text)
    except SerializationError:
        return "refused"
    placeholders = [r for r in roots if r.op is OpType.PLACEHOLDER]
    results = [r for r in roots if r.op is not OpType.PLACEHOLDER] or placeholders
    rng = np.random.default_rng(0)
    try:
        with ng.transformers.make_transformer() as t:
            f = t.computation(results, *placeholders)
            feeds = [_feed(p, rng) for p in placeholders]
            for _ in range(calls):
                f(*feeds)
    except NgraphError:
        return "typed"
    except Exception as exc:  # noqa: BLE001 - what the contract forbids: reported, not raised
        return f"raw {type(exc).__name__}: {str(exc)[:160]}"
    return "ok"


def main(path: str) -> None:
    """Run every document of the JSON list at ``path``; print one JSON line per document as it ends."""
    for i, text in enumerate(json.loads(Path(path).read_text())):
        start = time.perf_counter()
        outcome = run_one(text)
        print(json.dumps({"i": i, "outcome": outcome, "s": round(time.perf_counter() - start, 3)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
