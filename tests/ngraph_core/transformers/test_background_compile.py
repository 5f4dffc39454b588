"""Compiling in the background (``NG_COMPILE=background``, the default outside the tests): while numba compiles a
kernel, its NumPy fallback runs and gives the same values; the compiled code takes over once it is loaded; machine
code already in the disk cache is loaded at once; several ranks, and ``NG_COMPILE=wait``, compile before the call
returns; the process waits at exit for the compile in progress (``transformers/numpy/numba_loader.py``)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.transformers.numpy import compiled_pool, compiled_scan, numba_kernels, numba_loader, winograd

pytest.importorskip("numba")


@pytest.fixture
def held(monkeypatch, tmp_path):
    """Background mode with the worker held: queued compiles wait until the test runs them (``run_queued``)."""
    monkeypatch.setenv("NG_COMPILE", "background")
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path / "cache"))
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    monkeypatch.setattr(numba_loader, "_jobs", jobs)
    monkeypatch.setattr(numba_loader, "_pending", {})
    monkeypatch.setattr(numba_loader, "_start_worker", lambda: None)
    monkeypatch.setattr(numba_loader, "_functions", {})  # fresh dispatchers: nothing compiled in this process
    winograd.transform.cache_clear()
    compiled_pool.loops.cache_clear()
    yield jobs
    winograd.transform.cache_clear()
    compiled_pool.loops.cache_clear()


def run_queued(jobs: queue.SimpleQueue) -> int:
    """Compile every queued job here, as the background thread would; how many there were."""
    count = 0
    while not jobs.empty():
        jobs.get().compile()
        count += 1
    return count


def test_compile_mode_reads_the_environment(monkeypatch):
    monkeypatch.delenv("NG_COMPILE", raising=False)
    assert numba_loader.compile_mode() == "background"
    monkeypatch.setenv("NG_COMPILE", "Wait")
    assert numba_loader.compile_mode() == "wait" and not numba_loader.background_allowed()
    monkeypatch.setenv("NG_COMPILE", "later")
    with pytest.raises(ValueError, match="NG_COMPILE='later': expected one of background, wait"):
        numba_loader.compile_mode()
    monkeypatch.setenv("NG_COMPILE", "background")
    assert numba_loader.background_allowed(1) and not numba_loader.background_allowed(2)  # ranks compile first


def fused_program():
    """A big fused element-wise program (compiled under ``auto``) and its NumPy value."""
    R, C = ng.make_axis(512, "R"), ng.make_axis(1024, "C")
    x, y = ng.placeholder([R, C]), ng.placeholder([R, C])
    rng = np.random.default_rng(1)
    xv, yv = rng.standard_normal((512, 1024)).astype(np.float32), rng.standard_normal((512, 1024)).astype(np.float32)
    return ng.tanh(x * y + 0.25) * 3.0 - y, (x, y), (xv, yv), np.tanh(xv * yv + 0.25) * 3.0 - yv


def test_a_fused_program_runs_numpy_while_it_compiles_then_the_compiled_loop(held, monkeypatch):
    made, ran = [], []
    real_numpy = numba_kernels.numpy_fused

    def counting_numpy(op, kc):
        kernel = real_numpy(op, kc)
        made.append(op)
        return lambda *args: ran.append("numpy") or kernel(*args)

    monkeypatch.setattr(numba_kernels, "numpy_fused", counting_numpy)
    result, inputs, feeds, expected = fused_program()
    with ng.transformers.make_transformer() as t:
        f = t.computation(result, *inputs)
        for _ in range(2):
            np.testing.assert_allclose(f(*feeds), expected, rtol=1e-5, atol=1e-5)
        assert ran == ["numpy", "numpy"] and len(made) == 1  # the loop is queued: the NumPy kernel ran
        assert run_queued(held) == 1
        np.testing.assert_allclose(f(*feeds), expected, rtol=1e-5, atol=1e-5)
        assert ran == ["numpy", "numpy"]  # compiled from here on
        (pending,) = numba_loader._pending.values()
        assert pending.done and pending.signature in pending.fn.overloads


def test_wait_mode_compiles_before_the_first_call_returns(monkeypatch, tmp_path):
    monkeypatch.setenv("NG_COMPILE", "wait")
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(numba_loader, "_pending", {})
    monkeypatch.setattr(numba_kernels, "numpy_fused", lambda op, kc: pytest.fail("the NumPy kernel ran"))
    result, inputs, feeds, expected = fused_program()
    with ng.transformers.make_transformer() as t:
        np.testing.assert_allclose(t.computation(result, *inputs)(*feeds), expected, rtol=1e-5, atol=1e-5)
    assert all(p.done for p in numba_loader._pending.values())


def test_a_failed_compile_warns_and_keeps_the_fallback(held, monkeypatch):
    result, inputs, feeds, expected = fused_program()
    with ng.transformers.make_transformer() as t:
        f = t.computation(result, *inputs)
        f(*feeds)
        (job,) = [held.get()]
        monkeypatch.setattr(job, "fn", type("Broken", (), {"compile": lambda self, sig: 1 / 0})())
        with pytest.warns(RuntimeWarning, match="numba could not compile a generated kernel.*NumPy kernel runs"):
            job.compile()
        np.testing.assert_allclose(f(*feeds), expected, rtol=1e-5, atol=1e-5)
        assert not job.done and isinstance(job.error, ZeroDivisionError)


def test_the_disk_cache_is_loaded_at_once(held):
    """A second process (simulated: the dispatchers and records forgotten) finds the loop in numba's disk cache
    and runs it from the first call: nothing is queued."""
    result, inputs, feeds, expected = fused_program()
    with ng.transformers.make_transformer() as t:
        t.computation(result, *inputs)(*feeds)
    assert run_queued(held) == 1
    numba_loader._functions.clear()
    numba_loader._pending.clear()
    with ng.transformers.make_transformer() as t:
        np.testing.assert_allclose(t.computation(result, *inputs)(*feeds), expected, rtol=1e-5, atol=1e-5)
    assert held.empty() and all(p.done for p in numba_loader._pending.values())


def test_winograd_is_not_timed_until_its_transforms_are_compiled(held, monkeypatch):
    """``NG_CONV=auto``: the layer runs im2col, untimed, while the Winograd transforms compile; then it
    measures both and keeps one; every call gives the reference."""
    monkeypatch.setenv("NG_CONV", "auto")
    from ngraph_core.transformers.numpy import conv_choice

    monkeypatch.setattr(conv_choice, "choices_path", lambda: held_dir / "conv_choices.json")
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_DECIDED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)
    held_dir = numba_loader.kernel_dir()
    assert not winograd.ready("float32", True)  # queues the three transforms
    rng = np.random.default_rng(3)
    C, H, W, N, K = (ng.make_axis(n, name) for n, name in ((3, "C"), (6, "H"), (6, "W"), (1, "N"), (4, "K")))
    x = ng.placeholder([C, H, W, N])
    g = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    y = ng.convolution(x, ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), K], initial_value=g),
                       padding=1)
    xv = rng.standard_normal((3, 6, 6, 1)).astype(np.float32)
    padded = np.pad(xv[..., 0], ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # [C, H, W, R, S]
    expected = np.einsum("chwrs,crsk->khw", windows, g)[..., None]
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
        for _ in range(conv_choice.CALLS_TO_DECIDE):
            np.testing.assert_allclose(f(xv), expected, rtol=1e-4, atol=1e-4)
        assert not conv_choice._DECIDED  # nothing timed while the transforms are queued
        assert run_queued(held) == 3 and winograd.ready("float32", True)
        for _ in range(conv_choice.CALLS_TO_DECIDE):
            np.testing.assert_allclose(f(xv), expected, rtol=1e-4, atol=1e-4)
    (entry,) = conv_choice._DECIDED.values()
    assert "winograd" in entry["ms"] and "im2col" in entry["ms"]


def test_pooling_runs_the_shared_kernel_while_its_loops_compile(held, monkeypatch):
    C, H, W, N = (ng.make_axis(n, name) for n, name in ((8, "C"), (16, "H"), (16, "W"), (4, "N")))
    x = ng.placeholder([C, H, W, N])
    y = ng.pooling(x, (2, 2), strides=2, op="max")
    xv = np.random.default_rng(4).standard_normal((8, 16, 16, 4)).astype(np.float32)
    expected = xv.reshape(8, 8, 2, 8, 2, 4).max(axis=(2, 4))
    calls = []
    real = compiled_pool.shared.pool
    monkeypatch.setattr(compiled_pool.shared, "pool", lambda op, kc: (lambda k: lambda *a: calls.append(1) or k(*a))(
        real(op, kc)))
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
        np.testing.assert_array_equal(f(xv), expected)
        assert calls == [1]
        assert run_queued(held) == 1
        np.testing.assert_array_equal(f(xv), expected)
        assert calls == [1]  # the compiled loops ran


def test_a_scan_runs_the_shared_kernel_while_its_loop_compiles(held, monkeypatch):
    monkeypatch.setenv("NG_KERNELS", "numba")  # the compiled loop from the first call on
    F, H, N, rec = ng.make_axis(3, "F"), ng.make_axis(8, "H"), ng.make_axis(2, "N"), ng.make_axis(5, "REC")
    rng = np.random.default_rng(5)
    wv, uv = rng.standard_normal((8, 3)).astype(np.float32), (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    w, u = ng.constant(wv, [H, F]), ng.constant(uv, [H, ng.make_axis(8, "H2")])
    x, h0 = ng.placeholder([F, rec, N]), ng.placeholder([H, N])

    def step(x_t, h):
        new = ng.axes_with_order(ng.tanh(ng.dot(w, x_t) + ng.dot(u, ng.cast_axes(h, [u.axes[1], N]))), [H, N])
        return [new], [new]

    (final,), _ = ng.scan(step, [x], [h0], rec)
    xv, hv = rng.standard_normal((3, 5, 2)).astype(np.float32), np.zeros((8, 2), np.float32)
    h = hv
    for s in range(5):
        h = np.tanh(wv @ xv[:, s] + uv @ h)
    made = []
    real = compiled_scan.compiled_scan
    monkeypatch.setattr(compiled_scan, "compiled_scan", lambda op, kc, fallback=None: made.append(op) or real(
        op, kc, fallback))
    with ng.transformers.make_transformer() as t:
        f = t.computation(final, x, h0, mode="inference")
        first = f(xv, hv)
        assert len(made) == 1 and run_queued(held) >= 1  # the loop (and the body's own fused programs)
        np.testing.assert_allclose(f(xv, hv), first, rtol=1e-5, atol=1e-6)  # the compiled loop agrees
    np.testing.assert_allclose(first, h, rtol=1e-5, atol=1e-6)


def test_the_process_waits_at_exit_for_the_compile_in_progress(tmp_path):
    """A process that exits while a loop compiles in the background exits cleanly, and the loop's machine code
    is in the disk cache for the next one."""
    script = textwrap.dedent("""
        import json, numpy as np, ngraph_core as ng
        from ngraph_core.transformers.numpy import numba_loader
        R, C = ng.make_axis(512, "R"), ng.make_axis(1024, "C")
        x = ng.placeholder([R, C])
        with ng.transformers.make_transformer() as t:
            value = t.computation(ng.tanh(x * 2.0 + 1.0) - x, x)(np.ones((512, 1024), np.float32))
        print(json.dumps({"queued": sum(not p.done for p in numba_loader._pending.values()),
                          "value": float(value[0, 0])}))
    """)
    env = {"NG_COMPILE": "background", "NG_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["queued"] == 1 and report["value"] == pytest.approx(np.tanh(3.0) - 1.0, rel=1e-4)
    assert list((tmp_path / "cache" / "kernels").rglob("*.nbi")), "the compile did not reach the disk cache"
