"""MNIST loaders: the official IDX format (files this test writes, raw and gzip) and the built-in subset."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from neon.data import DataError, load_mnist, load_mnist_subset, read_idx


def idx_bytes(array: np.ndarray, magic: int | None = None) -> bytes:
    """An IDX file as the official distribution writes it: magic, big-endian dims, unsigned bytes."""
    magic = (0x0800 | array.ndim) if magic is None else magic
    return struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(">u1").tobytes()


def write_mnist(directory: Path, n_train: int = 6, n_test: int = 4, gz: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test),
    }
    for name, array in arrays.items():
        data = idx_bytes(array)
        if gz:
            (directory / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (directory / name).write_bytes(data)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist_reads_the_official_format(tmp_path: Path, gz: bool) -> None:
    arrays = write_mnist(tmp_path, gz=gz)
    (X, y), (Xt, yt) = load_mnist(tmp_path)
    assert X.shape == (6, 784) and X.dtype == np.float32 and Xt.shape == (4, 784)
    np.testing.assert_allclose(X * 255, arrays["train-images-idx3-ubyte"].reshape(6, 784), atol=1e-4)
    np.testing.assert_array_equal(y, arrays["train-labels-idx1-ubyte"])
    np.testing.assert_array_equal(yt, arrays["t10k-labels-idx1-ubyte"])
    (X_raw, _), _ = load_mnist(tmp_path, normalize=False)
    assert X_raw.max() > 1


def test_read_idx_keeps_dimensions_and_big_endian_values(tmp_path: Path) -> None:
    data = struct.pack(">I", 0x0B02) + struct.pack(">2I", 2, 3) + np.arange(6, dtype=">i2").tobytes()
    (tmp_path / "a.idx").write_bytes(data)
    array = read_idx(tmp_path / "a.idx")
    np.testing.assert_array_equal(array, np.arange(6).reshape(2, 3))
    assert array.dtype == np.int16 and array.dtype.isnative


@pytest.mark.parametrize(("damage", "message"), [
    (lambda b: b[:-10], "truncated"),
    (lambda b: b[:9], "truncated"),
    (lambda b: b + b"\x00", "trailing bytes"),
    (lambda b: b"\x12\x34" + b[2:], "bad IDX magic number"),
    (lambda b: b[:2] + b"\x0e" + b[3:], "type code 0x0e, expected 0x08"),
    (lambda b: b"", "too short"),
])
def test_damaged_files_raise_data_error_naming_the_file(tmp_path: Path, damage, message: str) -> None:
    write_mnist(tmp_path)
    target = tmp_path / "train-images-idx3-ubyte"
    target.write_bytes(damage(target.read_bytes()))
    with pytest.raises(DataError, match=message) as info:
        load_mnist(tmp_path)
    assert str(target) in str(info.value)


def test_truncated_or_corrupt_gzip_raises_data_error(tmp_path: Path) -> None:
    write_mnist(tmp_path, gz=True)
    target = tmp_path / "t10k-labels-idx1-ubyte.gz"
    target.write_bytes(target.read_bytes()[:-12])
    with pytest.raises(DataError, match="cannot read the file") as info:
        load_mnist(tmp_path)
    assert str(target) in str(info.value)
    target.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=str(target).replace(".", r"\.")):
        load_mnist(tmp_path)


def test_mismatched_counts_and_missing_files(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(5, dtype=int)))
    with pytest.raises(DataError, match="5 labels for the 6 images"):
        load_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(DataError, match="no train-labels-idx1-ubyte .*never downloads"):
        load_mnist(tmp_path)
    with pytest.raises(DataError, match="not a directory"):
        load_mnist(tmp_path / "nowhere")


def test_builtin_subset_is_a_fixed_stratified_split_scaled_to_unit_range() -> None:
    (X, y), (Xt, yt) = load_mnist_subset()
    assert X.shape == (4000, 784) and Xt.shape == (1000, 784)
    assert X.dtype == np.float32 and X.min() == 0.0 and X.max() == 1.0
    np.testing.assert_array_equal(np.bincount(yt, minlength=10), np.full(10, 100))
    np.testing.assert_array_equal(np.bincount(y, minlength=10), np.full(10, 400))
    assert len(set(y[:50].tolist())) > 5  # mixed, not sorted by class
    (X2, y2), (Xt2, yt2) = load_mnist_subset()
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_array_equal(Xt, Xt2)
    with pytest.raises(DataError, match="multiple of 10"):
        load_mnist_subset(n_test=15)
