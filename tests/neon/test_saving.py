"""Checkpoints: save -> load round trip, keys, validation errors naming file and key, damage, atomic writes,
nothing written by a failed load, saving under faults, a reader that cannot crash or hang the process."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
from fit_helper import blobs, datasets, mlp, weights

from neon import checkpoint_file
from neon.atomic_files import HOST
from neon.costs import CrossEntropyMulti
from neon.optimizers import GradientDescentMomentum
from neon.saving import CheckpointData, CheckpointError, read_checkpoint, variable_keys, write_checkpoint


def trained(epochs: int = 2, **kwargs):
    train, _ = datasets()
    model = mlp(**kwargs)
    model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), epochs, progress=False)
    return model


def test_save_then_load_gives_identical_predictions(tmp_path: Path) -> None:
    model = trained()
    path = tmp_path / "model.h5"
    model.save_params(path)
    X, _ = blobs(45, seed=1)
    fresh = mlp(seed=7)  # other initial weights; built in the same process, so other generated names
    fresh.load_params(path)  # an unbuilt model is built from the input shape the file records
    for a, b in zip(weights(fresh), weights(model), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fresh.predict(X), model.predict(X, batch_size=128))
    assert fresh.epoch == 2 and fresh.history["train_cost"] == model.history["train_cost"]


def test_layout_keys_are_scope_paths_renumbered_per_model(tmp_path: Path) -> None:
    model = trained(depth=2)
    path = tmp_path / "model.h5"
    model.save_params(path)
    with h5py.File(path, "r") as f:
        assert f.attrs["format_version"] == 1 and json.loads(f.attrs["meta"])["epoch"] == 2
        params = []
        f["params"].visititems(lambda k, o: params.append(k) if isinstance(o, h5py.Dataset) else None)
        state = []
        f["optimizer"].visititems(lambda k, o: state.append(k) if isinstance(o, h5py.Dataset) else None)
    assert "Sequential_0/Affine_0/Linear_0/W" in params and "Sequential_0/Affine_2/Bias_0/b" in params
    assert "GradientDescentMomentum/Sequential_0/Affine_1/Linear_0/W/velocity" in state
    again = mlp(depth=2)  # same architecture, later in the process: same keys
    again.build((4,))
    assert list(variable_keys(again.variables)[0]) == list(variable_keys(model.variables)[0])


def test_a_different_architecture_raises_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    trained(hidden=8).save_params(path)
    wider = mlp(hidden=9)
    with pytest.raises(CheckpointError, match=r"model\.h5: params/Sequential_0/Affine_0/Linear_0/W has shape "
                                              r"\(8, 4\), expected \(9, 4\)"):
        wider.load_params(path)
    deeper = mlp(depth=2)
    with pytest.raises(CheckpointError, match=r"missing params/Sequential_0/Affine_2/"):
        deeper.load_params(path)


def test_a_failed_load_leaves_the_model_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    trained().save_params(path)
    with h5py.File(path, "r+") as f:  # one tensor of the wrong dtype, after a valid one
        data = f["params/Sequential_0/Affine_1/Bias_0/b"][()]
        del f["params/Sequential_0/Affine_1/Bias_0/b"]
        f["params/Sequential_0/Affine_1/Bias_0/b"] = data.astype(np.float64)
        f["params/Sequential_0/Affine_1/Bias_0/b"].attrs["crc32"] = __import__("zlib").crc32(
            data.astype(np.float64).tobytes())
    model = mlp(seed=3)
    model.build((4,))
    before = weights(model)
    with pytest.raises(CheckpointError, match="Bias_0/b has dtype float64, expected float32"):
        model.load_params(path)
    for a, b in zip(before, weights(model)):
        np.testing.assert_array_equal(a, b)


def test_truncated_corrupt_and_foreign_files_raise_checkpoint_error(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    trained().save_params(path)
    good = path.read_bytes()
    for name, data in {
        "truncated.h5": good[: len(good) // 2],
        "header-only.h5": good[:100],
        "empty.h5": b"",
        "text.h5": b"not an hdf5 file\n" * 10,
    }.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CheckpointError, match=name):
            mlp().load_params(tmp_path / name)
    with h5py.File(path, "r") as f:  # flip bytes inside one weight tensor: its checksum catches it
        offset = f["params/Sequential_0/Affine_0/Linear_0/W"].id.get_offset()
    damaged = bytearray(good)
    damaged[offset + 4: offset + 8] = b"\xff\xff\xff\x7f"
    (tmp_path / "flipped.h5").write_bytes(bytes(damaged))
    with pytest.raises(CheckpointError, match="Linear_0/W fails its checksum"):
        mlp().load_params(tmp_path / "flipped.h5")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        mlp().load_params(tmp_path / "missing.h5")


def test_other_formats_and_versions_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    write_checkpoint(path, CheckpointData(params={"a/W": np.zeros(3, np.float32)}, epoch=1, input_shape=(3,)))
    assert read_checkpoint(path).params["a/W"].shape == (3,)
    with h5py.File(path, "r+") as f:
        f.attrs["format_version"] = 99
    with pytest.raises(CheckpointError, match="format version 99, this neon reads version 1"):
        read_checkpoint(path)
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["W"] = np.zeros(3)
    with pytest.raises(CheckpointError, match="not an ngraph-neon checkpoint"):
        read_checkpoint(tmp_path / "other.h5")


def test_a_failed_save_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = trained()
    path = tmp_path / "model.h5"
    model.save_params(path)
    before = path.read_bytes()
    calls = []

    def failing(self, name, *args, **kwargs):
        calls.append(name)
        if len(calls) > 2:
            raise OSError("disk full (simulated)")
        return original(self, name, *args, **kwargs)

    original = h5py.Group.create_dataset
    monkeypatch.setattr(h5py.Group, "create_dataset", failing)
    with pytest.raises(CheckpointError, match="disk full .*previous file, if any, is unchanged"):
        model.save_params(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.h5"]  # no temporary file left behind
    mlp().load_params(path)


# -- issue 18: a failed load writes nothing; saving under faults; a reader that cannot crash or hang us --------
def rewrite_meta(path: Path, **fields: object) -> None:
    """Change fields of a checkpoint's meta attribute, with a matching checksum (a well-formed bad file)."""
    with h5py.File(path, "r+") as f:
        meta = json.dumps({**json.loads(f.attrs["meta"]), **fields})
        f.attrs["meta"] = meta
        f.attrs["meta_crc32"] = zlib.crc32(meta.encode())


@pytest.mark.parametrize("fields, message", [
    ({"history": {"epoch": 5}}, r"history\['epoch'\] is int, expected a list"),
    ({"history": {"epoch": [0, 1], "train_cost": [0.5]}}, r"has 1 values, expected one per epoch \(2\)"),
    ({"history": {"epoch": [0], "train_cost": ["x"]}}, "neither a number nor null"),
    ({"epoch": -3}, "epoch is '-3'"),
    ({"epoch": True}, "epoch is 'True'"),
    ({"input_shape": [4, 0]}, "input_shape size is '0'"),
    ({"model": {"class_name": "x"}}, "model is dict"),
])
def test_a_bad_field_fails_the_load_before_anything_is_written(tmp_path: Path, fields: dict, message: str) -> None:
    path = tmp_path / "model.h5"
    trained().save_params(path)
    rewrite_meta(path, **fields)
    model = mlp(seed=3)
    model.build((4,))
    before = weights(model)
    with pytest.raises(CheckpointError, match=message):
        model.load_params(path)
    for a, b in zip(before, weights(model), strict=True):
        np.testing.assert_array_equal(a, b)
    assert model.epoch == 0


def test_restore_checks_data_built_elsewhere_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    trained().save_params(path)
    data = read_checkpoint(path)
    data.history = {"epoch": 7}  # a bad field given to restore directly (not through read_checkpoint)
    model = mlp(seed=3)
    model.build((4,))
    before = weights(model)
    with pytest.raises(CheckpointError, match="history"):
        model.restore(path, data)
    for a, b in zip(before, weights(model), strict=True):
        np.testing.assert_array_equal(a, b)


def test_rng_is_stored_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    rng = {"transformer": {"seed": 3, "state": [1, 2, 3]}, "data_seed": 7}
    write_checkpoint(path, CheckpointData(params={"a/W": np.ones(2, np.float32)}, rng=rng))
    assert read_checkpoint(path).rng == rng
    with pytest.raises(CheckpointError, match="rng holds values that are not JSON"):
        write_checkpoint(path, CheckpointData(rng={"state": np.zeros(2)}))
    with h5py.File(path, "r+") as f:
        f.attrs["rng"] = "[1, 2]"
        f.attrs["rng_crc32"] = zlib.crc32(b"[1, 2]")
    with pytest.raises(CheckpointError, match="rng is list, expected a dict"):
        read_checkpoint(path)


def test_no_space_left_is_a_checkpoint_error_and_keeps_the_previous_file(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    model = trained()
    path = tmp_path / "model.h5"
    model.save_params(path)
    before = path.read_bytes()

    class FullDisk(io.BytesIO):
        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint_file, "open", lambda *args, **kwargs: FullDisk(), raising=False)
    with pytest.raises(CheckpointError, match="No space left on device; the previous file, if any, is unchanged"):
        model.save_params(path)
    monkeypatch.undo()
    monkeypatch.setattr(checkpoint_file.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(10**9, 10**9, 1000))
    with pytest.raises(CheckpointError, match=r"No space left on device \(about \d+ KiB needed, 0 KiB free\)"):
        model.save_params(path)  # checked before HDF5 meets the full disk
    monkeypatch.undo()
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["model.h5"]


def test_temporaries_of_killed_saves_are_removed_by_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    code = ("import sys, time; from neon.saving import atomic_path\n"
            "with atomic_path(sys.argv[1]) as tmp:\n"
            "    tmp.write_bytes(b'half a checkpoint'); print('ready', flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGKILL)  # kill -9 in the middle of the save
    child.wait()
    orphan = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(orphan) == 1 and f"-{child.pid}-" in orphan[0].name
    live = tmp_path / f".model.h5.{HOST}-{os.getppid()}-abcdefgh.tmp"  # a save in progress elsewhere: kept
    live.write_bytes(b"x")
    old = tmp_path / ".model.h5.k2j4h5g6.tmp"  # an earlier neon's temporary file, an hour old
    old.write_bytes(b"x")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    trained().save_params(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["model.h5", live.name])
    read_checkpoint(path)


@pytest.mark.parametrize("child, message", [
    ("import time; time.sleep(60)", r"reading took more than 1\.0 s and was stopped"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "failed reading this file \\(signal SIGSEGV\\)"),
    ("import sys; sys.exit(1)", r"\(exit status 1\)"),
])
def test_a_reader_that_hangs_or_crashes_is_a_checkpoint_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              child: str, message: str) -> None:
    path = tmp_path / "model.h5"
    write_checkpoint(path, CheckpointData(params={"a/W": np.ones(2, np.float32)}))
    monkeypatch.setattr(checkpoint_file, "_reader_command", lambda *args: [sys.executable, "-c", child])
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match=f"model.h5: .*{message}"):
        read_checkpoint(path, timeout=1.0)
    assert time.perf_counter() - start < 5


def test_a_file_needing_more_memory_than_the_limit_is_a_checkpoint_error(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    write_checkpoint(path, CheckpointData(params={"a/W": np.ones(2, np.float32)}))
    with h5py.File(path, "r+") as f:  # 256 MiB of zeros, gzipped to a few hundred KiB
        f["params"].create_dataset("big", data=np.zeros(1 << 26, np.float32), compression="gzip",
                                   compression_opts=9, chunks=(1 << 22,))
        f["params/big"].attrs["crc32"] = zlib.crc32(np.zeros(1 << 26, np.float32))
    with pytest.raises(CheckpointError, match="needs more than the reader's memory limit of 200 MiB"):
        read_checkpoint(path, memory_limit=200 << 20)
    assert read_checkpoint(path).params["big"].shape == (1 << 26,)


def hostile(f: h5py.File, tmp_path: Path) -> dict[str, object]:
    """Structures a checkpoint never has, each added to a valid file: name -> how to add it."""
    return {
        "external link": lambda: f["params"].__setitem__("x", h5py.ExternalLink(str(tmp_path / "o.h5"), "/W")),
        "soft link": lambda: f["params"].__setitem__("x", h5py.SoftLink("/params/a")),
        "lzf filter": lambda: f["params"].create_dataset("x", data=np.ones(99, np.float32), compression="lzf"),
        "text dtype": lambda: f["params"].create_dataset("x", data=np.array(["a", "b"], dtype=object),
                                                         dtype=h5py.string_dtype()),
        "external storage": lambda: f["params"].create_dataset("x", shape=(4,), dtype=np.float32,
                                                               external=[(str(tmp_path / "raw"), 0, 16)]),
        "virtual dataset": lambda: f["params"].create_virtual_dataset("x", h5py.VirtualLayout((2,), np.float32)),
    }


@pytest.mark.parametrize("kind, message", [
    ("external link", "ExternalLink; checkpoints hold only hard links"),
    ("soft link", "SoftLink; checkpoints hold only hard links"),
    ("lzf filter", "uses HDF5 filter"),
    ("text dtype", "expected a plain numeric dtype"),
    ("external storage", "keeps its data in external files"),
    ("virtual dataset", "is a virtual dataset"),
])
def test_structures_a_checkpoint_never_has_are_refused(tmp_path: Path, kind: str, message: str) -> None:
    path = tmp_path / "model.h5"
    (tmp_path / "raw").write_bytes(bytes(16))
    write_checkpoint(path, CheckpointData(params={"a": np.ones(2, np.float32)}))
    with h5py.File(path, "r+") as f:
        hostile(f, tmp_path)[kind]()
        if "x" in f["params"] and isinstance(f["params"].get("x", getlink=True), h5py.HardLink):
            f["params/x"].attrs["crc32"] = 0
    with pytest.raises(CheckpointError, match=f"model.h5: params/x .*{message}|model.h5: x is a .*{message}"):
        read_checkpoint(path)


# -- deep JSON: metadata nested 980 deep parses at the top of a fresh process but not 30+ frames down ------------
def call_deep(frames: int, call):
    return call() if frames == 0 else call_deep(frames - 1, call)


def test_metadata_nested_980_deep_is_a_checkpoint_error_from_deep_in_the_stack(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    trained().save_params(path)
    with h5py.File(path, "r+") as f:  # the text is written as is: json.dumps of a 980-deep value would recurse
        meta = json.loads(f.attrs["meta"])
        text = json.dumps({**meta, "model": "NEST"}).replace('"NEST"', "[" * 980 + "]" * 980)
        f.attrs["meta"] = text
        f.attrs["meta_crc32"] = zlib.crc32(text.encode())
    with pytest.raises(CheckpointError, match=r"model.h5: the meta attribute nests 98\d levels deep, expected at "
                                              r"most 128"):
        call_deep(120, lambda: read_checkpoint(path))


def test_the_parent_decodes_the_readers_output_without_recursing(tmp_path: Path) -> None:
    """Even if the child passed a 980-deep value (as it once did), the parent's decode is a CheckpointError."""
    (tmp_path / "result.json").write_text('{"epoch": 1, "history": {}, "input_shape": null, "names": [], "rng": {}, '
                                          '"model": ' + "[" * 980 + "]" * 980 + "}")
    with pytest.raises(CheckpointError, match=r"the checkpoint reader's output: expected at most max_depth=128 "
                                              r"levels of nesting, received 98\d; hint"):
        call_deep(120, lambda: checkpoint_file._collect(tmp_path / "m.h5", tmp_path, 0))
    (tmp_path / "error.json").write_text("[" * 980)
    with pytest.raises(CheckpointError, match="error report: expected at most max_depth=4"):
        failure = checkpoint_file.reader.EXIT_FAILURE
        call_deep(120, lambda: checkpoint_file._collect(tmp_path / "m.h5", tmp_path, failure))
