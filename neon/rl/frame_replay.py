"""``FrameReplayBuffer``: a replay of stacked Atari frames that stores each frame once.

A ``FrameStack`` observation ``[k, h, w]`` shares ``k - 1`` frames with the next one, so
storing two full stacks per transition (as ``ReplayBuffer`` does) keeps each frame ``2 k``
times. This buffer keeps one frame ring and rebuilds the stacks when sampling; a sampled
``Batch`` equals what a plain uint8 ``ReplayBuffer`` would return.

Example:
    >>> buffer = FrameReplayBuffer(100_000, obs_shape=(4, 84, 84), seed=0)
    >>> train_dqn(make_atari("ALE/Pong-v5"), agent, buffer, total_steps=50_000)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .replay import Batch, ReplayBuffer, ReplayError

__all__ = ["FrameReplayBuffer"]


class FrameReplayBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` for stacked frames that stores each frame once, not ``2 k`` times per transition.

    ``add`` takes the same ``(obs, action, reward, next_obs, done)`` as ``ReplayBuffer`` with
    ``obs`` a ``FrameStack`` observation ``[k, h, w]``. A transition that continues the previous
    one (its ``obs`` equals the previous ``next_obs``) stores one new frame, ``next_obs[-1]``;
    an episode's first transition also stores its first frame (``FrameStack`` repeats it ``k``
    times). ``sample`` rebuilds the stacks, repeating an episode's first frame as ``FrameStack``
    does, so a sampled ``Batch`` equals what ``ReplayBuffer`` would return. The frame ring holds
    ``2 (capacity + k) + 1`` frames, enough for every stored transition however short the
    episodes: a million 84x84 transitions take 14 GB here, against 56 GB as two uint8 stacks.

    Args:
        capacity: transitions kept (the oldest is overwritten first).
        obs_shape: ``(k, h, w)``, e.g. ``(4, 84, 84)``.
        seed: seeds the sampling generator.

    Raises:
        ReplayError: a bad capacity or shape; at ``add``, observations of another shape, a
            ``next_obs`` that is not ``obs`` shifted by one frame, or an episode's first ``obs``
            whose ``k`` frames differ (not a ``FrameStack`` reset).

    Example:
        >>> buffer = FrameReplayBuffer(100_000, (4, 84, 84), seed=0)   # 1.4 GB of frames
        >>> buffer.add(obs, action, reward, next_obs, terminated)
        >>> batch = buffer.sample(32)    # batch.obs: (32, 4, 84, 84) uint8
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...] = (4, 84, 84), seed: int = 0) -> None:
        # ReplayBuffer's own arrays would hold two stacks per transition: its __init__ is not called
        shape = tuple(obs_shape)
        if len(shape) < 2 or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1
                                     for n in shape):
            raise ReplayError(f"FrameReplayBuffer: expected obs_shape (k, h, w) of ints >= 1, received {obs_shape!r}; "
                              "hint: ReplayBuffer stores flat observations")
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ReplayError(f"FrameReplayBuffer: expected capacity to be an int >= 1, received {capacity!r}")
        self.capacity = int(capacity)
        self.obs_shape, self.k = tuple(int(n) for n in shape), int(shape[0])
        self.frame_slots = 2 * (self.capacity + self.k) + 1
        self.frames = np.zeros((self.frame_slots, *self.obs_shape[1:]), dtype=np.uint8)
        self.frames_written = 0
        self.next_frame = np.zeros(self.capacity, dtype=np.int64)  # absolute index of next_obs[-1]
        self.episode_start = np.zeros(self.capacity, dtype=np.int64)  # absolute index of the episode's first frame
        self.actions = np.zeros(self.capacity, dtype=np.int64)
        self.rewards = np.zeros(self.capacity, dtype=np.float32)
        self.dones = np.zeros(self.capacity, dtype=np.float32)
        self.position, self.size = 0, 0
        self.rng = np.random.default_rng(seed)
        self._last_next: np.ndarray | None = None
        self._start = 0

    def _push(self, frame: np.ndarray) -> int:
        self.frames[self.frames_written % self.frame_slots] = frame
        self.frames_written += 1
        return self.frames_written - 1

    def add(self, obs: Any, action: int, reward: float, next_obs: Any, done: bool) -> int:
        """Store one transition (see the class docstring); returns its slot.

        Raises:
            ReplayError: observations of another shape or that are not consecutive frame stacks.
        """
        obs, next_obs = np.asarray(obs), np.asarray(next_obs)
        if obs.shape != self.obs_shape or next_obs.shape != self.obs_shape:
            raise ReplayError(f"FrameReplayBuffer.add: expected observations of shape {self.obs_shape}, "
                              f"received {obs.shape} and {next_obs.shape}")
        if not np.array_equal(obs[1:], next_obs[:-1]):
            raise ReplayError("FrameReplayBuffer.add: expected next_obs to be obs shifted by one frame (a FrameStack "
                              "step), received stacks that differ; hint: use ReplayBuffer(obs_dtype=np.uint8)")
        if self._last_next is None or not np.array_equal(obs, self._last_next):
            if not (obs == obs[:1]).all():
                raise ReplayError("FrameReplayBuffer.add: expected an episode's first observation to repeat one "
                                  "frame (FrameStack's reset), received a stack of different frames; hint: add "
                                  "every transition of an episode in order")
            self._start = self._push(obs[0])
        slot = self.position
        self.next_frame[slot] = self._push(next_obs[-1])
        self.episode_start[slot] = self._start
        self.actions[slot], self.rewards[slot], self.dones[slot] = action, reward, float(done)
        self.position = (slot + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self._last_next = None if done else next_obs.copy()
        return slot

    def _stacks(self, newest: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Stacks ``[B, k, h, w]`` ending at absolute frames ``newest``, clamped at their episodes' first frame."""
        index = np.maximum(newest[:, None] + np.arange(1 - self.k, 1), start[:, None])
        return self.frames[index % self.frame_slots]

    def gather(self, indices: np.ndarray, weights: np.ndarray) -> Batch:
        """The transitions in slots ``indices``, their stacks rebuilt from the frame ring."""
        newest, start = self.next_frame[indices], self.episode_start[indices]
        return Batch(self._stacks(newest - 1, start), self.actions[indices], self.rewards[indices],
                     self._stacks(newest, start), self.dones[indices], weights.astype(np.float32),
                     indices.astype(np.int64))

    @property
    def nbytes(self) -> int:
        """The bytes allocated for frames and per-transition fields."""
        return int(self.frames.nbytes + self.next_frame.nbytes + self.episode_start.nbytes + self.actions.nbytes
                   + self.rewards.nbytes + self.dones.nbytes)
