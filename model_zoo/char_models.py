"""What the character recipes (``char_seq2seq``, ``char_lm``) share: a per-step cross entropy, a
decoding loop that feeds each step's token back in (``ng.scan``), and a training owner.

* ``masked_cross_entropy(logits, targets, lengths)`` — the mean over the *valid* steps of
  ``-log softmax(logits)[target]``, for logits ``[V, REC, N]`` and int targets ``[REC, N]``.
  ``neon.costs.CrossEntropyMulti`` takes one-hot targets and averages over the batch only
  (summing over time, padding included), so a padded batch needs this one.
* ``feedback_decode`` — greedy (or Gumbel-max sampled) generation as ONE ``ng.scan``: the state
  is the cell's state plus the previous token, each step embeds the token, runs the cell and
  the output layer, and picks the next token; the compiled body runs once per step.
* ``CharModel`` — a ``TrainingOwner`` over a few named layers and one optimizer: one training
  computation per input shape (cached), ``fit`` through ``neon.training.fit_loop`` (epochs,
  learning-rate schedules, callbacks, ``resume_from``), and HDF5 checkpoints.

Example:
    >>> loss = masked_cross_entropy(logits, targets, lengths)   # nats per valid step
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng
from neon.callbacks import Callback, History
from neon.data.text import Vocabulary
from neon.layers import Layer
from neon.layers.cells import RNNCell
from neon.layers.serialization import short_repr
from neon.saving import CheckpointError, load_params
from neon.training import TrainingOwner, bind_optimizer, default_backend, fit_loop


class CharModelError(ng.NgraphError, ValueError):
    """A character recipe was given a setting or an input it cannot use."""


def class_axis(logits: ng.Op, who: str) -> ng.Axis:
    """The one class axis of ``logits`` (the axis that is neither ``REC`` nor ``N``)."""
    rest = [a for a in logits.axes if not (a.is_batch or a.is_recurrent)]
    if len(rest) != 1:
        raise CharModelError(f"{who}: expected logits with one class axis besides REC and N, received "
                             f"{logits.axes}; hint: end the model with Affine(vocab_size) per step")
    return rest[0]


def masked_cross_entropy(logits: ng.Op, targets: ng.Op, lengths: ng.Op | None = None) -> ng.Op:
    """The mean over valid steps of ``-log softmax(logits)[target]`` (nats per step), a scalar op.

    Args:
        logits: ``[V, REC, N]`` unnormalized scores (no softmax layer).
        targets: int ``[REC, N]`` class ids.
        lengths: int ``[N]``: steps ``t >= lengths[n]`` are padding and do not count (None: all count).

    Returns:
        a scalar op: ``sum(mask * nll) / max(sum(mask), 1)``.

    Raises:
        CharModelError: logits without exactly one class axis, or targets on other axes.

    Example:
        >>> loss = masked_cross_entropy(Affine(64)(h), targets, lengths)   # h [H, REC, N]
    """
    classes = class_axis(logits, "masked_cross_entropy")
    kept = logits.axes - [classes]
    if not targets.axes.same_set(kept):
        raise CharModelError(f"masked_cross_entropy: expected targets with axes {kept}, received {targets.axes}; "
                             "hint: targets are the class ids of each step, [REC, N]")
    log_p = ng.log_softmax(logits, normalization_axes=[classes])
    picked = ng.sum(log_p * ng.one_hot(targets, classes), reduction_axes=[classes])
    if lengths is None:
        return -ng.mean(picked)
    rec = kept.recurrent_axis
    steps = ng.broadcast(ng.constant(np.arange(rec.length), [rec], dtype=lengths.dtype), picked.axes)
    mask = ng.cast(ng.less(steps, lengths), picked.dtype)
    return -ng.sum(picked * mask) / ng.maximum(ng.sum(mask), 1.0)


def feedback_decode(embed: Layer, cell: RNNCell, output: Layer, state: Sequence[ng.Op], first: ng.Op,
                    steps: int, noise: ng.Op | None = None) -> ng.Op:
    """Generate ``steps`` tokens, each step feeding the previous token back in, as one ``ng.scan``.

    One step: ``x = embed(token)``, ``h, state = cell(cell.project(x), state)``,
    ``logits = output(h)``, ``token = argmax(logits + noise_t)``. Without noise that is greedy
    decoding; with ``T`` times standard Gumbel noise ``-log(-log(U))`` it samples from
    ``softmax(logits / T)`` (the Gumbel-max trick: ``argmax(logits / T + g) = argmax(logits + T g)``),
    so sampling needs no random op in the graph and the caller's seeded generator makes it
    reproducible.

    Args:
        embed: the (built) ``LookupTable`` of the tokens.
        cell: the (built) recurrent cell (``layer.cell`` of an ``LSTM``/``GRU``).
        output: the (built) layer mapping ``h [H, N]`` to logits ``[V, N]``.
        state: the cell's starting state, one op per state tensor, each ``[H, N]`` on the cell's axes.
        first: int ``[N]``: the token the first step reads (a start token, or a prompt's last one).
        steps: how many tokens to generate (> 0).
        noise: ``[V, REC:steps, N]`` Gumbel noise times the temperature (sampling), or None (greedy).

    Returns:
        int ``[REC:steps, N]``: the generated tokens (of ``first``'s dtype).

    Raises:
        CharModelError: ``steps < 1``.

    Example:
        >>> tokens = feedback_decode(embed, decoder.cell, output, (h, c), bos, 20)   # greedy
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise CharModelError(f"feedback_decode: expected steps to be an int >= 1, received {steps!r}")
    batch = first.axes.batch_axis
    rec = ng.make_axis(steps, "REC")
    # ng.scan iterates over a sequence: without noise, a dummy [REC, N] one carries the length
    sequence = noise if noise is not None else ng.broadcast(ng.constant(0.0, ()), [rec, batch])

    def step(noise_t: ng.Op, token: ng.Op, *carried: ng.Op) -> tuple[list[ng.Op], list[ng.Op]]:
        x = embed(token)
        with cell.scope():
            projected = cell.project(x)
        h, new_state = cell(projected, tuple(carried))
        logits = output(h)
        classes = class_axis(logits, "feedback_decode")
        scores = logits + noise_t if noise is not None else logits
        nxt = ng.cast(ng.argmax(scores, reduction_axes=[classes]), token.dtype)
        return [nxt], [nxt, *new_state]

    _, (tokens,) = ng.scan(step, [sequence], [first, *state], rec, name="feedback_decode")
    return tokens


def gumbel_noise(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard Gumbel draws ``-log(-log(U))`` (float32), for ``feedback_decode``'s sampling."""
    u = rng.uniform(np.finfo(np.float32).tiny, 1.0, size=shape)
    return (-np.log(-np.log(u))).astype(np.float32)


class CharModel(TrainingOwner):
    """A ``TrainingOwner`` over named layers and one optimizer; subclasses write ``compile_step``.

    Args:
        layers: the model's layers by role (``{"embed": LookupTable(...), ...}``), named after
            their role unless the user named them, so checkpoint keys read ``encoder/...``.
        backend: the transformer backend; **transformer_options: passed to ``make_transformer``.

    Attributes:
        epoch, history, optimizer (set by ``fit``).
    """

    def __init__(self, layers: Mapping[str, Layer], backend: str | None = None, **transformer_options: Any) -> None:
        for role, layer in layers.items():
            if not layer.explicit_name and not layer.built:
                layer.rename(role)  # stable checkpoint keys: "encoder/LSTMCell_0/W_x", whatever was built before
        self.layers = dict(layers)
        self.backend = default_backend(backend)
        self.transformer_options = transformer_options
        self.epoch = 0
        self.history = History()
        self.stop_training = False
        self.optimizer: Any = None
        self._steps: dict[tuple[Any, ...], Any] = {}
        self._inference: dict[tuple[Any, ...], Any] = {}

    # -- what subclasses write --------------------------------------------------------------------------
    def compile_step(self, shape: tuple[int, ...]) -> Any:
        """The training computation for one batch shape: ``(*inputs) -> (cost, None)``."""
        raise NotImplementedError

    def build(self) -> None:
        """Create every layer's variables (a small graph through the whole model)."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------------------
    def ensure_built(self) -> None:
        """``build()`` unless every layer has its variables already."""
        if not all(layer.built for layer in self.layers.values()):
            self.build()

    @property
    def variables(self) -> list[ng.Op]:
        """Every layer's variables, in role order."""
        return [v for layer in self.layers.values() for v in layer.variables]

    @property
    def trainable_variables(self) -> list[ng.Op]:
        return [v for layer in self.layers.values() for v in layer.trainable_variables]

    def caches(self) -> list[Any]:
        return [self._steps, self._inference]

    def optimizers(self) -> list[Any]:
        return [self.optimizer] if self.optimizer is not None else []

    def set_optimizer(self, optimizer: Any) -> None:
        """Train with ``optimizer`` from now on (its state is created for the model's variables now)."""
        self.ensure_built()
        if optimizer is not self.optimizer:
            self._steps.clear()
        self.optimizer = optimizer
        bind_optimizer(optimizer, self.trainable_variables)

    def training_step(self, shape: tuple[int, ...]) -> Any:
        """The cached training computation for ``shape`` (compiled on first use)."""
        if self.optimizer is None:
            raise CharModelError(f"{type(self).__name__}: no optimizer; hint: fit(...) or set_optimizer(Adam(...))")
        entry = self._steps.get(shape)
        if entry is None:
            entry = self._steps[shape] = self.compile_step(shape)
        return entry

    def inference(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """An inference computation cached under ``key`` (built by ``build()`` on first use)."""
        entry = self._inference.get(key)
        if entry is None:
            self.ensure_built()
            entry = self._inference[key] = build()
        return entry

    def fit(self, dataset: Any, num_epochs: int, optimizer: Any, step: Callable[[Any, Any], Mapping[str, float]],
            callbacks: Iterable[Callback] | None = None, end_epoch: Callable[[int], Mapping[str, float]] | None = None,
            resume_from: str | Path | None = None, progress: bool = False) -> History:
        """Train with ``fit_loop``: per epoch ``lr``, ``train_cost`` (the step's ``cost``), ``end_epoch``'s values.

        Args:
            dataset: yields ``(x, y)`` batches, ``x`` with the batch axis last.
            num_epochs: the epoch to stop at (counting those trained already).
            optimizer: bound to the model's variables before anything runs (``set_optimizer``).
            step: ``step(x, y) -> {"cost": ...}``, one update.
            callbacks, end_epoch, resume_from, progress: as ``fit_loop``.

        Returns:
            the ``History``.
        """
        self.set_optimizer(optimizer)
        return fit_loop(self, dataset, num_epochs, step, learning_rates={"lr": optimizer},
                        means={"cost": "train_cost"}, callbacks=callbacks, initial_epoch=self.epoch,
                        resume_from=resume_from, progress=progress, end_epoch=end_epoch,
                        who=f"{type(self).__name__}.fit")

    def config(self) -> dict[str, Any]:
        """Plain data describing the model (written into checkpoints)."""
        return {"class_name": type(self).__name__}

    def save_params(self, path: str | Path, allow_non_finite: bool = False) -> None:
        """Weights, optimizer state, epoch and history to HDF5, atomically (``neon.saving``); weights
        holding NaN or inf are refused (``CheckpointError``) unless ``allow_non_finite``."""
        self.ensure_built()
        self.save(path, (), [self.config()], allow_non_finite=allow_non_finite)

    def load_params(self, path: str | Path, optimizer_state: bool = True) -> None:
        """Load ``save_params``' file (weights, epoch, history; the optimizer state when one is set).

        Raises:
            CheckpointError: a file of another architecture (nothing is written then).
        """
        self.ensure_built()
        load_params(self, path, optimizer_state)


def record_vocabulary(record: Mapping[str, Any]) -> Vocabulary:
    """The vocabulary a checkpoint record lists (``vocab``: every token in id order, specials included).

    Raises:
        CheckpointError: no list of distinct strings (``neon.load_model`` names the file).
    """
    tokens = record.get("vocab")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise CheckpointError(f"expected the record's vocab as a list of strings, received {short_repr(tokens)}; "
                              "hint: the checkpoint's meta was edited or damaged")
    return Vocabulary(tokens, specials=())


__all__ = ["CharModel", "CharModelError", "feedback_decode", "gumbel_noise", "masked_cross_entropy",
           "record_vocabulary"]
