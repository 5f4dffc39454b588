"""``read_idx``: the IDX file format of the MNIST distribution, raw or gzip-compressed, fully validated.

The format (yann.lecun.com/exdb/mnist): a 4-byte magic number — two zero bytes, a type code
(0x08 unsigned byte, 0x09 signed byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)
and the number of dimensions — then each dimension as a big-endian uint32, then the data,
big-endian, row-major. A file of any other length than that header announces is rejected:
a truncated download must never be read as data.

Reading is bounded *before* anything is allocated: the header's payload size must be at most
``max_bytes`` (2 GiB by default) and no more than the file can hold — its size when raw, and
1,032 times its size when gzipped (DEFLATE's largest expansion). A ``.gz`` file is inflated in
1 MiB chunks into the buffer the header sized and stops at the first byte past it, so a gzip
bomb costs at most the size its header announces, never the size it would inflate to.
``read_bytes`` applies the same discipline to files without a header (CIFAR-10 batches, CSV).
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .iterators import DataError

IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
DEFAULT_MAX_BYTES = 2 << 30  # the largest payload a loader allocates unless told otherwise (2 GiB)
MAX_DEFLATE_RATIO = 1032  # DEFLATE cannot expand input more than ~1032:1 (258-byte matches, 2 bits each)
MAX_IDX_DIMS = 32  # the most dimensions every numpy version can reshape to
CHUNK = 1 << 20
_READ_ERRORS = (OSError, EOFError, zlib.error)  # gzip.BadGzipFile is an OSError


def _damaged(path: Path, exc: BaseException) -> DataError:
    return DataError(f"{path}: cannot read the file: {exc}; hint: the file is damaged or incomplete, fetch it again")


@contextmanager
def open_stream(path: Path) -> Iterator[tuple[BinaryIO, int]]:
    """``(stream, capacity)``: the file's bytes (gunzipped when it ends in ``.gz``) and the most it can yield.

    Raises:
        DataError: the file cannot be opened.
    """
    try:
        raw = open(path, "rb")  # closed in the finally below, after the gzip stream
    except OSError as exc:
        raise _damaged(path, exc) from None
    try:
        size = os.fstat(raw.fileno()).st_size
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                yield stream, size * MAX_DEFLATE_RATIO + CHUNK  # type: ignore[misc]
        else:
            yield raw, size
    finally:
        raw.close()


def _fill(path: Path, stream: BinaryIO, buffer: memoryview) -> int:
    """Read into ``buffer`` chunk by chunk; the bytes read (fewer at the end of the stream)."""
    done = 0
    try:
        while done < len(buffer):
            n = stream.readinto(buffer[done:done + CHUNK])  # type: ignore[attr-defined]
            if not n:
                break
            done += n
    except _READ_ERRORS as exc:
        raise _damaged(path, exc) from None
    return done


def _at_end(path: Path, stream: BinaryIO) -> bool:
    """True when nothing follows (reading the last byte also checks a gzip file's CRC)."""
    try:
        return stream.read(1) == b""
    except _READ_ERRORS as exc:
        raise _damaged(path, exc) from None


def read_at_most(path: Path, limit: int) -> bytes:
    """The first ``limit`` bytes of the file (gunzipped when it ends in ``.gz``): never reads, nor inflates, more.

    Raises:
        DataError: unreadable, or a damaged gzip stream.
    """
    chunks, total = [], 0
    with open_stream(path) as (stream, _):
        try:
            while total < limit:
                chunk = stream.read(min(CHUNK, limit - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        except _READ_ERRORS as exc:
            raise _damaged(path, exc) from None
    return b"".join(chunks)


def read_bytes(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The file's contents, gunzipped when it ends in ``.gz``, at most ``max_bytes`` of them.

    Args:
        path: the file.
        max_bytes: the most bytes to return; a larger file (or inflated stream) is refused
            once one byte past the limit has been read (raw) or inflated (gzip).

    Returns:
        the bytes.

    Raises:
        DataError: unreadable, a damaged gzip stream, or more than ``max_bytes``.
    """
    data = read_at_most(path, max_bytes + 1)
    if len(data) > max_bytes:
        raise DataError(f"{path}: more than {max_bytes} bytes of data, expected at most max_bytes={max_bytes}; hint: "
                        "pass a larger max_bytes if the file is genuine (a small .gz that inflates past it is a "
                        "decompression bomb)")
    return data


def _header(path: Path, stream: BinaryIO, ndim: int | None, type_code: int | None) -> tuple[np.dtype, tuple]:
    magic = stream.read(4)
    if len(magic) < 4:
        raise DataError(f"{path}: {len(magic)} bytes, too short for an IDX header (expected at least 4); "
                        "hint: the file is truncated")
    zero, code, dims = struct.unpack(">HBB", magic)
    if zero != 0 or code not in IDX_TYPES:
        raise DataError(f"{path}: bad IDX magic number 0x{magic.hex()}: expected 0x0000 then a type code among "
                        f"{sorted(hex(c) for c in IDX_TYPES)} and the number of dimensions; hint: is this an "
                        "IDX file (a gzip file must end in .gz)?")
    if type_code is not None and code != type_code:
        raise DataError(f"{path}: IDX type code 0x{code:02x}, expected 0x{type_code:02x}")
    if ndim is not None and dims != ndim:
        raise DataError(f"{path}: IDX file has {dims} dimension(s), expected {ndim}")
    if dims > MAX_IDX_DIMS:
        raise DataError(f"{path}: IDX file has {dims} dimensions, expected at most {MAX_IDX_DIMS}; "
                        "hint: the header is damaged")
    raw_dims = stream.read(4 * dims)
    if len(raw_dims) < 4 * dims:
        raise DataError(f"{path}: truncated IDX header: {4 + len(raw_dims)} bytes, expected at least {4 + 4 * dims}")
    return np.dtype(IDX_TYPES[code]), struct.unpack(f">{dims}I", raw_dims)


def read_idx(path: str | Path, ndim: int | None = None, type_code: int | None = None,
             max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """Parse one IDX file (raw, or gzip when the name ends in ``.gz``), bounded by its header.

    Args:
        path: the file.
        ndim: the number of dimensions the file must have (None: any).
        type_code: the element type code the file must have (0x08 for MNIST; None: any).
        max_bytes: the largest payload (the array's bytes) to accept; 2 GiB by default.

    Returns:
        the array, in native byte order, with the file's dimensions.

    Raises:
        DataError: naming the file — unreadable or damaged gzip, a bad magic number, an
            unexpected type or number of dimensions, a payload larger than ``max_bytes`` or than
            the file can hold, or a length that is not what the header announces (truncated,
            or trailing bytes).

    Example:
        >>> labels = read_idx("mnist/train-labels-idx1-ubyte.gz", ndim=1, type_code=0x08)
    """
    path = Path(path)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise DataError(f"read_idx: max_bytes must be an int >= 0, received {max_bytes!r}")
    with open_stream(path) as (stream, capacity):
        try:
            dtype, shape = _header(path, stream, ndim, type_code)
        except _READ_ERRORS as exc:
            raise _damaged(path, exc) from None
        header = 4 + 4 * len(shape)
        payload = math.prod(shape) * dtype.itemsize  # a Python int: no overflow however large the dims
        if payload > max_bytes:
            raise DataError(f"{path}: the IDX header announces shape {shape}, {payload} bytes of data, expected at "
                            f"most max_bytes={max_bytes}; hint: the header is damaged, or pass a larger max_bytes")
        if header + payload > capacity:
            what = f"{path.stat().st_size} {'compressed ' if path.suffix == '.gz' else ''}bytes"
            raise DataError(f"{path}: file truncated: {what} cannot hold the {header + payload} bytes an IDX array "
                            f"of shape {shape} takes; hint: fetch the file again")
        buffer = np.empty(payload, dtype=np.uint8)
        done = _fill(path, stream, memoryview(buffer))
        if done < payload or not _at_end(path, stream):
            what = "truncated" if done < payload else "has trailing bytes"
            got = header + done if done < payload else f"more than {header + payload}"
            raise DataError(f"{path}: file {what}: {got} bytes, expected {header + payload} for an IDX array of shape "
                            f"{shape}; hint: fetch the file again")
    array = buffer.view(dtype).reshape(shape)
    if not dtype.isnative:
        array = array.byteswap(inplace=True).view(dtype.newbyteorder("="))
    return array
