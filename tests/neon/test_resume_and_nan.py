"""Exact resume with every random stream in the checkpoint, and the NaN guard (issue 18, items 5 and 6).

Resume equality is exact (max weight difference 0.0): a run of two epochs against one epoch, a
checkpoint, and a fresh process-like model resuming for the second — with dropout (the
transformer's random stream), an unseeded shuffling iterator (the data seed), and ResNet-20 with
batch norm and augmentation.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from fit_helper import NCLASS, blobs, weights

from model_zoo.resnet_cifar10 import resnet_cifar10
from neon.activations import Rectlin, Softmax
from neon.callbacks import Callback, Checkpoint, EarlyStopping, Stop, TerminateOnNaN
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator, ImageIterator, make_shapes_dataset
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine, Dropout
from neon.model import Model
from neon.optimizers import GradientDescentMomentum
from neon.saving import CheckpointError, read_checkpoint


def dropout_mlp(seed: int = 0) -> Model:
    return Model([Affine(16, GlorotUniform(seed=seed), bias=Constant(0.0), activation=Rectlin()),
                  Dropout(keep=0.7),
                  Affine(NCLASS, GlorotUniform(seed=seed + 1), bias=Constant(0.0), activation=Softmax())])


def train_set() -> ArrayIterator:
    X, y = blobs(90, seed=0)
    return ArrayIterator(X, y, nclass=NCLASS, batch_size=32, shuffle=True)  # seed drawn from the OS


def assert_same(a: Model, b: Model) -> None:
    diffs = [float(np.max(np.abs(x - y))) for x, y in zip(weights(a), weights(b), strict=True)]
    assert max(diffs) == 0.0, f"max weight difference {max(diffs)}"


def test_resume_with_dropout_and_an_unseeded_iterator_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "epoch1.h5"
    data = train_set()
    whole = dropout_mlp()
    whole.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), 2, progress=False)
    first = dropout_mlp()  # the same run, stopped after one epoch with a checkpoint
    data1 = ArrayIterator(*blobs(90, seed=0), nclass=NCLASS, batch_size=32, shuffle=True, seed=data.seed)
    first.fit(data1, CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), 1, progress=False,
              callbacks=[Checkpoint(path)])
    assert read_checkpoint(path).rng["data_seed"] == data.seed and "transformer" in read_checkpoint(path).rng
    resumed = dropout_mlp(seed=7)  # other weights: they come from the file
    resumed.fit(train_set(), CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), 2, progress=False,
                resume_from=path)  # another unseeded iterator: its seed comes from the file
    assert_same(resumed, whole)
    assert resumed.history.as_dict() == whole.history.as_dict()


def test_without_the_streams_resume_would_differ(tmp_path: Path) -> None:
    """The test above can fail: dropping the saved transformer stream changes the second epoch."""
    path = tmp_path / "epoch1.h5"
    data = ArrayIterator(*blobs(90, seed=0), nclass=NCLASS, batch_size=32, shuffle=True, seed=5)
    whole = dropout_mlp()
    whole.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), 2, progress=False)
    first = dropout_mlp()
    first.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), 1, progress=False,
              callbacks=[Checkpoint(path)])
    resumed = dropout_mlp()
    resumed.restore_random_streams = lambda streams: None  # as before the fix: streams ignored
    resumed.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), 2, progress=False,
                resume_from=path)
    assert max(float(np.max(np.abs(x - y))) for x, y in zip(weights(resumed), weights(whole), strict=True)) > 0


def test_resnet20_with_batch_norm_and_augmentation_resumes_exactly(tmp_path: Path) -> None:
    (X, y), _ = make_shapes_dataset(48, 8, seed=0)

    def data() -> ImageIterator:
        return ImageIterator(X, y, nclass=10, batch_size=16, shuffle=True, seed=11, crop_padding=2, flip=True)

    def model() -> Model:
        return Model(resnet_cifar10(depth=20, seed=0))

    def sgd() -> GradientDescentMomentum:
        return GradientDescentMomentum(0.05, momentum_coef=0.9, wdecay=1e-4)

    path = tmp_path / "resnet.h5"
    whole = model()
    whole.fit(data(), CrossEntropyMulti(), sgd(), 2, progress=False)
    first = model()
    first.fit(data(), CrossEntropyMulti(), sgd(), 1, progress=False, callbacks=[Checkpoint(path)])
    resumed = model()
    resumed.fit(data(), CrossEntropyMulti(), sgd(), 2, progress=False, resume_from=path)
    assert_same(resumed, whole)  # batch-norm running averages are variables: compared too


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the run diverges on purpose
def test_terminate_on_nan_stops_at_the_batch_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    X, y = blobs(90, seed=0)
    data = ArrayIterator(X, y, nclass=NCLASS, batch_size=32, shuffle=True, seed=0)
    path = tmp_path / "last.h5"
    model = dropout_mlp()
    model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), 1, progress=False,
              callbacks=[Checkpoint(path)])  # one good epoch, checkpointed
    good = path.read_bytes()
    huge = ArrayIterator(X * 1e3, y, nclass=NCLASS, batch_size=32, shuffle=True, seed=0)
    guard = TerminateOnNaN(file=io.StringIO())
    model.fit(huge, CrossEntropyMulti(), GradientDescentMomentum(1e3, 0.9), 6, progress=False, initial_epoch=1,
              callbacks=[guard, Checkpoint(path)])
    assert guard.stopped_at is not None
    epoch, batch = guard.stopped_at  # 1-based numbers, as printed
    assert f"epoch {epoch}, batch {batch}" in guard.message and epoch >= 2 and batch >= 1
    assert "nan" in guard.message.lower() or "inf" in guard.message.lower()
    done = epoch - 1  # the interrupted epoch is not recorded
    assert model.epoch == done and model.history["epoch"] == list(range(1, epoch))
    assert model.history.stopped == Stop("TerminateOnNaN", epoch, batch, guard.message)  # fit returned normally
    if epoch == 2:  # stopped in the first bad epoch: nothing may have replaced the good file
        assert path.read_bytes() == good
    saved = read_checkpoint(path)
    assert saved.epoch == done and all(np.isfinite(v).all() for v in saved.params.values())


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the runs diverge on purpose
def test_fit_adds_the_guard_by_default_and_can_turn_it_off(tmp_path: Path) -> None:
    X, y = blobs(90, seed=0)
    data = ArrayIterator(X * 1e3, y, nclass=NCLASS, batch_size=32, shuffle=True, seed=0)
    model = dropout_mlp()
    model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(1e3, 0.9), 4, progress=False)
    assert model.epoch < 4
    unguarded = dropout_mlp()
    unguarded.fit(data, CrossEntropyMulti(), GradientDescentMomentum(1e3, 0.9), 4, progress=False,
                  terminate_on_nan=False)
    assert unguarded.epoch == 4


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the run diverges on purpose
def test_a_diverged_fit_says_so_in_its_history_and_save_params_refuses_its_weights(tmp_path: Path) -> None:
    X, y = blobs(90, seed=0)
    X[40, 0] = np.nan  # in the second batch: its gradients, then the weights, become NaN
    model = dropout_mlp()
    history = model.fit(ArrayIterator(X, y, nclass=NCLASS, batch_size=32), CrossEntropyMulti(),
                        GradientDescentMomentum(0.1), 4, progress=False, callbacks=[TerminateOnNaN(file=io.StringIO())])
    assert history.stopped is not None and history.stopped.by == "TerminateOnNaN"  # returned normally, but says so
    assert (history.stopped.epoch, history.stopped.batch, model.epoch) == (1, 2, 0)
    assert history.stopped.message.startswith("TerminateOnNaN: epoch 1, batch 2: cost = nan")
    path = tmp_path / "diverged.h5"
    path.write_bytes(b"previous")
    with pytest.raises(CheckpointError, match=r"diverged\.h5: expected finite weights, received NaN or inf in \d+ of "
                                              r"\d+ \(.*\) \(TerminateOnNaN stopped training in epoch 1\); nothing "
                                              r"was written; hint: .*allow_non_finite=True"):
        model.save_params(path)
    assert path.read_bytes() == b"previous"
    model.save_params(path, allow_non_finite=True)  # kept for debugging, when asked
    assert not all(np.isfinite(v).all() for v in read_checkpoint(path).params.values())


def test_a_finished_fit_and_early_stopping_record_how_training_ended() -> None:
    X, y = blobs(90, seed=0)
    data = ArrayIterator(X, y, nclass=NCLASS, batch_size=32, shuffle=True, seed=0)
    model = dropout_mlp()
    assert model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1), 1, progress=False).stopped is None
    stopper = EarlyStopping("train_cost", patience=0, min_delta=1e9)  # epoch 2 cannot improve that much: stops
    history = model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.0), 5, progress=False,
                        initial_epoch=1, callbacks=[stopper])
    assert history.stopped == Stop("EarlyStopping", 2, None, history.stopped.message) and stopper.stopped_epoch == 2
    assert "train_cost did not improve" in history.stopped.message

    class Halt(Callback):
        def on_minibatch_end(self, epoch, minibatch, logs):
            self.model.stop_training = True

    halted = model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1), 9, progress=False,
                       initial_epoch=model.epoch, callbacks=[Halt()])
    assert halted.stopped.by == "stop_training" and halted.stopped.epoch == model.epoch + 1


def test_checkpoint_never_writes_non_finite_weights_over_a_good_file(tmp_path: Path) -> None:
    X, y = blobs(90, seed=0)
    data = ArrayIterator(X, y, nclass=NCLASS, batch_size=32, shuffle=True, seed=0)
    model = dropout_mlp()
    path = tmp_path / "last.h5"
    model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1), 1, progress=False, callbacks=[Checkpoint(path)])
    good = path.read_bytes()
    W = model.variables[0]
    model.transformer.write_variable(W, np.full(W.axes.lengths, np.nan))
    cb = Checkpoint(path)
    cb.set_model(model, {"num_epochs": 2})
    with pytest.warns(RuntimeWarning, match="NaN or inf"):
        cb.on_epoch_end(1, {})
    assert path.read_bytes() == good




def test_a_checkpoint_with_bad_random_streams_changes_nothing(tmp_path: Path) -> None:
    from neon.saving import CheckpointError, write_checkpoint

    X, y = blobs(90, seed=0)
    data = ArrayIterator(X, y, nclass=NCLASS, batch_size=32, shuffle=True, seed=0)
    model = dropout_mlp()
    path = tmp_path / "last.h5"
    model.fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1), 1, progress=False, callbacks=[Checkpoint(path)])
    saved = read_checkpoint(path)
    bad_state = {"format": 1, "streams": {"shared": {"bit_generator": "PCG64", "state": "garbage"}}}
    for rng in ({"transformer": bad_state}, {"data_seed": -3}):
        saved.rng = rng
        write_checkpoint(path, saved)
        other = dropout_mlp(seed=5)
        other.build((4,), 32)
        before = weights(other)
        with pytest.raises(CheckpointError, match="random streams"):
            other.load_params(path)
        for a, b in zip(weights(other), before, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("epochs", [-5, 2.5, True, "3"])
def test_fit_refuses_a_bad_epoch_count(epochs) -> None:
    from neon.gan import GAN
    from neon.model import ModelError
    from neon.training import TrainingError

    X, y = blobs(30, seed=0)
    data = ArrayIterator(X, y, nclass=NCLASS, batch_size=10)
    with pytest.raises((ModelError, TrainingError), match="num_epochs"):
        dropout_mlp().fit(data, CrossEntropyMulti(), GradientDescentMomentum(0.1), epochs, progress=False)
    gan = GAN([Affine(4)], [Affine(1, activation=Softmax())], noise_dim=2)
    with pytest.raises((ModelError, TrainingError), match="num_epochs"):
        gan.fit(ArrayIterator(X, batch_size=10), epochs, GradientDescentMomentum(0.1), GradientDescentMomentum(0.1))
