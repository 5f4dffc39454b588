"""model_zoo.dqn_cartpole: a short run beats a random policy; outputs; the CLI; the full run solves (slow)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="gymnasium is in the rl and test extras: pip install .[test]")

import gymnasium as gym  # noqa: E402

from model_zoo.dqn_cartpole import SOLVED_RETURN, evaluate, main, make_agent, train  # noqa: E402
from neon.rl import EpsilonSchedule, PrioritizedReplayBuffer, train_dqn  # noqa: E402

RANDOM_POLICY_RETURN = 22.0  # CartPole-v1's mean episode length under uniform random actions


def random_policy_return(episodes: int = 50) -> float:
    env = gym.make("CartPole-v1")
    env.action_space.seed(0)

    class Random:
        def act(self, obs, epsilon):
            return env.action_space.sample()

    return evaluate(env, Random(), episodes, seed=0)


def test_random_policy_reference_is_about_22():
    assert random_policy_return() == pytest.approx(RANDOM_POLICY_RETURN, abs=6)


def test_short_run_clearly_beats_a_random_policy(tmp_path):
    result = train(steps=3_000, seed=0, out=tmp_path, learning_starts=500, epsilon_steps=2_000, eval_episodes=10)
    assert result.steps == 3_000 and result.solved_at is None
    # measured (seeds 0, 1, 2): last 20 training episodes 82, 69, 59; greedy episodes 167, 195, 149 — against
    # the random policy's 22
    assert np.mean(result.returns[-20:]) > 2 * RANDOM_POLICY_RETURN
    assert result.eval_return > 4 * RANDOM_POLICY_RETURN
    assert (tmp_path / "dqn_cartpole.h5").stat().st_size > 0
    assert (tmp_path / "returns.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the checkpoint loads into a fresh agent and acts the same
    other = make_agent(seed=1)
    other.load_params(tmp_path / "dqn_cartpole.h5")
    obs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_array_equal(other.q_values(obs), result.agent.q_values(obs))


def test_prioritized_replay_also_learns():
    env = gym.make("CartPole-v1")
    env.action_space.seed(0)
    agent, buffer = make_agent(seed=0), PrioritizedReplayBuffer(50_000, (4,), seed=0)
    returns = train_dqn(env, agent, buffer, 3_000, EpsilonSchedule(1.0, 0.02, 2_000), learning_starts=500, seed=0)
    # measured (seeds 0, 1): last 20 training episodes 93, 79; 10 greedy episodes 228, 187
    assert np.mean(returns[-20:]) > 2 * RANDOM_POLICY_RETURN
    assert evaluate(gym.make("CartPole-v1"), agent, 10, seed=123) > 4 * RANDOM_POLICY_RETURN
    assert buffer.beta > 0.99  # annealed towards 1 over the run


def test_cli_runs_and_writes_its_outputs(tmp_path, capsys):
    assert main(["--steps", "300", "--seed", "1", "--out", str(tmp_path), "--eval-episodes", "2"]) == 0
    printed = capsys.readouterr().out
    assert "mean return of the last" in printed and "greedy evaluation" in printed
    assert (tmp_path / "dqn_cartpole.h5").exists() and (tmp_path / "returns.png").exists()


@pytest.mark.slow
def test_full_run_solves_cartpole():
    result = train(seed=2, eval_episodes=100)  # measured: solved at step 20,006, ~30 s
    assert result.solved_at is not None and result.solved_at <= 100_000
    assert result.eval_return >= SOLVED_RETURN  # 100 greedy episodes no check has seen
