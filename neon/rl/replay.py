"""Experience replay: a preallocated NumPy ring of transitions, sampled uniformly or by priority.

``ReplayBuffer`` keeps the last ``capacity`` transitions ``(obs, action, reward, next_obs, done)``
in arrays allocated once (``obs_dtype`` may be ``uint8`` for frames); ``sample`` draws a
``Batch`` (batch first) with every importance weight 1. ``PrioritizedReplayBuffer`` (Schaul et
al. 2016, proportional variant) draws transition ``i`` with probability ``p_i**alpha / sum_k
p_k**alpha`` from a sum tree (one stratified draw per segment of the total), weights it by
``(n * P(i))**-beta`` normalised by the largest weight any stored transition could get, and takes
new priorities ``|td_error| + eps`` through ``update_priorities``; a new transition gets the
largest priority seen so far, so it is replayed at least once soon.

Example:
    >>> buffer = PrioritizedReplayBuffer(50_000, obs_shape=(4,), alpha=0.6, beta=0.4, seed=0)
    >>> buffer.add(obs, action, reward, next_obs, done)
    >>> batch = buffer.sample(64)
    >>> loss, td = agent.update(batch); buffer.update_priorities(batch.indices, td)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import ngraph_core as ng


class ReplayError(ng.NgraphError, ValueError):
    """A replay buffer was given a transition, a size or a priority it cannot use."""


class Batch(NamedTuple):
    """A sampled minibatch, batch first.

    Attributes:
        obs: ``(B, *obs_shape)`` observations.
        actions: ``(B,)`` int64 actions taken.
        rewards: ``(B,)`` float32 rewards.
        next_obs: ``(B, *obs_shape)`` the observations after the actions.
        dones: ``(B,)`` float32, 1 where the episode terminated (no bootstrap from ``next_obs``).
        weights: ``(B,)`` float32 importance weights (all 1 for uniform sampling).
        indices: ``(B,)`` int64 buffer slots, for ``update_priorities``.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    dones: np.ndarray
    weights: np.ndarray
    indices: np.ndarray


def _check_int(who: str, what: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ReplayError(f"{who}: expected {what} to be an int >= {low}, received {value!r}")
    return int(value)


class ReplayBuffer:
    """A ring buffer of ``capacity`` transitions with uniform sampling (see the module docstring).

    Args:
        capacity: how many transitions are kept (the oldest is overwritten first).
        obs_shape: one observation's shape.
        obs_dtype: the stored observations' dtype (``np.uint8`` keeps Atari frames small).
        seed: seeds the sampling generator.

    Raises:
        ReplayError: a bad capacity or shape.

    Example:
        >>> buffer = ReplayBuffer(4, obs_shape=(2,))
        >>> for i in range(6): buffer.add([i, i], i % 2, 1.0, [i + 1, i + 1], False)
        >>> len(buffer), buffer.obs[:, 0]  # slots 0, 1 were overwritten by transitions 4, 5
        (4, array([4., 5., 2., 3.], dtype=float32))
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: Any = np.float32, seed: int = 0) -> None:
        who = type(self).__name__
        self.capacity = _check_int(who, "capacity", capacity, 1)
        self.obs_shape = tuple(_check_int(who, "obs_shape entries", s, 1) for s in obs_shape)
        self.obs = np.zeros((self.capacity, *self.obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros(self.capacity, dtype=np.int64)
        self.rewards = np.zeros(self.capacity, dtype=np.float32)
        self.dones = np.zeros(self.capacity, dtype=np.float32)
        self.position = 0  # the slot the next transition goes to
        self.size = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, obs: Any, action: int, reward: float, next_obs: Any, done: bool) -> int:
        """Store one transition (overwriting the oldest when full); returns its slot.

        Raises:
            ReplayError: an observation of another shape.
        """
        obs, next_obs = np.asarray(obs), np.asarray(next_obs)
        if obs.shape != self.obs_shape or next_obs.shape != self.obs_shape:
            raise ReplayError(f"{type(self).__name__}.add: expected observations of shape {self.obs_shape}, "
                              f"received {obs.shape} and {next_obs.shape}")
        slot = self.position
        self.obs[slot] = obs
        self.next_obs[slot] = next_obs
        self.actions[slot] = action
        self.rewards[slot] = reward
        self.dones[slot] = float(done)
        self.position = (slot + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return slot

    def _check_sample(self, batch_size: int) -> int:
        batch_size = _check_int(f"{type(self).__name__}.sample", "batch_size", batch_size, 1)
        if self.size == 0:
            raise ReplayError(f"{type(self).__name__}.sample: the buffer is empty; hint: add transitions first "
                              "(train_dqn waits learning_starts steps)")
        return batch_size

    def gather(self, indices: np.ndarray, weights: np.ndarray) -> Batch:
        """The transitions in slots ``indices`` as a ``Batch`` with these importance weights."""
        return Batch(self.obs[indices], self.actions[indices], self.rewards[indices], self.next_obs[indices],
                     self.dones[indices], weights.astype(np.float32), indices.astype(np.int64))

    def sample(self, batch_size: int) -> Batch:
        """``batch_size`` transitions drawn uniformly with replacement; weights all 1.

        Raises:
            ReplayError: an empty buffer or a bad batch size.
        """
        batch_size = self._check_sample(batch_size)
        indices = self.rng.integers(0, self.size, size=batch_size)
        return self.gather(indices, np.ones(batch_size, dtype=np.float32))

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Nothing to do for uniform sampling (so loops can call it on any buffer)."""


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay over a sum tree (see the module docstring).

    Args:
        capacity, obs_shape, obs_dtype, seed: as ``ReplayBuffer``.
        alpha: how much priorities count (0: uniform), >= 0.
        beta: the importance-sampling exponent used by ``sample`` (anneal it towards 1 by setting
            ``buffer.beta``), in [0, 1].
        eps: added to ``|td_error|`` so no transition gets priority 0, > 0.

    Raises:
        ReplayError: a bad alpha, beta or eps.

    Example:
        >>> buffer = PrioritizedReplayBuffer(1000, (4,), alpha=0.6, beta=0.4)
        >>> batch = buffer.sample(32); buffer.update_priorities(batch.indices, td_errors)
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: Any = np.float32, seed: int = 0,
                 alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-6) -> None:
        super().__init__(capacity, obs_shape, obs_dtype, seed)
        for what, value, low, high in (("alpha", alpha, 0.0, np.inf), ("beta", beta, 0.0, 1.0), ("eps", eps, 0.0, 1.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high \
                    or (what == "eps" and value == 0):
                raise ReplayError(f"PrioritizedReplayBuffer: expected {what} in [{low}, {high}]"
                                  f"{' and > 0' if what == 'eps' else ''}, received {value!r}")
        self.alpha, self.beta, self.eps = float(alpha), float(beta), float(eps)
        self.leaves = 1 << (self.capacity - 1).bit_length()  # a full binary tree: leaf i at node leaves + i
        self.sums = np.zeros(2 * self.leaves, dtype=np.float64)
        self.mins = np.full(2 * self.leaves, np.inf, dtype=np.float64)
        self.max_priority = 1.0

    def _set(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Write ``p**alpha`` values at leaves ``indices`` and recompute their ancestors, level by level."""
        nodes = np.asarray(indices, dtype=np.int64) + self.leaves
        self.sums[nodes] = values
        self.mins[nodes] = values
        while nodes[0] > 1:
            nodes = np.unique(nodes // 2)
            self.sums[nodes] = self.sums[2 * nodes] + self.sums[2 * nodes + 1]
            self.mins[nodes] = np.minimum(self.mins[2 * nodes], self.mins[2 * nodes + 1])

    def add(self, obs: Any, action: int, reward: float, next_obs: Any, done: bool) -> int:
        slot = super().add(obs, action, reward, next_obs, done)
        self._set(np.array([slot]), np.array([self.max_priority ** self.alpha]))
        return slot

    def probabilities(self) -> np.ndarray:
        """``P(i)`` of every stored slot (``p_i**alpha / sum_k p_k**alpha``), for inspection and tests."""
        return self.sums[self.leaves:self.leaves + self.size] / self.sums[1]

    def _find(self, targets: np.ndarray) -> np.ndarray:
        """The leaves whose prefix-sum interval holds each target (a vectorised walk down the tree)."""
        nodes = np.ones(len(targets), dtype=np.int64)
        targets = targets.copy()
        while nodes[0] < self.leaves:
            left = 2 * nodes
            go_right = targets >= self.sums[left]
            targets = np.where(go_right, targets - self.sums[left], targets)
            nodes = np.where(go_right, left + 1, left)
        return np.minimum(nodes - self.leaves, self.size - 1)  # float round-off at the very end

    def sample(self, batch_size: int, beta: float | None = None) -> Batch:
        """``batch_size`` transitions by priority (one stratified draw per equal segment of the total).

        Args:
            batch_size: how many.
            beta: the importance exponent for this draw (default ``self.beta``).

        Returns:
            a ``Batch`` with weights ``(n * P(i))**-beta / max_k (n * P(k))**-beta``, the max over the
            stored transitions (so weights are <= 1).
        """
        batch_size = self._check_sample(batch_size)
        beta = self.beta if beta is None else float(beta)
        total = self.sums[1]
        bounds = np.arange(batch_size + 1, dtype=np.float64) * (total / batch_size)
        targets = self.rng.uniform(bounds[:-1], bounds[1:])
        indices = self._find(targets)
        probs = self.sums[indices + self.leaves] / total
        weights = (self.size * probs) ** -beta / (self.size * self.mins[1] / total) ** -beta
        return self.gather(indices, weights)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Set the priorities of slots ``indices`` to ``|td_errors| + eps``.

        Raises:
            ReplayError: unequal lengths, a slot not stored, or a non-finite error.
        """
        indices = np.asarray(indices, dtype=np.int64)
        priorities = np.abs(np.asarray(td_errors, dtype=np.float64)) + self.eps
        if indices.shape != priorities.shape or (indices.size and (indices.min() < 0 or indices.max() >= self.size)):
            slots = f"{indices.min()}..{indices.max()}" if indices.size else "none"
            raise ReplayError(f"PrioritizedReplayBuffer.update_priorities: expected one TD error per slot, slots in "
                              f"[0, {self.size}); received {priorities.size} errors for {indices.size} slots ({slots})")
        if not np.all(np.isfinite(priorities)):
            raise ReplayError("PrioritizedReplayBuffer.update_priorities: received a non-finite TD error; "
                              "hint: lower the learning rate or clip gradients")
        if indices.size:
            self.max_priority = max(self.max_priority, float(priorities.max()))
            self._set(indices, priorities ** self.alpha)
