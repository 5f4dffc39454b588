"""Callbacks: hook order, early stopping, checkpoints (last/best), resume == uninterrupted, history files, plots."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from fit_helper import datasets, mlp, weights

import neon
import ngraph_core
from neon.activations import Rectlin, Softmax
from neon.callbacks import (
    Callback,
    CallbackError,
    Checkpoint,
    EarlyStopping,
    EpochPrinter,
    History,
    LearningRateLogger,
    MetricHistory,
    ProgressBar,
    TrainingCurve,
)
from neon.costs import CrossEntropyMulti
from neon.initializers import GlorotUniform
from neon.layers import Affine
from neon.metrics import Accuracy
from neon.model import Model
from neon.optimizers import Adam, GradientDescentMomentum, StepSchedule
from neon.saving import read_checkpoint, write_checkpoint


def sgd(lr: float = 0.1, **kwargs) -> GradientDescentMomentum:
    return GradientDescentMomentum(lr, momentum_coef=0.9, **kwargs)


class Recorder(Callback):
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_train_begin(self, logs):
        self.calls.append(("train_begin",))

    def on_epoch_begin(self, epoch, logs):
        self.calls.append(("epoch_begin", epoch))

    def on_minibatch_begin(self, epoch, minibatch, logs):
        self.calls.append(("minibatch_begin", epoch, minibatch))

    def on_minibatch_end(self, epoch, minibatch, logs):
        self.calls.append(("minibatch_end", epoch, minibatch))

    def on_epoch_end(self, epoch, logs):
        self.calls.append(("epoch_end", epoch, self.model.epoch, len(self.model.history["epoch"])))

    def on_train_end(self, logs):
        self.calls.append(("train_end",))


class Scripted(Callback):
    """Puts a scripted value under ``score`` in each epoch's logs (callbacks after it see it)."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def on_epoch_end(self, epoch, logs):
        logs["score"] = self.values[epoch]


class Interrupt(Callback):
    def __init__(self, after_epoch: int) -> None:
        self.after_epoch = after_epoch

    def on_epoch_end(self, epoch, logs):
        if epoch == self.after_epoch:
            raise KeyboardInterrupt


def test_hooks_run_in_order() -> None:
    train, _ = datasets(batch_size=64)  # 90 samples: batches of 64 and 26
    recorder = Recorder()
    mlp().fit(train, CrossEntropyMulti(), sgd(), 2, callbacks=[recorder], progress=False)
    epoch = lambda e: [("epoch_begin", e), ("minibatch_begin", e, 0), ("minibatch_end", e, 0),  # noqa: E731
                       ("minibatch_begin", e, 1), ("minibatch_end", e, 1), ("epoch_end", e, e + 1, e + 1)]
    assert recorder.calls == [("train_begin",), *epoch(0), *epoch(1), ("train_end",)]


def test_early_stopping_after_patience_epochs_without_improvement() -> None:
    train, valid = datasets()
    stop = EarlyStopping("score", patience=2)
    model = mlp()
    history = model.fit(train, CrossEntropyMulti(), sgd(), 10, valid_set=valid, progress=False,
                        callbacks=[Scripted([5, 4, 4.5, 4.2, 1, 0, 0, 0, 0, 0]), stop])
    assert history["epoch"] == [1, 2, 3, 4] and stop.stopped_epoch == 4 == model.epoch
    stop = EarlyStopping("score", patience=1, min_delta=0.5, mode="max")
    model.fit(train, CrossEntropyMulti(), sgd(), 10, progress=False,
              callbacks=[Scripted([1, 2, 2.4, 9, 9, 9, 9, 9, 9, 9]), stop])
    assert stop.stopped_epoch == 3
    with pytest.raises(CallbackError, match="expected a monitor among .*received 'valid_cost'"):  # before any step
        mlp().fit(train, CrossEntropyMulti(), sgd(), 1, callbacks=[EarlyStopping()], progress=False)


def test_checkpoint_keeps_last_and_best(tmp_path: Path) -> None:
    train, valid = datasets()
    last = Checkpoint(tmp_path / "last.h5")
    best = Checkpoint(tmp_path / "best.h5", keep="best", monitor="score")
    every = Checkpoint(tmp_path / "every2.h5", every=2)
    mlp().fit(train, CrossEntropyMulti(), sgd(), 5, valid_set=valid, progress=False,
              callbacks=[Scripted([3.0, 1.0, 2.0, 0.5, 4.0]), last, best, every])
    assert last.saved_epochs == [1, 2, 3, 4, 5] and best.saved_epochs == [1, 2, 4]  # epoch numbers, as printed
    assert every.saved_epochs == [2, 4, 5]  # and after the last epoch
    for name, epoch in (("last.h5", 5), ("best.h5", 4), ("every2.h5", 5)):  # the number is what the file holds
        assert read_checkpoint(tmp_path / name).epoch == epoch
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.h5", "every2.h5", "last.h5"]


def test_resume_continues_to_the_same_result_as_an_uninterrupted_run(tmp_path: Path) -> None:
    schedule = StepSchedule([2], [0.05])  # the learning rate changes after the interruption
    train, valid = datasets(seed=11)  # shuffled, seeded per epoch; batches of 32, 32, 26
    whole = mlp(depth=2)
    whole.fit(train, CrossEntropyMulti(), sgd(schedule=schedule), 5, valid_set=valid, metric=Accuracy(),
              progress=False)

    path = tmp_path / "last.h5"
    train, valid = datasets(seed=11)
    first = mlp(depth=2)
    with pytest.raises(KeyboardInterrupt):
        first.fit(train, CrossEntropyMulti(), sgd(schedule=schedule), 5, valid_set=valid, metric=Accuracy(),
                  progress=False, callbacks=[Checkpoint(path), Interrupt(after_epoch=2)])
    train, valid = datasets(seed=11)
    resumed = mlp(depth=2, seed=42)  # a fresh process would build it the same; the weights come from the file
    history = resumed.fit(train, CrossEntropyMulti(), sgd(schedule=schedule), 5, valid_set=valid, metric=Accuracy(),
                          progress=False, resume_from=path)
    assert history["epoch"] == [1, 2, 3, 4, 5]
    assert history.as_dict() == whole.history.as_dict()
    for a, b in zip(weights(resumed), weights(whole), strict=True):
        np.testing.assert_array_equal(a, b)
    state = zip(resumed.optimizer.state_variables, whole.optimizer.state_variables, strict=True)
    for a, b in state:
        np.testing.assert_array_equal(resumed.transformer.read_variable(a), whole.transformer.read_variable(b))


def test_history_files_learning_rates_and_curve(tmp_path: Path) -> None:
    train, valid = datasets()
    stream = io.StringIO()
    rates = LearningRateLogger(path=tmp_path / "lr.csv", stream=stream)
    callbacks = [MetricHistory(tmp_path / "h.json", tmp_path / "h.csv"), rates, TrainingCurve(tmp_path / "c.png")]
    history = mlp().fit(train, CrossEntropyMulti(), sgd(schedule=StepSchedule([1, 2], [0.5, 0.25])), 3,
                        valid_set=valid, metric=Accuracy(), callbacks=callbacks, progress=False)
    assert json.loads((tmp_path / "h.json").read_text()) == history.as_dict()
    rows = list(csv.DictReader((tmp_path / "h.csv").open()))
    assert [float(r["valid_accuracy"]) for r in rows] == history["valid_accuracy"]
    assert rates.rates == [(1, 0.1), (2, 0.5), (3, 0.25)]
    assert stream.getvalue().splitlines()[1] == "epoch 2: learning rate 0.5"
    assert (tmp_path / "lr.csv").read_text().splitlines() == ["epoch,lr", "1,0.1", "2,0.5", "3,0.25"]
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*"))  # no temporary files left


def printed(text: str, cost_label: str) -> list[tuple[int, float]]:
    """``(epoch number, train cost)`` from each ``epoch e/N ... train_cost c`` line of ``text``."""
    return [(int(e), float(c)) for e, c in re.findall(rf"^epoch (\d+)/5\b.*?{cost_label} ([0-9.]+)", text, re.M)]


def test_the_console_and_the_history_files_number_epochs_alike(tmp_path: Path) -> None:
    """Issue 11: the console printed epochs 1, 2, 3 while the history CSV said 0, 1, 2. Now both say
    1..N, also across an interruption and a resume, and ``model.epoch`` is the last number."""
    printer, bar = io.StringIO(), io.StringIO()
    csv_path, json_path, last = tmp_path / "h.csv", tmp_path / "h.json", tmp_path / "last.h5"

    def callbacks() -> list[Callback]:
        return [EpochPrinter(file=printer), ProgressBar(file=bar), MetricHistory(json_path, csv_path), Checkpoint(last)]

    train, valid = datasets()
    with pytest.raises(KeyboardInterrupt):
        mlp().fit(train, CrossEntropyMulti(), sgd(), 5, valid_set=valid, callbacks=[*callbacks(), Interrupt(1)])
    assert [int(r["epoch"]) for r in csv.DictReader(csv_path.open())] == [1, 2]
    assert read_checkpoint(last).epoch == 2
    train, valid = datasets()
    model = mlp()
    history = model.fit(train, CrossEntropyMulti(), sgd(), 5, valid_set=valid, callbacks=callbacks(),
                        resume_from=last)
    rows = list(csv.DictReader(csv_path.open()))
    numbers = [int(r["epoch"]) for r in rows]
    assert numbers == history["epoch"] == json.loads(json_path.read_text())["epoch"] == [1, 2, 3, 4, 5]
    assert model.epoch == numbers[-1]
    # the line the console printed for epoch k shows the cost the CSV row numbered k holds
    costs = [float(r["train_cost"]) for r in rows]
    assert printed(printer.getvalue(), "train_cost") == [(e, round(c, 4)) for e, c in zip(numbers, costs)]
    assert printed(bar.getvalue(), "train_cost") == [(e, float(f"{c:.4g}")) for e, c in zip(numbers, costs)]


def test_a_checkpoint_with_0_based_epochs_resumes_numbered_from_1(tmp_path: Path) -> None:
    """Checkpoints written before the 1-based numbering hold ``epoch: [0, 1, ...]``; resuming renumbers them."""
    train, _ = datasets()
    path = tmp_path / "old.h5"
    mlp().fit(train, CrossEntropyMulti(), sgd(), 2, progress=False, callbacks=[Checkpoint(path)])
    data = read_checkpoint(path)
    assert data.history["epoch"] == [1, 2]
    write_checkpoint(path, dataclasses.replace(data, history={**data.history, "epoch": [0, 1]}))
    train, _ = datasets()
    history = mlp().fit(train, CrossEntropyMulti(), sgd(), 3, progress=False, resume_from=path)
    assert history["epoch"] == [1, 2, 3] and history["train_cost"][:2] == data.history["train_cost"]
    assert History.from_saved({"epoch": [3, 4]})["epoch"] == [3, 4]  # a 1-based history is left alone


def test_progress_bar_prints_one_line_per_epoch_when_not_a_terminal() -> None:
    train, valid = datasets()
    out = io.StringIO()
    mlp().fit(train, CrossEntropyMulti(), sgd(), 3, valid_set=valid, callbacks=[ProgressBar(file=out)])
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("epoch 1/3: train_cost ") and "val_cost" in lines[0]


def test_bad_callback_arguments() -> None:
    with pytest.raises(CallbackError, match="keep 'last' or 'best'"):
        Checkpoint("x.h5", keep="all")
    with pytest.raises(CallbackError, match="patience"):
        EarlyStopping(patience=-1)
    with pytest.raises(CallbackError, match="json_path and/or csv_path"):
        MetricHistory()


def test_resume_restores_adam_step_count_and_batchnorm_running_averages(tmp_path: Path) -> None:
    def model() -> Model:
        return Model([Affine(8, GlorotUniform(seed=0), activation=Rectlin(), batch_norm=True),
                      Affine(3, GlorotUniform(seed=1), activation=Softmax())])

    train, _ = datasets(seed=2)
    whole = model()
    whole.fit(train, CrossEntropyMulti(), Adam(0.01), 4, progress=False)
    path = tmp_path / "ckpt.h5"
    first = model()
    train, _ = datasets(seed=2)
    first.fit(train, CrossEntropyMulti(), Adam(0.01), 2, progress=False, callbacks=[Checkpoint(path)])
    resumed = model()
    train, _ = datasets(seed=2)
    resumed.fit(train, CrossEntropyMulti(), Adam(0.01), 4, progress=False, resume_from=path)
    for a, b in zip(weights(resumed), weights(whole), strict=True):  # includes the running mean and var
        np.testing.assert_array_equal(a, b)
    step = resumed.optimizer.state_variables[-1]
    assert step.axes.lengths == () and resumed.transformer.read_variable(step) == 4 * 3  # 3 batches an epoch


def test_callbacks_check_their_monitor_when_fit_starts() -> None:
    """Before any step, not after a whole epoch (issue 11): a monitor the fit will never log is an error."""
    train, valid = datasets()
    for callback, kw in ((EarlyStopping("valid_cost"), {}),
                         (Checkpoint("unused.h5", keep="best", monitor="valid_accuracy"), {"valid_set": valid})):
        model = mlp()
        with pytest.raises(CallbackError, match="expected a monitor among"):
            model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1), 2, progress=False,
                      callbacks=[callback], **kw)
        assert model.epoch == 0
    model = mlp()  # what it can monitor works
    model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1), 1, progress=False,
              callbacks=[EarlyStopping("train_cost")])
    assert model.epoch == 1


def test_a_metric_without_a_valid_set_warns() -> None:
    train, _ = datasets()
    with pytest.warns(UserWarning, match="no valid_set"):
        mlp().fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1), 1, progress=False, metric=Accuracy())


def test_neon_has_a_version() -> None:
    assert neon.__version__ == ngraph_core.__version__
