"""DQN on Atari (Mnih et al. 2015, "Human-level control through deep RL"), as functions and as a script.

The network (``nature_dqn``): the 4 stacked 84x84 gray frames (uint8, scaled by 1/255 in the
graph) -> ``Conv 8x8/4, 32`` -> ``Conv 4x4/2, 64`` -> ``Conv 3x3/1, 64`` -> ``Affine 512`` ->
``Affine n_actions`` (ReLU between, none at the end), He-initialized with zero biases.

The environment (``neon.rl.atari.make_atari``): ``ALE/Pong-v5`` by default with the standard
preprocessing (no-op reset up to 30, FIRE on reset, frame skip 4 with max over the last two
frames, episodic life, gray 84x84 with Pillow, rewards clipped to their sign, 4 frames stacked)
and v5's sticky actions (0.25). ale-py ships the ROMs: nothing is downloaded.

Learning (``neon.rl``): Double DQN with the Huber loss, Adam (lr 1e-4, eps 1.5e-4 as Rainbow/
Dopamine; gradient norm clipped at 10), batches of 32, one update every 4 steps, a hard target
sync every 8,000 steps (2,000 updates), epsilon from 1 to 0.01 over the first 10% of the
steps (at most 250,000), gamma 0.99. The replay is ``FrameReplayBuffer`` (each frame stored
once: 100,000 transitions take 1.4 GB).

Outputs in ``--out``: ``dqn_atari.h5`` (both networks and Adam's state, every
``--checkpoint-every`` steps and at the end), ``returns.png`` (the raw score of each game and
its 10-game mean, against environment steps) and ``returns.csv`` (step, score).

Runs on the NumPy backend (``--backend cupy`` on a GPU). On the shared 2-core machine it takes
about 800 steps/s while acting and 60 steps/s while learning (``train``'s docstring), so Pong's
usual budget of 2-3 million steps (scores from -21 to about +20) is half a day or more of CPU
time; a short budget shows the machinery working, not a trained agent.

Usage:
    python -m model_zoo.dqn_atari --steps 20000 --out out/dqn_atari --eval-games 1
    python -m model_zoo.dqn_atari --env ALE/Breakout-v5 --steps 2000000 --backend cupy

    >>> from model_zoo.dqn_atari import train
    >>> result = train(steps=300, learning_starts=100, buffer_size=1000, out="out/dqn_atari")
    >>> result.checkpoint, result.plot
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng
from neon.atomic_files import atomic_path
from neon.initializers import Constant, Kaiming, set_seed
from neon.layers import Affine, Conv, Layer
from neon.optimizers import Adam
from neon.rl import DQNAgent, EpsilonSchedule, train_dqn
from neon.rl.atari import make_atari
from neon.rl.frame_replay import FrameReplayBuffer

from .progress import add_progress_flag, show_progress

DEFAULT_ENV = "ALE/Pong-v5"
DEFAULT_OUT = Path("out") / "dqn_atari"
LEARNING_RATE, ADAM_EPS, CLIP_NORM = 1e-4, 1.5e-4, 10.0


class DQNAtariError(ng.NgraphError, ValueError):
    """A bad setting of the Atari DQN recipe."""


def nature_dqn(n_actions: int) -> list[Layer]:
    """The Nature DQN network's layers: three convolutions, ``Affine(512)``, ``Affine(n_actions)``.

    Args:
        n_actions: the game's number of actions (the Q-values' length).

    Returns:
        the layers, for ``DQNAgent`` (input ``[C:4, H:84, W:84, N]``, output ``[n_actions, N]``).

    Raises:
        DQNAtariError: ``n_actions < 1``.

    Example:
        >>> agent = DQNAgent(nature_dqn(6), obs_shape=(4, 84, 84), n_actions=6, obs_scale=1 / 255)
    """
    if isinstance(n_actions, bool) or not isinstance(n_actions, (int, np.integer)) or n_actions < 1:
        raise DQNAtariError(f"nature_dqn: expected n_actions to be an int >= 1, received {n_actions!r}; "
                            "hint: env.action_space.n")
    return [Conv((8, 8, 32), strides=4, init=Kaiming(), bias=Constant(0), activation="relu"),
            Conv((4, 4, 64), strides=2, init=Kaiming(), bias=Constant(0), activation="relu"),
            Conv((3, 3, 64), strides=1, init=Kaiming(), bias=Constant(0), activation="relu"),
            Affine(512, init=Kaiming(), bias=Constant(0), activation="relu"),
            Affine(int(n_actions), bias=Constant(0))]


def plot_returns(steps: list[int], scores: list[float], path: str | Path, title: str = "DQN") -> None:
    """Write each game's score and its 10-game running mean against environment steps to a PNG (atomically).

    Args:
        steps: the step at which each game ended.
        scores: each game's raw score.
        path: the PNG to write.
        title: the figure's title.

    Example:
        >>> plot_returns([900, 1800], [-21.0, -20.0], "out/returns.png", "ALE/Pong-v5")
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    if scores:
        ax.plot(steps, scores, marker="o", markersize=3, linestyle="", alpha=0.5, label="game score")
        window = [float(np.mean(scores[max(0, i - 9):i + 1])) for i in range(len(scores))]
        ax.plot(steps, window, label="mean of the last 10")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no game finished yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("environment step")
    ax.set_ylabel("score (raw)")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png")


def evaluate(agent: DQNAgent, env_id: str = DEFAULT_ENV, games: int = 1, epsilon: float = 0.05, seed: int = 1,
             max_frames: int | None = None) -> list[float]:
    """Play ``games`` whole games epsilon-greedily and return their raw scores (the usual DQN evaluation).

    The env is preprocessed as in training except that a lost life does not end an episode.

    Args:
        agent: a trained ``DQNAgent`` for this game.
        env_id: the ALE id.
        games: games to play (>= 1).
        epsilon: the exploration rate while playing (0.05 in the Nature paper).
        seed: seeds the env and the no-op starts.
        max_frames: cut each game after this many emulator frames (None: ALE's limit, 108,000).

    Returns:
        each game's raw score.

    Raises:
        DQNAtariError: ``games < 1``.

    Example:
        >>> evaluate(result.agent, "ALE/Pong-v5", games=3)
        [-21.0, -20.0, -21.0]
    """
    if isinstance(games, bool) or not isinstance(games, (int, np.integer)) or games < 1:
        raise DQNAtariError(f"dqn_atari.evaluate: expected games to be an int >= 1, received {games!r}")
    env = make_atari(env_id, seed=seed, max_episode_steps=max_frames, episodic_life=False)
    scores: list[float] = env.get_wrapper_attr("scores")
    obs, _ = env.reset(seed=seed)
    while len(scores) < games:
        obs, _, terminated, truncated, _ = env.step(agent.act(obs, epsilon))
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return list(scores)


@dataclass
class TrainResult:
    """What ``train`` returns.

    Attributes:
        agent: the trained ``DQNAgent``.
        episode_returns: every learning episode's (clipped, per-life) return, as ``train_dqn`` gives them.
        scores: every finished game's raw score; score_steps: the step each ended at.
        checkpoint, plot, csv: the files written (None without ``out``).
        steps, seconds: environment steps taken and the wall time of the loop.
    """

    agent: DQNAgent
    episode_returns: list[float]
    scores: list[float]
    score_steps: list[int]
    steps: int
    seconds: float
    checkpoint: Path | None = None
    plot: Path | None = None
    csv: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("nan")


def train(env_id: str = DEFAULT_ENV, steps: int = 50_000, buffer_size: int = 100_000, learning_starts: int = 10_000,
          batch_size: int = 32, train_freq: int = 4, target_update: int = 8_000, learning_rate: float = LEARNING_RATE,
          gamma: float = 0.99, epsilon_end: float = 0.01, exploration_fraction: float = 0.1,
          checkpoint_every: int = 50_000, seed: int = 0, backend: str | None = None, out: str | Path | None = None,
          progress: bool = False, resume_from: str | Path | None = None) -> TrainResult:
    """Train a Nature DQN on an ALE game for ``steps`` environment steps (see the module docstring).

    On CPU, learning (a batch-32 update every 4 steps) is an order of magnitude slower than only acting (a batch-1
    forward pass per step), the convolution kernel taking nearly all of the time and the emulator and
    preprocessing the rest (measured: benchmarks/RESULTS.md, "Behind the code: model_zoo/dqn_atari.py").

    Args:
        env_id: an ALE id, ``"ALE/Pong-v5"`` by default.
        steps: environment steps (each 4 emulator frames).
        buffer_size: transitions kept in the replay.
        learning_starts: steps of random play before the first update (capped at ``steps``).
        batch_size, train_freq, target_update: the batch, steps per update and steps per target sync.
        learning_rate, gamma: Adam's rate and the discount.
        epsilon_end, exploration_fraction: epsilon falls linearly from 1 to ``epsilon_end`` over
            this fraction of ``steps`` (at most 250,000 steps).
        checkpoint_every: save ``dqn_atari.h5`` every this many steps (and at the end).
        seed: seeds the weights, the env and exploration.
        backend: ``"numpy"``, ``"cupy"`` or ``"auto"`` (default: ``$NG_BACKEND``, else numpy).
        out: a folder for ``dqn_atari.h5``, ``returns.png`` and ``returns.csv``; None writes nothing.
        progress: show ``train_dqn``'s progress bar.
        resume_from: a ``dqn_atari.h5`` to start from (both networks, Adam's state, the update
            count). The replay is not saved: it refills for ``learning_starts`` steps, and the
            epsilon schedule starts again (lower it with ``exploration_fraction``).

    Returns:
        a ``TrainResult``.

    Raises:
        DQNAtariError: bad step counts or fractions; AtariError: an unknown game or no ale-py;
        CheckpointError: a ``resume_from`` file of another network.

    Example:
        >>> train(steps=300, learning_starts=100, buffer_size=1000, out="out/dqn_atari").steps_per_second
    """
    for key, value, low in (("steps", steps, 1), ("buffer_size", buffer_size, 1),
                            ("learning_starts", learning_starts, 0), ("checkpoint_every", checkpoint_every, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise DQNAtariError(f"dqn_atari: expected {key} to be an int >= {low}, received {value!r}")
    if not 0.0 < exploration_fraction <= 1.0 or not 0.0 <= epsilon_end <= 1.0:
        raise DQNAtariError(f"dqn_atari: expected exploration_fraction in (0, 1] and epsilon_end in [0, 1], received "
                            f"{exploration_fraction!r} and {epsilon_end!r}; hint: 0.1 and 0.01")
    env = make_atari(env_id, seed=seed)
    n_actions = int(env.action_space.n)
    obs_shape = tuple(env.observation_space.shape)
    set_seed(seed)
    agent = DQNAgent(nature_dqn(n_actions), obs_shape=obs_shape, n_actions=n_actions,
                     optimizer=Adam(learning_rate, epsilon=ADAM_EPS, gradient_clip_norm=CLIP_NORM), gamma=gamma,
                     double=True, batch_size=batch_size, obs_scale=1.0 / 255.0, seed=seed, backend=backend)
    if resume_from is not None:
        agent.load_params(resume_from)
        print(f"resumed from {resume_from} ({agent.updates} updates)", flush=True)
    buffer = FrameReplayBuffer(buffer_size, obs_shape, seed=seed)
    schedule = EpsilonSchedule(1.0, epsilon_end, max(1, min(250_000, int(exploration_fraction * steps))))
    folder = Path(out) if out is not None else None
    checkpoint = plot = csv = None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        checkpoint, plot, csv = folder / "dqn_atari.h5", folder / "returns.png", folder / "returns.csv"
    scores: list[float] = env.get_wrapper_attr("scores")
    score_steps: list[int] = []
    next_save = checkpoint_every

    def on_episode(step: int, episode_return: float) -> bool:
        nonlocal next_save
        while len(score_steps) < len(scores):  # games that ended with this learning episode
            score_steps.append(step + 1)
            print(f"step {step + 1}: game {len(scores)} score {scores[-1]:+.0f}, mean of the last 10 "
                  f"{np.mean(scores[-10:]):+.1f}", flush=True)
        if checkpoint is not None and step + 1 >= next_save:
            agent.save_params(checkpoint)
            next_save += checkpoint_every
        return False

    print(f"{env_id}: {n_actions} actions, observations {obs_shape} uint8; Nature DQN, {steps} steps, "
          f"learning from step {min(learning_starts, steps)}, replay {buffer_size} "
          f"({buffer.nbytes / 2**20:.0f} MiB)", flush=True)
    started = time.perf_counter()
    returns = train_dqn(env, agent, buffer, steps, schedule=schedule, learning_starts=min(learning_starts, steps),
                        train_freq=train_freq, target_update=target_update, seed=seed, progress=progress,
                        callback=on_episode)
    seconds = time.perf_counter() - started
    env.close()
    if folder is not None:
        agent.save_params(checkpoint)
        plot_returns(score_steps, scores[:len(score_steps)], plot, f"Nature DQN on {env_id}")
        with atomic_path(csv) as tmp:
            Path(tmp).write_text("step,score\n" + "".join(f"{s},{v:g}\n" for s, v in zip(score_steps, scores)))
    print(f"{steps} steps in {seconds:.1f} s ({steps / seconds:.0f} steps/s), {agent.updates} updates, "
          f"{len(score_steps)} games finished" + (f", last score {scores[-1]:+.0f}" if scores else ""), flush=True)
    return TrainResult(agent, returns, list(scores[:len(score_steps)]), score_steps, steps, seconds,
                       checkpoint, plot, csv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=DEFAULT_ENV, help="an ALE id, e.g. ALE/Breakout-v5")
    parser.add_argument("--steps", type=int, default=50_000, help="environment steps (4 frames each)")
    parser.add_argument("--buffer-size", type=int, default=100_000)
    parser.add_argument("--learning-starts", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train-freq", type=int, default=4)
    parser.add_argument("--target-update", type=int, default=8_000)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--epsilon-end", type=float, default=0.01)
    parser.add_argument("--exploration-fraction", type=float, default=0.1)
    parser.add_argument("--checkpoint-every", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("numpy", "cupy", "auto"), default=None,
                        help="the transformer (default: $NG_BACKEND, else numpy)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where dqn_atari.h5 and returns.png go")
    add_progress_flag(parser, "environment steps")
    parser.add_argument("--resume", type=Path, default=None, help="start from this dqn_atari.h5")
    parser.add_argument("--eval-games", type=int, default=0, help="then play this many games at epsilon 0.05")
    args = parser.parse_args(argv)
    result = train(args.env, args.steps, args.buffer_size, args.learning_starts, args.batch_size, args.train_freq,
          args.target_update, args.lr, args.gamma, args.epsilon_end, args.exploration_fraction, args.checkpoint_every,
          args.seed, args.backend, args.out, show_progress(args.progress), args.resume)
    if args.eval_games:
        scores = evaluate(result.agent, args.env, args.eval_games, seed=args.seed + 1)
        print(f"evaluation (epsilon 0.05): scores {scores}, mean {np.mean(scores):+.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
