"""Checkpoints in HDF5 (h5py): weights keyed by scope path, optimizer state, epoch — written atomically.

Layout of a checkpoint file (``FORMAT_VERSION`` 1)::

    /                      attrs: format="ngraph-neon-params", format_version=1, and meta: JSON of
                           epoch (epochs completed), input_shape (one sample's shape), history
                           (per-epoch values) and model (the layers' configs), with meta_crc32
    /params/<key>          one dataset per model variable, e.g. params/Sequential_0/Affine_1/Linear_0/W
    /optimizer/<key>       one dataset per optimizer state variable (momentum, Adam moments...)

Every dataset carries a ``crc32`` attribute of its bytes, and ``meta`` has ``meta_crc32``, so
a damaged file is reported, never loaded as garbage.

A key is the variable's scope path (the layers that created it) and its name. Layer names
are relative to their parent (``<Kind>_<k>`` counting same-class siblings, or the user's), so
the same architecture gives the same keys in any process, however many models were built
before it — no renumbering at save or load time.

Writes go to a temporary file in the target's directory, then ``os.replace`` it: a failed or
interrupted save leaves any previous file untouched.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import ngraph_core as ng

FORMAT = "ngraph-neon-params"
FORMAT_VERSION = 1
GROUPS = ("params", "optimizer")


class CheckpointError(ng.NgraphError, ValueError):
    """A checkpoint that cannot be written, read, or does not fit the model (names the file and key)."""


@dataclass
class CheckpointData:
    """What a checkpoint holds: arrays by key per group, and the file's attributes."""

    params: dict[str, np.ndarray] = field(default_factory=dict)
    optimizer: dict[str, np.ndarray] = field(default_factory=dict)
    epoch: int = 0
    input_shape: tuple[int, ...] | None = None
    history: dict[str, list] = field(default_factory=dict)
    model: list[Any] = field(default_factory=list)


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


# -- atomic writes ------------------------------------------------------------------------------------------
@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``, on failure it is removed.

    Example:
        >>> with atomic_path("out/curve.png") as tmp:
        ...     figure.savefig(tmp, format="png")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    mask = os.umask(0)  # mkstemp makes the file private; give it the mode a plain open() would
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # the data is on disk before the rename makes it visible
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- write ------------------------------------------------------------------------------------------------
def write_checkpoint(path: str | Path, data: CheckpointData) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring for the layout).

    Raises:
        CheckpointError: the file cannot be written (the previous one, if any, is kept).

    Example:
        >>> write_checkpoint("out/model.h5", CheckpointData(params={"Affine_0/W": w}, epoch=3))
    """
    path = Path(path)
    try:
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs["format"] = FORMAT
            f.attrs["format_version"] = FORMAT_VERSION
            meta = json.dumps({"epoch": int(data.epoch), "history": data.history, "model": data.model,
                               "input_shape": None if data.input_shape is None else list(data.input_shape)},
                              default=repr)
            f.attrs["meta"] = meta
            f.attrs["meta_crc32"] = zlib.crc32(meta.encode())
            for group_name in GROUPS:
                group = f.create_group(group_name)
                for key, array in getattr(data, group_name).items():
                    array = np.asarray(array, order="C")
                    dataset = group.create_dataset(key, data=array)
                    dataset.attrs["crc32"] = zlib.crc32(array.tobytes())
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot write the checkpoint: {exc}; the previous file, if any, "
                              "is unchanged") from exc


# -- read -------------------------------------------------------------------------------------------------
def read_checkpoint(path: str | Path) -> CheckpointData:
    """Read and check a checkpoint: format, version, every dataset's checksum.

    Raises:
        CheckpointError: naming the file (and the key) — missing, not HDF5, truncated or
            damaged, another format, a newer format version, a checksum mismatch.

    Example:
        >>> data = read_checkpoint("out/model.h5"); data.epoch
        3
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        with h5py.File(path, "r") as f:
            return _read_open(path, f)
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - h5py reports damage as OSError, KeyError, RuntimeError...
        raise CheckpointError(f"{path}: not a readable HDF5 checkpoint ({type(exc).__name__}: {exc}); "
                              "hint: the file is truncated or damaged — use another checkpoint") from None


def _read_open(path: Path, f: h5py.File) -> CheckpointData:
    if f.attrs.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an ngraph-neon checkpoint (format attribute "
                              f"{f.attrs.get('format')!r}, expected {FORMAT!r})")
    version = int(f.attrs.get("format_version", -1))
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {version}, this neon reads version "
                              f"{FORMAT_VERSION}; hint: load it with the neon version that wrote it")
    meta = f.attrs["meta"]
    if zlib.crc32(meta.encode()) != int(f.attrs["meta_crc32"]):
        raise CheckpointError(f"{path}: the file's attributes fail their checksum; the file is damaged")
    meta = json.loads(meta)
    data = CheckpointData(
        epoch=int(meta["epoch"]), history=meta["history"], model=meta["model"],
        input_shape=None if meta["input_shape"] is None else tuple(int(n) for n in meta["input_shape"]),
    )
    for group_name in GROUPS:
        if group_name not in f:
            raise CheckpointError(f"{path}: no '{group_name}' group; the file is incomplete")
        arrays = getattr(data, group_name)

        def visit(key: str, obj: Any, arrays: dict[str, np.ndarray] = arrays, group_name: str = group_name) -> None:
            if isinstance(obj, h5py.Dataset):
                array = obj[()]
                array = np.asarray(array)
                if zlib.crc32(np.asarray(array, order="C").tobytes()) != int(obj.attrs.get("crc32", -1)):
                    raise CheckpointError(f"{path}: {group_name}/{key} fails its checksum; the file is damaged")
                arrays[key] = array

        f[group_name].visititems(visit)
    return data


def check_entries(path: str | Path, group: str, expected: dict[str, ng.Op], found: dict[str, np.ndarray],
                  dtype_of: Any = lambda var: var.dtype) -> None:
    """Check that a checkpoint group holds exactly the expected keys, with their shapes and dtypes.

    Args:
        path: the file (for messages).
        group: ``params`` or ``optimizer``.
        expected: key -> the variable it loads into.
        found: key -> the array read.

    Raises:
        CheckpointError: naming the file and the first missing, unexpected or mismatched key.
    """
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    if missing or unexpected:
        parts = []
        for what, keys in (("missing", missing), ("unexpected", unexpected)):
            if keys:
                parts.append(f"{what} {group}/{keys[0]}" + (f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""))
        raise CheckpointError(f"{path}: the checkpoint does not fit this model: {'; '.join(parts)}; expected keys "
                              f"like {sorted(expected)[:3]}; hint: it was saved from a different architecture")
    for key, var in expected.items():
        array = found[key]
        if array.shape != var.axes.lengths:
            raise CheckpointError(f"{path}: {group}/{key} has shape {array.shape}, expected {var.axes.lengths} "
                                  "for this model; hint: it was saved from a different architecture")
        if array.dtype != np.dtype(dtype_of(var)):
            raise CheckpointError(f"{path}: {group}/{key} has dtype {array.dtype}, expected {dtype_of(var)}")
