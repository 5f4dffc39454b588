"""Named axes as a safety feature: dot and element-wise ops align by name; outer products must be asked for."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core import Axes

C, H, N, W = (ng.make_axis(4, name="C"), ng.make_axis(3, name="H"), ng.make_axis(6, name="N"),
              ng.make_axis(5, name="W"))
RNG = np.random.default_rng(0)


def _data(axes) -> np.ndarray:
    return RNG.standard_normal(Axes(axes).lengths)


def _run(result, feeds):
    """Evaluate ``result`` in float64 with ``feeds`` (a dict placeholder -> array)."""
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f = t.computation(result, *feeds)
        return f(*feeds.values())


def _in_order(array: np.ndarray, axes, wanted) -> np.ndarray:
    """``array`` (laid out in ``axes``) transposed to the order of ``wanted`` (same names)."""
    names = Axes(axes).names
    return np.transpose(array, [names.index(a.name) for a in wanted])


# -- dot --------------------------------------------------------------------------------------


@pytest.mark.parametrize("w_axes, x_axes", list(itertools.product([[H, C], [C, H]], [[C, N], [N, C]])))
def test_dot_contracts_shared_axes_in_any_order(w_axes, x_axes):
    w, x = ng.placeholder(w_axes), ng.placeholder(x_axes)
    wv, xv = _data(w_axes), _data(x_axes)
    w_hc, x_cn = _in_order(wv, w_axes, [H, C]), _in_order(xv, x_axes, [C, N])

    y = ng.dot(w, x)
    assert y.axes == Axes([H, N])  # a's rest, then b's rest
    np.testing.assert_allclose(_run(y, {w: wv, x: xv}), w_hc @ x_cn, rtol=1e-10)

    y_t = ng.dot(x, w)
    assert y_t.axes == Axes([N, H])
    np.testing.assert_allclose(_run(y_t, {w: wv, x: xv}), (w_hc @ x_cn).T, rtol=1e-10)


def test_dot_result_axes_are_a_rest_then_b_rest():
    a, b = ng.placeholder([H, C, W]), ng.placeholder([N, C])
    assert ng.dot(a, b).axes == Axes([H, W, N])
    assert ng.dot(b, a).axes == Axes([N, H, W])


def test_dot_over_several_shared_axes():
    a, b = ng.placeholder([C, H, N]), ng.placeholder([H, W, C])
    av, bv = _data([C, H, N]), _data([H, W, C])
    y = ng.dot(a, b)
    assert y.axes == Axes([N, W])
    np.testing.assert_allclose(_run(y, {a: av, b: bv}), np.einsum("chn,hwc->nw", av, bv), rtol=1e-10)


def test_dot_of_vectors_is_a_scalar_and_disjoint_dot_is_an_outer_product():
    u, v = ng.placeholder([C]), ng.placeholder([C])
    uv, vv = _data([C]), _data([C])
    assert ng.dot(u, v).axes == Axes(())
    np.testing.assert_allclose(_run(ng.dot(u, v), {u: uv, v: vv}), uv @ vv, rtol=1e-10)
    h = ng.placeholder([H])
    hv = _data([H])
    outer = ng.dot(h, u)
    assert outer.axes == Axes([H, C])
    np.testing.assert_allclose(_run(outer, {h: hv, u: uv}), np.outer(hv, uv), rtol=1e-10)


def test_dot_with_a_shared_name_of_different_length_raises():
    a, b = ng.placeholder([H, C]), ng.placeholder([ng.make_axis(7, name="C"), N])
    with pytest.raises(ng.AxesError) as info:
        ng.dot(a, b)
    assert "C" in str(info.value)


# -- element-wise alignment by name -------------------------------------------------------------


def test_elementwise_aligns_by_name_regardless_of_order():
    a, b = ng.placeholder([C, N]), ng.placeholder([N, C])
    av, bv = _data([C, N]), _data([N, C])
    for y, ref in [(a + b, av + bv.T), (a * b, av * bv.T), (a - b, av - bv.T), (b / a, bv.T / av)]:
        assert y.axes.same_set(Axes([C, N]))
        got = _in_order(_run(y, {a: av, b: bv}), y.axes, [C, N])
        np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_subset_operand_is_broadcast_by_name():
    x, n = ng.placeholder([C, N]), ng.placeholder([N])
    xv, nv = _data([C, N]), _data([N])
    for y, ref in [(x + n, xv + nv), (n + x, nv + xv), (x * n, xv * nv), (n - x, nv - xv)]:
        assert y.axes == Axes([C, N])
        np.testing.assert_allclose(_run(y, {x: xv, n: nv}), ref, rtol=1e-10)


def test_subset_in_another_order_is_broadcast_by_name():
    x, s = ng.placeholder([C, H, N]), ng.placeholder([N, C])
    xv, sv = _data([C, H, N]), _data([N, C])
    y = x * s
    assert y.axes == Axes([C, H, N])
    np.testing.assert_allclose(_run(y, {x: xv, s: sv}), xv * sv.T[:, None, :], rtol=1e-10)


def test_scalar_broadcasts_over_a_tensor():
    x, s = ng.placeholder([C, N]), ng.placeholder([])
    xv, sv = _data([C, N]), np.array(1.5)
    for y, ref in [(x + 2.0, xv + 2), (2.0 - x, 2 - xv), (x / 4.0, xv / 4), (3.0 * x, 3 * xv),
                   (x * s, xv * 1.5), (s - x, 1.5 - xv)]:
        assert y.axes == Axes([C, N])
        np.testing.assert_allclose(_run(y, {x: xv, s: sv}), ref, rtol=1e-10)


def test_accidental_outer_product_raises_naming_both_axis_lists():
    h, w = ng.placeholder([H]), ng.placeholder([W])
    for build in (lambda: h + w, lambda: w * h, lambda: h - w, lambda: ng.maximum(h, w)):
        with pytest.raises(ng.AxesError) as info:
            build()
        message = str(info.value)
        assert str(h.axes) in message and str(w.axes) in message
        assert "ng.broadcast" in message


def test_outer_product_with_partial_overlap_also_raises():
    a, b = ng.placeholder([C, H]), ng.placeholder([H, N])
    with pytest.raises(ng.AxesError) as info:
        a + b
    assert str(a.axes) in str(info.value) and str(b.axes) in str(info.value)
    with pytest.raises(ng.AxesError):
        ng.where(a > 0.0, a, b)


def test_explicit_broadcast_gives_the_outer_sum():
    h, w = ng.placeholder([H]), ng.placeholder([W])
    hv, wv = _data([H]), _data([W])
    grid = ng.broadcast(h, [H, W]) + w
    assert grid.axes == Axes([H, W])
    np.testing.assert_allclose(_run(grid, {h: hv, w: wv}), hv[:, None] + wv[None, :], rtol=1e-10)
    other = ng.broadcast(w, [H, W]) * h
    assert other.axes == Axes([H, W])
    np.testing.assert_allclose(_run(other, {h: hv, w: wv}), hv[:, None] * wv[None, :], rtol=1e-10)


def test_same_name_different_length_raises():
    c4, c7 = ng.placeholder([C]), ng.placeholder([ng.make_axis(7, name="C")])
    with pytest.raises(ng.AxesError):
        c4 + c7
    with pytest.raises(ng.AxesError):
        ng.placeholder([C, N]) * ng.placeholder([ng.make_axis(7, name="C")])


# -- reductions -------------------------------------------------------------------------------


@pytest.fixture
def x3():
    x = ng.placeholder([C, H, N])
    return x, _data([C, H, N])


def test_reduction_axes(x3):
    x, xv = x3
    y = ng.sum(x, reduction_axes=[N])
    assert y.axes == Axes([C, H])
    np.testing.assert_allclose(_run(y, {x: xv}), xv.sum(axis=2), rtol=1e-10)
    y = ng.max(x, reduction_axes=[C, N])
    assert y.axes == Axes([H])
    np.testing.assert_allclose(_run(y, {x: xv}), xv.max(axis=(0, 2)), rtol=1e-10)
    # one axis, or axis names, work too
    assert ng.sum(x, reduction_axes=N) is ng.sum(x, reduction_axes=[N])
    assert ng.sum(x, reduction_axes=["N"]) is ng.sum(x, reduction_axes=[N])


def test_out_axes(x3):
    x, xv = x3
    y = ng.sum(x, out_axes=[C])
    assert y.axes == Axes([C])
    np.testing.assert_allclose(_run(y, {x: xv}), xv.sum(axis=(1, 2)), rtol=1e-10)


def test_reordered_out_axes(x3):
    x, xv = x3
    y = ng.sum(x, out_axes=[H, C])
    assert y.axes == Axes([H, C])
    np.testing.assert_allclose(_run(y, {x: xv}), xv.sum(axis=2).T, rtol=1e-10)
    m = ng.mean(x, out_axes=[N, C])
    assert m.axes == Axes([N, C])
    np.testing.assert_allclose(_run(m, {x: xv}), xv.mean(axis=1).T, rtol=1e-10)
    mx = ng.max(x, out_axes=[N, H])
    assert mx.axes == Axes([N, H])
    np.testing.assert_allclose(_run(mx, {x: xv}), xv.max(axis=0).T, rtol=1e-10)


def test_neither_reduces_every_axis(x3):
    x, xv = x3
    for y, ref in [(ng.sum(x), xv.sum()), (ng.mean(x), xv.mean()), (ng.max(x), xv.max()), (ng.min(x), xv.min())]:
        assert y.axes == Axes(())
        np.testing.assert_allclose(_run(y, {x: xv}), ref, rtol=1e-10)


def test_both_given_consistently(x3):
    x, xv = x3
    y = ng.sum(x, reduction_axes=[N], out_axes=[H, C])
    assert y.axes == Axes([H, C])
    np.testing.assert_allclose(_run(y, {x: xv}), xv.sum(axis=2).T, rtol=1e-10)


@pytest.mark.parametrize("reduction_axes, out_axes", [
    ([N], [C]),          # H is neither kept nor reduced
    ([N, C], [C, H]),    # C both kept and reduced
    ([N], [C, H, N]),    # N both kept and reduced
])
def test_both_given_inconsistently_raises(x3, reduction_axes, out_axes):
    x, _ = x3
    with pytest.raises(ng.AxesError):
        ng.sum(x, reduction_axes=reduction_axes, out_axes=out_axes)


def test_reducing_an_axis_the_input_lacks_raises(x3):
    x, _ = x3
    with pytest.raises(ng.AxesError):
        ng.sum(x, reduction_axes=[W])
    with pytest.raises(ng.AxesError):
        ng.sum(x, out_axes=[W])
    with pytest.raises(ng.AxesError):
        ng.sum(x, reduction_axes=[ng.make_axis(9, name="N")])  # right name, wrong length


# -- the seed example's slide bug -------------------------------------------------------------


def test_slide_bug_bias_with_the_feature_axis_raises():
    C4, N32 = ng.make_axis(4, name="C"), ng.make_axis(32, name="N")
    X = ng.placeholder([C4, N32])
    W_ = ng.variable([C4], initial_value=0)
    b = ng.variable([C4])  # the slide's bug: the bias should be a scalar
    with pytest.raises(ng.AxesError) as info:
        ng.dot(W_, X) + b
    assert str(Axes([N32])) in str(info.value) and str(Axes([C4])) in str(info.value)
    b_ok = ng.variable([], initial_value=0)
    assert (ng.dot(W_, X) + b_ok).axes == Axes([N32])
