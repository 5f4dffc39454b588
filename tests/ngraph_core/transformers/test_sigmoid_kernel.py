"""The ``sigmoid`` kernel in its tails: finite, no overflow warnings, full relative precision
wherever the result is a normal number, and correct when it writes over its input (in place)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ngraph_core.ir import OpType
from ngraph_core.transformers.kernels.elementwise import step_function

XS = [-1000.0, -100.0, -88.0, -87.0, -80.0, -30.0, -5.0, -1e-3, 0.0, 1e-3, 5.0, 17.0, 30.0, 100.0, 1000.0]


def reference(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("in_place", [False, True])
def test_sigmoid_tails(dtype: str, in_place: bool) -> None:
    sigmoid = step_function(np, OpType.SIGMOID)
    x = np.array(XS, dtype=dtype)
    out = x if in_place else np.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in exp would be a RuntimeWarning
        got = sigmoid(out, x.copy() if not in_place else x)
    assert got is out and got.dtype == np.dtype(dtype) and np.all(np.isfinite(got))
    tiny, eps = np.finfo(dtype).tiny, np.finfo(dtype).eps
    for xi, gi in zip(XS, got.tolist(), strict=True):
        want = reference(xi)
        assert 0.0 <= gi <= 1.0
        if want >= tiny:  # a normal number: full relative precision
            assert abs(gi - want) <= 4 * eps * want, (xi, gi, want)
        else:  # below the normal range: at most the smallest normal-range value, never negative
            assert gi <= 2 * tiny, (xi, gi, want)
    assert got[XS.index(0.0)] == 0.5 and got[-1] == 1.0
