"""The ONNX backend node suite: pass / fail / error for ngraph and onnxruntime on the same cases.

Each backend runs in its own process (``python -m ngraph_core.frontends.onnx.conformance``),
on every node case the pinned onnx wheel ships. Prints both counts, our passes as a share
of onnxruntime's (the issue's target: >= 90%), and the operators behind our failures and
errors, most cases first — the to-do list of the importer.

    .venv/bin/python benchmarks/onnx_suite.py                # the whole suite (~1 min)
    .venv/bin/python benchmarks/onnx_suite.py 'test_conv*'   # some cases
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTS = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) errors \((\d+) cases")


def run_backend(backend: str, patterns: list[str]) -> tuple[dict[str, str], tuple[int, int, int, int]]:
    """Every case's status for ``backend`` (run in a child process) and the counts line's numbers."""
    cmd = [sys.executable, "-m", "ngraph_core.frontends.onnx.conformance", "--backend", backend, *patterns]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    status: dict[str, str] = {}
    counts = None
    for line in proc.stdout.splitlines():
        match = COUNTS.match(line)
        if match:
            counts = tuple(int(g) for g in match.groups())
        elif line[:5].strip() in ("pass", "fail", "error"):
            parts = line.split(maxsplit=2)
            status[parts[1]] = parts[0] + (" " + parts[2] if len(parts) > 2 else "")
    if counts is None:
        raise SystemExit(f"{backend}: no counts line; stderr:\n{proc.stderr[-2000:]}")
    return status, counts


def operator_of(name: str, detail: str) -> str:
    """The operator an error names (``UnsupportedOnnxOpError``), else the case's stem."""
    match = re.search(r"ONNX operator (\S+) \(opset", detail)
    return match.group(1) if match else re.sub(r"_(expanded.*|\d.*)$", "", name[5:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", default=["*"])
    parser.add_argument("--top", type=int, default=40, help="operators to list behind our failures")
    args = parser.parse_args()
    ours, (p1, f1, e1, n1) = run_backend("ngraph", args.patterns)
    theirs, (p2, f2, e2, n2) = run_backend("onnxruntime", args.patterns)
    print(f"| backend | pass | fail | error | cases |\n|---|---|---|---|---|\n"
          f"| ngraph | {p1} | {f1} | {e1} | {n1} |\n| onnxruntime 1.31.1 | {p2} | {f2} | {e2} | {n2} |")
    print(f"\nour passes / onnxruntime's: {p1 / max(p2, 1):.1%} (target >= 90%)")
    both = sum(1 for k, v in ours.items() if v.startswith("pass") and theirs.get(k, "").startswith("pass"))
    only_ours = sum(1 for k, v in ours.items() if v.startswith("pass") and not theirs.get(k, "").startswith("pass"))
    print(f"passing on both: {both}; on ours only: {only_ours}")
    missing = collections.Counter(operator_of(k, v) for k, v in ours.items()
                                  if not v.startswith("pass") and theirs.get(k, "").startswith("pass"))
    print(f"\nwhat we lack where onnxruntime passes (operator: cases), top {args.top}:")
    print(", ".join(f"{op}: {n}" for op, n in missing.most_common(args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
