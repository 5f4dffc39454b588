"""The figures README.md and docs/ quote from runs, produced by one script into ``docs/figures.json``.

A page quotes a figure between markers, ``<!--fig:mnist_mlp.accuracy-->96.1%<!--/fig-->``: the text between
them is what a reader of the Markdown sees, and the docs build (``docs/hooks/reference.py``) replaces it with
the value in ``docs/figures.json``, so the site cannot show another. ``--write`` (``make figures``) runs
everything, rewrites ``docs/figures.json`` and the text between the markers of README.md and docs/*.md;
``tests/test_docs.py`` fails when a page's text differs from the file, and
``tests/neon/test_model.py`` reruns the MNIST MLP in CI and compares its accuracy with the file.

The figures (each a display string, as the pages print it):

* ``mnist_mlp``: ``make run`` (``examples/mnist_mlp.py``): test accuracy, training seconds with the
  kernels compiled, and on a first run (empty kernel caches: ``NG_CACHE_DIR``, ``NUMBA_CACHE_DIR``). ~40 s.
* ``onnx_suite``: the ONNX backend node suite (``benchmarks/onnx_suite.py``'s counts, ours and
  onnxruntime's). ~2 min.
* ``dqn_cartpole``: where ``python -m model_zoo.dqn_cartpole`` (seed 0) is solved. ~1 min.
* ``machine``: where they were taken (the CPU, its cores, numpy's BLAS); the seconds, and through BLAS's
  rounding the accuracy and the DQN step, depend on it.

Usage:
    .venv/bin/python benchmarks/figures.py --write               # all, then write (make figures)
    .venv/bin/python benchmarks/figures.py mnist_mlp             # one group, printed, nothing written
    .venv/bin/python benchmarks/figures.py --write onnx_suite    # one group, merged into the file
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES_FILE = ROOT / "docs" / "figures.json"
PAGES = ("README.md", "docs/*.md")
MARKER = re.compile(r"<!--fig:([\w.]+)-->(.*?)<!--/fig-->")
"""A quoted figure: its name (``group.key``) and the text a reader of the Markdown sees."""


def load() -> dict[str, dict[str, str]]:
    """``docs/figures.json``: ``{group: {key: display string}}``."""
    return json.loads(FIGURES_FILE.read_text())


def value(figures: dict[str, dict[str, str]], name: str) -> str:
    """The display string of ``group.key``.

    Raises:
        KeyError: no such figure (the message names the file and ``make figures``).
    """
    group, _, key = name.partition(".")
    try:
        return figures[group][key]
    except KeyError:
        raise KeyError(f"figure {name!r} is not in {FIGURES_FILE.relative_to(ROOT)}; "
                       "hint: add it to benchmarks/figures.py and run `make figures`") from None


def fill(text: str, figures: dict[str, dict[str, str]]) -> str:
    """``text`` with every marked figure's text replaced by its value in ``figures``.

    Example:
        >>> fill("<!--fig:a.b-->1<!--/fig--> s", {"a": {"b": "2"}})
        '<!--fig:a.b-->2<!--/fig--> s'
    """
    return MARKER.sub(lambda m: f"<!--fig:{m.group(1)}-->{value(figures, m.group(1))}<!--/fig-->", text)


def pages() -> list[Path]:
    """README.md and every page of docs/: the files whose markers ``--write`` fills."""
    return sorted(path for pattern in PAGES for path in ROOT.glob(pattern))


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: int = 1800) -> str:
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def mnist_mlp() -> dict[str, str]:
    """``make run``'s MNIST MLP, twice: with an empty kernel cache (a first run) and again with it filled."""
    runs = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        for _ in range(2):
            # both caches empty on the first run: our kernels' (NG_CACHE_DIR) and numba's own (NUMBA_CACHE_DIR)
            env = {"NG_CACHE_DIR": cache, "NUMBA_CACHE_DIR": str(Path(cache) / "numba")}
            runs.append(_run([sys.executable, "examples/mnist_mlp.py", "--out", out], env))
    accuracies = [re.search(r"test accuracy: ([0-9.]+)%", text).group(1) for text in runs]
    seconds = [float(re.search(r"trained \d+ epochs in ([0-9.]+) s", text).group(1)) for text in runs]
    if accuracies[0] != accuracies[1]:
        print(f"note: the first run reached {accuracies[0]}%, the second {accuracies[1]}%", file=sys.stderr)
    return {"accuracy": f"{float(accuracies[1]):.1f}%", "seconds": f"{seconds[1]:.0f}",
            "first_run_seconds": f"{seconds[0]:.0f}"}


def onnx_suite() -> dict[str, str]:
    """The node suite's counts for ngraph and onnxruntime (``benchmarks/onnx_suite.py``'s runner)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from onnx_suite import run_backend

    ours = run_backend("ngraph", ["*"])[1]
    theirs = run_backend("onnxruntime", ["*"])[1]
    import onnxruntime

    return {"cases": f"{ours[3]:,}", "passed": f"{ours[0]:,}", "failed": f"{ours[1]:,}", "errors": f"{ours[2]:,}",
            "ort_version": onnxruntime.__version__, "ort_passed": f"{theirs[0]:,}", "ort_failed": f"{theirs[1]:,}",
            "ort_errors": f"{theirs[2]:,}", "share": f"{ours[0] / theirs[0]:.1%}"}


def dqn_cartpole() -> dict[str, str]:
    """Where ``model_zoo.dqn_cartpole`` with its defaults and seed 0 is solved, and its greedy score then."""
    text = _run([sys.executable, "-m", "model_zoo.dqn_cartpole", "--seed", "0", "--out",
                 tempfile.mkdtemp(prefix="dqn_cartpole_")])
    solved = re.search(r"solved at step (\d+)\)", text)
    score = re.search(r"greedy evaluation: mean return ([0-9.]+)", text)
    if not solved:
        raise SystemExit(f"dqn_cartpole seed 0 was not solved:\n{text[-2000:]}")
    return {"seed0_solved_at": f"{int(solved.group(1)):,}", "seed0_greedy": score.group(1) if score else "n/a"}


def machine() -> dict[str, str]:
    """The CPU, the cores this process may use, and numpy's BLAS (its name, version and kernel)."""
    import numpy as np

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    try:
        from threadpoolctl import threadpool_info

        kernel = next((p.get("architecture") for p in threadpool_info() if p.get("internal_api") == "openblas"), None)
    except ImportError:  # threadpoolctl comes with the bench and test extras
        kernel = None
    return {"cpu": cpu, "cores": str(len(os.sched_getaffinity(0))), "python": platform.python_version(),
            "blas": f"{config.get('name', '?')} {config.get('version', '?')}" + (f" ({kernel})" if kernel else "")}


GROUPS: dict[str, Callable[[], dict[str, str]]] = {
    "mnist_mlp": mnist_mlp, "onnx_suite": onnx_suite, "dqn_cartpole": dqn_cartpole, "machine": machine,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", metavar="GROUP",
                        help=f"the groups to run (default: all): {', '.join(GROUPS)}")
    parser.add_argument("--write", action="store_true",
                        help="merge into docs/figures.json and fill the markers of README.md and docs/*.md")
    args = parser.parse_args()
    unknown = set(args.groups) - set(GROUPS)
    if unknown:
        parser.error(f"expected groups among {', '.join(GROUPS)}, received: {', '.join(sorted(unknown))}")
    names = args.groups or list(GROUPS)
    if args.write and "machine" not in names:
        names.append("machine")
    figures = load() if FIGURES_FILE.exists() else {}
    for name in names:
        print(f"{name} ...", file=sys.stderr, flush=True)
        figures[name] = GROUPS[name]()
        print(json.dumps({name: figures[name]}), flush=True)
    if args.write:
        FIGURES_FILE.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
        for page in pages():
            text = page.read_text()
            if fill(text, figures) != text:
                page.write_text(fill(text, figures))
                print(f"updated {page.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
