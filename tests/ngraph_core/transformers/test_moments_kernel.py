"""The ``moments`` kernel over leading axes (``kernels/normalization.py``): a layer norm's ``[F, REC, N]`` reduced
over ``F`` as it lies, in column blocks, on one worker and split over two, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import OpType, make
from ngraph_core.transformers.kernels import normalization
from ngraph_core.transformers.numpy import runtime


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("lengths", [(24, 7, 5), (300, 3, 2)])  # blocks of 2730 / 218 columns: a partial last one
def test_moments_over_the_leading_axis_match_numpy(monkeypatch, lengths, workers, dtype):
    monkeypatch.setenv("NG_THREADS", str(workers))
    monkeypatch.setattr(normalization, "BLOCK_ELEMENTS", 1 << 6)  # several column blocks even at these sizes
    monkeypatch.setattr(normalization, "PARALLEL_MIN_ELEMENTS", 1)
    taken: list[str] = []
    real = normalization._moments_over_leading_axes
    monkeypatch.setattr(normalization, "_moments_over_leading_axes",
                        lambda op, kc: taken.append("leading") or real(op, kc))
    calls: list[int] = []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: calls.append(len(tasks)) or real_run(tasks))
    F, R, N = (ng.make_axis(n, name) for n, name in zip(lengths, ("F", "REC", "N")))
    x = ng.placeholder([F, R, N], dtype=dtype)
    stats = make(OpType.MOMENTS, [x], axes=[ng.make_axis(2, "moments"), R, N])
    rng = np.random.default_rng(0)
    value = (rng.standard_normal(lengths) * 3 + 100).astype(dtype)  # a large mean: no cancellation allowed
    with ng.transformers.make_transformer(float_dtype=dtype) as t:
        got = t.computation(stats, x)(value)
    assert taken == ["leading"]
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[0], value.mean(axis=0), rtol=tol)
    np.testing.assert_allclose(got[1], value.var(axis=0), rtol=20 * tol)
    assert (2 in calls) == (workers == 2)


def test_other_layouts_keep_the_general_kernel():
    F, R, N = (ng.make_axis(n, name) for n, name in ((8, "F"), (3, "REC"), (2, "N")))
    x = ng.placeholder([R, F, N])  # the reduced axis in the middle
    stats = make(OpType.MOMENTS, [x], axes=[ng.make_axis(2, "moments"), R, N])
    value = np.random.default_rng(1).standard_normal((3, 8, 2)).astype("float32")
    with ng.transformers.make_transformer() as t:
        got = t.computation(stats, x)(value)
    np.testing.assert_allclose(got[0], value.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], value.var(axis=1), rtol=1e-4)
