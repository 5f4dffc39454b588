"""``prune_scans``: a scan packs its gradient's per-step values only when something reads them."""

from __future__ import annotations

import numpy as np

import ngraph_core as ng
from ngraph_core.ir import OpType, toposort
from ngraph_core.passes.scan_prune import prune_scans

H, N = ng.make_axis(3, "H"), ng.make_axis(2, "N")
REC = ng.make_axis(5, "REC")


def gated_rnn() -> tuple:
    """A gated cell (sigmoid and tanh: values a differentiable scan keeps), its input and weight."""
    x = ng.placeholder([H, REC, N], name="x")
    w = ng.variable([H], initial_value=np.array([0.5, -1.0, 1.5]), name="w")

    def step(x_t, h):
        z = ng.sigmoid(x_t * w + h)
        new = z * h + (1.0 - z) * ng.tanh(x_t - h)
        return [new], [new]

    (final,), (ys,) = ng.scan(step, [x], [ng.constant(0.0, [H, N])], REC)
    return final, ys, x, w


def numpy_rnn(xv: np.ndarray, wv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, ys = np.zeros((3, 2)), []
    for t in range(5):
        z = 1 / (1 + np.exp(-(xv[:, t] * wv[:, None] + h)))
        h = z * h + (1 - z) * np.tanh(xv[:, t] - h)
        ys.append(h)
    return h, np.stack(ys, 1)


def scans(roots: list) -> list:
    return [op for op in toposort(roots) if op.op is OpType.SCAN]


def test_unread_saved_states_and_kept_values_are_dropped() -> None:
    final, ys, _, _ = gated_rnn()
    (built,) = scans([final, ys])
    assert built.arg.save_states and built.arg.n_keep == 2  # the sigmoid and the tanh, kept for a gradient
    (pruned,) = scans(prune_scans([final, ys]))
    assert not pruned.arg.save_states and pruned.arg.n_keep == 0
    assert len(pruned.arg.body.roots) == 2 and pruned.axes.size < built.axes.size  # a smaller pack


def test_a_gradient_keeps_them() -> None:
    final, ys, _, w = gated_rnn()
    (grad,) = ng.gradients(ng.sum(ys), [w])
    forward = [op for op in scans(prune_scans([final, grad])) if op.arg.save_states]
    assert len(forward) == 1 and forward[0].arg.n_keep == 2  # the backward reads them: nothing pruned


def test_pruned_inference_and_training_give_the_same_values() -> None:
    """The compiled forward (pruned, its cell fused) and the training computation (unpruned) agree with NumPy."""
    final, ys, x, w = gated_rnn()
    (grad,) = ng.gradients(ng.sum(ys), [w])
    xv = np.random.default_rng(0).standard_normal((3, 5, 2))
    want_final, want_ys = numpy_rnn(xv, np.array([0.5, -1.0, 1.5]))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        forward = t.computation([final, ys], x)
        (scan_op,) = [op for op in forward.graph.order if op.op is OpType.SCAN]
        assert scan_op.arg.n_keep == 0 and not scan_op.arg.save_states
        (body,) = [c for key, c in t._subgraphs.items()  # keyed by the body, or (body, buffers it writes into)
                   if (key[0] if isinstance(key, tuple) else key) is scan_op.arg.body]
        assert sum(op.op is OpType.FUSED for op in body.graph.order) >= 1  # gates no longer roots: fused
        got_final, got_ys = forward(xv)
        train = t.computation([final, ys, grad], x)
        assert any(op.arg.save_states for op in train.graph.order if op.op is OpType.SCAN)
        t_final, t_ys, _ = train(xv)
    for got, want in ((got_final, want_final), (got_ys, want_ys), (t_final, want_final), (t_ys, want_ys)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_unread_step_outputs_are_dropped_and_indices_follow() -> None:
    """Training on the final state only: the stacked outputs go, the saved states and kept values stay
    (the gradient reads them), and every value is as before."""
    final, ys, x, w = gated_rnn()
    (grad,) = ng.gradients(ng.sum(final * final), [w])
    (forward,) = [op for op in scans(prune_scans([final, grad])) if op.arg.save_states]
    assert forward.arg.n_out == 0 and forward.arg.n_keep == 2
    (kept_ys,) = [op for op in scans(prune_scans([final, ys, grad])) if op.arg.save_states]
    assert kept_ys.arg.n_out == 1  # read: kept
    xv = np.random.default_rng(1).standard_normal((3, 5, 2))
    values = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(float_dtype="float64", optimize=optimize) as t:
            values.append(t.computation([final, grad], x)(xv))
    want_final, _ = numpy_rnn(xv, np.array([0.5, -1.0, 1.5]))
    np.testing.assert_allclose(values[0][0], want_final, rtol=1e-12)
    for got, want in zip(*values, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
