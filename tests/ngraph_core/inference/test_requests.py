"""Inference requests: sync and async runs agree, errors reach ``wait``, and the pool's callbacks."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.inference.requests import (
    AsyncInferQueue,
    InferRequest,
    RequestBusyError,
    RequestError,
    RequestTimeoutError,
)

D, H, C, B = 32, 64, 10, 4


class _Compiled:
    """A compiled model as requests use it: ``inputs`` and ``new_executor()`` (a fresh transformer each).

    The weights are seeded NumPy draws, so every executor holds the same values; ``gate`` (when
    set) holds a run until the test releases it, and a sample of all NaNs makes the run raise.
    """

    def __init__(self, gate: threading.Event | None = None) -> None:
        rng = np.random.default_rng(0)
        self.w1 = rng.standard_normal((H, D)).astype(np.float32) / np.sqrt(D)
        self.w2 = rng.standard_normal((C, H)).astype(np.float32) / np.sqrt(H)
        self.gate = gate
        self.inputs = ("X",)

    def new_executor(self):  # noqa: ANN201 - a callable, as CompiledModel.new_executor returns
        ax_d, ax_h, ax_c, ax_n = (ng.make_axis(n, name) for n, name in ((D, "D"), (H, "H"), (C, "C"), (B, "N")))
        X = ng.placeholder([ax_d, ax_n], name="X")
        W1 = ng.variable([ax_h, ax_d], initial_value=self.w1, name="W1")
        W2 = ng.variable([ax_c, ax_h], initial_value=self.w2, name="W2")
        t = ng.transformers.make_transformer()
        f = t.computation(ng.dot(W2, ng.tanh(ng.dot(W1, X))), X)

        def run(x: np.ndarray) -> list[np.ndarray]:
            if self.gate is not None:
                self.gate.wait()
            if np.isnan(x).all():
                raise ValueError("a sample of NaNs")
            return [f(x)]

        return run

    def reference(self, x: np.ndarray) -> np.ndarray:
        return self.w2 @ np.tanh(self.w1 @ x)


def _inputs(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal((D, B)).astype(np.float32) for _ in range(count)]


def test_infer_matches_reference() -> None:
    compiled = _Compiled()
    x = _inputs(1)[0]
    out, = InferRequest(compiled).infer([x])
    np.testing.assert_allclose(out, compiled.reference(x), rtol=1e-5, atol=1e-5)
    by_name, = InferRequest(compiled).infer({"X": x})
    np.testing.assert_array_equal(by_name, out)


def test_async_equals_sync_for_many_concurrent_requests() -> None:
    compiled, xs = _Compiled(), _inputs(24)
    sync = InferRequest(compiled)
    expected = [sync.infer([x])[0] for x in xs]
    requests = [InferRequest(compiled) for _ in range(6)]
    got: list[np.ndarray | None] = [None] * len(xs)
    for start in range(0, len(xs), len(requests)):
        for request, x in zip(requests, xs[start:]):
            request.start_async([x])
        for k, request in enumerate(requests):
            got[start + k], = request.wait()
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    assert len({id(g) for g in got}) == len(xs)  # each job's outputs are its own arrays
    assert all(r.latency_s > 0 for r in requests)


def test_queue_results_equal_sync_and_callbacks_once_per_job() -> None:
    compiled, xs = _Compiled(), _inputs(40)
    sync = InferRequest(compiled)
    expected = [sync.infer(x)[0] for x in xs]
    pool = AsyncInferQueue(compiled, jobs=4)
    calls: list[int] = []
    results: dict[int, np.ndarray] = {}
    lock = threading.Lock()

    def done(request: InferRequest, userdata: int) -> None:
        with lock:
            calls.append(userdata)
            results[userdata] = request.results[0]

    pool.set_callback(done)
    used = {id(pool.start_async([x], userdata=i)) for i, x in enumerate(xs)}
    pool.wait_all()
    assert sorted(calls) == list(range(len(xs)))  # every userdata exactly once
    assert len(used) > 1 and pool.idle
    for i, e in enumerate(expected):
        np.testing.assert_array_equal(results[i], e)
    pool.close()


def test_exception_in_a_request_surfaces_in_wait() -> None:
    request = InferRequest(_Compiled())
    request.start_async([np.full((D, B), np.nan, np.float32)])
    with pytest.raises(ValueError, match="NaNs"):
        request.wait()
    with pytest.raises(RequestError, match="failed"):
        _ = request.results
    x = _inputs(1)[0]  # the request still works after a failed job
    request.start_async([x])
    np.testing.assert_array_equal(request.wait()[0], InferRequest(_Compiled()).infer([x])[0])


def test_exception_in_the_queue_surfaces_in_wait_all() -> None:
    pool = AsyncInferQueue(_Compiled(), jobs=2)
    for x in _inputs(3):
        pool.start_async(x)
    pool.start_async(np.full((D, B), np.nan, np.float32))
    with pytest.raises(ValueError, match="NaNs"):
        pool.wait_all()
    pool.wait_all()  # the error was reported once
    pool.close()


def test_busy_and_timeout() -> None:
    gate = threading.Event()
    request = InferRequest(_Compiled(gate))
    x = _inputs(1)[0]
    request.start_async([x])
    with pytest.raises(RequestBusyError, match="still runs"):
        request.start_async([x])
    with pytest.raises(RequestBusyError):
        request.infer([x])
    with pytest.raises(RequestTimeoutError, match="0.01 s"):
        request.wait(timeout=0.01)
    assert request.busy
    gate.set()
    assert request.wait(timeout=30)[0].shape == (C, B)
    request.close()
    with pytest.raises(RequestError, match="closed"):
        request.infer([x])


def test_bad_arguments() -> None:
    compiled = _Compiled()
    with pytest.raises(RequestError, match="new_executor"):
        InferRequest(object())
    with pytest.raises(RequestError, match="jobs >= 1"):
        AsyncInferQueue(compiled, jobs=0)
    request = InferRequest(compiled)
    with pytest.raises(RequestError, match=r"expected inputs named \['X'\]"):
        request.infer({"Y": _inputs(1)[0]})
    with pytest.raises(RequestError, match="no job has finished"):
        _ = request.results
    with pytest.raises(RequestError, match="callable"):
        request.set_callback(3)


def test_queue_over_a_compiled_model_equals_its_infer() -> None:
    from neon.activations import Rectlin, Softmax
    from neon.initializers import Constant, GlorotUniform
    from neon.layers import Affine
    from neon.model import Model

    model = Model([Affine(16, GlorotUniform(seed=0), bias=Constant(0.1), activation=Rectlin()),
                   Affine(3, GlorotUniform(seed=1), bias=Constant(0.0), activation=Softmax())])
    model.build((6,), batch_size=2)
    compiled = ng.inference.compile_for_inference(model, batch_size=2)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((6, 2)).astype(np.float32) for _ in range(12)]  # [features, N]
    expected = [compiled.infer(x)[0] for x in xs]
    np.testing.assert_allclose(expected[0].T, model.predict(xs[0].T, batch_size=2), rtol=1e-5, atol=1e-6)
    pool = ng.inference.AsyncInferQueue(compiled, jobs=3)
    got: dict[int, np.ndarray] = {}
    pool.set_callback(lambda request, i: got.__setitem__(i, request.results[0]))
    for i, x in enumerate(xs):
        pool.start_async({"X": x} if i % 2 else x, userdata=i)
    pool.wait_all()
    for i, e in enumerate(expected):
        np.testing.assert_array_equal(got[i], e)
    pool.close()
