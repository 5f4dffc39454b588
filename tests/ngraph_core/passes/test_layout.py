"""layout: reorders are dropped under dot and reductions, merged, and sunk through element-wise ops."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.passes.layout import LAYOUT, RULES, is_reorder
from ngraph_core.passes.layout import layout as layout_pass

T = ng.OpType
C, N, H = ng.make_axis(4, name="C"), ng.make_axis(3, name="N"), ng.make_axis(5, name="H")
x = ng.placeholder([C, N], name="x")
x2 = ng.placeholder([C, N], name="x2")
w = ng.placeholder([H, C], name="w")
bias = ng.placeholder([H], name="bias")
PLACEHOLDERS = [x, x2, w, bias]


def layout(roots: list[ng.Op]) -> list[ng.Op]:
    """The pass under test, with the IR verified after it."""
    out = layout_pass(roots)
    ng.verify(out)
    return out


def run(roots: list[ng.Op], placeholders: list[ng.Op], feeds: list[np.ndarray]) -> list[np.ndarray]:
    """Values of ``roots`` on the NumPy transformer, compiled as built (no optimizing pass)."""
    with ng.transformers.make_transformer(optimize=False) as t:
        return list(t.computation(list(roots), *placeholders)(*feeds))


def assert_same_values(before: list[ng.Op], after: list[ng.Op]) -> None:
    ng.verify(after)
    rng = np.random.default_rng(0)
    feeds = [rng.uniform(0.5, 2.0, p.shape).astype(p.dtype) for p in PLACEHOLDERS]
    for got, want in zip(run(after, PLACEHOLDERS, feeds), run(before, PLACEHOLDERS, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def order(v: ng.Op, *axes: ng.Axis) -> ng.Op:
    return ng.axes_with_order(v, list(axes))


def reorders(roots: list[ng.Op]) -> int:
    return sum(is_reorder(o) and o.axes != o.src[0].axes for o in ng.ordered_ops(roots))


# (before, expected)
CASES = {
    "dot drops a reorder of the contracted axes' owner": lambda: (ng.dot(order(w, C, H), x), ng.dot(w, x)),
    "dot drops a reorder of its second operand": lambda: (ng.dot(w, order(x, N, C)), ng.dot(w, x)),
    "reduction reduces the original": lambda: (ng.sum(order(x, N, C), out_axes=[N]), ng.sum(x, out_axes=[N])),
    "argmax reads the original": lambda: (ng.argmax(order(x, N, C), reduction_axes=[C]),
                                          ng.argmax(x, reduction_axes=[C])),
    "two reorders are one": lambda: (order(order(x, N, C), C, N), x),
    "a broadcast of a reorder is one broadcast": lambda: (ng.broadcast(order(x, N, C), [H, N, C]),
                                                          ng.broadcast(x, [H, N, C])),
    "a unary op sinks the reorder": lambda: (ng.exp(order(x, N, C)), order(ng.exp(x), N, C)),
    "a binary op sinks a shared reorder": lambda: (order(x, N, C) * order(x2, N, C), order(x * x2, N, C)),
    "scalars and smaller operands follow the inputs' order": lambda: (
        order(x, N, C) * 2.0 + ng.broadcast(ng.sum(x2, out_axes=[C]), [N, C]),
        order(x * 2.0 + ng.broadcast(ng.sum(x2, out_axes=[C]), [C, N]), N, C)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_before_and_expected(name):
    before, expected = CASES[name]()
    (after,) = layout([before])
    assert after is expected
    assert_same_values([before], [after])


def test_dot_keeps_a_reorder_that_orders_its_result():
    # u's kept axes come out in its order: [K, H, N] here, [H, K, N] from u itself
    K = ng.make_axis(2, name="K")
    u = ng.placeholder([H, K, C], name="u")
    before = ng.dot(order(u, K, H, C), x)
    assert before.axes.names == ("K", "H", "N")
    assert layout([before]) == [before]
    reordered_shared_only = ng.dot(order(u, H, C, K), x)  # [H, K] keep their order: dropped
    assert layout([reordered_shared_only]) == [ng.dot(u, x)]


def test_mixed_orders_are_left_alone():
    A, B = ng.make_axis(2, name="A"), ng.make_axis(3, name="B")
    u = ng.placeholder([A, B, C])
    v = ng.placeholder([B, A, C])
    before = order(u, C, A, B) + order(v, C, A, B)  # two different input orders
    assert layout([before]) == [before]


def test_a_transpose_sinks_to_the_dot_that_absorbs_it():
    xt = order(x, N, C)
    h = ng.tanh(xt * 2.0 + 1.0)  # [N, C]
    before = ng.sum(ng.dot(h, order(w, C, H)))  # contracts C
    (after,) = layout([before])
    assert reorders([before]) == 2 and reorders([after]) == 0
    assert after is ng.sum(ng.dot(ng.tanh(x * 2.0 + 1.0), w))
    assert_same_values([before], [after])


def test_gradients_of_a_transposed_affine_layer_keep_their_values():
    y = ng.tanh(ng.dot(order(w, C, H), x) + bias)
    loss = ng.sum(ng.square(order(y, N, H)))
    roots = [loss, *ng.gradients(loss, [x, w, bias])]
    after = layout(roots)
    assert reorders(after) < reorders(roots)
    assert_same_values(roots, after)


def test_a_renaming_of_a_reorder_renames_first():
    A, B = ng.make_axis(4, name="A"), ng.make_axis(3, name="B")
    before = ng.cast_axes(order(x, N, C), [B, A])  # x [C, N] -> [N, C] -> renamed [B, A]
    (after,) = layout([before])
    assert after is order(ng.cast_axes(x, [A, B]), B, A)
    assert_same_values([before], [after])


def nchw_cnn() -> tuple[list[ng.Op], list[ng.Op], list[np.ndarray]]:
    """What ONNX import builds around a convolution: NCHW values, each a renamed reorder of the [K, H, W, N]
    the convolution computes, a batch norm and ReLU in NCHW, a residual add, a max pool, a second conv."""
    Nb, Cc, Hh, Ww = ng.make_axis(2, "N"), ng.make_axis(3, "C"), ng.make_axis(6, "H"), ng.make_axis(5, "W")
    K, R, S = ng.make_axis(4, "K"), ng.make_axis(3, "R"), ng.make_axis(3, "S")
    rng = np.random.default_rng(3)
    image = ng.placeholder([Nb, Cc, Hh, Ww])
    w1 = ng.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32), [Cc, R, S, K])
    h = ng.convolution(image, w1, padding=1)  # [K, H, W, N]
    D1, D2, D3, D4 = (ng.make_axis(n, f"D{i}") for i, n in enumerate((2, 4, 6, 5), 1))
    nchw = ng.cast_axes(order(h, *[h.axes[3], h.axes[0], h.axes[1], h.axes[2]]), [D1, D2, D3, D4])
    gamma = ng.broadcast(ng.constant(rng.standard_normal(4).astype(np.float32), [D2]), [D1, D2, D3, D4])
    y = ng.relu(nchw * gamma + 0.5)
    y = y + nchw  # a residual add of two reorders of one order
    pooled = ng.pooling(ng.cast_axes(y, [ng.make_axis(2, "N"), K, h.axes[1], h.axes[2]]), 2, strides=2,
                        op="max")  # [N, K, H', W']
    K2 = ng.make_axis(2, "K2")
    w2 = ng.constant(rng.standard_normal((4, 3, 3, 2)).astype(np.float32), [K, R, S, K2])
    out = ng.convolution(pooled, w2, padding=1)
    feed = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    return [out, pooled], [image], [feed]


def test_an_nchw_cnn_keeps_its_convolutions_order():
    roots, placeholders, feeds = nchw_cnn()
    after = layout(roots)
    # one reorder (the convolution's output to NCHW) before; after, one too, moved to the end: the pooled
    # value is a result in NCHW, while the batch norm, ReLU, add and pool ran in the convolution's order
    assert reorders(roots) == 1 and reorders(after) == 1
    assert is_reorder(after[1]) and after[1].src[0].op is T.POOL
    ops = ng.ordered_ops(after)
    (pool,) = [o for o in ops if o.op is T.POOL]
    assert pool.axes.names[-1] == "N" and pool.src[0].axes.names[-1] != pool.src[0].axes.names[0]
    assert all(not is_reorder(c.src[0]) for c in ops if c.op is T.CONV)
    for got, want in zip(run(after, placeholders, feeds), run(roots, placeholders, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_reorder_that_moves_a_spatial_axis_stays_before_a_convolution():
    Cc, Hh, Ww, Nb = ng.make_axis(2, "C"), ng.make_axis(4, "H"), ng.make_axis(5, "W"), ng.make_axis(2, "N")
    R, S, K = ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(3, "K")
    image = ng.placeholder([Cc, Ww, Hh, Nb])
    w1 = ng.placeholder([Cc, R, S, K])
    before = ng.convolution(order(image, Cc, Hh, Ww, Nb), w1, padding=1)  # a real transpose of H and W
    assert layout([before]) == [before]


def test_rule_table():
    assert len(LAYOUT) == len(RULES) == 8


def test_a_moved_convolution_and_pool_keep_their_names_and_scopes():
    """Per-layer counters (``ngraph bench -pc``) group by scope: the rewritten ops keep the originals' meta."""
    roots, _, _ = nchw_cnn()
    for op in ng.ordered_ops(roots):
        if op.op in (T.CONV, T.POOL):
            ng.update_meta(op, name=f"layer_{op.op.value}_{op.axes.lengths[0]}")
    after = layout(roots)
    names = sorted(o.meta.name for o in ng.ordered_ops(after) if o.op in (T.CONV, T.POOL))
    assert names == sorted(o.meta.name for o in ng.ordered_ops(roots) if o.op in (T.CONV, T.POOL))
