"""The standard Atari preprocessing (Mnih et al. 2015; Machado et al. 2018): gymnasium wrappers, NumPy and Pillow.

Applied in this order by ``wrap_atari`` (each step optional and configurable; DeepMind's order):

1. ``NoopReset``: after a reset, a random number (1 to ``noop_max``, default 30) of no-op actions,
   so episodes do not all start from the same state.
2. ``MaxAndSkip``: repeat each action ``skip`` (4) frames, sum the rewards, and return the
   pixel-wise maximum of the last two frames (Atari sprites flicker between frames).
3. ``EpisodicLife``: the loss of a life ends the *learning* episode (``terminated=True``); the
   game itself is only reset when it is really over.
4. ``FireReset``: press FIRE after a reset (and so after each lost life), for games that wait for
   it (Breakout, Pong, ...); detected from the action meanings when ``fire_reset=None``.
5. ``GrayResize``: ITU-R 601-2 luma (Pillow's ``"L"``: ``(299 R + 587 G + 114 B) / 1000``) and a
   resize to ``84 x 84`` with Pillow (``"bilinear"``, ``"area"`` or ``"nearest"``), uint8.
6. ``ClipReward``: the reward's sign (-1, 0 or 1) for learning; the raw game score is kept in
   ``info["raw_reward"]``.
7. ``FrameStack``: the last ``k`` (4) frames, oldest first, as one uint8 array ``[k, 84, 84]``.

``GameScores`` records each whole game's raw score under all of that; ``frame_replay.py``'s
``FrameReplayBuffer`` is a replay that stores each stacked frame once.

``make_atari("ALE/Pong-v5")`` builds the emulator with ``frameskip=1`` (``MaxAndSkip`` does the
skipping) and wraps it. ale-py ships the ROMs, so nothing is downloaded.

Example:
    >>> env = make_atari("ALE/Pong-v5", seed=0)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, obs.dtype
    ((4, 84, 84), dtype('uint8'))
"""

from __future__ import annotations

import collections
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces
from PIL import Image

import ngraph_core as ng

INTERPOLATIONS = {"bilinear": Image.Resampling.BILINEAR, "area": Image.Resampling.BOX,
                  "nearest": Image.Resampling.NEAREST}


class AtariError(ng.NgraphError, ValueError):
    """A bad Atari preprocessing setting, or an environment the preprocessing cannot wrap."""


def _int_at_least(where: str, key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        hint = f"; hint: the standard value is {STANDARD[key]}" if key in STANDARD else ""
        raise AtariError(f"{where}: expected {key} to be an int >= {minimum}, received {value!r}{hint}")
    return int(value)


STANDARD = {"noop_max": 30, "skip": 4, "size": 84, "k": 4}


def action_meanings(env: gymnasium.Env) -> list[str]:
    """The names of ``env``'s actions (``["NOOP", "FIRE", ...]``), or ``[]`` when it does not name them."""
    getter = getattr(env.unwrapped, "get_action_meanings", None)
    return list(getter()) if callable(getter) else []


# -- reset ---------------------------------------------------------------------------------------------
class GameScores(gymnasium.Wrapper):
    """Record each finished game's raw score and length, under any reward clipping or episodic life.

    Put it directly around the emulator; read the lists from the outer env with
    ``env.get_wrapper_attr("scores")`` (and ``"game_frames"``).

    Attributes:
        scores: the raw sum of rewards of every game that ended (terminated or truncated).
        game_frames: the emulator frames each of those games lasted.
    """

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.scores: list[float] = []
        self.game_frames: list[int] = []
        self._score, self._frames = 0.0, 0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._score += float(reward)
        self._frames += 1
        if terminated or truncated:
            self.scores.append(self._score)
            self.game_frames.append(self._frames)
            self._score, self._frames = 0.0, 0
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._score, self._frames = 0.0, 0  # an unfinished game is not a score
        return self.env.reset(**kwargs)


class NoopReset(gymnasium.Wrapper):
    """After each reset, take 1 to ``noop_max`` no-op actions (drawn uniformly from the env's generator).

    Args:
        env: the environment; its action ``noop_action`` (default 0) must be NOOP.
        noop_max: the most no-ops (>= 1).
        noop_action: the no-op's index.

    Raises:
        AtariError: ``noop_max < 1``, or an env whose action ``noop_action`` is named but not NOOP.

    Example:
        >>> env = NoopReset(gymnasium.make("ALE/Pong-v5", frameskip=1), noop_max=30)
    """

    def __init__(self, env: gymnasium.Env, noop_max: int = 30, noop_action: int = 0) -> None:
        super().__init__(env)
        self.noop_max = _int_at_least("NoopReset", "noop_max", noop_max, 1)
        self.noop_action = int(noop_action)
        meanings = action_meanings(env)
        if meanings and meanings[self.noop_action] != "NOOP":
            raise AtariError(f"NoopReset: expected action {self.noop_action} to be NOOP, received "
                             f"{meanings[self.noop_action]!r}; hint: pass noop_action=<index of NOOP>")
        self.last_noops = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.last_noops = int(self.np_random.integers(1, self.noop_max + 1))
        for _ in range(self.last_noops):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class FireReset(gymnasium.Wrapper):
    """Press FIRE (action 1), then action 2, after each reset: the games that wait for FIRE start.

    Args:
        env: an environment whose action 1 is FIRE and which has at least 3 actions.

    Raises:
        AtariError: an env whose actions are named and action 1 is not FIRE.

    Example:
        >>> env = FireReset(MaxAndSkip(gymnasium.make("ALE/Breakout-v5", frameskip=1)))
    """

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        meanings = action_meanings(env)
        if meanings and (len(meanings) < 3 or meanings[1] != "FIRE"):
            raise AtariError(f"FireReset: expected action 1 to be FIRE (of at least 3 actions), received "
                             f"{meanings}; hint: fire_reset=False for this game")

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.env.reset(**kwargs)
        for action in (1, 2):  # deepmind's order: FIRE, then a move (some games need both)
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


def needs_fire(env: gymnasium.Env) -> bool:
    """Whether ``env``'s action 1 is FIRE (of at least 3 actions): the test ``fire_reset=None`` uses."""
    meanings = action_meanings(env)
    return len(meanings) >= 3 and meanings[1] == "FIRE"


# -- stepping ------------------------------------------------------------------------------------------
class MaxAndSkip(gymnasium.Wrapper):
    """Repeat each action ``skip`` frames; the reward is their sum, the frame the max of the last two.

    The episode may end inside the ``skip`` frames: the step stops there, with the reward so far
    and the max of the last two frames seen (the one frame when only one was played).

    Args:
        env: an environment stepping one frame at a time (ALE: ``frameskip=1``).
        skip: frames per step (>= 1).

    Raises:
        AtariError: ``skip < 1``.

    Example:
        >>> obs, reward, terminated, truncated, info = MaxAndSkip(env, 4).step(0)   # info["frames_played"] == 4
    """

    def __init__(self, env: gymnasium.Env, skip: int = 4) -> None:
        super().__init__(env)
        self.skip = _int_at_least("MaxAndSkip", "skip", skip, 1)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        total, terminated, truncated, info = 0.0, False, False, {}
        before: np.ndarray | None = None
        last: np.ndarray | None = None
        played = 0
        for _ in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            before, last = last, np.array(obs)  # a copy: an env may reuse its screen buffer
            total += float(reward)
            played += 1
            if terminated or truncated:
                break
        frame = last if before is None else np.maximum(before, last)
        return frame, total, terminated, truncated, {**info, "frames_played": played}


class EpisodicLife(gymnasium.Wrapper):
    """The loss of a life ends the learning episode; the game is reset only when it is really over.

    Lives are read from ``info["lives"]`` (ALE reports them there). After a life-loss
    ``terminated``, ``reset()`` takes one no-op step instead of resetting the game;
    ``real_done`` tells whether the last end was the game's own.

    Args:
        env: an environment that reports ``info["lives"]``.
        noop_action: the action ``reset`` takes after a lost life.

    Example:
        >>> env = EpisodicLife(MaxAndSkip(gymnasium.make("ALE/Breakout-v5", frameskip=1)))
    """

    def __init__(self, env: gymnasium.Env, noop_action: int = 0) -> None:
        super().__init__(env)
        self.noop_action = int(noop_action)
        self.lives = 0
        self.real_done = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.real_done = bool(terminated or truncated)
        lives = int(info.get("lives", 0))
        if 0 < lives < self.lives:
            terminated = True  # a life lost: the value of this state is cut here, the game goes on
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self.real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.real_done = False
        self.lives = int(info.get("lives", 0))
        return obs, info


# -- frames and rewards --------------------------------------------------------------------------------
def gray_resize(frame: np.ndarray, size: tuple[int, int], grayscale: bool = True,
                interpolation: str = "bilinear") -> np.ndarray:
    """One RGB frame ``[H, W, 3]`` (or gray ``[H, W]``) as uint8 ``size = (height, width)``, gray or RGB.

    Args:
        frame: uint8 pixels.
        size: the output ``(height, width)``.
        grayscale: convert to luma with Pillow's ``"L"`` (``(299 R + 587 G + 114 B) / 1000``).
        interpolation: ``"bilinear"``, ``"area"`` (box filter) or ``"nearest"``.

    Returns:
        uint8 ``[height, width]`` (gray) or ``[height, width, 3]``.

    Raises:
        AtariError: an unknown interpolation or a frame that is not ``[H, W]`` / ``[H, W, 3]`` uint8.

    Example:
        >>> gray_resize(np.zeros((210, 160, 3), np.uint8), (84, 84)).shape
        (84, 84)
    """
    if interpolation not in INTERPOLATIONS:
        raise AtariError(f"gray_resize: expected interpolation among {sorted(INTERPOLATIONS)}, received "
                         f"{interpolation!r}; hint: 'bilinear' is the standard")
    frame = np.asarray(frame)
    if frame.dtype != np.uint8 or not (frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] == 3)):
        raise AtariError(f"gray_resize: expected a uint8 frame [H, W, 3] or [H, W], received {frame.dtype} "
                         f"{list(frame.shape)}; hint: wrap the raw emulator screen (obs_type='rgb')")
    image = Image.fromarray(frame)
    if grayscale and image.mode != "L":
        image = image.convert("L")
    height, width = size
    if image.size != (width, height):
        image = image.resize((width, height), INTERPOLATIONS[interpolation])
    return np.asarray(image, dtype=np.uint8)


class GrayResize(gymnasium.ObservationWrapper):
    """Frames to gray (optional) ``size x size`` uint8 with Pillow: see ``gray_resize``.

    Args:
        env: an environment whose observations are uint8 frames ``[H, W, 3]`` or ``[H, W]``.
        size: an int (square) or ``(height, width)``.
        grayscale: keep one luma channel (``[h, w]``) or RGB (``[h, w, 3]``).
        interpolation: ``"bilinear"``, ``"area"`` or ``"nearest"``.

    Raises:
        AtariError: a size below 1 or an unknown interpolation.
    """

    def __init__(self, env: gymnasium.Env, size: int | tuple[int, int] = 84, grayscale: bool = True,
                 interpolation: str = "bilinear") -> None:
        super().__init__(env)
        pair = (size, size) if not isinstance(size, (tuple, list)) else tuple(size)
        if len(pair) != 2:
            raise AtariError(f"GrayResize: expected size to be an int or (height, width), received {size!r}")
        self.size = (_int_at_least("GrayResize", "size", pair[0], 1), _int_at_least("GrayResize", "size", pair[1], 1))
        if interpolation not in INTERPOLATIONS:
            raise AtariError(f"GrayResize: expected interpolation among {sorted(INTERPOLATIONS)}, received "
                             f"{interpolation!r}; hint: 'bilinear' is the standard")
        self.grayscale, self.interpolation = bool(grayscale), interpolation
        shape = self.size if self.grayscale else (*self.size, 3)
        self.observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)

    def observation(self, observation: Any) -> np.ndarray:
        return gray_resize(observation, self.size, self.grayscale, self.interpolation)


class ClipReward(gymnasium.Wrapper):
    """The reward's sign (-1.0, 0.0 or 1.0); the game's own reward stays in ``info["raw_reward"]``.

    Example:
        >>> _, reward, *_, info = ClipReward(env).step(0)   # reward 1.0 where info["raw_reward"] is 25.0
    """

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(np.sign(reward)), terminated, truncated, {**info, "raw_reward": float(reward)}


class FrameStack(gymnasium.Wrapper):
    """The last ``k`` observations stacked on a new first axis, oldest first: ``[k, *frame]``.

    After a reset the first frame fills all ``k`` slots.

    Args:
        env: the environment.
        k: frames per observation (>= 1).

    Raises:
        AtariError: ``k < 1``.

    Example:
        >>> FrameStack(GrayResize(env), 4).reset()[0].shape
        (4, 84, 84)
    """

    def __init__(self, env: gymnasium.Env, k: int = 4) -> None:
        super().__init__(env)
        self.k = _int_at_least("FrameStack", "k", k, 1)
        space = env.observation_space
        low, high = (np.repeat(bound[None], self.k, axis=0) for bound in (space.low, space.high))
        self.observation_space = spaces.Box(low, high, dtype=space.dtype)
        self.frames: collections.deque[np.ndarray] = collections.deque(maxlen=self.k)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(np.asarray(obs))
        return np.stack(self.frames), reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.k):
            self.frames.append(np.asarray(obs))
        return np.stack(self.frames), info


# -- the whole chain -----------------------------------------------------------------------------------
def wrap_atari(env: gymnasium.Env, noop_max: int | None = 30, fire_reset: bool | None = None, skip: int = 4,
               episodic_life: bool = True, grayscale: bool = True, size: int | tuple[int, int] = 84,
               interpolation: str = "bilinear", clip_rewards: bool = True, frame_stack: int = 4) -> gymnasium.Env:
    """Wrap a one-frame-per-step Atari env in the standard preprocessing (see the module docstring).

    The order is the DeepMind/baselines one: no-op reset, max-and-skip, episodic life, fire
    reset (so FIRE follows every lost life too), gray and resize, reward clipping, frame stack.

    Args:
        env: an environment stepping one frame at a time with RGB frames (ALE: ``frameskip=1``).
        noop_max: the most no-ops after a reset; None or 0 for none.
        fire_reset: press FIRE after resets; None: when the game's action 1 is FIRE.
        skip: frames per step (1: no skipping and no max).
        episodic_life: a lost life ends the learning episode (off for evaluation).
        grayscale, size, interpolation: see ``GrayResize``.
        clip_rewards: rewards to their sign (the raw one in ``info["raw_reward"]``).
        frame_stack: frames per observation; 1 gives ``[1, h, w]``.

    Returns:
        the wrapped env; its observations are uint8 ``[frame_stack, h, w]`` (gray).

    Raises:
        AtariError: a bad setting (each wrapper checks its own).

    Example:
        >>> env = wrap_atari(gymnasium.make("ALE/Pong-v5", frameskip=1))
    """
    if noop_max:
        env = NoopReset(env, noop_max)
    if skip > 1:
        env = MaxAndSkip(env, skip)
    else:
        _int_at_least("wrap_atari", "skip", skip, 1)
    if episodic_life:
        env = EpisodicLife(env)
    if fire_reset or (fire_reset is None and needs_fire(env)):
        env = FireReset(env)
    env = GrayResize(env, size, grayscale, interpolation)
    if clip_rewards:
        env = ClipReward(env)
    return FrameStack(env, frame_stack)


def make_atari(env_id: str = "ALE/Pong-v5", seed: int | None = None, repeat_action_probability: float = 0.25,
               max_episode_steps: int | None = None, **preprocessing: Any) -> gymnasium.Env:
    """``gymnasium.make(env_id, frameskip=1)`` for an ALE game, wrapped by ``wrap_atari``.

    Args:
        env_id: an ALE id (``"ALE/Pong-v5"``, ``"ALE/Breakout-v5"``, ...).
        seed: seeds the env's generator (no-op counts) and its action space; None leaves them.
        repeat_action_probability: sticky actions (v5's default 0.25; 0 for the 2015 setting).
        max_episode_steps: truncate episodes after this many *emulator frames*; None: ALE's limit.
        **preprocessing: ``wrap_atari``'s settings.

    Returns:
        the wrapped env; ``env.get_wrapper_attr("scores")`` lists the raw scores of finished games
        (``GameScores`` sits directly around the emulator).

    Raises:
        AtariError: ale-py is not installed, the id is unknown, or a bad preprocessing setting.

    Example:
        >>> env = make_atari("ALE/Pong-v5", seed=0, noop_max=30)
    """
    try:
        import ale_py
    except ImportError as exc:
        raise AtariError(f"make_atari: expected ale-py to be installed for {env_id!r}, received {exc}; "
                         "hint: pip install ale-py==0.12.1 (it ships the ROMs)") from None
    gymnasium.register_envs(ale_py)
    options: dict[str, Any] = {"frameskip": 1, "repeat_action_probability": repeat_action_probability}
    if max_episode_steps is not None:
        options["max_num_frames_per_episode"] = int(max_episode_steps)
    try:
        env = gymnasium.make(env_id, **options)
    except gymnasium.error.Error as exc:
        raise AtariError(f"make_atari: expected a registered ALE id such as 'ALE/Pong-v5', received {env_id!r} "
                         f"({exc}); hint: ids are 'ALE/<Game>-v5'") from None
    if seed is not None:
        env.action_space.seed(seed)
    wrapped = wrap_atari(GameScores(env), **preprocessing)
    if seed is not None:
        wrapped.reset(seed=seed)
    return wrapped
