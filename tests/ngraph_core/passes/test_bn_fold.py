"""Batch-norm folding: inference ``BatchNorm`` after a ``conv``/``dot`` -> folded filter + bias."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.layers import BatchNorm, Conv, training_mode
from ngraph_core.ir import OpType, toposort
from ngraph_core.passes.bn_fold import fold_batch_norm

C, H, W, N = (ng.make_axis(n, name=s) for n, s in [(3, "C"), (6, "H"), (6, "W"), (4, "N")])
RNG = np.random.default_rng(0)


def stats(bn: BatchNorm) -> dict[ng.Op, np.ndarray]:
    """Non-trivial running statistics and affine parameters for ``bn``."""
    k = bn.axis.length
    return {bn.mean: RNG.standard_normal(k), bn.var: RNG.uniform(0.5, 2.0, k),
            bn.gamma: RNG.uniform(0.5, 1.5, k), bn.beta: RNG.standard_normal(k)}


def run(results, x, values: dict, xv: np.ndarray, optimize: bool):
    with ng.transformers.make_transformer(optimize=optimize) as t:
        for var, value in values.items():
            t.write_variable(var, np.asarray(value, dtype=np.float32))
        computation = t.computation(results, x)
        return computation(xv), computation.graph


def conv_bn(training: bool, layers: int = 1):
    """``layers`` neon ``Conv(batch_norm=True, bias, relu)`` layers; returns (y, x, BatchNorm layers)."""
    x = h = ng.placeholder([C, H, W, N])
    convs = [Conv((3, 3, 8), padding=1, bias=0.1, activation="relu", batch_norm=True) for _ in range(layers)]
    with training_mode(training):
        for conv in convs:
            h = conv(h)
    return h, x, [conv.batch_norm for conv in convs]


def count(roots, kind: OpType) -> int:
    return sum(op.op is kind for op in toposort(roots))


def test_inference_conv_batch_norm_folds_into_filter_and_bias():
    y, x, (bn,) = conv_bn(training=False)
    conv = next(op for op in toposort([y]) if op.op is OpType.CONV)
    # before: relu(add(add(mul(mul(sub(conv(x, W), b(mean)), b(rsqrt(var + eps))), b(gamma)), b(beta)), b(bias)))
    assert count([y], OpType.RSQRT) == 1 and count([y], OpType.SUB) == 1
    (z,) = fold_batch_norm([y])
    # expected: relu(add(add(conv(x, W * b(s)), b(beta - mean * s)), b(bias))), s = rsqrt(var + eps) * gamma
    add_bias = z.src[0]
    folded = add_bias.src[0]
    new_conv, shift = folded.src
    assert new_conv.op is OpType.CONV and new_conv.arg == conv.arg and new_conv.src[0] is x
    scaled = new_conv.src[1]
    assert scaled.op is OpType.MUL and scaled.src[0] is conv.src[1] and scaled.src[1].op is OpType.BROADCAST
    scale = scaled.src[1].src[0]
    assert scale.op is OpType.MUL and scale.src[1] is bn.gamma and scale.src[0].op is OpType.RSQRT
    assert shift.op is OpType.BROADCAST and shift.src[0].op is OpType.SUB and shift.src[0].src[0] is bn.beta
    assert conv not in toposort([z])  # the [K, H, W, N] normalization is gone; only [K]-sized ops remain
    assert all(op.axes.lengths == (8,) for op in toposort([z]) if op.op in (OpType.SUB, OpType.RSQRT))


@pytest.mark.parametrize("layers", [1, 2])
def test_folded_inference_matches_unoptimized(layers):
    y, x, bns = conv_bn(training=False, layers=layers)
    values = {k: v for bn in bns for k, v in stats(bn).items()}
    xv = RNG.standard_normal(x.axes.lengths).astype(np.float32)
    got, graph = run(y, x, values, xv, optimize=True)
    want, _ = run(y, x, values, xv, optimize=False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert not any(op.op is OpType.RSQRT and op.axes.length > 8 for op in graph.order)
    assert [op.arg.head for op in graph.order if op.op is OpType.FUSED].count("conv") == layers


def test_training_graph_is_not_rewritten():
    y, _, (bn,) = conv_bn(training=True)
    assert fold_batch_norm([y, *bn.updates]) == [y, *bn.updates]
    assert fold_batch_norm([y]) == [y]  # batch statistics, not variables: never folded


def test_statistics_an_assign_writes_are_not_folded():
    y, _, (bn,) = conv_bn(training=False)
    update = ng.assign(bn.mean, bn.mean * 0.5)
    assert fold_batch_norm([y, update]) == [y, update]


def test_a_conv_with_another_consumer_is_not_folded():
    y, _, _ = conv_bn(training=False)
    conv = next(op for op in toposort([y]) if op.op is OpType.CONV)
    assert fold_batch_norm([y, ng.sum(conv)]) == [y, ng.sum(conv)]


def test_bias_before_the_norm_and_a_dot_head_fold():
    F, G = ng.make_axis(5, name="F"), ng.make_axis(7, name="G")
    x = ng.placeholder([F, N])
    w = ng.variable([G, F], RNG.standard_normal((7, 5)).astype(np.float32))
    b0 = ng.variable([G], RNG.standard_normal(7).astype(np.float32))
    bn = BatchNorm()
    with training_mode(False):
        y = bn(ng.dot(w, x) + b0)  # bn(h + b0) = bn'(h) with mean' = mean - b0
    (z,) = fold_batch_norm([y])
    assert count([z], OpType.DOT) == 1 and z.src[0].op is OpType.DOT and z.src[0].src[0].src[0] is w
    xv = RNG.standard_normal((5, 4)).astype(np.float32)
    values = stats(bn)
    got, _ = run(y, x, values, xv, optimize=True)
    want, _ = run(y, x, values, xv, optimize=False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_renamed_reordered_conv_folds():
    """ONNX's form: the normalization reads ``cast_axes(reorder(conv))`` (``[N, C, H, W]`` under fresh names)
    with parameters on the renamed channel axis. The scale is renamed back to the filter's ``K``, the views are
    rebuilt over the folded convolution, and the values are the unfolded graph's."""
    x = ng.placeholder([C, H, W, N])
    R, S, K = ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(8, "K")
    w = ng.variable([C, R, S, K], RNG.standard_normal((3, 3, 3, 8)).astype(np.float32))
    h = ng.convolution(x, w, padding=1)  # [K, H, W, N]
    fresh = [ng.make_axis(n, f"d{i}") for i, n in enumerate((4, 8, 6, 6))]
    viewed = ng.cast_axes(ng.axes_with_order(h, [N, K, H, W]), fresh)
    mean, var, gamma, beta = (ng.variable([fresh[1]], v.astype(np.float32)) for v in
                              (RNG.standard_normal(8), RNG.uniform(0.5, 2.0, 8), RNG.uniform(0.5, 1.5, 8),
                               RNG.standard_normal(8)))
    y = ng.relu(ng.batch_norm(viewed, gamma, beta, eps=1e-5, mean=mean, var=var))
    (z,) = fold_batch_norm([y])
    assert not any(op.op is OpType.SUB and len(op.axes) == 4 for op in toposort([z]))
    (conv,) = [op for op in toposort([z]) if op.op is OpType.CONV]
    scaled = conv.src[1]
    assert scaled.op is OpType.MUL and scaled.src[0] is w
    renamed = scaled.src[1].src[0]
    assert renamed.op is OpType.CAST_AXES and list(renamed.axes) == [K]
    biased = z.src[0]
    assert biased.op is OpType.ADD and biased.src[0].op is OpType.CAST_AXES and biased.src[0].axes == viewed.axes
    xv = RNG.standard_normal(x.axes.lengths).astype(np.float32)
    got, _ = run(y, x, {}, xv, optimize=True)
    want, _ = run(y, x, {}, xv, optimize=False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    folded, _ = run(z, x, {}, xv, optimize=False)
    np.testing.assert_allclose(folded, want, rtol=1e-4, atol=1e-4)


def test_a_view_of_a_non_conv_does_not_fold():
    """A renamed placeholder is no conv/dot: the normalization stays."""
    x = ng.placeholder([C, H, W, N])
    fresh = [ng.make_axis(n, f"e{i}") for i, n in enumerate((3, 6, 6, 4))]
    viewed = ng.cast_axes(x, fresh)
    params = [ng.variable([fresh[0]], np.ones(3, np.float32)) for _ in range(4)]
    y = ng.batch_norm(viewed, params[0], params[1], eps=1e-5, mean=params[2], var=params[3])
    assert fold_batch_norm([y]) == [y]
