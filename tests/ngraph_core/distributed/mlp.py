"""A 3-layer MLP training step shared by the distributed tests and their MPI worker (``workers/worker.py``).

``step(x, y, distributed=True)`` averages the gradients across the ranks with
``ng.distributed.allreduce`` (bucketed by the compiler); with ``distributed=False`` it is
the plain single-process step. The loss is the mean over the local batch, so the mean of
the ranks' gradients on equal halves equals the full batch's gradient.
"""

from __future__ import annotations

import numpy as np

import ngraph_core as ng

F, H1, H2, K = ng.make_axis(6, "F"), ng.make_axis(5, "H1"), ng.make_axis(4, "H2"), ng.make_axis(3, "K")
BATCH = 8
LEARNING_RATE = 0.5
SHAPES = [(H1, F), (H1,), (H2, H1), (H2,), (K, H2), (K,)]


def batch() -> tuple[np.ndarray, np.ndarray]:
    """The fixed global batch: inputs [F, 8] and one-hot targets [K, 8]."""
    rng = np.random.default_rng(3)
    return rng.normal(size=(F.length, BATCH)), np.eye(K.length)[rng.integers(0, K.length, BATCH)].T


def build(n: int, distributed: bool = False, bucket_bytes: int | None = None) -> dict:
    """Placeholders, parameters, gradients (averaged when ``distributed``), loss and update for a batch of ``n``."""
    N = ng.make_axis(n, "N")
    x, y = ng.placeholder([F, N], name="x"), ng.placeholder([K, N], name="y")
    rng = np.random.default_rng(11)
    params = []
    for i, axes in enumerate(SHAPES):
        value = rng.normal(scale=0.7, size=[a.length for a in axes])
        with ng.name_scope(f"Affine_{i // 2}", kind="Affine"):
            params.append(ng.variable(list(axes), initial_value=value, name="W" if len(axes) == 2 else "b"))
    h = x
    for i in range(3):
        with ng.name_scope(f"Affine_{i}", kind="Affine"):
            h = ng.dot(params[2 * i], h) + params[2 * i + 1]
            h = ng.relu(h) if i == 0 else ng.tanh(h) if i == 1 else h
    loss = ng.sum(ng.cross_entropy_multi(ng.softmax(h), y)) / float(n)
    grads = ng.gradients(loss, params)
    if distributed:
        grads = [ng.distributed.allreduce(g, "mean", bucket_bytes=bucket_bytes) for g in grads]
    update = ng.doall([ng.assign(p, p - LEARNING_RATE * g) for p, g in zip(params, grads)])
    return {"x": x, "y": y, "params": params, "grads": grads, "loss": loss, "update": update}


def step(xs: np.ndarray, ys: np.ndarray, distributed: bool = False, bucket_bytes: int | None = None,
         **options) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """One SGD step on (xs, ys): the (averaged) gradients it applied and the weights after it."""
    model = build(xs.shape[1], distributed, bucket_bytes)
    with ng.transformers.make_transformer(**options) as t:
        out = t.computation([*model["grads"], model["update"]], model["x"], model["y"])(xs, ys)
        return [np.asarray(g) for g in out[:-1]], [t.read_variable(p) for p in model["params"]]
