"""``GAN``: a generator and a discriminator trained with alternating updates and two optimizers.

One step (``k`` discriminator updates, then one generator update) per batch of real data:

* **D step** — ``d_cost = BCE(D(x), 1) + BCE(D(stop_gradient(G(z))), 0)``, minimised over the
  discriminator's trainable variables only, with ``d_optimizer``;
* **G step** — the non-saturating cost ``g_cost = BCE(D(G(z')), 1)`` (Goodfellow et al. 2014),
  minimised over the generator's trainable variables only, with ``g_optimizer``; D is read
  (its updated weights) but never written.

Each step is its own compiled computation (one D and one G computation per batch size, on the
model's one transformer), so the G step sees the discriminator after its update. Each
optimizer is called with its own model's variable list, so it creates state and assignments
for those variables only; ``stop_gradient`` on the fake images keeps the D step from
building the generator's backward pass. Both networks run in ``training_mode(True)``
(batch statistics in ``BatchNorm``); the running averages are updated by a network's own step
only: G's in the G step, D's in the D step from the real batch (D sees real and fake
batches separately, as in the DCGAN reference code, and the fake batch's statistics do not
enter D's running averages).

**Noise.** ``z`` is a placeholder ``[Z:noise_dim, N]`` fed with standard normal noise drawn
fresh for every step (D and G steps draw separately) from a NumPy generator seeded by
``seed`` — so a run is reproducible, and ``generate(n, seed)`` gives the same images for the
same seed and weights. Feeding the noise (rather than ``ng.normal`` in the graph) keeps the
noise independent of the transformer and lets ``generate`` take any seed.

Example:
    >>> gan = GAN(generator_layers, discriminator_layers, noise_dim=100, seed=0)
    >>> history = gan.fit(ArrayIterator(X, batch_size=64, lshape=(1, 28, 28), shuffle=True, seed=0),
    ...                   num_epochs=5, d_optimizer=Adam(2e-4, beta_1=0.5), g_optimizer=Adam(2e-4, beta_1=0.5))
    >>> images = gan.generate(64, seed=1)  # (64, 1, 28, 28)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from .callbacks import Callback, History
from .containers import Sequential
from .costs import CrossEntropyBinary
from .data import DataError, dataset_shapes
from .inputs import sample_placeholder
from .layers import Layer, training_mode
from .layers.base import name_children
from .layers.serialization import deserialize_layer, serialize_layer
from .model import ModelError
from .saving import CheckpointError, load_params
from .training import (
    ComputationCache,
    TrainingOwner,
    bind_optimizer,
    default_backend,
    fit_loop,
    graph_updates,
    trainable_set,
)

NOISE_AXIS = "Z"


def _as_layer(layers: Any, name: str) -> Layer:
    if isinstance(layers, (list, tuple)):
        return Sequential(list(layers), name=name)
    if not isinstance(layers, Layer):
        raise ModelError(f"GAN: expected the {name} as a layer or a list of layers, received {type(layers).__name__}")
    return layers


class GAN(TrainingOwner):
    """A generative adversarial network (see the module docstring for the steps and the noise).

    Args:
        generator: layers mapping noise ``[Z:noise_dim, N]`` to samples (a list becomes a
            ``Sequential`` named ``generator``).
        discriminator: layers mapping samples to one probability ``[Out:1, N]`` (a sigmoid
            output; a list becomes a ``Sequential`` named ``discriminator``).
        noise_dim: the length of the noise axis.
        seed: seeds the training noise (``fit``).
        backend: the transformer backend (default: ``$NG_BACKEND``, else numpy; see ``Model``).
        **transformer_options: passed to ``ng.transformers.make_transformer``.

    Attributes:
        epoch, history (per epoch ``d_cost``, ``g_cost``, ``d_lr``, ``g_lr``), sample_shape.

    Raises:
        ModelError: bad arguments.
    """

    def __init__(self, generator: Any, discriminator: Any, noise_dim: int = 100, seed: int = 0,
                 backend: str | None = None, **transformer_options: Any) -> None:
        if isinstance(noise_dim, bool) or not isinstance(noise_dim, int) or noise_dim < 1:
            raise ModelError(f"GAN: noise_dim must be an int >= 1, received {noise_dim!r}")
        self.generator = _as_layer(generator, "generator")
        self.discriminator = _as_layer(discriminator, "discriminator")
        name_children([self.generator, self.discriminator])  # unnamed networks: Sequential_0, Sequential_1
        if self.generator is self.discriminator:
            raise ModelError("GAN: the generator and the discriminator must be different layers")
        self.noise_dim = noise_dim
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.backend = default_backend(backend)
        self.transformer_options = transformer_options
        self.sample_shape: tuple[int, ...] | None = None
        self.epoch = 0
        self.history = History()
        self.stop_training = False
        self.d_optimizer: Any = None
        self.g_optimizer: Any = None
        self._d_steps = ComputationCache(lambda: trainable_set(self.discriminator.variables))
        self._g_steps = ComputationCache(lambda: trainable_set(self.generator.variables))
        self._generate: dict[int, tuple[Any, ng.Op]] = {}

    # -- graphs (one transformer holds both networks' variables) --------------------------------------
    def caches(self) -> list[Any]:
        return [self._d_steps, self._g_steps, self._generate]

    def optimizers(self) -> list[Any]:
        return [opt for opt in (self.d_optimizer, self.g_optimizer) if opt is not None]

    @property
    def variables(self) -> list[ng.Op]:
        """The generator's variables, then the discriminator's."""
        return list(self.generator.variables) + list(self.discriminator.variables)

    def _noise(self, n: int) -> ng.Op:
        return ng.placeholder([ng.make_axis(self.noise_dim, NOISE_AXIS), ng.make_axis(n, "N")], name="z")

    def _real(self, n: int) -> ng.Op:
        shape = self.sample_shape
        if shape is None:
            raise ModelError("GAN: no sample shape yet; hint: fit it, or build(sample_shape) first")
        return sample_placeholder(shape, n)

    def _fake(self, z: ng.Op, training: bool) -> ng.Op:
        with training_mode(training):
            fake = self.generator(z)
        shape = tuple(a.length for a in fake.axes if not a.is_batch)
        if fake.axes.batch_axis is None or shape != self.sample_shape:
            raise ModelError(f"GAN: the generator outputs {fake.axes}, expected samples of shape "
                             f"{self.sample_shape} with the batch axis N last")
        real = self._real(fake.axes.batch_axis.length)  # D sees fakes on the real samples' axes
        rest = iter(a for a in real.axes if not a.is_batch)
        if [a.name for a in fake.axes if not a.is_batch] != [a.name for a in real.axes if not a.is_batch]:
            fake = ng.cast_axes(fake, [a if a.is_batch else next(rest) for a in fake.axes])
        return fake

    def _discriminate(self, x: ng.Op) -> ng.Op:
        """D(x) in training mode."""
        with training_mode(True):
            p = self.discriminator(x)
        if not isinstance(p, ng.Op) or p.axes.batch_axis is None or p.axes.size != p.axes.batch_axis.length:
            raise ModelError(f"GAN: the discriminator must output one probability per sample ([Out:1, N]), "
                             f"received {p.axes if isinstance(p, ng.Op) else type(p).__name__}")
        return p

    @staticmethod
    def _labels(p: ng.Op, value: float) -> ng.Op:
        return ng.constant(value, axes=p.axes)

    def build(self, sample_shape: tuple[int, ...], batch_size: int = 1) -> None:
        """Create both networks' variables for samples of ``sample_shape`` (fit does it for you)."""
        shape = tuple(int(s) for s in sample_shape)
        if self.sample_shape is not None and shape != self.sample_shape:
            raise DataError(f"GAN: samples of shape {shape}, expected {self.sample_shape}")
        self.sample_shape = shape
        fake = self._fake(self._noise(batch_size), False)
        with training_mode(False):
            self.discriminator(fake)
        self._bind_optimizers()

    def _bind_optimizers(self) -> None:
        """Create both optimizers' state for their network's variables (once built and set)."""
        if self.sample_shape is not None and self.d_optimizer is not None:
            bind_optimizer(self.d_optimizer, self.discriminator.variables)
            bind_optimizer(self.g_optimizer, self.generator.variables)

    def _check_optimizers(self, d_optimizer: Any, g_optimizer: Any) -> None:
        if d_optimizer is None or g_optimizer is None or d_optimizer is g_optimizer:
            raise ModelError("GAN.fit: expected two distinct optimizers, d_optimizer and g_optimizer")
        self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer
        self._bind_optimizers()

    def d_step_computation(self, n: int) -> Any:
        """The D step for batch size ``n``: ``(x, z) -> (d_cost, None)``, updating D only."""
        return self._d_steps.get(n, self._compile_d_step, key=(self.d_optimizer,))

    def _compile_d_step(self, n: int) -> Any:
        x, z = self._real(n), self._noise(n)
        bce = CrossEntropyBinary()
        p_real = self._discriminate(x)
        p_fake = self._discriminate(ng.stop_gradient(self._fake(z, True)))
        d_cost = bce(p_real, self._labels(p_real, 1.0)) + bce(p_fake, self._labels(p_fake, 0.0))
        update = self.d_optimizer(d_cost, self.discriminator.trainable_variables)
        # D's running averages follow the real batch only: the updates computed from x, not from z
        updates = graph_updates(self.discriminator, [x])
        return self.transformer.computation([d_cost, ng.doall([update, *updates])], x, z)

    def g_step_computation(self, n: int) -> Any:
        """The G step for batch size ``n``: ``z -> (g_cost, None)``, updating G only."""
        return self._g_steps.get(n, self._compile_g_step, key=(self.g_optimizer,))

    def _compile_g_step(self, n: int) -> Any:
        z = self._noise(n)
        p_fake = self._discriminate(self._fake(z, True))  # D is read, never written, in the G step
        g_cost = CrossEntropyBinary()(p_fake, self._labels(p_fake, 1.0))
        update = self.g_optimizer(g_cost, self.generator.trainable_variables)
        return self.transformer.computation([g_cost, ng.doall([update, *graph_updates(self.generator, [z])])], z)

    def draw_noise(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """Standard normal noise ``(noise_dim, n)`` (batch last), from ``rng`` or the training generator."""
        return (rng or self.rng).standard_normal((self.noise_dim, n)).astype(np.float32)

    def train_step(self, x: np.ndarray, k: int = 1) -> tuple[float, float]:
        """``k`` D steps on the real batch ``x`` (batch last) and one G step; ``(d_cost, g_cost)``.

        ``d_cost`` is the mean over the ``k`` D steps. Needs ``d_optimizer``/``g_optimizer`` set
        (``fit`` sets them, or ``set_optimizers``).
        """
        n = int(x.shape[-1])
        d_step, g_step = self.d_step_computation(n), self.g_step_computation(n)
        d_total = 0.0
        for _ in range(k):
            d_total += float(d_step(x, self.draw_noise(n))[0])
        g_cost = float(g_step(self.draw_noise(n))[0])
        return d_total / k, g_cost

    def set_optimizers(self, d_optimizer: Any, g_optimizer: Any) -> None:
        """Use these optimizers for ``train_step`` (``fit`` calls it)."""
        self._check_optimizers(d_optimizer, g_optimizer)

    # -- training ------------------------------------------------------------------------------------
    def fit(self, dataset: Any, num_epochs: int, d_optimizer: Any, g_optimizer: Any,
            callbacks: Iterable[Callback] | None = None, k: int = 1, resume_from: str | Path | None = None,
            progress: bool = False, terminate_on_nan: bool = True) -> History:
        """Train for epochs ``self.epoch .. num_epochs - 1`` (targets, if any, are ignored).

        Args:
            dataset: an ``ArrayIterator`` (or any iterable of ``(x, y)`` batches, batch last) of real samples.
            num_epochs: the epoch to stop at (the total, counting epochs already trained).
            d_optimizer, g_optimizer: the discriminator's and the generator's optimizers.
            callbacks: ``Callback`` objects (they see ``d_cost``/``g_cost`` per minibatch and epoch;
                ``self.stop_training = True`` ends training after the epoch).
            k: discriminator steps per generator step.
            resume_from: a checkpoint (``save_params``/``Checkpoint``): load both networks' weights,
                both optimizers' state, the epoch and the history, and continue from that epoch — to
                the same result as an uninterrupted run (the noise generator's state is saved too).
            progress: show a tqdm progress bar.

        Returns:
            the ``History``: per epoch ``d_cost``, ``g_cost`` (means over the samples), ``d_lr``, ``g_lr``.

        Example:
            >>> gan.fit(train, 10, Adam(2e-4, beta_1=0.5), Adam(2e-4, beta_1=0.5))["g_cost"]
        """
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 0:
            raise ModelError(f"GAN.fit: num_epochs must be an int >= 0, received {num_epochs!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ModelError(f"GAN.fit: k must be an int >= 1, received {k!r}")
        shape, _ = dataset_shapes(dataset, "dataset")
        if self.sample_shape is None:
            self.build(shape)
        elif tuple(shape) != self.sample_shape:
            raise DataError(f"GAN.fit: samples of shape {tuple(shape)}, expected {self.sample_shape}")
        self._check_optimizers(d_optimizer, g_optimizer)  # both optimizers' state exists from here on

        def step(x: np.ndarray, _y: Any) -> dict[str, float]:
            d_cost, g_cost = self.train_step(np.asarray(x, dtype=np.float32), k)
            return {"d_cost": d_cost, "g_cost": g_cost, "cost": g_cost}

        return fit_loop(self, dataset, num_epochs, step, learning_rates={"d_lr": d_optimizer, "g_lr": g_optimizer},
                        means={"d_cost": "d_cost", "g_cost": "g_cost"}, callbacks=callbacks,
                        initial_epoch=self.epoch, resume_from=resume_from, progress=progress, who="GAN.fit",
                        terminate_on_nan=terminate_on_nan)

    # -- sampling --------------------------------------------------------------------------------------
    def generate(self, n: int, seed: int | None = 0, z: np.ndarray | None = None,
                 batch_size: int | None = None) -> np.ndarray:
        """``n`` samples from the generator in inference mode, batch first: ``(n, *sample_shape)``.

        Args:
            n: how many.
            seed: seeds the noise (same seed and weights, same samples).
            z: noise ``(noise_dim, n)`` to use instead (batch last).
            batch_size: computed in chunks of this size (default ``n``).
        """
        if self.sample_shape is None:
            raise ModelError("GAN.generate: the GAN has no variables yet; hint: fit it or load_params first")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ModelError(f"GAN.generate: n must be an int >= 1, received {n!r}")
        if z is None:
            z = self.draw_noise(n, np.random.default_rng(seed))
        z = np.asarray(z, dtype=np.float32)
        if z.shape != (self.noise_dim, n):
            raise ModelError(f"GAN.generate: z must have shape {(self.noise_dim, n)}, received {z.shape}")
        size = batch_size or n
        chunks = []
        for start in range(0, n, size):
            part = z[:, start:start + size]
            m = part.shape[1]
            if m not in self._generate:
                zp = self._noise(m)
                fake = self._fake(zp, False)
                self._generate[m] = (self.transformer.computation(fake, zp, mode="inference"), fake)
            comp, fake = self._generate[m]
            out = comp(np.ascontiguousarray(part))
            chunks.append(np.moveaxis(out, fake.axes.index(fake.axes.batch_axis), 0))
        return np.concatenate(chunks, axis=0)

    # -- checkpoints -------------------------------------------------------------------------------------
    def save_params(self, path: str | Path, allow_non_finite: bool = False) -> None:
        """Both networks' weights, both optimizers' state, the epoch and the history, to HDF5 (atomic).

        Raises:
            ModelError: no variables yet. CheckpointError: a weight holds NaN or inf (a diverged run)
                and not ``allow_non_finite``; nothing is written then.
        """
        if self.sample_shape is None:
            raise ModelError("GAN.save_params: the GAN has no variables yet")
        self.save(path, self.sample_shape, [{"class_name": "GAN", "noise_dim": self.noise_dim,
                                             "generator": serialize_layer(self.generator),
                                             "discriminator": serialize_layer(self.discriminator)}],
                  allow_non_finite=allow_non_finite)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], input_shape: tuple[int, ...] | None, *,
                    custom_objects: Mapping[str, type] | None = None, backend: str | None = None,
                    **transformer_options: Any) -> GAN:
        """The GAN ``save_params`` described: both networks from their layer configs, built for ``input_shape``.

        Raises:
            CheckpointError: a file written before GAN checkpoints recorded the networks' configs,
                or without a sample shape.

        Example:
            >>> gan = neon.load_model("out/dcgan_mnist/dcgan_mnist.h5")   # calls this
        """
        networks = [record.get(key) for key in ("generator", "discriminator")]
        if not all(isinstance(n, dict) for n in networks) or input_shape is None:
            raise CheckpointError("expected a GAN checkpoint recording its generator's and discriminator's layer "
                                  "configs and a sample shape, received one without them (written by an older "
                                  "GAN.save_params); hint: build the GAN with its generator and discriminator, then "
                                  "gan.load_params(path)")
        custom = dict(custom_objects or {})
        generator, discriminator = (deserialize_layer(n, custom_objects=custom, memo={}) for n in networks)
        gan = cls(generator, discriminator, noise_dim=record.get("noise_dim"), backend=backend, **transformer_options)
        gan.build(tuple(input_shape))
        return gan

    def random_streams(self) -> dict[str, Any]:
        """``TrainingOwner.random_streams`` plus the training noise generator's state."""
        return {**super().random_streams(), "noise": self.rng.bit_generator.state}

    def check_random_streams(self, streams: Mapping[str, Any]) -> None:
        """``TrainingOwner.check_random_streams`` plus the noise generator's state (tried on a scratch copy)."""
        super().check_random_streams(streams)
        if "noise" in streams:
            scratch = np.random.default_rng(0)
            try:
                scratch.bit_generator.state = streams["noise"]
            except (TypeError, ValueError, KeyError) as exc:
                raise CheckpointError(f"checkpoint random streams: the noise state does not fit: {exc}") from exc

    def restore_random_streams(self, streams: Mapping[str, Any]) -> None:
        """Put back the transformer's streams and the noise generator (a resumed fit draws the same noise)."""
        super().restore_random_streams(streams)  # checks everything first
        if "noise" in streams:
            self.rng.bit_generator.state = streams["noise"]

    def load_params(self, path: str | Path, optimizer_state: bool = True) -> None:
        """Load ``save_params``' file: weights, epoch, history, the training noise generator's state and
        (``optimizer_state``, for the optimizers set: ``set_optimizers`` or ``fit``) both optimizers' state.

        Raises:
            CheckpointError: a file that does not fit (nothing is written then).

        Example:
            >>> gan.set_optimizers(Adam(2e-4), Adam(2e-4)); gan.load_params("gan.h5")
        """
        load_params(self, path, optimizer_state, build=self._build_for_checkpoint)

    def _build_for_checkpoint(self, path: Path, data: Any) -> None:
        """Build an unbuilt GAN for the sample shape the checkpoint records."""
        if self.sample_shape is None:
            if data.input_shape is None:
                raise CheckpointError(f"{path}: records no sample shape")
            self.build(tuple(data.input_shape))

    def __repr__(self) -> str:
        return f"GAN(generator={self.generator!r}, discriminator={self.discriminator!r}, noise_dim={self.noise_dim})"
