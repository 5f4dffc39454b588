"""Attention fusion (``passes/attention.py``): the composite -> one ``fused_attention`` op where its weights have no
other use and its scores are large enough; the composite kept in training graphs, for taps, dropout, short
sequences and many short ones. The kernel's own tests: tests/ngraph_core/transformers/test_fused_attention.py."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import OpType, toposort
from ngraph_core.passes import attention as fusion
from ngraph_core.passes.attention import fuse_attention


def operands(heads: int, t: int, n: int, depth: int = 8, dtype: str = "float32", tk: int | None = None):
    """``q [D, H, REC, N]``, ``k`` and ``v`` (``tk`` keys), ``key_lengths [N]``, and seeded values for them."""
    D, H, N = ng.make_axis(depth, "D"), ng.make_axis(heads, "H"), ng.make_axis(n, "N")
    Q, K = ng.make_axis(t, "REC"), ng.make_axis(tk or t, "REC")
    q, k, v = (ng.placeholder(axes, dtype=dtype) for axes in ([D, H, Q, N], [D, H, K, N], [D, H, K, N]))
    lengths = ng.placeholder([N], dtype="int32")
    rng = np.random.default_rng(t)
    values = [rng.standard_normal(x.axes.lengths).astype(dtype) for x in (q, k, v)]
    return (q, k, v, lengths), [*values, rng.integers(0, (tk or t) + 1, n).astype(np.int32)]


def kinds(roots) -> set[OpType]:
    return {op.op for op in toposort(list(roots))}


def compiled_kinds(results, feeds, mode: str = "inference") -> set[OpType]:
    with ng.transformers.make_transformer() as t:
        return {op.op for op in t.computation(results, *feeds, mode=mode).graph.order}


def test_composite_becomes_one_op_with_its_mask_and_scale():
    (q, k, v, lengths), _ = operands(2, 5, 3, tk=7)
    out = ng.scaled_dot_product_attention(q, k, v, causal=True, key_lengths=lengths, scale=0.3)
    # before: batch_dot(softmax(where(b(valid), batch_dot(q, k') * b(0.3), b(lowest))) * b(valid), v')
    assert {OpType.EXP, OpType.WHERE, OpType.LESS} <= kinds([out])
    (fused,) = fuse_attention([out], 0, 0)
    # after: b(fused_attention(q, k', v', lengths)), the renamings k' and v' and the final transpose kept
    op = fused.src[0]
    assert fused.op is OpType.BROADCAST and op.op is OpType.FUSED_ATTENTION
    assert op.src[0] is q and op.src[3] is lengths and [s.src[0] for s in op.src[1:3]] == [k, v]
    assert (op.arg.feature, op.arg.scale, op.arg.causal) == ("D", 0.3, True)
    assert kinds([fused]) & {OpType.WHERE, OpType.EXP, OpType.BATCH_DOT, OpType.LESS} == set()
    assert fused.axes == out.axes


@pytest.mark.parametrize("causal,use_lengths", [(False, False), (True, False), (False, True)])
def test_each_mask_alone_is_read_back(causal, use_lengths):
    (q, k, v, lengths), values = operands(2, 6, 3, dtype="float64")
    out = ng.scaled_dot_product_attention(q, k, v, causal=causal, key_lengths=lengths if use_lengths else None)
    (fused,) = fuse_attention([out], 0, 0)
    op = fused.src[0]
    assert op.op is OpType.FUSED_ATTENTION and op.arg.causal is causal and (len(op.src) == 4) is use_lengths
    with ng.transformers.make_transformer(optimize=False) as t:
        got, expected = t.computation([fused, out], q, k, v, lengths)(*values)
    np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)


def test_compiler_fuses_long_sequences_and_keeps_short_ones():
    """Default thresholds: 4 heads x 256 x 256 (2^18 scores) fused, 4 x 128 x 128 kept, 4 heads x 4 examples x
    128 x 128 fused; 8 heads x 16 examples x 64 x 64 (2^19 scores, 4096 each) kept: many short sequences run
    faster as stacked matmuls."""
    for heads, t, n, fused in ((4, 256, 1, True), (4, 128, 1, False), (8, 64, 16, False), (4, 128, 4, True)):
        (q, k, v, _), _ = operands(heads, t, n)
        out = ng.scaled_dot_product_attention(q, k, v)
        assert (OpType.FUSED_ATTENTION in compiled_kinds(out, [q, k, v])) is fused, (heads, t, n)
        assert (heads * n * t * t >= fusion.MIN_SCORES and t * t >= fusion.MIN_POSITION_SCORES) is fused


def test_generated_source_calls_the_fused_kernel():
    (q, k, v, _), values = operands(4, 256, 1)
    out = ng.scaled_dot_product_attention(q, k, v, causal=True)
    with ng.transformers.make_transformer() as t:
        f = t.computation(out, q, k, v, mode="inference")
        assert "fused_attention" in f.source and "batch_dot" not in f.source
        f(*values[:3])


def test_training_graph_keeps_the_composite_and_its_values():
    """With gradients the backward reads the weights: nothing fused, and the forward value and the gradients are
    those of the graph compiled as built; the forward alone, fused, gives the same value."""
    (q, k, v, lengths), values = operands(4, 256, 1, dtype="float64")
    values[3] = np.array([200], dtype=np.int32)
    out = ng.scaled_dot_product_attention(q, k, v, causal=True, key_lengths=lengths)
    loss = ng.sum(out * out)
    grads = ng.gradients(loss, [q, k, v])
    feeds = [q, k, v, lengths]
    assert OpType.FUSED_ATTENTION not in compiled_kinds([out, *grads], feeds, mode="training")
    results = {}
    for optimize in (True, False):
        with ng.transformers.make_transformer(optimize=optimize) as t:
            results[optimize] = t.computation([out, *grads], *feeds)(*values)
    for got, expected in zip(results[True], results[False]):
        np.testing.assert_allclose(got, expected, atol=1e-10, rtol=1e-10)
    with ng.transformers.make_transformer() as t:
        f = t.computation(out, *feeds)  # forward only, training mode: fused
        assert OpType.FUSED_ATTENTION in {op.op for op in f.graph.order}
        np.testing.assert_allclose(f(*values), results[False][0], atol=1e-12, rtol=1e-12)


def test_weights_read_elsewhere_dropout_and_other_masks_keep_the_composite():
    (q, k, v, lengths), _ = operands(2, 5, 3)
    out = ng.scaled_dot_product_attention(q, k, v, causal=True)
    weights = out.src[0].src[0]  # out: the final transpose of batch_dot(weights, v)
    assert weights.axes.names[-2:] == ("REC", "REC_K")
    assert fuse_attention([out, weights], 0, 0)[0] is out  # a result (how a tap is compiled) reads them
    assert fuse_attention([out, ng.sum(weights)], 0, 0)[0] is out  # another op reads them
    assert OpType.FUSED_ATTENTION in kinds(fuse_attention([out], 0, 0))
    dropped = ng.scaled_dot_product_attention(q, k, v, dropout=0.1)
    assert fuse_attention([dropped], 0, 0)[0] is dropped
    for bigger in (10**9, None):  # above the given floor, or the default one
        assert fuse_attention([out], bigger, 0)[0] is out and fuse_attention([out], 0, bigger)[0] is out
