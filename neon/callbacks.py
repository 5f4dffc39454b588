"""Callbacks: code ``Model.fit`` runs at each stage of training, and the ``History`` it returns.

Hooks, in the order ``fit`` calls them::

    on_train_begin(logs)
      on_epoch_begin(epoch, logs)             logs: {"lr"}
        on_minibatch_begin(epoch, i, logs)
        on_minibatch_end(epoch, i, logs)      logs: {"cost", "batch_size"}
      on_epoch_end(epoch, logs)               logs: {"lr", "train_cost", "valid_cost", "valid_<metric>"...}
    on_train_end(logs)

Epoch numbering: the ``epoch`` a hook receives is the 0-based *index* (the one learning-rate
schedules take); everything a person reads is the 1-based epoch *number* ``epoch + 1`` — the
console ("epoch 3/10"), ``History["epoch"]`` and so the JSON/CSV files, messages, the plots'
x axis, ``Checkpoint.saved_epochs``, ``EarlyStopping.stopped_epoch``. After an epoch,
``model.epoch`` (epochs completed) equals that epoch's number, the last of ``history["epoch"]``.
A callback reads the model as ``self.model`` (its ``history``, ``epoch``, ``save_params``) and
stops training by setting ``self.model.stop_training = True``.

Why training ended early is in the history ``fit`` returns: ``history.stopped`` is None after
all the epochs ran, else a ``Stop`` (``by``: ``"TerminateOnNaN"``, ``"EarlyStopping"`` or
``"stop_training"`` for another callback; the 1-based ``epoch`` and, for a stop mid-epoch,
``batch``; a ``message``). A diverged run thus returns normally but says so:
``if history.stopped and history.stopped.by == "TerminateOnNaN": ...``.

Provided: ``ProgressBar`` (tqdm), ``MetricHistory`` (JSON/CSV), ``Checkpoint`` (atomic; last or
best), ``EarlyStopping``, ``LearningRateLogger``, ``TrainingCurve`` (a PNG) and ``TensorBoard``
(``neon.tensorboard``). Resuming is ``model.fit(..., resume_from=path)``; ``Checkpoint`` and
``EarlyStopping`` pick up their state from the history the checkpoint restores, so a resumed run
behaves as an uninterrupted one.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import ngraph_core as ng

from .atomic_files import atomic_path


class CallbackError(ng.NgraphError, ValueError):
    """A callback was configured with, or met, something it cannot use (e.g. an unknown monitor)."""


def __getattr__(name: str) -> Any:
    # ``TensorBoard`` lives in neon.tensorboard, which imports this module: re-exported lazily
    if name == "TensorBoard":
        from .tensorboard import TensorBoard

        return TensorBoard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- History --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stop:
    """Why ``fit`` ended before its last epoch (``History.stopped``).

    Attributes:
        by: what stopped it: ``"TerminateOnNaN"`` (a NaN or infinite cost), ``"EarlyStopping"``,
            or ``"stop_training"`` (another callback set ``model.stop_training``).
        epoch: the 1-based number of the epoch it stopped in (for ``TerminateOnNaN`` that epoch
            is not recorded; for the others it is the last recorded one).
        batch: the 1-based batch of a stop mid-epoch (``TerminateOnNaN``), else None.
        message: what happened, as printed.

    Example:
        >>> history = model.fit(train, cost, GradientDescentMomentum(1e6), 5)
        >>> history.stopped
        Stop(by='TerminateOnNaN', epoch=1, batch=3, message='TerminateOnNaN: epoch 1, batch 3: cost = nan; ...')
    """

    by: str
    epoch: int
    batch: int | None = None
    message: str = ""


class History(Mapping):
    """Per-epoch values: ``history["train_cost"]`` is a list with one float per epoch.

    Keys: ``epoch`` (the 1-based epoch number: 1, 2, ... as the progress bar prints it), ``lr``,
    ``train_cost`` and, with a validation set, ``valid_cost`` and ``valid_<metric name>``.
    Lists stay aligned with ``epoch``: a value missing in some epoch is None there.

    Attributes:
        stopped: None when ``fit`` ran every epoch; else a ``Stop`` saying what ended it early
            (a NaN cost: ``stopped.by == "TerminateOnNaN"``), in which epoch and batch. Not saved
            in checkpoints or history files (they hold the recorded epochs).

    Example:
        >>> history = model.fit(...)
        >>> history["epoch"], history["valid_accuracy"][-1]  # ([1, 2, 3], 0.97) after 3 epochs
        >>> history.stopped  # None: all 3 epochs ran
        >>> history.to_json("out/history.json")
    """

    def __init__(self, data: Mapping[str, list] | None = None) -> None:
        self.stopped: Stop | None = None
        self._data: dict[str, list] = {"epoch": []}
        for key, values in (data or {}).items():
            self._data[key] = list(values)

    @classmethod
    def from_saved(cls, data: Mapping[str, list] | None) -> History:
        """A history read from a checkpoint; one written before epochs were numbered from 1
        (its ``epoch`` list holds a 0) is renumbered, so a resumed run continues 1, 2, 3...

        Example:
            >>> History.from_saved({"epoch": [0, 1], "train_cost": [2.0, 1.5]})["epoch"]
            [1, 2]
        """
        history = cls(data)
        epochs = history._data["epoch"]
        if 0 in epochs:
            history._data["epoch"] = [e + 1 for e in epochs]
        return history

    def append(self, epoch: int, logs: Mapping[str, Any]) -> None:
        """Record one epoch's values under its 1-based number ``epoch``."""
        n = len(self._data["epoch"])
        self._data["epoch"].append(int(epoch))
        for key, value in logs.items():
            self._data.setdefault(key, [None] * n).append(None if value is None else float(value))
        for values in self._data.values():
            if len(values) == n:
                values.append(None)

    def truncated(self, n_epochs: int) -> History:
        """A copy holding only the first ``n_epochs`` epochs (numbers ``<= n_epochs``; for resuming after them)."""
        keep = [i for i, e in enumerate(self._data["epoch"]) if e <= n_epochs]
        return History({k: [v[i] for i in keep] for k, v in self._data.items()})

    def as_dict(self) -> dict[str, list]:
        """The values as plain data (JSON-ready)."""
        return {k: list(v) for k, v in self._data.items()}

    def to_json(self, path: str | Path) -> None:
        """Write ``as_dict()`` as JSON, atomically."""
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(self.as_dict(), indent=1) + "\n")

    def to_csv(self, path: str | Path) -> None:
        """Write one row per epoch (a column per key), atomically."""
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        keys = list(self._data)
        writer.writerow(keys)
        for i in range(len(self._data["epoch"])):
            writer.writerow(["" if self._data[k][i] is None else self._data[k][i] for k in keys])
        with atomic_path(path) as tmp:
            tmp.write_text(buffer.getvalue())

    def __getitem__(self, key: str) -> list:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"History({len(self._data['epoch'])} epochs: {', '.join(self._data)})"


# -- the base -------------------------------------------------------------------------------------------
class Callback:
    """Base class: override the hooks you need (see the module docstring for their order and logs).

    Example:
        >>> class PrintCost(Callback):
        ...     def on_epoch_end(self, epoch, logs):  # epoch: the 0-based index
        ...         print(f"epoch {epoch + 1}", logs["train_cost"])
    """

    model: Any = None
    params: dict[str, Any] = {}
    # True for callbacks that only print or write files (progress, history, checkpoints): in a
    # distributed run ``fit`` runs them on rank 0 only (``neon.distributed.is_writer``)
    writer_only = False

    def set_model(self, model: Any, params: dict[str, Any]) -> None:
        """Called by ``fit`` before training: the model, and ``num_epochs``/``initial_epoch``/``nbatches``."""
        self.model = model
        self.params = dict(params)

    def on_train_begin(self, logs: dict[str, Any]) -> None:
        """Before the first epoch."""

    def on_train_end(self, logs: dict[str, Any]) -> None:
        """After the last epoch (or early stopping)."""

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any]) -> None:
        """Before the first batch of the epoch of 0-based index ``epoch``; ``logs["lr"]`` is its learning rate."""

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        """After the epoch of 0-based index ``epoch`` and its validation; the model's history already has it
        (under the number ``epoch + 1``)."""

    def on_minibatch_begin(self, epoch: int, minibatch: int, logs: dict[str, Any]) -> None:
        """Before a training step."""

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict[str, Any]) -> None:
        """After a training step; ``logs["cost"]`` is the batch's cost."""


def resolve_mode(monitor: str, mode: str) -> str:
    """``"min"`` or ``"max"``: ``auto`` maximises accuracies, minimises everything else."""
    if mode not in ("auto", "min", "max"):
        raise CallbackError(f"expected mode 'auto', 'min' or 'max', received {mode!r}")
    if mode == "auto":
        return "max" if "accuracy" in monitor else "min"
    return mode


def check_monitor(params: Mapping[str, Any], monitor: str, who: str) -> None:
    """At ``fit``'s start: a ``CallbackError`` when ``monitor`` is a validation value (``valid_*``) the epochs
    will not log (``params["log_keys"]``, when the loop says), instead of failing after the first epoch.
    Other names may come from user callbacks that add to the logs, so they are checked at epoch end."""
    keys = params.get("log_keys")
    if keys is not None and monitor.startswith("valid_") and monitor not in keys:
        raise CallbackError(f"{who}: expected a monitor among the values this fit logs {sorted(keys)}, received "
                            f"{monitor!r}; hint: valid_* values need fit(..., valid_set=...), and valid_<metric> "
                            "needs metric=...")


def monitored(logs: Mapping[str, Any], monitor: str, who: str) -> float:
    """``logs[monitor]`` as a float, or a ``CallbackError`` listing what can be monitored."""
    value = logs.get(monitor)
    if value is None:
        raise CallbackError(f"{who}: monitor {monitor!r} is not among the epoch's values {sorted(logs)}; "
                            "hint: valid_* values need fit(..., valid_set=...)")
    return float(value)


# -- progress bar -----------------------------------------------------------------------------------------
class TerminateOnNaN(Callback):
    """Stop training at the first batch whose cost (any value the step logs) is NaN or infinite.

    ``fit`` adds one by default (``terminate_on_nan=False`` turns it off). The interrupted
    epoch is not counted: no history row, no validation, no checkpoint; ``fit`` returns normally,
    with the history of the finished epochs, and ``history.stopped`` (a ``Stop``, ``by ==
    "TerminateOnNaN"``), ``stopped_at`` and the message say where it happened. The weights are
    then non-finite: ``save_params`` refuses them unless ``allow_non_finite=True``.

    Attributes:
        stopped_at: ``(epoch, batch)`` of the bad batch, both 1-based numbers as printed, or None.
        message: what was printed, or None.

    Example:
        >>> model.fit(train, cost, GradientDescentMomentum(1e6), 5)  # stops with a message, no exception
    """

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file
        self.stopped_at: tuple[int, int] | None = None
        self.message: str | None = None

    def on_train_begin(self, logs: dict[str, Any]) -> None:
        self.stopped_at = self.message = None

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict[str, Any]) -> None:
        bad = {k: v for k, v in logs.items() if k != "batch_size" and isinstance(v, (int, float))
               and not math.isfinite(v)}
        if not bad:
            return
        self.stopped_at = (epoch + 1, minibatch + 1)
        values = ", ".join(f"{k} = {v}" for k, v in bad.items())
        self.message = (f"TerminateOnNaN: epoch {epoch + 1}, batch {minibatch + 1}: {values}; training stopped, the "
                        "weights are those after this batch (save_params refuses them where they hold NaN or inf) "
                        "and the epoch is not recorded. hint: lower the learning rate, clip gradients "
                        "(gradient_clip_norm=...), or check the data for NaN")
        print(self.message, file=self.file or sys.stderr)
        self.model.stop_training = True
        self.model.history.stopped = Stop("TerminateOnNaN", epoch + 1, minibatch + 1, self.message)


class EpochPrinter(Callback):
    """One line per epoch: ``epoch e/N``, chosen log values, an optional extra figure, and the time.

    Args:
        fields: ``(log key, label, format)`` triples, printed when the key is in the epoch's logs;
            ``"%"`` as the format prints the value as a percentage.
        extra: a function returning more text (e.g. a held-out score computed now), or None.
        file: where to print (default: standard output).

    Example:
        >>> EpochPrinter([("train_cost", "train_cost", ".4f"), ("valid_accuracy", "accuracy", "%")])
    """

    writer_only = True  # prints or writes files: rank 0 only in a distributed run

    DEFAULT_FIELDS = (("lr", "lr", ".3g"), ("train_cost", "train_cost", ".4f"), ("valid_cost", "valid_cost", ".4f"),
                      ("valid_accuracy", "valid_accuracy", "%"))

    def __init__(self, fields: Sequence[tuple[str, str, str]] = DEFAULT_FIELDS, extra: Callable[[], str] | None = None,
                 file: TextIO | None = None) -> None:
        self.fields, self.extra, self.file = list(fields), extra, file

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any]) -> None:
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        parts = [f"epoch {epoch + 1}/{self.params.get('num_epochs', '?')}"]
        for key, label, fmt in self.fields:
            if isinstance(logs.get(key), (int, float)):
                parts.append(f"{label} {100 * logs[key]:.2f}%" if fmt == "%" else f"{label} {logs[key]:{fmt}}")
        if self.extra is not None:
            parts.append(self.extra())
        parts.append(f"({time.perf_counter() - self.start:.1f} s)")
        print("  ".join(parts), file=self.file or sys.stdout, flush=True)


class ProgressBar(Callback):
    """A tqdm bar per epoch with the running cost; ``fit(progress=True)`` adds one.

    When ``file`` is not a terminal (a log, CI) tqdm stays silent and one summary line per
    epoch is printed instead, so logs never fill with bar refreshes.

    Args:
        file: where to draw (default ``sys.stderr``).
        mininterval: seconds between bar refreshes.
    """

    writer_only = True  # prints or writes files: rank 0 only in a distributed run

    def __init__(self, file: TextIO | None = None, mininterval: float = 0.5) -> None:
        self.file = file
        self.mininterval = mininterval
        self._bar: Any = None
        self._total = 0.0
        self._seen = 0
        self._start = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any]) -> None:
        from tqdm import tqdm

        self._total, self._seen, self._start = 0.0, 0, time.perf_counter()
        self._bar = tqdm(total=self.params.get("nbatches"), desc=f"epoch {epoch + 1}/{self.params.get('num_epochs')}",
                         file=self.file or sys.stderr, disable=None, mininterval=self.mininterval, leave=True,
                         unit="batch", dynamic_ncols=True)

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict[str, Any]) -> None:
        self._total += logs["cost"] * logs["batch_size"]
        self._seen += logs["batch_size"]
        self._bar.set_postfix(cost=f"{self._total / self._seen:.4f}", refresh=False)
        self._bar.update(1)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        shown = {k.replace("valid_", "val_"): f"{v:.4g}" for k, v in logs.items() if k != "lr" and v is not None}
        if self._bar.disable:
            text = ", ".join(f"{k} {v}" for k, v in shown.items())
            print(f"epoch {epoch + 1}/{self.params.get('num_epochs')}: {text} "
                  f"({time.perf_counter() - self._start:.1f} s)", file=self.file or sys.stderr, flush=True)
        else:
            self._bar.set_postfix(shown, refresh=True)
        self._bar.close()


# -- history files ------------------------------------------------------------------------------------------
class MetricHistory(Callback):
    """Write the model's history after every epoch, as JSON and/or CSV (atomically).

    Args:
        json_path: where to write JSON (``History.as_dict()``), or None.
        csv_path: where to write CSV (a row per epoch), or None.

    Example:
        >>> MetricHistory("out/history.json", "out/history.csv")
    """

    writer_only = True  # prints or writes files: rank 0 only in a distributed run

    def __init__(self, json_path: str | Path | None = None, csv_path: str | Path | None = None) -> None:
        if json_path is None and csv_path is None:
            raise CallbackError("MetricHistory: expected json_path and/or csv_path, received neither")
        self.json_path, self.csv_path = json_path, csv_path

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        if self.json_path is not None:
            self.model.history.to_json(self.json_path)
        if self.csv_path is not None:
            self.model.history.to_csv(self.csv_path)


# -- checkpoints -----------------------------------------------------------------------------------------
class Checkpoint(Callback):
    """Save the model (weights, optimizer state, epoch, history) with ``save_params``, atomically.

    Args:
        path: the HDF5 file.
        keep: ``"last"``: after every ``every``-th epoch; ``"best"``: when ``monitor`` improves.
            Use two callbacks to keep both.
        monitor: the value ``keep="best"`` compares (``valid_cost``, ``valid_accuracy``...).
        mode: ``"min"``, ``"max"`` or ``"auto"`` (accuracies up, the rest down).
        every: with ``keep="last"``, save every this many epochs (and after the last epoch).

    Attributes:
        saved_epochs: the numbers (1-based, as in ``History["epoch"]``) of the epochs saved after;
            each equals the ``epoch`` the file then held.

    Example:
        >>> callbacks = [Checkpoint("out/last.h5"), Checkpoint("out/best.h5", keep="best")]
        >>> model.fit(..., callbacks=callbacks)
        >>> model.fit(..., resume_from="out/last.h5")  # after an interruption
    """

    writer_only = True  # prints or writes files: rank 0 only in a distributed run

    def __init__(self, path: str | Path, keep: str = "last", monitor: str = "valid_cost", mode: str = "auto",
                 every: int = 1) -> None:
        if keep not in ("last", "best"):
            raise CallbackError(f"Checkpoint: expected keep 'last' or 'best', received {keep!r}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise CallbackError(f"Checkpoint: expected every to be an int >= 1, received {every!r}")
        self.path, self.keep, self.monitor, self.every = Path(path), keep, monitor, every
        self.mode = resolve_mode(monitor, mode)
        self.best: float | None = None
        self.saved_epochs: list[int] = []

    def on_train_begin(self, logs: dict[str, Any]) -> None:
        self.best = None
        if self.keep == "best":
            check_monitor(self.params, self.monitor, "Checkpoint")
        for value in self.model.history.get(self.monitor, []):  # resumed: the best so far
            if value is not None and self._improves(value):
                self.best = value

    def _improves(self, value: float) -> bool:
        if math.isnan(value):
            return False
        return self.best is None or (value < self.best if self.mode == "min" else value > self.best)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        if self.keep == "best":
            value = monitored(logs, self.monitor, "Checkpoint")
            if not self._improves(value):
                return
            self.best = value
        elif (epoch + 1) % self.every and epoch + 1 != self.params.get("num_epochs"):
            return
        finite = getattr(self.model, "weights_finite", None)
        if finite is not None and not finite():
            # never replace a checkpoint by weights that cannot be trained further
            warnings.warn(f"Checkpoint: epoch {epoch + 1}: the weights hold NaN or inf; {self.path} was not written "
                          f"(the previous file, if any, is kept)", RuntimeWarning, stacklevel=2)
            return
        self.model.save_params(self.path)
        self.saved_epochs.append(epoch + 1)


class EarlyStopping(Callback):
    """Stop training when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs.

    Args:
        monitor: the epoch value to watch (``valid_cost``, ``valid_accuracy``...).
        patience: epochs without improvement tolerated.
        min_delta: the smallest change that counts as an improvement.
        mode: ``"min"``, ``"max"`` or ``"auto"``.

    Attributes:
        stopped_epoch: the number (1-based, as in ``History["epoch"]``) of the epoch training stopped
            after, or None.

    Example:
        >>> model.fit(..., valid_set=test, callbacks=[EarlyStopping("valid_cost", patience=3)])
    """

    def __init__(self, monitor: str = "valid_cost", patience: int = 3, min_delta: float = 0.0,
                 mode: str = "auto") -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise CallbackError(f"EarlyStopping: expected patience to be an int >= 0, received {patience!r}")
        if not isinstance(min_delta, (int, float)) or not min_delta >= 0:
            raise CallbackError(f"EarlyStopping: expected min_delta >= 0, received {min_delta!r}")
        self.monitor, self.patience, self.min_delta = monitor, patience, float(min_delta)
        self.mode = resolve_mode(monitor, mode)
        self.best: float | None = None
        self.wait = 0
        self.stopped_epoch: int | None = None

    def _update(self, value: float) -> None:
        better = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                       else value > self.best + self.min_delta)
        if better:
            self.best, self.wait = value, 0
        else:
            self.wait += 1

    def on_train_begin(self, logs: dict[str, Any]) -> None:
        self.best, self.wait, self.stopped_epoch = None, 0, None
        check_monitor(self.params, self.monitor, "EarlyStopping")
        for value in self.model.history.get(self.monitor, []):  # resumed: replay the epochs before
            if value is not None:
                self._update(value)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        self._update(monitored(logs, self.monitor, "EarlyStopping"))
        if self.wait > 0 and self.wait >= self.patience:
            self.model.stop_training = True
            self.stopped_epoch = epoch + 1
            self.model.history.stopped = Stop("EarlyStopping", epoch + 1, None,
                                              f"EarlyStopping: {self.monitor} did not improve for {self.wait} "
                                              f"epochs (best {self.best:.6g})")


# -- logging and plots ------------------------------------------------------------------------------------
class LearningRateLogger(Callback):
    """Log the learning rate of every epoch: to ``rates``, and a line to a stream or a CSV file.

    Epochs are numbered from 1 everywhere here, as in ``History["epoch"]``.

    Args:
        path: append ``epoch,lr`` rows to this CSV file (created with a header).
        stream: print ``epoch 3: learning rate 0.01`` lines here (e.g. ``sys.stdout``).

    Attributes:
        rates: ``(epoch number, learning rate)`` pairs, one per epoch begun.

    Example:
        >>> LearningRateLogger(stream=sys.stdout)
    """

    writer_only = True  # prints or writes files: rank 0 only in a distributed run

    def __init__(self, path: str | Path | None = None, stream: TextIO | None = None) -> None:
        self.path, self.stream = (None if path is None else Path(path)), stream
        self.rates: list[tuple[int, float | None]] = []

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any]) -> None:
        lr = logs.get("lr")
        self.rates.append((epoch + 1, lr))
        if self.stream is not None:
            print(f"epoch {epoch + 1}: learning rate {lr:.6g}" if lr is not None else
                  f"epoch {epoch + 1}: learning rate unknown", file=self.stream, flush=True)
        if self.path is not None:
            new = not self.path.exists()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                f.write(("epoch,lr\n" if new else "") + f"{epoch + 1},{'' if lr is None else lr}\n")


class TrainingCurve(Callback):
    """Draw the training curves into a PNG (matplotlib, Agg), atomically, after every epoch.

    Left panel: the costs (``train_cost``, ``valid_cost``); right panel: the other
    validation values (``valid_accuracy``...), when there are any.

    Args:
        path: the PNG file.
        title: the figure's title.

    Example:
        >>> TrainingCurve("out/mnist_mlp_curve.png")
    """

    writer_only = True  # prints or writes files: rank 0 only in a distributed run

    def __init__(self, path: str | Path, title: str = "training curve") -> None:
        self.path, self.title = Path(path), title

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        plot_history(self.model.history, self.path, self.title)


def plot_history(history: Mapping[str, list], path: str | Path, title: str = "training curve") -> None:
    """Write ``history``'s curves to a PNG at ``path`` (see ``TrainingCurve``), atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    epochs = list(history["epoch"])  # already the 1-based numbers the console printed
    costs = [k for k in ("train_cost", "valid_cost") if k in history]
    others = [k for k in history if k.startswith("valid_") and k != "valid_cost"]
    figure = Figure(figsize=(10 if others else 5.5, 4), dpi=100)
    FigureCanvasAgg(figure)
    panels = figure.subplots(1, 2 if others else 1, squeeze=False)[0]
    for ax, keys, label in ((panels[0], costs, "cost"), *(((panels[1], others, "value"),) if others else ())):
        for key in keys:
            points = [(e, v) for e, v in zip(epochs, history[key], strict=True) if v is not None]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=key)
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    figure.suptitle(title)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png")
