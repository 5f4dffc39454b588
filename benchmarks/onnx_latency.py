"""Inference latency of models exported from PyTorch (issue 16): ours (ONNX import) against onnxruntime.

The three hand-built models of ``onnx_models.py`` (an MLP, an LSTM classifier, ResNet-18 on
32x32 images) are exported once by the driver (``torch.onnx.export``, opset 17, dynamic
batch) into a temporary folder, with a seeded input batch per size saved beside them. Before
anything is timed, the driver checks that our output and onnxruntime's both match PyTorch's
(1e-4) on those batches.

Sides (each in its own short-lived process, alternating A B A B, median of the paired ratios,
``run.measure``; a child reads only the ``.onnx`` file and the ``.npy`` batch, never torch):

* ``ngraph``: ``import_model(path, dims={"N": batch})`` then
  ``ng.inference.compile_for_inference((inputs, outputs), batch_size=batch)``; a step is one
  ``infer`` call.
* ``onnxruntime``: an ``InferenceSession`` (CPU execution provider, all graph optimizations,
  intra-op threads = ``--threads``, one inter-op thread); a step is one ``run`` call.

The target (issue 16) is a ratio ours/onnxruntime <= 1.5 at batch 1 and 32.

Usage:
    python benchmarks/onnx_latency.py --pairs 3 --threads 1            # every row, then a markdown table
    python benchmarks/onnx_latency.py --models mlp lstm --batches 1 --pairs 2
    LAT_ONNX=m.onnx LAT_INPUT=x.npy python benchmarks/onnx_latency.py --side onnxruntime   # one side: JSON
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from harness import Step, blas_info, child_main

SIDES = ("ngraph", "onnxruntime")
STEPS, WARMUP = 40, 5
BATCHES = (1, 32)
TOLERANCE = 1e-4


def _config() -> tuple[str, str]:
    try:
        return os.environ["LAT_ONNX"], os.environ["LAT_INPUT"]
    except KeyError as exc:
        raise SystemExit(f"onnx_latency: a side needs LAT_ONNX (the model) and LAT_INPUT (a .npy batch); "
                         f"{exc.args[0]} is not set; hint: run the driver (no --side)") from None


def compile_ours(path: str, batch: int):
    """The exported model at ``path`` imported for ``batch`` samples and compiled for inference."""
    import ngraph_core as ng
    from ngraph_core.frontends.onnx import import_model

    imported = import_model(path, dims={"N": batch})
    return ng.inference.compile_for_inference((imported.inputs, imported.outputs), batch_size=batch)


def ort_session(path: str, threads: int):
    """An onnxruntime CPU session on ``path`` with ``threads`` intra-op threads and full graph optimization."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def build_ngraph(threads: int) -> tuple[Step, str]:
    import numpy as np

    path, data = _config()
    x = np.load(data)
    compiled = compile_ours(path, x.shape[0])
    return (lambda: compiled.infer(x)[0]), f"ngraph_core import_model + compile_for_inference fp32 numpy, " \
                                           f"{blas_info()}, {os.path.basename(path)} batch {x.shape[0]}"


def build_onnxruntime(threads: int) -> tuple[Step, str]:
    import numpy as np
    import onnxruntime as ort

    path, data = _config()
    x = np.load(data)
    session = ort_session(path, threads)
    return (lambda: session.run(None, {"x": x})[0]), f"onnxruntime {ort.__version__} CPU, {threads} intra-op " \
                                                     f"threads, {os.path.basename(path)} batch {x.shape[0]}"


BUILDERS = {"ngraph": build_ngraph, "onnxruntime": build_onnxruntime}


# -- the driver ----
def prepare(folder: str, names: list[str], batches: list[int]) -> dict[tuple[str, int], tuple[str, str]]:
    """Export each model and save its input batches; check ours and onnxruntime against PyTorch on each.

    Returns:
        ``(model, batch) -> (onnx path, npy path)``.
    """
    import numpy as np
    import torch
    from onnx_models import build_torch_model, export_onnx, sample_input, torch_forward

    torch.set_num_threads(1)  # the driver's idle torch pool must not spin on the cores the timed children use
    files = {}
    for name in names:
        model = build_torch_model(name)
        path = export_onnx(name, os.path.join(folder, f"{name}.onnx"), model=model)
        for batch in batches:
            x = sample_input(name, batch)
            data = os.path.join(folder, f"{name}_{batch}.npy")
            np.save(data, x)
            expected = torch_forward(model, x)
            ours = compile_ours(path, batch).infer(x)[0]
            theirs = ort_session(path, 1).run(None, {"x": x})[0]
            gaps = {"ours": float(np.abs(ours - expected).max()), "onnxruntime": float(np.abs(theirs - expected).max())}
            if max(gaps.values()) > TOLERANCE:
                raise SystemExit(f"{name} batch {batch}: outputs differ from PyTorch's by {gaps} (> {TOLERANCE})")
            print(f"check {name} batch {batch}: max |y - y_torch| {gaps}", file=sys.stderr)
            files[name, batch] = (path, data)
    return files


def drive(argv: list[str]) -> int:
    from onnx_models import MODELS
    from run import measure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--batches", nargs="+", type=int, default=list(BATCHES))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--warmup", type=int, default=WARMUP)
    args = parser.parse_args(argv)
    extra = ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    rows, started = [], time.time()
    with tempfile.TemporaryDirectory(prefix="onnx_latency_") as folder:
        files = prepare(folder, args.models, args.batches)
        for name in args.models:
            for batch in args.batches:
                os.environ["LAT_ONNX"], os.environ["LAT_INPUT"] = files[name, batch]
                for threads in args.threads:
                    r = measure("onnx_latency", SIDES, threads, args.pairs, extra)
                    verdict = "yes" if r["ratio"] <= 1.5 else "no"
                    rows.append(f"| {name} | {batch} | {threads} | {r['ours']:.3f} | {r['theirs']:.3f} | "
                                f"{r['ratio']:.2f} ({r['low']:.2f}–{r['high']:.2f}) | {verdict} | {args.pairs} |")
                    print("\n".join(f"  {side}: {backend}" for side, backend in r["backends"].items()),
                          file=sys.stderr)
    print("| model | batch | threads | ngraph ms | onnxruntime ms | ratio ngraph/ort (median of pairs, range) "
          "| <= 1.5 | pairs |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n({time.time() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if "--side" in sys.argv:
        child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)
    else:
        sys.exit(drive(sys.argv[1:]))
