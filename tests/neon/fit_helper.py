"""A tiny classification problem and MLP shared by the Model, saving and callback tests (seconds to train)."""

from __future__ import annotations

import numpy as np

from neon.activations import Rectlin, Softmax
from neon.data import ArrayIterator
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine
from neon.model import Model

NCLASS, FEATURES = 3, 4


def blobs(n: int = 90, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in 4-D around 3 well-separated centres: ``X (n, 4)``, integer labels ``(n,)``."""
    rng = np.random.default_rng(seed)
    centres = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]], dtype=np.float32)
    y = np.arange(n) % NCLASS
    return (centres[y] + 0.5 * rng.standard_normal((n, FEATURES))).astype(np.float32), y


def datasets(batch_size: int = 32, seed: int = 0) -> tuple[ArrayIterator, ArrayIterator]:
    """Train (90 samples: batches of 32, 32, 26; shuffled, seeded) and validation (45 samples) sets."""
    X, y = blobs(90, seed=0)
    Xv, yv = blobs(45, seed=1)
    return (ArrayIterator(X, y, nclass=NCLASS, batch_size=batch_size, shuffle=True, seed=seed),
            ArrayIterator(Xv, yv, nclass=NCLASS, batch_size=batch_size))


def mlp(hidden: int = 8, seed: int = 0, depth: int = 1) -> Model:
    """A seeded MLP 4 -> hidden (x depth) -> 3 (softmax): the same seed gives the same initial weights."""
    layers = [Affine(hidden, GlorotUniform(seed=seed + i), bias=Constant(0.0), activation=Rectlin())
              for i in range(depth)]
    layers.append(Affine(NCLASS, GlorotUniform(seed=seed + 100), bias=Constant(0.0), activation=Softmax()))
    return Model(layers)


def weights(model: Model) -> list[np.ndarray]:
    """The current values of every model variable, in order."""
    return [model.transformer.read_variable(v) for v in model.variables]
