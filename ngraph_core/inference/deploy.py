"""The deployable file: one zip holding the graph, the stored weights and a manifest. No pickle.

Layout (``ZIP_STORED``, so the file's size is the weights' stored size)::

    manifest.json      {"format": "ngraph-inference", "format_version": 1, "precision", "batch_size",
                        "backend", "accuracy_drop", "inputs": n, "outputs": m,
                        "weights": [{"name", "shape", "dtype", "data", "scale", "scale_shape"}],
                        "parts": {part name: crc32}}
    graph.json         ng.serialize([*outputs, *inputs, *weight slots]): the quantized template
                       graph (INT8 activation quantize-dequantize included) with each weight a
                       variable whose value lives in weights/
    weights/<i>.bin    the weight's bytes, little-endian, in its stored dtype (float32,
                       float16 or int8)
    weights/<i>.scale  INT8 only: float32 per-channel scales

Every part's crc32 is in the manifest and checked on load (the zip's own CRCs are checked
too); a missing part, a wrong size, an unknown format name or version, or anything the zip
reader rejects raises ``DeployError``. ``save`` writes a temporary file beside the target and
``os.replace``-s it, so a reader never sees half a file.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NgraphError
from ..ir import OpType
from ..serialize import deserialize, serialize
from .quantize import PRECISIONS, QuantizedWeight

if TYPE_CHECKING:
    from .compile import CompiledModel

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "DeployError", "load", "save"]

FORMAT_NAME = "ngraph-inference"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
GRAPH = "graph.json"
MAX_MANIFEST_BYTES = 64 << 20
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
    try:
        blob = path.read_bytes()
    except OSError as err:
        raise DeployError(f"load {str(path)!r}: cannot read the file ({err.strerror}); hint: check the path") from err
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as z:
            names = set(z.namelist())
            if MANIFEST not in names:
                raise _fail(path, f"expected a {MANIFEST} in the archive, found {sorted(names)[:5]}")
            if z.getinfo(MANIFEST).file_size > MAX_MANIFEST_BYTES:
                raise _fail(path, f"the manifest holds {z.getinfo(MANIFEST).file_size} bytes, expected at most "
                                  f"{MAX_MANIFEST_BYTES}")
            manifest = json.loads(z.read(MANIFEST))
            if not isinstance(manifest, dict):
                raise _fail(path, f"expected the manifest to be a JSON object, received {type(manifest).__name__}")
            _check_header(path, manifest)
            wanted = manifest.get("parts")
            if not isinstance(wanted, dict) or any(not isinstance(v, int) for v in wanted.values()):
                raise _fail(path, "expected the manifest's 'parts' to map part names to crc32 integers")
            missing = sorted(set(wanted) - names)
            if missing:
                raise _fail(path, f"the archive lacks part(s) {missing}")
            parts = {name: z.read(name) for name in wanted}
    except DeployError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, KeyError, OSError,
            UnicodeDecodeError) as err:
        raise _fail(path, f"expected a zip archive with a JSON manifest, the reader failed: {err}") from err
    for name, crc in wanted.items():
        if zlib.crc32(parts[name]) != crc:
            raise _fail(path, f"part {name} has crc32 {zlib.crc32(parts[name])}, the manifest expects {crc}")
    return manifest, parts


def _check_header(path: Path, manifest: dict) -> None:
    if manifest.get("format") != FORMAT_NAME:
        raise _fail(path, f"expected format {FORMAT_NAME!r}, received {manifest.get('format')!r}")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise DeployError(f"load {str(path)!r}: expected format_version {FORMAT_VERSION}, received {version!r}; "
                          "hint: the file was written by another version of ngraph_core; load it there and save "
                          "it again, or compile the model again with this version")
    if manifest.get("precision") not in PRECISIONS:
        raise _fail(path, f"expected a precision in {PRECISIONS}, received {manifest.get('precision')!r}")
    for key in ("batch_size", "inputs", "outputs"):
        if not isinstance(manifest.get(key), int) or manifest[key] < (1 if key != "inputs" else 0):
            raise _fail(path, f"expected a positive integer {key!r} in the manifest, received {manifest.get(key)!r}")
    if not isinstance(manifest.get("weights"), list):
        raise _fail(path, "expected a 'weights' list in the manifest")


def _read_array(path: Path, parts: dict[str, bytes], name: Any, dtype: str, shape: Any) -> np.ndarray:
    if name not in parts or dtype not in _DTYPES or not isinstance(shape, list) \
            or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise _fail(path, f"a weight record names part {name!r}, dtype {dtype!r}, shape {shape!r}: expected a listed "
                          f"part, a dtype in {sorted(_DTYPES)} and a list of lengths")
    expected = int(np.prod(shape)) * np.dtype(_DTYPES[dtype]).itemsize
    if len(parts[name]) != expected:
        raise _fail(path, f"part {name} holds {len(parts[name])} bytes, expected {expected} for {dtype}{shape}")
    return np.frombuffer(parts[name], dtype=_DTYPES[dtype]).astype(dtype).reshape(shape)


def load(path: Any) -> CompiledModel:
    """Read a file ``save`` wrote back into a ``CompiledModel`` (its outputs equal the saved model's).

    Args:
        path: the file.

    Returns:
        the ``CompiledModel``.

    Raises:
        DeployError: a missing, corrupt or truncated file, a file that is not an ngraph inference
            file, or one of another format version.

    Example:
        >>> compiled = load("mnist_int8.ngi")
        >>> (probs,) = compiled.infer(x_batch)
    """
    from .compile import CompiledModel

    path = Path(path)
    manifest, parts = _read_parts(path)
    try:
        roots = deserialize(parts[GRAPH].decode())
    except (NgraphError, UnicodeDecodeError) as err:
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
        if not isinstance(record, dict):
            raise _fail(path, f"expected each weight record to be an object, received {type(record).__name__}")
        data = _read_array(path, parts, record.get("data"), record.get("dtype"), record.get("shape"))
        scale = None
        if record.get("scale") is not None:
            scale = _read_array(path, parts, record["scale"], "float32", record.get("scale_shape"))
        if data.shape != slot.axes.lengths:
            raise _fail(path, f"weight {record.get('name')!r} has shape {data.shape}, its graph variable "
                              f"{slot.axes.lengths}")
        weights[slot] = QuantizedWeight(data, scale, str(record.get("precision", "fp32")))
    drop = manifest.get("accuracy_drop")
    return CompiledModel(inputs, outputs, weights, manifest["precision"], manifest["batch_size"],
                         str(manifest.get("backend", "numpy")),
                         accuracy_drop=float(drop) if isinstance(drop, (int, float)) else None)
