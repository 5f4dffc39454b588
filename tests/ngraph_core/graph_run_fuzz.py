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


def _rename_lengths(node: Any, old: dict[str, int], new: dict[str, int]) -> Any:
    """Every ``[name, length]`` pair of ``node`` with ``length == old[name]`` given ``new[name]`` instead."""
    if isinstance(node, list):
        if len(node) == 2 and isinstance(node[0], str) and type(node[1]) is int and old.get(node[0]) == node[1]:
            return [node[0], new[node[0]]]
        return [_rename_lengths(v, old, new) for v in node]
    if isinstance(node, dict):
        return {k: _rename_lengths(v, old, new) for k, v in node.items()}
    return node


def _fix_once(doc: dict) -> bool:
    """One pass over the records; True when it changed the document and another pass is needed."""
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
        except Exception:  # noqa: BLE001 - not even readable: the document stays refused
            return False
        try:
            out_axes, out_dtype = infer_op(kind, src, arg, axes, record["dtype"])
        except Exception:  # noqa: BLE001
            # an op whose axes are given (cast_axes, broadcast...): the attacker renames its axes' lengths
            # to its source's everywhere in the document, as a hand-made file would
            if not src or len(src[0].axes) != len(axes):
                return False
            old = {a.name: a.length for a, b in zip(axes, src[0].axes) if a.length != b.length}
            new = {a.name: b.length for a, b in zip(axes, src[0].axes) if a.length != b.length}
            if not old:
                return False
            doc["ops"] = _rename_lengths(doc["ops"], old, new)
            return True
        record["axes"], record["dtype"] = [[a.name, a.length] for a in out_axes], out_dtype
        return True
    return False


def fix_lengths(doc: dict, passes: int = 6) -> dict:
    """``doc`` with its declared axes and dtypes adjusted to what inference gives from the sources, and the
    lengths of axes that an op takes as given renamed everywhere to match (a few passes at most)."""
    for _ in range(passes):
        if not _fix_once(doc):
            break
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


def extra_seeds() -> list[str]:
    """Seeds that put static indices in front of the compiled kernels: a slice inside a scan body (the
    compiled scan), a padded convolution and a max pool (Winograd, compiled pooling)."""
    import ngraph_core as ng

    rec, c, n, h = (ng.make_axis(6, name="REC"), ng.make_axis(4, name="C"), ng.make_axis(2, name="N"),
                    ng.make_axis(3, name="H"))
    x, h0 = ng.placeholder([c, rec, n], name="x"), ng.placeholder([h, n], name="h0")

    def step(x_t, state):
        total = ng.tanh(state + ng.cast_axes(ng.tensor_slice(x_t, [slice(0, 3), slice(None)]), [h, n]))
        return [total], [total]

    (last,), (every,) = ng.scan(step, [x], [h0], rec)
    img = ng.placeholder([ng.make_axis(3, name="C"), ng.make_axis(8, name="H"), ng.make_axis(8, name="W"), n],
                         name="img")
    w = ng.variable([ng.make_axis(3, name="C"), ng.make_axis(3, name="R"), ng.make_axis(3, name="S"),
                     ng.make_axis(4, name="K")], initial_value=0.1, name="w")
    conv = ng.relu(ng.convolution(img, w, padding=1))
    pooled = ng.pooling(conv, 2, "max", strides=2, padding=1, ceil_mode=True)
    return [ng.serialize([last, every, x, h0]), ng.serialize([pooled, img])]


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
