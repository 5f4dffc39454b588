"""``load_model``: a whole Model rebuilt from a ``save_params`` file predicts exactly what the saved one did;
checkpoints it cannot rebuild fail with a ``CheckpointError`` naming the file and saying what to do."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
from fit_helper import blobs, datasets, mlp

import neon
from neon.activations import Rectlin, Softmax
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator, SequenceIterator
from neon.initializers import GlorotUniform
from neon.layers import LSTM, Affine, Conv, Dropout, Layer, LookupTable, Pool
from neon.loading import load_model
from neon.metrics import LogLoss
from neon.model import Model
from neon.optimizers import Adam, GradientDescentMomentum
from neon.saving import CheckpointData, CheckpointError, write_checkpoint


def saved_mlp(path: Path, epochs: int = 2) -> Model:
    train, _ = datasets()
    model = mlp(hidden=8, depth=2)
    model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), epochs, progress=False)
    model.save_params(path)
    return model


def test_a_loaded_mlp_predicts_exactly_what_the_saved_one_did(tmp_path: Path) -> None:
    model = saved_mlp(tmp_path / "mlp.h5")
    loaded = load_model(tmp_path / "mlp.h5")
    X, _ = blobs(45, seed=1)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.epoch == 2 and loaded.history["train_cost"] == model.history["train_cost"]
    assert loaded.input_shape == (4,) and loaded.input_kind == "dense" and loaded.optimizer is None
    assert [type(layer).__name__ for layer in loaded.layers] == ["Affine", "Affine", "Affine"]
    assert [layer.nout for layer in loaded.layers] == [8, 8, 3]
    assert neon.load_model is load_model  # re-exported at the top of the package


def test_a_loaded_model_trains_on_from_the_saved_weights(tmp_path: Path) -> None:
    saved_mlp(tmp_path / "mlp.h5", epochs=1)
    loaded = load_model(tmp_path / "mlp.h5")
    train, valid = datasets()
    before = loaded.eval(valid, LogLoss())
    loaded.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), 4, initial_epoch=1,
               progress=False)
    assert loaded.epoch == 4 and len(loaded.history["train_cost"]) == 4  # the saved epoch, then 3 more
    assert loaded.eval(valid, LogLoss()) < before


def test_conv_batchnorm_dropout_round_trip_keeps_running_averages(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((48, 64)).astype(np.float32)
    y = (X[:, :32].sum(axis=1) > 0).astype(np.int64)
    data = ArrayIterator(X, y, nclass=2, batch_size=16, lshape=(1, 8, 8))
    model = Model([Conv((3, 3, 4), init=GlorotUniform(seed=1), activation=Rectlin(), batch_norm=True),
                   Pool((2, 2)), Dropout(keep=0.5, seed=3), Affine(2, GlorotUniform(seed=2), activation=Softmax())])
    model.fit(data, CrossEntropyMulti(), Adam(0.01), 2, progress=False)
    model.save_params(tmp_path / "cnn.h5")
    loaded = load_model(tmp_path / "cnn.h5")
    assert loaded.input_shape == (1, 8, 8) and len(loaded.variables) == len(model.variables)
    for a, b in zip(loaded.variables, model.variables, strict=True):  # running mean/var included
        np.testing.assert_array_equal(loaded.transformer.read_variable(a), model.transformer.read_variable(b))
    np.testing.assert_array_equal(loaded.predict(X[:10]), model.predict(X[:10]))


def test_a_token_sequence_model_is_rebuilt_for_tokens(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    seqs = [rng.integers(1, 20, int(rng.integers(3, 9))) for _ in range(32)]
    y = np.array([int((s == 3).any()) for s in seqs])
    data = SequenceIterator(seqs, y, nclass=2, batch_size=16)
    model = Model([LookupTable(20, 8), LSTM(8), Affine(2, activation=Softmax())])
    model.fit(data, CrossEntropyMulti(), Adam(0.03), 1, progress=False)
    model.save_params(tmp_path / "seq.h5")
    loaded = load_model(tmp_path / "seq.h5")
    assert loaded.input_kind == "tokens"
    np.testing.assert_array_equal(loaded.get_outputs(data), model.get_outputs(data))


def write_meta(path: Path, model: list, input_shape: tuple[int, ...] | None = (4,)) -> Path:
    write_checkpoint(path, CheckpointData(model=model, input_shape=input_shape))
    return path


@pytest.mark.parametrize(("owner", "hint"), [("GAN", "gan.load_params"), ("Seq2Seq", "Seq2Seq(...).load_params"),
                                             ("CharLM", "CharLM(...).load_params")])
def test_checkpoints_of_other_owners_say_how_to_load_them(tmp_path: Path, owner: str, hint: str) -> None:
    path = write_meta(tmp_path / "other.h5", [{"class_name": owner, "noise_dim": 4}])
    with pytest.raises(CheckpointError, match=rf"other\.h5: expected a Model checkpoint, received one written by "
                                              rf"{owner}; hint: .*{hint.replace('(', '[(]').replace(')', '[)]')}"):
        load_model(path)


@pytest.mark.parametrize(("model", "message"), [
    ([], "expected the layers' config as the first model record, received no model record"),
    ([["Affine"]], "expected the layers' config as the first model record, received a list"),
    ([{"class_name": "Affine"}], "the Affine layers were saved without their config"),
    ([{"class_name": "Nonexistent", "config": {}}], "expected a layer class as the top layer, received 'Nonexistent'"),
    ([{"class_name": "Affine", "config": {"nout": "many"}}], "the saved layer configs do not rebuild"),
])
def test_records_that_cannot_rebuild_a_model_are_checkpoint_errors(tmp_path: Path, model: list, message: str) -> None:
    with pytest.raises(CheckpointError, match="bad.h5: " + message.replace("(", "[(]").replace(")", "[)]")):
        load_model(write_meta(tmp_path / "bad.h5", model))


def test_an_unknown_input_kind_or_no_input_shape_is_reported(tmp_path: Path) -> None:
    layers = {"class_name": "Affine", "config": {"nout": 3}}
    with pytest.raises(CheckpointError, match=r"expected an input kind among \('dense', 'frames', 'tokens'\), "
                                              r"received 'pictures'"):
        load_model(write_meta(tmp_path / "kind.h5", [layers, {"input_kind": "pictures"}]))
    with pytest.raises(CheckpointError, match="records no input shape.*hint: build the model yourself"):
        load_model(write_meta(tmp_path / "shape.h5", [layers], input_shape=None))


def test_weights_that_do_not_fit_the_rebuilt_layers_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "mlp.h5"
    saved_mlp(path, epochs=1)
    with h5py.File(path, "r+") as f:  # claim wider layers than the weights hold (meta's checksum kept right)
        meta = json.loads(f.attrs["meta"])
        meta["model"][0]["config"]["layers"][0]["config"]["nout"] = 9
        text = json.dumps(meta)
        f.attrs["meta"] = text
        f.attrs["meta_crc32"] = zlib.crc32(text.encode())
    with pytest.raises(CheckpointError, match=r"mlp.h5: params/Sequential_0/Affine_0/Linear_0/W has shape \(8, 4\), "
                                              r"expected \(9, 4\)"):
        load_model(path)


def test_a_missing_or_damaged_file_is_a_checkpoint_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="missing.h5: no such checkpoint file"):
        load_model(tmp_path / "missing.h5")
    (tmp_path / "junk.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(CheckpointError, match="junk.h5: not an HDF5 file"):
        load_model(tmp_path / "junk.h5")


def test_custom_objects_supply_layer_classes_by_name(tmp_path: Path) -> None:
    class Doubler(Layer):
        def call(self, x):
            return x * 2.0

    model = Model([Affine(3, GlorotUniform(seed=0)), Doubler()])
    X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    expected = model.predict(X)
    model.save_params(tmp_path / "custom.h5")
    loaded = load_model(tmp_path / "custom.h5", custom_objects={"Doubler": Doubler})
    assert type(loaded.layers[1]) is Doubler
    np.testing.assert_array_equal(loaded.predict(X), expected)
