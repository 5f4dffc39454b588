"""The deployable file: exact round trips at every precision, sizes, atomic writes, and corrupt files rejected."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

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
    with pytest.raises(DeployError, match=r"part weights/0.bin has crc32 \d+, the manifest expects"):
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
