"""Run a benchmark's two sides in alternating short-lived processes and print a markdown table row.

The method (benchmarks/README.md, "Method"): never time both sides in one process, nor two processes
at once; run A B A B ... for ``--pairs`` pairs, take each side's median, and the median of the
paired ratios ours/theirs, which cancels most of the drift of a shared machine. Report 1 and 2
threads side by side (1-thread figures are steadier).

A benchmark file may set, at module level, ``SIDES`` (default ``("ngraph", "torch")``, ours
first) and ``STEPS`` / ``WARMUP`` (the timed and untimed steps per process when ``--steps`` /
``--warmup`` are not given; default 100 and 20). They are read from the file's source, without
importing it. A side whose JSON report has ``peak_rss_mib`` gets a peak-RSS column.

BLAS kernel: some machines of this workplace set ``OPENBLAS_CORETYPE=Haswell`` and
``OPENBLAS_L2_SIZE`` for the sake of older OpenBLAS builds; they make a current numpy run its
AVX2 kernels on an AVX-512 CPU (1.5x slower GEMMs at 64 channels). The children run without
both, as a user's fresh shell would (the backend line names the kernel that ran:
``SkylakeX``); ``--keep-blas-env`` keeps them. Tests and CI never change them.

Regression check: ``--against REV`` times our side against our side at git revision ``REV``
(checked out once into a temporary worktree, imported from there through ``PYTHONPATH``)
instead of against PyTorch: the ratio is now / then, for "no slowdown" claims.

Usage:
    python benchmarks/run.py mlp_step --pairs 5 --threads 1 2
    python benchmarks/run.py resnet_step --pairs 3 --against 6534263
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import THREAD_VARS

HERE = Path(__file__).resolve().parent
BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # removed from the children unless --keep-blas-env
SIDES = ("ngraph", "torch")  # ours first: the ratio is ours / theirs
DEFAULTS = {"SIDES": SIDES, "STEPS": 100, "WARMUP": 20}


def module_settings(benchmark: str) -> dict:
    """``SIDES``, ``STEPS`` and ``WARMUP`` as the benchmark file assigns them (literals), else the defaults."""
    settings = dict(DEFAULTS)
    tree = ast.parse((HERE / f"{benchmark}.py").read_text())
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in settings:
            settings[target.id] = ast.literal_eval(node.value)
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):  # STEPS, WARMUP = 50, 10
            for name, value in zip(target.elts, node.value.elts):
                if isinstance(name, ast.Name) and name.id in settings:
                    settings[name.id] = ast.literal_eval(value)
    return settings


def checkout(rev: str) -> Path:
    """A temporary git worktree of this repository at ``rev`` (removed at exit)."""
    path = Path(tempfile.mkdtemp(prefix="ngraph-baseline-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=HERE.parent, check=True,
                   capture_output=True)
    import atexit

    atexit.register(lambda: subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=HERE.parent,
                                           capture_output=True))
    return path


BASELINES: dict[str, Path] = {}  # "ngraph@REV" -> its worktree


def run_side(benchmark: str, side: str, threads: int, extra: list[str], keep_blas_env: bool = False) -> dict:
    """One child process timing one side (``ngraph@REV``: ours at that revision); returns its JSON report."""
    env = dict(os.environ, **{var: str(threads) for var in THREAD_VARS})
    if not keep_blas_env:
        for var in BLAS_OVERRIDES:
            env.pop(var, None)
    root = HERE.parent
    if side in BASELINES:
        root, side = BASELINES[side], "ngraph"
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, str(root / "benchmarks" / f"{benchmark}.py"), "--side", side, "--threads", str(threads),
           *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(benchmark: str, sides: tuple[str, str], threads: int, pairs: int, extra: list[str],
            keep_blas_env: bool = False) -> dict:
    """Alternate the two sides ``pairs`` times; medians per side and of the paired ratios."""
    ours, theirs, ratios, backends = [], [], [], {}
    rss: dict[str, list[float]] = {side: [] for side in sides}
    for k in range(pairs):
        a, b = (run_side(benchmark, side, threads, extra, keep_blas_env) for side in sides)
        ours.append(a["median_ms"])
        theirs.append(b["median_ms"])
        ratios.append(a["median_ms"] / b["median_ms"])
        backends = {sides[0]: a["backend"], sides[1]: b["backend"]}
        for side, report in zip(sides, (a, b)):
            if "peak_rss_mib" in report:
                rss[side].append(report["peak_rss_mib"])
        print(f"  {benchmark} threads={threads} pair {k + 1}/{pairs}: {sides[0]} {a['median_ms']:.2f} ms, "
              f"{sides[1]} {b['median_ms']:.2f} ms, ratio {ratios[-1]:.2f}", file=sys.stderr)
    return {
        "ours": statistics.median(ours), "theirs": statistics.median(theirs),
        "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "backends": backends,
        "rss": {side: statistics.median(v) for side, v in rss.items() if v},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", help="a file in benchmarks/ defining the sides, e.g. mlp_step")
    parser.add_argument("--pairs", type=int, default=5, help="A B pairs per thread count (default 5)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per process (default: the file's STEPS, else 100)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps per process (default: the file's WARMUP, else 20)")
    parser.add_argument("--keep-blas-env", action="store_true",
                        help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the children (see the module docstring)")
    parser.add_argument("--against", metavar="REV", default=None,
                        help="time ours against ours at git revision REV instead of the reference")
    args = parser.parse_args()
    settings = module_settings(args.benchmark)
    sides = tuple(settings["SIDES"])
    if args.against:
        baseline = f"ngraph@{args.against}"
        BASELINES[baseline] = checkout(args.against)
        sides = (sides[0], baseline)
    steps = settings["STEPS"] if args.steps is None else args.steps
    warmup = settings["WARMUP"] if args.warmup is None else args.warmup
    extra = ["--steps", str(steps), "--warmup", str(warmup)]

    rows, backends = [], []
    with_rss = False
    for threads in args.threads:
        r = measure(args.benchmark, sides, threads, args.pairs, extra, args.keep_blas_env)
        backends += [f"{side}: {backend}" for side, backend in r["backends"].items()]
        with_rss = with_rss or len(r["rss"]) == 2
        rss = f" {r['rss'][sides[0]]:.0f} | {r['rss'][sides[1]]:.0f} |" if len(r["rss"]) == 2 else ""
        rows.append(f"| {args.benchmark} | {threads} | {r['ours']:.2f} | {r['theirs']:.2f} | {r['ratio']:.2f} "
                    f"({r['low']:.2f}–{r['high']:.2f}) | {args.pairs} |{rss}")
    print("\n".join(backends))
    print()
    rss_header = f" {sides[0]} peak RSS MiB | {sides[1]} peak RSS MiB |" if with_rss else ""
    print(f"| benchmark | threads | {sides[0]} ms | {sides[1]} ms | ratio {sides[0]}/{sides[1]} "
          f"(median of pairs, range) | pairs |{rss_header}")
    print("|---|---|---|---|---|---|" + ("---|---|" if with_rss else ""))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
