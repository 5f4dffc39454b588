"""Checkpoints: save -> load round trip, keys, validation errors naming file and key, damage, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from fit_helper import blobs, datasets, mlp, weights

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
