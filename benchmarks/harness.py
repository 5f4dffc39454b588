"""What every benchmark child process shares: thread pinning, the timing loop, and its JSON report.

A benchmark file defines one ``build_<side>(threads) -> (step, backend)`` function per side
(``backend`` says what runs the math, e.g. numpy's BLAS kernel) and calls ``child_main``.
``run.py`` starts one short-lived process per measurement: two thread pools in one process,
or two processes at once, steal each other's cores (benchmarks/README.md, "Method"), so nothing
here ever times two sides in one process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NG_THREADS")  # NG_THREADS: our runtime

Step = Callable[[], object]


def pin_threads(threads: int) -> None:
    """Limit BLAS/OpenMP pools to ``threads``; must run before numpy or torch is imported."""
    for var in THREAD_VARS:
        os.environ[var] = str(threads)


def blas_info() -> str:
    """Which BLAS numpy runs, e.g. ``openblas 0.3.31 SkylakeX, 2 threads`` (threadpoolctl)."""
    import numpy  # noqa: F401 - loads the BLAS threadpoolctl inspects

    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # the GPU machines may lack it (benchmarks/gpu.py)
        return "unknown (threadpoolctl not installed)"

    for pool in threadpool_info():
        if pool.get("user_api") == "blas" and "numpy" in pool.get("filepath", ""):
            return f"{pool['internal_api']} {pool['version']} {pool.get('architecture')}, {pool['num_threads']} threads"
    return "unknown"


def settle(step: Step, limit: int = 100) -> int:
    """Untimed calls of ``step`` until our kernels are final: numba's background compiles done
    (``NG_COMPILE=background``) and every convolution layer's measured choice made (one candidate is timed
    a call). At most ``limit`` calls; returns how many ran. Nothing to do on the other sides."""
    loader = sys.modules.get("ngraph_core.transformers.numpy.numba_loader")
    choice = sys.modules.get("ngraph_core.transformers.numpy.conv_choice")
    pending = getattr(loader, "compiles_pending", lambda: 0)  # (absent before issue 33: --against an old REV)
    measuring = getattr(choice, "measurements_in_progress", lambda: 0)
    calls = 0
    while calls < limit:
        if pending():
            loader.wait_for_compiles()
        if not measuring() and not pending():
            return calls
        step()
        calls += 1
    return calls


def time_steps(step: Step, warmup: int, steps: int) -> list[float]:
    """Seconds per call of ``step``, one figure per call after ``warmup`` untimed calls (and those ``settle``
    needs: our compiled kernels in place, convolution choices made)."""
    for _ in range(warmup):
        step()
    if settle(step):
        for _ in range(min(warmup, 3)):  # the swapped-in kernels' first calls
            step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def child_main(builders: dict[str, Callable[[int], tuple[Step, str]]], description: str, warmup: int = 20,
               steps: int = 100) -> None:
    """Parse ``--side/--threads``, pin threads, build and time that side, print one JSON line with the
    step times and the process's peak RSS (``ru_maxrss``; run.py shows it when both sides report it).

    ``BENCH_CHECK=1`` prints the first five step results instead of timing (do the sides agree?).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--side", choices=sorted(builders), required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--steps", type=int, default=steps)
    args = parser.parse_args()
    pin_threads(args.threads)
    start = time.perf_counter()
    step, backend = builders[args.side](args.threads)
    build_s = time.perf_counter() - start
    if os.environ.get("BENCH_CHECK") == "1":
        print(args.side, [float(step()) for _ in range(5)], file=sys.stderr)
        return
    times = time_steps(step, args.warmup, args.steps)
    print(json.dumps({
        "side": args.side, "threads": args.threads, "steps": args.steps,
        "median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
        "build_s": build_s, "backend": backend,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))
