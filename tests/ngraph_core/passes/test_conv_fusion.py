"""Conv + bias + activation fusion: a ``conv`` becomes the head of a ``fused`` op (before/expected/numerics)."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import FusedProgram, OpType, toposort
from ngraph_core.passes.fusion import fuse_elementwise

C, H, W, N = (ng.make_axis(n, name=s) for n, s in [(3, "C"), (6, "H"), (5, "W"), (4, "N")])
R, S, K = (ng.make_axis(n, name=s) for n, s in [(3, "R"), (3, "S"), (8, "K")])


def conv_bias_relu(strides: int = 1, padding: int = 1, groups: int = 1):
    """``relu(conv(x, w) + b)``; returns (y, x, w, b)."""
    x = ng.placeholder([C if groups == 1 else ng.make_axis(4, name="C4"), H, W, N])
    ci = x.axes[0].length // groups
    w = ng.variable([ng.make_axis(ci, name="Ci"), R, S, K],
                    np.random.default_rng(0).standard_normal((ci, 3, 3, 8)).astype(np.float32) * 0.3)
    b = ng.variable([K], np.linspace(-0.5, 0.5, 8, dtype=np.float32))
    h = ng.convolution(x, w, strides=strides, padding=padding, groups=groups)
    return ng.relu(h + b), x, w, b


def test_conv_bias_relu_becomes_one_fused_op_with_a_conv_head():
    y, x, w, b = conv_bias_relu()
    (fused,) = fuse_elementwise([y])  # before: relu(add(conv(x, w), broadcast(b)))
    assert fused.op is OpType.FUSED
    assert fused.src[:2] == (x, w) and fused.src[2].op is OpType.BROADCAST and fused.src[2].src[0] is b
    assert fused.arg.head == "conv" and fused.arg.conv == y.src[0].src[0].arg
    assert repr(fused.arg) == "relu(add(conv(x0, x1), x2))"
    assert not any(op.op is OpType.CONV for op in toposort([fused]))
    assert hash(fused.arg) == hash(FusedProgram(fused.arg.steps, conv=fused.arg.conv))


def test_a_conv_with_another_consumer_is_not_a_head():
    y, *_ = conv_bias_relu()
    h = y.src[0].src[0]
    fused = fuse_elementwise([y, ng.sum(h)])[0]
    assert fused.arg.head is None and h in fused.src


@pytest.mark.parametrize("strides, padding, groups", [(1, 1, 1), (2, 0, 1), (1, 1, 2)],
                         ids=["same", "strided", "grouped"])
def test_fused_conv_forward_and_gradients_match_unoptimized(strides, padding, groups):
    y, x, w, b = conv_bias_relu(strides, padding, groups)
    loss = ng.sum(y * y)
    grads = ng.gradients(loss, [x, w, b])
    xv = np.random.default_rng(1).standard_normal(x.axes.lengths).astype(np.float32)
    runs = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(optimize=optimize) as t:
            forward = t.computation(y, x)
            step = t.computation([loss, *grads], x)
            runs.append([forward(xv), *step(xv)])
            if optimize:
                heads = [op.arg.head for op in forward.graph.order if op.op is OpType.FUSED]
                assert heads == ["conv"], heads
    for got, want in zip(*runs):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_conv_read_through_a_renaming_is_a_head():
    """An imported model renames a conv's output axes before its bias (``cast_axes``, same lengths in the
    same order): the conv is still the head, and the output the unfused one. A dot read through a renaming
    is not (its kernel reads the output's axis names)."""
    x = ng.placeholder([C, H, W, N])
    w = ng.constant(np.random.default_rng(2).standard_normal((3, 3, 3, 8)).astype(np.float32), [C, R, S, K])
    h = ng.convolution(x, w, padding=1)
    renamed = ng.cast_axes(h, [ng.make_axis(a.length, name=f"{a.name}2") for a in h.axes])
    b = ng.constant(np.linspace(-0.5, 0.5, 8, dtype=np.float32), [renamed.axes[0]])
    y = ng.relu(renamed + b)
    (fused,) = fuse_elementwise([y])
    assert fused.arg.head == "conv" and fused.src[:2] == (x, w)
    assert repr(fused.arg) == "relu(add(conv(x0, x1), x2))"
    xv = np.random.default_rng(3).standard_normal(x.axes.lengths).astype(np.float32)
    runs = []
    for optimize in (True, False):
        with ng.transformers.make_transformer(optimize=optimize) as t:
            runs.append(t.computation(y, x)(xv))
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-5, atol=1e-5)

    a = ng.placeholder([ng.make_axis(5, name="A"), ng.make_axis(4, name="B")])
    m = ng.constant(np.ones((4, 3), np.float32), [a.axes[1], ng.make_axis(3, name="D")])
    product = ng.dot(a, m)
    z = ng.relu(ng.cast_axes(product, [ng.make_axis(5, name="A2"), ng.make_axis(3, name="D2")]) + 1.0)
    (fused,) = fuse_elementwise([z])
    assert fused.arg.head is None
