"""Single element-wise ops on NumPy split over two workers from ``PARALLEL_MIN_ELEMENTS``
(``kernels/elementwise.py``): the same values as one worker, broadcast and scalar operands included."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.transformers.kernels import elementwise
from ngraph_core.transformers.numpy import runtime

A, B, C = (ng.make_axis(n, name) for n, name in ((1, "A"), (7, "B"), (5, "C")))  # A: too short to split
OPS = {
    "mul_broadcast": lambda x, y: x * ng.broadcast(ng.sum(y, out_axes=[A, B]), [A, B, C]),
    "where": lambda x, y: ng.where(ng.greater(x, y), x, y * 2.0),
    "sigmoid": lambda x, y: ng.sigmoid(x),
    "cast": lambda x, y: ng.cast(ng.cast(x * 10.0, "int32"), "float32"),
    "div_scalar": lambda x, y: x / (ng.sum(y) + 1.0),
}


@pytest.mark.parametrize("name", list(OPS))
def test_split_element_wise_ops_give_one_workers_values(monkeypatch, name):
    monkeypatch.setattr(elementwise, "PARALLEL_MIN_ELEMENTS", 1)
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((1, 7, 5)).astype("float32") for _ in range(2)]
    results, calls = [], []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: calls.append(len(tasks)) or real_run(tasks))
    for workers in (1, 2):
        monkeypatch.setenv("NG_THREADS", str(workers))
        x, y = ng.placeholder([A, B, C]), ng.placeholder([A, B, C])
        with ng.transformers.make_transformer(optimize=False) as t:  # unfused: each op its own kernel
            results.append(t.computation(OPS[name](x, y), x, y)(*values))
    assert 2 in calls  # the second run split (along B: A is one long)
    np.testing.assert_array_equal(results[0], results[1])
