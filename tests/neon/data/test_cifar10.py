"""CIFAR-10 binary loader: files this test writes in the official layout, damaged files, the pickle refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neon.data import CIFAR10_CLASSES, DataError, load_cifar10, read_cifar10_batch

NAMES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
RECORDS = 4  # records per file here; the official files hold 10,000


def record_bytes(images: np.ndarray, labels: np.ndarray) -> bytes:
    """Records as the official files lay them out: a label byte, then the R, G and B planes, row-major."""
    return b"".join(bytes([int(label)]) + image.astype(np.uint8).tobytes() for image, label in zip(images, labels))


def write_cifar(directory: Path, records: int = RECORDS) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    written = {}
    for name in NAMES:
        images, labels = rng.integers(0, 256, (records, 3, 32, 32)), rng.integers(0, 10, records)
        (directory / name).write_bytes(record_bytes(images, labels))
        written[name] = (images, labels)
    (directory / "batches.meta.txt").write_text("\n".join(CIFAR10_CLASSES) + "\n\n")
    return written


def test_reads_the_official_binary_layout(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-bin"
    written = write_cifar(folder)
    (X, y), (Xt, yt) = load_cifar10(folder, records_per_file=RECORDS)
    assert X.shape == (5 * RECORDS, 3, 32, 32) and X.dtype == np.uint8 and y.dtype == np.int64
    assert Xt.shape == (RECORDS, 3, 32, 32)
    np.testing.assert_array_equal(X, np.concatenate([written[name][0] for name in NAMES[:5]]))
    np.testing.assert_array_equal(y, np.concatenate([written[name][1] for name in NAMES[:5]]))
    np.testing.assert_array_equal(Xt, written["test_batch.bin"][0])
    np.testing.assert_array_equal(yt, written["test_batch.bin"][1])


def test_channel_planes_map_to_c_h_w(tmp_path: Path) -> None:
    # one record by hand: the red plane counts 0.., green is 7, blue is 9 except the last pixel
    pixels = np.concatenate([np.arange(1024) % 256, np.full(1024, 7), np.full(1024, 9)]).astype(np.uint8)
    pixels[-1] = 200
    (tmp_path / "one.bin").write_bytes(bytes([3]) + pixels.tobytes())
    X, y = read_cifar10_batch(tmp_path / "one.bin", records=None)
    assert y.tolist() == [3] and X.shape == (1, 3, 32, 32)
    assert X[0, 0, 0, 5] == 5 and X[0, 0, 1, 0] == 32  # row-major within the red plane
    assert X[0, 1].min() == X[0, 1].max() == 7
    assert X[0, 2, 31, 31] == 200 and X[0, 2, 31, 30] == 9


def test_accepts_the_parent_folder_and_scales_on_request(tmp_path: Path) -> None:
    write_cifar(tmp_path / "cifar-10-batches-bin")
    (X, _), _ = load_cifar10(tmp_path, normalize=True, records_per_file=None)
    assert X.dtype == np.float32 and 0.0 <= X.min() and X.max() <= 1.0 and X.max() > 0.9


def test_official_record_count_is_the_default(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    with pytest.raises(DataError, match=r"data_batch_1\.bin: file truncated: 12292 bytes, expected 30730000 "
                                        r"\(10000 records"):
        load_cifar10(tmp_path)


@pytest.mark.parametrize(("damage", "records", "message"), [
    (lambda b: b[:-100], RECORDS, "file truncated: 12192 bytes, expected 12292"),
    (lambda b: b[:-3073], RECORDS, "file truncated"),  # a whole record missing: caught by the count
    (lambda b: b + b"\x00", RECORDS, "has trailing bytes"),
    (lambda b: b[:-100], None, "expected a non-zero multiple of 3073"),
    (lambda b: b"", None, "0 bytes, expected a non-zero multiple"),
])
def test_truncated_files_raise_data_error_naming_the_file(tmp_path: Path, damage, records, message: str) -> None:
    write_cifar(tmp_path)
    target = tmp_path / "data_batch_3.bin"
    target.write_bytes(damage(target.read_bytes()))
    with pytest.raises(DataError, match=message) as info:
        load_cifar10(tmp_path, records_per_file=records)
    assert str(target) in str(info.value)


def test_label_out_of_range_names_file_and_record(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    target = tmp_path / "test_batch.bin"
    data = bytearray(target.read_bytes())
    data[2 * 3073] = 10  # record 2's label byte
    target.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"label 10 in record 2 .*expected a class 0-9") as info:
        load_cifar10(tmp_path, records_per_file=RECORDS)
    assert str(target) in str(info.value)


def test_missing_file_and_missing_folder(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    (tmp_path / "data_batch_4.bin").unlink()
    with pytest.raises(DataError, match=r"missing file .*data_batch_4\.bin.*never downloads"):
        load_cifar10(tmp_path, records_per_file=RECORDS)
    with pytest.raises(DataError, match="not a directory"):
        load_cifar10(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no data_batch_1\.bin in .*empty"):
        load_cifar10(tmp_path / "empty")


@pytest.mark.parametrize("nested", [False, True])
def test_python_pickle_version_is_refused_never_unpickled(tmp_path: Path, nested: bool) -> None:
    folder = tmp_path / "cifar-10-batches-py" if nested else tmp_path
    folder.mkdir(exist_ok=True)
    # a file that would run code if unpickled: the loader must refuse without opening it
    for name in ("data_batch_1", "test_batch", "batches.meta"):
        (folder / name).write_bytes(b"cos\nsystem\n(S'echo pwned'\ntR.")
    with pytest.raises(DataError, match="python version of CIFAR-10 .*refuses.*unpickling.*cifar-10-binary.tar.gz"):
        load_cifar10(tmp_path)


def test_bad_records_per_file_argument(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="records_per_file must be an int >= 1 or None"):
        load_cifar10(tmp_path, records_per_file=0)
