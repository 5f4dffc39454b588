"""The checkpoint reader that runs in a child process, and the field checks both processes share.

HDF5 is a large C library: a damaged file can make it crash, hang or allocate without bound.
So ``read_checkpoint`` (``neon/checkpoint_file.py``) never opens a user's file with h5py itself; it runs this
file as a script (``python -P checkpoint_reader.py FILE OUT_DIR MEMORY_LIMIT``) under a
timeout. The child first limits itself (address space, output file size, no core dump, no
HDF5 filter plugins), then checks the whole structure before reading any data:

* only hard links to groups and datasets (no soft or external links, no cycles deeper than
  ``MAX_DEPTH``, at most ``MAX_OBJECTS`` objects);
* datasets stored in the file itself (no virtual datasets, no external storage), filtered at
  most by gzip/shuffle/fletcher32, of a plain numeric dtype, whose size fits their storage and
  the file (``MAX_EXPANSION`` for compressed data);
* the attributes' types and sizes.

Then it reads each dataset, verifies its ``crc32`` and writes plain arrays (``result.npz``) and
validated JSON (``result.json``) for the parent, which loads them with ``allow_pickle=False``;
or ``error.json`` with a message. This module imports only the standard library, numpy and
h5py, so the child starts in about 0.15 s without importing neon or ngraph_core.

Example:
    >>> decode_meta('{"epoch": 2, "history": {}, "model": [], "input_shape": [4]}')["epoch"]
    2
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import signal
import sys
import zlib
from pathlib import Path
from typing import Any

GROUPS = ("params", "optimizer")
MAX_DEPTH = 32  # group nesting: keys are scope paths, a few levels deep
MAX_OBJECTS = 100_000
MAX_META_BYTES = 16 << 20
MAX_JSON_DEPTH = 128  # the layer configs in meta nest up to neon.layers' MAX_CONFIG_DEPTH (100) plus a few levels
MAX_RNG_BYTES = 1 << 20
MAX_EXPANSION = 1100  # gzip compresses at most ~1032:1
DTYPE_KINDS = "biufc"
EXIT_FAILURE = 2


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"')  # a JSON string literal (escapes included)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class ReadFailure(Exception):
    """A checkpoint that cannot be read; the parent reports it as ``CheckpointError`` naming the file."""


# -- the JSON fields, checked in the child and again in the parent ------------------------------------------
def decode_json(text: Any, what: str, limit: int) -> Any:
    """Parse an attribute's JSON text of at most ``limit`` bytes, nested at most ``MAX_JSON_DEPTH`` deep.

    Raises:
        ReadFailure: not text, too long, too deep, or not JSON.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise ReadFailure(f"the {what} attribute is {type(text).__name__}, expected JSON text")
    if len(text) > limit:
        raise ReadFailure(f"the {what} attribute holds {len(text)} characters, expected at most {limit}")
    depth = json_depth(text, MAX_JSON_DEPTH)
    if depth > MAX_JSON_DEPTH:
        raise ReadFailure(f"the {what} attribute nests {depth} levels deep, expected at most {MAX_JSON_DEPTH}; "
                          "the file is damaged")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ReadFailure(f"the {what} attribute is not valid JSON ({type(exc).__name__})") from None


def json_depth(text: str, limit: int) -> int:
    """How deep ``text``'s arrays and objects nest (brackets inside strings do not count), or more than ``limit``.

    The child cannot import ``ngraph_core.safe_json`` (the parent's decoder); this is its scan, without
    recursion, so ``json.loads`` never recurses deep enough to fail by where it is called from.

    Example:
        >>> json_depth('{"a": [[1], "]]]"]}', 64)
        3
    """
    import numpy as np

    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii")
    base, deepest, chunk = 0, 0, 1 << 20
    for start in range(0, len(brackets), chunk):
        codes = np.frombuffer(brackets, dtype=np.uint8, count=min(chunk, len(brackets) - start), offset=start)
        depth = base + np.cumsum(np.where((codes == ord("[")) | (codes == ord("{")), 1, -1), dtype=np.int64)
        deepest = max(deepest, int(depth.max()))
        if deepest > limit:
            return deepest
        base = int(depth[-1])
    return deepest


def check_int(value: Any, what: str, low: int = 0, high: int = 2**62) -> int:
    """``value`` as an int in ``[low, high]``; bools and floats are refused.

    Raises:
        ReadFailure: naming ``what`` with the value received.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ReadFailure(f"{what} is {str(value)[:60]!r}, expected an int in [{low}, {high}]")
    return value


def check_history(history: Any) -> dict[str, list]:
    """Per-epoch values: a dict of equally long lists of numbers or None, keyed by str, with ``epoch``.

    Raises:
        ReadFailure: another type, a non-numeric value, or lists of different lengths.
    """
    if not isinstance(history, dict):
        raise ReadFailure(f"history is {type(history).__name__}, expected a dict of per-epoch lists")
    if history and "epoch" not in history:
        raise ReadFailure("history has no 'epoch' list")
    for key, values in history.items():
        if not isinstance(values, list):
            raise ReadFailure(f"history[{key[:60]!r}] is {type(values).__name__}, expected a list of per-epoch values")
        if len(values) != len(history["epoch"]):
            raise ReadFailure(f"history[{key[:60]!r}] has {len(values)} values, expected one per epoch "
                              f"({len(history['epoch'])})")
        if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
            raise ReadFailure(f"history[{key[:60]!r}] holds a value that is neither a number nor null")
    return history


def check_rng(rng: Any) -> dict[str, Any]:
    """A random-number state: a dict with str keys holding JSON values only, at most ``MAX_RNG_BYTES`` of text.

    Raises:
        ReadFailure: another type, or too large.
    """
    if not isinstance(rng, dict):
        raise ReadFailure(f"rng is {type(rng).__name__}, expected a dict")
    try:
        text = json.dumps(rng, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        raise ReadFailure("rng holds values that are not JSON (str keys, numbers, str, lists, dicts)") from None
    if len(text) > MAX_RNG_BYTES:
        raise ReadFailure(f"rng is {len(text)} characters of JSON, expected at most {MAX_RNG_BYTES}")
    return rng


def decode_meta(text: Any) -> dict[str, Any]:
    """The ``meta`` attribute: epoch, input_shape, history and model, each checked.

    Raises:
        ReadFailure: naming the first field of the wrong type or range.
    """
    meta = decode_json(text, "meta", MAX_META_BYTES)
    if not isinstance(meta, dict) or not {"epoch", "history", "model", "input_shape"} <= set(meta):
        raise ReadFailure("the meta attribute lacks epoch, history, model or input_shape")
    shape = meta["input_shape"]
    if shape is not None:
        if not isinstance(shape, list) or len(shape) > 32:
            raise ReadFailure(f"input_shape is {str(shape)[:60]!r}, expected a list of sizes")
        shape = [check_int(n, "an input_shape size", 1, 2**31) for n in shape]
    if not isinstance(meta["model"], list):
        raise ReadFailure(f"model is {type(meta['model']).__name__}, expected a list of layer configs")
    return {"epoch": check_int(meta["epoch"], "epoch", 0, 2**31), "input_shape": shape,
            "history": check_history(meta["history"]), "model": meta["model"]}


# -- the structure, checked before any data is read ---------------------------------------------------------
def check_dataset(name: str, dset: Any, file_size: int) -> int:
    """Check one dataset's storage, filters, dtype and size; its size in bytes.

    Raises:
        ReadFailure: virtual or external storage, another filter, a non-numeric dtype, or a
            size its storage cannot hold.
    """
    import h5py

    plist = dset.id.get_create_plist()
    if plist.get_layout() not in (h5py.h5d.CONTIGUOUS, h5py.h5d.CHUNKED, h5py.h5d.COMPACT):
        raise ReadFailure(f"{name} is a virtual dataset; checkpoints hold their data themselves")
    if plist.get_external_count():
        raise ReadFailure(f"{name} keeps its data in external files; checkpoints hold their data themselves")
    allowed = {h5py.h5z.FILTER_DEFLATE, h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_FLETCHER32}
    filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    if any(code not in allowed for code in filters):
        raise ReadFailure(f"{name} uses HDF5 filter {filters}; only gzip, shuffle and fletcher32 are read")
    dtype = dset.dtype
    if dtype.kind not in DTYPE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ReadFailure(f"{name} has dtype {dtype}, expected a plain numeric dtype")
    shape = dset.shape
    if shape is None or len(shape) > 32:
        raise ReadFailure(f"{name} has shape {shape}, expected at most 32 dimensions")
    nbytes = math.prod(shape) * dtype.itemsize
    stored = dset.id.get_storage_size()
    ratio = MAX_EXPANSION if filters else 1
    if stored > file_size or nbytes > stored * ratio:
        raise ReadFailure(f"{name} declares {nbytes} bytes of data but stores {stored} in a file of "
                          f"{file_size} bytes; the file is damaged")
    crc = dset.attrs.get_id("crc32") if "crc32" in dset.attrs else None
    if crc is None or crc.shape != () or crc.dtype.kind not in "iu":
        raise ReadFailure(f"{name} has no integer crc32 attribute")
    return nbytes


def collect(group: Any, prefix: str, file_size: int, found: list[tuple[str, Any]], depth: int = 0) -> None:
    """Every dataset under ``group`` (key relative to the group), after checking the links and datasets.

    Raises:
        ReadFailure: a soft or external link, a cycle or too deep nesting, too many objects.
    """
    import h5py

    if depth > MAX_DEPTH:
        raise ReadFailure(f"{prefix} nests groups deeper than {MAX_DEPTH}; the file is damaged or has a cycle")
    for name in group:
        key = f"{prefix}/{name}" if prefix else name
        link = group.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise ReadFailure(f"{key} is a {type(link).__name__}; checkpoints hold only hard links")
        obj = group[name]
        if len(found) >= MAX_OBJECTS:
            raise ReadFailure(f"more than {MAX_OBJECTS} objects; the file is damaged")
        if isinstance(obj, h5py.Dataset):
            found.append((key, obj))
        elif isinstance(obj, h5py.Group):
            collect(obj, key, file_size, found, depth + 1)
        else:
            raise ReadFailure(f"{key} is a {type(obj).__name__}; expected groups and datasets")


def read_attr(f: Any, name: str, kinds: str, default: Any = None) -> Any:
    """A scalar root attribute of one of the dtype ``kinds`` (``O``/``S``/``U`` text, ``iu`` ints)."""
    if name not in f.attrs:
        return default
    aid = f.attrs.get_id(name)
    if aid.shape != () or aid.dtype.kind not in kinds:
        raise ReadFailure(f"the {name} attribute has shape {aid.shape} and dtype {aid.dtype}, "
                          "expected a scalar")
    return f.attrs[name]


def read_file(path: str, expected_format: str, expected_version: int) -> tuple[dict[str, Any], list, list]:
    """Check and read a checkpoint: (fields, [(group, key)...], [arrays...]).

    Raises:
        ReadFailure: naming what is wrong (format, version, checksum, structure).
    """
    import h5py
    import numpy as np

    file_size = os.path.getsize(path)
    with h5py.File(path, "r") as f:
        kind = read_attr(f, "format", "OSU")
        kind = kind.decode("utf-8", "replace") if isinstance(kind, bytes) else kind
        if kind != expected_format:
            raise ReadFailure(f"not an ngraph-neon checkpoint (format attribute {str(kind)[:60]!r}, "
                              f"expected {expected_format!r})")
        version = int(read_attr(f, "format_version", "iu", -1))
        if version != expected_version:
            raise ReadFailure(f"checkpoint format version {version}, this neon reads version {expected_version}; "
                              "hint: load it with the neon version that wrote it")
        fields = {"rng": "{}"}  # files written before the rng field have none
        for name, limit in (("meta", MAX_META_BYTES), ("rng", MAX_RNG_BYTES)):
            if name == "rng" and name not in f.attrs:
                continue
            text = read_attr(f, name, "OSU")
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
            if not isinstance(text, str) or len(text) > limit:
                raise ReadFailure(f"the {name} attribute is not JSON text of at most {limit} characters")
            crc = read_attr(f, f"{name}_crc32", "iu")
            if crc is None or zlib.crc32(text.encode("utf-8", "surrogatepass")) != int(crc):
                raise ReadFailure(f"the file's {name} attribute fails its checksum; the file is damaged")
            fields[name] = text
        fields = {**decode_meta(fields["meta"]), "rng": check_rng(decode_json(fields["rng"], "rng", MAX_RNG_BYTES))}
        found: list[tuple[str, Any]] = []
        names: list[tuple[str, str]] = []
        for group_name in GROUPS:
            if not isinstance(f.get(group_name, getlink=True), h5py.HardLink) or \
                    not isinstance(f[group_name], h5py.Group):
                raise ReadFailure(f"no '{group_name}' group; the file is incomplete")
            start = len(found)
            collect(f[group_name], "", file_size, found)
            names += [(group_name, key) for key, _ in found[start:]]
        sizes = [check_dataset(f"{group}/{key}", dset, file_size) for (group, key), (_, dset) in zip(names, found)]
        arrays = []
        for (group, key), (_, dset), nbytes in zip(names, found, sizes):
            array = np.empty(dset.shape, dset.dtype)
            if nbytes:
                dset.read_direct(array)
            if zlib.crc32(array) != int(dset.attrs["crc32"]):
                raise ReadFailure(f"{group}/{key} fails its checksum; the file is damaged")
            arrays.append(array)
    return fields, names, arrays


def peak_rss() -> int | None:
    """This process's peak resident memory in KiB since it started (``VmHWM``, reset by exec), for the figures."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in lines if line.startswith("VmHWM:")), None)


def main(argv: list[str]) -> int:
    """The child: limit this process, read ``argv[1]``, write the result or the error into ``argv[2]``."""
    path, out_dir, memory_limit = argv[1], Path(argv[2]), int(argv[3])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (memory_limit, memory_limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized output is an OSError, not a kill
    try:
        import h5py
        import numpy as np

        while h5py.h5pl.size():  # never load a filter plugin a file asks for (HDF5_PLUGIN_PRELOAD="::" too)
            h5py.h5pl.remove(0)
        fields, names, arrays = read_file(path, argv[4], int(argv[5]))
        np.savez(out_dir / "result.npz", **{f"a{i}": a for i, a in enumerate(arrays)})
        (out_dir / "result.json").write_text(json.dumps({**fields, "names": names, "peak_rss_kib": peak_rss()}))
        return 0
    except ReadFailure as exc:
        message = str(exc)
    except MemoryError:
        message = (f"reading it needs more than the reader's memory limit of {memory_limit >> 20} MiB; "
                   "the file is damaged (hint: raise memory_limit if it is genuine)")
    except Exception as exc:  # noqa: BLE001 - h5py reports damage as OSError, KeyError, RuntimeError...
        message = (f"not a readable HDF5 checkpoint ({type(exc).__name__}: {str(exc)[:300]}); "
                   "hint: the file is truncated or damaged — use another checkpoint")
    (out_dir / "error.json").write_text(json.dumps({"message": message, "peak_rss_kib": peak_rss()}))
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main(sys.argv))
