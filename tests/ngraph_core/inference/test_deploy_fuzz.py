"""Fuzzing ``ng.inference.load``: mutated ``.ngi`` files load correctly or raise ``DeployError``.

The seeds are two tiny saved models (fp32, and int8 with per-channel scales beside an fp32
bias). The mutations act on the file's bytes (bit flips, cuts, insertions, overwritten ranges:
the zip's CRCs and the manifest's crc32s mostly catch them) and on the manifest (a field
replaced, deleted, added, duplicated or buried under nesting, by ``tests/fuzzing.mutate_json``)
and the parts (replaced, cut, grown, recompressed), each written back as a valid zip with the
crc32s recomputed, so the checks behind the CRCs are reached. The contract
(``tests/fuzzing.py``): a load of a byte mutant gives exactly the saved model; a load of an
edited archive gives a model that matches its manifest; anything else is a ``DeployError`` —
never another exception, never slower than ``HANG_SECONDS``, never more than 16 bytes of Python
memory per byte of file plus 8 MiB. Inputs that once broke the loader are replayed from
``tests/fuzz_corpus/ngi``.
"""

from __future__ import annotations

import copy
import functools
import io
import json
import tempfile
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzzing import HANG_SECONDS, corpus, fuzz_settings, mutate_json
from hypothesis import given
from hypothesis import strategies as st

import ngraph_core as ng
from ngraph_core.inference import CompiledModel, DeployError, load
from ngraph_core.inference.quantize import quantize_weight

pytestmark = pytest.mark.fuzz
EDGE_VALUES = st.sampled_from([None, True, False, 0, -1, 1, 2, 2**31, 2**32, 2**63, 10**400, 1e400, -1e400, 1e308,
                               -0.0, 0.5, float("nan"), "", "int8", "fp16", "float16", "float32", "weights/0.bin",
                               "graph.json", "manifest.json", "x" * 300, [], {}, [[]], [2**32, 2**32], [0, 2**40],
                               [1], {"": None}])
JSON_VALUES = st.recursive(
    EDGE_VALUES | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10).map(copy.deepcopy)
MANIFEST_KEYS = ["accuracy_drop", "backend", "batch_size", "format", "format_version", "inputs", "outputs", "parts",
                 "precision", "weights", "data", "dtype", "name", "scale", "scale_shape", "shape"]


def tiny_model(precision: str) -> CompiledModel:
    """``dot(W, x) + b``: W (4x6) at ``precision`` (int8: a scale per row), b in fp32."""
    F, K, N = ng.make_axis(6, "F"), ng.make_axis(4, "K"), ng.make_axis(2, "N")
    x = ng.placeholder([F, N], name="x")
    w, b = ng.variable([K, F], 0.0, name="W"), ng.variable([K], 0.0, name="b")
    rng = np.random.default_rng(0)
    weights = {w: quantize_weight(rng.normal(size=(4, 6)).astype(np.float32), precision, (0,)),
               b: quantize_weight(rng.normal(size=4).astype(np.float32), "fp32")}
    return CompiledModel([x], [ng.dot(w, x) + b], weights, precision, batch_size=2, accuracy_drop=0.01)


@functools.lru_cache(maxsize=1)
def seeds() -> list[tuple[bytes, CompiledModel]]:
    """The saved tiny models' bytes, with the models."""
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for precision in ("fp32", "int8"):
            model = tiny_model(precision)
            model.save(Path(folder) / "m.ngi")
            out.append(((Path(folder) / "m.ngi").read_bytes(), model))
    return out


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {name: z.read(name) for name in z.namelist()}


def pack(parts: dict[str, bytes], manifest: Any, deflate: frozenset[str] = frozenset()) -> bytes:
    """A valid zip of ``parts`` and ``manifest`` (dumped as given; a dict gets its crc32s recomputed)."""
    if isinstance(manifest, dict) and isinstance(manifest.get("parts"), dict):
        manifest["parts"] = {n: zlib.crc32(parts[n]) if n in parts else c for n, c in manifest["parts"].items()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("manifest.json", manifest if isinstance(manifest, (str, bytes)) else json.dumps(manifest))
        for name, blob in parts.items():
            z.writestr(name, blob, zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED)
    return buffer.getvalue()


def same_model(a: CompiledModel, b: CompiledModel) -> bool:
    """Equal weights (values, dtypes, scales), graph text and settings."""
    same_weights = all(np.array_equal(u.data, v.data) and u.data.dtype == v.data.dtype
                       and np.array_equal(*(np.zeros(0) if w.scale is None else w.scale for w in (u, v)))
                       for u, v in zip(a.weights.values(), b.weights.values(), strict=True))
    text = [ng.serialize([*m.template_outputs, *m.graph_inputs, *m.weights]) for m in (a, b)]
    return same_weights and text[0] == text[1] and (a.precision, a.batch_size, a.backend, a.accuracy_drop) == \
        (b.precision, b.batch_size, b.backend, b.accuracy_drop)


def check_contract(data: bytes, expected: CompiledModel | None) -> str:
    """Load ``data`` once: ``"ok"`` or ``"typed"``; fail the test on anything else.

    ``expected``: the model a successful load must equal (byte mutants), or None: the loaded
    model must match its own manifest (edited archives).
    """
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutant.ngi"
        path.write_bytes(data)
        tracemalloc.start()
        start = time.perf_counter()
        try:
            model = load(path)
            outcome = "ok"
        except DeployError as exc:
            assert "expected" in str(exc) and "hint:" in str(exc), exc
            outcome = "typed"
        finally:
            elapsed = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert elapsed < HANG_SECONDS, f"{elapsed:.1f} s on {len(data)} bytes"
    assert peak <= 16 * len(data) + (8 << 20), f"{peak} bytes on a file of {len(data)}"
    if outcome == "ok":
        if expected is not None:
            assert same_model(model, expected)
        else:
            manifest = json.loads(members(data)["manifest.json"])
            assert (model.precision, model.batch_size, model.backend) == \
                (manifest["precision"], manifest["batch_size"], manifest["backend"])
            assert len(model.inputs) == manifest["inputs"] and len(model.outputs) == manifest["outputs"]
            assert sorted(w.data.shape for w in model.weights.values()) == \
                sorted(tuple(r["shape"]) for r in manifest["weights"])
    return outcome


@st.composite
def byte_mutants(draw: st.DrawFn) -> tuple[bytes, CompiledModel]:
    data, model = draw(st.sampled_from(seeds()))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "cut", "insert", "overwrite"]))
        if kind == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
        elif kind == "cut":
            data = data[:at]
        elif kind == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
        else:
            chunk = draw(st.binary(min_size=1, max_size=8))
            data = data[:at] + chunk + data[at + len(chunk):]
    return data, model


@st.composite
def archive_mutants(draw: st.DrawFn) -> bytes:
    data, _ = draw(st.sampled_from(seeds()))
    parts = members(data)
    manifest: Any = json.loads(parts.pop("manifest.json"))
    deflate: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["manifest", "manifest", "manifest", "part", "deflate"]))
        if kind == "manifest":
            manifest = mutate_json(manifest, draw, JSON_VALUES, MANIFEST_KEYS, lambda n: {"data": n})
            continue
        name = draw(st.sampled_from(sorted(parts)))
        if kind == "deflate":
            deflate.add(name)
        elif draw(st.booleans()):
            parts[name] = parts[name][:draw(st.integers(0, len(parts[name])))] + draw(st.binary(max_size=8))
        else:
            parts[name] = draw(st.binary(min_size=len(parts[name]), max_size=len(parts[name])))
    return pack(parts, manifest, frozenset(deflate))


@fuzz_settings(150)
@given(mutant=byte_mutants())
def test_byte_mutants_load_the_saved_model_or_raise_deploy_error(mutant: tuple[bytes, CompiledModel]) -> None:
    check_contract(*mutant)


@fuzz_settings(200)
@given(data=archive_mutants())
def test_edited_archives_load_what_their_manifest_says_or_raise_deploy_error(data: bytes) -> None:
    check_contract(data, None)


def test_every_seed_loads() -> None:
    assert all(check_contract(data, model) == "ok" for data, model in seeds())


@pytest.mark.parametrize("path", corpus("ngi"), ids=lambda p: p.name)
def test_saved_inputs_that_once_broke_the_loader(path: Path) -> None:
    assert check_contract(path.read_bytes(), None) == "typed"


def test_the_corpus_is_present() -> None:
    assert len(corpus("ngi")) >= 9, "tests/fuzz_corpus/ngi/ is missing files; hint: check that git tracks them"
