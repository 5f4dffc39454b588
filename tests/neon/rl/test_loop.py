"""neon.rl.loop: train_dqn's bookkeeping on a scripted environment (episodes, done flags, update counts, syncs)."""

from __future__ import annotations

import numpy as np
import pytest

from neon.initializers import Constant
from neon.layers import Affine
from neon.rl import DQNAgent, EpsilonSchedule, PrioritizedReplayBuffer, ReplayBuffer, RLError, train_dqn


class ScriptedEnv:
    """Episodes of 4 steps paying 1 each; even episodes end terminated, odd ones truncated (a time limit)."""

    def __init__(self) -> None:
        self.episode, self.t, self.seeds = -1, 0, []

    def reset(self, seed=None):
        self.seeds.append(seed)
        self.episode += 1
        self.t = 0
        return np.array([self.episode, 0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t == 4
        obs = np.array([self.episode, self.t], np.float32)
        return obs, 1.0, end and self.episode % 2 == 0, end and self.episode % 2 == 1, {}


def make_agent() -> DQNAgent:
    return DQNAgent([Affine(4, activation="relu", bias=Constant(0)), Affine(2, bias=Constant(0))], obs_shape=(2,),
                    n_actions=2, batch_size=4, seed=0)


def test_episodes_done_flags_and_update_counts():
    env, agent, buffer = ScriptedEnv(), make_agent(), ReplayBuffer(100, (2,))
    finished = []
    returns = train_dqn(env, agent, buffer, 20, EpsilonSchedule(1.0, 0.0, 10), learning_starts=8, train_freq=3,
                        gradient_steps=2, callback=lambda step, r: finished.append(step), seed=7)
    assert returns == [4.0] * 5 and finished == [3, 7, 11, 15, 19]
    # a truncated episode's last transition still bootstraps: done only where terminated
    np.testing.assert_array_equal(buffer.dones[:20].reshape(5, 4)[:, 3], [1, 0, 1, 0, 1])
    np.testing.assert_array_equal(buffer.next_obs[3], [0, 4])
    assert agent.updates == 2 * len([s for s in range(8, 20) if s % 3 == 0])
    assert env.seeds[0] == 7 and env.seeds[1:] == [None] * 5


def test_hard_sync_period_and_callback_stop():
    env, agent, buffer = ScriptedEnv(), make_agent(), ReplayBuffer(100, (2,))
    t = agent.transformer
    initial = [t.read_variable(v) for v in agent.target.variables]
    returns = train_dqn(env, agent, buffer, 100, learning_starts=0, target_update=6,
                        callback=lambda step, r: step >= 7)
    # stopped after the second episode (step 7), before that step's update: steps 0..6 updated
    assert len(returns) == 2 and agent.updates == 7
    # one sync, after step 5: the target holds the online weights after 6 updates, not the initial ones
    assert not any(np.array_equal(a, t.read_variable(v)) for a, v in zip(initial, agent.target.variables))
    agent2 = make_agent()
    train_dqn(ScriptedEnv(), agent2, ReplayBuffer(100, (2,)), 5, learning_starts=0, target_update=6)
    t2 = agent2.transformer
    assert all(np.array_equal(a, t2.read_variable(v)) for a, v in zip(initial, agent2.target.variables))


def test_prioritized_buffer_gets_td_errors_and_beta_anneals():
    env, agent = ScriptedEnv(), make_agent()
    buffer = PrioritizedReplayBuffer(100, (2,), beta=0.4)
    train_dqn(env, agent, buffer, 40, learning_starts=4, tau=0.01)
    assert buffer.max_priority != 1.0  # TD errors came back
    assert buffer.beta == pytest.approx(0.4 + 0.6 * 39 / 40)


def test_mismatched_buffer_raises():
    with pytest.raises(RLError, match=r"buffer stores observations of shape \(3,\), the agent expects \(2,\)"):
        train_dqn(ScriptedEnv(), make_agent(), ReplayBuffer(10, (3,)), 10)
    with pytest.raises(RLError, match="train_freq"):
        train_dqn(ScriptedEnv(), make_agent(), ReplayBuffer(10, (2,)), 10, train_freq=0)


def test_progress_bar_runs_and_closes(capsys):
    returns = train_dqn(ScriptedEnv(), make_agent(), ReplayBuffer(20, (2,)), 12, learning_starts=4, progress=True)
    assert returns == [4.0, 4.0, 4.0]
    assert "train_dqn" in capsys.readouterr().err
