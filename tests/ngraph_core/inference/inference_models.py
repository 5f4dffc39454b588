"""Models the inference-engine tests share, trained once per process on the real MNIST subset.

The MLP (with a Dropout, so the test sees it vanish in inference) trains 2 epochs on 4,000
digits; the CNN (two Conv + BatchNorm + ReLU + Pool, then Affine) 2 epochs on 2,000. Both
reach about 90% test accuracy in well under a second each.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from neon.activations import Rectlin, Softmax
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator
from neon.data.mnist import load_mnist_subset
from neon.initializers import GlorotUniform, set_seed
from neon.layers import Affine, Conv, Dropout, Pool
from neon.model import Model
from neon.optimizers import Adam, GradientDescentMomentum

IMAGE = (1, 28, 28)


@functools.lru_cache(maxsize=1)
def mnist() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    (x_train, y_train), (x_test, y_test) = load_mnist_subset()
    return x_train, y_train, x_test, y_test


def datasets(lshape: Any = None, n_train: int = 4000) -> tuple[ArrayIterator, ArrayIterator]:
    x_train, y_train, x_test, y_test = mnist()
    train = ArrayIterator(x_train[:n_train], y_train[:n_train], nclass=10, batch_size=64, shuffle=True, seed=0,
                          lshape=lshape)
    test = ArrayIterator(x_test, y_test, nclass=10, batch_size=100, lshape=lshape)
    return train, test


@functools.lru_cache(maxsize=1)
def trained_mlp() -> Model:
    set_seed(0)
    train, _ = datasets()
    model = Model([Affine(64, GlorotUniform(), activation=Rectlin()), Dropout(0.9),
                   Affine(10, GlorotUniform(), activation=Softmax())])
    model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1, 0.9), num_epochs=2)
    return model


@functools.lru_cache(maxsize=1)
def trained_cnn() -> Model:
    set_seed(0)
    train, _ = datasets(IMAGE, n_train=2000)
    model = Model([Conv((5, 5, 8), init=GlorotUniform(), strides=2, padding=2, batch_norm=True, activation=Rectlin()),
                   Pool((2, 2)),
                   Conv((3, 3, 16), init=GlorotUniform(), padding=1, batch_norm=True, activation=Rectlin()),
                   Pool((2, 2)),
                   Affine(10, GlorotUniform(), activation=Softmax())])
    model.fit(train, CrossEntropyMulti(), Adam(0.01), num_epochs=2)
    return model
