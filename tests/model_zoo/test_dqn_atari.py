"""``model_zoo.dqn_atari``: the Nature DQN's shapes and size, and a tiny Pong budget end to end (checkpoint, PNG)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ngraph_core as ng
from neon.layers import training_mode

pytest.importorskip("ale_py", reason="ale-py (it ships the Atari ROMs) is not installed")
Image = pytest.importorskip("PIL.Image", reason="the plot is checked with Pillow")

from model_zoo import dqn_atari  # noqa: E402
from neon.rl import DQNAgent  # noqa: E402


def test_nature_dqn_has_the_paper_shapes_and_parameter_count() -> None:
    x = ng.placeholder([ng.make_axis(n, name) for n, name in zip((4, 84, 84, 2), ("C", "H", "W", "N"))])
    layers = dqn_atari.nature_dqn(6)
    sizes = []
    with training_mode(False):
        h = x
        for layer in layers:
            h = layer(h)
            sizes.append([a.length for a in h.axes])
    assert sizes == [[32, 20, 20, 2], [64, 9, 9, 2], [64, 7, 7, 2], [512, 2], [6, 2]]
    params = sum(math.prod(v.axes.lengths) for layer in layers for v in layer.variables)
    # 4*8*8*32+32 + 32*4*4*64+64 + 64*3*3*64+64 + 3136*512+512 + 512*6+6
    assert params == 8224 + 32832 + 36928 + 1606144 + 3078 == 1687206
    with pytest.raises(dqn_atari.DQNAtariError, match="n_actions"):
        dqn_atari.nature_dqn(0)


def test_a_tiny_pong_budget_writes_a_checkpoint_and_a_returns_plot(tmp_path) -> None:
    result = dqn_atari.train(steps=300, learning_starts=100, buffer_size=500, batch_size=8, target_update=100,
                             checkpoint_every=150, out=tmp_path)
    assert result.steps == 300
    assert result.agent.updates == len(range(100, 300, 4))  # one update every 4 steps from step 100
    assert math.isfinite(result.steps_per_second) and result.steps_per_second > 0
    assert result.checkpoint == tmp_path / "dqn_atari.h5" and result.checkpoint.stat().st_size > 6_000_000
    assert result.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(result.plot) as im:
        im.verify()
    assert result.csv.read_text().splitlines()[0] == "step,score"
    # the checkpoint holds the trained weights: a fresh agent that loads it acts the same
    obs = np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    fresh = DQNAgent(dqn_atari.nature_dqn(6), obs_shape=(4, 84, 84), n_actions=6, obs_scale=1 / 255, seed=7)
    assert not np.allclose(fresh.q_values(obs), result.agent.q_values(obs))
    fresh.load_params(result.checkpoint)
    np.testing.assert_allclose(fresh.q_values(obs), result.agent.q_values(obs), rtol=1e-5, atol=1e-6)
    assert fresh.updates == result.agent.updates
    # resuming: a run of a few steps (no update yet) starts from the saved networks and update count
    resumed = dqn_atari.train(steps=5, learning_starts=100, buffer_size=50, resume_from=result.checkpoint)
    assert resumed.agent.updates == result.agent.updates
    np.testing.assert_allclose(resumed.agent.q_values(obs), result.agent.q_values(obs), rtol=1e-5, atol=1e-6)


def test_main_parses_its_flags_and_rejects_bad_settings(tmp_path) -> None:
    with pytest.raises(dqn_atari.DQNAtariError, match="steps"):
        dqn_atari.main(["--steps", "0", "--out", str(tmp_path)])
    with pytest.raises(dqn_atari.DQNAtariError, match="exploration_fraction"):
        dqn_atari.train(steps=10, exploration_fraction=0.0)
    assert not any(tmp_path.iterdir())  # nothing written before the settings are checked


def test_evaluate_plays_whole_games_and_returns_raw_scores() -> None:
    agent = DQNAgent(dqn_atari.nature_dqn(6), obs_shape=(4, 84, 84), n_actions=6, obs_scale=1 / 255, seed=0)
    scores = dqn_atari.evaluate(agent, games=2, epsilon=0.5, max_frames=240)  # 60 steps a game
    assert len(scores) == 2 and all(s == int(s) and -21 <= s <= 0 for s in scores)
    with pytest.raises(dqn_atari.DQNAtariError, match="games"):
        dqn_atari.evaluate(agent, games=0)
