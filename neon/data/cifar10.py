"""CIFAR-10: the official *binary* distribution (``cifar-10-batches-bin``) from a local directory.

Nothing here downloads anything, and nothing here unpickles: the "python version" of CIFAR-10
(``cifar-10-batches-py``) is a set of pickles, and unpickling a file runs whatever code it
names, so that version is refused with a hint to fetch the binary one.

The binary format (www.cs.toronto.edu/~kriz/cifar.html): ``data_batch_1.bin`` ...
``data_batch_5.bin`` (training) and ``test_batch.bin``, each 10,000 records of 3,073 bytes —
one label byte (0-9), then the 32x32 red plane, the green plane and the blue plane, each
row-major — so a record reshapes straight to ``(3, 32, 32)``, neon's ``(C, H, W)``.
``batches.meta.txt`` names the classes, one per line (``CIFAR10_CLASSES`` holds the same names).

Pixels come back as ``uint8`` by default: the training set is 150 MB that way and 600 MB as
float32, and ``ImageIterator`` converts and normalizes one batch at a time anyway.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .idx import DEFAULT_MAX_BYTES, read_at_most, read_bytes
from .iterators import DataError

Split = tuple[np.ndarray, np.ndarray]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR10_SHAPE = (3, 32, 32)
RECORD_BYTES = 1 + 3 * 32 * 32  # a label byte, then three 32x32 colour planes
RECORDS_PER_FILE = 10_000
BIN_FOLDER, PY_FOLDER = "cifar-10-batches-bin", "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILES = ("test_batch.bin",)
BINARY_HINT = ("hint: get the binary version, cifar-10-binary.tar.gz, and extract it (tar xzf) to get "
               f"{BIN_FOLDER}/ (this loader never downloads)")


def find_cifar10(path: str | Path) -> Path:
    """The folder holding the binary batches: ``path`` itself, or ``path/cifar-10-batches-bin``.

    Raises:
        DataError: no such folder, or one that holds only the pickled python version.
    """
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise DataError(f"load_cifar10: {directory} is not a directory; expected the {BIN_FOLDER} folder of the "
                        f"CIFAR-10 binary version, or the folder that holds it; {BINARY_HINT}")
    for candidate in (directory, directory / BIN_FOLDER):
        if (candidate / TRAIN_FILES[0]).is_file() or (candidate / TEST_FILES[0]).is_file():
            return candidate
    pickled = [d for d in (directory, directory / PY_FOLDER) if (d / "data_batch_1").is_file()]
    if pickled:
        raise DataError(f"load_cifar10: {pickled[0]} holds the python version of CIFAR-10 (pickle files: "
                        "data_batch_1 ... test_batch), which this loader refuses to read, because unpickling a "
                        f"file can run arbitrary code; expected the binary files {TRAIN_FILES[0]} ... "
                        f"{TEST_FILES[0]}; {BINARY_HINT}")
    raise DataError(f"load_cifar10: no {TRAIN_FILES[0]} in {directory} nor in {directory / BIN_FOLDER}; expected "
                    f"the CIFAR-10 binary version ({', '.join(TRAIN_FILES + TEST_FILES)}); {BINARY_HINT}")


def read_cifar10_batch(path: str | Path, records: int | None = RECORDS_PER_FILE,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> Split:
    """Parse one binary CIFAR-10 batch file.

    Args:
        path: the file, e.g. ``cifar-10-batches-bin/data_batch_1.bin``.
        records: the number of records the file must hold (10,000 in the official files);
            None accepts any whole, non-zero number of records (for small or custom files).
        max_bytes: the largest file to read (2 GiB by default); with ``records``, the file is
            never read past ``records`` records (and one byte, to tell trailing bytes).

    Returns:
        ``(X, y)``: X uint8 ``(n, 3, 32, 32)``, y int64 ``(n,)`` in 0-9.

    Raises:
        DataError: naming the file — missing or unreadable, a size that is not ``records``
            records of 3,073 bytes (truncated, or trailing bytes), more than ``max_bytes``, a
            label outside 0-9.

    Example:
        >>> X, y = read_cifar10_batch("cifar-10-batches-bin/test_batch.bin")
    """
    path = Path(path)
    for what, value in (("records", records), ("max_bytes", max_bytes)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise DataError(f"read_cifar10_batch: {what} must be an int >= 1{' or None' if what == 'records' else ''}, "
                            f"received {value!r}")
    if not path.is_file():
        raise DataError(f"load_cifar10: missing file {path}; expected the CIFAR-10 binary batch there; {BINARY_HINT}")
    if records is not None:
        expected = records * RECORD_BYTES
        if expected > max_bytes:
            raise DataError(f"{path}: {records} records take {expected} bytes, expected at most max_bytes={max_bytes}; "
                            "hint: pass a larger max_bytes")
        data = read_at_most(path, expected + 1)  # one byte more tells trailing bytes, without reading them all
        if len(data) != expected:
            short = len(data) < expected
            what, size = ("truncated", len(data)) if short else ("has trailing bytes", f"more than {expected}")
            raise DataError(f"{path}: file {what}: {size} bytes, expected {expected} ({records} records of "
                            f"{RECORD_BYTES} bytes: a label byte and 3x32x32 pixels); hint: fetch the file again")
    elif not (data := read_bytes(path, max_bytes)) or len(data) % RECORD_BYTES:
        raise DataError(f"{path}: {len(data)} bytes, expected a non-zero multiple of {RECORD_BYTES} (records of a "
                        f"label byte and 3x32x32 pixels); {len(data) % RECORD_BYTES} bytes of a partial record; "
                        "hint: the file is truncated or not a CIFAR-10 binary batch")
    table = np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD_BYTES)
    labels = table[:, 0]
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        raise DataError(f"{path}: label {int(labels[bad[0]])} in record {int(bad[0])} (byte offset "
                        f"{int(bad[0]) * RECORD_BYTES}), expected a class 0-9 ({bad.size} bad record(s)); hint: is "
                        "this a CIFAR-10 binary batch? (CIFAR-100's records have two label bytes)")
    return table[:, 1:].reshape(-1, *CIFAR10_SHAPE).copy(), labels.astype(np.int64)


def _read_split(directory: Path, names: tuple[str, ...], records: int | None, normalize: bool) -> Split:
    parts = [read_cifar10_batch(directory / name, records) for name in names]
    X = np.concatenate([X for X, _ in parts]) if len(parts) > 1 else parts[0][0]
    y = np.concatenate([y for _, y in parts])
    return (X.astype(np.float32) / 255.0 if normalize else X), y


def load_cifar10(path: str | Path, normalize: bool = False,
                 records_per_file: int | None = RECORDS_PER_FILE) -> tuple[Split, Split]:
    """Read CIFAR-10 from the official binary batches in a local directory.

    Args:
        path: the ``cifar-10-batches-bin`` folder, or the folder that holds it.
        normalize: return float32 pixels scaled to [0, 1] (else uint8 0-255, a quarter of the
            memory; ``ImageIterator`` converts and normalizes per batch).
        records_per_file: the records each file must hold: 10,000 in the official files, so a
            truncated file is caught even when it stops at a record boundary; None accepts any
            whole number of records (small or custom files).

    Returns:
        ``(X_train, y_train), (X_test, y_test)``: X ``(n, 3, 32, 32)`` (channels R, G, B),
        y int64 ``(n,)`` with the classes of ``CIFAR10_CLASSES``; 50,000 and 10,000 images.

    Raises:
        DataError: naming the file or folder — no binary batches (with a hint when only the
            pickled python version is there: it is never unpickled), a missing file, a size that
            is not whole records (truncated), a label outside 0-9.

    Example:
        >>> (X_train, y_train), (X_test, y_test) = load_cifar10("~/data/cifar-10-batches-bin")
        >>> X_train.shape, X_train.dtype
        ((50000, 3, 32, 32), dtype('uint8'))
    """
    if records_per_file is not None and (isinstance(records_per_file, bool) or records_per_file < 1):
        raise DataError(f"load_cifar10: records_per_file must be an int >= 1 or None, received {records_per_file!r}")
    directory = find_cifar10(path)
    return (_read_split(directory, TRAIN_FILES, records_per_file, normalize),
            _read_split(directory, TEST_FILES, records_per_file, normalize))
