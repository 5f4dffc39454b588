"""``train_dqn``: the DQN interaction loop — act, store, replay, learn, sync — over a gymnasium env.

Per environment step: an epsilon-greedy action (``schedule(step)``), the transition stored in the
buffer (``done`` = terminated only: a time-limit truncation still bootstraps), and once
``learning_starts`` steps were taken, ``gradient_steps`` updates every ``train_freq`` steps on
batches of ``agent.batch_size`` (prioritized buffers get their TD errors back, with ``beta``
annealed linearly to 1 over the run when ``anneal_beta``). The target network is hard-synced after
every ``target_update`` steps, or, with ``tau`` set, soft-synced after every update. A ``callback``
returning True ends training right after that episode (before the step's update).

Example:
    >>> returns = train_dqn(gym.make("CartPole-v1"), agent, ReplayBuffer(50_000, (4,)), total_steps=30_000,
    ...                     schedule=EpsilonSchedule(1.0, 0.02, 10_000), learning_starts=1_000, seed=0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .dqn import DQNAgent, RLError
from .replay import PrioritizedReplayBuffer, ReplayBuffer
from .schedules import EpsilonSchedule


def _check_int(what: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise RLError(f"train_dqn: expected {what} to be an int >= {low}, received {value!r}")
    return int(value)


def train_dqn(env: Any, agent: DQNAgent, buffer: ReplayBuffer, total_steps: int,
              schedule: EpsilonSchedule | None = None, learning_starts: int = 1_000, train_freq: int = 1,
              gradient_steps: int = 1, target_update: int = 500, tau: float | None = None,
              anneal_beta: bool = True, seed: int | None = 0, progress: bool = False,
              callback: Callable[[int, float], bool | None] | None = None) -> list[float]:
    """Train ``agent`` on ``env`` for ``total_steps`` environment steps (see the module docstring).

    Args:
        env: a gymnasium environment (``reset(seed=)`` -> ``(obs, info)``; ``step(a)`` ->
            ``(obs, reward, terminated, truncated, info)``).
        agent: the ``DQNAgent``.
        buffer: a ``ReplayBuffer`` or ``PrioritizedReplayBuffer`` with the agent's observation shape.
        total_steps: environment steps to take.
        schedule: the exploration rate by step (default ``EpsilonSchedule(1.0, 0.05, total_steps // 10)``).
        learning_starts: steps taken before the first update (filling the buffer).
        train_freq: update every this many steps.
        gradient_steps: updates each time.
        target_update: hard target sync period in steps (ignored when ``tau`` is set).
        tau: soft (Polyak) sync rate applied after every update; None for hard syncs.
        anneal_beta: for a prioritized buffer, move ``beta`` linearly from its start to 1 over the run.
        seed: seeds the first ``env.reset`` (later resets continue the env's own generator).
        progress: show a tqdm progress bar (return of the last episode, epsilon).
        callback: ``callback(step, episode_return)`` after each episode; returning True stops training.

    Returns:
        the return (sum of rewards) of every episode finished, in order.

    Raises:
        RLError: bad arguments or a buffer/agent shape mismatch.

    Example:
        >>> returns = train_dqn(env, agent, buffer, 20_000, learning_starts=1_000, target_update=500)
        >>> np.mean(returns[-100:])
    """
    total_steps = _check_int("total_steps", total_steps, 0)
    learning_starts = _check_int("learning_starts", learning_starts, 0)
    train_freq = _check_int("train_freq", train_freq, 1)
    gradient_steps = _check_int("gradient_steps", gradient_steps, 1)
    target_update = _check_int("target_update", target_update, 1)
    if buffer.obs_shape != agent.obs_shape:
        raise RLError(f"train_dqn: the buffer stores observations of shape {buffer.obs_shape}, the agent expects "
                      f"{agent.obs_shape}; hint: build both with the env's observation_space.shape")
    schedule = schedule or EpsilonSchedule(1.0, 0.05, max(1, total_steps // 10))
    prioritized = isinstance(buffer, PrioritizedReplayBuffer)
    beta0 = buffer.beta if prioritized else 0.0
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total_steps, desc="train_dqn", unit="step")
    returns: list[float] = []
    obs, _ = env.reset(seed=seed)
    episode_return = 0.0
    try:
        for step in range(total_steps):
            epsilon = schedule(step)
            action = agent.act(obs, epsilon)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            buffer.add(obs, action, reward, next_obs, terminated)
            episode_return += float(reward)
            obs = next_obs
            if terminated or truncated:
                returns.append(episode_return)
                if bar is not None:
                    bar.set_postfix(ret=f"{episode_return:.1f}", eps=f"{epsilon:.3f}", refresh=False)
                stop = callback is not None and callback(step, episode_return)
                obs, _ = env.reset()
                episode_return = 0.0
                if stop:
                    break
            if step >= learning_starts and step % train_freq == 0:
                if prioritized and anneal_beta:
                    buffer.beta = beta0 + (1.0 - beta0) * step / max(1, total_steps)
                for _ in range(gradient_steps):
                    batch = buffer.sample(agent.batch_size)
                    _, td = agent.update(batch)
                    buffer.update_priorities(batch.indices, td)
                    if tau is not None:
                        agent.sync_target(tau)
            if tau is None and (step + 1) % target_update == 0:
                agent.sync_target()
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return returns
