"""``read_idx``: the IDX file format of the MNIST distribution, raw or gzip-compressed, fully validated.

The format (yann.lecun.com/exdb/mnist): a 4-byte magic number — two zero bytes, a type code
(0x08 unsigned byte, 0x09 signed byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)
and the number of dimensions — then each dimension as a big-endian uint32, then the data,
big-endian, row-major. A file of any other length than that header announces is rejected:
a truncated download must never be read as data.
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np

from .iterators import DataError

IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_bytes(path: Path) -> bytes:
    """The file's contents, gunzipped when it ends in ``.gz``; a damaged file raises ``DataError``."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise DataError(f"{path}: cannot read the file: {exc}; hint: the file is damaged or incomplete, "
                        "fetch it again") from None


def read_idx(path: str | Path, ndim: int | None = None, type_code: int | None = None) -> np.ndarray:
    """Parse one IDX file (raw, or gzip when the name ends in ``.gz``).

    Args:
        path: the file.
        ndim: the number of dimensions the file must have (None: any).
        type_code: the element type code the file must have (0x08 for MNIST; None: any).

    Returns:
        the array, in native byte order, with the file's dimensions.

    Raises:
        DataError: naming the file — unreadable or damaged gzip, a bad magic number, an
            unexpected type or number of dimensions, or a length that is not what the header
            announces (truncated, or trailing bytes).

    Example:
        >>> labels = read_idx("mnist/train-labels-idx1-ubyte.gz", ndim=1, type_code=0x08)
    """
    path = Path(path)
    data = read_bytes(path)
    if len(data) < 4:
        raise DataError(f"{path}: {len(data)} bytes, too short for an IDX header (expected at least 4); "
                        "hint: the file is truncated")
    zero, code, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or code not in IDX_TYPES:
        raise DataError(f"{path}: bad IDX magic number 0x{data[:4].hex()}: expected 0x0000 then a type code among "
                        f"{sorted(hex(c) for c in IDX_TYPES)} and the number of dimensions; hint: is this an "
                        "IDX file (a gzip file must end in .gz)?")
    if type_code is not None and code != type_code:
        raise DataError(f"{path}: IDX type code 0x{code:02x}, expected 0x{type_code:02x}")
    if ndim is not None and dims != ndim:
        raise DataError(f"{path}: IDX file has {dims} dimension(s), expected {ndim}")
    header = 4 + 4 * dims
    if len(data) < header:
        raise DataError(f"{path}: truncated IDX header: {len(data)} bytes, expected at least {header}")
    shape = struct.unpack(f">{dims}I", data[4:header])
    dtype = np.dtype(IDX_TYPES[code])
    expected = header + math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        what = "truncated" if len(data) < expected else "has trailing bytes"
        raise DataError(f"{path}: file {what}: {len(data)} bytes, expected {expected} for an IDX array of shape "
                        f"{shape}; hint: fetch the file again")
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))
