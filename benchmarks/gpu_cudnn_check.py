"""cuDNN convolutions on the GPU, checked in one short run (``ngraph_core/transformers/cupy/cudnn.py``).

Four sections, each written to ``--out`` as soon as it ends (``cudnn_check.json`` and a text summary
``cudnn_check.txt``), so a run cut short still reports what it did:

1. ``environment``: device, CuPy, torch, the cuDNN frontend and backend versions, or why the frontend
   cannot be used.
2. ``layers``: forward, data gradient and filter gradient of several float32 layers (3x3 pad 1 stride 1
   and 2, 1x1 stride 1 and 2, 7x7 stride 2 pad 3, 3x3 dilation 2; batch 1 and 32; one float64 layer),
   each computed by our CuPy transformer with cuDNN (``NG_CUDNN=1``) and with im2col (``NG_CUDNN=0``),
   against PyTorch's ``conv2d`` and its autograd gradients in float64 on the GPU (and PyTorch float32,
   TF32 off on both sides, as the error a float32 convolution has). Errors are the largest absolute
   difference over the largest absolute reference value; a layer passes at 1e-4. Each layer also says
   which path ran and why (``cuda_cudnn.CHOSEN``).
3. ``timing``: a ResNet-20 layer (16 -> 16 channels, 3x3 pad 1, 32x32, batch 128): forward, and data +
   filter gradients, cuDNN against im2col (and PyTorch), ms per call (median of ``REPEATS`` blocks of
   ``CALLS`` calls, each block ending with a device synchronisation).
4. ``resnet20``: three training steps of ResNet-20 (``resnet_step.py``'s graph, batch 64, its own seeded
   weights) with cuDNN and with im2col: the losses must agree within 1e-4 relative.

``--quick`` (under a minute on an H200): the environment; ``probe``, cuDNN's forward on tiny inputs whose
answers are known, each printing the values it got: a 3x3 map of ones through a 1x1 filter of 2 (all 2s), by
the frontend directly and through our transformer, and a 2 -> 2 channel 1x1 filter given to cuDNN packed
``KCRS`` and, as ``cuda_cudnn`` described it before, by the strides of our ``[Ci, R, S, K]`` array (cuDNN 9.19
read that as packed ``KCRS``: 201, 2010 instead of 21, 2100); four layers (``QUICK_CASES``) in the three
directions; the ResNet-20 layer's timing. No ResNet-20 training.

Never hangs: a watchdog writes what there is and exits (status 3) after ``--budget`` seconds (default
170, 55 with ``--quick``), and ``faulthandler`` kills the process 10 s later whatever it is doing. Exit
status: 0 all checks passed, 1 some failed, 2 no GPU, 3 out of time.

Usage (on the GPU machine, the frontend wheel from ``.whl/``):
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site:. python3 benchmarks/gpu_cudnn_check.py --out $OUT
    PYTHONPATH=/tmp/site:. python3 benchmarks/gpu_cudnn_check.py --quick --out $OUT
    .venv/bin/python benchmarks/gpu_cudnn_check.py --cpu-smoke --out /tmp/check   # the plumbing, on NumPy
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(HERE), str(ROOT)):  # resnet_step (benchmarks/) and our packages (repo root)
    if path not in sys.path:
        sys.path.insert(0, path)

TOLERANCE = 1e-4
CALLS, REPEATS, WARMUP = 10, 5, 3
LAYERS = [  # name, C, K, H (= W), filter, stride, padding, dilation, batch
    ("3x3_s1_p1", 16, 16, 16, 3, 1, 1, 1, (1, 32)),
    ("3x3_s2_p1", 16, 32, 16, 3, 2, 1, 1, (1, 32)),
    ("1x1_s1", 32, 16, 16, 1, 1, 0, 1, (1, 32)),
    ("1x1_s2", 16, 32, 16, 1, 2, 0, 1, (32,)),
    ("7x7_s2_p3", 3, 16, 32, 7, 2, 3, 1, (1, 32)),
    ("3x3_d2_p2", 8, 8, 16, 3, 1, 2, 2, (1, 32)),
]
RESNET_LAYER = ("resnet20_16ch_32x32_b128", 16, 16, 32, 3, 1, 1, 1, 128)
QUICK_CASES = [(LAYERS[0], 32, "float32"), (LAYERS[1], 1, "float32"), (LAYERS[2], 32, "float32"),
               (LAYERS[0], 2, "float64")]
"""``--quick``'s layers: (spec, batch, dtype)."""

REPORT: dict[str, Any] = {"passed": None, "sections": {}}
_OUT: list[Path] = []
_LOCK = threading.Lock()


def write_report() -> None:
    """The JSON report and its text summary under ``--out`` (rewritten after each section)."""
    if not _OUT:
        return
    with _LOCK:
        out = _OUT[0]
        out.mkdir(parents=True, exist_ok=True)
        (out / "cudnn_check.json").write_text(json.dumps(REPORT, indent=1, default=str))
        (out / "cudnn_check.txt").write_text(summary() + "\n")


def summary() -> str:
    s = REPORT["sections"]
    lines = [f"passed: {REPORT['passed']}"]
    env = s.get("environment", {})
    lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    for row in s.get("probe", {}).get("rows", []):
        lines.append(f"probe {row['name']:<22} {row['verdict']} got={row['got']} expected={row['expected']}"
                     + (f" ({row['note']})" if row.get("note") else ""))
    for key in ("error", "traceback"):
        if key in s.get("probe", {}):
            lines.append(f"probe {key}: {s['probe'][key]}")
    for row in s.get("layers", {}).get("rows", []):
        errs = " ".join(f"{k}={v:.1e}" if isinstance(v, float) else f"{k}={v}" for k, v in row["errors"].items())
        lines.append(f"layer {row['name']:<22} {'ok  ' if row['ok'] else 'FAIL'} {errs}")
        for path in row["paths"]:
            lines.append(f"    {path}")
    if "error" in s.get("layers", {}):
        lines.append(f"layers error: {s['layers']['error']}")
    timing = s.get("timing", {})
    for key, value in timing.items():
        lines.append(f"timing {key}: {value}")
    resnet = s.get("resnet20", {})
    for key, value in resnet.items():
        lines.append(f"resnet20 {key}: {value}")
    for key in ("chosen", "failed_plans"):
        for k, v in REPORT.get(key, {}).items():
            lines.append(f"{key}: {k}: {v}")
    return "\n".join(lines)


def watchdog(budget: float) -> None:
    """After ``budget`` seconds: write what there is and leave (status 3); a hard kill 10 s later."""
    faulthandler.dump_traceback_later(budget + 10, exit=True)

    def expire() -> None:
        REPORT["timed_out"] = f"stopped after {budget:.0f} s"
        REPORT["passed"] = False
        write_report()
        print(f"gpu_cudnn_check: out of time after {budget:.0f} s; partial report written", flush=True)
        os._exit(3)

    timer = threading.Timer(budget, expire)
    timer.daemon = True
    timer.start()


class Gpu:
    """The device side: our transformer ("cupy", or "numpy" for --cpu-smoke), PyTorch's device, a sync."""

    def __init__(self, cpu: bool) -> None:
        import numpy as np
        import torch

        self.cpu, self.np, self.torch = cpu, np, torch
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        if cpu:
            self.backend, self.device, self.xp = "numpy", "cpu", np
            self.sync = lambda: None
            return
        from ngraph_core.transformers.cupy import load_cupy

        self.xp = load_cupy()
        self.backend, self.device = "cupy", "cuda"
        self.sync = lambda: (self.xp.cuda.Device().synchronize(), torch.cuda.synchronize())

    def transformer(self, cudnn: bool) -> Any:
        import ngraph_core as ng

        os.environ["NG_CUDNN"] = "1" if cudnn else "0"  # read when each convolution kernel is made
        options = {} if self.cpu else {"device_arrays": True}
        return ng.transformers.make_transformer(self.backend, **options)

    def host(self, value: Any) -> Any:
        return self.np.asarray(value.get() if hasattr(value, "get") else value, dtype=self.np.float64)


def environment(gpu: Gpu) -> dict:
    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": gpu.torch.__version__,
                            "CUPY_TF32": os.environ.get("CUPY_TF32", "unset"),
                            "NG_CUDA_GRAPHS": os.environ.get("NG_CUDA_GRAPHS", "unset"),
                            "NVIDIA_TF32_OVERRIDE": os.environ.get("NVIDIA_TF32_OVERRIDE", "unset")}
    if gpu.cpu:
        return {**info, "device": "cpu (smoke run: no cuDNN)"}
    cupy = gpu.xp
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    info.update(device=name.decode() if isinstance(name, bytes) else str(name), cupy=cupy.__version__,
                cuda_runtime=cupy.cuda.runtime.runtimeGetVersion(), torch_cudnn=gpu.torch.backends.cudnn.version())
    from ngraph_core.transformers.cupy import cudnn as cuda_cudnn

    front, why = cuda_cudnn.load_frontend()
    if front is None:
        info["frontend"] = f"UNUSABLE: {why}"
    else:
        module = front.module
        info["frontend"] = getattr(module, "__version__", "?")
        try:
            info["cudnn_backend"] = module.backend_version_string()
        except Exception as exc:
            info["cudnn_backend"] = f"? ({type(exc).__name__}: {exc})"
    return info


def conv_graph(c: int, k: int, h: int, f: int, stride: int, pad: int, dil: int, n: int, dtype: str) -> tuple:
    """Placeholders x [C, H, W, N], w [C, R, S, K], dy [K, Ho, Wo, N] and ops y, dx, dw."""
    import ngraph_core as ng
    from ngraph_core.ir import OpType, make

    ax = lambda length, name: ng.make_axis(length, name)  # noqa: E731
    x = ng.placeholder([ax(c, "C"), ax(h, "H"), ax(h, "W"), ax(n, "N")], dtype=dtype, name="x")
    w = ng.placeholder([ax(c, "Ci"), ax(f, "R"), ax(f, "S"), ax(k, "K")], dtype=dtype, name="w")
    y = ng.convolution(x, w, strides=stride, padding=pad, dilation=dil)
    dy = ng.placeholder(y.axes, dtype=dtype, name="dy")
    dx = make(OpType.CONV_BPROP_DATA, [dy, w], arg=y.arg, axes=x.axes)
    dw = make(OpType.CONV_BPROP_FILTER, [x, dy], arg=y.arg, axes=w.axes)
    return x, w, dy, y, dx, dw


def torch_reference(gpu: Gpu, xs: Any, ws: Any, dys: Any, stride: int, pad: int, dil: int, dtype: Any) -> list:
    """PyTorch's y, dx, dw in our layouts ([K, Ho, Wo, N], [C, H, W, N], [C, R, S, K]), as float64 NumPy."""
    torch, np = gpu.torch, gpu.np
    t = lambda a: torch.tensor(np.ascontiguousarray(np.moveaxis(a, -1, 0)), dtype=dtype, device=gpu.device)  # noqa: E731
    x, w, dy = t(xs), t(ws), t(dys)
    x.requires_grad_(True)
    w.requires_grad_(True)
    y = torch.nn.functional.conv2d(x, w, stride=stride, padding=pad, dilation=dil)
    y.backward(dy)
    return [np.moveaxis(v.detach().cpu().double().numpy(), 0, -1) for v in (y, x.grad, w.grad)]


def address(a: Any) -> int:
    """A CuPy array's device pointer (a NumPy array's host address in a smoke run, for the stand-in frontend)."""
    return a.data.ptr if hasattr(a.data, "ptr") else a.__array_interface__["data"][0]


def probe_frontend(gpu: Gpu) -> tuple[Any, str]:
    """``(cuda_cudnn.Frontend, what it is)``: the real frontend on the GPU, the tests' stand-in in a smoke run."""
    from ngraph_core.transformers.cupy import cudnn as cuda_cudnn

    if gpu.cpu:
        sys.path.insert(0, str(ROOT / "tests" / "ngraph_core" / "transformers"))
        from fake_cudnn import FakeCudnn

        return cuda_cudnn.Frontend(FakeCudnn()), "the tests' stand-in (fake_cudnn.py)"
    front, why = cuda_cudnn.load_frontend()
    if front is None:
        raise RuntimeError(why)
    return front, f"nvidia-cudnn-frontend {getattr(front.module, '__version__', '?')}"


def direct_fprop(gpu: Gpu, front: Any, x: Any, w: Any, w_layout: tuple, y: Any) -> None:
    """``y = conv(x, w)`` (1x1, no padding, float32) through the frontend's graph API alone: ``x`` and ``y``
    described by their own strides (NCHW arrays), ``w`` by ``w_layout`` (dims ``[K, C, R, S]``, element
    strides); the uids read after the build, int pointers, the handle on CuPy's current stream."""
    from ngraph_core.transformers.cupy import cudnn as cuda_cudnn

    cudnn, xp = front.module, gpu.xp
    f32 = cudnn.data_type.FLOAT
    stream = None if gpu.cpu else cuda_cudnn.current_stream(xp)
    handle = front.handle(0, stream)
    elements = lambda a: [s // a.itemsize for s in a.strides]  # noqa: E731
    graph = cudnn.pygraph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
    xt = graph.tensor(name="X", dim=list(x.shape), stride=elements(x), data_type=f32)
    wt = graph.tensor(name="W", dim=list(w_layout[0]), stride=list(w_layout[1]), data_type=f32)
    yt = graph.conv_fprop(image=xt, weight=wt, pre_padding=[0, 0], post_padding=[0, 0], stride=[1, 1],
                          dilation=[1, 1], compute_data_type=f32)
    yt.set_output(True).set_dim(list(y.shape)).set_stride(elements(y)).set_data_type(f32)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()
    workspace = xp.empty(max(int(graph.get_workspace_size()), 1), dtype=xp.uint8)
    graph.execute({xt.get_uid(): address(x), wt.get_uid(): address(w), yt.get_uid(): address(y)}, address(workspace),
                  handle=handle)
    gpu.sync()


def probe(gpu: Gpu) -> dict:
    """cuDNN's forward on inputs whose answers are known, each row printing the values it got (see the module
    docstring); ``ok`` when every row but the old-description one matches."""
    import ngraph_core as ng
    from ngraph_core.transformers.cupy import cudnn as cuda_cudnn

    np, xp = gpu.np, gpu.xp
    rows: list[dict] = []

    def row(name: str, run: Any, expected: list, note: str = "", required: bool = True) -> None:
        try:
            got = [round(float(v), 4) for v in run()]
            verdict = "ok" if np.allclose(got, expected) else ("differs" if not required else "FAIL")
        except Exception as exc:
            got, verdict = f"ERROR {type(exc).__name__}: {str(exc)[:300]}", "FAIL" if required else "error"
        rows.append({"name": name, "verdict": verdict, "got": got, "expected": expected, "note": note,
                     "required": required})
        print(f"  probe {name}: {verdict} got={got} expected={expected}" + (f" ({note})" if note else ""), flush=True)

    front, what = probe_frontend(gpu)

    def ones_by_two() -> list:
        x = xp.ones((1, 1, 3, 3), dtype=xp.float32)
        w = xp.full((1, 1, 1, 1), 2.0, dtype=xp.float32)
        y = xp.full((1, 1, 3, 3), -1.0, dtype=xp.float32)
        direct_fprop(gpu, front, x, w, ((1, 1, 1, 1), (1, 1, 1, 1)), y)
        return gpu.host(y).ravel().tolist()

    row("ones3x3_by_1x1_of_2", ones_by_two, [2.0] * 9, f"fprop by {what}")
    # 2 -> 2 channels, 1x1: W[k, c] = [[1, 10], [100, 1000]], x[c] = c + 1 -> y[k] = 21, 2100
    w_kc = np.array([[1.0, 10.0], [100.0, 1000.0]], dtype=np.float32)
    for name, packed_filter in (("filter_packed_kcrs", True), ("filter_by_crsk_strides", False)):
        def layout_probe(packed_filter: bool = packed_filter) -> list:
            x = xp.asarray(np.broadcast_to(np.array([1.0, 2.0], np.float32)[None, :, None, None], (1, 2, 2, 2)).copy())
            y = xp.full((1, 2, 2, 2), -1.0, dtype=xp.float32)
            if packed_filter:  # [K, C, 1, 1] row-major
                w, layout = xp.asarray(w_kc.reshape(2, 2, 1, 1)), ((2, 2, 1, 1), (2, 1, 1, 1))
            else:  # our [Ci, R, S, K] array described as [K, Ci, R, S] by its strides (cuda_cudnn before the fix)
                w = xp.asarray(np.ascontiguousarray(w_kc.T.reshape(2, 1, 1, 2)))
                layout = cuda_cudnn.describe(w.shape, w.strides, 4, cuda_cudnn.filter_order(4))
            direct_fprop(gpu, front, x, w, layout, y)
            return gpu.host(y)[0, :, 0, 0].tolist()

        note = "201, 2010: cuDNN read the filter as packed KCRS, ignoring its strides" if not packed_filter else ""
        row(name, layout_probe, [21.0, 2100.0], note, required=packed_filter)

    def through_ngraph() -> list:
        ax = lambda length, axis: ng.make_axis(length, axis)  # noqa: E731
        x = ng.placeholder([ax(1, "C"), ax(3, "H"), ax(3, "W"), ax(1, "N")], dtype="float32", name="x")
        w = ng.placeholder([ax(1, "Ci"), ax(1, "R"), ax(1, "S"), ax(1, "K")], dtype="float32", name="w")
        with gpu.transformer(True) as t:
            f = t.computation(ng.convolution(x, w), x, w)
            y = f(xp.ones((1, 3, 3, 1), dtype=xp.float32), xp.full((1, 1, 1, 1), 2.0, dtype=xp.float32))
            return gpu.host(y).ravel().tolist()

    before = dict(cuda_cudnn.CHOSEN)
    row("ones3x3_by_1x1_of_2_ngraph", through_ngraph, [2.0] * 9, "our transformer, NG_CUDNN=1")
    ran = [f"{k}: {v}" for k, v in cuda_cudnn.CHOSEN.items() if before.get(k) != v]
    if ran:
        rows[-1]["note"] += f"; {'; '.join(ran)}"
    return {"rows": rows, "ok": all(r["verdict"] == "ok" for r in rows if r["required"])}


def relative(a: Any, b: Any) -> float:
    np = __import__("numpy")
    scale = float(np.max(np.abs(b))) or 1.0
    return float(np.max(np.abs(a - b))) / scale


def check_layer(gpu: Gpu, spec: tuple, n: int, dtype: str) -> dict:
    from ngraph_core.transformers.cupy import cudnn as cuda_cudnn

    name, c, k, h, f, stride, pad, dil = spec[:8]
    np = gpu.np
    rng = np.random.default_rng(0)
    x, w, dy, y, dx, dw = conv_graph(c, k, h, f, stride, pad, dil, n, dtype)
    xs, ws, dys = (rng.standard_normal(tuple(a.length for a in op.axes)).astype(dtype) for op in (x, w, dy))
    results, paths = {}, []
    for path in ("cudnn", "im2col"):
        before = dict(cuda_cudnn.CHOSEN)
        with gpu.transformer(path == "cudnn") as t:
            f_all = t.computation([y, dx, dw], x, w, dy)
            feed = [gpu.xp.asarray(a) for a in (xs, ws, dys)]
            results[path] = [gpu.host(v) for v in f_all(*feed)]
        if path == "cudnn":  # what ran each kernel (the im2col run then records NG_CUDNN=0 for the same layers)
            paths = [f"{key}: {value}" for key, value in cuda_cudnn.CHOSEN.items() if before.get(key) != value]
    ref64 = torch_reference(gpu, xs, ws, dys, stride, pad, dil, gpu.torch.float64)
    ref32 = torch_reference(gpu, xs, ws, dys, stride, pad, dil, getattr(gpu.torch, dtype))
    errors, ok = {}, True
    tolerance = TOLERANCE if dtype == "float32" else 1e-10
    for i, what in enumerate(("y", "dx", "dw")):
        for path in ("cudnn", "im2col"):
            errors[f"{path}_{what}"] = e = relative(results[path][i], ref64[i])
            ok &= e <= tolerance
        errors[f"cudnn_vs_im2col_{what}"] = relative(results["cudnn"][i], results["im2col"][i])
        errors[f"torch{dtype[-2:]}_{what}"] = relative(ref32[i], ref64[i])
    if not gpu.cpu and dtype == "float32":  # float32 layers must run on cuDNN (float64: whatever builds)
        ok &= len(paths) == 3 and all(": cudnn" in p for p in paths)
    return {"name": f"{name}_n{n}_{dtype}", "ok": bool(ok), "errors": errors, "paths": paths}


def layers(gpu: Gpu, quick: bool = False) -> dict:
    rows = []
    cases = QUICK_CASES if quick else [(spec, n, "float32") for spec in LAYERS for n in spec[8]] + \
        [(LAYERS[0], 2, "float64")]
    for spec, n, dtype in cases:
        try:
            row = check_layer(gpu, spec, n, dtype)
        except Exception as exc:
            row = {"name": f"{spec[0]}_n{n}_{dtype}", "ok": False, "errors": {},
                   "paths": [f"ERROR {type(exc).__name__}: {exc}", *traceback.format_exc().splitlines()[-6:]]}
        rows.append(row)
        print(f"  layer {row['name']}: {'ok' if row['ok'] else 'FAIL'}", flush=True)
        REPORT["sections"]["layers"] = {"rows": rows}
        write_report()
    return {"rows": rows, "ok": all(r["ok"] for r in rows)}


def timed(gpu: Gpu, fn: Any, calls: int = CALLS) -> float:
    """ms per call: the median over ``REPEATS`` blocks of ``calls`` calls, each ending with a synchronisation."""
    for _ in range(WARMUP):
        fn()
    gpu.sync()
    blocks = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        gpu.sync()
        blocks.append((time.perf_counter() - start) * 1e3 / calls)
    return round(statistics.median(blocks), 4)


def timing(gpu: Gpu, smoke: bool) -> dict:
    name, c, k, h, f, stride, pad, dil, n = RESNET_LAYER
    if smoke:
        n = 4
    np, torch = gpu.np, gpu.torch
    rng = np.random.default_rng(0)
    x, w, dy, y, dx, dw = conv_graph(c, k, h, f, stride, pad, dil, n, "float32")
    arrays = [rng.standard_normal(tuple(a.length for a in op.axes)).astype("float32") for op in (x, w, dy)]
    result: dict[str, Any] = {"layer": f"{name} (batch {n})"}
    for path in ("cudnn", "im2col"):
        with gpu.transformer(path == "cudnn") as t:
            forward = t.computation(y, x, w)
            backward = t.computation([dx, dw], x, w, dy)
            xs, ws, dys = (gpu.xp.asarray(a) for a in arrays)
            result[f"{path}_forward_ms"] = timed(gpu, lambda: forward(xs, ws))
            result[f"{path}_backward_ms"] = timed(gpu, lambda: backward(xs, ws, dys))
            if hasattr(t, "graph_report"):  # whether the plans replayed as CUDA graphs (cupy.py's GraphRunner)
                result[f"{path}_graphs"] = t.graph_report().replace("\n", "; ")
    xt, wt, dyt = (torch.tensor(np.ascontiguousarray(np.moveaxis(a, -1, 0)), device=gpu.device) for a in arrays)
    xt.requires_grad_(True)
    wt.requires_grad_(True)
    conv = lambda: torch.nn.functional.conv2d(xt, wt, padding=pad)  # noqa: E731
    result["torch_forward_ms"] = timed(gpu, conv)
    out = conv()
    result["torch_backward_ms"] = timed(gpu, lambda: torch.autograd.grad(out, (xt, wt), dyt, retain_graph=True))
    for what in ("forward", "backward"):
        result[f"im2col_over_cudnn_{what}"] = round(result[f"im2col_{what}_ms"] / result[f"cudnn_{what}_ms"], 2)
    return result


def resnet20(gpu: Gpu, smoke: bool) -> dict:
    os.environ["RESNET_STEP_OWN_WEIGHTS"] = "1"  # the same seeded weights for both paths, no torch subprocess
    import resnet_step

    from ngraph_core.transformers.cupy import cudnn as cuda_cudnn

    losses, times, not_cudnn = {}, {}, []
    for path in ("cudnn", "im2col"):
        os.environ["NG_CUDNN"] = "1" if path == "cudnn" else "0"
        before = dict(cuda_cudnn.CHOSEN)
        step, _ = resnet_step.build_ngraph(1, backend=gpu.backend)
        values, seconds = [], []
        for _ in range(3 if smoke else 6):  # the second call is captured as a CUDA graph where cupy.py does that
            start = time.perf_counter()
            values.append(float(step()))
            gpu.sync()
            seconds.append(time.perf_counter() - start)
        losses[path], times[path] = values[:3], round(1e3 * statistics.median(seconds[3:] or seconds), 2)
        if path == "cudnn" and not smoke:  # every convolution of the step on cuDNN (also under capture)
            not_cudnn = [f"{k}: {v}" for k, v in cuda_cudnn.CHOSEN.items()
                         if before.get(k) != v and not v.startswith("cudnn")]
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses["cudnn"], losses["im2col"]))
    return {"losses_cudnn": losses["cudnn"], "losses_im2col": losses["im2col"], "max_relative": worst,
            "ok": worst <= TOLERANCE and not not_cudnn, "not_on_cudnn": not_cudnn, "step_ms_cudnn": times["cudnn"],
            "step_ms_im2col": times["im2col"], "batch": resnet_step.BATCH}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for cudnn_check.json and cudnn_check.txt")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds before the watchdog stops the run (default 170, 55 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="environment, probe, four layers and the layer timing (under a minute)")
    parser.add_argument("--cpu-smoke", action="store_true", help="the plumbing on NumPy and torch CPU (no cuDNN)")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: layers,timing,resnet20")
    args = parser.parse_args(argv)
    _OUT.append(Path(args.out))
    watchdog(args.budget if args.budget is not None else 55.0 if args.quick else 170.0)
    began = time.perf_counter()
    try:
        gpu = Gpu(args.cpu_smoke)
    except Exception as exc:
        REPORT["sections"]["environment"] = {"error": f"{type(exc).__name__}: {exc}"}
        REPORT["passed"] = False
        write_report()
        print(f"gpu_cudnn_check: no GPU: {exc}", flush=True)
        return 2
    skip = set(filter(None, args.skip.split(",")))
    sections = [("environment", lambda: environment(gpu)), ("layers", lambda: layers(gpu)),
                ("timing", lambda: timing(gpu, args.cpu_smoke)), ("resnet20", lambda: resnet20(gpu, args.cpu_smoke))]
    if args.quick:
        sections = [sections[0], ("probe", lambda: probe(gpu)), ("layers", lambda: layers(gpu, quick=True)),
                    sections[2]]
        REPORT["mode"] = "quick"
    passed = True
    for name, run in sections:
        if name in skip:
            continue
        start = time.perf_counter()
        print(f"gpu_cudnn_check: {name}...", flush=True)
        try:
            result = run()
        except Exception as exc:
            result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc().splitlines()[-8:],
                      "ok": False}
        result["seconds"] = round(time.perf_counter() - start, 1)
        passed &= result.get("ok", True) is not False
        REPORT["sections"][name] = result
        from ngraph_core.transformers.cupy import cudnn as cuda_cudnn

        REPORT["chosen"] = dict(cuda_cudnn.CHOSEN)
        REPORT["failed_plans"] = {f"{key[0].direction} {key[2]} {key[1]}": value
                                  for key, value in cuda_cudnn.PLANS.items() if isinstance(value, str)}
        write_report()
        print(f"gpu_cudnn_check: {name} done in {result['seconds']} s: "
              f"{json.dumps({k: v for k, v in result.items() if k != 'rows'}, default=str)[:600]}", flush=True)
    REPORT["passed"] = passed
    REPORT["seconds"] = round(time.perf_counter() - began, 1)
    write_report()
    print(summary(), flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown: CUDA libraries' atexit work cannot hold the run
