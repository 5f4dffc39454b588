"""The deployable file: one zip holding the graph, the stored weights and a manifest. No pickle.

Layout (``ZIP_STORED``, so the file's size is the weights' stored size)::

    manifest.json      {"format": "ngraph-inference", "format_version": 1, "precision", "batch_size",
                        "backend", "accuracy_drop", "inputs": n, "outputs": m,
                        "weights": [{"name", "shape", "dtype", "precision", "data", "scale",
                                     "scale_shape"}],
                        "parts": {part name: crc32}}
    graph.json         ng.serialize([*outputs, *inputs, *weight slots]): the quantized template
                       graph (INT8 activation quantize-dequantize included) with each weight a
                       variable whose value lives in weights/
    weights/<i>.bin    the weight's bytes, little-endian, in its stored dtype (float32,
                       float16 or int8)
    weights/<i>.scale  INT8 only: float32 per-channel scales

Every part's crc32 is in the manifest and checked on load (the zip's own CRCs are checked
too). ``save`` writes a temporary file beside the target and ``os.replace``-s it, so a reader
never sees half a file.

Loading is bounded by the file's size, whatever the file says. The manifest is read first (at
most ``MAX_MANIFEST_BYTES``, parsed by ``safe_json``: no recursion, nesting at most 64 deep),
then every field is checked for its type and range: unknown or missing keys, a bool for an int,
``accuracy_drop`` outside [-1, 1], a shape whose size (Python ints, no wrap-around) exceeds the
file, a scale that does not broadcast against its weight. Each part's exact size follows from
the manifest and is compared with the zip entry's declared size before any byte is read; parts
must be stored (``ZIP_STORED``, as ``save`` writes them), never inflated, and are read by a reader
that stops one byte past the declared size. So a load reads at most about the file's size
of parts, and every failure is a ``DeployError``.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .. import safe_json
from ..errors import NgraphError
from ..ir import OpType
from ..serialize import deserialize, serialize
from .model import CompiledModel
from .quantize import PRECISIONS, QuantizedWeight

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "DeployError", "load", "save"]

FORMAT_NAME = "ngraph-inference"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
GRAPH = "graph.json"
MAX_MANIFEST_BYTES = 64 << 20
MAX_GRAPH_BYTES = 256 << 20  # deserialize's own max_chars
MAX_PARTS = 200_000  # the graph, and a data and a scale part per weight
MAX_ROOTS = 100_000  # inputs and outputs
MAX_BATCH = 1 << 24
MAX_NDIM = 32
MAX_LENGTH = 2**40  # one axis; a weight's size is bounded by the file's anyway
MAX_NAME = 256
_MANIFEST_KEYS = ("accuracy_drop", "backend", "batch_size", "format", "format_version", "inputs", "outputs", "parts",
                  "precision", "weights")
_RECORD_KEYS = ("data", "dtype", "name", "precision", "scale", "scale_shape", "shape")
_BACKEND = re.compile(r"[a-z][a-z0-9_]{0,31}")
_DTYPES = {"float32": "<f4", "float16": "<f2", "int8": "i1", "float64": "<f8", "int32": "<i4", "int64": "<i8"}
_HINT = "hint: the file is damaged or not an ngraph inference file; save the model again with compiled.save(path)"


class DeployError(NgraphError, ValueError):
    """A deployable file is missing, corrupt, truncated, or of an unknown format or version."""


def save(model: CompiledModel, path: Any) -> Path:
    """Write ``model`` to one file at ``path`` (atomically: a temporary file, then ``os.replace``).

    Args:
        model: a ``CompiledModel``.
        path: the target file (``.ngi`` by convention).

    Returns:
        the path written.

    Raises:
        DeployError: the directory does not exist or cannot be written.

    Example:
        >>> save(compiled, "mnist_int8.ngi")
    """
    path = Path(path)
    slots = list(model.weights)
    graph = serialize([*model.template_outputs, *model.graph_inputs, *slots]).encode()
    parts: dict[str, bytes] = {GRAPH: graph}
    records = []
    for i, slot in enumerate(slots):
        weight = model.weights[slot]
        data_name = f"weights/{i}.bin"
        parts[data_name] = np.ascontiguousarray(weight.data, dtype=_DTYPES[weight.data.dtype.name]).tobytes()
        record = {"name": slot.meta.name or f"w{i}", "shape": list(weight.data.shape), "dtype": weight.data.dtype.name,
                  "precision": weight.precision, "data": data_name, "scale": None, "scale_shape": None}
        if weight.scale is not None:
            record["scale"] = f"weights/{i}.scale"
            record["scale_shape"] = list(weight.scale.shape)
            parts[record["scale"]] = np.ascontiguousarray(weight.scale, dtype="<f4").tobytes()
        records.append(record)
    manifest = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "precision": model.precision,
                "batch_size": model.batch_size, "backend": model.backend, "accuracy_drop": model.accuracy_drop,
                "inputs": len(model.graph_inputs), "outputs": len(model.template_outputs), "weights": records,
                "parts": {name: zlib.crc32(blob) for name, blob in parts.items()}}
    if not path.parent.is_dir():
        raise DeployError(f"save: the directory {str(path.parent)!r} does not exist; hint: create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
            z.writestr(MANIFEST, json.dumps(manifest, sort_keys=True, indent=1))
            for name, blob in parts.items():
                z.writestr(name, blob)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _fail(path: Path, what: str) -> DeployError:
    return DeployError(f"load {str(path)!r}: {what}; {_HINT}")


def _read_parts(path: Path) -> tuple[dict, dict[str, bytes]]:
    """The checked manifest and every part it lists, each read with its size checked first."""
    try:
        file = open(path, "rb")  # noqa: SIM115  (closed below; OSError here has its own message)
    except OSError as err:
        raise DeployError(f"load {str(path)!r}: cannot read the file ({err.strerror}); hint: check the path") from err
    try:
        with file, zipfile.ZipFile(file) as z:
            file_size = os.fstat(file.fileno()).st_size
            infos = {info.filename: info for info in z.infolist()}
            if MANIFEST not in infos:
                raise _fail(path, f"expected a {MANIFEST} in the archive, found {sorted(infos)[:5]}")
            text = _read_member(path, z, infos[MANIFEST], None, min(MAX_MANIFEST_BYTES, file_size))
            manifest = safe_json.loads(text, what=f"load {str(path)!r}: the manifest", error=DeployError,
                                       max_chars=MAX_MANIFEST_BYTES, hint=_HINT)
            sizes = _check_manifest(path, manifest, file_size)
            missing = sorted(set(sizes) - set(infos))
            if missing:
                raise _fail(path, f"expected every part the manifest lists, the archive lacks part(s) {missing}")
            parts = {name: _read_member(path, z, infos[name], size, min(MAX_GRAPH_BYTES, file_size))
                     for name, size in sizes.items()}
    except DeployError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, KeyError, OSError,
            NotImplementedError, RuntimeError) as err:
        raise _fail(path, f"expected a zip archive with a JSON manifest, the reader failed: {err}") from err
    for name, crc in manifest["parts"].items():
        if zlib.crc32(parts[name]) != crc:
            raise _fail(path, f"expected part {name} to have the manifest's crc32 {crc}, received crc32 "
                              f"{zlib.crc32(parts[name])}")
    return manifest, parts


def _read_member(path: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo, size: int | None, limit: int) -> bytes:
    """A part's bytes: stored (never inflated), its declared size checked, read by a reader that stops one
    byte past it (so a header that lies about the size cannot make the read larger)."""
    name = info.filename
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
        raise _fail(path, f"expected part {name} stored uncompressed and unencrypted as save writes it, received "
                          f"compression method {info.compress_type}, flags {info.flag_bits:#x}")
    declared = info.file_size
    if (size is not None and declared != size) or declared > limit:
        expected = f"{size} bytes" if size is not None else f"at most {limit} bytes"
        raise _fail(path, f"part {name} holds {declared} bytes, expected {expected}")
    with z.open(info) as member:
        data = member.read(declared + 1)
    if len(data) != declared:
        raise _fail(path, f"expected part {name} to deliver its declared {declared} bytes, received {len(data)}")
    return data


def _check_int(path: Path, value: Any, what: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:  # type(): true is not 1
        raise _fail(path, f"expected {what} to be an int in [{low}, {high}], received {repr(value)[:80]}")
    return value


def _check_keys(path: Path, record: Any, keys: tuple[str, ...], what: str) -> dict:
    if not isinstance(record, dict):
        raise _fail(path, f"expected {what} to be a JSON object, received {type(record).__name__}")
    if set(record) != set(keys):
        raise _fail(path, f"expected {what} to hold exactly the keys {list(keys)}, received {sorted(record)[:12]}")
    return record


def _check_manifest(path: Path, manifest: Any, file_size: int) -> dict[str, int | None]:
    """Check every manifest field's type and range; return each part's exact size (None: the graph's, bounded)."""
    _check_keys(path, manifest, _MANIFEST_KEYS, "the manifest")
    if manifest["format"] != FORMAT_NAME:
        raise _fail(path, f"expected format {FORMAT_NAME!r}, received {repr(manifest['format'])[:80]}")
    version = manifest["format_version"]
    if type(version) is not int or version != FORMAT_VERSION:
        raise DeployError(f"load {str(path)!r}: expected format_version {FORMAT_VERSION}, received "
                          f"{repr(version)[:80]}; hint: the file was written by another version of ngraph_core; "
                          "load it there and save it again, or compile the model again with this version")
    if not isinstance(manifest["precision"], str) or manifest["precision"] not in PRECISIONS:
        raise _fail(path, f"expected a precision in {PRECISIONS}, received {repr(manifest['precision'])[:80]}")
    _check_int(path, manifest["batch_size"], "'batch_size'", 1, MAX_BATCH)
    _check_int(path, manifest["inputs"], "'inputs'", 0, MAX_ROOTS)
    _check_int(path, manifest["outputs"], "'outputs'", 1, MAX_ROOTS)
    backend = manifest["backend"]
    if not isinstance(backend, str) or not _BACKEND.fullmatch(backend):
        raise _fail(path, f"expected 'backend' to be a backend name such as 'numpy', received {repr(backend)[:80]}")
    drop = manifest["accuracy_drop"]
    if drop is not None and (type(drop) not in (int, float) or not -1.0 <= drop <= 1.0):  # also NaN and 10**400
        raise _fail(path, f"expected 'accuracy_drop' to be null or a number in [-1, 1], received {repr(drop)[:80]}")
    listed = manifest["parts"]
    if not isinstance(listed, dict) or len(listed) > MAX_PARTS or \
            not all(type(v) is int and 0 <= v < 1 << 32 for v in listed.values()):
        raise _fail(path, f"expected the manifest's 'parts' to map at most {MAX_PARTS} part names to crc32 "
                          "integers (0 <= crc < 2**32)")
    records = manifest["weights"]
    if not isinstance(records, list) or len(records) > MAX_PARTS // 2:
        raise _fail(path, f"expected a 'weights' list of at most {MAX_PARTS // 2} records in the manifest")
    sizes: dict[str, int | None] = {GRAPH: None}
    for i, record in enumerate(records):
        for name, size in _check_record(path, i, record, manifest["precision"], file_size).items():
            if name in (GRAPH, MANIFEST) or sizes.setdefault(name, size) != size:
                raise _fail(path, f"expected each part named once, received part {name!r} again in weight record {i}")
    if set(listed) != set(sizes):
        raise _fail(path, f"expected the manifest's 'parts' to list the graph and the weight parts exactly, "
                          f"received {len(listed)} names, {sorted(set(listed) ^ set(sizes))[:3]} among them "
                          "listed or used but not both")
    total = sum(size for size in sizes.values() if size is not None)
    if total > file_size:
        raise _fail(path, f"expected weights that fit in the file ({file_size} bytes), received records of {total} "
                          "bytes")
    return sizes


def _check_shape(path: Path, shape: Any, what: str, file_size: int, itemsize: int) -> tuple[list[int], int]:
    """``shape`` (a list of lengths) and its size in bytes, computed with Python ints (no wrap-around)."""
    if not isinstance(shape, list) or len(shape) > MAX_NDIM or \
            not all(type(n) is int and 0 <= n <= MAX_LENGTH for n in shape):
        raise _fail(path, f"expected {what} to be a list of at most {MAX_NDIM} lengths in [0, {MAX_LENGTH}], "
                          f"received {repr(shape)[:80]}")
    nbytes = math.prod(shape) * itemsize
    if nbytes > file_size:
        raise _fail(path, f"expected {what} to fit in the file ({file_size} bytes), received {shape}: {nbytes} bytes")
    return shape, nbytes


def _check_record(path: Path, i: int, record: Any, precision: str, file_size: int) -> dict[str, int]:
    """Check one weight record; return its parts' exact sizes."""
    where = f"weight record {i}"
    _check_keys(path, record, _RECORD_KEYS, where)
    if not isinstance(record["name"], str) or len(record["name"]) > MAX_NAME:
        raise _fail(path, f"expected {where}'s name to be a string of at most {MAX_NAME} characters, received "
                          f"{repr(record['name'])[:80]}")
    kind, dtype = record["precision"], record["dtype"]
    if kind not in ("fp32", precision) or not isinstance(dtype, str) or dtype not in _DTYPES or \
            (kind != "fp32" and dtype != {"fp16": "float16", "int8": "int8"}[kind]):
        raise _fail(path, f"expected {where} to have precision 'fp32' or {precision!r} and a dtype in "
                          f"{sorted(_DTYPES)} that fits it (fp16: float16, int8: int8), received "
                          f"{repr(kind)[:40]} and {repr(dtype)[:40]}")
    itemsize = np.dtype(_DTYPES[dtype]).itemsize
    shape, nbytes = _check_shape(path, record["shape"], f"{where}'s shape", file_size, itemsize)
    for key in ("data", "scale"):
        if not (isinstance(record[key], str) and 0 < len(record[key]) <= MAX_NAME or key == "scale"
                and record[key] is None):
            raise _fail(path, f"expected {where}'s {key!r} to name a part, received {repr(record[key])[:80]}")
    sizes = {record["data"]: nbytes}
    scaled = record["scale"] is not None
    if (kind == "int8") != scaled or scaled != (record["scale_shape"] is not None):
        raise _fail(path, f"expected {where} to have a scale and a scale_shape exactly when its precision is int8, "
                          f"received precision {kind!r}, scale {repr(record['scale'])[:40]}")
    if kind == "int8":
        scale_shape, scale_bytes = _check_shape(path, record["scale_shape"], f"{where}'s scale_shape", file_size, 4)
        if len(scale_shape) != len(shape) or any(s not in (1, n) for s, n in zip(scale_shape, shape)):
            raise _fail(path, f"expected {where}'s scale_shape to broadcast against its shape {shape} (each length "
                              f"1 or the weight's), received {scale_shape}")
        if record["scale"] in sizes:
            raise _fail(path, f"expected {where}'s scale and data to be two parts, received {record['scale']!r} twice")
        sizes[record["scale"]] = scale_bytes
    return sizes


def _read_array(parts: dict[str, bytes], name: str, dtype: str, shape: list[int]) -> np.ndarray:
    """A part's bytes as an array (its size was checked against ``shape`` before it was read)."""
    return np.frombuffer(parts[name], dtype=_DTYPES[dtype]).astype(dtype).reshape(shape)


def load(path: Any) -> CompiledModel:
    """Read a file ``save`` wrote back into a ``CompiledModel`` (its outputs equal the saved model's).

    Args:
        path: the file.

    Returns:
        the ``CompiledModel``.

    Raises:
        DeployError: a missing, corrupt or truncated file, a file that is not an ngraph inference
            file, one of another format version, a manifest field of the wrong type or range, a
            compressed part, or a part whose size differs from the manifest's.

    Example:
        >>> compiled = load("mnist_int8.ngi")
        >>> (probs,) = compiled.infer(x_batch)
    """
    path = Path(path)
    manifest, parts = _read_parts(path)
    try:
        roots = deserialize(parts[GRAPH].decode())
    except UnicodeDecodeError as err:
        raise _fail(path, f"expected the graph part to be UTF-8 text, received byte {err.object[err.start]:#04x} at "
                          f"offset {err.start}") from None
    except NgraphError as err:
        raise _fail(path, f"the graph part does not read: {err}") from err
    n_out, n_in, records = manifest["outputs"], manifest["inputs"], manifest["weights"]
    if len(roots) != n_out + n_in + len(records):
        raise _fail(path, f"the graph has {len(roots)} roots, expected {n_out} outputs + {n_in} inputs + "
                          f"{len(records)} weights")
    outputs, inputs, slots = roots[:n_out], roots[n_out:n_out + n_in], roots[n_out + n_in:]
    if any(p.op is not OpType.PLACEHOLDER for p in inputs) or any(s.op is not OpType.VARIABLE for s in slots):
        raise _fail(path, "expected the graph's input roots to be placeholders and its weight roots variables")
    weights = {}
    for slot, record in zip(slots, records, strict=True):
        data = _read_array(parts, record["data"], record["dtype"], record["shape"])
        scale = None if record["scale"] is None else _read_array(parts, record["scale"], "float32",
                                                                  record["scale_shape"])
        if data.shape != slot.axes.lengths:
            raise _fail(path, f"expected weight {record['name']!r} to have its graph variable's shape "
                              f"{slot.axes.lengths}, received {data.shape}")
        weights[slot] = QuantizedWeight(data, scale, record["precision"])
    drop = manifest["accuracy_drop"]
    try:
        return CompiledModel(inputs, outputs, weights, manifest["precision"], manifest["batch_size"],
                             manifest["backend"], accuracy_drop=None if drop is None else float(drop))
    except NgraphError as err:
        raise _fail(path, f"expected a graph and weights that make a model, received: {err}") from err
