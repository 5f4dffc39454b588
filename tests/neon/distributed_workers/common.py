"""What the distributed tests' workers share: a seeded problem, a small MLP, and array dumps.

The workers run under ``mpiexec -n 2`` (one process per rank) and, for the single-process
reference, imported by the tests themselves: the same function with the same seeds, so the two
runs differ only in how the batches are split across ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from neon.activations import Rectlin, Softmax
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine
from neon.model import Model

NCLASS, FEATURES = 3, 5


def problem(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy points around 3 centres: ``X (n, 5)`` float32 and integer labels ``(n,)``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, NCLASS, n)
    centres = np.eye(NCLASS, FEATURES, dtype=np.float32) * 2.0
    return (centres[y] + 0.7 * rng.standard_normal((n, FEATURES))).astype(np.float32), y


def mlp(seed: int, float_dtype: str = "float64") -> Model:
    """5 -> 8 (ReLU) -> 3 (softmax), Glorot-initialised from ``seed``: one seed, one set of initial weights."""
    return Model([Affine(8, GlorotUniform(seed=seed), bias=Constant(0.0), activation=Rectlin()),
                  Affine(NCLASS, GlorotUniform(seed=seed + 1), bias=Constant(0.0), activation=Softmax())],
                 float_dtype=float_dtype)


def snapshot(model: Model) -> dict[str, np.ndarray]:
    """Every checkpoint entry (weights and optimizer state) by key, as read from the transformer now."""
    params, opt = model.checkpoint_keys()
    keys = {**{f"params|{k}": v for k, v in params.items()}, **{f"opt|{k}": v for k, v in opt.items()}}
    return {key.replace("/", "|"): model.transformer.read_variable(v) for key, v in keys.items()}


def save_arrays(path: Path, arrays: dict[str, Any]) -> None:
    """``arrays`` to an ``.npz`` (uncompressed: the tests compare bit for bit)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
