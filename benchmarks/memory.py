"""Memory of the MLP 784-512-512-10 (batch 128): the planned arena, and peak RSS against PyTorch.

Arena figures (computed in this process, no torch imported):

* ``arena``: the one allocation that holds every temporary of the compiled computation;
* ``no reuse (same graph)``: the same optimized graph's buffers without any sharing;
* ``no reuse (as built)``: the graph as the user built it (``optimize=False``: no fusion,
  no in-place) without sharing — what the compiler as a whole saves.

Peak RSS: one short-lived process per side runs 50 training steps of ``mlp_step.py``'s
model and reports ``ru_maxrss``; sides alternate, median of ``--repeats`` runs each.

Usage: ``python benchmarks/memory.py [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MiB = 1 << 20


def arena_figures() -> list[dict]:
    import numpy as np
    from mlp_step import build_graph

    import ngraph_core as ng

    loss, update, logits, X, T = build_graph(np.random.default_rng(0))
    probs = ng.softmax(logits)
    rows = []
    for name, results, inputs in [("training", [loss, update], [X, T]), ("inference", [probs], [X])]:
        figures = {}
        for optimize in (True, False):
            with ng.transformers.make_transformer(optimize=optimize) as t:
                figures[optimize] = t.computation(results, *inputs).memory_report()
        opt, built = figures[True], figures[False]
        rows.append({
            "graph": name, "arena_MiB": opt.arena_bytes / MiB,
            "no_reuse_same_graph_MiB": opt.unplanned_bytes / MiB,
            "no_reuse_as_built_MiB": built.unplanned_bytes / MiB,
            "ratio_same_graph": opt.unplanned_bytes / opt.arena_bytes,
            "ratio_as_built": built.unplanned_bytes / opt.arena_bytes,
            "variables_MiB": opt.persistent_bytes / MiB,
        })
    return rows


def child(side: str) -> None:
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    import mlp_step

    step, _ = {"ngraph": mlp_step.build_ngraph, "torch": mlp_step.build_torch}[side](1)
    for _ in range(50):
        step()
    print(json.dumps({"side": side, "peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=["ngraph", "torch"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.side:
        child(args.side)
        return
    for row in arena_figures():
        print(json.dumps(row))
    rss: dict[str, list[float]] = {"ngraph": [], "torch": []}
    for _ in range(args.repeats):
        for side in rss:
            out = subprocess.run([sys.executable, __file__, "--side", side], capture_output=True, text=True,
                                 cwd=HERE, check=True)
            rss[side].append(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_MiB"])
    print(json.dumps({side: statistics.median(v) for side, v in rss.items()} | {"unit": "peak RSS MiB"}))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
