"""Reductions on NumPy (``kernels/reduce.py``): ``ufunc.reduce`` into the output as it lies, split over two workers
along a kept axis when big (``PARALLEL_MIN_ELEMENTS``), against NumPy for every kind and output order."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.transformers.kernels import reduce as reduce_kernels
from ngraph_core.transformers.numpy import runtime

A, B, C, D = (ng.make_axis(n, name) for n, name in ((3, "A"), (5, "B"), (4, "C"), (6, "D")))
KINDS = {"sum": (ng.sum, np.sum), "max": (ng.max, np.max), "min": (ng.min, np.min), "prod": (ng.prod, np.prod)}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("out_axes", [[A, B, C], [C, A], [D], [B, D, A]],
                         ids=lambda axes: "".join(a.name for a in axes))
def test_reductions_match_numpy(monkeypatch, kind, out_axes, workers):
    monkeypatch.setenv("NG_THREADS", str(workers))
    monkeypatch.setattr(reduce_kernels, "PARALLEL_MIN_ELEMENTS", 1)
    calls: list[int] = []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: calls.append(len(tasks)) or real_run(tasks))
    ours, theirs = KINDS[kind]
    x = ng.placeholder([A, B, C, D])
    value = np.random.default_rng(0).uniform(0.5, 1.5, (3, 5, 4, 6)).astype("float32")
    with ng.transformers.make_transformer() as t:
        got = t.computation(ours(x, out_axes=out_axes), x)(value)
    names = "ABCD"
    reduced = tuple(i for i, n in enumerate(names) if n not in [a.name for a in out_axes])
    kept = [n for n in names if n in [a.name for a in out_axes]]
    expected = np.transpose(theirs(value, axis=reduced), [kept.index(a.name) for a in out_axes])
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert (2 in calls) == (workers == 2)
