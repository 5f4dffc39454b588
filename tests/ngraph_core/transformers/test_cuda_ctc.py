"""The CUDA CTC kernels, checked without a GPU: ``nvcc`` builds their source with host loops (one thread
per block, the barrier compiled away) and the losses and gradients must match the NumPy kernel's, on
batches with repeated labels, empty labels, short inputs and impossible alignments. ``-m gpu`` runs
the same kernels on a device (``tests/ngraph_core/test_backends.py``)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from nvcc_helper import build_library, needs_nvcc
from test_ctc import random_batch, run_ours

from ngraph_core.transformers.cupy import ctc as cuda_ctc

pytestmark = needs_nvcc


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    return build_library(cuda_ctc.source(host=True), tmp_path_factory.mktemp("ctc"), "ctc")


def run_host(lib: ctypes.CDLL, b: dict[str, np.ndarray], blank: int, dtype: str,
             zero_infinity: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Losses ``[N]`` and gradients ``(C, T, N)`` from the generated bodies on the CPU."""
    C, T, N = b["logits"].shape
    L = b["labels"].shape[0]
    S = 2 * L + 1
    x = b["logits"].astype(dtype).transpose(1, 2, 0)  # (T, N, C), as the kernel reads it
    logp = x - x.max(axis=2, keepdims=True)
    logp = np.ascontiguousarray(logp - np.log(np.exp(logp).sum(axis=2, keepdims=True)), dtype=dtype)
    ll, il = b["ll"].astype(np.int64), b["il"].astype(np.int64)
    labels = np.where(np.arange(L)[:, None] < ll[None, :], b["labels"], blank).T  # (N, L), blank-padded
    ext = np.full((N, S), blank, dtype=np.int64)
    ext[:, 1::2] = labels
    alpha, beta = np.zeros((T, N, S)), np.zeros((T, N, S))
    loss, grad = np.zeros(N), np.zeros((T, N, C), dtype=dtype)
    pointer = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    fn = getattr(lib, f"ng_ctc_host_{'f32' if dtype == 'float32' else 'f64'}")
    fill = 0.0 if zero_infinity else float("nan")
    fn(*map(pointer, (logp, ext, il, ll, alpha, beta, loss, grad)), *(ctypes.c_int(v) for v in (T, N, C, S)),
       ctypes.c_longlong(blank), ctypes.c_double(fill))
    impossible = loss > -cuda_ctc.NEG / 2
    loss = np.where(impossible, 0.0 if zero_infinity else np.inf, loss)
    return loss, grad.transpose(2, 0, 1)


@pytest.mark.parametrize("seed, T, N, C, L, blank", [(0, 12, 5, 6, 3, 0), (1, 30, 4, 9, 6, 2), (2, 7, 3, 4, 2, 3),
                                                     (3, 80, 2, 5, 20, 0)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_host_bodies_match_the_numpy_kernel(library: ctypes.CDLL, seed: int, T: int, N: int, C: int, L: int,
                                            blank: int, dtype: str) -> None:
    b = random_batch(seed, T, N, C, L, blank)
    want_loss, want_grad = run_ours(b, blank, float_dtype=dtype)
    loss, grad = run_host(library, b, blank, dtype)
    tol = 1e-10 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(loss, want_loss, rtol=tol, atol=tol)
    np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol)
    assert np.all(grad[:, b["il"][0]:, 0] == 0.0)  # frames past an example's end get no gradient


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_and_empty_examples(library: ctypes.CDLL, zero_infinity: bool) -> None:
    """Too few frames for the labels (inf / NaN, or zeros), no frames and no labels (loss 0)."""
    b = random_batch(4, 10, 4, 5, 4, 0)
    b["labels"][:, 1] = [1, 1, 1, 1]
    b["ll"][1], b["il"][1] = 4, 5  # "aaaa" needs 7 frames
    b["ll"][2], b["il"][2] = 0, 0  # nothing to explain in no frames: probability 1
    b["il"][3] = 0  # labels but no frames
    b["ll"][3] = 2
    want_loss, want_grad = run_ours(b, 0, zero_infinity=zero_infinity)
    loss, grad = run_host(library, b, 0, "float64", zero_infinity)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-10)
    assert loss[2] == 0.0 and (loss[1] == 0.0 if zero_infinity else np.isinf(loss[1]))
    assert (np.all(grad[:, :, 1] == 0) if zero_infinity else np.all(np.isnan(grad[:, :, 1])))


@pytest.mark.gpu
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_cupy_transformer_runs_the_cuda_kernels(monkeypatch: pytest.MonkeyPatch, zero_infinity: bool) -> None:
    """On a GPU: the CuPy transformer's CTC (these kernels) gives the NumPy transformer's losses and gradients."""
    import ngraph_core as ng

    b = random_batch(5, 40, 6, 7, 8, 0)
    b["ll"][1], b["il"][1] = 8, 3  # impossible
    want = run_ours(b, 0, zero_infinity=zero_infinity)
    real = ng.transformers.make_transformer
    monkeypatch.setattr(ng.transformers, "make_transformer", lambda **kw: real("cupy", **kw))
    got = run_ours(b, 0, zero_infinity=zero_infinity)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9)
    assert cuda_ctc._module, "the CUDA kernels were not compiled: the shared kernel ran"
