"""CUDA-graph check on the GPU: MLP, ResNet-20 and LSTM training steps captured, replayed, equal and timed.

For each model of ``benchmarks/gpu.py`` (its builders: ``mlp_step``, ``resnet_step``, ``lstm_step``), one
process builds the training step three times from the same weights and batch:

* ``cupy``: eager, GEMMs through ``cupy.matmul`` (``NG_CUDA_GRAPHS=0 NG_CUBLAS_GEMM=0``: before this work);
* ``eager``: eager, GEMMs through our cuBLAS handles (``cupy/gemm.py``; ``NG_CUDA_GRAPHS=0``);
* ``graph``: the default: captured at the second call, replayed after (``GraphRunner``).

and runs ``--check-steps`` steps of each, keeping the losses and, after them, every variable. Checked:
``graph`` against ``eager`` (the same kernels, replayed: relative difference at most ``--rtol``, 1e-5),
and reported: ``eager`` against ``cupy`` (cuBLAS's algorithms may differ from CuPy's: float32 rounding),
whether the step was captured (else ``capture_error``), the GEMMs issued through our handles and those
handed to ``cupy.matmul``. Then ``eager`` and ``graph`` are timed (``--warmup`` untimed steps, then
``--steps`` steps, each ending with the loss on the host and a device synchronisation; median ms),
and PyTorch's step (``gpu.py --child MODEL --side torch``, TF32 off) for the ratio. A fourth,
small model (``dropout``: an affine layer with a dropout mask) checks that random draws advance
between replays and equal the eager plan's.

Convolutions run on im2col + our GEMMs (``NG_CUDNN=0``: this checks the GEMM route; ``gpu_cudnn_check.py``
checks cuDNN, under capture too); ``--cudnn`` leaves cuDNN on.

Every process runs under a timeout and the whole run under ``--budget`` seconds (default 170): the
PyTorch timings are skipped when time runs short; a process that times out is reported as such.
Writes ``capture_check.json`` and ``capture_check.txt`` to ``--out``; exit status 0 when every
model was captured and equal, 1 otherwise, 2 without a GPU.

Wheels: none. cuBLAS is called through ctypes from the libcublas CuPy itself loads (cupy-cuda13x and
nvidia-cublas are on the GPU machine already).

Usage:
    PYTHONPATH=. python3 benchmarks/gpu_capture_check.py --out $OUT          # on the GPU machine
    .venv/bin/python benchmarks/gpu_capture_check.py --cpu-smoke --out /tmp/capture  # rehearsal, no GPU
        (the same on ``tests/.../fake_cuda.py``: CuPy's CUDA side and libcublas stood in on NumPy)
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
FAKES = ROOT / "tests" / "ngraph_core" / "transformers"
for path in (str(HERE), str(ROOT)):
    if path not in sys.path:
        sys.path.insert(0, path)

# model -> (builder module, timed steps, warmup steps) on the GPU; the torch side times as many
MODELS = {"mlp": ("mlp_step", 100, 10), "resnet20": ("resnet_step", 30, 5), "lstm": ("lstm_step", 50, 5),
          "dropout": (None, 50, 5)}
MODES = {"cupy": {"NG_CUDA_GRAPHS": "0", "NG_CUBLAS_GEMM": "0"},
         "eager": {"NG_CUDA_GRAPHS": "0", "NG_CUBLAS_GEMM": "1"},
         "graph": {"NG_CUDA_GRAPHS": "1", "NG_CUBLAS_GEMM": "1"}}
CHILD_TIMEOUT_S = {"mlp": 60, "resnet20": 110, "lstm": 80, "dropout": 40}
TORCH_TIMEOUT_S = 60
_KEEP: list = []


def install_fakes() -> None:
    """``--cpu-smoke``: ``cupy`` is ``fake_cuda.FakeCupy`` and make_transformer('cupy') the CPU stand-in."""
    sys.path.insert(0, str(FAKES))
    import fake_cuda

    from ngraph_core.transformers.registry import register_transformer

    installed = fake_cuda.installed()
    installed.__enter__()
    _KEEP.append(installed)  # for the life of this process (collected, it would put the real modules back)
    register_transformer("cupy", fake_cuda.CpuCupyTransformer)


def computation_of(step):
    """The ``Computation`` a builder's step closure calls (``train`` in ``*_step.build_ngraph``)."""
    from ngraph_core.transformers.base import Computation

    for cell in step.__closure__ or ():
        if isinstance(cell.cell_contents, Computation):
            return cell.cell_contents
    raise SystemExit("gpu_capture_check: the builder's step holds no Computation (its closure changed?)")


def build_dropout(backend: str = "cupy"):
    """An affine layer, a ReLU and a dropout mask (keep 0.5), squared loss, SGD: (step, backend text)."""
    import numpy as np

    import ngraph_core as ng

    rng = np.random.default_rng(0)
    F, H, N = ng.make_axis(64, "F"), ng.make_axis(32, "H"), ng.make_axis(16, "N")
    x = ng.placeholder([F, N], name="x")
    w = ng.variable([H, F], initial_value=rng.standard_normal((32, 64)) / 8, name="w")
    keep = ng.uniform([H, N], 0.0, 1.0) < 0.5
    loss = ng.sum((ng.relu(ng.dot(w, x)) * keep - 1.0) ** 2.0)
    (g,) = ng.gradients(loss, [w])
    t = ng.transformers.make_transformer(backend, seed=5)
    train = t.computation([loss, ng.assign(w, w - g * 1e-3)], x)
    xv = rng.standard_normal((64, 16)).astype("float32")
    return (lambda: train(xv)[0]), f"ngraph_core {backend}"


def run_mode(model: str, mode: str, check_steps: int, steps: int, warmup: int, cpu: bool) -> dict:
    """Build ``model`` with ``mode``'s switches; its losses, variables, capture state and step time."""
    import importlib

    import numpy as np

    os.environ.update(MODES[mode])
    module_name = MODELS[model][0]
    step, _ = build_dropout() if module_name is None else importlib.import_module(module_name).build_ngraph(
        1, backend="cupy")
    comp = computation_of(step)
    t = comp.transformer
    if cpu:
        sync = lambda: None  # noqa: E731
    else:
        import cupy

        sync = cupy.cuda.Device().synchronize

    def timed() -> tuple[float, float]:
        start = time.perf_counter()
        result = step()
        loss = float(np.asarray(result[0] if isinstance(result, (tuple, list)) else result))
        sync()
        return time.perf_counter() - start, loss

    losses = [timed()[1] for _ in range(check_steps)]
    # in creation order (the names differ between builds: layer counters run on)
    variables = [(var.name, t.read_variable(var)) for var in t._storage]
    runner = comp._fn
    report = {"losses": losses, "captured": getattr(runner, "captured", None),
              "capture_error": getattr(runner, "capture_error", None),
              "graph_report": t.graph_report() if hasattr(t, "graph_report") else "",
              "gemm_error": getattr(t, "gemm_error", None)}
    if getattr(t, "gemm", None) is not None:
        report.update(gemm_calls=t.gemm.calls, gemm_fallbacks=t.gemm.fallbacks)
    if mode != "cupy" and steps:
        for _ in range(warmup):
            timed()
        times = [timed()[0] for _ in range(steps)]
        report.update(median_ms=1e3 * statistics.median(times), min_ms=1e3 * min(times), steps=steps)
    return report, variables


def relative(a, b) -> float:
    """max |a - b| / max |b| (0 for two zero arrays): a norm-wise relative difference."""
    import numpy as np

    a, b = np.asarray(a, dtype="float64"), np.asarray(b, dtype="float64")
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
    return diff / scale if scale else diff


def child(model: str, args: argparse.Namespace) -> dict:
    """All three modes of one model in this process: the report, with the differences computed here."""
    if args.cpu_smoke:
        install_fakes()
    _, steps, warmup = MODELS[model]
    if args.cpu_smoke:
        steps, warmup = 2, 1
    out: dict = {"model": model, "modes": {}}
    variables = {}
    for mode in MODES:
        start = time.perf_counter()
        report, variables[mode] = run_mode(model, mode, args.check_steps, steps, warmup, args.cpu_smoke)
        report["seconds"] = round(time.perf_counter() - start, 2)
        out["modes"][mode] = report
    for a, b in (("graph", "eager"), ("eager", "cupy")):
        pairs = list(zip(variables[a], variables[b]))
        out[f"{a}_vs_{b}"] = {
            "loss_rel": max(relative(x, y) for x, y in zip(out["modes"][a]["losses"], out["modes"][b]["losses"])),
            "weight_rel": max((relative(x, y) for (_, x), (_, y) in pairs), default=0.0),
            "worst": max(pairs, key=lambda p: relative(p[0][1], p[1][1]))[1][0] if pairs else None,
            "variables": len(pairs), "same_variables": len(variables[a]) == len(variables[b]) and all(
                x.shape == y.shape for (_, x), (_, y) in pairs)}
    losses = out["modes"]["graph"]["losses"]
    out["losses_change"] = len(set(losses)) == len(losses)
    return out


def torch_side(model: str, args: argparse.Namespace, timeout: float) -> dict:
    """``gpu.py``'s PyTorch step for ``model``, in its own process (TF32 off): its JSON report."""
    _, steps, warmup = MODELS[model]
    if args.cpu_smoke:
        steps, warmup = 2, 1
    cmd = [sys.executable, str(HERE / "gpu.py"), "--child", model, "--side", "torch", "--steps", str(steps),
           "--warmup", str(warmup)] + ["--cpu-smoke"] * args.cpu_smoke
    done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(args), cwd=ROOT, timeout=timeout)
    if done.returncode:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-600:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_env(args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if args.cpu_smoke:
        env.update({var: "1" for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NG_THREADS")})
    return env


def run_child(model: str, args: argparse.Namespace, timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", model, "--check-steps", str(args.check_steps)]
    cmd += ["--cpu-smoke"] * args.cpu_smoke
    env = {**child_env(args), "NG_CUDNN": "1" if args.cudnn else "0"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model": model, "error": f"timed out after {timeout:.0f} s"}
    if done.returncode:
        return {"model": model, "error": f"exit {done.returncode}: {done.stderr.strip()[-3000:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def probe(cpu: bool) -> dict:
    """Device and versions, or {"error": why} without a usable GPU."""
    import numpy

    info = {"python": sys.version.split()[0], "numpy": numpy.__version__}
    if cpu:
        install_fakes()
    from ngraph_core.errors import BackendUnavailableError
    from ngraph_core.transformers.cupy import gemm as cuda_gemm
    from ngraph_core.transformers.cupy import load_cupy

    try:
        cupy = load_cupy()
    except BackendUnavailableError as exc:
        return {**info, "error": str(exc)}
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    info.update(device=name.decode() if isinstance(name, bytes) else str(name), cupy=cupy.__version__,
                cuda_runtime=cupy.cuda.runtime.runtimeGetVersion())
    try:
        lib = cuda_gemm.load_library(cupy)
        info["libcublas"] = getattr(lib, "_name", type(lib).__name__)
    except Exception as exc:  # reported, not fatal: the capture errors will say the same
        info["libcublas"] = f"unavailable: {exc}"
    return info


def summary(info: dict, results: list[dict], torch: dict, rtol: float) -> tuple[str, bool]:
    lines = [f"gpu_capture_check on {info.get('device')} (CuPy {info.get('cupy')}, CUDA runtime "
             f"{info.get('cuda_runtime')}, numpy {info.get('numpy')}, libcublas {info.get('libcublas')}, "
             f"convolutions {info.get('convolutions')})", ""]
    lines.append("| model | captured | graph vs eager (loss, weights) | eager vs cupy.matmul | eager ms | graph ms "
                 "| torch ms | graph/torch | GEMMs ours/fallback |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    ok = True
    for r in results:
        model = r["model"]
        if "error" in r:
            ok = False
            lines.append(f"| {model} | ERROR | {r['error'].splitlines()[-1][:200]} | | | | | | |")
            continue
        g, e = r["modes"]["graph"], r["modes"]["eager"]
        ge, ec = r["graph_vs_eager"], r["eager_vs_cupy"]
        equal = ge["loss_rel"] <= rtol and ge["weight_rel"] <= rtol and ge["same_variables"]
        ok = ok and bool(g["captured"]) and equal
        t_ms, g_ms = torch.get(model, {}).get("median_ms"), g.get("median_ms", float("nan"))
        lines.append(f"| {model} | {'yes' if g['captured'] else 'NO'} | {ge['loss_rel']:.1e}, {ge['weight_rel']:.1e} "
                     f"{'ok' if equal else 'DIFFER'} | {ec['loss_rel']:.1e}, {ec['weight_rel']:.1e} "
                     f"| {e.get('median_ms', float('nan')):.3f} | {g_ms:.3f} "
                     f"| {'-' if t_ms is None else f'{t_ms:.3f}'} | {'-' if t_ms is None else f'{g_ms / t_ms:.2f}'} "
                     f"| {g.get('gemm_calls', '-')}/{g.get('gemm_fallbacks', '-')} |")
    lines.append("")
    for r in results:
        if "error" in r:
            lines.append(f"{r['model']}: {r['error']}")
            continue
        g = r["modes"]["graph"]
        lines.append(f"{r['model']}: graph losses {[round(v, 5) for v in g['losses']]}; each step's own: "
                     f"{r['losses_change']}; {g['graph_report']}")
        if g["capture_error"]:
            lines.append(f"{r['model']}: capture_error: {g['capture_error']}")
    for model, t in torch.items():
        if "error" in t:
            lines.append(f"torch {model}: {t['error']}")
    lines.append("")
    lines.append("RESULT: " + ("every model captured, graph equal to eager" if ok else "FAILED (see above)"))
    return "\n".join(lines), ok


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("capture_check_out"), help="folder for the JSON and text")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, among {','.join(MODELS)}")
    parser.add_argument("--check-steps", type=int, default=5, help="steps compared between modes (default 5)")
    parser.add_argument("--rtol", type=float, default=1e-5, help="graph vs eager relative tolerance (default 1e-5)")
    parser.add_argument("--budget", type=float, default=170.0, help="seconds for the whole run (default 170)")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch's timings")
    parser.add_argument("--cudnn", action="store_true", help="convolutions through cuDNN where it runs (NG_CUDNN=1)")
    parser.add_argument("--cpu-smoke", action="store_true", help="run on fake_cuda (NumPy): the plumbing, no GPU")
    parser.add_argument("--child", choices=sorted(MODELS), help=argparse.SUPPRESS)
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown or not args.models:
        parser.error(f"--models: expected names among {','.join(MODELS)}, received {unknown or 'none'}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    if args.probe:
        print(json.dumps(probe(args.cpu_smoke)))
        return 0
    start = time.monotonic()
    left = lambda: args.budget - (time.monotonic() - start)  # noqa: E731
    cmd = [sys.executable, str(Path(__file__).resolve()), "--probe"] + ["--cpu-smoke"] * args.cpu_smoke
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(args), cwd=ROOT, timeout=60)
        info = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else \
            {"error": done.stderr.strip()[-2000:]}
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError) as exc:
        info = {"error": f"probe failed: {exc}"}
    args.out.mkdir(parents=True, exist_ok=True)
    info["convolutions"] = "cuDNN where it runs (NG_CUDNN=1)" if args.cudnn else "im2col + our GEMMs (NG_CUDNN=0)"
    if "error" in info:
        print(f"gpu_capture_check: no GPU: {info['error']} (--cpu-smoke rehearses on NumPy)", file=sys.stderr)
        (args.out / "capture_check.json").write_text(json.dumps({"info": info}, indent=1))
        return 2
    results, torch = [], {}
    for model in args.models:
        if left() < 10:
            results.append({"model": model, "error": "skipped: the time budget ran out (--budget, --models)"})
            continue
        timeout = min(CHILD_TIMEOUT_S[model] * (4 if args.cpu_smoke else 1), left())
        print(f"gpu_capture_check: {model} ({timeout:.0f} s at most, {args.budget - left():.0f} s so far)",
              file=sys.stderr, flush=True)
        results.append(run_child(model, args, timeout))
    for model in args.models:
        if args.no_torch or MODELS[model][0] is None:
            continue
        if left() < 20:
            torch[model] = {"error": "skipped: the time budget ran out"}
            continue
        print(f"gpu_capture_check: torch {model}", file=sys.stderr, flush=True)
        try:
            torch[model] = torch_side(model, args, min(TORCH_TIMEOUT_S * (4 if args.cpu_smoke else 1), left()))
        except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError) as exc:
            torch[model] = {"error": f"{type(exc).__name__}: {exc}"}
    text, ok = summary(info, results, torch, args.rtol)
    payload = {"info": info, "results": results, "torch": torch, "rtol": args.rtol, "ok": ok,
               "seconds": round(time.monotonic() - start, 1), "cpu_smoke": args.cpu_smoke}
    (args.out / "capture_check.json").write_text(json.dumps(payload, indent=1, default=str))
    (args.out / "capture_check.txt").write_text(text + f"\n({payload['seconds']} s)\n")
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
