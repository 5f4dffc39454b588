"""``DQNAgent``: a deep Q-network with a target network, Double DQN targets and the Huber loss.

One update is ONE compiled computation on the agent's transformer, fed a ``Batch`` (batch last):

* ``q = online(obs)``, ``q_sa = sum_A(q * one_hot(actions))``;
* the bootstrap value of ``next_obs`` — Double DQN (van Hasselt et al. 2016): the online network
  picks ``a* = argmax_A online(next_obs)`` and the target network rates it,
  ``target(next_obs)[a*]``; plain DQN: ``max_A target(next_obs)``;
* ``y = stop_gradient(r + gamma * (1 - done) * bootstrap)``, ``td = q_sa - y``;
* ``loss = mean_N(weights * huber(td, delta))`` (weights: importance weights of prioritized replay);
* the optimizer's step on the online network's trainable variables (its gradient clipping, e.g.
  ``Adam(gradient_clip_norm=10)``, applies), returning ``(loss, td)``.

The target network is a second copy of the layers (built from the online network's config, named
``target``) whose variables are written only by ``sync_target``: a hard copy (``tau=1``), or Polyak
averaging ``target = tau * online + (1 - tau) * target`` — each one compiled computation too.

Example:
    >>> agent = DQNAgent([Affine(64, activation="relu", bias=Constant(0)), Affine(2, bias=Constant(0))],
    ...                  obs_shape=(4,), n_actions=2, optimizer=Adam(1e-3, gradient_clip_norm=10))
    >>> action = agent.act(obs, epsilon=0.1)
    >>> loss, td = agent.update(buffer.sample(64)); agent.sync_target()
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from ..callbacks import History
from ..containers import Sequential
from ..initializers import filling_shapes_only, set_seed
from ..layers import Layer, training_mode
from ..layers.serialization import deserialize_layer, serialize_layer
from ..optimizers import Adam
from ..saving import CheckpointError, checkpoint_keys, load_params
from ..training import ComputationCache, TrainingOwner, bind_optimizer, default_backend
from .replay import Batch

FEATURE_AXIS_NAMES = {1: ("F",), 2: ("H", "W"), 3: ("C", "H", "W")}


class RLError(ng.NgraphError, ValueError):
    """A DQN agent or loop was given an argument or a batch it cannot use."""


def _check_delta(who: str, delta: Any) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not delta > 0:
        raise RLError(f"{who}: expected delta to be a number > 0, received {delta!r}")
    return float(delta)


def huber(x: ng.Op, delta: float = 1.0) -> ng.Op:
    """The Huber function of each element: ``0.5 x**2`` where ``|x| <= delta``, else ``delta (|x| - delta / 2)``.

    Its gradient is ``x`` clipped to ``[-delta, delta]`` — the "error clipping" of the DQN paper.

    Args:
        x: any op.
        delta: the width of the quadratic zone, > 0.

    Returns:
        an op with ``x``'s axes.

    Raises:
        RLError: a non-positive delta.

    Example:
        >>> loss = ng.mean(huber(q_sa - y))
    """
    delta = _check_delta("huber", delta)
    ax = ng.absolute(x)
    return ng.where(ng.less_equal(ax, delta), 0.5 * ng.square(x), delta * (ax - 0.5 * delta))


def _positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise RLError(f"DQNAgent: expected {what} to be an int >= 1, received {value!r}")
    return int(value)


class DQNAgent(TrainingOwner):
    """A DQN agent over neon layers (see the module docstring for the update).

    Args:
        layers: a layer or a list of layers mapping observations ``[*obs axes, N]`` to Q-values
            ``[A:n_actions, N]`` (no output activation); they become the ``online`` network.
        obs_shape: one observation's shape (axes named ``F``; ``H, W``; or ``C, H, W``).
        n_actions: the number of discrete actions.
        optimizer: default ``Adam(1e-3, gradient_clip_norm=10)``.
        gamma: the discount, in [0, 1].
        double: Double DQN targets (else the plain max over the target network).
        huber_delta: the Huber loss's quadratic zone (> 0).
        batch_size: the batch size train_dqn samples (update compiles one computation per size it is given).
        obs_scale: observations are multiplied by it in the graph (``1/255`` for uint8 frames).
        seed: seeds the initial weights (``neon.initializers.set_seed``, the generator initializers without
            a seed of their own share), the transformer and epsilon-greedy exploration.
        backend: the transformer backend (``"numpy"``, ``"cupy"``, ``"auto"``; default ``$NG_BACKEND``, else numpy).

    Attributes:
        online, target: the two ``Sequential`` networks; updates: the updates performed so far.

    Raises:
        RLError: bad arguments, or layers whose output is not ``n_actions`` values per sample.

    Example:
        >>> agent = DQNAgent([Affine(64, activation="relu", bias=Constant(0)), Affine(2, bias=Constant(0))],
        ...                  obs_shape=(4,), n_actions=2)
    """

    def __init__(self, layers: Any, obs_shape: tuple[int, ...], n_actions: int, optimizer: Any = None,
                 gamma: float = 0.99, double: bool = True, huber_delta: float = 1.0, batch_size: int = 64,
                 obs_scale: float = 1.0, seed: int = 0, backend: str | None = None) -> None:
        self.obs_shape = tuple(_positive_int("obs_shape entries", s) for s in obs_shape)
        if len(self.obs_shape) not in FEATURE_AXIS_NAMES:
            raise RLError(f"DQNAgent: expected observations of 1 to 3 dimensions, received shape {self.obs_shape}; "
                          "hint: flatten them with a reshape in your environment wrapper")
        self.n_actions = _positive_int("n_actions", n_actions)
        self.batch_size = _positive_int("batch_size", batch_size)
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
            raise RLError(f"DQNAgent: expected gamma in [0, 1], received {gamma!r}")
        self.gamma, self.double = float(gamma), bool(double)
        self.huber_delta = _check_delta("DQNAgent", huber_delta)
        self.obs_scale = float(obs_scale)
        layers = list(layers) if isinstance(layers, (list, tuple)) else [layers]
        if not all(isinstance(layer, Layer) for layer in layers):
            raise RLError(f"DQNAgent: expected neon layers, received {[type(x).__name__ for x in layers]}")
        set_seed(seed)  # the same seed, the same initial weights
        self.online = Sequential(layers, name="online")
        config = serialize_layer(self.online)
        config["config"]["name"] = "target"
        self.target = deserialize_layer(config)
        self.optimizer = optimizer if optimizer is not None else Adam(1e-3, gradient_clip_norm=10.0)
        self.rng = np.random.default_rng(seed)
        self.backend, self.transformer_options = default_backend(backend), {"seed": seed}
        self.epoch, self.history, self.updates = 0, History(), 0
        self._train = ComputationCache()
        self._computations: dict[str, Any] = {}
        self._network(self.online, 1)  # the first calls build both networks' variables
        self._network(self.target, 1)
        bind_optimizer(self.optimizer, self.online.variables)
        if not filling_shapes_only():  # load_model builds shapes only, checks them, then writes every weight
            self.sync_target()  # both start equal

    # -- graphs ---------------------------------------------------------------------------------------
    def _obs(self, n: int, name: str) -> ng.Op:
        axes = [ng.make_axis(s, a) for s, a in zip(self.obs_shape, FEATURE_AXIS_NAMES[len(self.obs_shape)])]
        return ng.placeholder([*axes, ng.make_axis(n, "N")], name=name)

    def _network(self, net: Layer, n: int, x: ng.Op | None = None) -> tuple[ng.Op, ng.Op]:
        """``(x, Q(x))`` with Q on axes ``[A, N]``; the output axis is renamed ``A`` for both networks."""
        x = self._obs(n, "obs") if x is None else x
        with training_mode(False):
            q = net(ng.cast(x, "float32") * self.obs_scale if self.obs_scale != 1.0 else ng.cast(x, "float32"))
        feature = [a for a in q.axes if not a.is_batch]
        if len(q.axes) != 2 or q.axes[-1].name != "N" or feature[0].length != self.n_actions:
            raise RLError(f"DQNAgent: the network {net.name!r} outputs {q.axes}, expected [{self.n_actions}, N]; "
                          f"hint: end the layers with Affine({self.n_actions}) and no activation")
        return x, ng.cast_axes(q, [ng.make_axis(self.n_actions, "A"), q.axes[-1]])

    def _targets(self, rewards: ng.Op, next_obs: ng.Op, dones: ng.Op) -> ng.Op:
        """``r + gamma (1 - done) Q_target(s', a*)``, ``a*`` picked by the online net (Double DQN) or the target."""
        n = next_obs.axes[-1].length
        _, q_next_target = self._network(self.target, n, next_obs)
        actions = q_next_target.axes[0]
        if self.double:
            _, q_next_online = self._network(self.online, n, next_obs)
            best = ng.argmax(q_next_online, reduction_axes=[actions])
            bootstrap = ng.sum(q_next_target * ng.one_hot(best, actions), reduction_axes=[actions])
        else:
            bootstrap = ng.max(q_next_target, reduction_axes=[actions])
        return ng.stop_gradient(rewards + self.gamma * (1.0 - dones) * bootstrap)

    def _batch_placeholders(self, n: int) -> list[ng.Op]:
        batch = ng.make_axis(n, "N")
        return [self._obs(n, "obs"), ng.placeholder([batch], dtype="int64", name="actions"),
                ng.placeholder([batch], name="rewards"), self._obs(n, "next_obs"),
                ng.placeholder([batch], name="dones"), ng.placeholder([batch], name="weights")]

    def _compile_train(self, n: int) -> Any:
        obs, actions, rewards, next_obs, dones, weights = inputs = self._batch_placeholders(n)
        _, q = self._network(self.online, n, obs)
        q_sa = ng.sum(q * ng.one_hot(actions, q.axes[0]), reduction_axes=[q.axes[0]])
        td = q_sa - self._targets(rewards, next_obs, dones)
        loss = ng.mean(weights * huber(td, self.huber_delta))
        update = self.optimizer(loss, self.online.trainable_variables)
        return self.transformer.computation([loss, td, update], *inputs)

    def _computation(self, name: str, build: Any) -> Any:
        if name not in self._computations:
            self._computations[name] = build()
        return self._computations[name]

    def caches(self) -> list[Any]:
        return [self._train, self._computations]

    def optimizers(self) -> list[Any]:
        return [self.optimizer]

    # -- acting ------------------------------------------------------------------------------------------
    def _feed(self, obs: Any, n: int) -> np.ndarray:
        """Observations ``(n, *obs_shape)`` batch first -> batch last, as the graph's placeholders want."""
        obs = np.asarray(obs)
        if obs.shape != (n, *self.obs_shape):
            raise RLError(f"DQNAgent: expected observations of shape {(n, *self.obs_shape)}, received {obs.shape}")
        return np.ascontiguousarray(np.moveaxis(obs, 0, -1))

    def q_values(self, obs: Any, network: str = "online") -> np.ndarray:
        """The Q-values ``(B, n_actions)`` of observations ``(B, *obs_shape)`` by the ``"online"`` or
        the ``"target"`` network.

        Raises:
            RLError: observations of another shape, or another network name.

        Example:
            >>> agent.q_values(np.zeros((1, 4))).shape
            (1, 2)
        """
        obs = np.asarray(obs)
        n = obs.shape[0] if obs.ndim == len(self.obs_shape) + 1 else -1
        if n < 1:
            raise RLError(f"DQNAgent.q_values: expected a batch (B, *{self.obs_shape}), received shape {obs.shape}")
        if network not in ("online", "target"):
            raise RLError(f"DQNAgent.q_values: expected network 'online' or 'target', received {network!r}")

        def build() -> Any:
            x, q = self._network(self.online if network == "online" else self.target, n)
            return self.transformer.computation(q, x, mode="inference")

        return self._computation(f"{network}{n}", build)(self._feed(obs, n)).T

    def act(self, obs: Any, epsilon: float = 0.0) -> int:
        """An epsilon-greedy action for ONE observation: random with probability ``epsilon``, else the
        online network's argmax.

        Example:
            >>> agent.act(obs, epsilon=0.05)
            1
        """
        if self.rng.random() < epsilon:
            return int(self.rng.integers(self.n_actions))
        return int(np.argmax(self.q_values(np.asarray(obs)[None])[0]))

    # -- learning ----------------------------------------------------------------------------------------
    def _batch_feeds(self, batch: Batch) -> list[np.ndarray]:
        n = len(batch.actions)
        return [self._feed(batch.obs, n), np.asarray(batch.actions, dtype=np.int64),
                np.asarray(batch.rewards, dtype=np.float32), self._feed(batch.next_obs, n),
                np.asarray(batch.dones, dtype=np.float32), np.asarray(batch.weights, dtype=np.float32)]

    def update(self, batch: Batch) -> tuple[float, np.ndarray]:
        """One gradient step on a ``Batch`` (any size; one computation is compiled per size).

        Returns:
            ``(loss, td_errors)``: the weighted Huber loss before the step and ``q_sa - y`` per sample
            (feed ``td_errors`` to ``PrioritizedReplayBuffer.update_priorities``).

        Raises:
            RLError: observations of another shape.

        Example:
            >>> loss, td = agent.update(buffer.sample(64))
        """
        n = len(batch.actions)
        step = self._train.get(n, self._compile_train, key=(self.optimizer,))
        loss, td, _ = step(*self._batch_feeds(batch))
        self.updates += 1
        return float(loss), td

    def target_values(self, batch: Batch) -> np.ndarray:
        """The regression targets ``y`` the update would use for ``batch`` (no step taken), ``(B,)``."""
        n = len(batch.actions)

        def build() -> Any:
            obs, actions, rewards, next_obs, dones, weights = inputs = self._batch_placeholders(n)
            return self.transformer.computation(self._targets(rewards, next_obs, dones), *inputs, mode="inference")

        return self._computation(f"y{n}", build)(*self._batch_feeds(batch))

    def sync_target(self, tau: float = 1.0) -> None:
        """Move the target network towards the online one: ``target = tau * online + (1 - tau) * target``
        (``tau=1``: a hard copy).

        Raises:
            RLError: tau outside (0, 1].

        Example:
            >>> agent.sync_target()           # every 1000 steps
            >>> agent.sync_target(tau=0.005)  # or every step
        """
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0.0 < tau <= 1.0:
            raise RLError(f"DQNAgent.sync_target: expected tau in (0, 1], received {tau!r}")
        if tau == 1.0:
            def build() -> Any:
                pairs = zip(self.online.variables, self.target.variables, strict=True)
                return self.transformer.computation(ng.doall([ng.assign(t, o) for o, t in pairs]))
            self._computation("hard_sync", build)()
            return

        def build_soft() -> Any:
            tau_ph = ng.placeholder([], name="tau")
            pairs = zip(self.online.variables, self.target.variables, strict=True)
            return self.transformer.computation(
                ng.doall([ng.assign(t, tau_ph * o + (1.0 - tau_ph) * t) for o, t in pairs]), tau_ph)

        self._computation("soft_sync", build_soft)(np.float32(tau))

    # -- checkpoints -------------------------------------------------------------------------------------
    def checkpoint_keys(self) -> tuple[dict[str, ng.Op], dict[str, ng.Op]]:
        """Both networks' variables (online, then target) and the optimizer's state."""
        return checkpoint_keys(self.online.variables + self.target.variables, self.optimizers())

    def save_params(self, path: str | Path, allow_non_finite: bool = False) -> None:
        """Both networks' weights and the optimizer's state to an HDF5 checkpoint (atomic); ``epoch``
        records the number of updates. Weights holding NaN or inf are refused (``CheckpointError``,
        nothing written) unless ``allow_non_finite``.

        Example:
            >>> agent.save_params("dqn.h5")
        """
        self.epoch = self.updates
        self.save(path, self.obs_shape, [{"class_name": "DQNAgent", "n_actions": self.n_actions,
                                          "online": serialize_layer(self.online), "gamma": self.gamma,
                                          "double": self.double, "huber_delta": self.huber_delta,
                                          "batch_size": self.batch_size, "obs_scale": self.obs_scale}],
                  allow_non_finite=allow_non_finite)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], input_shape: tuple[int, ...] | None, *,
                    custom_objects: Mapping[str, type] | None = None, backend: str | None = None,
                    **transformer_options: Any) -> DQNAgent:
        """The agent ``save_params`` described: the online network from its config (the target is its
        copy), the observation shape, the action count and the update's settings. The optimizer is a
        default ``Adam``: the saved one's settings are not recorded, so its state is not restored.

        Raises:
            CheckpointError: a record without the online network or without an observation shape.

        Example:
            >>> agent = neon.load_model("out/dqn_cartpole/dqn_cartpole.h5")   # calls this
        """
        online = record.get("online")
        if not isinstance(online, dict) or input_shape is None:
            raise CheckpointError("expected a DQNAgent checkpoint recording its online network's layer config and "
                                  "the observation shape, received one without them; hint: build the agent in "
                                  "code and call agent.load_params(path)")
        layers = deserialize_layer(online, custom_objects=dict(custom_objects or {}), memo={})
        settings = {key: record[key] for key in ("gamma", "double", "huber_delta", "batch_size", "obs_scale")
                    if key in record}
        seed = transformer_options.pop("seed", 0)
        return cls(layers.layers if isinstance(layers, Sequential) else layers, obs_shape=tuple(input_shape),
                   n_actions=record.get("n_actions"), seed=seed, backend=backend, **settings)

    def restore(self, path: str | Path, data: Any = None, optimizer_state: bool = True) -> None:
        """``TrainingOwner.restore``, then ``updates`` from the restored ``epoch`` (``save_params`` writes it so)."""
        super().restore(path, data, optimizer_state)
        self.updates = self.epoch

    def load_params(self, path: str | Path, optimizer_state: bool = True) -> None:
        """Load ``save_params``' file into this agent (same layers).

        Raises:
            CheckpointError: a file that does not fit (nothing is written then).

        Example:
            >>> agent.load_params("dqn.h5")
        """
        load_params(self, path, optimizer_state)

    def __repr__(self) -> str:
        return (f"DQNAgent(online={self.online!r}, n_actions={self.n_actions}, gamma={self.gamma}, "
                f"double={self.double})")
