"""Memory of a training step: the planned arena, and peak RSS against PyTorch.

Models (``--model``): ``mlp`` — the MLP 784-512-512-10 at batch 128 of ``mlp_step.py``
(training and inference graphs, 50 steps for RSS); ``resnet20`` — ResNet-20 at batch 64 of
``resnet_step.py`` (training graph, 5 steps for RSS).

Arena figures (computed in this process, no torch imported):

* ``arena``: the one allocation that holds every temporary of the compiled computation;
* ``no reuse (same graph)``: the same optimized graph's buffers without any sharing;
* ``no reuse (as built)``: the graph as the user built it (``optimize=False``: no fusion,
  no in-place) without sharing — what the compiler as a whole saves.

Beside the arena: ``workspace`` (the kernels' shared scratch: im2col blocks, padded copies)
and ``variables``.

Peak RSS: one short-lived process per side runs the model's training steps and reports
``ru_maxrss``; sides alternate, median of ``--repeats`` runs each (one thread each).

Usage: ``python benchmarks/memory.py [--model mlp|resnet20] [--repeats 3]``.
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


def _graphs(model: str) -> list[tuple[str, list, list]]:
    """``(name, results, inputs)`` per graph to plan."""
    import numpy as np

    import ngraph_core as ng

    if model == "resnet20":
        from resnet_step import training_graph

        results, inputs, t = training_graph()
        t.close()
        return [("training", results, inputs)]
    from mlp_step import build_graph

    loss, update, logits, X, T = build_graph(np.random.default_rng(0))
    return [("training", [loss, update], [X, T]), ("inference", [ng.softmax(logits)], [X])]


def arena_figures(model: str = "mlp") -> list[dict]:
    import ngraph_core as ng

    rows = []
    for name, results, inputs in _graphs(model):
        figures, workspace = {}, 0
        for optimize in (True, False):
            with ng.transformers.make_transformer(optimize=optimize) as t:
                computation = t.computation(results, *inputs, mode="inference" if name == "inference" else "training")
                figures[optimize] = computation.memory_report()
                workspace = workspace or computation.workspace_bytes
        opt, built = figures[True], figures[False]
        rows.append({
            "model": model, "graph": name, "arena_MiB": opt.arena_bytes / MiB,
            "no_reuse_same_graph_MiB": opt.unplanned_bytes / MiB,
            "no_reuse_as_built_MiB": built.unplanned_bytes / MiB,
            "ratio_same_graph": opt.unplanned_bytes / opt.arena_bytes,
            "ratio_as_built": built.unplanned_bytes / opt.arena_bytes,
            "workspace_MiB": opt.workspace_bytes / MiB,
            "variables_MiB": opt.persistent_bytes / MiB,
        })
    return rows


STEPS = {"mlp": ("mlp_step", 50), "resnet20": ("resnet_step", 5)}


def child(side: str, model: str) -> None:
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    module_name, steps = STEPS[model]
    module = __import__(module_name)
    step, _ = {"ngraph": module.build_ngraph, "torch": module.build_torch}[side](1)
    for _ in range(steps):
        step()
    print(json.dumps({"side": side, "peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=["ngraph", "torch"])
    parser.add_argument("--model", choices=sorted(STEPS), default="mlp")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.side:
        child(args.side, args.model)
        return
    for row in arena_figures(args.model):
        print(json.dumps(row))
    rss: dict[str, list[float]] = {"ngraph": [], "torch": []}
    for _ in range(args.repeats):
        for side in rss:
            out = subprocess.run([sys.executable, __file__, "--side", side, "--model", args.model],
                                 capture_output=True, text=True, cwd=HERE, check=True)
            rss[side].append(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_MiB"])
    print(json.dumps({side: statistics.median(v) for side, v in rss.items()} | {"unit": "peak RSS MiB"}))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
