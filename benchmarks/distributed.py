"""Data-parallel training over MPI: scaling 1 -> 2 ranks, allreduce bandwidth, and a cluster projection.

Three measurements, each configuration in its own ``mpiexec`` launch (one thread per rank:
``OMP_NUM_THREADS=1`` etc.), alternated for ``--pairs`` rounds so the drift of a shared machine
falls on both sides of every ratio:

a. **Scaling efficiency.** ``Model.fit`` with ``neon.distributed.DistributedOptimizer`` on a
   sharded synthetic set, per-rank batch fixed (MLP 784-512-512-10 at 128, ResNet-20 at 32),
   on 1 rank and on 2 ranks. A step's time is the gap between consecutive ``on_minibatch_end``
   calls (data, forward, backward, allreduce, update), the median over the timed steps on rank 0.
   Throughput = ranks x batch / step time; efficiency = throughput(2) / (2 x throughput(1)),
   the median of the paired ratios. A third configuration, 2 ranks with the plain optimizer (no
   gradient allreduce; ``fit`` still averages each step's cost), separates what the second rank
   costs by sharing the machine (cores, memory bandwidth, other users' load) from communication.
b. **Allreduce bandwidth** for float32 sums of 4 KiB .. 64 MiB on 2 ranks: ``Communicator.allreduce_``
   (ours, in place, polled waits), the graph ``ALLREDUCE`` op compiled into a computation (its
   result copied out as a NumPy array), and mpi4py's raw ``Comm.Allreduce(IN_PLACE)``. Each method
   sweeps every size in its own launch; the table gives the median time per call and the
   algorithm bandwidth ``bytes / time``.
c. **On paper: a cluster.** The ring-allreduce cost ``t(p) = 2 (p - 1) / p * n / B + 2 (p - 1) * alpha``
   for the gradient bytes ``n`` of each model and the 1-rank compute time per step measured in (a),
   on 10 GbE (B ~ 1.1 GB/s, alpha 20 us) and 100 Gb/s InfiniBand (B ~ 11 GB/s, alpha 5 us), for
   8-64 nodes of one rank each: efficiency without overlap ``c / (c + t)`` and with perfect
   overlap of communication and backward ``c / max(c, t)``.

Usage:
    .venv/bin/python benchmarks/distributed.py --pairs 3          # everything, a markdown report
    .venv/bin/python benchmarks/distributed.py --only bandwidth --pairs 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
MODELS = {"mlp": 128, "resnet20": 32}  # per-rank batch
SIZES = [4 << 10 << 2 * k for k in range(8)]  # 4 KiB, 16 KiB, ... 64 MiB
METHODS = ("ours", "graph", "mpi4py")
NETWORKS = {"10 GbE": (1.1e9, 20e-6), "100 Gb IB": (11e9, 5e-6)}  # bandwidth B (bytes/s), latency alpha (s)
NODES = (8, 16, 32, 64)


# -- children: run under mpiexec, rank 0 prints one JSON line ---------------------------------------------
def child_scaling(model_name: str, warmup: int, steps: int, reduce: bool = True) -> None:
    import numpy as np

    from neon import distributed
    from neon.callbacks import Callback
    from neon.costs import CrossEntropyMulti
    from neon.data import ArrayIterator
    from neon.optimizers import GradientDescentMomentum

    comm = distributed.init()
    batch = MODELS[model_name]
    model, shape = build_model(model_name)
    rng = np.random.default_rng(0)
    ndata = comm.size * batch * (warmup + steps)
    X = rng.standard_normal((ndata, *shape)).astype(np.float32)
    train = distributed.shard(ArrayIterator(X, rng.integers(0, 10, ndata), nclass=10, batch_size=batch,
                                            lshape=shape, shuffle=True, seed=0))

    class StepClock(Callback):
        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict) -> None:
            self.ends.append(time.perf_counter())

    clock = StepClock()
    optimizer = GradientDescentMomentum(0.01, momentum_coef=0.9)
    if reduce:
        optimizer = distributed.DistributedOptimizer(optimizer)
    model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=1, callbacks=[clock], progress=False)
    gaps = np.diff(clock.ends)[warmup - 1:]  # the first warmup steps compile and warm the caches
    params = sum(int(np.prod([a.length for a in v.axes])) for v in model.layers.trainable_variables)
    if comm.rank == 0:
        median = float(np.median(gaps))
        print(json.dumps({"model": model_name, "ranks": comm.size, "batch": batch, "step_ms": 1e3 * median,
                          "samples_per_s": comm.size * batch / median, "params": params}))


def build_model(name: str):
    """The model and one sample's shape: neon's MNIST MLP, or ResNet-20 for CIFAR-10 (no dropout)."""
    from neon.activations import Rectlin, Softmax
    from neon.initializers import Constant, GlorotUniform
    from neon.layers import Affine
    from neon.model import Model

    if name == "mlp":
        return Model([Affine(512, GlorotUniform(seed=0), bias=Constant(0.0), activation=Rectlin()),
                      Affine(512, GlorotUniform(seed=1), bias=Constant(0.0), activation=Rectlin()),
                      Affine(10, GlorotUniform(seed=2), bias=Constant(0.0), activation=Softmax())]), (784,)
    sys.path.insert(0, str(HERE.parent))
    from model_zoo.resnet_cifar10 import resnet_cifar10

    return Model(resnet_cifar10(20, seed=0)), (3, 32, 32)


def child_bandwidth(method: str, repeats: int) -> None:
    import numpy as np
    from mpi4py import MPI

    import ngraph_core as ng

    comm = ng.distributed.init()
    results = []
    for nbytes in SIZES:
        n = nbytes // 4
        buffer = np.ones(n, dtype=np.float32)
        if method == "ours":
            call = lambda: comm.allreduce_(buffer, op="sum")
        elif method == "mpi4py":
            call = lambda: MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
        else:
            x = ng.variable([ng.make_axis(n, "F")], initial_value=1.0, name="x", trainable=False)
            transformer = ng.transformers.make_transformer()
            call = transformer.computation(ng.distributed.allreduce(x, op="sum"))
        count = max(3, min(repeats, (64 << 20) // nbytes))  # fewer repeats for the big messages
        for _ in range(2):
            call()
        times = []
        for _ in range(count):
            comm.barrier()
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        results.append({"bytes": nbytes, "ms": 1e3 * statistics.median(times)})
    if comm.rank == 0:
        print(json.dumps({"method": method, "results": results}))


# -- the driver ------------------------------------------------------------------------------------------
def launch(ranks: int, *args: str) -> dict:
    env = dict(os.environ, **dict.fromkeys(THREAD_VARS, "1"))
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # as benchmarks/run.py: the kernel a fresh shell gets
        env.pop(var, None)
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, str(Path(__file__).resolve()), "--child", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE.parent, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_scaling(pairs: int, warmup: int, steps: int) -> dict:
    out = {}
    for name in MODELS:
        one, two, plain, ratios, plain_ratios = [], [], [], [], []
        for k in range(pairs):
            a = launch(1, "scaling", name, str(warmup), str(steps))
            b = launch(2, "scaling", name, str(warmup), str(steps))
            c = launch(2, "scaling", name, str(warmup), str(steps), "plain")
            one.append(a)
            two.append(b)
            plain.append(c)
            ratios.append(b["samples_per_s"] / (2 * a["samples_per_s"]))
            plain_ratios.append(c["samples_per_s"] / (2 * a["samples_per_s"]))
            print(f"  {name} round {k + 1}/{pairs}: 1 rank {a['step_ms']:.1f} ms, 2 ranks {b['step_ms']:.1f} ms "
                  f"(no allreduce {c['step_ms']:.1f} ms), efficiency {ratios[-1]:.2f} ({plain_ratios[-1]:.2f})",
                  file=sys.stderr)
        out[name] = {"batch": MODELS[name], "params": one[0]["params"],
                     "step1_ms": statistics.median(r["step_ms"] for r in one),
                     "step2_ms": statistics.median(r["step_ms"] for r in two),
                     "plain_ms": statistics.median(r["step_ms"] for r in plain),
                     "plain_eff": statistics.median(plain_ratios),
                     "thr1": statistics.median(r["samples_per_s"] for r in one),
                     "thr2": statistics.median(r["samples_per_s"] for r in two),
                     "eff": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "pairs": pairs}
    return out


def measure_bandwidth(pairs: int, repeats: int) -> dict:
    runs: dict[str, list[dict]] = {m: [] for m in METHODS}
    for k in range(pairs):
        for method in METHODS:
            runs[method].append(launch(2, "bandwidth", method, str(repeats)))
        print(f"  bandwidth round {k + 1}/{pairs} done", file=sys.stderr)
    return {m: [statistics.median(r["results"][i]["ms"] for r in runs[m]) for i in range(len(SIZES))]
            for m in METHODS}


def ring_seconds(p: int, nbytes: float, bandwidth: float, alpha: float) -> float:
    """Ring allreduce of ``nbytes`` over ``p`` ranks: ``2 (p - 1) / p * n / B + 2 (p - 1) * alpha``."""
    return 2 * (p - 1) / p * nbytes / bandwidth + 2 * (p - 1) * alpha


def report(scaling: dict | None, bandwidth: dict | None) -> str:
    lines = []
    if scaling:
        lines += ["### Scaling, 1 -> 2 ranks (one thread each, per-rank batch fixed)", "",
                  "| model | batch/rank | params | 1 rank ms/step | 2 ranks ms/step | 1 rank samples/s | "
                  "2 ranks samples/s | efficiency (median of pairs, range) | 2 ranks, no allreduce: ms/step, "
                  "efficiency | pairs |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for name, r in scaling.items():
            lines.append(f"| {name} | {r['batch']} | {r['params']:,} | {r['step1_ms']:.1f} | {r['step2_ms']:.1f} | "
                         f"{r['thr1']:.0f} | {r['thr2']:.0f} | {r['eff']:.2f} ({r['low']:.2f}-{r['high']:.2f}) | "
                         f"{r['plain_ms']:.1f}, {r['plain_eff']:.2f} | {r['pairs']} |")
        lines.append("")
    if bandwidth:
        lines += ["### Allreduce (float32 sum), 2 ranks: median ms per call and bandwidth bytes/time", "",
                  "| message | ours ms | graph op ms | mpi4py ms | ours GB/s | graph GB/s | mpi4py GB/s "
                  "| ours/mpi4py |",
                  "|---|---|---|---|---|---|---|---|"]
        for i, nbytes in enumerate(SIZES):
            ms = [bandwidth[m][i] for m in METHODS]
            gbs = [nbytes / (t * 1e-3) / 1e9 for t in ms]
            size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
            lines.append(f"| {size} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[2]:.3f} | {gbs[0]:.2f} | {gbs[1]:.2f} | "
                         f"{gbs[2]:.2f} | {ms[0] / ms[2]:.2f} |")
        lines.append("")
    if scaling:
        lines += ["### On paper: ring allreduce on a cluster (one rank per node, 1-rank compute time above)", "",
                  "| model | network | grad MB | compute ms | " + " | ".join(f"{p} nodes: comm ms, eff (overlap)"
                                                                         for p in NODES) + " |",
                  "|---|---|---|---|" + "---|" * len(NODES)]
        for name, r in scaling.items():
            nbytes, compute = 4.0 * r["params"], r["step1_ms"] * 1e-3
            for net, (bandwidth_bps, alpha) in NETWORKS.items():
                cells = []
                for p in NODES:
                    t = ring_seconds(p, nbytes, bandwidth_bps, alpha)
                    cells.append(f"{1e3 * t:.1f}, {compute / (compute + t):.2f} ({compute / max(compute, t):.2f})")
                head = f"| {name} | {net} | {nbytes / 1e6:.2f} | {1e3 * compute:.0f} | "
                lines.append(head + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in subprocess.run(
            ["lscpu"], capture_output=True, text=True).stdout.splitlines() if line.startswith("Model name"))
    except (StopIteration, OSError):
        cpu = platform.processor() or "unknown CPU"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {when}"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        if kind == "scaling":
            child_scaling(rest[0], int(rest[1]), int(rest[2]), reduce=rest[3:] != ["plain"])
        else:
            child_bandwidth(rest[0], int(rest[1]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="alternating rounds per configuration (default 3)")
    parser.add_argument("--only", choices=("scaling", "bandwidth"), default=None)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per process (default 5)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per process (default 20)")
    parser.add_argument("--repeats", type=int, default=50, help="allreduce calls timed per size (fewer when big)")
    args = parser.parse_args()
    scaling = measure_scaling(args.pairs, args.warmup, args.steps) if args.only != "bandwidth" else None
    bandwidth = measure_bandwidth(args.pairs, args.repeats) if args.only != "scaling" else None
    print(f"machine: {machine()}\n")
    print(report(scaling, bandwidth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
