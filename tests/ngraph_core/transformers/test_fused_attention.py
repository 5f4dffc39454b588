"""The ``fused_attention`` kernel (``kernels/attention.py``, ``numpy/fused_attention.py``) against the composite
it replaces and a plain NumPy reference: float32 and float64, causal, key lengths with empty rows, cross-attention
(more and fewer keys than queries), tiles that do not divide the lengths, several heads and examples, another
output order; the compiled softmax step against the NumPy one; the memory of a long sequence."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core import OpType
from ngraph_core.ir import make
from ngraph_core.ir.attention import AttentionArg
from ngraph_core.passes import attention as fusion
from ngraph_core.transformers.kernels import attention as shared
from ngraph_core.transformers.numpy import fused_attention

TOLERANCES = {"float32": 1e-5, "float64": 1e-12}


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path_factory, monkeypatch):
    """One cache directory for the module's tests (compiles are shared), never the user's home."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ng-cache"))


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of 4 queries x 3 keys, so every length below spans several, the last ones partial; every composite
    fused, however small."""
    monkeypatch.setattr(shared, "QUERY_BLOCK", 4)
    monkeypatch.setattr(shared, "KEY_BLOCK", 3)
    monkeypatch.setattr(fusion, "MIN_SCORES", 0)
    monkeypatch.setattr(fusion, "MIN_POSITION_SCORES", 0)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool,
              lengths: list[int] | None) -> np.ndarray:
    """Attention in NumPy on ``[D, H, REC, N]`` arrays (float64): zeros for a query that sees no key."""
    scores = np.einsum("dhtn,dhsn->hnts", q, k) * scale
    _, n, tq, tk = scores.shape
    valid = np.ones((n, tq, tk), bool)
    if causal:
        valid &= np.tril(np.ones((tq, tk), bool))
    if lengths is not None:
        valid &= np.arange(tk)[None, None, :] < np.asarray(lengths)[:, None, None]
    scores = np.where(valid, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = weights.sum(axis=-1, keepdims=True)
    weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
    return np.einsum("hnts,ehsn->ehtn", weights, v)


def attention_case(tq: int, tk: int, dtype: str, causal: bool, lengths: list[int] | None, heads: int = 2,
                   depth: int = 8, v_depth: int = 5, scale: float | None = None, examples: int = 3, seed: int = 0):
    """``scaled_dot_product_attention`` on ``[D, H, REC, N]`` placeholders of ``dtype``: (out, feeds, values)."""
    rng = np.random.default_rng(seed)
    n = examples if lengths is None else len(lengths)
    D, DV, H, N = (ng.make_axis(x, name) for x, name in ((depth, "D"), (v_depth, "DV"), (heads, "H"), (n, "N")))
    Q, K = ng.make_axis(tq, "REC"), ng.make_axis(tk, "REC")
    q, k, v = (ng.placeholder(axes, dtype=dtype) for axes in ([D, H, Q, N], [D, H, K, N], [DV, H, K, N]))
    key_lengths = ng.placeholder([N], dtype="int32") if lengths is not None else None
    out = ng.scaled_dot_product_attention(q, k, v, causal=causal, key_lengths=key_lengths, scale=scale)
    values = [rng.standard_normal(x.axes.lengths).astype(dtype) for x in (q, k, v)]
    feeds = [q, k, v]
    if key_lengths is not None:
        feeds.append(key_lengths)
        values.append(np.array(lengths, dtype=np.int32))
    return out, feeds, values


def run(results, feeds, values, dtype: str, optimize: bool = True):
    """The results and the computation's op kinds, on a NumPy transformer running ``dtype``."""
    with ng.transformers.make_transformer(float_dtype=dtype, optimize=optimize) as t:
        f = t.computation(results, *feeds, mode="inference")
        return f(*values), {op.op for op in f.graph.order}


CASES = [  # (queries, keys, causal, key lengths): every tile boundary partial with 4 x 3 tiles
    (9, 9, False, None),
    (9, 9, True, None),
    (9, 11, False, [11, 0, 5]),
    (9, 11, True, [11, 0, 5]),  # cross-attention, causal aligned top-left
    (11, 7, True, [7, 2, 0]),  # more queries than keys: the last queries see every key
    (10, 13, True, [1, 13, 6]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("tq,tk,causal,lengths", CASES)
def test_fused_matches_composite_and_reference(small_tiles, dtype, tq, tk, causal, lengths):
    out, feeds, values = attention_case(tq, tk, dtype, causal, lengths, scale=0.3 if causal else None)
    got, kinds = run(out, feeds, values, dtype)
    composite, composite_kinds = run(out, feeds, values, dtype, optimize=False)
    assert OpType.FUSED_ATTENTION in kinds and OpType.FUSED_ATTENTION not in composite_kinds
    assert got.dtype == np.dtype(dtype)
    tol = TOLERANCES[dtype]
    np.testing.assert_allclose(got, composite, atol=tol, rtol=tol)
    expected = reference(*(x.astype(np.float64) for x in values[:3]), 0.3 if causal else 8 ** -0.5, causal, lengths)
    np.testing.assert_allclose(got, expected, atol=tol, rtol=tol)
    if lengths is not None and 0 in lengths:
        assert not got[..., lengths.index(0)].any(), "a query that sees no key gives zeros"


def test_many_heads_and_examples_over_the_workers(small_tiles, monkeypatch):
    """6 heads x 4 examples x 3 query blocks: the blocks split over two workers, each with its own scratch."""
    monkeypatch.setenv("NG_THREADS", "2")
    out, feeds, values = attention_case(12, 10, "float64", True, [10, 3, 0, 7], heads=6, depth=16, v_depth=16)
    got, kinds = run(out, feeds, values, "float64")
    assert OpType.FUSED_ATTENTION in kinds
    expected = reference(*values[:3], 0.25, True, [10, 3, 0, 7])
    np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_output_in_another_order_and_lengths_on_a_leading_axis(small_tiles, dtype):
    """The op made directly, its output ``[DV, REC, N, H]`` (a transposing copy), the examples' axis first among
    the kept ones (each head position finds its example's length)."""
    D, DV, H, N = (ng.make_axis(x, name) for x, name in ((4, "D"), (3, "DV"), (2, "H"), (3, "N")))
    Q, K = ng.make_axis(7, "REC"), ng.make_axis(5, "REC_K")
    q, k, v = (ng.placeholder(axes, dtype=dtype) for axes in ([D, N, Q, H], [D, K, H, N], [DV, N, H, K]))
    lengths = ng.placeholder([N], dtype="int64")
    out = make(OpType.FUSED_ATTENTION, [q, k, v, lengths], arg=AttentionArg("D", 0.5, True), axes=[DV, Q, N, H])
    rng = np.random.default_rng(1)
    values = [rng.standard_normal(x.axes.lengths).astype(dtype) for x in (q, k, v)] + [np.array([5, 0, 2])]
    got, _ = run(out, [q, k, v, lengths], values, dtype)
    qa, ka, va = values[0].transpose(0, 3, 2, 1), values[1].transpose(0, 2, 1, 3), values[2].transpose(0, 2, 3, 1)
    expected = reference(qa, ka, va, 0.5, True, [5, 0, 2]).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, expected, atol=TOLERANCES[dtype], rtol=TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_step_matches_numpy_step(dtype):
    """The numba step (``2^n * e^r``) against ``softmax_step(np)`` on one tile: partly visible rows, a row with
    nothing visible (its running values untouched), running values from earlier tiles or none, and a score far
    below its row's maximum."""
    rng = np.random.default_rng(2)
    rows, cols, depth = 6, 37, 5
    tile = (rng.standard_normal((rows, cols)) * 30).astype(dtype)
    tile[2, 3] = -1e4  # exp underflows: 0 in NumPy, e^LOWEST (below any tolerance) in the polynomial
    hi = np.array([37, 12, 40, 0, 1, 30], dtype=np.int64) + 3  # the tile holds keys 3..39
    state = [rng.standard_normal(rows).astype(dtype), rng.random(rows).astype(dtype) + 1,
             rng.standard_normal((rows, depth)).astype(dtype)]
    state[0][1], state[1][1], state[2][1] = -np.inf, 0, 0  # a row that had seen no key before this tile
    results = []
    for step in (fused_attention.compiled_step(dtype), shared.softmax_step(np)):
        s, m, l, acc = tile.copy(), state[0].copy(), state[1].copy(), state[2].copy()  # noqa: E741
        step(s, m, l, acc, hi, rows - 1, cols, 3)  # the last row is outside ``rows``: left alone
        results.append((s, m, l, acc))
    tol = TOLERANCES[dtype]
    for got, expected, name in zip(results[0], results[1], ("p", "max", "sum", "acc")):
        np.testing.assert_allclose(got, expected, atol=tol, rtol=tol, err_msg=name)
    assert (results[0][0][rows - 1] == tile[rows - 1]).all() and not results[0][0][3].any()
    assert results[0][2][3] == state[1][3] and (results[0][3][3] == state[2][3]).all()


def test_numpy_kernel_set_runs_the_numpy_step(small_tiles, monkeypatch):
    """``NG_KERNELS=numpy``: the shared kernel with its NumPy step, the same values."""
    out, feeds, values = attention_case(9, 11, "float32", True, [11, 0, 5])
    compiled, _ = run(out, feeds, values, "float32")
    monkeypatch.setenv("NG_KERNELS", "numpy")
    reference_only, kinds = run(out, feeds, values, "float32")
    assert OpType.FUSED_ATTENTION in kinds
    np.testing.assert_allclose(reference_only, compiled, atol=1e-6, rtol=1e-6)


def test_long_sequence_holds_no_score_matrix(monkeypatch):
    """T=2048, 4 heads, batch 1, D=64, causal (the default thresholds fuse it): the arena and the kernel's scratch
    together stay far below the 64 MiB of float32 scores, which the composite's arena holds."""
    out, feeds, values = attention_case(2048, 2048, "float32", True, None, heads=4, depth=64, v_depth=64,
                                        examples=1)
    scores_bytes = 4 * 2048 * 2048 * 4
    fused, kinds, got = memory_and_value(out, feeds, values)
    monkeypatch.setattr(fusion, "MIN_SCORES", 1 << 62)  # the composite, as for short sequences
    composite, composite_kinds, expected = memory_and_value(out, feeds, values)
    assert OpType.FUSED_ATTENTION in kinds and OpType.FUSED_ATTENTION not in composite_kinds
    assert fused.arena_bytes + fused.workspace_bytes < scores_bytes / 4
    assert composite.arena_bytes >= scores_bytes
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)


def memory_and_value(out, feeds, values):
    """The inference computation's memory report, op kinds and value."""
    with ng.transformers.make_transformer() as t:
        f = t.computation(out, *feeds, mode="inference")
        return f.memory_report(), {op.op for op in f.graph.order}, f(*values)
