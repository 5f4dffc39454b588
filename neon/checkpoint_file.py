"""The checkpoint file: HDF5 (h5py) — weights keyed by scope path, optimizer state, epoch — written atomically.

This is the file format only; ``neon/saving.py`` owns saving and loading models (every model
class calls it) and re-exports the names below.

Layout of a checkpoint file (``FORMAT_VERSION`` 1)::

    /                      attrs: format="ngraph-neon-params", format_version=1, and meta: JSON of
                           epoch (epochs completed), input_shape (one sample's shape), history
                           (per-epoch values) and model (the layers' configs), with meta_crc32;
                           rng: JSON of random-number states, with rng_crc32
    /params/<key>          one dataset per model variable, e.g. params/Sequential_0/Affine_1/Linear_0/W
    /optimizer/<key>       one dataset per optimizer state variable (momentum, Adam moments...)

Every dataset carries a ``crc32`` attribute of its bytes, ``meta`` and ``rng`` their crc32, so
a damaged file is reported, never loaded as garbage.

A key is the variable's scope path (the layers that created it) and its name. Layer names
are relative to their parent (``<Kind>_<k>`` counting same-class siblings, or the user's), so
the same architecture gives the same keys in any process, however many models were built
before it — no renumbering at save or load time.

Writes build the file in memory (up to ``IMAGE_LIMIT``), then write it to a temporary file in
the target's directory and ``os.replace`` it (``neon.atomic_files``): a failed or interrupted save
leaves any previous file untouched, a full disk is a ``CheckpointError``, and temporary files of
killed saves are removed by the next save.

Reads never open the file with h5py in this process: a child process
(``neon/checkpoint_reader.py``) checks the structure, reads and verifies every dataset under a
timeout and a memory limit, and hands back plain arrays and checked JSON fields. A file that
makes HDF5 crash, hang or allocate without bound is a ``CheckpointError``, never a dead process.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import ngraph_core as ng
from ngraph_core import safe_json

from . import checkpoint_reader as reader
from .atomic_files import atomic_path, remove_stale_temporaries

__all__ = ["CheckpointData", "CheckpointError", "atomic_path", "check_checkpoint_data", "read_checkpoint",
           "remove_stale_temporaries", "variable_keys", "write_checkpoint"]

FORMAT = "ngraph-neon-params"
FORMAT_VERSION = 1
GROUPS = reader.GROUPS
READ_TIMEOUT = 10.0  # seconds for the reader, plus READ_SECONDS_PER_BYTE of the file's size
READ_SECONDS_PER_BYTE = 1 / (20 << 20)
MEMORY_FLOOR = 1 << 30  # the reader's address space: this, or 512 MiB + 4x the file size if more
IMAGE_LIMIT = 512 << 20  # checkpoints up to this size are built in memory, then written with plain I/O
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_READER_HINT = "hint: the checkpoint is damaged — use another checkpoint"


class CheckpointError(ng.NgraphError, ValueError):
    """A checkpoint that cannot be written, read, or does not fit the model (names the file and key)."""


@dataclass
class CheckpointData:
    """What a checkpoint holds: arrays by key per group, and the file's attributes (``rng``: random states, JSON)."""

    params: dict[str, np.ndarray] = field(default_factory=dict)
    optimizer: dict[str, np.ndarray] = field(default_factory=dict)
    epoch: int = 0
    input_shape: tuple[int, ...] | None = None
    history: dict[str, list] = field(default_factory=dict)
    model: list[Any] = field(default_factory=list)
    rng: dict[str, Any] = field(default_factory=dict)


# -- keys -------------------------------------------------------------------------------------------------
def variable_keys(*groups: Sequence[ng.Op]) -> list[dict[str, ng.Op]]:
    """A key per variable for each group of variables (model variables, optimizer state...).

    The key is ``<scope path>/<name>``. Layer names are relative to their parents
    (``neon.layers.base``), so the same architecture gives the same keys in any process,
    however many models were built before it; optimizer state is named
    ``<variable path>/<slot>`` inside the optimizer's scope
    (``GradientDescentMomentum/Sequential_0/Affine_0/Linear_0/W/velocity``). A variable
    named ``<its last scope>/<rest>`` is keyed ``<scope path>/<rest>``. Two variables that
    would get the same key get ``_1``, ``_2``... suffixes, in order.

    Example:
        >>> params, state = variable_keys(model.variables, optimizer.state_variables)
    """
    taken: set[str] = set()
    out = []
    for group in groups:
        keys: dict[str, ng.Op] = {}
        for var in group:
            path = [entry.name for entry in var.meta.scope]
            own = var.meta.name or "variable"
            name = own[len(path[-1]) + 1:] if path and own.startswith(path[-1] + "/") else own
            base = "/".join(_clean(part) for part in [*path, *name.split("/")])
            key, k = base, 0
            while key in taken:
                k += 1
                key = f"{base}_{k}"
            taken.add(key)
            keys[key] = var
        out.append(keys)
    return out


def _clean(part: str) -> str:
    """A name usable as one HDF5 path element."""
    return "_" if part in ("", ".", "..") else part


# -- checks of the fields, before anything is written (to a file or into a model) ---------------------------
def check_checkpoint_data(path: str | Path, data: CheckpointData) -> CheckpointData:
    """Check every field of ``data``: arrays by str key, epoch, input shape, history, model, rng.

    ``read_checkpoint`` returns checked data; ``neon.saving.restore_checkpoint`` calls this again for data
    built elsewhere, so that nothing is written into a model from a bad field.

    Returns:
        ``data``.

    Raises:
        CheckpointError: naming the file and the first bad field.

    Example:
        >>> check_checkpoint_data("model.h5", CheckpointData(epoch=-1))  # CheckpointError: epoch is -1...
    """
    try:
        for group in GROUPS:
            arrays = getattr(data, group)
            if not isinstance(arrays, dict):
                raise reader.ReadFailure(f"{group} is {type(arrays).__name__}, expected a dict of arrays")
            for key, array in arrays.items():
                if not isinstance(key, str) or not isinstance(array, np.ndarray) or \
                        array.dtype.kind not in reader.DTYPE_KINDS:
                    raise reader.ReadFailure(f"{group}/{str(key)[:60]} is not a numeric array keyed by str")
        reader.check_int(data.epoch, "epoch", 0, 2**31)
        if data.input_shape is not None:
            if not isinstance(data.input_shape, tuple):
                raise reader.ReadFailure(f"input_shape is {type(data.input_shape).__name__}, expected a tuple")
            for n in data.input_shape:
                reader.check_int(n, "an input_shape size", 1, 2**31)
        reader.check_history(data.history)
        if not isinstance(data.model, list):
            raise reader.ReadFailure(f"model is {type(data.model).__name__}, expected a list of layer configs")
        reader.check_rng(data.rng)
    except reader.ReadFailure as exc:
        raise CheckpointError(f"{path}: {exc}; hint: the checkpoint is damaged or was not written by "
                              "neon's save_params") from None
    return data


# -- write ------------------------------------------------------------------------------------------------
def write_checkpoint(path: str | Path, data: CheckpointData) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring for the layout).

    Temporary files of earlier saves of ``path`` that were killed are removed first.

    Raises:
        CheckpointError: the file cannot be written — no space, no permission, a read-only
            file system, an I/O error — or ``data.rng`` is not JSON; the previous file, if any,
            is unchanged and no temporary file is left.

    Example:
        >>> write_checkpoint("out/model.h5", CheckpointData(params={"Affine_0/W": w}, epoch=3))
    """
    path = Path(path)
    groups = {name: {key: np.asarray(a, order="C") for key, a in getattr(data, name).items()} for name in GROUPS}
    meta = json.dumps({"epoch": int(data.epoch), "history": data.history, "model": data.model,
                       "input_shape": None if data.input_shape is None else list(data.input_shape)}, default=repr)
    try:
        rng = json.dumps(reader.check_rng(data.rng))
    except reader.ReadFailure as exc:
        raise CheckpointError(f"{path}: cannot write the checkpoint: {exc}") from None
    size = sum(a.nbytes + 4096 for arrays in groups.values() for a in arrays.values()) + len(meta) + len(rng) + 65536
    try:
        free = shutil.disk_usage(path.parent if path.parent.is_dir() else Path.cwd()).free
        if free < size:  # fail before HDF5 meets a full disk
            raise OSError(28, f"No space left on device (about {size >> 10} KiB needed, {free >> 10} KiB free)")
        with atomic_path(path) as tmp:
            if size <= IMAGE_LIMIT:  # HDF5 writes to memory; only plain Python I/O meets the disk
                image = io.BytesIO()
                with h5py.File(image, "w") as f:
                    _fill(f, groups, meta, rng)
                with open(tmp, "wb") as out:
                    out.write(image.getbuffer())
            else:
                with h5py.File(tmp, "w") as f:
                    _fill(f, groups, meta, rng)
    except Exception as exc:  # noqa: BLE001 - OSError (ENOSPC, EACCES, EROFS, EIO), h5py's RuntimeError...
        reason = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno and not exc.strerror else exc
        raise CheckpointError(f"{path}: cannot write the checkpoint: {str(reason)[:300]}; the previous file, "
                              "if any, is unchanged; hint: free disk space or save to another directory") from exc


def _fill(f: h5py.File, groups: dict[str, dict[str, np.ndarray]], meta: str, rng: str) -> None:
    f.attrs["format"] = FORMAT
    f.attrs["format_version"] = FORMAT_VERSION
    f.attrs["meta"] = meta
    f.attrs["meta_crc32"] = zlib.crc32(meta.encode())
    f.attrs["rng"] = rng
    f.attrs["rng_crc32"] = zlib.crc32(rng.encode())
    for group_name, arrays in groups.items():
        group = f.create_group(group_name)
        for key, array in arrays.items():
            dataset = group.create_dataset(key, data=array)
            dataset.attrs["crc32"] = zlib.crc32(array)


# -- read -------------------------------------------------------------------------------------------------
def read_checkpoint(path: str | Path, *, timeout: float | None = None,
                    memory_limit: int | None = None) -> CheckpointData:
    """Read and check a checkpoint in a child process: structure, format, version, fields, checksums.

    Args:
        path: the file.
        timeout: seconds the reader may take (default ``READ_TIMEOUT`` plus 1 s per 20 MiB).
        memory_limit: bytes of address space for the reader (default the larger of 1 GiB and
            512 MiB + 4x the file size).

    Returns:
        the checked data: arrays, epoch, input shape, history, model configs, rng.

    Raises:
        CheckpointError: naming the file (and the key) — missing, not HDF5, truncated or
            damaged, another format, a newer format version, a checksum mismatch, a field of
            the wrong type, or a file that crashes, hangs or exhausts the reader.

    Example:
        >>> data = read_checkpoint("out/model.h5"); data.epoch
        3
    """
    path = Path(path)
    size = _check_signature(path)
    timeout = READ_TIMEOUT + size * READ_SECONDS_PER_BYTE if timeout is None else timeout
    memory_limit = max(MEMORY_FLOOR, (512 << 20) + 4 * size) if memory_limit is None else memory_limit
    with tempfile.TemporaryDirectory(prefix="neon-checkpoint-") as out:
        try:
            done = subprocess.run(_reader_command(path.resolve(), Path(out), memory_limit), env=_reader_env(),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise CheckpointError(f"{path}: reading took more than {timeout:.1f} s and was stopped; the file is "
                                  "damaged (or its disk stalled); hint: use another checkpoint, or pass a "
                                  "larger timeout if the file is genuine and large") from None
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot start the checkpoint reader ({exc})") from None
        return _collect(path, Path(out), done.returncode)


def _check_signature(path: Path) -> int:
    """The file's size, after checking it starts with the HDF5 signature (at 0 or a user block's end)."""
    try:
        if not path.is_file():
            raise CheckpointError(f"{path}: no such checkpoint file")
        size = path.stat().st_size
        with open(path, "rb") as f:
            offset = 0
            while offset + len(HDF5_SIGNATURE) <= size:
                f.seek(offset)
                if f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                    return size
                offset = 512 if offset == 0 else offset * 2
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({exc.strerror or exc})") from None
    raise CheckpointError(f"{path}: not an HDF5 file ({size} bytes, no HDF5 signature); hint: the file is "
                          "empty, truncated or of another kind — use another checkpoint")


def _reader_command(path: Path, out: Path, memory_limit: int) -> list[str]:
    """The child's command line (``-P``: the reader's own folder is not put on ``sys.path``)."""
    return [sys.executable, "-P", reader.__file__, str(path), str(out), str(memory_limit), FORMAT,
            str(FORMAT_VERSION)]


def _reader_env() -> dict[str, str]:
    """This environment, with one math thread, no HDF5 plugins and the folders numpy and h5py come from here."""
    folders = [str(Path(module.__file__).resolve().parent.parent) for module in (np, h5py)]
    extra = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "HDF5_PLUGIN_PRELOAD": "::", "PYTHONPATH": os.pathsep.join([*dict.fromkeys(folders), *extra])}


def _collect(path: Path, out: Path, returncode: int) -> CheckpointData:
    """The child's result as ``CheckpointData``, or its failure as ``CheckpointError``."""
    error, result = out / "error.json", out / "result.json"
    if returncode == reader.EXIT_FAILURE and error.is_file() and error.stat().st_size < 65536:
        report = safe_json.loads(error.read_bytes(), what=f"{path}: the checkpoint reader's error report",
                                 error=CheckpointError, max_depth=4, hint=_READER_HINT)
        message = report.get("message") if isinstance(report, dict) else None
        raise CheckpointError(f"{path}: {message if isinstance(message, str) else 'unknown failure'}")
    if returncode != 0 or not result.is_file():
        cause = (f"signal {signal.Signals(-returncode).name}" if -returncode in signal.valid_signals()
                 else f"exit status {returncode}")
        raise CheckpointError(f"{path}: the HDF5 library failed reading this file ({cause}); the file is damaged "
                              "— this process is unaffected; hint: use another checkpoint")
    try:  # the child's output is plain JSON and arrays: checked again, loaded without pickle
        if result.stat().st_size > reader.MAX_META_BYTES + reader.MAX_RNG_BYTES + (64 << 20):
            raise reader.ReadFailure("the reader's output is too large")
        fields = safe_json.loads(result.read_bytes(), what=f"{path}: the checkpoint reader's output",
                                 error=CheckpointError, max_depth=reader.MAX_JSON_DEPTH, hint=_READER_HINT)
        meta = reader.decode_meta(json.dumps({k: fields[k] for k in ("epoch", "history", "model", "input_shape")}))
        names = fields["names"]
        data = CheckpointData(epoch=meta["epoch"], history=meta["history"], model=meta["model"],
                              input_shape=None if meta["input_shape"] is None else tuple(meta["input_shape"]),
                              rng=reader.check_rng(fields["rng"]))
        with np.load(out / "result.npz", allow_pickle=False) as arrays:
            if len(arrays.files) != len(names):
                raise reader.ReadFailure("the reader returned another number of arrays than keys")
            for i, (group, key) in enumerate(names):
                getattr(data, GROUPS[GROUPS.index(group)])[str(key)] = arrays[f"a{i}"]
        return check_checkpoint_data(path, data)
    except CheckpointError:
        raise
    except (reader.ReadFailure, ValueError, KeyError, TypeError, OSError) as exc:
        raise CheckpointError(f"{path}: the checkpoint reader returned malformed data ({exc})") from None
