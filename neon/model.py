"""``Model``: layers plus one transformer — train with ``fit``, evaluate, predict, save and load.

The model owns one transformer, so the training and inference graphs, built from the same
layer objects (the first inside ``training_mode(True)``, the second inside
``training_mode(False)``), read and write one set of variables.

**Batch sizes.** Every graph has a fixed batch length ``N`` and datasets yield their last
partial batch at its true size, so the model compiles one training computation per batch size
(``neon.training.ComputationCache``) over the same variables; no sample is dropped or seen
twice. The loop itself is ``neon.training.fit_loop``; ``freeze`` between fits takes effect.

**Looking inside.** ``select(query)`` queries the model's graph with a CSS-like selector
(docs/selectors.md); ``summary()`` tables the layers, parameters and memory plan; ``memory_plot``
draws a computation's memory plan. Those methods are the ``ModelInspection`` mixin
(``neon/model_inspection.py``), which reads the model only through its public methods
(``inference_graph``, ``inference_computation``, ``training_computations``, ``require_built``,
``built_batch``); the machinery is in ``neon/selection.py`` and ``neon/summary.py``.

Example:
    >>> model = Model([Affine(512, GlorotUniform(), activation=Rectlin()),
    ...                Affine(10, GlorotUniform(), activation=Softmax())])
    >>> history = model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.05, 0.9),
    ...                     num_epochs=10, valid_set=test, metric=Accuracy())
    >>> model.eval(test, Accuracy())
    0.968
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from .callbacks import Callback, History
from .data import ArrayIterator, DataError, dataset_shapes, in_order
from .data import batch_size as first_batch_size
from .distributed import DistributedOptimizer, is_distributed, sum_across_ranks
from .inputs import KINDS, batch_kind, input_placeholders, same_features, sample_placeholder, split_batch
from .layers import Layer, training_mode
from .layers.base import name_children
from .layers.recurrent import sequence_lengths
from .model_inspection import ModelError, ModelInspection
from .optimizers.groups import rate_signature
from .registry import register_layers_model
from .saving import CheckpointError, load_params
from .selection import TapOwner
from .training import (
    ComputationCache,
    TrainingOwner,
    bind_optimizer,
    default_backend,
    fit_loop,
    freeze,
    graph_updates,
    trainable_set,
    unfreeze,
)

__all__ = ["Model", "ModelError", "sample_placeholder"]


class Model(ModelInspection, TrainingOwner, TapOwner):
    """A neural network: layers (a list becomes ``Sequential``) and the transformer that runs them.

    Args:
        layers: a list of layers, or one layer or container.
        backend: the transformer backend: ``"numpy"``, ``"cupy"`` (a GPU; raises without one) or ``"auto"``
            (CuPy when a GPU is usable, else NumPy with a warning); default: ``$NG_BACKEND``, else numpy.
        **transformer_options: passed to ``ng.transformers.make_transformer`` (``seed``...).

    Attributes:
        layers: the top layer (a ``Sequential`` for a list).
        epoch: epochs completed (restored by ``load_params``).
        history: the ``History`` of the last ``fit``.
        stop_training: set by a callback (``EarlyStopping``) to end ``fit`` after this epoch.

    Raises:
        ModelError: ``layers`` is not a layer or a list of layers.

    Example:
        >>> model = Model([Affine(10, GlorotUniform(), activation=Softmax())])
        >>> model.predict(X[:5]).shape
        (5, 10)
    """

    def __init__(self, layers: Any, backend: str | None = None, **transformer_options: Any) -> None:
        if isinstance(layers, (list, tuple)):
            from .containers import Sequential

            layers = Sequential(list(layers))
        if not isinstance(layers, Layer):
            raise ModelError(f"Model: expected a layer or a list of layers, received {type(layers).__name__}")
        name_children([layers])  # an unnamed top layer is Sequential_0 in every model
        self.layers = layers
        self.backend = default_backend(backend)
        self.transformer_options = transformer_options
        self.input_shape: tuple[int, ...] | None = None
        self.input_kind = "dense"  # or "frames" / "tokens": sequences with lengths (neon.inputs)
        self.epoch = 0
        self.history = History()
        self.stop_training = False
        self.optimizer: Any = None
        # (N, sample shape) -> (inputs, y_hat, computation or None); sequences: inputs = (X, lengths)
        self._outputs: dict[tuple, tuple[tuple[ng.Op, ...], ng.Op, Any]] = {}
        # (N, sample shape, y shape) -> training computation, for one (cost, optimizer), one set of
        # trainable variables and their lr_scale/weight_decay attributes (the optimizer reads them)
        self._train = ComputationCache(lambda: (trainable_set(self.layers.variables),
                                                rate_signature(self.layers.variables)))
        self._evals: dict[tuple, Any] = {}  # (ids of cost/metrics, N, sample shape, y shape) -> comp
        self.built_batch = 1  # the batch size ``build`` made the graph for (``select`` queries that one)
        self.standing_taps = []  # taps put on every graph built (``ModelSelection.tap``)

    # -- the transformer and the graphs ------------------------------------------------------------
    def caches(self) -> list[Any]:
        return [self._outputs, self._train, self._evals]

    def optimizers(self) -> list[Any]:
        return [self.optimizer] if self.optimizer is not None else []

    @property
    def built(self) -> bool:
        """True once the layers have been called (their variables exist)."""
        return self.input_shape is not None

    @property
    def variables(self) -> list[ng.Op]:
        """The model's variables (weights, running averages...), in the layers' order."""
        return list(self.layers.variables)

    def _input(self, shape: Sequence[int], n: int) -> tuple[ng.Op, ...]:
        """The input placeholder(s) for ``n`` samples of ``shape``: ``(X,)``, or ``(X, lengths)`` for sequences."""
        shape = tuple(int(s) for s in shape)
        if self.input_shape is None:
            self.input_shape = shape
        elif not same_features(self.input_kind, shape, self.input_shape):
            raise DataError(f"Model: the data has samples of shape {shape}, expected {self.input_shape} "
                            "(the shape the model was built with)")
        x, lengths = input_placeholders(self.input_kind, shape, n)
        return (x,) if lengths is None else (x, lengths)

    def _layers(self, inputs: tuple[ng.Op, ...]) -> ng.Op:
        """The layers applied to the input, with the sequence lengths given to every recurrent layer."""
        if len(inputs) == 1:
            return self.layers(inputs[0])
        with sequence_lengths(inputs[1]):
            return self.layers(inputs[0])

    def _set_kind(self, kind: str) -> None:
        if kind not in KINDS:
            raise ModelError(f"Model: expected an input kind among {KINDS}, received {kind!r}")
        if self.built and kind != self.input_kind:
            raise DataError(f"Model: the data is {kind} batches, but the model was built for {self.input_kind} "
                            "batches; hint: sequences come as (array, lengths) pairs (SequenceIterator)")
        self.input_kind = kind

    def _peek(self, dataset: Any, what: str) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
        """The dataset's sample and target shapes; sets the input kind from its first batch."""
        shape, y_shape = dataset_shapes(dataset, what)
        if not hasattr(dataset, "shape"):  # an iterator without declared shapes: look at a batch
            x, _ = next(iter(in_order(dataset)))
            self._set_kind(batch_kind(x))
        return shape, y_shape

    def build(self, input_shape: Sequence[int], batch_size: int = 1, kind: str | None = None) -> None:
        """Create the variables for samples of ``input_shape`` (fit, eval and predict do it for you).

        Args:
            input_shape: one sample's shape (``(F, T)`` frames or ``(T,)`` tokens for sequences).
            batch_size: the batch length of the graph built now.
            kind: ``"dense"``, ``"frames"`` or ``"tokens"`` (``neon.inputs``); default: as set.
        """
        if kind is not None:
            self._set_kind(kind)
        self.inference_graph(batch_size, input_shape)
        self.built_batch = batch_size

    def inference_graph(self, n: int, shape: Sequence[int] | None = None) -> tuple[tuple[ng.Op, ...], ng.Op]:
        """The inference graph for ``n`` samples of ``shape`` (default: the built shape), built once and kept.

        Returns:
            ``(input placeholders, output op)``: ``(X,)``, or ``(X, lengths)`` for sequences.

        Raises:
            ModelError: no ``shape`` and the model is not built; the layers' output has no batch axis.

        Example:
            >>> inputs, y_hat = model.inference_graph(16)
        """
        shape = tuple(shape if shape is not None else self.require_built())
        key = (n, shape)
        if key not in self._outputs:
            inputs = self._input(shape, n)
            with training_mode(False):
                y_hat = self._layers(inputs)
            if not isinstance(y_hat, ng.Op) or y_hat.axes.batch_axis is None:
                raise ModelError(f"Model: the layers' output must be one op with the batch axis N, received "
                                 f"{y_hat.axes if isinstance(y_hat, ng.Op) else type(y_hat).__name__}")
            self._outputs[key] = (inputs, y_hat, None)
            self.tap_graph([y_hat])
        inputs, y_hat, _ = self._outputs[key]
        return inputs, y_hat

    def require_built(self, who: str = "") -> tuple[int, ...]:
        """The sample shape the model was built for.

        Raises:
            ModelError: the model has no variables yet (naming ``Model.<who>`` and how to build it).
        """
        if self.input_shape is None:
            raise ModelError(f"Model{'.' + who if who else ''}: the model has no variables yet; hint: call "
                             "model.build(input_shape) (e.g. model.build((1, 28, 28))), or fit it, or run eval/"
                             "predict/get_outputs or load_params once, which build it from the data's shape")
        return self.input_shape

    def _targets(self, y_hat: ng.Op, y_shape: tuple[int, ...], n: int, cost: Any = None) -> ng.Op:
        """The target placeholder for a dataset whose targets have ``y_shape`` per sample (a cost with
        ``target_placeholder``, such as ``CTC``, makes its own)."""
        if cost is not None and hasattr(cost, "target_placeholder"):
            return cost.target_placeholder(y_hat, y_shape, n)
        out = tuple(a.length for a in y_hat.axes if not a.is_batch)
        if y_shape and math.prod(y_shape) != math.prod(out):
            raise DataError(f"Model: the dataset's targets have shape {y_shape} per sample, but the model outputs "
                            f"{out} per sample; hint: nclass must equal the last layer's nout")
        names = ("Y",) if len(y_shape) == 1 else tuple(f"Y{i}" for i in range(len(y_shape)))
        axes = [ng.make_axis(length, name) for length, name in zip(y_shape, names, strict=True)]
        return ng.placeholder([*axes, ng.make_axis(n, "N")], name="Y")

    def _training(self, n: int, y_shape: tuple[int, ...], shape: Sequence[int], cost: Any, optimizer: Any) -> Any:
        """The training computation for ``n`` samples of ``shape``: ``(*inputs, y) -> (cost, None)``,
        updating the variables."""
        return self._train.get((n, tuple(shape), tuple(y_shape)),
                               lambda key: self._compile_training(n, y_shape, shape, cost, optimizer),
                               key=(cost, optimizer))

    def _compile_training(self, n: int, y_shape: tuple[int, ...], shape: Sequence[int], cost: Any,
                          optimizer: Any) -> Any:
        inputs = self._input(shape, n)
        with training_mode(True):
            y_hat = self._layers(inputs)
        self.tap_graph([y_hat])
        y = self._targets(y_hat, y_shape, n, cost)
        loss = cost(y_hat, y)
        if not isinstance(loss, ng.Op) or len(loss.axes) != 0:
            raise ModelError(f"Model.fit: the cost must return a scalar op, received "
                             f"{loss.axes if isinstance(loss, ng.Op) else type(loss).__name__}")
        step = optimizer(loss, self.layers.trainable_variables)
        updates = graph_updates(self.layers, list(inputs))
        return self.transformer.computation([loss, ng.doall([step, *updates])], *inputs, y)

    def freeze(self, items: Any = None) -> list[ng.Op]:
        """Stop training layers' or given variables (default: all); the next step recompiles (``training.freeze``).

        Example:
            >>> model.freeze(model.layers[0])
        """
        return freeze(self.layers if items is None else items)

    def unfreeze(self, items: Any = None) -> list[ng.Op]:
        """Train frozen variables again (layers' or given ones; default: every one).

        Example:
            >>> model.unfreeze(model.layers[0])
        """
        return unfreeze(self.layers if items is None else items)

    def inference_computation(self, n: int, shape: Sequence[int] | None = None) -> tuple[Any, ng.Op]:
        """The compiled inference computation for ``n`` samples of ``shape`` (compiled once, kept), and its output.

        Example:
            >>> comp, y_hat = model.inference_computation(32); comp.memory_report().arena_bytes
        """
        inputs, y_hat = self.inference_graph(n, shape)
        key = (n, tuple(shape if shape is not None else self.require_built()))
        entry = self._outputs[key]
        if entry[2] is None:
            entry = self._outputs[key] = (inputs, y_hat, self.transformer.computation(y_hat, *inputs,
                                                                                      mode="inference"))
        return entry[2], y_hat

    # -- training ------------------------------------------------------------------------------------
    def fit(self, train_set: Any, cost: Any, optimizer: Any, num_epochs: int,
            callbacks: Iterable[Callback] | None = None, valid_set: Any = None, progress: bool = True,
            metric: Any = None, resume_from: str | Path | None = None, initial_epoch: int = 0,
            terminate_on_nan: bool = True) -> History:
        """Train for epochs ``initial_epoch .. num_epochs - 1``.

        Each epoch: the optimizer's learning rate for the epoch is written, every batch of
        ``train_set`` takes one step, then (with ``valid_set``) the cost and ``metric`` are
        evaluated on it in inference mode. Callbacks see every stage.

        Args:
            train_set: an ``ArrayIterator`` (or any iterable of ``(x, y)`` batches, batch last).
            cost: ``cost(y_hat, y) -> scalar op`` (e.g. ``CrossEntropyMulti()``).
            optimizer: ``optimizer(cost_op, variables) -> update op`` (e.g. ``GradientDescentMomentum``).
            num_epochs: the epoch to stop at (the total, counting epochs before ``initial_epoch``).
            callbacks: ``Callback`` objects.
            valid_set: evaluated after every epoch.
            progress: show a tqdm progress bar (a line per epoch when stderr is not a terminal).
            metric: a metric or a list of metrics to evaluate on ``valid_set``.
            resume_from: a checkpoint (``save_params``/``Checkpoint``): load weights, optimizer
                state, epoch, history and random streams (dropout masks, the data's shuffle seed),
                and continue from that epoch — bit for bit the result of an uninterrupted run.
            initial_epoch: the first epoch to run (ignored with ``resume_from``).
            terminate_on_nan: stop at the first batch whose cost is NaN or infinite, with a message
                naming the epoch and batch (``neon.callbacks.TerminateOnNaN``); that epoch is not
                recorded or checkpointed, and ``fit`` returns normally with ``history.stopped`` set.

        Returns:
            the ``History``: per epoch ``epoch``, ``lr``, ``train_cost`` and, with ``valid_set``,
            ``valid_cost`` and ``valid_<metric name>``. ``history.stopped`` is None when every
            epoch ran, else a ``neon.callbacks.Stop`` saying what ended training early
            (``by="TerminateOnNaN"``: the cost went NaN or infinite, at ``epoch``/``batch``;
            ``"EarlyStopping"``), so a diverged run is told apart from a finished one.

        Raises:
            ModelError: bad arguments, a cost that is not scalar.
            DataError: a dataset without targets or whose targets do not fit the output.
            CheckpointError: ``resume_from`` does not fit this model and optimizer.

        Example:
            >>> history = model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.05, 0.9), 10,
            ...                     valid_set=test, metric=Accuracy())
            >>> history["valid_accuracy"][-1]
        """
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 0:
            raise ModelError(f"Model.fit: num_epochs must be an int >= 0, received {num_epochs!r}")
        metrics = _as_list(metric)
        if metrics and valid_set is None:
            warnings.warn("Model.fit: metric=... is evaluated on valid_set after each epoch, and no valid_set was "
                          "given, so it is not computed; hint: pass valid_set=..., or call model.eval(data, metric)",
                          UserWarning, stacklevel=2)
        if is_distributed() and not isinstance(optimizer, DistributedOptimizer):
            warnings.warn(f"Model.fit: a distributed run with a plain {type(optimizer).__name__}: every rank steps "
                          "on its own gradients and the weights drift apart; hint: wrap it, "
                          "neon.distributed.DistributedOptimizer(optimizer)", UserWarning, stacklevel=2)
        shape, y_shape = self._peek(train_set, "train_set")
        if y_shape is None:
            raise DataError("Model.fit: train_set yields no targets (y is None); hint: ArrayIterator(X, y, nclass=...)")
        if not self.built:
            self.build(shape, first_batch_size(train_set))
        self._input(shape, 1)  # the data fits the model
        self.optimizer = optimizer
        bind_optimizer(optimizer, self.layers.variables)  # its state exists before anything is restored

        def step(x: Any, y: np.ndarray) -> dict[str, float]:
            array, lengths = split_batch(x)
            train = self._training(array.shape[-1], tuple(np.shape(y)[:-1]), array.shape[:-1], cost, optimizer)
            return {"cost": float(train(array, y)[0] if lengths is None else train(array, lengths, y)[0])}

        def validate(epoch: int) -> dict[str, float]:
            results = self._evaluate(valid_set, cost, metrics, across_ranks=True)
            return {f"valid_{name}": value for name, value in results.items()}

        return fit_loop(self, train_set, num_epochs, step, learning_rates={"lr": optimizer},
                        means={"cost": "train_cost"}, callbacks=callbacks, initial_epoch=initial_epoch,
                        resume_from=resume_from, progress=progress,
                        end_epoch=validate if valid_set is not None else None, who="Model.fit",
                        terminate_on_nan=terminate_on_nan,
                        end_epoch_keys=["valid_cost", *(f"valid_{m.name}" for m in metrics)] if valid_set is not None
                        else [])

    # -- evaluation --------------------------------------------------------------------------------------
    def eval(self, dataset: Any, metric: Any) -> float | dict[str, float]:
        """Evaluate ``metric`` (one, or a list) over the whole dataset, in inference mode.

        A dataset sharded over the ranks of a distributed run (``neon.distributed.shard``) is
        evaluated over every rank's share: every rank must call ``eval``, and all get one value.

        Returns:
            the metric's value (e.g. accuracy), or ``{name: value}`` for a list of metrics.

        Raises:
            DataError: a dataset without targets, or targets that do not fit the output.

        Example:
            >>> model.eval(test, Accuracy())
            0.968
        """
        metrics = _as_list(metric)
        if not metrics:
            raise ModelError("Model.eval: expected a metric (e.g. Accuracy()) or a list of metrics")
        sharded = getattr(dataset, "shard", None) is not None and dataset.shard[1] > 1
        results = self._evaluate(dataset, None, metrics, across_ranks=sharded)
        return results if isinstance(metric, (list, tuple)) else results[metrics[0].name]

    def _evaluate(self, dataset: Any, cost: Any, metrics: list[Any], across_ranks: bool = False) -> dict[str, float]:
        """``{"cost": mean cost, <metric name>: value}`` over ``dataset`` with the inference graph; with
        ``across_ranks`` in a distributed run, over every rank's batches (each rank's share of a sharded set)."""
        _, y_shape = self._peek(dataset, "dataset")
        if y_shape is None:
            raise DataError("Model.eval: the dataset yields no targets (y is None); hint: ArrayIterator(X, y, ...)")
        cost_total, sums, seen = 0.0, [0.0] * len(metrics), 0
        for x, y in in_order(dataset):
            array, lengths = split_batch(x)
            n, shape, y_shape = array.shape[-1], array.shape[:-1], tuple(np.shape(y)[:-1])
            key = (id(cost), tuple(id(m) for m in metrics), n, shape, y_shape)
            comp = self._evals.get(key)
            if comp is None:
                inputs, y_hat = self.inference_graph(n, shape)
                yp = self._targets(y_hat, y_shape, n, cost)
                ops = ([cost(y_hat, yp)] if cost is not None else []) + [m(y_hat, yp) for m in metrics]
                comp = self._evals[key] = (self.transformer.computation(ops, *inputs, yp, mode="inference"), cost,
                                           metrics)
            values = comp[0](array, y) if lengths is None else comp[0](array, lengths, y)
            if cost is not None:
                cost_total += float(values[0]) * n
                values = values[1:]
            sums = [s + float(v) for s, v in zip(sums, values, strict=True)]
            seen += n
        if across_ranks and is_distributed():  # totals, not means: exact for every metric's aggregate
            cost_total, seen_total, *sums = sum_across_ranks([cost_total, seen, *sums])
            seen = int(round(seen_total))
        results = {"cost": cost_total / max(seen, 1)} if cost is not None else {}
        for m, total in zip(metrics, sums, strict=True):
            results[m.name] = float(m.aggregate(total, seen)) if hasattr(m, "aggregate") else total / max(seen, 1)
        return results

    def get_outputs(self, dataset: Any) -> np.ndarray:
        """The model's outputs (inference mode) for every sample, in data order.

        Returns:
            an array ``(ndata, outputs...)``: the output with its batch axis first.

        Example:
            >>> probs = model.get_outputs(test)  # (1000, 10)
        """
        self._peek(dataset, "dataset")
        chunks = []
        for x, _y in in_order(dataset):
            array, lengths = split_batch(x)
            n, shape = array.shape[-1], array.shape[:-1]
            comp, y_hat = self.inference_computation(n, shape)
            out = comp(array) if lengths is None else comp(array, lengths)
            chunks.append(np.moveaxis(out, y_hat.axes.index(y_hat.axes.batch_axis), 0))
        return _stack_padded(chunks)

    def predict(self, x: Any, batch_size: int | None = None) -> np.ndarray:
        """The model's outputs for a raw array of samples ``(ndata, features...)``.

        Args:
            x: samples, batch first (rows of ``X`` as given to ``ArrayIterator``).
            batch_size: default: the training batch size, else 128.

        Returns:
            ``(ndata, outputs...)``.

        Example:
            >>> classes = model.predict(X_test).argmax(axis=1)
        """
        x = np.asarray(x)
        if x.ndim < 2:
            raise DataError(f"Model.predict: expected samples of shape (ndata, features...), received shape {x.shape}")
        lshape = self.input_shape if self.input_shape is not None and \
            math.prod(self.input_shape) == math.prod(x.shape[1:]) else None
        return self.get_outputs(ArrayIterator(x, batch_size=batch_size or self._default_batch_size(),
                                              lshape=lshape))

    def training_computations(self) -> dict[tuple, Any]:
        """The training computations compiled now, by ``(N, sample shape, target shape)``."""
        return dict(zip(self._train.sizes(), self._train.computations(), strict=True))

    # -- standing taps (``neon.selection.TapOwner``) ------------------------------------------------------
    def built_graphs(self) -> list[Sequence[ng.Op]]:
        """The forward graphs built so far whose ops are kept (inference, per batch size)."""
        return [[y_hat] for _, y_hat, _ in self._outputs.values()]

    def new_tap_invalidates(self) -> None:
        """Training graphs are not kept: drop their computations, rebuilt (and tapped) at the next step."""
        self._train.clear()

    def _default_batch_size(self) -> int:
        return max(key[0] for key in self._train.sizes()) if self._train else 128

    # -- checkpoints ------------------------------------------------------------------------------------
    def save_params(self, path: str | Path, allow_non_finite: bool = False) -> None:
        """Save the weights, the optimizer state, the epoch and the history to HDF5, atomically.

        Written by ``neon.saving.save_checkpoint`` (``neon/checkpoint_file.py`` has the layout); keys
        are scope paths like ``Sequential_0/Affine_1/Linear_0/W``.

        Args:
            path: the checkpoint to write.
            allow_non_finite: write weights holding NaN or inf too (a diverged run kept for
                debugging); by default they are refused.

        Raises:
            ModelError: the model has no variables yet.
            CheckpointError: the file cannot be written, or a weight holds NaN or inf (training
                diverged: ``history.stopped``) without ``allow_non_finite`` (any previous file is kept intact).

        Example:
            >>> model.save_params("out/mnist_mlp.h5")
        """
        self.save(path, self.require_built(), [_config(self.layers), {"input_kind": self.input_kind}],
                  allow_non_finite=allow_non_finite)

    def load_params(self, path: str | Path, optimizer_state: bool = True) -> None:
        """Load a checkpoint written by ``save_params``: weights, epoch, history and optimizer state.

        Everything is checked before anything is written, so a checkpoint that does not fit
        leaves the model unchanged. An unbuilt model is built from the input shape the
        checkpoint records. Optimizer state is loaded when an optimizer is bound to the model
        (``fit`` binds one; ``fit(resume_from=...)`` binds it, then loads).

        Args:
            path: the checkpoint.
            optimizer_state: also restore the optimizer's state (when the file has any).

        Raises:
            CheckpointError: naming the file and the key — unreadable, truncated or damaged,
                another version, missing or unexpected keys, shapes or dtypes that differ.

        Example:
            >>> model.load_params("out/mnist_mlp.h5")
        """
        load_params(self, path, optimizer_state, build=self._build_for_checkpoint)

    def _build_for_checkpoint(self, path: Path, data: Any) -> None:
        """Build an unbuilt model for the input shape and kind the checkpoint records."""
        if self.built:
            return
        if data.input_shape is None:
            raise CheckpointError(f"{path}: records no input shape; hint: build the model first "
                                  "(model.build(input_shape))")
        kinds = [m.get("input_kind") for m in data.model[1:] if isinstance(m, dict)]
        kind = kinds[0] if kinds and kinds[0] in KINDS else "dense"
        self.build(data.input_shape, kind=kind)

    def __repr__(self) -> str:
        return f"Model({self.layers!r})"


register_layers_model(Model)  # neon.load_model builds a Model around a file's layer configs


# -- helpers ---------------------------------------------------------------------------------------------
def _stack_padded(chunks: list[np.ndarray]) -> np.ndarray:
    """Batch-first chunks joined along the batch; sequence outputs of batches of other lengths are
    zero-padded to the longest (a recurrent layer writes zeros past each sequence's end anyway)."""
    widest = tuple(max(c.shape[d] for c in chunks) for d in range(1, chunks[0].ndim))
    if all(c.shape[1:] == widest for c in chunks):
        return np.concatenate(chunks, axis=0)
    return np.concatenate([np.pad(c, [(0, 0)] + [(0, w - s) for s, w in zip(c.shape[1:], widest, strict=True)])
                           for c in chunks], axis=0)


def _as_list(metric: Any) -> list[Any]:
    if metric is None:
        return []
    return list(metric) if isinstance(metric, (list, tuple)) else [metric]


def _config(layer: Any) -> Any:
    try:
        return {"class_name": type(layer).__name__, "config": layer.get_config()}
    except Exception:  # noqa: BLE001 - the config is informational only; never fail a save over it
        return {"class_name": type(layer).__name__}
