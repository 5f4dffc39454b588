"""``load_model``: a whole Model rebuilt from a ``save_params`` file predicts exactly what the saved one did;
checkpoints it cannot rebuild fail with a ``CheckpointError`` naming the file and saying what to do."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
from fit_helper import blobs, datasets, mlp
from fuzzing import corpus

import neon
from neon.activations import Logistic, Rectlin, Softmax, Tanh
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator, SequenceIterator
from neon.data.text import Vocabulary
from neon.gan import GAN
from neon.initializers import Constant, GlorotUniform
from neon.layers import LSTM, Affine, Conv, Dropout, Layer, LookupTable, Pool
from neon.metrics import LogLoss
from neon.model import Model, ModelError
from neon.optimizers import Adam, GradientDescentMomentum
from neon.rl import DQNAgent
from neon.rl.replay import Batch
from neon.saving import CheckpointData, CheckpointError, load_model, read_checkpoint, write_checkpoint


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


# -- every model class the project writes loads (they register themselves: TrainingOwner.from_record) --------
def tiny_gan() -> GAN:
    gan = GAN([Affine(4, GlorotUniform(seed=2), activation=Rectlin()),
               Affine(6, GlorotUniform(seed=0), bias=Constant(0.0), activation=Tanh())],
              [Affine(1, GlorotUniform(seed=1), bias=Constant(0.0), activation=Logistic())], noise_dim=3)
    gan.build((6,))
    return gan


def tiny_agent() -> DQNAgent:
    return DQNAgent([Affine(5, activation="relu", bias=Constant(0.0)), Affine(2, bias=Constant(0.0))], obs_shape=(3,),
                    n_actions=2, gamma=0.9, double=False, seed=3)


def test_a_gan_file_loads_as_a_gan_that_generates_the_same_images(tmp_path: Path) -> None:
    gan = tiny_gan()
    gan.save_params(tmp_path / "gan.h5")
    loaded = load_model(tmp_path / "gan.h5")
    assert type(loaded) is GAN and loaded.noise_dim == 3 and loaded.sample_shape == (6,)
    np.testing.assert_array_equal(loaded.generate(4, seed=1), gan.generate(4, seed=1))


def test_a_dqn_file_loads_as_an_agent_with_the_same_q_values_and_settings(tmp_path: Path) -> None:
    agent = tiny_agent()
    agent.updates = 7
    agent.save_params(tmp_path / "dqn.h5")
    loaded = load_model(tmp_path / "dqn.h5")
    assert type(loaded) is DQNAgent and (loaded.gamma, loaded.double, loaded.updates) == (0.9, False, 7)
    obs = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.q_values(obs), agent.q_values(obs))
    batch = Batch(obs, np.array([0, 1, 0, 1]), np.ones(4, np.float32), obs, np.zeros(4, np.float32),
                  np.ones(4, np.float32), np.arange(4))
    assert np.isfinite(loaded.update(batch)[0])  # it trains on (a fresh optimizer state)


@pytest.mark.parametrize("module", ["char_seq2seq", "char_lm"])
def test_character_model_files_load_as_their_class(tmp_path: Path, module: str) -> None:
    from model_zoo.char_lm import CharLM
    from model_zoo.char_seq2seq import Seq2Seq, task_vocabulary

    model = (Seq2Seq(task_vocabulary("reverse"), embedding_dim=4, hidden=8) if module == "char_seq2seq"
             else CharLM(Vocabulary.from_text("to be or not"), embedding_dim=4, hidden=8))
    model.save_params(tmp_path / "char.h5")
    loaded = load_model(tmp_path / "char.h5")
    assert type(loaded) is type(model) and loaded.vocab.tokens == model.vocab.tokens
    for key, var in loaded.checkpoint_keys()[0].items():
        np.testing.assert_array_equal(loaded.transformer.read_variable(var),
                                      model.transformer.read_variable(model.checkpoint_keys()[0][key]))


def test_a_model_class_registers_itself_by_the_name_its_files_record(monkeypatch: pytest.MonkeyPatch) -> None:
    from neon import registry
    from neon.registry import model_class
    from neon.training import TrainingOwner

    monkeypatch.setattr(registry, "_MODEL_CLASSES", dict(registry._MODEL_CLASSES))  # Scorer leaves with the test

    class Scorer(TrainingOwner):
        @classmethod
        def from_record(cls, record, input_shape, **options):
            return cls()

    assert model_class("Scorer") is Scorer and model_class("GAN") is GAN and model_class("DQNAgent") is DQNAgent
    assert model_class("Seq2Seq").__module__ == "model_zoo.char_seq2seq"


def test_an_older_gan_file_without_its_networks_says_how_to_load_it(tmp_path: Path) -> None:
    path = write_meta(tmp_path / "old.h5", [{"class_name": "GAN", "noise_dim": 4}], input_shape=(4,))
    with pytest.raises(CheckpointError, match=r"old\.h5: expected a GAN checkpoint recording its generator's and "
                                              r"discriminator's layer configs.*hint: build the GAN with its generator "
                                              r"and discriminator, then gan.load_params\(path\)"):
        load_model(path)


def edit_record(edit: Callable[[dict], object]) -> Callable[[CheckpointData], None]:
    return lambda data: edit(data.model[0])


def save_and_edit(path: Path, owner: object, edit: Callable[[CheckpointData], object]) -> Path:
    owner.save_params(path)
    data = read_checkpoint(path)
    edit(data)
    write_checkpoint(path, data)
    return path


def seq2seq() -> object:
    from model_zoo.char_seq2seq import Seq2Seq, task_vocabulary

    return Seq2Seq(task_vocabulary("reverse"), embedding_dim=4, hidden=8)


@pytest.mark.parametrize(("owner", "edit", "message"), [
    (tiny_gan, edit_record(lambda r: r.__setitem__("noise_dim", 2**40)),
     r"layer unnamed \(GAN\): expected noise_dim as ints in \[1, 2147483648\], received 1099511627776; nothing was "
     r"built"),
    (tiny_gan, edit_record(lambda r: r["generator"]["config"]["layers"][0]["config"].__setitem__("nout", 2**32)),
     r"layer Affine_0 \(Affine\): expected nout as ints in \[1, 2147483648\], received 4294967296"),
    (tiny_gan, edit_record(lambda r: r["generator"]["config"]["layers"][0]["config"].__setitem__("nout", 2**24)),
     r"params/generator/Affine_0/Linear_0/W has shape \(4, 3\), expected \(16777216, 3\)"),
    (tiny_gan, lambda data: setattr(data, "input_shape", (2**16, 2**16)),
     r"expected an input sample of at most max_elements=2147483648 elements, received input_shape \(65536, 65536\)"),
    (tiny_agent, edit_record(lambda r: r["online"]["config"]["layers"][0]["config"].__setitem__("nout", 2**24)),
     r"params/online/Affine_0/Linear_0/W has shape \(5, 3\), expected \(16777216, 3\)"),
    (tiny_agent, lambda data: setattr(data, "input_shape", (2**31,)),
     r"the configs make variable W of shape \(5, 2147483648\) \(10737418240 elements\), expected at most "
     r"max_elements=2147483648; nothing was allocated"),
    (tiny_agent, edit_record(lambda r: r.__setitem__("n_actions", 2**33)),
     r"expected n_actions as ints in \[1, 2147483648\], received 8589934592"),
    (seq2seq, edit_record(lambda r: r.__setitem__("hidden", 2**31 + 1)),
     r"expected hidden as ints in \[1, 2147483648\], received 2147483649"),
    (seq2seq, edit_record(lambda r: r.__setitem__("hidden", 2**24)),
     r"params/encoder/LSTMCell_0/W_x has shape \(32, 4\), expected \(67108864, 4\)"),
    (seq2seq, edit_record(lambda r: r.__setitem__("vocab", 7)),
     r"expected the record's vocab as a list of strings, received 7"),
], ids=["gan noise_dim", "gan nout=2**32", "gan nout=2**24", "gan sample", "dqn nout", "dqn obs", "dqn n_actions",
        "s2s hidden=2**31+1", "s2s hidden=2**24", "s2s vocab"])
def test_other_model_classes_get_the_same_size_checks(tmp_path: Path, owner: Callable, edit: Callable,
                                                      message: str) -> None:
    path = save_and_edit(tmp_path / "big.h5", owner(), edit)
    with pytest.raises(CheckpointError, match=r"big\.h5: .*" + message):
        load_model(path)
    assert traced_peak(lambda: pytest.raises(CheckpointError, load_model, path)) < 16 << 20


@pytest.mark.parametrize(("model", "message"), [
    ([], "expected the layers' config as the first model record, received no model record"),
    ([["Affine"]], "expected the layers' config as the first model record, received a list"),
    ([{"class_name": "Affine"}], "the Affine layers were saved without their config"),
    ([{"class_name": "Nonexistent", "config": {}}], "expected a layer class as the top layer or a model class among "
                                                    r"\['CharLM', 'CharTransformer', 'DQNAgent', 'GAN', 'Seq2Seq'"),
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


# -- sizes in the layer configs are checked before anything is built (issue: load_model from unchecked sizes) --
def edited_checkpoint(path: Path, edit: Callable[[CheckpointData], object], layers: list[Layer] | None = None,
                      shape: tuple[int, ...] = (4,), kind: str = "dense") -> Path:
    """A checkpoint of a small model (default ``Affine(8), Affine(3)`` on 4 features), its data changed by ``edit``."""
    model = Model(layers or [Affine(8, GlorotUniform(seed=0)), Affine(3, GlorotUniform(seed=1))])
    model.build(shape, kind=kind)
    model.save_params(path)
    data = read_checkpoint(path)
    edit(data)
    write_checkpoint(path, data)
    return path


def set_field(index: int, field: str, value: object) -> Callable[[CheckpointData], None]:
    """An edit setting ``field`` of the top Sequential's ``index``-th layer config."""
    return lambda data: data.model[0]["config"]["layers"][index]["config"].__setitem__(field, value)


def traced_peak(call: Callable[[], object]) -> int:
    """Bytes at the peak of what Python and NumPy allocated while ``call`` ran (the reader child is not counted)."""
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize(("edit", "message"), [
    (set_field(1, "nout", 10**30), r"layer Affine_1 \(Affine\): expected nout as ints in \[1, 2147483648\], "
                                   r"received 1000000000000000000000000000000; nothing was built; hint: "),
    (set_field(1, "nout", 2**32), r"layer Affine_1 \(Affine\): expected nout as ints in \[1, 2147483648\], "
                                  r"received 4294967296; nothing was built"),
    (lambda data: setattr(data, "input_shape", (2**31,)),
     r"layer Sequential_0/Affine_0/Linear_0 \(Linear\): the configs make variable W of shape \(8, 2147483648\) "
     r"\(17179869184 elements\), expected at most max_elements=2147483648; nothing was allocated; hint: "),
    (set_field(1, "nout", 2**24), r"params/Sequential_0/Affine_1/Linear_0/W has shape \(3, 8\), expected "
                                  r"\(16777216, 8\) from the configs of layer Sequential_0/Affine_1/Linear_0 "
                                  r"\(Linear\); nothing was allocated; hint: "),
], ids=["nout=10**30", "nout=2**32", "input_shape=(2**31,)", "nout=2**24"])
def test_oversized_configs_are_checkpoint_errors_before_anything_is_allocated(tmp_path: Path, edit: Callable,
                                                                              message: str) -> None:
    path = edited_checkpoint(tmp_path / "big.h5", edit)
    with pytest.raises(CheckpointError, match=r"big\.h5: " + message):
        load_model(path)
    assert traced_peak(lambda: pytest.raises(CheckpointError, load_model, path)) < 16 << 20


def test_peak_memory_stays_small_for_huge_nout_in_a_fresh_process(tmp_path: Path) -> None:
    """nout=2**24 once reached 1.6 GiB before its CheckpointError; 2**32 (past the field bound, allowed by
    max_elements) builds a 2**35-element W only as a shape. The process's peak RSS stays under 300 MB."""
    small = edited_checkpoint(tmp_path / "n24.h5", set_field(1, "nout", 2**24))
    large = edited_checkpoint(tmp_path / "n32.h5", set_field(1, "nout", 2**32))
    # VmHWM, not ru_maxrss: a forked child's ru_maxrss starts at this (large) test process's RSS
    probe = ("import sys\nfrom neon.checkpoint_reader import peak_rss\nfrom neon.saving import load_model\n"
             "from neon.saving import CheckpointError\n"
             "for path in sys.argv[1:]:\n    try:\n        load_model(path, max_elements=2**40, max_parameters=2**40)\n"
             "    except CheckpointError as exc:\n        print(str(exc).split(';')[0])\n"
             "print(peak_rss() * 1024)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(small), str(large)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second, peak = done.stdout.strip().splitlines()
    assert "has shape (3, 8), expected (16777216, 8)" in first and "expected (4294967296, 8)" in second
    assert int(peak) < 300 << 20, f"peak RSS {int(peak) >> 20} MiB"


@pytest.mark.parametrize(("edit", "message"), [
    (set_field(0, "nout", 9), r"params/Sequential_0/Affine_0/Linear_0/W has shape \(8, 4\), expected \(9, 4\) from "
                              r"the configs of layer Sequential_0/Affine_0/Linear_0 \(Linear\)"),
    (lambda data: setattr(data, "input_shape", (5,)), r"params/Sequential_0/Affine_0/Linear_0/W has shape \(8, 4\), "
                                                      r"expected \(8, 5\)"),
    (lambda data: data.model[0]["config"]["layers"].append({"class_name": "Affine", "config": {"nout": 3}}),
     r"the checkpoint does not fit this model: missing params/Sequential_0/Affine_2/Linear_0/W"),
    (lambda data: data.params.update({"Sequential_0/Affine_1/Linear_0/W": np.zeros((3, 8), np.float64)}),
     r"params/Sequential_0/Affine_1/Linear_0/W has dtype float64, expected float32"),
], ids=["nout", "input_shape", "extra layer", "dtype"])
def test_configs_that_disagree_with_the_stored_weights_are_reported(tmp_path: Path, edit: Callable,
                                                                   message: str) -> None:
    with pytest.raises(CheckpointError, match=r"mlp\.h5: " + message):
        load_model(edited_checkpoint(tmp_path / "mlp.h5", edit))


def cnn() -> list[Layer]:
    return [Conv((3, 3, 4), init=GlorotUniform(seed=0)), Pool(2), Affine(2)]


def lstm() -> list[Layer]:
    return [LookupTable(20, 8), LSTM(8), Affine(2)]


@pytest.mark.parametrize(("layers", "edit", "message"), [
    (cnn, set_field(0, "fshape", [3, 3, 2**26]),
     r"params/Sequential_0/Conv_0/Convolution_0/W has shape \(1, 3, 3, 4\), expected \(1, 3, 3, 67108864\)"),
    (cnn, set_field(0, "strides", 2**31 + 1),
     r"layer Conv_0 \(Conv\): expected strides as ints in \[1, 2147483648\], received 2147483649"),
    (cnn, set_field(0, "padding", [[0, 2**40], 1]),
     r"layer Conv_0 \(Conv\): expected padding as ints in \[0, 2147483648\], received \[\[0, 1099511627776\], 1\]"),
    (lstm, set_field(1, "nout", 2**24),  # LSTMCell adds its forget bias: not to a shapes-only view (a copy)
     r"params/Sequential_0/LSTM_0/LSTMCell_0/W_x has shape \(32, 8\), expected \(67108864, 8\)"),
    (lstm, set_field(0, "vocab_size", 2**31), r"layer Sequential_0/LookupTable_0 \(LookupTable\): the configs make "
                                              r"variable W of shape \(8, 2147483648\) \(17179869184 elements\)"),
    (lstm, lambda data: setattr(data, "input_shape", (2**21,)),
     r"expected tokens sequences of at most MAX_STEPS=1048576 steps, received input_shape \(2097152,\)"),
    (lstm, lambda data: setattr(data, "input_shape", (7, 2)),
     r"expected the input shape of tokens as \(T,\), received \(7, 2\)"),
], ids=["conv fshape", "conv strides", "conv padding", "lstm nout", "vocab_size", "steps", "tokens shape"])
def test_every_size_field_is_checked_in_bounded_memory(tmp_path: Path, layers: Callable[[], list[Layer]],
                                                       edit: Callable, message: str) -> None:
    shape, kind = ((1, 8, 8), "dense") if layers is cnn else ((7,), "tokens")
    path = edited_checkpoint(tmp_path / "net.h5", edit, layers(), shape, kind)
    with pytest.raises(CheckpointError, match=r"net\.h5: " + message):
        load_model(path)
    assert traced_peak(lambda: pytest.raises(CheckpointError, load_model, path)) < 16 << 20


def test_the_bounds_are_keywords(tmp_path: Path) -> None:
    path = edited_checkpoint(tmp_path / "mlp.h5", lambda data: None)  # 8*4 + 3*8 = 56 parameters (no biases)
    assert [layer.nout for layer in load_model(path, max_parameters=56).layers.layers] == [8, 3]
    with pytest.raises(CheckpointError, match=r"the layer configs make 56 parameters, expected at most "
                                              r"max_parameters=55; nothing was allocated"):
        load_model(path, max_parameters=55)
    with pytest.raises(CheckpointError, match=r"layer Affine_0 \(Affine\): expected nout as ints in \[1, 7\], "
                                              r"received 8"):
        load_model(path, max_elements=7)
    with pytest.raises(ModelError, match=r"load_model: expected max_elements as a positive int, received 0; hint:"):
        load_model(path, max_elements=0)


@pytest.mark.parametrize("path", corpus("load_model"), ids=lambda p: p.name)
def test_saved_checkpoints_that_once_made_load_model_allocate(path: Path) -> None:
    """Files whose configs once gave a raw ValueError/MemoryError or reached 1.6 GiB before the error."""
    with pytest.raises(CheckpointError, match=rf"{re.escape(path.name)}: .*nothing was (built|allocated); hint: "):
        load_model(path)
    assert traced_peak(lambda: pytest.raises(CheckpointError, load_model, path)) < 16 << 20
