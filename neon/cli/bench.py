"""``bench``: throughput and latency of a model served by ``ng.inference``, like OpenVINO's ``benchmark_app``.

The model (a ``save_params`` checkpoint, a graph document, or a deployable file from
``CompiledModel.save``) is compiled for inference at ``--batch`` and ``--precision``, then
``--requests`` inference requests (``AsyncInferQueue``, one thread each) are kept busy on
random inputs for ``--time`` seconds. It prints the iteration count, the duration, the latency
percentiles of one request (median, average, p90, p99, min, max) and the throughput in frames
(samples) per second. ``-pc`` then runs a profiled executor and prints the per-layer
performance counters (``ng.inference.format_counters``).

**The batch.** A model is built for ``--batch`` (default 1). A graph document (``ngraph
convert``'s output) and a deployable file have their shapes fixed: their batch is the length of
their inputs' batch axis ``N`` (a graph converted with ``--dim N=8`` is batch 8; a graph without
an ``N`` axis counts one sample per request), and a ``--batch`` that differs is refused. The
throughput is ``batch`` samples per request: requests completed x batch / duration.

**Generation.** ``--generate N`` measures a causal language model (a ``char_transformer``
checkpoint) sampling ``N`` tokens at a time with its key/value cache, in tokens per second
(``bench_generation.py``; ``--compare`` adds the rate without the cache).

Example:
    $ ngraph bench out/mnist_mlp.h5 --batch 1 --requests 4 --time 10
    $ ngraph bench mnist_int8.ngi --time 5 -pc
    $ ngraph bench out/char_transformer/char_transformer.h5 --generate 200 --compare
"""

from __future__ import annotations

import argparse
import math
import statistics
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from ..model import Model
from .bench_generation import run_generation_bench
from .common import CommandError, UsageError, positive_int, print_counters, random_input
from .sources import load_source

__all__ = ["BenchResult", "add_bench_arguments", "bench", "format_bench", "graph_batch", "load_compiled", "run_bench"]

PC_RUNS = 20  # profiled runs behind -pc: enough for steady per-op times, short for a big model


def positive_seconds(text: str) -> float:
    """argparse ``type=`` for ``--time``: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number > 0), received {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds (a number > 0), received {text!r}")
    return value


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``bench``: the model file, ``--batch``, ``--requests``, ``--time``, ``--precision``, ``-pc``,
    and ``--generate``, ``--overflow``, ``--compare`` for a language model's tokens per second."""
    parser.add_argument("path", help="a model (.h5 from Model.save_params), a graph (.json from ng.serialize) or a "
                                     "deployable file (CompiledModel.save)")
    parser.add_argument("--batch", "-b", type=positive_int, default=None,
                        help="samples per request (default 1; a graph document or a deployable file has its own: "
                             "its inputs' N axis)")
    parser.add_argument("--requests", "-nireq", type=positive_int, default=4,
                        help="inference requests running at once, one thread each (default 4)")
    parser.add_argument("--time", "-t", type=positive_seconds, default=10.0,
                        help="seconds to keep the requests busy (default 10)")
    parser.add_argument("--precision", choices=ng.inference.PRECISIONS, default=None,
                        help="weights' precision (default fp32; a deployable file keeps its own)")
    parser.add_argument("--calibration", default=None, metavar="NPY",
                        help="int8: a .npy file of samples, batch first, for the activation ranges (default: "
                             "random normal samples, which makes int8 timings right and accuracy meaningless)")
    parser.add_argument("-pc", "--perf-counts", dest="pc", action="store_true",
                        help="print per-layer performance counters (time, calls, bytes) after the run")
    parser.add_argument("--generate", type=positive_int, default=None, metavar="N",
                        help="a causal language model (char_transformer.h5): tokens per second generating runs of N "
                             "tokens with the key/value cache")
    parser.add_argument("--overflow", choices=ng.inference.OVERFLOWS, default="shift",
                        help="--generate past the model's context: prefill again from the last half (shift, default), "
                             "re-run the window per token (window) or stop (error)")
    parser.add_argument("--compare", action="store_true",
                        help="--generate: also time one run without the cache (the window re-run per token)")


def load_compiled(path: str | Path, batch: int | None = None, precision: str | None = None,
                  calibration: str | Path | None = None) -> ng.inference.CompiledModel:
    """The compiled model ``bench`` runs: a deployable file as saved, a model or graph compiled now.

    Args:
        path: a deployable file (a zip from ``CompiledModel.save``), a ``.h5`` model or a ``.json`` graph.
        batch: the batch to compile for (default 1); must match a deployable file's or a graph
            document's (the length of its inputs' batch axis ``N``).
        precision: ``fp32``/``fp16``/``int8`` (default fp32); must match a deployable file's.
        calibration: int8 only: a ``.npy`` of batch-first samples (default: random samples).

    Returns:
        the ``CompiledModel``.

    Raises:
        UsageError: ``--batch`` or ``--precision`` differ from a deployable file's, ``--batch``
            differs from a graph document's, or a calibration file that does not fit the model's input.
        CommandError: a graph document whose inputs' batch axes differ in length.
        NgraphError: a file that cannot be read (``DeployError``, ``CheckpointError``...).

    Example:
        >>> load_compiled("out/mlp.h5", batch=8, precision="fp16").batch_size
        8
    """
    path = Path(path)
    if zipfile.is_zipfile(path):
        compiled = ng.inference.load(path)
        for flag, asked, has in (("--batch", batch, compiled.batch_size), ("--precision", precision,
                                                                          compiled.precision)):
            if asked is not None and asked != has:
                raise UsageError(f"bench: {path} is a deployable file compiled with {flag} {has}, received {flag} "
                                 f"{asked}; hint: leave {flag} out, or compile the .h5 model again")
        return compiled
    source = load_source(path)
    if isinstance(source, list):  # a graph document: compile_for_inference reads the text itself
        batch = graph_batch(path, source, batch)
        source = path.read_text(encoding="utf-8")
    elif not isinstance(source, Model):
        raise CommandError(f"bench: expected a Model checkpoint, a graph document or a deployable file, received "
                           f"{path}, a {type(source).__name__} checkpoint; hint: bench serves one network: save it "
                           "as a Model (e.g. Model(gan.generator)) or a graph document (ng.serialize)")
    precision, batch = precision or "fp32", batch or 1
    data = None
    if precision == "int8":
        data = [_calibration_batch(source, path, batch, calibration)]
    return ng.inference.compile_for_inference(source, precision=precision, calibration=data, batch_size=batch)


def graph_batch(path: str | Path, roots: list[ng.Op], asked: int | None) -> int:
    """A graph document's batch: the length of its inputs' batch axis ``N`` (1 when none has one).

    Its shapes are fixed when it is written (``ngraph convert --dim N=8``), so ``asked`` (``--batch``)
    can only repeat it.

    Raises:
        UsageError: ``asked`` differs from the graph's batch.
        CommandError: inputs whose batch axes differ in length.

    Example:
        >>> graph_batch("affine.ngraph", ng.deserialize(text), None)   # converted with --dim N=8
        8
    """
    inputs = [op for op in ng.ordered_ops(roots) if op.op is ng.OpType.PLACEHOLDER]
    lengths = sorted({op.axes.batch_axis.length for op in inputs if op.axes.batch_axis is not None})
    if len(lengths) > 1:
        raise CommandError(f"bench: expected the inputs of {path} to share one batch length, received batch axes N "
                           f"of lengths {lengths}; hint: convert the model again with one --dim N=LENGTH")
    batch = lengths[0] if lengths else 1
    if asked is not None and asked != batch:
        fixed = f"its inputs' batch axis N has length {batch}" if lengths else "its inputs have no batch axis N"
        raise UsageError(f"bench: {path} is a graph document whose shapes are fixed ({fixed}), received --batch "
                         f"{asked}; hint: leave --batch out, or convert the model again with --dim N={asked}")
    return batch


def _calibration_batch(source: Any, path: Path, batch: int, calibration: str | Path | None) -> np.ndarray:
    """Calibration samples in the input's axes order: from ``calibration`` (batch first) or random."""
    spec = ng.inference.compile_for_inference(source, batch_size=batch).inputs[0]
    if calibration is None:
        return random_input(spec, np.random.default_rng(0))
    x = np.load(calibration, allow_pickle=False)
    sample = tuple(n for i, n in enumerate(spec.shape) if i != spec.batch_index)
    if x.ndim < 1 or math.prod(x.shape[1:]) != math.prod(sample) or spec.batch_index is None:
        raise UsageError(f"bench: --calibration {calibration}: expected samples of shape {sample} (batch first) "
                         f"for input {spec.name} of {path}, received an array of shape {x.shape}")
    return np.moveaxis(x.reshape((x.shape[0], *sample)), 0, spec.batch_index).astype(spec.dtype)


class BenchResult:
    """What one ``bench`` run measured.

    Attributes:
        count: requests completed within the timed window.
        duration_s: seconds from the first start to the last completion.
        latencies_ms: one figure per completed request (its execution time).
        batch: samples per request.
        requests: requests running at once.
    """

    def __init__(self, count: int, duration_s: float, latencies_ms: list[float], batch: int, requests: int) -> None:
        self.count, self.duration_s, self.latencies_ms = count, duration_s, latencies_ms
        self.batch, self.requests = batch, requests

    @property
    def throughput(self) -> float:
        """Samples per second over the run (``count * batch / duration``)."""
        return self.count * self.batch / self.duration_s if self.duration_s > 0 else 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile of the latencies, in ms (linear interpolation)."""
        return float(np.percentile(self.latencies_ms, q))


def bench(compiled: ng.inference.CompiledModel, seconds: float, requests: int = 4) -> BenchResult:
    """Keep ``requests`` asynchronous requests busy on random inputs for ``seconds``; measure them.

    Each request runs one warm-up job first (untimed). Then jobs are started back to back
    (``AsyncInferQueue.start_async`` waits for a free request) until ``seconds`` passed; the
    run ends when the last started job finished.

    Args:
        compiled: the model to run.
        seconds: how long to keep starting jobs.
        requests: requests running at once.

    Returns:
        a ``BenchResult``.

    Example:
        >>> bench(compiled, 1.0, requests=2).throughput > 0
        True
    """
    rng = np.random.default_rng(0)
    inputs = [random_input(spec, rng) for spec in compiled.inputs]
    queue = ng.inference.AsyncInferQueue(compiled, jobs=requests)
    latencies: list[float] = []
    lock = threading.Lock()
    for request in queue.requests:  # warm-up: first calls fill caches and the BLAS pools
        request.infer(inputs)
    queue.set_callback(lambda request, _: _record(latencies, lock, request.latency_s))
    start = time.perf_counter()
    deadline = start + seconds
    try:
        while time.perf_counter() < deadline:
            queue.start_async(inputs)
        queue.wait_all()
        duration = time.perf_counter() - start
    finally:
        queue.close()
    return BenchResult(len(latencies), duration, latencies, compiled.batch_size, requests)


def _record(latencies: list[float], lock: threading.Lock, seconds: float) -> None:
    with lock:
        latencies.append(1e3 * seconds)


def format_bench(result: BenchResult) -> list[str]:
    """The lines ``bench`` prints: count, duration, latency percentiles and throughput, benchmark_app style.

    Example:
        >>> format_bench(result)[-1]
        'Throughput:   1234.56 FPS'
    """
    lat = result.latencies_ms
    lines = [f"Count:        {result.count} iterations ({result.requests} requests, batch {result.batch})",
             f"Duration:     {1e3 * result.duration_s:.2f} ms", "Latency:"]
    if lat:
        lines += [f"    Median:   {statistics.median(lat):.3f} ms", f"    Average:  {statistics.fmean(lat):.3f} ms",
                  f"    p90:      {result.percentile(90):.3f} ms", f"    p99:      {result.percentile(99):.3f} ms",
                  f"    Min:      {min(lat):.3f} ms", f"    Max:      {max(lat):.3f} ms"]
    lines.append(f"Throughput:   {result.throughput:.2f} FPS")
    return lines


def run_bench(args: argparse.Namespace) -> int:
    """The ``bench`` subcommand: compile or load ``args.path``, run ``bench``, print the figures; exit code 0.

    With ``--generate N``: tokens per second of a language model (``run_generation_bench``)."""
    if args.generate is not None:
        return run_generation_bench(args)
    if args.compare:
        raise UsageError("bench: --compare compares generation with and without the cache, received it without "
                         "--generate; hint: add --generate N (a causal language model)")
    compiled = load_compiled(args.path, args.batch, args.precision, args.calibration)
    print(f"{args.path}: {compiled.precision}, batch {compiled.batch_size}, inputs "
          f"{', '.join(f'{s.name}{list(s.shape)}' for s in compiled.inputs)}; {args.requests} requests for "
          f"{args.time:g} s")
    if compiled.precision == "int8" and args.calibration is None and not zipfile.is_zipfile(args.path):
        print("note: int8 calibrated on random inputs (--calibration NPY for real ranges)")
    print("\n".join(format_bench(bench(compiled, args.time, args.requests))))
    if args.pc:
        print_counters(compiled, "one profiled request", PC_RUNS)
    return 0
