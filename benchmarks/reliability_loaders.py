"""How loaders and decoders end on hostile input (issue 18 items 7 and 8): seeded mutants and 1 MB attacks.

Part 1 feeds ~2,000 seeded mutants to each target (IDX raw, IDX gzip, graph JSON, layer config)
and counts how each ended: a result, a typed error (``ng.NgraphError``), or anything else (must
be 0), with the slowest input. Part 2 runs each 1 MB hostile input in a fresh child process and
reports the peak memory it made the loader use: tracemalloc's peak and the growth of the
process's peak RSS (``ru_maxrss``) over the loader call. The selector-strings target (issue 18 item 8,
``selector_table``) runs as many seeded selector strings (mutants, long repeats past the 4096-character
bound, deep nesting, non-strings) through ``model.select`` on a ~540-op CNN, counting hangs (> 5 s) too.

Part 3 loads ``.ngi`` files (``ng.inference.load``): ~500 seeded mutants of two tiny saved models
(byte mutants, and archives with a manifest field or a part edited and the crc32s recomputed) and
the issue's hostile files, in a child process under a 1 GiB address-space cap (``RLIMIT_AS``),
restarted after a crash or a hang (``NGI_HANG_SECONDS``): success, ``DeployError``, raw exception,
hang, crash, memory past the cap, the slowest input and the child's peak RSS.

Part 4 (issue 19 items 5 and 6, ``onnx_hostile_table``) imports and runs ONNX models of a few dozen bytes whose
shapes, repeats, sizes, pads, ranges, depths or indices are hostile (``2**29``, ``2**40``, ``-2**63``...), each in
a fresh child process under a 1 GiB ``RLIMIT_AS``: success, typed error, raw exception, hang (30 s), crash (a
signal), and memory over 1 GiB (an allocation the cap refused, even when reported as a typed error).

Run: ``.venv/bin/python benchmarks/reliability_loaders.py [--mutants 2000] [--ngi 500] [--onnx 150] [--seed 0]
[--only mutants|memory|ngi|selectors|onnx]``.
"""

from __future__ import annotations

import argparse
import collections
import copy
import functools
import gzip
import io
import json
import os
import random
import resource
import select
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng
from neon.containers import BranchNode, MergeSum, Sequential, Tree
from neon.data import read_idx, read_image
from neon.layers import Affine, BatchNorm, Conv, Pool, deserialize_layer, serialize_layer

JSON_EDGES = [None, True, 0, -1, 2**31, 10**40, 1e308, "", "nan", "x" * 100, [], {}, [[]], {"a": None}]


def idx_seeds() -> list[bytes]:
    rng = np.random.default_rng(0)
    return [struct.pack(">HBB3I", 0, 8, 3, 4, 5, 6) + rng.integers(0, 256, 120, dtype=np.uint8).tobytes(),
            struct.pack(">HBBI", 0, 8, 1, 17) + bytes(range(17)),
            struct.pack(">HBB2I", 0, 0x0B, 2, 3, 4) + np.arange(12, dtype=">i2").tobytes()]


def mutate_bytes(data: bytes, rand: random.Random) -> bytes:
    """A bit flip, a cut, an insertion, a header byte or dimension set to any value, or random bytes."""
    at, kind = rand.randrange(len(data) + 1), rand.choice(["flip", "cut", "insert", "header", "dim", "random"])
    if kind == "flip" and at < len(data):
        return data[:at] + bytes([data[at] ^ (1 << rand.randrange(8))]) + data[at + 1:]
    if kind == "cut":
        return data[:at]
    if kind == "insert":
        return data[:at] + rand.randbytes(rand.randrange(1, 32)) + data[at:]
    if kind == "header" and len(data) >= 4:
        field = rand.randrange(4)
        return data[:field] + bytes([rand.randrange(256)]) + data[field + 1:]
    if kind == "dim" and len(data) >= 8:
        value = rand.choice([0, 1, 2**31, 2**32 - 1, rand.randrange(2**32)])
        return data[:4] + struct.pack(">I", value) + data[8:]
    return rand.randbytes(rand.randrange(64))


def mutate_json(doc: Any, rand: random.Random) -> Any:
    """One node, reached by a random walk, replaced, deleted, duplicated or buried under nesting."""
    parent, key, node = None, None, doc
    while isinstance(node, (dict, list)) and node and rand.random() < 0.75:
        parent, key = node, rand.choice(list(node) if isinstance(node, dict) else range(len(node)))
        node = node[key]
    new = copy.deepcopy(rand.choice(JSON_EDGES))
    kind = rand.choice(["replace", "delete", "duplicate", "nest"])
    if parent is None:
        return new
    if kind == "delete":
        del parent[key]
    elif kind == "duplicate" and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(node))
    else:
        for _ in range(rand.choice([1, 10, 80]) if kind == "nest" else 0):
            node = [node]
        parent[key] = node if kind == "nest" else new
    return doc


def graph_seeds() -> list[str]:
    F, K, N = ng.make_axis(5, "F"), ng.make_axis(3, "K"), ng.make_axis(2, "N")
    x, y = ng.placeholder([F, N], name="X"), ng.placeholder([K, N], name="Y")
    w, b = ng.variable([K, F], np.ones((3, 5)), name="W"), ng.variable([K], 0.0, name="b")
    loss = ng.cross_entropy_multi(ng.softmax(ng.dot(w, x) + b), y)
    step = ng.doall([ng.assign(v, v - 0.1 * g) for v, g in zip([w, b], ng.gradients(loss, [w, b]))])
    C, H, W = ng.make_axis(2, "C"), ng.make_axis(6, "H"), ng.make_axis(6, "W")
    image = ng.placeholder([C, H, W, N], name="image")
    conv = ng.convolution(image, ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), K], 0.5), padding=1)
    return [ng.serialize([loss, step, x, y]), ng.serialize([ng.pooling(ng.relu(conv), 2), image]),
            ng.serialize([ng.pad(ng.tensor_slice(x, [slice(0, 3), 1]), [(1, 0)]), x])]


def layer_seeds() -> list[dict]:
    fork = BranchNode()
    models = [Sequential([Conv((3, 3, 8), padding=1, activation="relu"), Pool(2), BatchNorm(), Affine(10)]),
              Sequential([MergeSum([[Affine(4), Affine(4)], []]), Tree([[Affine(4), fork, Affine(2)], [fork]])])]
    return [json.loads(json.dumps(serialize_layer(m))) for m in models]


def run_target(inputs: list[Any], call: Callable[[Any], Any]) -> dict[str, Any]:
    counts, slowest = {"success": 0, "typed error": 0, "anything else": 0}, 0.0
    for item in inputs:
        start = time.perf_counter()
        try:
            call(item)
            counts["success"] += 1
        except ng.NgraphError:
            counts["typed error"] += 1
        except Exception as exc:  # the figure that must stay 0
            counts["anything else"] += 1
            print(f"  ! {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
        slowest = max(slowest, time.perf_counter() - start)
    return {"tried": len(inputs), **counts, "slowest": slowest}


def mutants_table(n: int, seed: int, folder: Path) -> list[str]:
    rand = random.Random(seed)
    idx = [rand.choice(idx_seeds()) for _ in range(n)]
    idx = [mutate_bytes(mutate_bytes(d, rand), rand) if rand.random() < 0.5 else mutate_bytes(d, rand) for d in idx]
    gz = [gzip.compress(d, mtime=0) if rand.random() < 0.5 else mutate_bytes(gzip.compress(d, mtime=0), rand)
          for d in idx]
    graphs, layers = graph_seeds(), layer_seeds()
    docs = [json.dumps(mutate_json(json.loads(rand.choice(graphs)), rand)) if rand.random() < 0.6 else
            mutate_bytes(rand.choice(graphs).encode(), rand).decode("utf-8", "replace") for _ in range(n)]
    configs = [mutate_json(copy.deepcopy(rand.choice(layers)), rand) for _ in range(n)]

    def read_file(suffix: str) -> Callable[[bytes], Any]:
        def call(data: bytes) -> Any:
            path = folder / f"mutant{suffix}"
            path.write_bytes(data)
            return read_idx(path)
        return call

    rows = {"IDX raw": run_target(idx, read_file(".idx")), "IDX gzip": run_target(gz, read_file(".idx.gz")),
            "graph JSON": run_target(docs, lambda t: ng.verify(ng.deserialize(t))),
            "layer config": run_target(configs, deserialize_layer)}
    lines = ["| target | inputs tried | success | typed error | anything else | slowest input |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['tried']} | {r['success']} | {r['typed error']} | {r['anything else']} | "
                     f"{r['slowest'] * 1e3:.1f} ms |")
    return lines



# -- selector strings (issue 18 item 8) ------------------------------------------------------------------------
SELECTOR_SEEDS = ["Conv > Pool variable", ".elementwise:not(Conv *)", "#Affine_1", "Affine[nout=10]", "[name^=W]",
                  "Conv variable, BatchNorm variable", "dot < variable", "Conv >> Affine", "*:has(Conv *)",
                  "Layer:not(:has(dot)) > *", "Conv[padding=1] relu"]
SELECTOR_PIECES = list("*#.[]():,><=!^$ \t'\"\\-_0aZé\x00") + [
    "Conv", "Pool", "variable", "dot", ":not(", ":has(", "[nout=", ">>", "<<", "*:not(#b)"]
SELECTOR_HANG_SECONDS = 5.0
"""A select taking this long counts as a hang (it is timed, not interrupted)."""


def selector_inputs(n: int, rand: random.Random) -> list[Any]:
    """Seeded selector inputs: mutated seed queries, random pieces, long repeats up to twice
    ``MAX_QUERY_LENGTH``, nesting up to 48 deep, and a few non-strings."""
    from ngraph_core.selectors.parser import MAX_QUERY_LENGTH

    def mutate(text: str) -> str:
        at = rand.randrange(len(text) + 1)
        kind = rand.choice(["insert", "delete", "duplicate", "replace"])
        if kind == "insert":
            return text[:at] + rand.choice(SELECTOR_PIECES) + text[at:]
        if kind == "delete":
            return text[:at] + text[at + rand.randrange(1, 4):]
        if kind == "duplicate":
            return text[:at] + text[at:at + rand.randrange(1, 12)] * rand.randrange(2, 6) + text[at:]
        return text[:at] + rand.choice(SELECTOR_PIECES) + text[at + 1:]

    inputs: list[Any] = [None, 42, b"Conv", ["Conv"], "", " ", "x" * (MAX_QUERY_LENGTH + 1)]
    while len(inputs) < n:
        kind = rand.choice(["mutant", "mutant", "pieces", "long", "deep"])
        if kind == "mutant":
            text = rand.choice(SELECTOR_SEEDS)
            for _ in range(rand.randrange(1, 4)):
                text = mutate(text)
        elif kind == "pieces":
            text = "".join(rand.choice(SELECTOR_PIECES) for _ in range(rand.randrange(1, 40)))
        elif kind == "long":
            unit = rand.choice(SELECTOR_SEEDS + ["*", "Conv", "#W"])
            sep = rand.choice([" ", " > ", ">>", "<", ", ", ""])
            text = sep.join([unit] * (rand.randrange(1, 2 * MAX_QUERY_LENGTH) // (len(unit) + len(sep)) + 1))
        else:
            depth = rand.randrange(1, 48)
            text = rand.choice([":not(", ":has(", "Conv:has("]) * depth + rand.choice(SELECTOR_SEEDS) + ")" * depth
        inputs.append(text)
    return inputs


def selector_table(n: int, seed: int) -> list[str]:
    """``model.select`` on seeded selector strings over a neon CNN of ~540 ops: how each ended, and the slowest."""
    from neon.initializers import Constant
    from neon.model import Model

    layers: list[Any] = []
    for _ in range(24):
        layers += [Conv((3, 3, 4), padding=1, bias=Constant(0), activation="relu"), BatchNorm()]
    model = Model([*layers, Pool(2), Affine(10, activation="softmax")])
    model.build((2, 8, 8), batch_size=2)
    ops = len(ng.ordered_ops(model.__ngraph_ops__()))
    counts = {"success": 0, "typed error": 0, "raw exception": 0, "hang": 0}
    slowest, slowest_query = 0.0, ""
    inputs = selector_inputs(n, random.Random(seed))
    for query in inputs:
        start = time.perf_counter()
        try:
            model.select(query)
            counts["success"] += 1
        except ng.NgraphError:
            counts["typed error"] += 1
        except Exception as exc:  # the figure that must stay 0
            counts["raw exception"] += 1
            print(f"  ! {type(exc).__name__}: {str(exc)[:120]} on {str(query)[:80]!r}", file=sys.stderr)
        elapsed = time.perf_counter() - start
        counts["hang"] += elapsed > SELECTOR_HANG_SECONDS
        if elapsed > slowest:
            slowest, slowest_query = elapsed, str(query)
    return ["| target | inputs tried | success | typed error | raw exception | hang (> 5 s) | slowest input |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| selector strings ({ops}-op graph) | {len(inputs)} | {counts['success']} | {counts['typed error']} | "
            f"{counts['raw exception']} | {counts['hang']} | {slowest * 1e3:.1f} ms "
            f"({len(slowest_query)} chars: {slowest_query[:24]!r}...) |"]

# -- part 2: 1 MB hostile inputs, each in a fresh child process -----------------------------------------------
def _gzip_of(header: bytes, zeros: int) -> bytes:
    z, chunk = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(1 << 22)
    parts = [z.compress(header)]
    for start in range(0, zeros, len(chunk)):
        parts.append(z.compress(chunk[:min(len(chunk), zeros - start)]))
    return b"".join([*parts, z.flush()])


def _png_of(width: int, height: int, rows: int | None = None) -> bytes:
    """A grey PNG announcing ``width`` x ``height``, with ``rows`` rows of zeros (all by default)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = zlib.compress(bytes((width + 1) * (height if rows is None else rows)), 9)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


HOSTILE: dict[str, tuple[str, Callable[[], bytes], str]] = {
    "IDX gz bomb: 10 labels announced, 1 GiB of zeros": (
        ".idx.gz", lambda: _gzip_of(struct.pack(">HBBI", 0, 8, 1, 10), 1 << 30), "idx"),
    "IDX gz bomb: 60000x28x28 announced, 1 GiB of zeros": (
        ".idx.gz", lambda: _gzip_of(struct.pack(">HBB3I", 0, 8, 3, 60000, 28, 28), 1 << 30), "idx"),
    "IDX gz: as much as 1 MB can hold (~1 GB), announced and delivered": (
        ".idx.gz", lambda: _gzip_of(struct.pack(">HBBI", 0, 8, 1, 1000 << 20), 1000 << 20), "idx"),
    "IDX raw: header claiming 2**32 items, 1 MB file": (
        ".idx", lambda: struct.pack(">HBB2I", 0, 8, 2, 65536, 65536) + bytes(1 << 20), "idx"),
    "graph JSON: 1 MB of [[[[...": (".json", lambda: b"[" * (1 << 20), "graph"),
    "graph JSON: 1 MB of {\"a\": {\"a\": ...": (".json", lambda: b'{"a": ' * ((1 << 20) // 6), "graph"),
    "layer config: 1 MB of JSON, a Sequential of 20,000 Affine layers": (
        ".json", lambda: json.dumps({"class_name": "Sequential", "config": {"layers": [
            {"class_name": "Affine", "config": {"nout": 3}}] * 20_000}}).encode(), "layer"),
    "layer config: 1 MB of JSON, a 350,000-item list as a config value": (
        ".json", lambda: json.dumps({"class_name": "Affine", "config": {"nout": [0] * 350_000}}).encode(), "layer"),
    "PNG: 30000x30000 announced, one row delivered": (".png", lambda: _png_of(30_000, 30_000, rows=1), "png"),
    "PNG: 9000x9000 grey (under the pixel limit), ~80 KB": (".png", lambda: _png_of(9000, 9000), "png"),
}
LOADERS: dict[str, Callable[[Path], Any]] = {
    "idx": read_idx, "graph": lambda p: ng.deserialize(p.read_text()),
    "layer": lambda p: deserialize_layer(json.loads(p.read_text())), "png": read_image,
}


def child(name: str, path: Path) -> None:
    """Run one loader on one file; print ``outcome tracemalloc_peak rss_growth`` (bytes)."""
    loader = LOADERS[HOSTILE[name][2]]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    try:
        loader(path)
        outcome = "success"
    except ng.NgraphError as exc:
        outcome = type(exc).__name__
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    print(outcome, peak, rss)


def memory_table(folder: Path) -> list[str]:
    lines = ["| hostile input | file size | outcome | tracemalloc peak | peak RSS growth |", "|---|---:|---|---:|---:|"]
    for name, (suffix, make, _) in HOSTILE.items():
        path = folder / f"hostile{suffix}"
        path.write_bytes(make())
        out = subprocess.run([sys.executable, __file__, "--child", name, str(path)], capture_output=True, text=True,
                             check=True).stdout.split()
        lines.append(f"| {name} | {path.stat().st_size / 1e6:.3f} MB | {out[0]} | {int(out[1]) / 2**20:.1f} MiB | "
                     f"{int(out[2]) / 2**20:.1f} MiB |")
    return lines


# -- part 3: .ngi files, loaded in a child process under a 1 GiB address-space cap ----------------------------
NGI_CAP = 1 << 30  # RLIMIT_AS of the child: an allocation past it is a MemoryError, counted as "memory > 1 GiB"
NGI_HANG_SECONDS = 15.0
NGI_OUTCOMES = ("success", "typed error", "raw exception", "hang", "crash", "memory > 1 GiB")


@functools.lru_cache(maxsize=1)
def ngi_seeds() -> list[bytes]:
    """Two tiny saved models: ``dot(W, x) + b`` with W in fp32, and in int8 (a scale per row) beside an fp32 b."""
    from ngraph_core.inference import CompiledModel
    from ngraph_core.inference.quantize import quantize_weight

    seeds = []
    for precision in ("fp32", "int8"):
        F, K, N = ng.make_axis(6, "F"), ng.make_axis(4, "K"), ng.make_axis(2, "N")
        x = ng.placeholder([F, N], name="x")
        w, b = ng.variable([K, F], 0.0, name="W"), ng.variable([K], 0.0, name="b")
        rng = np.random.default_rng(0)
        weights = {w: quantize_weight(rng.normal(size=(4, 6)).astype(np.float32), precision, (0,)),
                   b: quantize_weight(rng.normal(size=4).astype(np.float32), "fp32")}
        model = CompiledModel([x], [ng.dot(w, x) + b], weights, precision, batch_size=2, accuracy_drop=0.01)
        with tempfile.TemporaryDirectory() as folder:
            model.save(Path(folder) / "m.ngi")
            seeds.append((Path(folder) / "m.ngi").read_bytes())
    return seeds


def ngi_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {name: z.read(name) for name in z.namelist()}


def ngi_pack(parts: dict[str, bytes], manifest: Any, deflate: frozenset[str] = frozenset()) -> bytes:
    """A valid zip of ``parts`` and ``manifest`` (text as given; a dict dumped with its crc32s recomputed)."""
    if isinstance(manifest, dict) and isinstance(manifest.get("parts"), dict):
        manifest["parts"] = {n: zlib.crc32(parts[n]) if n in parts else c for n, c in manifest["parts"].items()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("manifest.json", manifest if isinstance(manifest, (str, bytes)) else json.dumps(manifest))
        for name, blob in parts.items():
            z.writestr(name, blob, zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED)
    return buffer.getvalue()


def ngi_mutants(n: int, rand: random.Random) -> list[bytes]:
    """Byte mutants of the seeds (40%), and edited archives (a manifest field, a part replaced, cut or
    deflated; crc32s recomputed, so the checks behind the CRCs are reached)."""
    seeds, out = ngi_seeds(), []
    for _ in range(n):
        data = rand.choice(seeds)
        if rand.random() < 0.4:
            once = mutate_bytes(data, rand)
            out.append(mutate_bytes(once, rand) if rand.random() < 0.3 else once)
            continue
        parts = ngi_members(data)
        manifest: Any = json.loads(parts.pop("manifest.json"))
        deflate = set()
        for _ in range(rand.choice([1, 1, 2, 3])):
            kind = rand.choice(["manifest", "manifest", "manifest", "part", "deflate"])
            name = rand.choice(sorted(parts))
            if kind == "manifest":
                manifest = mutate_json(manifest, rand)
            elif kind == "deflate":
                deflate.add(name)
            else:
                parts[name] = mutate_bytes(parts[name] or b"\0", rand)
        out.append(ngi_pack(parts, manifest, frozenset(deflate)))
    return out


def _ngi_bomb(size: int) -> bytes:
    """An .ngi whose W part inflates to ``size`` bytes of zeros, the manifest announcing exactly that."""
    parts = ngi_members(ngi_seeds()[0])
    manifest = json.loads(parts.pop("manifest.json"))
    manifest["weights"][0]["shape"] = [size // 4]
    info, chunk, crc = zipfile.ZipInfo("weights/0.bin"), bytes(1 << 24), 0
    info.compress_type = zipfile.ZIP_DEFLATED
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        with z.open(info, "w", force_zip64=True) as part:
            for start in range(0, size, len(chunk)):
                piece = chunk[:min(len(chunk), size - start)]
                part.write(piece)
                crc = zlib.crc32(piece, crc)
        manifest["parts"] = {**manifest["parts"], "weights/0.bin": crc}
        z.writestr("manifest.json", json.dumps(manifest))
        for name, blob in parts.items():
            if name != "weights/0.bin":
                z.writestr(name, blob)
    return buffer.getvalue()


def _ngi_edit(change: Callable[[dict, dict], Any], precision: int = 0) -> Callable[[], bytes]:
    def make() -> bytes:
        parts = ngi_members(ngi_seeds()[precision])
        manifest = json.loads(parts.pop("manifest.json"))
        text = change(manifest, parts)
        return ngi_pack(parts, text if text is not None else manifest)
    return make


NGI_HOSTILE: dict[str, Callable[[], bytes]] = {
    "a list as weight data": _ngi_edit(lambda m, p: m["weights"][0].update(data=[1, 2])),
    "a manifest of 100,000 [": _ngi_edit(lambda m, p: "[" * 100_000),
    "accuracy_drop: 1e400": _ngi_edit(lambda m, p: json.dumps(m).replace('"accuracy_drop": 0.01',
                                                                         '"accuracy_drop": 1e400')),
    "accuracy_drop: 10**400": _ngi_edit(lambda m, p: m.update(accuracy_drop=10**400)),
    "shape [2**32, 2**32], an empty part": _ngi_edit(
        lambda m, p: (m["weights"][0].update(shape=[2**32, 2**32]), p.update({"weights/0.bin": b""}))[0]),
    "an int8 scale of the wrong shape": _ngi_edit(
        lambda m, p: (m["weights"][0].update(scale_shape=[3, 1]), p.update({"weights/0.scale": bytes(12)}))[0], 1),
    "a weight name nested 980 deep": _ngi_edit(
        lambda m, p: json.dumps({**m, "weights": "NEST"}).replace('"NEST"', "[" * 980 + "]" * 980)),
    "1.5 MB file, a part inflating to 1.5 GiB (the manifest agrees)": lambda: _ngi_bomb(3 << 29),
}


def ngi_child(folder: Path, start: int) -> None:
    """Load each ``folder/*.ngi`` from the ``start``-th under the address-space cap; print
    ``i outcome seconds peak_kib`` per input (after ``ready``, once the imports are done)."""
    from ngraph_core.inference import DeployError, load

    resource.setrlimit(resource.RLIMIT_AS, (NGI_CAP, NGI_CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    paths = sorted(folder.glob("*.ngi"))
    print("ready", flush=True)
    for i in range(start, len(paths)):
        began = time.perf_counter()
        try:
            load(paths[i])
            outcome = "success"
        except DeployError:
            outcome = "typed"
        except MemoryError:
            outcome = "memory"
        except Exception as exc:  # noqa: BLE001 - the figure that must stay 0
            outcome = f"raw:{type(exc).__name__}:{str(exc)[:80].replace(' ', '_')}"
        peak = next((int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                     if line.startswith("VmHWM:")), 0)
        print(i, outcome, f"{time.perf_counter() - began:.4f}", peak, flush=True)


def run_ngi(folder: Path, inputs: list[bytes]) -> tuple[dict[str, Any], list[tuple[str, float, int]]]:
    """Each input's outcome, seconds and the child's peak RSS (KiB) so far; children restarted after a crash or hang."""
    for i, data in enumerate(inputs):
        (folder / f"{i:06d}.ngi").write_bytes(data)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    results: list[tuple[str, float, int]] = []
    while len(results) < len(inputs):
        proc = subprocess.Popen([sys.executable, __file__, "--ngi-child", str(folder), str(len(results))], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        fd, pending, ready = proc.stdout.fileno(), b"", False
        deadline = time.monotonic() + 60.0  # the child's imports
        while len(results) < len(inputs):
            if b"\n" not in pending:
                wait = deadline - time.monotonic()
                readable = select.select([fd], [], [], max(0.0, wait))[0] if wait > 0 else []
                chunk = os.read(fd, 65536) if readable else None
                if chunk:
                    pending += chunk
                    continue
                if chunk is None:  # no line in time: a hang
                    proc.kill()
                    results.append(("hang", NGI_HANG_SECONDS, 0))
                else:  # the child ended without a line: a crash (a signal or an exit)
                    proc.wait()
                    results.append(("crash", 0.0, 0))
                    print(f"  ! input {len(results) - 1}: child exit {proc.returncode}", file=sys.stderr)
                break
            line, pending = pending.split(b"\n", 1)
            deadline = time.monotonic() + NGI_HANG_SECONDS
            if not ready:
                ready = line == b"ready"
                continue
            _, outcome, seconds, peak = line.decode().split(" ")
            if outcome.startswith("raw:"):
                print(f"  ! input {len(results)}: {outcome[4:]}", file=sys.stderr)
            results.append((outcome, float(seconds), int(peak)))
        proc.kill()
        proc.wait()
    names = {"success": "success", "typed": "typed error", "memory": "memory > 1 GiB", "hang": "hang", "crash": "crash"}
    counts = dict.fromkeys(NGI_OUTCOMES, 0)
    for outcome, _, _ in results:
        counts[names.get(outcome, "raw exception")] += 1
    slowest = max(range(len(results)), key=lambda i: results[i][1])
    return {"tried": len(results), **counts, "slowest": results[slowest][1], "slowest input": slowest,
            "peak": max(r[2] for r in results)}, results


def ngi_tables(n: int, seed: int, folder: Path) -> list[str]:
    rand = random.Random(seed)
    mutants = ngi_mutants(n, rand)
    (folder / "mutants").mkdir()
    summary, _ = run_ngi(folder / "mutants", mutants)
    cols = " | ".join(NGI_OUTCOMES)
    lines = [f"| target | inputs tried | {cols} | slowest input | child peak RSS |",
             "|---|---:|" + "---:|" * len(NGI_OUTCOMES) + "---:|---:|",
             f"| .ngi (ng.inference.load) | {summary['tried']} | "
             + " | ".join(str(summary[k]) for k in NGI_OUTCOMES)
             + f" | {summary['slowest'] * 1e3:.1f} ms (#{summary['slowest input']}) | "
             f"{summary['peak'] / 1024:.0f} MiB |",
             "", "| hostile .ngi | file size | outcome | time | child peak RSS |", "|---|---:|---|---:|---:|"]
    for name, make in NGI_HOSTILE.items():
        sub = folder / f"hostile{len(lines)}"
        sub.mkdir()
        data = make()
        _, ((outcome, seconds, peak),) = run_ngi(sub, [data])
        lines.append(f"| {name} | {len(data) / 1e6:.3f} MB | {outcome} | {seconds * 1e3:.1f} ms | "
                     f"{peak / 1024:.0f} MiB |")
    return lines


# -- part 4: ONNX bytes with hostile shapes, each in a fresh child under a 1 GiB address-space cap -------------------
ONNX_CAP = 1 << 30
ONNX_HANG_SECONDS = 30.0
ONNX_OUTCOMES = ("success", "typed error", "raw exception", "hang", "crash", "memory > 1 GiB")
HOSTILE_INTS = [0, 1, -1, 2, 3, 7, 2**20, 2**27, 2**28, 2**29, 2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1,
                -(2**31), -(2**63)]


def onnx_templates() -> dict[str, tuple[int, Callable[[list[int]], tuple]]]:
    """name -> (how many ints it reads, build(ints) -> (nodes, inputs, initializers, output type, int64 feed))."""
    from onnx import TensorProto, helper, numpy_helper

    def ints(name: str, values: list[int]) -> Any:
        return numpy_helper.from_array(np.array(values, np.int64), name)

    def scalar(name: str, value: int) -> Any:
        return numpy_helper.from_array(np.array(value, np.int64), name)

    def f32(name: str, *shape: int) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    def one(op: str, names: list[str], inputs: list, inits: list, elem: int = TensorProto.FLOAT, feed: int = 1,
            **attrs: Any) -> tuple:
        return [helper.make_node(op, names, ["y"], **attrs)], inputs, inits, elem, feed

    def chain(nodes: list, inits: list) -> tuple:
        return nodes, [], inits, TensorProto.FLOAT, 1

    node = helper.make_node
    return {
        "ConstantOfShape": (3, lambda v: one("ConstantOfShape", ["s"], [], [ints("s", v)])),
        "Expand": (2, lambda v: one("Expand", ["x", "s"], [f32("x", 1)], [ints("s", v)])),
        "Tile": (2, lambda v: one("Tile", ["x", "r"], [f32("x", 1, 2)], [ints("r", v)])),
        "Reshape": (3, lambda v: one("Reshape", ["x", "s"], [f32("x", 2, 3)], [ints("s", v)])),
        "Range": (3, lambda v: one("Range", ["a", "b", "c"], [], [scalar(n, x) for n, x in zip("abc", v)],
                                   TensorProto.INT64)),
        "Pad": (4, lambda v: one("Pad", ["x", "p"], [f32("x", 2, 3)], [ints("p", v)])),
        "Slice": (4, lambda v: one("Slice", ["x", "s", "e", "a", "t"], [f32("x", 4, 5)],
                                   [ints("s", v[:1]), ints("e", v[1:2]), ints("a", [v[2] % 2]), ints("t", v[3:])])),
        "Gather (static indices)": (2, lambda v: one("Gather", ["x", "i"], [f32("x", 3, 2)], [ints("i", v)])),
        "Gather (indices fed at run time)": (1, lambda v: one(
            "Gather", ["x", "i"], [f32("x", 3, 2), helper.make_tensor_value_info("i", TensorProto.INT64, [2])], [],
            feed=v[0])),
        "OneHot": (1, lambda v: one("OneHot", ["i", "d", "v"], [], [ints("i", [0, 1]), ints("d", v),
                                                                    numpy_helper.from_array(np.ones(2, np.float32),
                                                                                            "v")])),
        "Resize (nearest, sizes)": (2, lambda v: one("Resize", ["x", "", "", "s"], [f32("x", 1, 1, 2, 2)],
                                                     [ints("s", [1, 1, *v])], mode="nearest")),
        "Resize (linear, scales)": (2, lambda v: (  # scales from a Constant node: a float initializer is trainable
            [node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([1, 1, *v], np.float32))),
             node("Resize", ["x", "", "k"], ["y"], mode="linear")], [f32("x", 1, 1, 2, 2)], [], TensorProto.FLOAT, 1)),
        "TopK": (1, lambda v: ([node("TopK", ["x", "k"], ["y", "j"])], [f32("x", 5)], [ints("k", v)],
                               TensorProto.FLOAT, 1)),
        "Trilu": (1, lambda v: one("Trilu", ["x", "k"], [f32("x", 3, 4)], [scalar("k", v[0])])),
        "input dims": (2, lambda v: one("Relu", ["x"], [f32("x", *v)], [])),
        "EyeLike": (2, lambda v: one("EyeLike", ["x"], [f32("x", *v)], [])),
        "HannWindow": (1, lambda v: one("HannWindow", ["n"], [], [scalar("n", v[0])])),
        "DFT": (1, lambda v: one("DFT", ["x", "n"], [f32("x", 1, 4, 1)], [scalar("n", v[0])])),
        "CenterCropPad": (2, lambda v: one("CenterCropPad", ["x", "s"], [f32("x", 2, 3)], [ints("s", v)])),
        "two constants": (1, lambda v: chain([node("ConstantOfShape", ["s"], ["a"]),
                                              node("ConstantOfShape", ["s"], ["b"]), node("Add", ["a", "b"], ["y"])],
                                             [ints("s", v)])),
        "Expand of a constant": (2, lambda v: chain([node("ConstantOfShape", ["one"], ["c"]),
                                                     node("Expand", ["c", "s"], ["y"])],
                                                    [ints("one", [1]), ints("s", v)])),
    }


def onnx_hostile_model(template: str, values: list[int]) -> bytes:
    """The model of ``template`` reading ``values``; its doc string holds the value its int64 inputs are fed."""
    from onnx import helper

    nodes, inputs, inits, elem, feed = onnx_templates()[template][1](values)
    graph = helper.make_graph(nodes, "hostile", inputs, [helper.make_tensor_value_info("y", elem, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], doc_string=str(feed))
    return model.SerializeToString()


def onnx_child(path: Path) -> None:
    """Import and run one model (float inputs fed ones, int64 ones the doc string's value); print
    ``outcome peak_rss_bytes``. A typed error that reports a failed allocation counts as memory past the cap."""
    import onnx

    from ngraph_core.frontends.onnx import import_model

    resource.setrlimit(resource.RLIMIT_AS, (ONNX_CAP, ONNX_CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    data = path.read_bytes()
    try:
        model = import_model(data)
        feed = int(onnx.load_from_string(data).doc_string or 1)
        model.run([np.full(p.axes.lengths, feed if p.dtype == "int64" else 1, p.dtype) for p in model.inputs])
        outcome = "success"
    except ng.NgraphError as exc:
        outcome = "memory" if "out of memory" in str(exc) else f"typed:{type(exc).__name__}"
    except MemoryError:
        outcome = "memory"
    except Exception as exc:  # noqa: BLE001 - the figure that must stay 0
        outcome = f"raw:{type(exc).__name__}:{str(exc)[:100]}".replace(" ", "_")
    print(outcome, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, flush=True)


def onnx_hostile_table(n: int, seed: int, folder: Path) -> list[str]:
    """``n`` seeded hostile models, each imported and run in a fresh child under a 1 GiB RLIMIT_AS: how each ended."""
    rand, templates = random.Random(seed), onnx_templates()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    counts = dict.fromkeys(ONNX_OUTCOMES, 0)
    per_template: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    typed: collections.Counter = collections.Counter()
    peak, slowest = 0, (0.0, "")
    for i in range(n):
        name = rand.choice(sorted(templates))
        values = [rand.choice(HOSTILE_INTS) if rand.random() < 0.8 else rand.randrange(-(2**63), 2**63)
                  for _ in range(templates[name][0])]
        path = folder / f"hostile{i}.onnx"
        path.write_bytes(onnx_hostile_model(name, values))
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, __file__, "--onnx-child", str(path)], capture_output=True,
                                  text=True, timeout=ONNX_HANG_SECONDS, env=env)
            words = done.stdout.split()
        except subprocess.TimeoutExpired:
            kind, words = "hang", []
        else:
            if len(words) != 2:  # no report: killed by a signal, or an exit before the line
                kind = "crash"
                print(f"  ! crash (exit {done.returncode}) {name} {values}: {done.stderr[-200:]}", file=sys.stderr)
            else:
                peak = max(peak, int(words[1]))
                kind = {"success": "success", "memory": "memory > 1 GiB"}.get(
                    words[0], "typed error" if words[0].startswith("typed:") else "raw exception")
                if kind == "typed error":
                    typed[words[0][6:]] += 1
                if kind in ("raw exception", "memory > 1 GiB"):
                    print(f"  ! {kind}: {name} {values}: {words[0]}", file=sys.stderr)
        if kind == "hang":
            print(f"  ! hang: {name} {values}", file=sys.stderr)
        took = time.perf_counter() - start
        slowest = max(slowest, (took, f"{name} {values}"))
        counts[kind] += 1
        per_template[name][kind] += 1
    cols = " | ".join(ONNX_OUTCOMES)
    lines = [f"| target | inputs tried | {cols} | slowest child | child peak RSS |",
             "|---|---:|" + "---:|" * len(ONNX_OUTCOMES) + "---|---:|",
             f"| ONNX bytes with hostile shapes | {n} | " + " | ".join(str(counts[k]) for k in ONNX_OUTCOMES)
             + f" | {slowest[0]:.1f} s ({slowest[1]}) | {peak / 2**20:.0f} MiB |", "",
             "Typed errors by class: " + (", ".join(f"{k} {v}" for k, v in typed.most_common()) or "none"), "",
             f"| template | tried | {cols} |", "|---|---:|" + "---:|" * len(ONNX_OUTCOMES)]
    for name in sorted(per_template):
        row = per_template[name]
        lines.append(f"| {name} | {sum(row.values())} | " + " | ".join(str(row[k]) for k in ONNX_OUTCOMES) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ngi", type=int, default=500, help=".ngi mutants, each loaded in a child under a 1 GiB cap")
    parser.add_argument("--onnx", type=int, default=150, help="hostile ONNX models, each in a child under a 1 GiB cap")
    parser.add_argument("--only", choices=["mutants", "memory", "ngi", "selectors", "onnx"], help="run one part only")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--ngi-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--onnx-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.onnx_child:
        return onnx_child(Path(args.onnx_child))
    if args.child:
        return child(args.child[0], Path(args.child[1]))
    if args.ngi_child:
        return ngi_child(Path(args.ngi_child[0]), int(args.ngi_child[1]))
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "mutants"):
            print(f"### Seeded mutants (seed {args.seed}, {args.mutants} per target)\n")
            print("\n".join(mutants_table(args.mutants, args.seed, Path(tmp))))
        if args.only in (None, "selectors"):
            print(f"\n### Selector strings (seed {args.seed}, {args.mutants} inputs)\n")
            print("\n".join(selector_table(args.mutants, args.seed)))
        if args.only in (None, "memory"):
            print("\n### Peak memory of one hostile input (fresh child process each)\n")
            print("\n".join(memory_table(Path(tmp))))
        if args.only in (None, "ngi"):
            print(f"\n### .ngi files (seed {args.seed}, {args.ngi} mutants; a child process, RLIMIT_AS 1 GiB)\n")
            print("\n".join(ngi_tables(args.ngi, args.seed, Path(tmp))))
        if args.only in (None, "onnx"):
            print(f"\n### ONNX bytes with hostile shapes (seed {args.seed}, {args.onnx} models; a fresh child each, "
                  "RLIMIT_AS 1 GiB)\n")
            print("\n".join(onnx_hostile_table(args.onnx, args.seed, Path(tmp))))
    return None


if __name__ == "__main__":
    main()
