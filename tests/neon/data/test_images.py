"""Image folders with Pillow: a round trip through PNGs this test writes, resizing, modes and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from neon.data import DataError, load_image_folder, read_image


def write_png(path: Path, pixels: np.ndarray) -> None:
    """``pixels`` (C, H, W) uint8, written losslessly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels.transpose(1, 2, 0) if pixels.shape[0] == 3 else pixels[0]).save(path)


def write_folder(root: Path, per_class: int = 3, size: tuple[int, int] = (6, 5)) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    written: dict[str, list[np.ndarray]] = {}
    for name in ("dog", "cat", "bird"):
        written[name] = [rng.integers(0, 256, (3, *size), dtype=np.uint8) for _ in range(per_class)]
        for i, pixels in enumerate(written[name]):
            write_png(root / name / f"img_{i}.png", pixels)
    return written


def test_round_trip_sorted_classes_and_files(tmp_path: Path) -> None:
    written = write_folder(tmp_path)
    (tmp_path / "cat" / "notes.txt").write_text("not an image, skipped")
    (tmp_path / ".cache").mkdir()  # hidden: not a class
    X, y, classes = load_image_folder(tmp_path)
    assert classes == ["bird", "cat", "dog"]
    assert X.shape == (9, 3, 6, 5) and X.dtype == np.uint8 and y.dtype == np.int64
    np.testing.assert_array_equal(y, [0, 0, 0, 1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(X, np.stack([p for name in classes for p in written[name]]))


def test_chosen_classes_set_the_label_order(tmp_path: Path) -> None:
    written = write_folder(tmp_path)
    X, y, classes = load_image_folder(tmp_path, classes=["dog", "bird"])
    assert classes == ["dog", "bird"] and y.tolist() == [0, 0, 0, 1, 1, 1]
    np.testing.assert_array_equal(X[0], written["dog"][0])


def test_resize_grey_and_other_formats(tmp_path: Path) -> None:
    write_folder(tmp_path, size=(10, 8))
    Image.new("RGBA", (20, 12), (255, 0, 0, 128)).save(tmp_path / "cat" / "wide.PNG")  # other size and alpha
    Image.new("P", (7, 7), 3).save(tmp_path / "dog" / "palette.gif")
    Image.new("RGB", (16, 16), (10, 200, 30)).save(tmp_path / "bird" / "photo.jpg", quality=95)
    X, y, _ = load_image_folder(tmp_path, size=(4, 6))
    assert X.shape == (12, 3, 4, 6) and np.bincount(y).tolist() == [4, 4, 4]
    jpg = X[3]  # bird: 3 PNGs then photo.jpg
    assert np.all(np.abs(jpg.astype(int) - np.array([10, 200, 30])[:, None, None]) <= 3)
    grey, _, _ = load_image_folder(tmp_path, size=(4, 6), mode="L")
    assert grey.shape == (12, 1, 4, 6)
    assert read_image(tmp_path / "cat" / "wide.PNG").shape == (3, 12, 20)


def test_mixed_sizes_need_a_size(tmp_path: Path) -> None:
    write_folder(tmp_path)
    write_png(tmp_path / "dog" / "z_big.png", np.zeros((3, 9, 9), dtype=np.uint8))
    with pytest.raises(DataError, match=r"z_big\.png is 9x9 .* but .* is 6x5; expected one size.*pass size=\(H, W\)"):
        load_image_folder(tmp_path)


@pytest.mark.parametrize("content", [b"definitely not a png", "truncated"])
def test_corrupt_image_names_the_file(tmp_path: Path, content) -> None:
    write_folder(tmp_path)
    target = tmp_path / "cat" / "img_1.png"
    if content == "truncated":
        write_png(target, np.random.default_rng(1).integers(0, 256, (3, 64, 64), dtype=np.uint8))
        content = target.read_bytes()[:300]
    target.write_bytes(content)
    with pytest.raises(DataError, match="cannot decode the image") as info:
        load_image_folder(tmp_path)
    assert str(target) in str(info.value)


def test_empty_folders_and_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="has no class folders"):
        load_image_folder(tmp_path)
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "readme.txt").write_text("x")
    with pytest.raises(DataError, match=r"class 'cat' .* holds no images"):
        load_image_folder(tmp_path)
    with pytest.raises(DataError, match=r"no folder .*dog for class 'dog'"):
        load_image_folder(tmp_path, classes=["dog"])
    with pytest.raises(DataError, match="not a directory"):
        load_image_folder(tmp_path / "nowhere")
    with pytest.raises(DataError, match="size must be"):
        load_image_folder(tmp_path, size=(0, 4))
    with pytest.raises(DataError, match="size must be"):
        load_image_folder(tmp_path, size=32)
    with pytest.raises(DataError, match="mode must be one of"):
        load_image_folder(tmp_path, mode="CMYK")
