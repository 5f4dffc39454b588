"""MLP, ResNet-20 and LSTM training steps on the GPU (issue 14): ours on CuPy against PyTorch CUDA, in one run.

The models, weights and batches are those of ``mlp_step.py``, ``resnet_step.py`` and
``lstm_step.py`` (their builders, given ``backend="cupy"`` / ``device="cuda"``):

* ``ours``: the ngraph graph compiled by ``make_transformer("cupy")``; every step feeds the
  batch from host memory (as ``Model.fit`` does) and returns the loss as a NumPy scalar. The step
  replays as a CUDA graph from its third call (the transformer's default; ``--eager`` turns it off;
  ``gpu_capture_check.py`` checks the replay against the eager step).
* ``torch``: the same network in PyTorch eager on CUDA, the batch resident on the GPU; TF32 is
  off (cuDNN allows it by default) so both sides do float32 arithmetic, unless ``--torch-tf32``.

Method (shared/PERFORMANCE.md): each measurement is its own short-lived process running one
side, alternating ours, torch, ours, torch for ``--pairs`` pairs. A process builds its side,
runs the warmup steps untimed, then times ``--steps`` steps one by one; each step ends with
the loss on the host and a device synchronization (``cupy.cuda.Device().synchronize()`` /
``torch.cuda.synchronize()``), so the time is the step's, not its launch's. Reported: each
side's median over pairs of its median step time, and the median (range) of the paired ratios
ours/torch. The first losses of each side are printed: from the same weights and batch they
agree to float32 rounding, a check that both sides do the same work.

``--cpu-smoke`` runs the plumbing on a machine without a GPU: ours on NumPy, torch on CPU, a
few steps (its figures mean nothing). Without a GPU and without it, the script prints why in
one line and exits with status 2.

Usage:
    PYTHONPATH=. python3 benchmarks/gpu.py                          # 3 pairs of each model
    PYTHONPATH=. python3 benchmarks/gpu.py --models mlp,lstm --pairs 5 --steps 200
    .venv/bin/python benchmarks/gpu.py --cpu-smoke --pairs 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(HERE), str(ROOT)):  # the model builders (benchmarks/) and our packages (repo root)
    if path not in sys.path:
        sys.path.insert(0, path)

# model -> (benchmark module, timed steps, warmup steps) on the GPU
MODELS = {"mlp": ("mlp_step", 200, 20), "resnet20": ("resnet_step", 50, 10), "lstm": ("lstm_step", 100, 10)}
SMOKE_STEPS, SMOKE_WARMUP = 2, 1
LOSS_STEPS = 3  # losses printed per side (the first steps, from the shared initial weights)
CHILD_TIMEOUT_S = 900


class NoGpu(Exception):
    """The GPU side of a run cannot start; the message says why."""


def probe(cpu: bool) -> dict:
    """The device and library versions of this machine; raises ``NoGpu`` saying which side cannot run."""
    import numpy
    import torch

    info = {"numpy": numpy.__version__, "torch": torch.__version__}
    if cpu:
        import platform

        return {**info, "device": f"CPU ({platform.processor() or platform.machine()}, smoke run)", "ours": "numpy"}
    from ngraph_core.errors import BackendUnavailableError
    from ngraph_core.transformers.cupy import load_cupy

    try:
        cupy = load_cupy()
    except BackendUnavailableError as exc:
        raise NoGpu(str(exc)) from None
    if not torch.cuda.is_available():
        raise NoGpu(f"torch.cuda.is_available() is False (torch {torch.__version__}, built for CUDA "
                    f"{torch.version.cuda}); hint: install a CUDA build of torch")
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    runtime = cupy.cuda.runtime.runtimeGetVersion()
    return {**info, "device": name.decode() if isinstance(name, bytes) else str(name),
            "ours": f"CuPy {cupy.__version__} (CUDA runtime {runtime // 1000}.{runtime % 1000 // 10})",
            "torch": f"{torch.__version__} (cuDNN {torch.backends.cudnn.version()})"}


def child(model: str, side: str, cpu: bool, steps: int, warmup: int, tf32: bool) -> dict:
    """Build and time one side of one model in this process: the JSON report ``run_side`` reads."""
    import importlib

    module = importlib.import_module(MODELS[model][0])
    if side == "ours":
        import numpy

        step, backend = module.build_ngraph(1, backend="numpy" if cpu else "cupy")
        if cpu:
            sync = lambda: None  # noqa: E731
        else:
            import cupy

            device = cupy.cuda.Device()
            sync = device.synchronize
        backend += f", numpy {numpy.__version__}"
    else:
        import torch

        if not cpu:
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
        step, backend = module.build_torch(1, device="cpu" if cpu else "cuda")
        sync = (lambda: None) if cpu else torch.cuda.synchronize

    def timed_step() -> tuple[float, float]:
        start = time.perf_counter()
        result = step()
        loss = float(result[0] if isinstance(result, (tuple, list)) else result)  # the loss on the host
        sync()
        return time.perf_counter() - start, loss

    losses, times = [], []
    for i in range(max(warmup, LOSS_STEPS) + steps):
        seconds, loss = timed_step()
        if i < LOSS_STEPS:
            losses.append(loss)
        if i >= max(warmup, LOSS_STEPS):
            times.append(seconds)
    return {"model": model, "side": side, "median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
            "steps": steps, "losses": losses, "backend": backend}


def run_self(args: argparse.Namespace, *flags: str) -> tuple[list[str], subprocess.CompletedProcess]:
    """This script in a fresh process with ``flags`` (and the run's ``--cpu-smoke``/``--torch-tf32``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if args.cpu_smoke:  # a shared CPU machine: one thread each, as run.py's steadier figures
        env.update({var: "1" for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    cmd = [sys.executable, str(Path(__file__).resolve()), *flags]
    cmd += ["--cpu-smoke"] * args.cpu_smoke + ["--torch-tf32"] * args.torch_tf32
    env["NG_CUDA_GRAPHS"] = "0" if args.eager else "1"  # ours replays each computation as a CUDA graph, or not
    return cmd, subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=CHILD_TIMEOUT_S)


def run_side(model: str, side: str, args: argparse.Namespace, steps: int, warmup: int) -> dict:
    """One short-lived process timing one side of one model; its JSON report."""
    cmd, done = run_self(args, "--child", model, "--side", side, "--steps", str(steps), "--warmup", str(warmup))
    if done.returncode != 0:
        raise SystemExit(f"gpu.py: {model} {side} failed (exit {done.returncode}): {' '.join(cmd)}\n"
                         f"{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(model: str, args: argparse.Namespace) -> dict:
    """Alternate ours and torch ``args.pairs`` times; medians per side and of the paired ratios."""
    _, steps, warmup = MODELS[model]
    if args.cpu_smoke:
        steps, warmup = SMOKE_STEPS, SMOKE_WARMUP
    steps = args.steps if args.steps is not None else steps
    warmup = args.warmup if args.warmup is not None else warmup
    ours, theirs, ratios = [], [], []
    for k in range(args.pairs):
        a, b = (run_side(model, side, args, steps, warmup) for side in ("ours", "torch"))
        ours.append(a)
        theirs.append(b)
        ratios.append(a["median_ms"] / b["median_ms"])
        print(f"  {model} pair {k + 1}/{args.pairs}: ours {a['median_ms']:.3f} ms, torch {b['median_ms']:.3f} ms, "
              f"ratio {ratios[-1]:.2f}; first losses ours {fmt(a['losses'])} torch {fmt(b['losses'])}",
              file=sys.stderr)
    return {"ours": statistics.median(r["median_ms"] for r in ours),
            "torch": statistics.median(r["median_ms"] for r in theirs),
            "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "steps": steps,
            "losses": (ours[0]["losses"], theirs[0]["losses"]),
            "backends": (ours[0]["backend"], theirs[0]["backend"])}


def fmt(losses: list[float]) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in losses) + "]"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, among {','.join(MODELS)}")
    parser.add_argument("--pairs", type=int, default=3, help="ours/torch process pairs per model (default 3)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per process (default per model)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps per process (default per model)")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="ours on numpy, torch on CPU, few steps: tests the plumbing without a GPU")
    parser.add_argument("--torch-tf32", action="store_true", help="let torch use TF32 (its cuDNN default)")
    parser.add_argument("--eager", action="store_true", help="ours without CUDA graphs (NG_CUDA_GRAPHS=0)")
    parser.add_argument("--cuda-graphs", action="store_true", help=argparse.SUPPRESS)  # the default now
    parser.add_argument("--child", choices=sorted(MODELS), help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=("ours", "torch"), help=argparse.SUPPRESS)
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        parser.error(f"--models: expected names among {','.join(MODELS)}, received {args.models!r}")
    if args.pairs < 1 or (args.steps is not None and args.steps < 1) or (args.warmup is not None and args.warmup < 0):
        parser.error("--pairs and --steps must be >= 1, --warmup >= 0")
    args.models = models
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:  # one side, one process: a JSON line
        print(json.dumps(child(args.child, args.side, args.cpu_smoke, args.steps, args.warmup, args.torch_tf32)))
        return 0
    if args.probe:  # the availability check, in its own process so the driver never touches the GPU
        try:
            print(json.dumps(probe(args.cpu_smoke)))
        except NoGpu as exc:
            print(json.dumps({"error": str(exc)}))
        return 0
    _, done = run_self(args, "--probe")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"gpu.py: no GPU: the probe failed ({last})", file=sys.stderr)
        return 2
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if "error" in info:
        print(f"gpu.py: no GPU: {info['error']} (--cpu-smoke runs the plumbing on CPU)", file=sys.stderr)
        return 2

    results = {model: measure(model, args) for model in args.models}
    tf32 = ("TF32 on" if args.torch_tf32 else "TF32 off") + (", ours eager" if args.eager else
                                                            ", ours with CUDA graphs")
    versions = f"ours {info['ours']}, numpy {info['numpy']}; torch {info['torch']}" + ("" if args.cpu_smoke else
                                                                                       f", {tf32}")
    for model, r in results.items():
        print(f"{model}: ours = {r['backends'][0]}; torch = {r['backends'][1]}")
        print(f"{model}: first losses ours {fmt(r['losses'][0])}, torch {fmt(r['losses'][1])}")
    print()
    print("| model | ours ms | torch ms | ratio ours/torch (median of pairs, range) | pairs x steps | device "
          "| versions |")
    print("|---|---|---|---|---|---|---|")
    for model, r in results.items():
        print(f"| {model} | {r['ours']:.3f} | {r['torch']:.3f} | {r['ratio']:.2f} ({r['low']:.2f}–{r['high']:.2f}) "
              f"| {args.pairs} x {r['steps']} | {info['device']} | {versions} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
