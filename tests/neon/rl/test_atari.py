"""The Atari preprocessing wrappers against NumPy references, on a fake env whose every frame is known.

``FakeAtari`` plays "frames" ``t = 1, 2, ...``: frame ``t`` is a seeded random RGB image, its
reward ``rewards[t]``, and lives are lost at the frames in ``life_loss``. It records the
actions it was given and how often it was reset, so each wrapper's effect is checked exactly.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from neon.rl import ReplayBuffer
from neon.rl.atari import (
    AtariError,
    ClipReward,
    EpisodicLife,
    FireReset,
    FrameStack,
    GameScores,
    GrayResize,
    MaxAndSkip,
    NoopReset,
    gray_resize,
    make_atari,
    needs_fire,
    wrap_atari,
)
from neon.rl.frame_replay import FrameReplayBuffer
from neon.rl.replay import ReplayError

H, W = 168, 168  # twice 84: an "area" resize is then the mean of 2x2 blocks


def frame_at(t: int) -> np.ndarray:
    return np.random.default_rng(1000 + t).integers(0, 256, (H, W, 3), dtype=np.uint8)


class FakeAtari(gymnasium.Env):
    """A game of ``length`` frames with ``lives`` lives; loses one at each frame in ``life_loss``."""

    def __init__(self, length: int = 100, lives: int = 3, life_loss: tuple[int, ...] = (),
                 rewards: dict[int, float] | None = None,
                 meanings: tuple[str, ...] = ("NOOP", "FIRE", "RIGHT", "LEFT")) -> None:
        self.observation_space = spaces.Box(0, 255, (H, W, 3), dtype=np.uint8)
        self.action_space = spaces.Discrete(len(meanings))
        self.length, self.start_lives, self.life_loss = length, lives, life_loss
        self.rewards = rewards or {}
        self.meanings = list(meanings)
        self.t, self.lives, self.resets, self.actions = 0, lives, 0, []

    def get_action_meanings(self) -> list[str]:
        return self.meanings

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t, self.lives = 0, self.start_lives
        self.resets += 1
        self.actions = []
        return frame_at(0), {"lives": self.lives}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        self.actions.append(int(action))
        if self.t in self.life_loss:
            self.lives -= 1
        terminated = self.t >= self.length or self.lives == 0
        return frame_at(self.t), float(self.rewards.get(self.t, 0.0)), terminated, False, {"lives": self.lives}


def luma(frame: np.ndarray) -> np.ndarray:
    """The ITU-R 601-2 reference in float: (299 R + 587 G + 114 B) / 1000."""
    return frame[..., 0] * 0.299 + frame[..., 1] * 0.587 + frame[..., 2] * 0.114


# -- max and skip ---------------------------------------------------------------------------------------
def test_max_and_skip_plays_four_frames_sums_rewards_and_maxes_the_last_two() -> None:
    fake = FakeAtari(rewards={2: 1.0, 3: -2.0, 4: 0.5, 7: 3.0})
    env = MaxAndSkip(fake, skip=4)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(3)
    assert fake.t == 4 and fake.actions == [3, 3, 3, 3]
    np.testing.assert_array_equal(obs, np.maximum(frame_at(3), frame_at(4)))
    assert not np.array_equal(obs, frame_at(4))  # the max differs from the last frame alone
    assert reward == pytest.approx(1.0 - 2.0 + 0.5) and info["frames_played"] == 4
    obs, reward, *_ = env.step(0)
    assert fake.t == 8 and reward == pytest.approx(3.0)
    np.testing.assert_array_equal(obs, np.maximum(frame_at(7), frame_at(8)))


def test_max_and_skip_stops_at_the_end_of_the_episode() -> None:
    fake = FakeAtari(length=6, rewards={5: 1.0, 6: 1.0, 7: 100.0})
    env = MaxAndSkip(fake, skip=4)
    env.reset()
    env.step(0)
    obs, reward, terminated, _, info = env.step(0)
    assert terminated and fake.t == 6 and info["frames_played"] == 2 and reward == 2.0
    np.testing.assert_array_equal(obs, np.maximum(frame_at(5), frame_at(6)))
    fake = FakeAtari(length=5)
    env = MaxAndSkip(fake, skip=4)
    env.reset()
    env.step(0)
    obs, _, terminated, _, info = env.step(0)
    assert terminated and info["frames_played"] == 1
    np.testing.assert_array_equal(obs, frame_at(5))  # one frame played: no max with the previous step's


# -- gray and resize -----------------------------------------------------------------------------------
def test_gray_resize_matches_the_luma_formula_and_the_2x2_block_mean() -> None:
    frame = frame_at(3)
    gray = gray_resize(frame, (H, W))  # no resize: luma only
    assert gray.dtype == np.uint8 and gray.shape == (H, W)
    assert np.abs(gray.astype(float) - luma(frame)).max() <= 1.0
    small = gray_resize(frame, (84, 84), interpolation="area")
    blocks = gray.astype(float).reshape(84, 2, 84, 2).mean(axis=(1, 3))
    assert small.shape == (84, 84) and np.abs(small - blocks).max() <= 1.0
    assert gray_resize(np.zeros((210, 160, 3), np.uint8), (84, 84)).shape == (84, 84)
    flat = np.full((210, 160, 3), (200, 100, 50), np.uint8)
    expected = round(luma(flat[:1, :1])[0, 0])  # 200*.299 + 100*.587 + 50*.114 = 124.2
    np.testing.assert_array_equal(gray_resize(flat, (84, 84)), np.full((84, 84), expected, np.uint8))
    colour = gray_resize(frame, (42, 21), grayscale=False, interpolation="nearest")
    assert colour.shape == (42, 21, 3)


def test_gray_resize_wrapper_declares_its_space_and_rejects_bad_settings() -> None:
    env = GrayResize(FakeAtari(), 84)
    assert env.observation_space.shape == (84, 84) and env.observation_space.dtype == np.uint8
    obs, _ = env.reset()
    assert obs.shape == (84, 84) and env.observation_space.contains(obs)
    assert GrayResize(FakeAtari(), (60, 50), grayscale=False).observation_space.shape == (60, 50, 3)
    with pytest.raises(AtariError, match="interpolation"):
        GrayResize(FakeAtari(), interpolation="cubic")
    with pytest.raises(AtariError, match="size"):
        GrayResize(FakeAtari(), 0)
    with pytest.raises(AtariError, match=r"uint8 frame.*float64"):
        gray_resize(np.zeros((4, 4, 3)), (2, 2))


# -- stacking, rewards, lives, resets -------------------------------------------------------------------
def test_frame_stack_keeps_the_last_k_frames_oldest_first() -> None:
    env = FrameStack(GrayResize(FakeAtari(), (H, W)), k=4)
    obs, _ = env.reset()
    first = gray_resize(frame_at(0), (H, W))
    assert obs.shape == (4, H, W) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs, np.stack([first] * 4))
    history = [first] * 4
    for t in range(1, 7):
        obs, *_ = env.step(0)
        history.append(gray_resize(frame_at(t), (H, W)))
        np.testing.assert_array_equal(obs, np.stack(history[-4:]))
    assert env.observation_space.shape == (4, H, W)
    with pytest.raises(AtariError, match="k to be an int >= 1"):
        FrameStack(FakeAtari(), 0)


def test_clip_reward_keeps_the_sign_and_the_raw_reward() -> None:
    env = ClipReward(FakeAtari(rewards={1: -3.0, 2: 0.0, 3: 2.5}))
    env.reset()
    seen = [env.step(0) for _ in range(3)]
    assert [s[1] for s in seen] == [-1.0, 0.0, 1.0]
    assert [s[4]["raw_reward"] for s in seen] == [-3.0, 0.0, 2.5]


def test_episodic_life_ends_the_learning_episode_on_a_lost_life_without_resetting_the_game() -> None:
    fake = FakeAtari(length=50, lives=2, life_loss=(3, 6))
    env = EpisodicLife(fake)
    env.reset()
    assert env.lives == 2 and fake.resets == 1
    ends = [env.step(0)[2] for _ in range(3)]
    assert ends == [False, False, True] and not env.real_done
    env.reset()  # a no-op step, not a reset
    assert fake.resets == 1 and fake.t == 4 and fake.actions[-1] == 0 and env.lives == 1
    ends = [env.step(0)[2] for _ in range(2)]
    assert ends == [False, True] and env.real_done  # the last life: the game is over
    env.reset()
    assert fake.resets == 2 and fake.t == 0 and env.lives == 2


def test_noop_reset_takes_between_one_and_noop_max_noops() -> None:
    fake = FakeAtari(length=1000)
    env = NoopReset(fake, noop_max=5)
    counts = []
    env.reset(seed=3)
    for _ in range(60):
        env.reset()
        counts.append(fake.t)
        assert fake.actions == [0] * fake.t and env.last_noops == fake.t
    assert set(counts) == {1, 2, 3, 4, 5}
    again = NoopReset(FakeAtari(length=1000), noop_max=5)
    again.reset(seed=3)
    assert [again.reset() and again.last_noops for _ in range(60)] == counts  # seeded: reproducible
    with pytest.raises(AtariError, match="noop_max"):
        NoopReset(FakeAtari(), noop_max=0)
    with pytest.raises(AtariError, match="NOOP"):
        NoopReset(FakeAtari(meanings=("FIRE", "NOOP", "UP")))


def test_fire_reset_presses_fire_then_a_move_and_only_where_the_game_has_fire() -> None:
    fake = FakeAtari()
    env = FireReset(fake)
    obs, _ = env.reset()
    assert fake.actions == [1, 2]
    np.testing.assert_array_equal(obs, frame_at(2))
    assert needs_fire(fake) and not needs_fire(FakeAtari(meanings=("NOOP", "UP", "DOWN")))
    with pytest.raises(AtariError, match="FIRE"):
        FireReset(FakeAtari(meanings=("NOOP", "UP", "DOWN")))


# -- the chain ---------------------------------------------------------------------------------------------
def test_wrap_atari_chain_equals_the_reference_pipeline() -> None:
    fake = FakeAtari(length=400, rewards={6: 5.0, 8: -1.0})
    env = wrap_atari(fake, noop_max=None, fire_reset=False, interpolation="area")
    obs, _ = env.reset()
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    obs, reward, terminated, _, info = env.step(2)
    obs, reward, terminated, _, info = env.step(2)  # frames 5-8
    expected = gray_resize(np.maximum(frame_at(7), frame_at(8)), (84, 84), interpolation="area")
    np.testing.assert_array_equal(obs[-1], expected)
    np.testing.assert_array_equal(obs[0], obs[1])  # still the reset frame twice
    assert reward == 1.0 and info["raw_reward"] == 4.0 and not terminated
    # fire detected from the action meanings, after the no-ops
    fake = FakeAtari(length=400)
    wrap_atari(fake, noop_max=3).reset(seed=0)
    assert fake.actions[-8:] == [1] * 4 + [2] * 4 and set(fake.actions[:-8]) == {0}
    with pytest.raises(AtariError, match="skip"):
        wrap_atari(FakeAtari(), skip=0)


def test_real_pong_through_the_wrappers_gives_stacked_uint8_frames() -> None:
    pytest.importorskip("ale_py", reason="ale-py (the ROMs) is not installed")
    try:
        env = make_atari("ALE/Pong-v5", seed=0)
    except AtariError as exc:  # pragma: no cover - a broken ale-py install
        pytest.skip(f"ale-py cannot load Pong: {exc}")
    obs, info = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8 and env.observation_space.contains(obs)
    assert env.action_space.n == 6
    frames = 0
    for _ in range(30):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert reward in (-1.0, 0.0, 1.0) and obs.shape == (4, 84, 84)
        frames += info["frames_played"]
    assert frames == 120 and 20 < obs.mean() < 200  # real pixels, not a blank screen
    assert not np.array_equal(obs[0], obs[-1])
    with pytest.raises(AtariError, match="ALE id"):
        make_atari("ALE/NoSuchGame-v5")


# -- the frame replay -----------------------------------------------------------------------------------
def fill(buffers: list, env: gymnasium.Env, steps: int, seed: int = 0) -> None:
    """The same transitions into every buffer, as ``train_dqn`` adds them (done = terminated)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        action = int(rng.integers(env.action_space.n))
        next_obs, reward, terminated, truncated, _ = env.step(action)
        for buffer in buffers:
            buffer.add(obs, action, reward, next_obs, terminated)
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()


def test_frame_replay_rebuilds_exactly_the_stacks_a_plain_replay_stores() -> None:
    # short games, lost lives and time-limit truncations, and a ring that wraps several times
    fake = FakeAtari(length=60, lives=3, life_loss=(20, 33))
    env = wrap_atari(gymnasium.wrappers.TimeLimit(fake, 45), noop_max=3, size=(12, 10))
    frames, plain = FrameReplayBuffer(40, (4, 12, 10), seed=1), ReplayBuffer(40, (4, 12, 10), np.uint8, seed=1)
    fill([frames, plain], env, 170)
    assert len(frames) == len(plain) == 40 and frames.frames_written > 170
    assert fake.resets > 5
    every = np.arange(40)
    got, want = frames.gather(every, np.ones(40)), plain.gather(every, np.ones(40))
    for name in ("obs", "actions", "rewards", "next_obs", "dones"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert got.obs.dtype == np.uint8 and got.obs.shape == (40, 4, 12, 10)
    assert 0 < got.dones.sum() < 40  # episode ends (life losses) are among the transitions compared
    first = np.flatnonzero((got.obs == got.obs[:, :1]).all(axis=(1, 2, 3)))
    assert first.size > 0  # and episode starts (the first frame repeated)
    sampled_f, sampled_p = frames.sample(16), plain.sample(16)  # same seed: same slots
    np.testing.assert_array_equal(sampled_f.indices, sampled_p.indices)
    np.testing.assert_array_equal(sampled_f.next_obs, sampled_p.next_obs)
    assert frames.nbytes < plain.obs.nbytes + plain.next_obs.nbytes


def test_frame_replay_rejects_observations_that_are_not_frame_stacks() -> None:
    buffer = FrameReplayBuffer(8, (4, 3, 3))
    start = np.zeros((4, 3, 3), np.uint8)
    step = np.concatenate([start[1:], np.ones((1, 3, 3), np.uint8)])
    buffer.add(start, 0, 0.0, step, False)
    with pytest.raises(ReplayError, match="shifted by one frame"):
        buffer.add(step, 0, 0.0, np.full((4, 3, 3), 7, np.uint8), False)
    mixed = np.arange(36, dtype=np.uint8).reshape(4, 3, 3)
    with pytest.raises(ReplayError, match="repeat one frame"):
        buffer.add(mixed, 0, 0.0, np.concatenate([mixed[1:], mixed[:1]]), False)
    with pytest.raises(ReplayError, match="shape"):
        buffer.add(np.zeros((4, 3, 4), np.uint8), 0, 0.0, np.zeros((4, 3, 4), np.uint8), False)
    with pytest.raises(ReplayError, match="capacity"):
        FrameReplayBuffer(0, (4, 3, 3))
    with pytest.raises(ReplayError, match=r"\(k, h, w\)"):
        FrameReplayBuffer(8, (4,))


def test_game_scores_sums_raw_rewards_over_whole_games_under_lives_and_clipping() -> None:
    fake = FakeAtari(length=20, lives=3, life_loss=(12,), rewards={5: 3.0, 10: -2.0, 17: 4.0})
    env = wrap_atari(GameScores(fake), noop_max=None, fire_reset=False)
    env.reset(seed=0)
    clipped, episodes = 0.0, 0
    while fake.resets < 3:
        _, reward, terminated, truncated, _ = env.step(0)
        clipped += reward
        if terminated or truncated:
            episodes += 1
            env.reset()
    assert env.get_wrapper_attr("scores") == [5.0, 5.0]  # 3 - 2 + 4 per game, unclipped
    assert env.get_wrapper_attr("game_frames") == [20, 20]
    assert episodes == 4 and clipped == 2 * (1 - 1 + 1)  # a lost life splits each game in two
