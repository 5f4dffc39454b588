"""The deployable file: exact round trips at every precision, sizes, atomic writes, and corrupt files rejected."""

from __future__ import annotations

import json
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from inference_models import IMAGE, datasets, mnist, trained_cnn, trained_mlp

import ngraph_core as ng
from ngraph_core.inference import FORMAT_VERSION, CompiledModel, DeployError, compile_for_inference, load


def compiled_mlp(precision: str) -> CompiledModel:
    train, test = datasets()
    return compile_for_inference(trained_mlp(), precision=precision, batch_size=50,
                                 calibration=train if precision == "int8" else None, validation=test)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_round_trip_is_exact(tmp_path: Path, precision: str) -> None:
    compiled = compiled_mlp(precision)
    path = tmp_path / f"mlp_{precision}.ngi"
    compiled.save(path)
    loaded = load(path)
    assert (loaded.precision, loaded.batch_size, loaded.backend) == (precision, 50, "numpy")
    assert loaded.accuracy_drop == compiled.accuracy_drop
    assert [(s.name, s.shape, s.dtype) for s in loaded.inputs] == [(s.name, s.shape, s.dtype) for s in compiled.inputs]
    assert sorted(str(w.data.dtype) for w in loaded.weights.values()) == \
        sorted(str(w.data.dtype) for w in compiled.weights.values())
    x = mnist()[2][:120]
    np.testing.assert_array_equal(loaded.predict(x), compiled.predict(x))
    assert list(tmp_path.iterdir()) == [path]  # the temporary file was renamed, nothing left behind


def test_cnn_round_trip_is_exact(tmp_path: Path) -> None:
    train, _ = datasets(IMAGE, n_train=2000)
    compiled = compile_for_inference(trained_cnn(), precision="int8", calibration=train, batch_size=16)
    compiled.save(tmp_path / "cnn.ngi")
    loaded = load(tmp_path / "cnn.ngi")
    x = mnist()[2][:40]
    np.testing.assert_array_equal(loaded.predict(x), compiled.predict(x))
    assert len(loaded.activation_scales) == 0  # they live in the graph as constants, not as a table
    kinds = [op.op.value for op in ng.ordered_ops(list(loaded.template_outputs))]
    assert kinds.count("cast") == 6  # three quantize-dequantize pairs (two convs, one dot) survived the trip


def test_file_sizes_follow_the_precision(tmp_path: Path) -> None:
    sizes = {}
    for precision in ("fp32", "fp16", "int8"):
        compiled_mlp(precision).save(tmp_path / precision)
        sizes[precision] = (tmp_path / precision).stat().st_size
    # 784x64 + 64x10 weights dominate; the graph JSON and manifest are a few kB
    assert 0.48 < sizes["fp16"] / sizes["fp32"] < 0.56
    # int8: a quarter of the weights plus the graph JSON (~17 kB here: the quantize-dequantize ops
    # and their layer scopes), a fixed cost that a model larger than this MLP amortizes
    assert 0.23 < sizes["int8"] / sizes["fp32"] < 0.36


def test_save_overwrites_atomically_and_checks_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "m.ngi"
    path.write_bytes(b"old")
    compiled_mlp("fp16").save(path)
    assert load(path).precision == "fp16"
    with pytest.raises(DeployError, match="does not exist"):
        compiled_mlp("fp32").save(tmp_path / "missing" / "m.ngi")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    path = tmp_path_factory.mktemp("deploy") / "mlp.ngi"
    compiled = compiled_mlp("int8")
    compiled.save(path)
    return path, compiled.predict(mnist()[2][:50])


def rewrite(src: Path, dst: Path, change: dict[str, bytes | None]) -> None:
    """Copy the archive, replacing (bytes) or dropping (None) some members."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = change.get(name, zin.read(name))
            if data is not None:
                zout.writestr(name, data)


def manifest_of(path: Path) -> dict:
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("manifest.json"))


def test_wrong_version_and_format_are_rejected(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = saved
    manifest = manifest_of(path)
    rewrite(path, tmp_path / "v2", {"manifest.json": json.dumps({**manifest, "format_version": 2}).encode()})
    with pytest.raises(DeployError, match=f"expected format_version {FORMAT_VERSION}, received 2.*hint"):
        load(tmp_path / "v2")
    rewrite(path, tmp_path / "other", {"manifest.json": json.dumps({**manifest, "format": "onnx"}).encode()})
    with pytest.raises(DeployError, match="expected format 'ngraph-inference', received 'onnx'"):
        load(tmp_path / "other")


def test_tampered_part_fails_its_crc(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = saved
    with zipfile.ZipFile(path) as z:
        blob = bytearray(z.read("weights/0.bin"))
    blob[10] ^= 0x01  # a valid zip whose part no longer matches the manifest's crc32
    rewrite(path, tmp_path / "t", {"weights/0.bin": bytes(blob)})
    with pytest.raises(DeployError, match=r"part weights/0.bin to have the manifest's crc32 \d+, received crc32 \d+"):
        load(tmp_path / "t")
    rewrite(path, tmp_path / "m", {"graph.json": None})
    with pytest.raises(DeployError, match=r"lacks part\(s\) \['graph.json'\]"):
        load(tmp_path / "m")


def test_not_a_zip_truncated_and_missing_files_are_rejected(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = saved
    (tmp_path / "text").write_text("hello")
    with pytest.raises(DeployError, match="expected a zip archive"):
        load(tmp_path / "text")
    data = path.read_bytes()
    for keep in (0, 100, len(data) // 2, len(data) - 30):
        (tmp_path / "cut").write_bytes(data[:keep])
        with pytest.raises(DeployError, match="hint"):
            load(tmp_path / "cut")
    with pytest.raises(DeployError, match="cannot read the file"):
        load(tmp_path / "nothing.ngi")


def test_flipped_bytes_never_load_garbage(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """A flipped byte anywhere either raises DeployError or (zip header fields nobody reads, like a
    timestamp) loads a model whose outputs are exactly the saved one's."""
    path, expected = saved
    data = path.read_bytes()
    rng = np.random.default_rng(0)
    positions = sorted({*rng.integers(0, len(data), size=40).tolist(), 5, len(data) - 5, len(data) - 40})
    rejected = 0
    for pos in positions:
        corrupt = bytearray(data)
        corrupt[pos] ^= 0xFF
        (tmp_path / "flip").write_bytes(bytes(corrupt))
        try:
            loaded = load(tmp_path / "flip")
        except DeployError:
            rejected += 1
            continue
        np.testing.assert_array_equal(loaded.predict(mnist()[2][:50]), expected)
    assert rejected >= len(positions) // 2  # almost every byte is covered by a CRC


def repack(src: Path, dst: Path, manifest_text: Callable[[dict], str | bytes] | None = None,
           parts: dict[str, bytes] | None = None, deflate: tuple[str, ...] = ()) -> None:
    """Copy the archive with some parts replaced and the manifest edited, its crc32s recomputed, as a valid zip."""
    with zipfile.ZipFile(src) as zin:
        members = {name: zin.read(name) for name in zin.namelist()}
    members.update(parts or {})
    manifest = json.loads(members.pop("manifest.json"))
    manifest["parts"] = {name: zlib.crc32(members[name]) for name in manifest["parts"] if name in members}
    text = manifest_text(manifest) if manifest_text else json.dumps(manifest)
    with zipfile.ZipFile(dst, "w") as zout:
        zout.writestr("manifest.json", text)
        for name, blob in members.items():
            zout.writestr(name, blob, zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED)


def edited(change: Callable[[dict], Any]) -> Callable[[dict], str | bytes]:
    """A manifest edit: ``change`` mutates the manifest (or returns the text to write)."""
    def text(manifest: dict) -> str:
        out = change(manifest)
        return out if isinstance(out, (str, bytes)) else json.dumps(manifest)
    return text


def set_field(path: tuple, value: Any) -> Callable[[dict], None]:
    def change(manifest: dict) -> None:
        node = manifest
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


FIELD_CASES = {
    "a list as weight data": (set_field(("weights", 0, "data"), [1, 2]), r"'data' to name a part, received \[1, 2\]"),
    "accuracy_drop inf": (lambda m: json.dumps({**m, "accuracy_drop": 0.5}).replace("0.5", "1e400"),
                          r"'accuracy_drop' to be null or a number in \[-1, 1\], received inf"),
    "accuracy_drop 10**400": (set_field(("accuracy_drop",), 10**400), r"'accuracy_drop' to be null or a number"),
    "accuracy_drop NaN": (set_field(("accuracy_drop",), float("nan")), r"received nan"),
    "batch_size true": (set_field(("batch_size",), True), r"'batch_size' to be an int in \[1, \d+\], received True"),
    "batch_size 2**63": (set_field(("batch_size",), 2**63), r"'batch_size' to be an int"),
    "outputs 0": (set_field(("outputs",), 0), r"'outputs' to be an int in \[1, "),
    "backend a path": (set_field(("backend",), "../../x"), r"'backend' to be a backend name"),
    "backend a dict": (set_field(("backend",), {}), r"'backend' to be a backend name"),
    "precision a list": (set_field(("precision",), ["int8"]), r"a precision in"),
    "an unknown key": (set_field(("extra",), 1), r"the manifest to hold exactly the keys"),
    "a record's unknown key": (set_field(("weights", 0, "extra"), 1), r"weight record 0 to hold exactly the keys"),
    "dtype a list": (set_field(("weights", 0, "dtype"), ["int8"]), r"a dtype in"),
    "int8 record stored as float32": (set_field(("weights", 0, "dtype"), "float32"), r"that fits it"),
    "shape of negative length": (set_field(("weights", 0, "shape"), [-1, 784]), r"shape to be a list of at most 32"),
    "shape [2**32, 2**32]": (set_field(("weights", 0, "shape"), [2**32, 2**32]),
                             r"shape to fit in the file \(\d+ bytes\), received \[4294967296, 4294967296\]: "
                             r"18446744073709551616 bytes"),
    "shape of 33 axes": (set_field(("weights", 0, "shape"), [1] * 33), r"a list of at most 32 lengths"),
    "scale_shape that does not broadcast": (set_field(("weights", 0, "scale_shape"), [3, 1]),
                                            r"scale_shape to broadcast against its shape \[64, 784\]"),
    "scale dropped from an int8 record": (set_field(("weights", 0, "scale"), None), r"a scale and a scale_shape"),
    "a crc of 2**32": (set_field(("parts", "graph.json"), 2**32), r"'parts' to map at most"),
    "a part listed that no record uses": (set_field(("parts", "weights/9.bin"), 0), r"to list the graph and the "),
    "a weight part named manifest.json": (set_field(("weights", 0, "data"), "manifest.json"), r"part 'manifest.json'"),
    "a list as manifest": (lambda m: "[1, 2]", r"the manifest to be a JSON object, received list"),
    "a 5000-digit int": (lambda m: json.dumps(m).replace('"inputs": 1', '"inputs": ' + "1" * 5000),
                         r"numbers of at most 4,300 digits"),
    "not UTF-8": (lambda m: b"\xff\xfe{", r"expected UTF-8 JSON text"),
}


@pytest.mark.parametrize("case", FIELD_CASES, ids=list(FIELD_CASES))
def test_every_manifest_field_is_typed_and_bounded(saved: tuple[Path, np.ndarray], tmp_path: Path, case: str) -> None:
    change, message = FIELD_CASES[case]
    repack(saved[0], tmp_path / "m.ngi", edited(change))
    with pytest.raises(DeployError, match=message) as info:
        load(tmp_path / "m.ngi")
    assert "expected" in str(info.value) and "hint:" in str(info.value)


def test_a_2pow32_squared_shape_with_an_empty_part_is_refused(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """``np.prod([2**32, 2**32])`` wraps to 0, which an empty part matched; Python ints do not wrap."""
    repack(saved[0], tmp_path / "m.ngi", edited(set_field(("weights", 0, "shape"), [2**32, 2**32])),
           parts={"weights/0.bin": b""})
    with pytest.raises(DeployError, match=r"18446744073709551616 bytes"):
        load(tmp_path / "m.ngi")


def deep(frames: int, call: Callable[[], Any]) -> Any:
    return call() if frames == 0 else deep(frames - 1, call)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"weights": ' + "[" * 980 + "]" * 980 + "}"],
                         ids=["100k open brackets", "980 deep"])
def test_a_deep_manifest_is_refused_from_deep_in_the_stack(saved: tuple[Path, np.ndarray], tmp_path: Path,
                                                           text: str) -> None:
    repack(saved[0], tmp_path / "m.ngi", lambda m: text)
    with pytest.raises(DeployError, match=r"the manifest: expected at most max_depth=64 levels of nesting"):
        deep(150, lambda: load(tmp_path / "m.ngi"))


def test_parts_are_never_inflated(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """A compressed part is refused, even of the right size; a bomb is refused from its manifest before any read."""
    repack(saved[0], tmp_path / "deflated.ngi", deflate=("weights/0.bin",))
    with pytest.raises(DeployError, match="expected part weights/0.bin stored uncompressed"):
        load(tmp_path / "deflated.ngi")
    bomb = tmp_path / "bomb.ngi"  # 64 MiB of zeros deflated, announced by the manifest, in a file of ~65 kB
    repack(saved[0], bomb, edited(set_field(("weights", 0, "shape"), [4096, 4096 * 4])))
    with zipfile.ZipFile(bomb) as zin:
        members = {name: zin.read(name) for name in zin.namelist() if name != "weights/0.bin"}
    manifest = json.loads(members.pop("manifest.json"))
    info, chunk, crc = zipfile.ZipInfo("weights/0.bin"), bytes(1 << 22), 0
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(bomb, "w") as zout:
        with zout.open(info, "w") as part:
            for _ in range(16):
                part.write(chunk)
                crc = zlib.crc32(chunk, crc)
        zout.writestr("manifest.json", json.dumps({**manifest, "parts": {**manifest["parts"], info.filename: crc}}))
        for name, blob in members.items():
            zout.writestr(name, blob)
    assert bomb.stat().st_size < 100_000
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(DeployError, match=r"shape to fit in the file"):
        load(bomb)
    assert time.perf_counter() - start < 1.0
    assert tracemalloc.get_traced_memory()[1] < 8 << 20
    tracemalloc.stop()
