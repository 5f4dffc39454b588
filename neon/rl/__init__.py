"""``neon.rl``: deep Q-learning — replay buffers, an epsilon schedule, the DQN agent and its loop.

Example:
    >>> from neon.rl import DQNAgent, EpsilonSchedule, ReplayBuffer, train_dqn
    >>> agent = DQNAgent([Affine(64, activation="relu"), Affine(2)], obs_shape=(4,), n_actions=2)
    >>> buffer = ReplayBuffer(50_000, obs_shape=(4,), seed=0)
    >>> returns = train_dqn(env, agent, buffer, total_steps=20_000, schedule=EpsilonSchedule(1.0, 0.02, 10_000))
"""

from .dqn import DQNAgent, RLError, huber
from .loop import train_dqn
from .replay import Batch, PrioritizedReplayBuffer, ReplayBuffer
from .schedules import EpsilonSchedule

__all__ = ["Batch", "DQNAgent", "EpsilonSchedule", "PrioritizedReplayBuffer", "RLError", "ReplayBuffer",
           "huber", "train_dqn"]
