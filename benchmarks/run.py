"""Run a benchmark's two sides in alternating short-lived processes and print a markdown table row.

The method (shared/PERFORMANCE.md): never time both sides in one process, nor two processes
at once; run A B A B ... for ``--pairs`` pairs, take each side's median, and the median of the
paired ratios ours/theirs, which cancels most of the drift of a shared machine. Report 1 and 2
threads side by side (1-thread figures are steadier).

Usage:
    python benchmarks/run.py mlp_step --pairs 5 --threads 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness import THREAD_VARS

HERE = Path(__file__).resolve().parent
SIDES = ("ngraph", "torch")  # ours first: the ratio is ours / theirs


def run_side(benchmark: str, side: str, threads: int, extra: list[str]) -> dict:
    """One child process timing one side; returns its JSON report."""
    env = dict(os.environ, **{var: str(threads) for var in THREAD_VARS})
    cmd = [sys.executable, str(HERE / f"{benchmark}.py"), "--side", side, "--threads", str(threads), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE.parent)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(benchmark: str, threads: int, pairs: int, extra: list[str]) -> dict:
    """Alternate the two sides ``pairs`` times; medians per side and of the paired ratios."""
    ours, theirs, ratios, backends = [], [], [], {}
    for k in range(pairs):
        a, b = (run_side(benchmark, side, threads, extra) for side in SIDES)
        ours.append(a["median_ms"])
        theirs.append(b["median_ms"])
        ratios.append(a["median_ms"] / b["median_ms"])
        backends = {SIDES[0]: a["backend"], SIDES[1]: b["backend"]}
        print(f"  {benchmark} threads={threads} pair {k + 1}/{pairs}: {SIDES[0]} {a['median_ms']:.2f} ms, "
              f"{SIDES[1]} {b['median_ms']:.2f} ms, ratio {ratios[-1]:.2f}", file=sys.stderr)
    return {
        "ours": statistics.median(ours), "theirs": statistics.median(theirs),
        "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "backends": backends,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", help="a file in benchmarks/ defining the sides, e.g. mlp_step")
    parser.add_argument("--pairs", type=int, default=5, help="A B pairs per thread count (default 5)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=100, help="timed steps per process")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps per process")
    args = parser.parse_args()
    extra = ["--steps", str(args.steps), "--warmup", str(args.warmup)]

    rows, backends = [], []
    for threads in args.threads:
        r = measure(args.benchmark, threads, args.pairs, extra)
        backends += [f"{side}: {backend}" for side, backend in r["backends"].items()]
        rows.append(f"| {args.benchmark} | {threads} | {r['ours']:.2f} | {r['theirs']:.2f} | {r['ratio']:.2f} "
                    f"({r['low']:.2f}–{r['high']:.2f}) | {args.pairs} |")
    print("\n".join(backends))
    print()
    print(f"| benchmark | threads | {SIDES[0]} ms | {SIDES[1]} ms | ratio {SIDES[0]}/{SIDES[1]} "
          "(median of pairs, range) | pairs |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
