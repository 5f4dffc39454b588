"""Compiler figures with no reference side: dispatch overhead and compile time.

* dispatch: a chain of 1,000 tiny element-wise ops (4 floats each) compiled with
  ``optimize=False`` (fusion would collapse the chain into one kernel, hiding the cost
  being measured); microseconds per executed step = call time / ops in the plan.
* compile: time to compile a 1,000-op graph with every pass on (passes, linearize,
  memory plan, code generation), and with ``optimize=False``.
* first_step: a ResNet-20 training step (``resnet_step.py``, with our own initial weights), from
  nothing to the end of its first call, each in a fresh process: the NumPy-only kernel set
  (``NG_KERNELS=numpy``); the default set with an empty cache (numba compiles the Winograd
  transforms, and each layer's first call times its candidate kernels: im2col, Winograd, per
  image) and with the cache that process left (what a second run of a program pays);
  ``NG_KERNELS=numba`` (every fused program compiled too), empty cache then warm.
* first_scan: a tanh RNN's scan (16 steps, hidden 64, batch 1, inference) called four times in a fresh
  process, with an empty kernel cache then the one it left: the third call compiles the whole loop
  (``transformers/numpy/compiled_scan.py``, ``HOT_CALLS``), the fourth runs it.

Usage: ``python benchmarks/compiler.py [--threads 1]`` prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import pin_threads


def chain(n_ops: int):
    import ngraph_core as ng

    C = ng.make_axis(4, name="C")
    x = ng.placeholder([C], name="x")
    y = x
    kinds = [lambda v: v * 1.0001, lambda v: v + 0.5, ng.tanh, lambda v: v - 0.25]
    for i in range(n_ops):
        y = kinds[i % len(kinds)](y)
    return y, x


def dispatch(n_ops: int, calls: int) -> dict:
    import numpy as np

    import ngraph_core as ng

    y, x = chain(n_ops)
    with ng.transformers.make_transformer(optimize=False) as t:
        f = t.computation(y, x)
        steps = len(f.graph.order)
        xv = np.ones(4, np.float32)
        for _ in range(20):
            f(xv)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            f(xv)
            times.append(time.perf_counter() - start)
    per_call = statistics.median(times)
    return {"figure": "dispatch", "ops": n_ops, "steps": steps, "us_per_step": 1e6 * per_call / steps,
            "target_us_per_step": 2.0}


def compile_time(n_ops: int, optimize: bool, repeats: int) -> dict:
    import ngraph_core as ng

    times = []
    for _ in range(repeats):
        y, x = chain(n_ops)  # a fresh graph each time: nothing cached from the last compile
        start = time.perf_counter()
        with ng.transformers.make_transformer(optimize=optimize) as t:
            t.computation(y, x)
        times.append(time.perf_counter() - start)
    return {"figure": "compile", "ops": n_ops, "optimize": optimize, "median_s": statistics.median(times),
            "target_s": 0.5}


def first_step_child() -> None:
    """In this process: build, compile and run one ResNet-20 training step; print its seconds as JSON."""
    start = time.perf_counter()
    import resnet_step

    step, _ = resnet_step.build_ngraph(1)
    step()
    print(json.dumps({"seconds": time.perf_counter() - start}))


def first_step(threads: int) -> list[dict]:
    """``first_step`` figures (fresh processes): the NumPy-only set, then the default and the numba sets
    each with an empty cache and with the cache the previous process left."""
    rows = []
    with tempfile.TemporaryDirectory() as default_cache, tempfile.TemporaryDirectory() as numba_cache:
        for label, kernels, cache in (("numpy-only set", "numpy", default_cache),
                                      ("default, empty cache", "", default_cache),
                                      ("default, warm cache", "", default_cache),
                                      ("numba, empty cache", "numba", numba_cache),
                                      ("numba, warm cache", "numba", numba_cache)):
            env = {**os.environ, "NG_KERNELS": kernels, "NG_CACHE_DIR": cache, "RESNET_STEP_OWN_WEIGHTS": "1",
                   "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
                   "NG_THREADS": str(threads)}
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--first-step-child"], env=env,
                                  capture_output=True, text=True, cwd=Path(__file__).resolve().parent, check=True)
            seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
            rows.append({"figure": "first_step", "model": "resnet20 training step", "kernels": label,
                         "seconds": round(seconds, 2)})
    return rows


def first_scan_child() -> None:
    """In this process: a tanh RNN cell (``ng.scan``, 16 steps, hidden 64, batch 1, inference) called four
    times, then 100 more; print the four calls' seconds and the mean of the 100 as JSON (the third call
    compiles the loop: ``compiled_scan.HOT_CALLS``)."""
    import numpy as np

    import ngraph_core as ng

    F, H, N, rec = ng.make_axis(32, "F"), ng.make_axis(64, "H"), ng.make_axis(1, "N"), ng.make_axis(16, "REC")
    H2 = ng.make_axis(64, "H2")
    rng = np.random.default_rng(0)
    w = ng.constant(rng.standard_normal((64, 32)).astype(np.float32) * 0.2, [H, F])
    u = ng.constant(rng.standard_normal((64, 64)).astype(np.float32) * 0.1, [H, H2])
    x, h0 = ng.placeholder([F, rec, N]), ng.placeholder([H, N])

    def step(x_t, h):
        new = ng.axes_with_order(ng.tanh(ng.dot(w, x_t) + ng.dot(u, ng.cast_axes(h, [H2, N]))), [H, N])
        return [new], [new]

    (final,), _ = ng.scan(step, [x], [h0], rec)
    xv, hv = rng.standard_normal((32, 16, 1)).astype(np.float32), np.zeros((64, 1), np.float32)
    with ng.transformers.make_transformer() as t:
        f = t.computation(final, x, h0, mode="inference")
        calls = []
        for _ in range(4):
            start = time.perf_counter()
            f(xv, hv)
            calls.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(100):
            f(xv, hv)
        calls.append((time.perf_counter() - start) / 100)
    print(json.dumps({"calls": calls}))


def first_scan(threads: int) -> list[dict]:
    """``first_scan`` figures: the four calls of ``first_scan_child`` (and the mean of the next 100) in a fresh
    process with an empty kernel cache, then with the cache it left."""
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for label in ("empty cache", "warm cache"):
            env = {**os.environ, "NG_KERNELS": "", "NG_CACHE_DIR": cache, "OMP_NUM_THREADS": str(threads),
                   "OPENBLAS_NUM_THREADS": str(threads), "NG_THREADS": str(threads)}
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--first-scan-child"], env=env,
                                  capture_output=True, text=True, cwd=Path(__file__).resolve().parent, check=True)
            calls = json.loads(done.stdout.strip().splitlines()[-1])["calls"]
            rows.append({"figure": "first_scan", "model": "tanh RNN, 16 steps, hidden 64, batch 1", "cache": label,
                         "call_ms": [round(1e3 * c, 3) for c in calls]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--first-step-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first-scan-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    pin_threads(args.threads)
    if args.first_step_child:
        first_step_child()
        return
    if args.first_scan_child:
        first_scan_child()
        return
    print(json.dumps(dispatch(args.ops, calls=200)))
    for optimize in (True, False):
        print(json.dumps(compile_time(args.ops, optimize, repeats=5)))
    for row in first_step(args.threads) + first_scan(args.threads):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
