"""``narrow_gemm``: GEMMs of 2-4 columns by the compiled loop, against NumPy's matmul; when it declines;
and the batch-1 convolution and dense layer that reach it through ``runtime.matmul``."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import ngraph_core as ng  # noqa: E402
from ngraph_core.transformers.numpy import narrow_gemm, runtime  # noqa: E402


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path_factory, monkeypatch):
    """One cache directory for the module's tests, never the user's home; default kernel set."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ng-cache"))
    monkeypatch.delenv("NG_KERNELS", raising=False)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows,depth,cols", [(256, 100, 4), (129, 130, 3), (7, 4000, 2), (5, 3300, 4)])
def test_against_numpy(dtype, rows, depth, cols):
    """Rows not a multiple of four (the last block re-reads its last row and writes only its own), every
    column count, a strided ``b`` and a strided ``out`` (a view into a wider buffer)."""
    rng = np.random.default_rng(rows + cols)
    a = rng.standard_normal((rows, depth)).astype(dtype)
    b = rng.standard_normal((depth, 2 * cols)).astype(dtype)[:, ::2]
    wide = np.full((rows, cols + 3), np.nan, dtype=dtype)
    out = wide[:, 1:cols + 1]
    assert narrow_gemm.run(a, b, out)
    tolerance = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, a @ b, rtol=tolerance, atol=tolerance * np.sqrt(depth))
    assert np.isnan(wide[:, 0]).all() and np.isnan(wide[:, cols + 1:]).all()  # nothing written outside


def test_it_declines_what_blas_does_better_or_it_cannot_take(monkeypatch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 512)).astype(np.float32)

    def takes(a_, b_):
        return narrow_gemm.run(a_, b_, np.empty((a_.shape[0], b_.shape[1]), dtype=np.float32))

    assert takes(a, rng.standard_normal((512, 3)).astype(np.float32))
    assert not takes(a, rng.standard_normal((512, 1)).astype(np.float32))  # a GEMV: BLAS
    assert not takes(a, rng.standard_normal((512, 5)).astype(np.float32))  # 5 columns: BLAS's packed kernel
    assert not takes(np.asfortranarray(a), rng.standard_normal((512, 3)).astype(np.float32))  # not C-contiguous
    assert not takes(a[:, :16], rng.standard_normal((16, 3)).astype(np.float32))  # too small to pay
    assert not takes(a, rng.standard_normal((512, 3)))  # float64 b for a float32 a
    monkeypatch.setenv("NG_KERNELS", "numpy")
    assert not takes(a, rng.standard_normal((512, 3)).astype(np.float32))  # the reference set: BLAS only


@pytest.mark.parametrize("workers", [1, 2])
def test_runtime_matmul_uses_it_split_by_rows(monkeypatch, workers):
    calls: list[tuple[int, ...]] = []
    real = narrow_gemm.run

    def spy(a, b, out):
        taken = real(a, b, out)
        calls.append((a.shape[0], taken))
        return taken

    monkeypatch.setattr(narrow_gemm, "run", spy)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1200, 2048)).astype(np.float32)  # 9.8M multiply-adds: split (MIN_PARALLEL_FLOPS)
    b = rng.standard_normal((2048, 4)).astype(np.float32)
    out = np.empty((1200, 4), np.float32)
    runtime.matmul(a, b, out, workers)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)
    assert calls == ([(1200, True)] if workers == 1 else [(600, True), (600, True)])


def test_a_batch1_convolution_of_a_small_map(monkeypatch):
    """64 -> 32 channels, 3x3 pad 1 on a 2x2 map at batch 1, one worker: a ``[32, 576] @ [576, 4]``
    product. A constant filter is held row-major and goes through the compiled loop; a variable one is
    a transposed view of its storage, which the loop declines (BLAS runs it): both right."""
    monkeypatch.setenv("NG_THREADS", "1")
    monkeypatch.setenv("NG_CONV", "im2col")  # the suite runs Winograd wherever eligible (tests/conftest.py)
    rng = np.random.default_rng(2)
    C, H, W, N = ng.make_axis(64, "C"), ng.make_axis(2, "H"), ng.make_axis(2, "W"), ng.make_axis(1, "N")
    R, S, K = ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(32, "K")
    g = rng.standard_normal((64, 3, 3, 32)).astype(np.float32)
    xv = rng.standard_normal((64, 2, 2, 1)).astype(np.float32)
    padded = np.pad(xv[..., 0], ((0, 0), (1, 1), (1, 1)))
    want = np.einsum("crsk,cijrs->kij", g, np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2)))
    x = ng.placeholder([C, H, W, N])
    calls: list[tuple] = []
    real = narrow_gemm.run

    def spy(a, b, out):
        taken = real(a, b, out)
        calls.append((a.shape, b.shape, taken))
        return taken

    monkeypatch.setattr(narrow_gemm, "run", spy)
    with ng.transformers.make_transformer() as t:
        for w in (ng.constant(g, [C, R, S, K]), ng.variable([C, R, S, K], initial_value=g)):
            got = t.computation(ng.convolution(x, w, padding=1), x)(xv)
            np.testing.assert_allclose(got[..., 0], want, rtol=1e-4, atol=1e-4)
    assert calls == [((32, 576), (576, 4), True), ((32, 576), (576, 4), False)]


def test_a_small_col_is_one_block_for_all_workers(monkeypatch):
    """With two workers, a batch-1 8x8 layer (a 9,216-element col, under ``SHARED_COL_ELEMENTS``) builds one col
    block for both; at batch 8 (73,728 elements) each worker builds its own output rows'. Both give the
    reference."""
    from ngraph_core.ir.conv import ConvArg
    from ngraph_core.transformers.kernels import conv

    monkeypatch.setenv("NG_THREADS", "2")
    monkeypatch.setenv("NG_CONV", "im2col")
    arg = ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1))
    C, H, W, R, S, K = (ng.make_axis(n, name) for n, name in ((16, "C"), (8, "H"), (8, "W"), (3, "R"), (3, "S"),
                                                               (8, "K")))
    rng = np.random.default_rng(4)
    g = rng.standard_normal((16, 3, 3, 8)).astype(np.float32)
    for n, parts in ((1, 1), (8, 2)):
        N = ng.make_axis(n, "N")
        assert len(conv.Im2col(np, ng.make_axes([C, H, W, N]), (3, 3), arg, "float32", "float32", 2).parts) == parts
        x = ng.placeholder([C, H, W, N])
        xv = rng.standard_normal((16, 8, 8, n)).astype(np.float32)
        with ng.transformers.make_transformer() as t:
            got = t.computation(ng.convolution(x, ng.constant(g, [C, R, S, K]), padding=1), x)(xv)
        padded = np.pad(xv, ((0, 0), (1, 1), (1, 1), (0, 0)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # [C, H, W, N, R, S]
        np.testing.assert_allclose(got, np.einsum("crsk,chwnrs->khwn", g, windows), rtol=1e-4, atol=1e-4)
