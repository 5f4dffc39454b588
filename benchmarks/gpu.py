"""Training steps and ResNet-18 inference on the GPU (issue 14): ours on CuPy against PyTorch CUDA, in one run.

Models (``--models``; default ``mlp,resnet20,lstm``):

* ``mlp``, ``resnet20``, ``lstm``, ``dcgan``: training steps, the models, weights and batches of
  ``mlp_step.py``, ``resnet_step.py``, ``lstm_step.py`` and ``dcgan_step.py`` (their builders,
  given ``backend="cupy"`` / ``device="cuda"``); a DCGAN step is one discriminator and one
  generator update, noise drawn with NumPy on the host and fed on both sides.
* ``resnet18_b1``, ``resnet18_b32``: ResNet-18 inference (forward only, eval mode) at batch 1 and
  32, the model of ``onnx_models.py`` (32x32 images, 10 classes). The driver exports it once
  (``export_onnx``, in a child process) with its input batches; ours imports that file
  (``import_model``) and compiles it with ``compile_for_inference(backend="cupy")``, torch runs
  ``build_torch_model("resnet18")`` (the same seeded weights) under ``inference_mode``. A call
  ends with the output on the host on both sides; the largest difference between the two
  sides' first outputs is printed.

Sides:

* ``ours``: the ngraph graph compiled by ``make_transformer("cupy")``; every step feeds the
  batch from host memory (as ``Model.fit`` does) and returns the loss as a NumPy scalar. The step
  replays as a CUDA graph from its third call (the transformer's default; ``--eager`` turns it off;
  ``gpu_capture_check.py`` checks the replay against the eager step).
* ``torch``: the same network in PyTorch eager on CUDA, the batch resident on the GPU; TF32 is
  off (cuDNN allows it by default) so both sides do float32 arithmetic, unless ``--torch-tf32``.

Peak device memory, per side, sampled after the build and after every call: ours is the growth
of the device's used memory (``cupy.cuda.runtime.memGetInfo``, from just after the CUDA context
is made): CuPy's pools (the default one and each CUDA graph's private one), cuBLAS workspaces,
graphs and loaded kernels; torch's is ``torch.cuda.max_memory_allocated()`` (its caching
allocator's live tensors at their peak, within steps included). The same memGetInfo growth for
torch (its cached blocks, cuBLAS/cuDNN handles and kernels included) is printed beside it, the
like-for-like figure.

Method (benchmarks/README.md, "Method"): each measurement is its own short-lived process running one
side, alternating ours, torch, ours, torch for ``--pairs`` pairs. A process builds its side,
runs the warmup steps untimed, then times ``--steps`` steps one by one; each step ends with
the loss on the host and a device synchronization (``cupy.cuda.Device().synchronize()`` /
``torch.cuda.synchronize()``), so the time is the step's, not its launch's. Reported: each
side's median over pairs of its median step time, and the median (range) of the paired ratios
ours/torch. The first losses of each side are printed (DCGAN: discriminator/generator): from the
same weights and batch they agree to float32 rounding, a check that both sides do the same work.
A child that fails or outlives its time limit (``Model.timeout_s``) fails its model's row only; the
exit status is then 1.

``--cpu-smoke`` runs the plumbing on a machine without a GPU: ours on NumPy, torch on CPU, a
few steps (its figures mean nothing). Without a GPU and without it, the script prints why in
one line and exits with status 2.

Usage:
    PYTHONPATH=. python3 benchmarks/gpu.py                          # 3 pairs of each model
    PYTHONPATH=. python3 benchmarks/gpu.py --models mlp,lstm --pairs 5 --steps 200
    PYTHONPATH=. python3 benchmarks/gpu.py --pairs 1 --models dcgan,resnet18_b1,resnet18_b32   # ~2 min
    .venv/bin/python benchmarks/gpu.py --cpu-smoke --pairs 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(HERE), str(ROOT)):  # the model builders (benchmarks/) and our packages (repo root)
    if path not in sys.path:
        sys.path.insert(0, path)


class Model(NamedTuple):
    """One row: its builders, the calls timed and warmed up per process on the GPU, a child's time limit."""

    module: str  # benchmarks/<module>.py: build_ngraph(threads, backend=), build_torch(threads, device=)
    steps: int
    warmup: int
    timeout_s: int
    batch: int = 0  # ResNet-18 inference at this batch (built here); 0: a training step


MODELS = {"mlp": Model("mlp_step", 200, 20, 900), "resnet20": Model("resnet_step", 50, 10, 900),
          "lstm": Model("lstm_step", 100, 10, 900), "dcgan": Model("dcgan_step", 50, 10, 150),
          "resnet18_b1": Model("onnx_models", 200, 10, 150, batch=1),
          "resnet18_b32": Model("onnx_models", 100, 10, 150, batch=32)}
DEFAULT_MODELS = ("mlp", "resnet20", "lstm")
SMOKE_STEPS, SMOKE_WARMUP = 2, 1
LOSS_STEPS = 3  # losses printed per side (the first steps, from the shared initial weights)
PROBE_TIMEOUT_S = EXPORT_TIMEOUT_S = 180
MIB = 2**20


class ChildFailed(Exception):
    """A child process failed or outlived its time limit; the message says which and why."""


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


def build_resnet18(side: str, batch: int, folder: str, cpu: bool) -> tuple[Any, str]:
    """ResNet-18 inference on ``folder``'s exported model and input batch: ``(call, backend)``."""
    import numpy as np

    x = np.load(os.path.join(folder, f"resnet18_x{batch}.npy"))
    if side == "ours":
        import ngraph_core as ng
        from ngraph_core.frontends.onnx import import_model

        backend = "numpy" if cpu else "cupy"
        imported = import_model(os.path.join(folder, "resnet18.onnx"), dims={"N": batch})
        compiled = ng.inference.compile_for_inference((imported.inputs, imported.outputs), batch_size=batch,
                                                      backend=backend)
        return (lambda: compiled.infer(x)[0]), f"ngraph_core {backend}, import_model + compile_for_inference fp32"
    import torch
    from onnx_models import build_torch_model

    device = "cpu" if cpu else "cuda"
    model = build_torch_model("resnet18").to(device)  # eval mode, the weights export_onnx wrote
    x_device = torch.from_numpy(x).to(device)

    def call() -> object:
        with torch.inference_mode():
            return model(x_device).cpu()

    return call, f"torch {torch.__version__}, eval mode, inference_mode"


def export_resnet18(folder: str) -> None:
    """Write ``resnet18.onnx`` and the seeded input batches ``resnet18_x<batch>.npy`` into ``folder``."""
    import numpy as np
    import torch
    from onnx_models import export_onnx, sample_input

    torch.set_num_threads(1)
    export_onnx("resnet18", os.path.join(folder, "resnet18.onnx"))
    for spec in MODELS.values():
        if spec.batch:
            np.save(os.path.join(folder, f"resnet18_x{spec.batch}.npy"), sample_input("resnet18", spec.batch))


def memory_probe(side: str, cpu: bool) -> tuple[Any, Any]:
    """``(sync, used)``: the device synchronization, and the device memory used since now in bytes (None on CPU)."""
    if cpu:
        return (lambda: None), (lambda: None)
    if side == "ours":
        import cupy

        device = cupy.cuda.Device()
        cupy.zeros(1)  # the CUDA context exists before the baseline
        device.synchronize()
        free0 = cupy.cuda.runtime.memGetInfo()[0]
        return device.synchronize, (lambda: free0 - cupy.cuda.runtime.memGetInfo()[0])
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    free0 = torch.cuda.mem_get_info()[0]
    return torch.cuda.synchronize, (lambda: free0 - torch.cuda.mem_get_info()[0])


def child(model: str, side: str, cpu: bool, steps: int, warmup: int, tf32: bool, folder: str | None) -> dict:
    """Build and time one side of one model in this process: the JSON report ``run_side`` reads."""
    import importlib

    import numpy

    spec = MODELS[model]
    if side == "torch" and not cpu:
        import torch

        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
    sync, used = memory_probe(side, cpu)
    if spec.batch:
        if folder is None:
            raise SystemExit(f"gpu.py: {model} needs --onnx-dir (the driver's export); hint: run without --child")
        step, backend = build_resnet18(side, spec.batch, folder, cpu)
    elif side == "ours":
        step, backend = importlib.import_module(spec.module).build_ngraph(1, backend="numpy" if cpu else "cupy")
    else:
        step, backend = importlib.import_module(spec.module).build_torch(1, device="cpu" if cpu else "cuda")
    if side == "ours":
        backend += f", numpy {numpy.__version__}"
    device_peak = used()

    def on_host(result: Any) -> Any:
        """The call's result on the host: its losses (training) or its output array (inference)."""
        if spec.batch:
            return numpy.asarray(result)
        values = result if isinstance(result, (tuple, list)) else (result,)
        return [float(v) for v in values if v is not None]  # a doall's None result is no loss

    def timed_call() -> tuple[float, Any]:
        start = time.perf_counter()
        value = on_host(step())
        sync()
        return time.perf_counter() - start, value

    losses, times, output = [], [], None
    first_timed = max(warmup, LOSS_STEPS)
    for i in range(first_timed + steps):
        seconds, value = timed_call()
        if device_peak is not None:
            device_peak = max(device_peak, used())
        if i == 0 and spec.batch:
            output = value.tolist()
        elif i < LOSS_STEPS and not spec.batch:
            losses.append(value)
        if i >= first_timed:
            times.append(seconds)
    peak = device_peak
    if side == "torch" and not cpu:
        import torch

        peak = torch.cuda.max_memory_allocated()
    return {"model": model, "side": side, "median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
            "steps": steps, "losses": losses, "output": output, "backend": backend,
            "peak_mib": None if peak is None else peak / MIB,
            "device_mib": None if device_peak is None else device_peak / MIB}


def run_self(args: argparse.Namespace, timeout_s: int, *flags: str) -> tuple[list[str], subprocess.CompletedProcess]:
    """This script in a fresh process with ``flags`` (and the run's ``--cpu-smoke``/``--torch-tf32``).

    Raises:
        subprocess.TimeoutExpired: the process outlived ``timeout_s`` (it is killed).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if args.cpu_smoke:  # a shared CPU machine: one thread each, as run.py's steadier figures
        env.update({var: "1" for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    cmd = [sys.executable, str(Path(__file__).resolve()), *flags]
    cmd += ["--cpu-smoke"] * args.cpu_smoke + ["--torch-tf32"] * args.torch_tf32
    env["NG_CUDA_GRAPHS"] = "0" if args.eager else "1"  # ours replays each computation as a CUDA graph, or not
    return cmd, subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout_s)


def run_side(model: str, side: str, args: argparse.Namespace, steps: int, warmup: int) -> dict:
    """One short-lived process timing one side of one model; its JSON report.

    Raises:
        ChildFailed: the process failed, printed no report, or outlived its model's time limit.
    """
    flags = ["--child", model, "--side", side, "--steps", str(steps), "--warmup", str(warmup)]
    if args.onnx_dir:
        flags += ["--onnx-dir", args.onnx_dir]
    timeout_s = MODELS[model].timeout_s
    try:
        cmd, done = run_self(args, timeout_s, *flags)
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"{model} {side}: no report within {timeout_s} s (killed)") from None
    if done.returncode != 0:
        raise ChildFailed(f"{model} {side} failed (exit {done.returncode}): {' '.join(cmd)}\n{done.stderr[-4000:]}")
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise ChildFailed(f"{model} {side}: no JSON report; stdout ends {done.stdout[-500:]!r}") from None


def measure(model: str, args: argparse.Namespace) -> dict:
    """Alternate ours and torch ``args.pairs`` times; medians per side and of the paired ratios."""
    spec = MODELS[model]
    steps, warmup = (SMOKE_STEPS, SMOKE_WARMUP) if args.cpu_smoke else (spec.steps, spec.warmup)
    steps = args.steps if args.steps is not None else steps
    warmup = args.warmup if args.warmup is not None else warmup
    ours, theirs, ratios = [], [], []
    for k in range(args.pairs):
        a, b = (run_side(model, side, args, steps, warmup) for side in ("ours", "torch"))
        ours.append(a)
        theirs.append(b)
        ratios.append(a["median_ms"] / b["median_ms"])
        print(f"  {model} pair {k + 1}/{args.pairs}: ours {a['median_ms']:.3f} ms, torch {b['median_ms']:.3f} ms, "
              f"ratio {ratios[-1]:.2f}; {check(a, b)}", file=sys.stderr)
    return {"ours": statistics.median(r["median_ms"] for r in ours),
            "torch": statistics.median(r["median_ms"] for r in theirs),
            "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "steps": steps,
            "check": check(ours[0], theirs[0]), "backends": (ours[0]["backend"], theirs[0]["backend"]),
            "peak": (peak(ours, "peak_mib"), peak(theirs, "peak_mib")),
            "device": (peak(ours, "device_mib"), peak(theirs, "device_mib"))}


def check(a: dict, b: dict) -> str:
    """What shows that both sides did the same work: their first losses, or their first outputs' largest gap."""
    if a["output"] is None:
        return f"first losses ours {fmt(a['losses'])}, torch {fmt(b['losses'])}"
    import numpy

    ours, theirs = numpy.asarray(a["output"]), numpy.asarray(b["output"])
    if ours.shape != theirs.shape:
        return f"first outputs of different shapes: ours {ours.shape}, torch {theirs.shape}"
    return f"first output {ours.shape}: max |ours - torch| {float(numpy.abs(ours - theirs).max()):.2e}"


def peak(reports: list[dict], key: str) -> float | None:
    """The largest ``key`` over a side's processes (None on CPU)."""
    values = [r[key] for r in reports if r[key] is not None]
    return max(values) if values else None


def fmt(losses: list[list[float]]) -> str:
    """``[2.6319, 1.8054]``; a step of several losses (DCGAN's D and G) as ``1.5036/0.7015``."""
    return "[" + ", ".join("/".join(f"{v:.4f}" for v in step) for step in losses) + "]"


def mib(pair: tuple[float | None, float | None]) -> str:
    return " / ".join("–" if v is None else f"{v:.0f}" for v in pair)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help=f"comma-separated, among {','.join(MODELS)} (default {','.join(DEFAULT_MODELS)})")
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
    parser.add_argument("--export", metavar="DIR", help=argparse.SUPPRESS)  # ResNet-18's ONNX file and batches
    parser.add_argument("--onnx-dir", help=argparse.SUPPRESS)  # where --export wrote them
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
        report = child(args.child, args.side, args.cpu_smoke, args.steps, args.warmup, args.torch_tf32, args.onnx_dir)
        print(json.dumps(report))
        return 0
    if args.export:
        export_resnet18(args.export)
        return 0
    if args.probe:  # the availability check, in its own process so the driver never touches the GPU
        try:
            print(json.dumps(probe(args.cpu_smoke)))
        except NoGpu as exc:
            print(json.dumps({"error": str(exc)}))
        return 0
    try:
        _, done = run_self(args, PROBE_TIMEOUT_S, "--probe")
    except subprocess.TimeoutExpired:
        print(f"gpu.py: no GPU: the probe gave no answer within {PROBE_TIMEOUT_S} s", file=sys.stderr)
        return 2
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"gpu.py: no GPU: the probe failed ({last})", file=sys.stderr)
        return 2
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if "error" in info:
        print(f"gpu.py: no GPU: {info['error']} (--cpu-smoke runs the plumbing on CPU)", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="gpu_bench_") as folder:
        results = run_models(args, folder)
    tf32 = ("TF32 on" if args.torch_tf32 else "TF32 off") + (", ours eager" if args.eager else
                                                            ", ours with CUDA graphs")
    versions = f"ours {info['ours']}, numpy {info['numpy']}; torch {info['torch']}" + ("" if args.cpu_smoke else
                                                                                       f", {tf32}")
    for model, r in results.items():
        if "error" not in r:
            print(f"{model}: ours = {r['backends'][0]}; torch = {r['backends'][1]}")
            print(f"{model}: {r['check']}")
    print()
    print("| model | ours ms | torch ms | ratio ours/torch (median of pairs, range) | peak MiB ours / torch "
          "| device MiB ours / torch | pairs x steps | device | versions |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model, r in results.items():
        if "error" in r:
            print(f"| {model} | failed: {r['error'].splitlines()[0]} | | | | | | {info['device']} | {versions} |")
            continue
        print(f"| {model} | {r['ours']:.3f} | {r['torch']:.3f} | {r['ratio']:.2f} ({r['low']:.2f}–{r['high']:.2f}) "
              f"| {mib(r['peak'])} | {mib(r['device'])} | {args.pairs} x {r['steps']} | {info['device']} "
              f"| {versions} |")
    if not args.cpu_smoke:
        print("\npeak MiB: ours = device memory growth (memGetInfo), torch = torch.cuda.max_memory_allocated(); "
              "device MiB: the memGetInfo growth of both sides")
    return 1 if any("error" in r for r in results.values()) else 0


def run_models(args: argparse.Namespace, folder: str) -> dict[str, dict]:
    """Each model's ``measure``, or ``{"error": why}`` for a model whose children failed (the others still run)."""
    results: dict[str, dict] = {}
    args.onnx_dir = None
    if any(MODELS[m].batch for m in args.models):  # ResNet-18: export once, for every batch
        try:
            _, done = run_self(args, EXPORT_TIMEOUT_S, "--export", folder)
            error = f"the export failed (exit {done.returncode}): {done.stderr[-4000:]}" if done.returncode else None
        except subprocess.TimeoutExpired:
            error = f"the export gave nothing within {EXPORT_TIMEOUT_S} s"
        if error:
            print(f"gpu.py: ResNet-18: {error}", file=sys.stderr)
        args.onnx_dir = None if error else folder
    for model in args.models:
        if MODELS[model].batch and args.onnx_dir is None:
            results[model] = {"error": "the ResNet-18 export failed (above)"}
            continue
        try:
            results[model] = measure(model, args)
        except ChildFailed as exc:
            print(f"gpu.py: {exc}", file=sys.stderr)
            results[model] = {"error": str(exc)}
    return results


if __name__ == "__main__":
    sys.exit(main())
