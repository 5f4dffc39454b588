"""Loaders are bounded before they allocate: decompression bombs, absurd headers, huge images; 16-bit PNGs."""

from __future__ import annotations

import gzip
import struct
import time
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from neon.data import DataError, read_cifar10_batch, read_idx, read_image
from neon.data.idx import read_bytes


def peak_bytes(fn, *args, **kwargs) -> int:
    """The tracemalloc peak of ``fn(*args, **kwargs)`` (which must raise ``DataError``)."""
    tracemalloc.start()
    try:
        with pytest.raises(DataError):
            fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_bomb_is_never_inflated_past_the_header(tmp_path: Path) -> None:
    bomb = tmp_path / "labels.gz"  # 10 labels announced, 64 MiB of zeros behind them: ~64 KB on disk
    bomb.write_bytes(gzip.compress(struct.pack(">HBBI", 0, 8, 1, 10) + bytes(64 << 20), 9))
    start = time.perf_counter()
    assert peak_bytes(read_idx, bomb) < 1 << 20
    assert time.perf_counter() - start < 10.0  # a hang guard; the memory bound above is the real check


def test_headers_announcing_absurd_sizes_are_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "a.idx"
    path.write_bytes(struct.pack(">HBB2I", 0, 8, 2, 65536, 65536) + bytes(64))  # 2**32 items
    with pytest.raises(DataError, match=r"shape \(65536, 65536\), 4294967296 bytes of data, expected at most "
                                        r"max_bytes=2147483648"):
        read_idx(path)
    path.write_bytes(struct.pack(">HBBI", 0, 0x0E, 1, 1000) + bytes(64))
    with pytest.raises(DataError, match="file truncated: 72 bytes cannot hold the 8008 bytes"):
        read_idx(path)
    with pytest.raises(DataError, match="8000 bytes of data, expected at most max_bytes=100"):
        read_idx(path, max_bytes=100)
    gz = tmp_path / "a.idx.gz"  # 2 GiB - 1 announced by a 36-byte file: DEFLATE cannot hold that much
    gz.write_bytes(gzip.compress(struct.pack(">HBBI", 0, 8, 1, 2**31 - 1)))
    assert peak_bytes(read_idx, gz) < 1 << 20
    path.write_bytes(struct.pack(">HBB", 0, 8, 40) + struct.pack(">40I", *[1] * 40) + b"\x01")
    with pytest.raises(DataError, match="40 dimensions, expected at most 32"):
        read_idx(path)
    with pytest.raises(DataError, match="max_bytes must be an int >= 0"):
        read_idx(path, max_bytes=-1)


def test_headerless_files_are_read_up_to_a_limit(tmp_path: Path) -> None:
    bomb = tmp_path / "data_batch_1.bin.gz"
    bomb.write_bytes(gzip.compress(bytes(64 << 20), 9))
    assert peak_bytes(read_cifar10_batch, bomb, records=1) < 1 << 20  # stops at one record and a byte
    assert peak_bytes(read_cifar10_batch, bomb, records=None, max_bytes=3073 * 10) < 1 << 20
    with pytest.raises(DataError, match="records take 30730000000 bytes, expected at most max_bytes"):
        read_cifar10_batch(bomb, records=10_000_000)
    with pytest.raises(DataError, match="records must be an int >= 1 or None"):
        read_cifar10_batch(bomb, records=0)
    with pytest.raises(DataError, match="more than 1000 bytes of data"):
        read_bytes(bomb, 1000)
    assert read_bytes(bomb, 64 << 20) == bytes(64 << 20)


def png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header announces ``width`` x ``height`` grey pixels, with one tiny compressed row."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(width + 1)))
                     + chunk(b"IEND", b""))


def test_a_decompression_bomb_image_is_refused_from_its_header(tmp_path: Path) -> None:
    png_header_only(tmp_path / "bomb.png", 30_000, 30_000)  # 900 M pixels, Pillow's own limit refuses it
    with pytest.raises(DataError, match=r"bomb\.png: cannot decode the image: DecompressionBombError"):
        read_image(tmp_path / "bomb.png")
    png_header_only(tmp_path / "big.png", 5_000, 5_000)  # 25 M pixels: under Pillow's limit, over ours
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"big\.png: an image of 5000x5000 pixels, expected at most "
                                        "max_pixels=1000000"):
        read_image(tmp_path / "big.png", max_pixels=1_000_000)
    assert time.perf_counter() - start < 10.0  # refused from the header: a hang guard, not a speed test
    with pytest.raises(DataError, match="max_pixels must be a positive int"):
        read_image(tmp_path / "big.png", max_pixels=0)


def test_a_16_bit_png_keeps_its_values_scaled_to_0_255(tmp_path: Path) -> None:
    gradient = np.linspace(0, 65535, 12 * 20).round().astype(np.uint16).reshape(12, 20)
    Image.fromarray(gradient).save(tmp_path / "deep.png")
    with Image.open(tmp_path / "deep.png") as image:
        assert image.mode.startswith("I")  # Pillow kept all 16 bits
    expected = np.round(gradient / 257).astype(np.uint8)
    grey = read_image(tmp_path / "deep.png", mode="L")
    np.testing.assert_array_equal(grey[0], expected)
    assert len(np.unique(grey)) > 200  # a gradient, not {0, 255}
    rgb = read_image(tmp_path / "deep.png")
    assert rgb.shape == (3, 12, 20) and all(np.array_equal(c, expected) for c in rgb)
    small = read_image(tmp_path / "deep.png", mode="L", size=(6, 10))
    assert small.shape == (1, 6, 10) and 0 < small.mean() < 255
    eight = tmp_path / "eight.png"  # the same picture at 8 bits loads the same
    Image.fromarray(expected).save(eight)
    np.testing.assert_array_equal(read_image(eight, mode="L"), grey)
