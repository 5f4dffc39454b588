"""The first call against the rest: cold and warm first training steps of the benchmark models.

For each model (``mlp_step``, ``cnn_step``, ``resnet_step``, ``dcgan_step``, ``lstm_step``: the same graphs
``run.py`` times), one fresh process per figure builds the step and runs it:

* ``cold``: an empty kernel cache (``NG_CACHE_DIR`` a new directory): what a model's first run on a
  machine pays (numba compiles, the convolution choice has nothing recorded);
* ``warm``: a second process on the cache the cold one left (what every later run pays).

Each process reports its **first step** (seconds from importing the model's module to the end of its first call:
graph building, compilation and the call), when its kernels were **final** (seconds from the start until the
background compiles were done and every convolution's choice made: ``harness.settle`` runs steps until then),
and the median of ``--steps`` steps after ``--settle`` more untimed ones: the **steady** step. The target of
issue 33 reads "a cold first step within 2x of a warm step plus 1 s", taken here as ``cold first <= 2 x warm
first + 1 s`` (the ``target`` column).

``NG_COMPILE`` is passed through (``background``, the default: numba compiles on a background thread while
NumPy kernels run; ``wait``: the first call waits for every compile, as before issue 33).

Usage: ``python benchmarks/first_step.py [--models resnet_step lstm_step] [--threads 2]``; prints a markdown
table, and one JSON line per process with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import THREAD_VARS, blas_info, settle

HERE = Path(__file__).resolve().parent
MODELS = ("mlp_step", "cnn_step", "resnet_step", "dcgan_step", "lstm_step")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def child(model: str, steps: int, more: int) -> None:
    """In this process: build and run ``model``'s training step; print the first and steady seconds as JSON."""
    start = time.perf_counter()
    module = __import__(model)
    step, _ = module.build_ngraph(int(os.environ.get("NG_THREADS", "1")))
    step()
    first = time.perf_counter() - start
    ran = 1 + settle(step)
    final = time.perf_counter() - start
    for _ in range(more):
        step()
    times = []
    for _ in range(steps):
        begin = time.perf_counter()
        step()
        times.append(time.perf_counter() - begin)
    print(json.dumps({"model": model, "first_s": first, "final_s": final, "steps_to_final": ran,
                      "steady_s": statistics.median(times)}))


def measure(model: str, cache: str, threads: int, steps: int, settle: int) -> dict:
    """One fresh process of ``model`` on the kernel cache ``cache``; its JSON report."""
    env = {**os.environ, "NG_CACHE_DIR": cache, "RESNET_STEP_OWN_WEIGHTS": "1",
           **{var: str(threads) for var in THREAD_VARS}}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", model, "--steps", str(steps),
                           "--settle", str(settle)], env=env, capture_output=True, text=True, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"{model}: the child failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5, help="timed steps after the settling ones (steady step)")
    parser.add_argument("--settle", type=int, default=25, help="untimed steps after the first")
    parser.add_argument("--json", action="store_true", help="also print each process's JSON line")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.settle)
        return
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, {args.threads} threads, "
          f"NG_COMPILE={os.environ.get('NG_COMPILE', '') or 'background (default)'}, {blas_info()}")
    print("| model | cold first step (s) | cold: kernels final (s, steps) | warm first step (s) | steady step (s) "
          "| target: 2 x warm + 1 (s) | met |")
    print("|---|---|---|---|---|---|---|")
    for model in args.models:
        with tempfile.TemporaryDirectory(prefix="ng-first-step-") as cache:
            os.chmod(cache, 0o700)  # the kernel cache is used only while private
            cold = measure(model, cache, args.threads, args.steps, args.settle)
            warm = measure(model, cache, args.threads, args.steps, args.settle)
        if args.json:
            print(json.dumps({"cold": cold, "warm": warm}), file=sys.stderr)
        target = 2 * warm["first_s"] + 1
        print(f"| {model} | {cold['first_s']:.2f} | {cold['final_s']:.1f} ({cold['steps_to_final']}) | "
              f"{warm['first_s']:.2f} | {warm['steady_s']:.3f} | {target:.2f} "
              f"| {'yes' if cold['first_s'] <= target else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
