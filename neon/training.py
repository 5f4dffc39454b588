"""The one training loop of neon, and what every trainable model shares with it.

``Model.fit`` and ``GAN.fit`` (and any later model) differ only in their *step*: what one
batch does. Everything around it is written once here:

* ``fit_loop`` — epochs (``initial_epoch .. num_epochs - 1``, or from a checkpoint with
  ``resume_from``), the learning-rate schedule written before each epoch, callbacks at
  every stage, the progress bar, per-epoch means of the step's costs weighted by batch
  size, an end-of-epoch hook (validation), the history and ``stop_training``.
* ``ComputationCache`` — compiled computations by batch size (datasets yield a last
  partial batch at its true size), rebuilt when what they were built for changes: another
  cost or optimizer, or another set of trainable variables (``freeze`` after a ``fit``
  takes effect at the next step).
* ``TrainingOwner`` — one transformer holding a model's variables, and what checkpoints read
  and write through ``neon.saving`` (keys, random streams, ``save``/``restore``) — optimizers are
  bound to their variables (``optimizer.build``) before anything is restored, so the state is
  written at once.
* ``graph_updates`` — the side effects layers declared (``Layer.add_update``) that belong to
  one graph, ``freeze``/``unfreeze``, and the dataset helpers both models need.

Example:
    >>> def step(x, y):
    ...     return {"cost": float(train(x, y)[0])}
    >>> history = fit_loop(model, train_set, 10, step, learning_rates={"lr": optimizer},
    ...                    means={"cost": "train_cost"})
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from .callbacks import Callback, History, ProgressBar, Stop, TerminateOnNaN
from .data import batch_length, count_batches
from .distributed import average_metrics, broadcast_variables, communicator, is_distributed, is_writer
from .registry import register_model_class
from .saving import (
    CheckpointData,
    CheckpointError,
    checkpoint_keys,
    restore_checkpoint,
    save_checkpoint,
    weights_finite,
)


class TrainingError(ng.NgraphError, ValueError):
    """A training loop argument that cannot be used (a bad epoch count, a step without costs)."""


# -- what a graph runs besides its loss -------------------------------------------------------------
def graph_updates(layer: Any, inputs: Sequence[ng.Op]) -> list[ng.Op]:
    """The updates ``layer``'s tree declared (``Layer.add_update``) that read one of ``inputs``.

    A layer called several times (one graph per batch size; a GAN's discriminator on real and
    on fake samples) declares updates for each call; those of one graph are the ones computed
    from that graph's own placeholders.

    Example:
        >>> step = t.computation([loss, ng.doall([update, *graph_updates(model.layers, [x])])], x, y)
    """
    wanted = {id(p) for p in inputs}
    return [u for u in layer.updates if any(id(p) in wanted for p in u.placeholders())]


def trainable_set(variables: Iterable[ng.Op]) -> frozenset[int]:
    """Which of ``variables`` an optimizer updates now (``trainable``, not ``frozen``), by identity."""
    return frozenset(id(v) for v in variables if "trainable" in v.meta.labels and "frozen" not in v.meta.labels)


def _variables_of(items: Any) -> list[ng.Op]:
    items = [items] if isinstance(items, ng.Op) or hasattr(items, "variables") else list(items)
    found: list[ng.Op] = []
    for item in items:
        if isinstance(item, ng.Op) and item.op is ng.OpType.VARIABLE:
            found.append(item)
        elif hasattr(item, "variables"):
            found.extend(item.variables)
        else:
            raise TrainingError(f"freeze: expected layers or variables, received {type(item).__name__}; "
                                "hint: pass model.layers[0] or model.layers[0].variables")
    return found


def freeze(items: Any) -> list[ng.Op]:
    """Stop training these variables (or the layers' variables): ``trainable`` becomes ``frozen``.

    The labels change through ``ng.update_meta``; models rebuild their training computations
    at the next step, so freezing between two ``fit`` calls takes effect.

    Returns:
        the variables frozen now.

    Raises:
        TrainingError: an item that is neither a layer nor a variable.

    Example:
        >>> freeze(model.layers[0])  # the first layer's weights stay as they are
    """
    chosen = [v for v in _variables_of(items) if "trainable" in v.meta.labels]
    for var in chosen:
        ng.update_meta(var, remove_labels=("trainable",), add_labels=("frozen",))
    return chosen


def unfreeze(items: Any) -> list[ng.Op]:
    """Train frozen variables again (``frozen`` becomes ``trainable``); the others are left alone.

    Returns:
        the variables unfrozen now.

    Example:
        >>> unfreeze(model.layers[0])
    """
    chosen = [v for v in _variables_of(items) if "frozen" in v.meta.labels]
    for var in chosen:
        ng.update_meta(var, remove_labels=("frozen",), add_labels=("trainable",))
    return chosen


# -- the computation cache --------------------------------------------------------------------------
class ComputationCache:
    """Compiled computations by batch size, valid for one *key* and one *signature*.

    The key names what the computations were built for (the cost, the optimizer: objects
    compared by identity, plain values by equality); the signature (``signature()``, e.g. the
    set of trainable variables) is re-read only when op metadata changed since it was last
    read (``ng.meta_generation``), so a cached step costs one integer compare.

    Args:
        signature: a function returning a hashable summary of what the graphs depend on.

    Example:
        >>> cache = ComputationCache(lambda: trainable_set(model.variables))
        >>> comp = cache.get(n, lambda n: build_training(n), key=(cost, optimizer))
    """

    def __init__(self, signature: Callable[[], Hashable] | None = None) -> None:
        self._signature = signature
        self._entries: dict[int, Any] = {}
        self._key: tuple = ()
        self._seen: Hashable = None
        self._generation = -1

    def get(self, n: int, build: Callable[[int], Any], key: tuple = ()) -> Any:
        """The computation for batch size ``n``, built by ``build(n)`` when missing or out of date."""
        if not _same(key, self._key):
            self._entries.clear()
            self._key = key
        generation = ng.meta_generation()
        if generation != self._generation and self._signature is not None:
            self._generation = generation
            seen = self._signature()
            if seen != self._seen:
                self._entries.clear()
                self._seen = seen
        entry = self._entries.get(n)
        if entry is None:
            entry = self._entries[n] = build(n)
        return entry

    def sizes(self) -> list[int]:
        """The batch sizes compiled for."""
        return list(self._entries)

    def computations(self) -> list[Any]:
        """The computations compiled now, in the order they were built (``neon.tensorboard`` draws the first)."""
        return list(self._entries.values())

    def clear(self) -> None:
        """Forget every computation."""
        self._entries.clear()
        self._key = ()

    def __bool__(self) -> bool:
        return bool(self._entries)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y or (not hasattr(x, "__dict__") and x == y) for x, y in zip(a, b))


# -- the transformer and checkpoints, alike for every model -----------------------------------------
BACKEND_VARIABLE = "NG_BACKEND"


def default_backend(backend: str | None = None) -> str:
    """``backend``, or when None the ``NG_BACKEND`` environment variable, else ``"numpy"``.

    ``neon train --backend cupy`` sets the variable for a recipe, so every model it builds runs on the GPU
    without a flag of its own; ``"auto"`` takes the GPU when one is usable (``make_transformer``).

    Example:
        >>> default_backend(), default_backend("cupy")
        ('numpy', 'cupy')
    """
    return backend if backend is not None else os.environ.get(BACKEND_VARIABLE, "").strip() or "numpy"


class TrainingOwner:
    """One transformer holding a model's variables, the computations compiled on it, and restore.

    Subclasses set ``backend``/``transformer_options``, list their caches (``caches``), their
    checkpoint keys (``checkpoint_keys``) and whether an optimizer is bound (``optimizers``).
    """

    backend: str
    transformer_options: dict[str, Any]
    _transformer: Any = None
    epoch: int = 0
    history: History
    stop_training: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # a class that can rebuild itself from its checkpoint record registers itself for load_model
        super().__init_subclass__(**kwargs)
        if "from_record" in cls.__dict__:
            register_model_class(cls)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], input_shape: tuple[int, ...] | None, *,
                    custom_objects: Mapping[str, type] | None = None, backend: str | None = None,
                    **transformer_options: Any) -> TrainingOwner:
        """A new model, built, from the first model record its ``save_params`` wrote (no weights yet).

        ``neon.load_model`` calls it inside ``neon.initializers.shapes_only()`` after checking the
        record's sizes, then checks the variables against the bounds and the stored weights before
        writing them: an override must build the variables and must not run a computation.

        Args:
            record: the plain data ``save_params`` wrote (``{"class_name": ..., ...}``).
            input_shape: one sample's shape as the file records it.
            custom_objects: layer classes defined outside neon, by class name.
            backend, **transformer_options: for the new model's transformer.

        Raises:
            CheckpointError: a record this class cannot rebuild from (the hint says how to load it).
        """
        raise CheckpointError(f"expected a model class that rebuilds from its checkpoint, received {cls.__name__}, "
                              f"which does not; hint: build the {cls.__name__} in code and call load_params(path)")

    def caches(self) -> list[Any]:
        """The computation caches on the transformer (emptied by ``close``)."""
        return []

    def optimizers(self) -> list[Any]:
        """The optimizers bound to the model's variables (their state is saved and restored)."""
        return []

    def checkpoint_keys(self) -> tuple[dict[str, ng.Op], dict[str, ng.Op]]:
        """Checkpoint key -> variable, for the weights (``variables``) and for the optimizers' state
        (``neon.saving.checkpoint_keys``); a model whose checkpoint holds other variables overrides it."""
        return checkpoint_keys(self.variables, self.optimizers())

    @property
    def transformer(self) -> Any:
        """The transformer holding the variables (created on first use, on ``backend``)."""
        if self._transformer is None:
            self._transformer = ng.transformers.make_transformer(self.backend, **self.transformer_options)
        return self._transformer

    def close(self) -> None:
        """Release the transformer (and with it the variables' values) and the computations on it."""
        if self._transformer is not None:
            self._transformer.close()
        self._transformer = None
        for cache in self.caches():
            cache.clear()

    def save(self, path: str | Path, input_shape: Sequence[int], model: list[Any],
             allow_non_finite: bool = False) -> None:
        """Write the weights, the optimizers' state, the epoch, the history and ``model`` (plain data
        describing the model) to an HDF5 checkpoint, atomically (``neon.saving.save_checkpoint``).

        Raises:
            CheckpointError: a weight holds NaN or inf (a diverged run) and not ``allow_non_finite``;
                nothing is written then, so a previous file stays.
        """
        save_checkpoint(self, path, input_shape, model, allow_non_finite)

    # -- random streams: saved with the weights so a resumed run draws exactly what the whole run would --
    data_seed: int | None = None  # the training data's shuffle seed (``fit_loop`` records it)

    def random_streams(self) -> dict[str, Any]:
        """Every random stream training draws from, as JSON-ready data: the transformer's (dropout
        masks, ``ng.uniform``...) and the training data's shuffle seed. Subclasses add their own."""
        streams: dict[str, Any] = {}
        try:
            streams["transformer"] = self.transformer.random_state()
        except ng.UnsupportedOpError:  # a backend without saveable streams: resume draws fresh ones
            pass
        if self.data_seed is not None:
            streams["data_seed"] = int(self.data_seed)
        return streams

    def check_random_streams(self, streams: Mapping[str, Any]) -> None:
        """Raise ``CheckpointError`` unless ``restore_random_streams(streams)`` would succeed; change nothing."""
        try:
            if "transformer" in streams:
                self.transformer.check_random_state(streams["transformer"])
        except ng.NgraphError as exc:
            raise CheckpointError(f"checkpoint random streams: {exc}") from exc
        seed = streams.get("data_seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise CheckpointError(f"checkpoint random streams: expected data_seed to be an int >= 0, received {seed!r}")

    def restore_random_streams(self, streams: Mapping[str, Any]) -> None:
        """Put back what ``random_streams`` saved (a checkpoint without it changes nothing).

        Raises:
            CheckpointError: streams that do not fit this transformer (checked first: nothing changes then).
        """
        self.check_random_streams(streams)
        if "transformer" in streams:
            self.transformer.set_random_state(streams["transformer"])
        if streams.get("data_seed") is not None:
            self.data_seed = streams["data_seed"]

    def weights_finite(self) -> bool:
        """True when every weight and optimizer state value is finite (no NaN, no inf)."""
        return weights_finite(self)

    def restore(self, path: str | Path, data: CheckpointData | None = None, optimizer_state: bool = True) -> None:
        """Write a checkpoint's weights, epoch, history, random streams and (``optimizer_state``, when
        an optimizer is bound) its optimizer state (``neon.saving.restore_checkpoint``). Every field is
        checked before anything is written; ``load_params`` and ``fit(resume_from=...)`` come here.

        Raises:
            CheckpointError: a file that does not fit the model or its optimizers.
        """
        restore_checkpoint(self, path, data, optimizer_state)


def write_learning_rates(transformer: Any, optimizer: Any, epoch: int) -> float | None:
    """Write the optimizer's learning rate(s) for ``epoch``; the (first) rate, for the logs."""
    if hasattr(optimizer, "learning_rates_at"):
        rates = optimizer.learning_rates_at(epoch)
    elif getattr(optimizer, "lr_variable", None) is not None:
        rates = {optimizer.lr_variable: optimizer.learning_rate_at(epoch)}
    else:
        return None
    for var, rate in rates.items():
        transformer.write_variable(var, rate)
    return float(next(iter(rates.values()))) if rates else None


def bind_optimizer(optimizer: Any, variables: Sequence[ng.Op]) -> None:
    """``optimizer.build(variables)`` when it has one: its state exists from now on."""
    build = getattr(optimizer, "build", None)
    if callable(build):
        build(variables)


# -- the loop -----------------------------------------------------------------------------------------
def fit_loop(owner: TrainingOwner, dataset: Any, num_epochs: int,
             step: Callable[[np.ndarray, Any], Mapping[str, float]], *,
             learning_rates: Mapping[str, Any], means: Mapping[str, str],
             callbacks: Iterable[Callback] | None = None, initial_epoch: int = 0,
             resume_from: str | Path | None = None, progress: bool = False,
             end_epoch: Callable[[int], Mapping[str, float]] | None = None, who: str = "fit",
             terminate_on_nan: bool = True, end_epoch_keys: Sequence[str] | None = None) -> History:
    """Train ``owner`` for epochs ``initial_epoch .. num_epochs - 1`` with one ``step`` per batch.

    Args:
        owner: the model (transformer, ``epoch``, ``history``, ``stop_training``, ``restore``).
        dataset: yields ``(x, y)`` batches, batch last (``set_epoch(e)`` is called if it has it).
        num_epochs: the epoch to stop at (the total, counting epochs before ``initial_epoch``).
        step: ``step(x, y) -> {name: value}``, one training step on a batch (costs to log).
        learning_rates: log name -> optimizer whose rate for the epoch is written first.
        means: step value name -> epoch log name, averaged over the samples.
        callbacks: ``Callback`` objects.
        initial_epoch: the first epoch (ignored with ``resume_from``).
        resume_from: a checkpoint restored first (``owner.restore``): continue from its epoch.
        progress: show a ``ProgressBar`` unless the callbacks have one.
        end_epoch: ``end_epoch(epoch) -> logs`` after the batches (validation).
        who: names the caller in errors.
        end_epoch_keys: the names ``end_epoch`` logs (``valid_cost``...), so callbacks can check
            what they monitor when training starts; None: unknown (not checked).
        terminate_on_nan: add a ``TerminateOnNaN`` callback (unless one is given): a batch whose
            cost is NaN or infinite stops training at once; that epoch is not counted, logged or
            checkpointed.

    Returns:
        ``owner.history``: per epoch ``epoch`` (its 1-based number, as printed; callbacks and
        ``end_epoch`` get the 0-based index), the rates, the means and ``end_epoch``'s values;
        ``history.stopped`` says why training ended early (a ``Stop``), or is None.

    Raises:
        TrainingError: ``num_epochs`` is not an int >= 0.
        CheckpointError: ``resume_from`` does not fit the model.
    """
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 0:
        raise TrainingError(f"{who}: expected num_epochs to be an int >= 0, received {num_epochs!r}")
    callbacks = list(callbacks or [])
    if progress and not any(isinstance(c, ProgressBar) for c in callbacks):
        callbacks.insert(0, ProgressBar())
    if terminate_on_nan and not any(isinstance(c, TerminateOnNaN) for c in callbacks):
        callbacks.append(TerminateOnNaN())
    # distributed runs: only rank 0 prints progress and writes files (callbacks marked writer_only)
    callbacks = [c for c in callbacks if not getattr(c, "writer_only", False) or is_writer()]
    owner.data_seed = getattr(dataset, "seed", None)
    if resume_from is not None:
        owner.restore(resume_from)
        initial_epoch = owner.epoch
        if owner.data_seed is not None and hasattr(dataset, "seed"):
            dataset.seed = owner.data_seed  # the resumed run visits the batches the whole run would
    distributed = is_distributed()
    if distributed:  # every rank starts from rank 0's weights, state and (sharded data) shuffle seed
        broadcast_variables(owner)
        if getattr(dataset, "shard", None) is not None:
            dataset.set_shard(*dataset.shard, seed=communicator().allgather_object(dataset.seed)[0])
            owner.data_seed = dataset.seed
    owner.history = owner.history.truncated(initial_epoch) if initial_epoch > 0 else History()
    owner.stop_training = False
    params: dict[str, Any] = {"num_epochs": num_epochs, "initial_epoch": initial_epoch,
                              "nbatches": count_batches(dataset)}
    if end_epoch is None or end_epoch_keys is not None:  # what every epoch's logs will hold
        params["log_keys"] = {"epoch", *learning_rates, *means.values(), *(end_epoch_keys or ())}
    for cb in callbacks:
        cb.set_model(owner, params)
    for cb in callbacks:
        cb.on_train_begin({})
    interrupted = False
    for epoch in range(initial_epoch, num_epochs):
        rates = {name: write_learning_rates(owner.transformer, opt, epoch) for name, opt in learning_rates.items()}
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)
        for cb in callbacks:
            cb.on_epoch_begin(epoch, dict(rates))
        totals = dict.fromkeys(means, 0.0)
        seen = 0
        interrupted = False
        for i, (x, y) in enumerate(dataset):
            for cb in callbacks:
                cb.on_minibatch_begin(epoch, i, {})
            n = batch_length(x)
            values = step(x, y)
            if distributed:  # one cost for all ranks: the bar shows it, and a NaN on any rank stops them all
                values = average_metrics(values, weight=n, check_names=False)
            for name in totals:
                totals[name] += values[name] * n
            seen += n
            for cb in callbacks:
                cb.on_minibatch_end(epoch, i, {**values, "batch_size": n})
            if owner.stop_training:  # asked mid-epoch (TerminateOnNaN): this epoch does not count
                interrupted = True
                break
        if interrupted:
            break
        # in a distributed run: the sample-weighted mean over every rank's batches (the same on every rank)
        logs: dict[str, Any] = {**rates, **average_metrics({means[k]: total / max(seen, 1)
                                                            for k, total in totals.items()}, weight=seen)}
        if end_epoch is not None:
            logs.update(end_epoch(epoch))
        owner.epoch = epoch + 1
        owner.history.append(epoch + 1, logs)  # the 1-based number the console prints
        for cb in callbacks:
            cb.on_epoch_end(epoch, logs)
        if owner.stop_training:
            break
    if owner.stop_training and owner.history.stopped is None:  # a callback of the user's stopped it
        epoch = owner.epoch + (1 if interrupted else 0)
        owner.history.stopped = Stop("stop_training", epoch, None, f"model.stop_training was set in epoch {epoch}")
    for cb in callbacks:
        cb.on_train_end({"epoch": owner.epoch})
    return owner.history

