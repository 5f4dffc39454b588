"""Fuzzing the checkpoint loader: mutated real checkpoints load correctly or raise ``CheckpointError``.

The contract (``tests/fuzzing.py``): for every mutant of a real checkpoint (a bit flip, a
truncation, an insertion, an overwritten range), ``Model.load_params`` either loads exactly
the saved weights, epoch and history (the mutation hit unused bytes) or raises an error of the
project's hierarchy naming the file — never another exception, never slower than
``HANG_SECONDS``, and after a failed load the model is unchanged (weights, epoch, history).
The reader runs in a child process under ``MEMORY_BOUND`` of address space. Inputs that once
broke the loader are replayed from ``tests/fuzz_corpus/checkpoint``.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from fit_helper import datasets, mlp, weights
from fuzzing import HANG_SECONDS, corpus, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import ngraph_core as ng
from neon import checkpoint_file
from neon.callbacks import History
from neon.costs import CrossEntropyMulti
from neon.optimizers import GradientDescentMomentum
from neon.saving import CheckpointError, read_checkpoint

MEMORY_BOUND = 1 << 30  # the reader's address-space limit for a file under 128 MiB (checkpoint_file.MEMORY_FLOOR)
FUZZ = fuzz_settings(default=25)
pytestmark = pytest.mark.fuzz


@functools.lru_cache(maxsize=1)
def original() -> tuple[bytes, list[np.ndarray], int, dict]:
    """A real checkpoint of a tiny MLP after one epoch: its bytes, weights, epoch and history."""
    train, _ = datasets()
    model = mlp(hidden=4)
    model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), 1, progress=False)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tiny.h5"
        model.save_params(path)
        return path.read_bytes(), weights(model), model.epoch, model.history.as_dict()


@functools.lru_cache(maxsize=1)
def target() -> tuple[object, list[np.ndarray]]:
    """One fresh model of the same architecture (other initial weights), reused: its initial weights."""
    model = mlp(hidden=4, seed=5)
    model.build((4,))
    return model, weights(model)


def check_contract(data: bytes) -> str:
    """Load ``data`` into the fresh model; ``"ok"`` or ``"typed"``; fail on anything else. Resets the model."""
    model, initial = target()
    saved, saved_weights, saved_epoch, saved_history = original()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutant.h5"
        path.write_bytes(data)
        start = time.perf_counter()
        try:
            model.load_params(path)
            outcome = "ok"
        except ng.NgraphError as exc:
            assert str(path) in str(exc), exc
            outcome = "typed"
        elapsed = time.perf_counter() - start
    assert elapsed < HANG_SECONDS, f"{elapsed:.1f} s"
    if outcome == "ok":  # the mutation hit bytes the file does not use: exactly what was saved
        for a, b in zip(weights(model), saved_weights, strict=True):
            np.testing.assert_array_equal(a, b)
        assert model.epoch == saved_epoch and model.history.as_dict() == saved_history
        for var, value in zip(model.variables, initial, strict=True):
            model.transformer.write_variable(var, value)
        model.epoch, model.history = 0, History()
    else:  # nothing was written
        for a, b in zip(weights(model), initial, strict=True):
            np.testing.assert_array_equal(a, b)
        assert model.epoch == 0 and model.history.as_dict() == {"epoch": []}
    return outcome


@FUZZ
@given(st.data())
def test_bit_flips(data: st.DataObject) -> None:
    saved = original()[0]
    position = data.draw(st.integers(0, len(saved) - 1))
    mutant = bytearray(saved)
    mutant[position] ^= 1 << data.draw(st.integers(0, 7))
    check_contract(bytes(mutant))


@FUZZ
@given(st.data())
def test_truncations(data: st.DataObject) -> None:
    saved = original()[0]
    check_contract(saved[: data.draw(st.integers(0, len(saved) - 1))])


@FUZZ
@given(st.data())
def test_insertions(data: st.DataObject) -> None:
    saved = original()[0]
    position = data.draw(st.integers(0, len(saved)))
    check_contract(saved[:position] + data.draw(st.binary(min_size=1, max_size=16)) + saved[position:])


@FUZZ
@given(st.data())
def test_overwritten_ranges(data: st.DataObject) -> None:
    saved = original()[0]
    position = data.draw(st.integers(0, len(saved) - 1))
    patch = data.draw(st.binary(min_size=1, max_size=64))
    check_contract(saved[:position] + patch + saved[position + len(patch):])


def test_the_unmutated_checkpoint_loads() -> None:
    assert check_contract(original()[0]) == "ok"


@pytest.mark.parametrize("path", corpus("checkpoint"), ids=lambda p: p.name)
def test_saved_inputs_that_once_broke_the_loader(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_file, "READ_TIMEOUT", 3.0)  # some once hung: fail them fast
    with pytest.raises(CheckpointError, match=path.name):
        read_checkpoint(path)
    assert check_contract(path.read_bytes()) == "typed"


def test_a_hostile_megabyte_stays_under_the_memory_bound(tmp_path: Path) -> None:
    """A 1 MB file whose dataset claims 2**40 elements: refused before any data is read, in bounded memory."""
    import h5py

    path = tmp_path / "huge.h5"
    checkpoint_file.write_checkpoint(path, checkpoint_file.CheckpointData(params={"a/W": np.zeros(3, np.float32)}))
    with h5py.File(path, "r+") as f:
        f["params"].create_dataset("b", shape=(2**40,), dtype=np.float32, chunks=(1 << 16,), fillvalue=1.0)
        f["params/b"].attrs["crc32"] = 0
        f["pad"] = np.zeros(1 << 17)  # 1 MiB of bytes the reader does not read
    # read in a fresh process whose only child is the reader: RUSAGE_CHILDREN is the largest child a
    # process ever waited for, and this test process may have run many (recipe scripts, kernels...)
    probe = ("import resource, sys\nfrom neon.saving import CheckpointError, read_checkpoint\n"
             "try:\n    read_checkpoint(sys.argv[1])\nexcept CheckpointError as exc:\n    print(exc)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True,
                          timeout=HANG_SECONDS * 2)  # the reader's own time, plus starting Python
    assert done.returncode == 0, done.stderr[-2000:]
    *message, peak = done.stdout.strip().splitlines()
    assert "declares 4398046511104 bytes" in "\n".join(message), done.stdout
    assert 0 < int(peak) < MEMORY_BOUND, peak
