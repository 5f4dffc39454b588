"""``scan_layout``: an element-wise scan sequence is computed recurrent-axis-first; values unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import OpType, make, toposort
from ngraph_core.passes.scan_layout import step_major_sequences

F, H, N = ng.make_axis(4, "F"), ng.make_axis(3, "H"), ng.make_axis(2, "N")
REC = ng.make_axis(5, "REC")
rng = np.random.default_rng(0)
# exact in float32: variables keep their float32 initial values, even on a float64 transformer
W0, B0 = (a.astype(np.float32).astype(np.float64) for a in (rng.standard_normal((3, 4)), rng.standard_normal(3)))


def projected_rnn() -> tuple:
    """``h_t = tanh(p_t + h)`` over the projection ``p = W x + b`` (a ``[H, REC, N]`` add of a dot)."""
    x = ng.placeholder([F, REC, N], name="x")
    w = ng.variable([H, F], initial_value=W0, name="W")
    b = ng.variable([H], initial_value=B0, name="b")
    projected = ng.dot(w, x) + b

    def step(p_t, h):
        new = ng.tanh(p_t + h)
        return [new], [new]

    (final,), (ys,) = ng.scan(step, [projected], [ng.constant(0.0, [H, N])], REC)
    return final, ys, x, w, projected


def numpy_rnn(xv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, ys = np.zeros((3, 2)), []
    for t in range(5):
        h = np.tanh(W0 @ xv[:, t] + B0[:, None] + h)
        ys.append(h)
    return h, np.stack(ys, 1)


def sequence_of(roots: list) -> ng.Op:
    (scan,) = [op for op in toposort(roots) if op.op is OpType.SCAN]
    return scan.src[0]


def test_an_elementwise_sequence_is_computed_step_major() -> None:
    final, ys, _, _, projected = projected_rnn()
    assert [a.name for a in sequence_of([final, ys]).axes] == ["H", "REC", "N"]
    new_roots = step_major_sequences([final, ys, projected])
    seq = sequence_of(new_roots[:2])
    assert seq.op is OpType.ADD and [a.name for a in seq.axes] == ["REC", "H", "N"]
    assert new_roots[2].axes == projected.axes  # another reader sees the original order (a reorder view)


def test_a_placeholder_sequence_is_left_alone() -> None:
    x = ng.placeholder([H, REC, N], name="x")
    (final,), _ = ng.scan(lambda x_t, h: ([ng.tanh(x_t + h)], [ng.tanh(x_t + h)]), [x], [ng.constant(0.0, [H, N])],
                          REC)
    assert step_major_sequences([final]) == [final]  # a reorder of a placeholder would be a copy: none added


@pytest.mark.parametrize("optimize", [True, False])
def test_values_forward_and_gradient(optimize: bool) -> None:
    final, ys, x, w, projected = projected_rnn()
    (gw,) = ng.gradients(ng.sum(ys * ng.constant(np.arange(30.0).reshape(3, 5, 2) / 30, ys.axes)), [w])
    xv = rng.standard_normal((4, 5, 2))
    with ng.transformers.make_transformer(float_dtype="float64", optimize=optimize) as t:
        computation = t.computation([final, ys, projected, gw], x)
        got_final, got_ys, got_p, got_gw = computation(xv)
    seqs = [op.src[0] for op in computation.graph.order if op.op is OpType.SCAN]
    assert len(seqs) == 2  # the forward scan and its reverse (which reads the projection too)
    if optimize:  # the compiled graph computes the projection step-major
        assert any(s.axes[0].name == "REC" for s in seqs)
    want_final, want_ys = numpy_rnn(xv)
    np.testing.assert_allclose(got_final, want_final, rtol=1e-12)
    np.testing.assert_allclose(got_ys, want_ys, rtol=1e-12)
    np.testing.assert_allclose(got_p, np.einsum("hf,ftn->htn", W0, xv) + B0[:, None, None], rtol=1e-12)
    eps, numeric = 1e-6, np.zeros_like(W0)
    weights = np.arange(30.0).reshape(3, 5, 2) / 30
    for idx in np.ndindex(*W0.shape):
        for sign in (1, -1):
            w2 = W0.copy()
            w2[idx] += sign * eps
            h, stack = np.zeros((3, 2)), []
            for s in range(5):
                h = np.tanh(w2 @ xv[:, s] + B0[:, None] + h)
                stack.append(h)
            numeric[idx] += sign * np.sum(np.stack(stack, 1) * weights) / (2 * eps)
    np.testing.assert_allclose(got_gw, numeric, rtol=1e-6, atol=1e-8)


def test_a_dot_read_only_by_the_sequence_is_computed_step_major() -> None:
    """``dot(W, x) + b``: the dot itself gets the order [REC, H, N] (one batched matmul), and keeps it
    through a save/load; a dot that something else also reads is left in its order."""
    final, ys, _, _, projected = projected_rnn()
    (seq,) = [op.src[0] for op in toposort(step_major_sequences([final, ys])) if op.op is OpType.SCAN]
    dots = [s for s in seq.src if s.op is OpType.DOT]
    assert len(dots) == 1 and [a.name for a in dots[0].axes] == ["REC", "H", "N"]
    (loaded,) = ng.deserialize(ng.serialize([dots[0]]))
    assert loaded.axes == dots[0].axes
    dot = projected.src[0] if projected.src[0].op is OpType.DOT else projected.src[1]
    (seq,) = [op.src[0] for op in toposort(step_major_sequences([final, ys, dot])) if op.op is OpType.SCAN]
    assert not any(s.op is OpType.DOT for s in seq.src)  # the dot is a result too: a view of it, not a second dot


def test_a_dot_order_must_hold_the_same_axes() -> None:
    w, x = ng.placeholder([H, F]), ng.placeholder([F, REC, N])
    with pytest.raises(ng.AxesError, match="not a reordering"):
        make(OpType.DOT, [w, x], axes=[REC, H, F])
