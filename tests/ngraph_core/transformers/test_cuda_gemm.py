"""Capture-safe GEMMs (``cupy/gemm.py``) and CUDA-graph replay (``cupy.GraphRunner``) without a GPU.

The GEMMs run on ``fake_cuda.FakeCublas`` (cuBLAS's column-major arguments computed by NumPy on the raw
addresses), so every layout's translation is checked against ``np.matmul``; the transformer runs on
``fake_cuda.FakeCupy``, whose streams capture and replay the plan's calls and refuse what CUDA and CuPy
refuse while capturing (``cupy.matmul``, host reads, work on another stream)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import warnings
from typing import Any

import fake_cuda
import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.transformers.cupy import gemm as cuda_gemm
from ngraph_core.transformers.cupy.gemm import OP_N, OP_T, column_major, matmul_shape, plan_gemm


@pytest.fixture
def cupy():
    with fake_cuda.installed() as module:
        yield module


def test_column_major_reads_each_layout() -> None:
    assert column_major(3, 4, 1, 3) == (OP_N, 3)  # column-major
    assert column_major(3, 4, 4, 1) == (OP_T, 4)  # row-major: the transpose of a column-major 4 x 3
    assert column_major(3, 4, 8, 1) == (OP_T, 8)  # a row-major slice of wider rows
    assert column_major(1, 4, 99, 2) == (OP_N, 2)  # one row: its row stride is never used
    assert column_major(3, 1, 5, 0) == (OP_T, 5)  # one column strided by 5
    assert column_major(3, 4, 2, 6) is None  # neither stride is a unit one
    assert column_major(3, 4, 1, 2) is None  # columns overlap


def test_row_major_product_is_the_swapped_column_major_one() -> None:
    """C = A @ B row-major is Cᵀ = Bᵀ Aᵀ column-major: B's pointer first, m and n swapped, nothing transposed."""
    plan = plan_gemm(2, 3, 4, (4, 1), (3, 1), (3, 1))
    assert plan.swapped and (plan.transa, plan.transb, plan.m, plan.n, plan.k) == (OP_N, OP_N, 3, 2, 4)
    assert (plan.lda, plan.ldb, plan.ldc) == (3, 4, 3)
    transposed_out = plan_gemm(2, 3, 4, (4, 1), (3, 1), (1, 2))  # C is a transposed view: no swap
    assert not transposed_out.swapped and (transposed_out.transa, transposed_out.transb) == (OP_T, OP_T)
    assert plan_gemm(2, 3, 4, (4, 1), (3, 1), (3, 1), batch=2, batch_strides=(8, 0, 2)) is None  # outputs overlap


def test_matmul_shape_follows_matmul() -> None:
    for a, b in [((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)), ((3,), (3,)), ((5, 2, 3), (3, 4)),
                 ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 4)), ((5, 2, 3), (3,))]:
        assert matmul_shape(a, b) == np.matmul(np.ones(a), np.ones(b)).shape, (a, b)
    assert matmul_shape((2, 3), (4, 5)) is None and matmul_shape((2, 2, 2, 2), (2, 2)) is None


def _layouts(rng: np.random.Generator):
    """(name, a, b, out or None) in every layout the kernels hand over."""
    f = np.float32
    base = rng.standard_normal((7, 9)).astype(f)
    yield "contiguous", rng.standard_normal((4, 5)).astype(f), rng.standard_normal((5, 3)).astype(f), None
    yield "a transposed", rng.standard_normal((5, 4)).astype(f).T, rng.standard_normal((5, 3)).astype(f), None
    yield "b transposed", rng.standard_normal((4, 5)).astype(f), rng.standard_normal((3, 5)).astype(f).T, None
    yield "both transposed", base[:5, :4].T, rng.standard_normal((3, 5)).astype(f).T, None
    yield "row slices", base[1:5, 2:7], base[:5, 4:7], None
    yield "strided both ways", base[::2, ::2], rng.standard_normal((5, 2)).astype(f), None
    yield "vector times matrix", rng.standard_normal(5).astype(f), rng.standard_normal((5, 3)).astype(f), None
    yield "matrix times vector", rng.standard_normal((4, 5)).astype(f), base[0, :5], None
    yield "dot product", base[1, :5], base[2, 2:7], None
    yield "stack by matrix", rng.standard_normal((3, 4, 5)).astype(f), rng.standard_normal((5, 2)).astype(f), None
    yield "matrix by stack", rng.standard_normal((4, 5)).astype(f), rng.standard_normal((3, 5, 2)).astype(f), None
    yield "stacks", rng.standard_normal((3, 4, 5)).astype(f), rng.standard_normal((3, 5, 2)).astype(f).copy(), None
    yield "stack of one broadcast", rng.standard_normal((1, 4, 5)).astype(f), \
        rng.standard_normal((3, 5, 2)).astype(f), None
    yield "rows against columns", base[:3, None, :5], base[:3, 2:7, None], None  # normalization's stacked dots
    yield "stack transposed", rng.standard_normal((3, 5, 4)).astype(f).transpose(0, 2, 1), \
        rng.standard_normal((5, 2)).astype(f), None
    yield "into a transposed view", rng.standard_normal((4, 5)).astype(f), rng.standard_normal((5, 3)).astype(f), \
        np.zeros((3, 4), f).T
    yield "into a strided view", rng.standard_normal((4, 5)).astype(f), rng.standard_normal((5, 3)).astype(f), \
        np.zeros((4, 6), f)[:, ::2]
    yield "into a stack's rows", rng.standard_normal((4, 5)).astype(f), rng.standard_normal((2, 5, 3)).astype(f), \
        np.zeros((2, 4, 3), f)
    yield "float64", rng.standard_normal((4, 5)), rng.standard_normal((5, 3)).T.copy().T, None


@pytest.mark.parametrize("case", list(_layouts(np.random.default_rng(0))), ids=lambda case: case[0])
def test_matmul_through_cublas_matches_numpy(cupy, case) -> None:
    name, a, b, out = case
    gemm = cuda_gemm.CublasGemm(cupy, cuda_gemm.load_library(cupy))
    dev = [None if v is None else np.ndarray.view(v, cupy.ndarray) for v in (a, b, out)]
    got = gemm.matmul(*dev)
    assert gemm.fallbacks == 0 and gemm.calls == 1, name
    assert out is None or got is dev[2]
    rtol = 1e-12 if a.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(np.asarray(got), np.matmul(a, b), rtol=rtol, atol=rtol)
    assert gemm.library.handles[next(iter(gemm.handles.values()))]["workspace"][1] == cuda_gemm.WORKSPACE_BYTES


def test_other_dtypes_and_ranks_go_to_cupy_matmul(cupy) -> None:
    gemm = cuda_gemm.CublasGemm(cupy, cuda_gemm.load_library(cupy))
    for a, b in [(np.ones((2, 3), np.float16), np.ones((3, 2), np.float16)), (np.ones((2, 3), "int32"),) * 2,
                 (np.ones((2, 2, 2, 3), np.float32), np.ones((3, 2), np.float32))]:
        a, b = cupy.asarray(a), cupy.asarray(b if b.shape[0] == a.shape[-1] else b.T)
        np.testing.assert_allclose(np.asarray(gemm.matmul(a, b)), np.matmul(np.asarray(a), np.asarray(b)))
    assert gemm.calls == 0 and gemm.fallbacks == 3


def test_one_handle_per_stream_each_with_its_workspace(cupy) -> None:
    gemm = cuda_gemm.CublasGemm(cupy, cuda_gemm.load_library(cupy))
    a, b = cupy.ones((2, 3), dtype=cupy.float32), cupy.ones((3, 2), dtype=cupy.float32)
    stream = cupy.cuda.Stream()
    gemm.matmul(a, b)
    with stream:
        gemm.matmul(a, b)
        gemm.matmul(a, b)
    assert sorted(gemm.handles) == sorted([0, stream.ptr])
    assert [s for _, s, _ in gemm.library.gemms] == [0, stream.ptr, stream.ptr]


# -- the transformer: GraphRunner on fake_cuda ------------------------------------------------------------

C, N, H = ng.make_axis(3, "C"), ng.make_axis(4, "N"), ng.make_axis(5, "H")


def _train(cupy, graphs: bool, steps: int = 5, **options) -> tuple[list[float], np.ndarray, Any, Any]:
    """An affine + tanh regression step with a dot forward and two in the gradient, ``steps`` calls."""
    rng = np.random.default_rng(0)
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([H, C], initial_value=rng.standard_normal((5, 3)) / 3, name="w")
    v = ng.variable([H], initial_value=np.zeros(5), name="v")
    loss = ng.sum(ng.tanh(ng.dot(w, x) + v) ** 2.0)
    gw, gv = ng.gradients(loss, [w, v])
    t = fake_cuda.CpuCupyTransformer(cuda_graphs=graphs, **options)
    step = t.computation([loss, ng.doall([ng.assign(w, w - gw * 0.1), ng.assign(v, v - gv * 0.1)])], x)
    losses = [step(rng.standard_normal((3, 4)).astype("float32"))[0] for _ in range(steps)]
    return [float(np.asarray(loss)) for loss in losses], t.read_variable(w), t, step


def test_a_training_step_is_captured_and_replays_the_eager_losses(cupy) -> None:
    eager_losses, eager_w, _, _ = _train(cupy, False)
    losses, w, t, step = _train(cupy, True)
    assert step._fn.captured and step._fn.capture_error is None, step._fn.capture_error
    assert "replayed as a CUDA graph" in t.graph_report()
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    assert len(set(losses)) == len(losses)  # each call's own loss, not the last replay's
    np.testing.assert_allclose(w, eager_w, rtol=1e-6)  # the variables the graph updates in place persist
    with ng.transformers.make_transformer("numpy") as reference:
        del reference
    numpy_losses = _numpy_losses()
    np.testing.assert_allclose(losses, numpy_losses, rtol=1e-5)  # the cuBLAS translation: NumPy's numbers


def _numpy_losses() -> list[float]:
    rng = np.random.default_rng(0)
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([H, C], initial_value=rng.standard_normal((5, 3)) / 3, name="w")
    v = ng.variable([H], initial_value=np.zeros(5), name="v")
    loss = ng.sum(ng.tanh(ng.dot(w, x) + v) ** 2.0)
    gw, gv = ng.gradients(loss, [w, v])
    with ng.transformers.make_transformer("numpy") as t:
        step = t.computation([loss, ng.doall([ng.assign(w, w - gw * 0.1), ng.assign(v, v - gv * 0.1)])], x)
        return [float(step(rng.standard_normal((3, 4)).astype("float32"))[0]) for _ in range(5)]


def test_device_results_are_fresh_copies_each_replay(cupy) -> None:
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([H, C], initial_value=np.ones((5, 3)), name="w")
    y = ng.dot(w, x)
    t = fake_cuda.CpuCupyTransformer(device_arrays=True)
    f = t.computation([y, w], x)
    outs = [f(np.full((3, 4), float(i), dtype="float32")) for i in range(4)]
    assert f._fn.captured
    for i, (y_value, w_value) in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(y_value), np.full((5, 4), 3.0 * i))  # never overwritten later
        assert isinstance(y_value, cupy.ndarray) and np.shares_memory(np.asarray(w_value), np.asarray(outs[0][1])) \
            is (i == 0)


def test_gemms_through_cupy_matmul_keep_the_plan_eager_and_say_why(cupy) -> None:
    eager_losses, _, _, _ = _train(cupy, False, cublas_gemm=False)
    losses, _, t, step = _train(cupy, True, cublas_gemm=False)
    assert not step._fn.captured and fake_cuda.CUBLAS_REFUSAL in step._fn.capture_error
    assert "cublas_gemm=False" in step._fn.capture_error and "eager:" in t.graph_report()
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)


def test_environment_turns_graphs_and_gemms_off(cupy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NG_CUDA_GRAPHS", raising=False)
    assert fake_cuda.CpuCupyTransformer().cuda_graphs  # on by default
    monkeypatch.setenv("NG_CUDA_GRAPHS", "0")
    monkeypatch.setenv("NG_CUBLAS_GEMM", "0")
    t = fake_cuda.CpuCupyTransformer()
    assert not t.cuda_graphs and t.gemm is None and t.xp is cupy and "off" in t.graph_report()
    assert fake_cuda.CpuCupyTransformer(cuda_graphs=True, cublas_gemm=True).gemm is not None


def test_a_host_read_keeps_the_plan_eager_and_profile_warns(cupy) -> None:
    """CTC checks its labels on the host: the capture is invalidated; the plan stays eager and correct."""
    from test_ctc import random_batch

    b = random_batch(1, 12, 3, 5, 3, 0)
    ca, ta, na, la = (ng.make_axis(n, s) for n, s in ((5, "C"), (12, "REC"), (3, "N"), (3, "L")))
    x, y = ng.placeholder([ca, ta, na]), ng.placeholder([la, na], dtype="int32")
    il, ll = ng.placeholder([na], dtype="int32"), ng.placeholder([na], dtype="int32")
    loss = ng.ctc_loss(x, y, il, ll)
    feeds = (b["logits"].astype("float32"), b["labels"], b["il"], b["ll"])
    with ng.transformers.make_transformer() as t:
        want = t.computation(loss, x, y, il, ll)(*feeds)
    t = fake_cuda.CpuCupyTransformer(profile=True)
    f = t.computation(loss, x, y, il, ll)
    with pytest.warns(RuntimeWarning, match="runs eagerly, not as a CUDA graph: CUDARuntimeError"):
        for _ in range(3):
            np.testing.assert_allclose(f(*feeds), want, rtol=1e-5)
    assert not f._fn.captured and "host" in f._fn.capture_error
    assert all(calls == 3 for _, calls, _ in t.profile_counters.values())  # the capture's host run not counted


def test_profile_runs_a_capturable_plan_eagerly(cupy) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a plan that captures does not warn
        losses, _, t, step = _train(cupy, True, profile=True)
    assert step._fn.captured and step._fn.graph is None and "capturable" in t.graph_report()
    # five calls: the second is the capture's, served by its graph and left out; the others timed eagerly
    assert all(calls == 4 for _, calls, _ in t.profile_counters.values())
    np.testing.assert_allclose(losses, _train(cupy, False)[0], rtol=1e-6)


def test_random_draws_advance_between_replays(cupy) -> None:
    """A dropout mask is drawn again at every replay (the generator's state lives on the device), the same
    masks the eager plan draws."""
    runs = []
    for graphs in (False, True):
        x = ng.placeholder([C, N], name="x")
        keep = ng.uniform([C, N], 0.0, 1.0) < 0.5
        t = fake_cuda.CpuCupyTransformer(cuda_graphs=graphs, seed=7)
        f = t.computation(x * keep, x)
        runs.append([f(np.ones((3, 4), dtype="float32")) for _ in range(5)])
        assert not graphs or f._fn.captured
    for eager, replayed in zip(*runs):
        np.testing.assert_array_equal(replayed, eager)
    assert len({m.tobytes() for m in runs[1]}) == 5


def test_convolution_step_is_captured(cupy) -> None:
    """im2col + GEMM forward and both gradients, replayed as the eager step computes them."""
    results = []
    for graphs in (False, True):
        rng = np.random.default_rng(1)
        ax = {n: ng.make_axis(s, n) for n, s in (("C", 2), ("H", 5), ("W", 5), ("N", 3))}
        x = ng.placeholder([ax["C"], ax["H"], ax["W"], ax["N"]], name="x")
        k_axes = [ng.make_axis(2, "C"), ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(4, "K")]
        w = ng.variable(k_axes, initial_value=rng.standard_normal((2, 3, 3, 4)) / 4, name="w")
        y = ng.convolution(x, w, padding=1)
        loss = ng.sum(ng.relu(y) ** 2.0)
        (g,) = ng.gradients(loss, [w])
        t = fake_cuda.CpuCupyTransformer(cuda_graphs=graphs)
        step = t.computation([loss, ng.assign(w, w - g * 0.01)], x)
        results.append([float(step(rng.standard_normal((2, 5, 5, 3)).astype("float32"))[0]) for _ in range(4)])
        assert not graphs or step._fn.captured, step._fn.capture_error
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


STUB_CUBLAS = r"""
/* libcublas's functions used by cuda_gemm, with cuBLAS's documented prototypes, on host memory */
#include <stddef.h>
typedef void *cublasHandle_t; typedef void *cudaStream_t; typedef int cublasStatus_t;
typedef int cublasOperation_t; typedef int cublasPointerMode_t;
static long long handles = 0; static void *workspaces[64]; static int modes[64];
#define H(h) ((long long)(h) / 16)
cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) { *handle = (cublasHandle_t)(16 * ++handles); return 0; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) { workspaces[H(h)] = 0; return 0; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *w, size_t bytes) {
    workspaces[H(h)] = bytes == 32u << 20 ? w : 0; return 0; }
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t mode) { modes[H(h)] = mode + 1; return 0; }
#define GEMM(T, NAME, BATCHED)                                                                              \
cublasStatus_t BATCHED(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,      \
        const T *alpha, const T *A, int lda, long long sa, const T *B, int ldb, long long sb, const T *beta,   \
        T *C, int ldc, long long sc, int batch) {                                                           \
    if (!workspaces[H(h)] || modes[H(h)] != 1) return 7;                                                    \
    for (int p = 0; p < batch; p++)                                                                         \
        for (int i = 0; i < m; i++) for (int j = 0; j < n; j++) {                                           \
            T sum = 0;                                                                                      \
            for (int l = 0; l < k; l++)                                                                     \
                sum += (ta ? A[p * sa + l + i * (long long)lda] : A[p * sa + i + l * (long long)lda])          \
                     * (tb ? B[p * sb + j + l * (long long)ldb] : B[p * sb + l + j * (long long)ldb]);         \
            T *c = &C[p * sc + i + j * (long long)ldc];                                                     \
            *c = *alpha * sum + (*beta != 0 ? *beta * *c : 0);                                              \
        }                                                                                                   \
    return 0; }                                                                                             \
cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,         \
        const T *alpha, const T *A, int lda, const T *B, int ldb, const T *beta, T *C, int ldc) {            \
    return BATCHED(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1); }
GEMM(float, cublasSgemm_v2, cublasSgemmStridedBatched)
GEMM(double, cublasDgemm_v2, cublasDgemmStridedBatched)
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("case", [c for c in _layouts(np.random.default_rng(1)) if c[0] in (
    "contiguous", "both transposed", "row slices", "stacks", "stack by matrix", "into a transposed view", "float64")],
    ids=lambda case: case[0])
def test_ctypes_prototypes_reach_a_c_library(cupy, tmp_path, case) -> None:
    """The prototypes ``load_library`` declares, through ctypes into C functions with cuBLAS's signatures."""
    (tmp_path / "stub.c").write_text(STUB_CUBLAS)
    built = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "libstub.so"),
                            str(tmp_path / "stub.c")], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    library = ctypes.CDLL(str(tmp_path / "libstub.so"))
    cuda_gemm._declare(library)
    gemm = cuda_gemm.CublasGemm(cupy, library)
    name, a, b, out = case
    dev = [None if v is None else np.ndarray.view(v, cupy.ndarray) for v in (a, b, out)]
    got = gemm.matmul(*dev)
    assert gemm.calls == 1 and gemm.fallbacks == 0, name
    rtol = 1e-12 if a.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(np.asarray(got), np.matmul(a, b), rtol=rtol, atol=rtol)
