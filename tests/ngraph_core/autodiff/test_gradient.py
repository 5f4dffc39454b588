"""Reverse-mode autodiff semantics: one shared backward graph, scalar costs, scopes and labels, custom gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core import Axes, OpType

C, H, N = ng.make_axis(4, name="C"), ng.make_axis(3, name="H"), ng.make_axis(5, name="N")
RNG = np.random.default_rng(7)


def _run(results, feeds=None):
    feeds = feeds or {}
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        return t.computation(results, *feeds)(*feeds.values())


def _affine():
    X, Y = ng.placeholder([C, N], name="X"), ng.placeholder([H, N], name="Y")
    W, b = ng.variable([H, C], initial_value=0.1, name="W"), ng.variable([H], initial_value=0.0, name="b")
    L = ng.sum(ng.square(ng.tanh(ng.dot(W, X) + b) - Y)) / ng.batch_size(X)
    return X, Y, W, b, L


def test_deriv_and_gradients_share_one_backward_graph():
    X, Y, W, b, L = _affine()
    grad_W, grad_b = ng.gradients(L, [W, b])
    assert ng.deriv(L, W) is grad_W
    assert ng.deriv(L, b) is grad_b
    assert ng.gradients(L, [b, W]) == [grad_b, grad_W]
    assert ng.gradients(L, [b, W])[1] is grad_W
    # the two gradients share the backward ops above the affine output
    shared = {id(o) for o in ng.ordered_ops([grad_W])} & {id(o) for o in ng.ordered_ops([grad_b])}
    forward = {id(o) for o in ng.ordered_ops([L])}
    assert shared - forward, "grad_W and grad_b should share backward ops"


def test_gradients_have_the_axes_of_their_variables_and_the_right_values():
    X, Y, W, b, L = _affine()
    grad_W, grad_b = ng.gradients(L, [W, b])
    assert grad_W.axes == W.axes and grad_b.axes == b.axes
    xv, yv = RNG.standard_normal((4, 5)), RNG.standard_normal((3, 5))
    gw, gb = _run([grad_W, grad_b], {X: xv, Y: yv})
    # by hand: L = sum((tanh(Wx + b) - y)^2) / N
    z = np.tanh(np.full((3, 4), 0.1) @ xv)
    dz = 2 * (z - yv) * (1 - z**2) / 5
    np.testing.assert_allclose(gw, dz @ xv.T, rtol=1e-6)
    np.testing.assert_allclose(gb, dz.sum(axis=1), rtol=1e-6)


def test_non_scalar_cost_without_error_raises():
    x = ng.variable([C], initial_value=1.0)
    with pytest.raises(ng.AxesError) as info:
        ng.gradients(x * x, [x])
    assert "error=" in str(info.value)
    with pytest.raises(ng.AxesError):
        ng.deriv(x * 3.0, x)


def test_error_gives_the_upstream_gradient():
    x = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0, 4.0]))
    e = ng.placeholder([C])
    ev = np.array([1.0, -1.0, 0.5, 2.0])
    g = ng.deriv(x * x, x, error=e)
    assert g.axes == x.axes
    np.testing.assert_allclose(_run(g, {e: ev}), ev * 2 * np.array([1, 2, 3, 4.0]), rtol=1e-12)
    with pytest.raises(ng.AxesError):
        ng.deriv(x * x, x, error=ng.placeholder([H]))


def test_gradient_of_an_unrelated_variable_is_zeros_with_its_axes():
    x = ng.variable([C], initial_value=1.0)
    unrelated = ng.variable([H, N], initial_value=5.0)
    g_x, g_u = ng.gradients(ng.sum(x * 3.0), [x, unrelated])
    assert g_u.axes == unrelated.axes
    got_x, got_u = _run([g_x, g_u])
    np.testing.assert_array_equal(got_u, np.zeros((3, 5)))
    np.testing.assert_allclose(got_x, np.full(4, 3.0), rtol=1e-12)


def test_backward_ops_carry_the_forward_scope_and_a_grad_label():
    X = ng.placeholder([C, N])
    W = ng.variable([H, C], initial_value=0.5)
    with ng.name_scope("Affine_0", kind="Affine"):
        y = ng.sigmoid(ng.dot(W, X))
        L = ng.sum(y)
    forward = {id(o) for o in ng.ordered_ops([L])}
    grad_W = ng.deriv(L, W)  # built outside any scope
    backward = [o for o in ng.ordered_ops([grad_W]) if id(o) not in forward]
    computing = [o for o in backward if o.op not in (OpType.CONSTANT,)]
    assert computing, "the gradient should need new ops"
    for op in computing:
        assert [(e.name, e.kind) for e in op.meta.scope] == [("Affine_0", "Affine")], op
        assert "grad" in op.meta.labels, op
    assert grad_W in computing
    assert any(o.op is OpType.DOT for o in computing)


def test_backward_ops_of_each_layer_carry_that_layer_scope():
    X = ng.placeholder([C, N])
    W1, W2 = ng.variable([H, C], initial_value=0.5), ng.variable([ng.make_axis(2, name="K"), H], initial_value=0.5)
    with ng.name_scope("layer1", kind="Affine"):
        h = ng.tanh(ng.dot(W1, X))
    with ng.name_scope("layer2", kind="Affine"):
        out = ng.dot(W2, h)
    L = ng.sum(out)
    g1, g2 = ng.gradients(L, [W1, W2])
    assert [e.name for e in g1.meta.scope] == ["layer1"] and "grad" in g1.meta.labels
    assert [e.name for e in g2.meta.scope] == ["layer2"] and "grad" in g2.meta.labels


def test_forward_ops_do_not_get_the_grad_label():
    v = ng.variable([C], initial_value=0.5)
    with ng.name_scope("Affine_0", kind="Affine"):
        L = ng.sum(ng.tanh(v) + 1.0)
    forward = ng.ordered_ops([L])
    ng.deriv(L, v)
    assert [o for o in forward if "grad" in o.meta.labels] == []


def test_custom_gradient_does_not_relabel_its_forward_ops():
    @ng.custom_gradient
    def scaled(x):
        return x * 2.0, lambda ctx: [ctx]

    v = ng.variable([C], initial_value=0.5)
    with ng.name_scope("block", kind="Block"):
        L = ng.sum(scaled(v))
    forward = ng.ordered_ops([L])
    ng.deriv(L, v)
    assert [o for o in forward if "grad" in o.meta.labels] == []


def test_custom_gradient_replaces_the_gradient():
    @ng.custom_gradient
    def fake_square(x):
        return x * x, lambda ctx: [ctx * 3.0]

    x = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0, 4.0]))
    y = fake_square(x)
    value, grad = _run([y, ng.deriv(ng.sum(y), x)])
    np.testing.assert_allclose(value, [1, 4, 9, 16], rtol=1e-12)  # forward is the real square
    np.testing.assert_allclose(grad, np.full(4, 3.0), rtol=1e-6)  # gradient is the custom one, not 2x


def test_custom_gradient_with_two_inputs_and_a_none():
    @ng.custom_gradient
    def mul_left_only(a, b):
        return a * b, lambda ctx: [ctx * b, None]

    a = ng.variable([C], initial_value=2.0)
    b = ng.variable([C], initial_value=5.0)
    ga, gb = _run(ng.gradients(ng.sum(mul_left_only(a, b)), [a, b]))
    np.testing.assert_allclose(ga, np.full(4, 5.0), rtol=1e-12)
    np.testing.assert_array_equal(gb, np.zeros(4))


def test_stop_gradient_blocks_the_gradient():
    x = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0, 4.0]))
    # d/dx sum(stop(x) * x) = stop(x) = x, not 2x
    g = ng.deriv(ng.sum(ng.stop_gradient(x) * x), x)
    np.testing.assert_allclose(_run(g), [1, 2, 3, 4], rtol=1e-12)
    blocked = ng.deriv(ng.sum(ng.stop_gradient(x * x)), x)
    np.testing.assert_array_equal(_run(blocked), np.zeros(4))
    assert blocked.axes == x.axes


def test_gradient_through_a_reused_subexpression_accumulates():
    x = ng.variable([C], initial_value=np.array([1.0, 2.0, -3.0, 0.5]))
    g = ng.deriv(ng.sum(x * x + x), x)
    np.testing.assert_allclose(_run(g), 2 * np.array([1.0, 2.0, -3.0, 0.5]) + 1, rtol=1e-12)
    # y = x*x has two consumers; both contributions reach x
    y = x * x
    g2 = ng.deriv(ng.sum(y + y * y), x)  # d/dx (x^2 + x^4) = 2x + 4x^3
    xv = np.array([1.0, 2.0, -3.0, 0.5])
    np.testing.assert_allclose(_run(g2), 2 * xv + 4 * xv**3, rtol=1e-12)


def test_gradient_wrt_an_intermediate_op():
    x = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0, 4.0]))
    y = x * 3.0
    g = ng.deriv(ng.sum(ng.square(y)), y)  # d/dy sum(y^2) = 2y = 6x
    assert g.axes == y.axes
    np.testing.assert_allclose(_run(g), 6 * np.array([1.0, 2.0, 3.0, 4.0]), rtol=1e-6)


def test_gradient_reduces_broadcast_axes_back():
    X = ng.placeholder([C, N])
    b = ng.variable([], initial_value=0.0)
    c = ng.variable([N], initial_value=0.0)
    L = ng.sum((X + b) * 2.0 + c)
    gb, gc = ng.gradients(L, [b, c])
    assert gb.axes == Axes(()) and gc.axes == Axes([N])
    got_b, got_c = _run([gb, gc], {X: np.zeros((4, 5))})
    assert float(got_b) == pytest.approx(2.0 * 4 * 5)
    np.testing.assert_allclose(got_c, np.full(5, 4.0))
