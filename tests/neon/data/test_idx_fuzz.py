"""Fuzzing ``read_idx``: mutated IDX files, raw and gzip, end in a correct array or a ``DataError``.

The contract (``tests/fuzzing.py``): for every input, ``read_idx`` returns the array the
header describes (its shape, its bytes) or raises an error of the project's hierarchy
(``ng.NgraphError``); never another exception, never slower than ``HANG_SECONDS``, never
more memory than the file can hold (1,032x its size when gzipped, its size when raw) plus
2 MiB. Saved inputs that once broke the reader are replayed from ``tests/fuzz_corpus/idx``.
"""

from __future__ import annotations

import gzip
import struct
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from fuzzing import HANG_SECONDS, corpus, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import ngraph_core as ng
from neon.data import DataError, read_idx
from neon.data.idx import IDX_TYPES, MAX_DEFLATE_RATIO

SLACK = 2 << 20  # buffers, chunks and numpy's bookkeeping on top of what the file holds


def idx_file(array: np.ndarray, code: int) -> bytes:
    """``array`` as an IDX file of type ``code``."""
    header = struct.pack(">HBB", 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(IDX_TYPES[code]).tobytes()


rng = np.random.default_rng(0)
SEEDS = [idx_file(rng.integers(0, 256, (3, 4, 5)), 0x08), idx_file(rng.integers(0, 10, 17), 0x08),
         idx_file(rng.integers(-300, 300, (2, 6)), 0x0B), idx_file(rng.standard_normal(9), 0x0D),
         idx_file(rng.standard_normal((2, 2)), 0x0E), idx_file(np.zeros((0, 3)), 0x0C)]


def expected_array(data: bytes) -> np.ndarray:
    """What a correct reader returns for well-formed ``data`` (used to check successes)."""
    code, dims = data[2], data[3]
    shape = struct.unpack(f">{dims}I", data[4:4 + 4 * dims])
    return np.frombuffer(data, IDX_TYPES[code], offset=4 + 4 * dims).reshape(shape)


def check_contract(path: Path, plain: bytes | None) -> str:
    """Read ``path`` once; ``"ok"`` or ``"typed"``; fail the test on anything else.

    Args:
        path: the file to read.
        plain: its decompressed bytes when known (to check a success), else None.
    """
    tracemalloc.start()
    start = time.perf_counter()
    try:
        array = read_idx(path)
        outcome = "ok"
    except ng.NgraphError as exc:
        assert isinstance(exc, DataError) and str(path) in str(exc), exc
        outcome = "typed"
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    size = path.stat().st_size
    assert elapsed < HANG_SECONDS, f"{path}: {elapsed:.1f} s"
    assert peak <= size * (MAX_DEFLATE_RATIO if path.suffix == ".gz" else 1) + SLACK, f"{path}: {peak} bytes"
    if outcome == "ok" and plain is not None:
        np.testing.assert_array_equal(array, expected_array(plain))
        assert array.dtype.isnative
    return outcome


def mutate(data: bytes, draw: st.DrawFn) -> bytes:
    """One mutation: a bit flip, a truncation, an insertion, a header field set to any value, or a splice."""
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "header", "dim", "splice"]))
    at = draw(st.integers(0, len(data)))
    if kind == "flip" and at < len(data):
        return data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=64)) + data[at:]
    if kind == "header":  # the magic's four bytes: zero bytes, type code, ndim
        field = draw(st.integers(0, 3))
        return data[:field] + bytes([draw(st.integers(0, 255))]) + data[field + 1:]
    if kind == "dim" and len(data) >= 8:
        slot = 4 + 4 * draw(st.integers(0, max(0, min(data[3], (len(data) - 8) // 4))))
        value = draw(st.sampled_from([0, 1, 2, 2**31, 2**32 - 1]) | st.integers(0, 2**32 - 1))
        return data[:slot] + struct.pack(">I", value) + data[slot + 4:]
    return data[:at] + draw(st.binary(max_size=32)) + data[draw(st.integers(0, len(data))):]


@st.composite
def mutants(draw: st.DrawFn) -> bytes:
    """A seed file after one to three mutations, or random bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=256))
    data = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        data = mutate(data, draw)
    return data


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("idx_fuzz")


@pytest.mark.fuzz
@fuzz_settings(150)
@given(data=mutants())
def test_raw_idx_ends_in_a_result_or_a_data_error(folder: Path, data: bytes) -> None:
    (folder / "f.idx").write_bytes(data)
    check_contract(folder / "f.idx", data)


@pytest.mark.fuzz
@fuzz_settings(150)
@given(data=mutants(), damage_stream=st.booleans(), draw=st.data())
def test_gzip_idx_ends_in_a_result_or_a_data_error(folder: Path, data: bytes, damage_stream: bool,
                                                   draw: st.DataObject) -> None:
    packed = gzip.compress(data, mtime=0)
    if damage_stream:  # mutate the compressed bytes: the gzip layer's own errors
        packed = draw.draw(st.composite(lambda d: mutate(packed, d))())
    (folder / "f.idx.gz").write_bytes(packed)
    check_contract(folder / "f.idx.gz", None if damage_stream else data)


def test_seeds_read_back_exactly(folder: Path) -> None:
    for i, data in enumerate(SEEDS):
        (folder / f"seed{i}.gz").write_bytes(gzip.compress(data))
        (folder / f"seed{i}").write_bytes(data)
        assert check_contract(folder / f"seed{i}", data) == check_contract(folder / f"seed{i}.gz", data) == "ok"


@pytest.mark.parametrize("path", corpus("idx"), ids=lambda p: p.name)
def test_saved_inputs_that_once_broke_the_reader(path: Path) -> None:
    with pytest.raises(DataError):  # every saved input is hostile: none is a valid file
        read_idx(path)
    check_contract(path, None)
