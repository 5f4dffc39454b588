"""The ``batch_dot`` kernel (``transformers/kernels/contraction.py``): every layout of its operands and output
against ``numpy.einsum``, with one worker and with its batch split over two (``PARALLEL_MIN_MULTIPLY_ADDS``)."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import OpType, make
from ngraph_core.transformers.kernels import contraction
from ngraph_core.transformers.numpy import runtime

D, H, T, S, N = (ng.make_axis(n, name) for n, name in ((16, "D"), (3, "H"), (24, "REC"), (20, "REC_K"), (5, "N")))


def letters(axes) -> str:
    return "".join(a.name[0] if a.name != "REC_K" else "s" for a in axes).lower()


CASES = {
    # attention's scores from batch-last q and k [D, H, REC, N]: the operands are copied for BLAS
    "qk_batch_last": ([D, H, T, N], [D, H, S, N], None, ["H", "N"]),
    # weights [H, N, REC, REC_K] times v [D, H, REC_K, N], then a gradient's order for the output
    "weights_v": ([H, N, T, S], [D, H, S, N], None, ["N", "H"]),
    "reordered_output": ([H, N, T, S], [D, H, S, N], [D, H, T, N], ["H", "N"]),
    "batch_in_the_middle": ([T, N, D], [D, N, S], None, ["N"]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_batch_dot_matches_einsum(monkeypatch, case, workers, dtype):
    a_axes, b_axes, out_axes, batch = CASES[case]
    monkeypatch.setenv("NG_THREADS", str(workers))
    monkeypatch.setattr(contraction, "PARALLEL_MIN_MULTIPLY_ADDS", 1)  # split even these small products
    calls: list[int] = []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: calls.append(len(tasks)) or real_run(tasks))
    a, b = ng.placeholder(a_axes, dtype=dtype), ng.placeholder(b_axes, dtype=dtype)
    op = ng.batch_dot(a, b, batch)
    if out_axes is not None:
        op = make(OpType.BATCH_DOT, [a, b], axes=[*out_axes])
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal([ax.length for ax in axes]).astype(dtype) for axes in (a_axes, b_axes))
    with ng.transformers.make_transformer(float_dtype=dtype) as t:
        got = t.computation(op, a, b)(x, y)
    expected = np.einsum(f"{letters(a_axes)},{letters(b_axes)}->{letters(op.axes)}", x, y)
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)
    assert (2 in calls) == (workers == 2)  # split over both workers, and only when there are two


def test_a_stack_of_matrices_is_copied_only_when_blas_cannot_read_it():
    stack = contraction.stacked_matrices
    x = np.arange(4 * 6 * 8, dtype="float32").reshape(4, 6, 8)
    assert np.shares_memory(stack(np, x, 1, 1, "float32"), x)  # C-order matrices: a view
    flipped = x.transpose(0, 2, 1)
    assert np.shares_memory(stack(np, flipped, 1, 1, "float32"), x)  # column-major matrices: read as they are
    np.testing.assert_array_equal(stack(np, x, 0, 2, "float32"), x.reshape(24, 8))  # two axes merged into rows
    assert np.shares_memory(stack(np, x, 0, 2, "float32"), x)
    # attention's q [D, H, REC, N] as [H, N] stacks of REC x D: no unit stride, REC's is the smaller: copied
    # column-major (REC innermost), the values unchanged
    q = np.arange(8 * 2 * 5 * 3, dtype="float32").reshape(8, 2, 5, 3)
    view = q.transpose(1, 3, 2, 0)
    got = stack(np, view, 2, 1, "float32")
    np.testing.assert_array_equal(got, view)
    assert got.strides[-2] == 4 and not np.shares_memory(got, q)
    # b's side, [H, N, D, REC_K]: D has the larger stride, REC_K the smaller: row-major
    got = stack(np, q.transpose(1, 3, 0, 2), 2, 1, "float32")
    assert got.strides[-1] == 4
    np.testing.assert_array_equal(got, q.transpose(1, 3, 0, 2))
    # a gradient's [D, H] x [REC, N] from [H, N, REC, D] memory: rows merged from two axes, copied
    g = np.arange(2 * 3 * 5 * 4, dtype="float32").reshape(2, 3, 5, 4)  # [H, N, REC, D]
    rows_cols = g.transpose(3, 0, 2, 1)  # [D, H, REC, N]
    got = stack(np, rows_cols, 0, 2, "float32")
    np.testing.assert_array_equal(got, rows_cols.reshape(8, 15))
    assert got.strides[-2] == 4  # D (stride one element) innermost: column-major
    assert stack(np, x, 1, 1, "float64").dtype == np.float64
