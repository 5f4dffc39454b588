"""``bench --generate N``: tokens per second of a causal language model sampling with its key/value cache.

The checkpoint (``neon train char_transformer --out DIR`` writes ``DIR/char_transformer.h5``) is
loaded and compiled by ``ng.inference.compile_generator`` (window and step graphs, weights frozen,
``--precision`` fp32 or fp16). Then runs of ``N`` greedy tokens are generated back to back for
``--time`` seconds, each from a one-token prompt (token id 0): its prefill (one step: a short
prompt goes through the step) gives the first token, ``N - 1`` cached steps the rest, past the
context as ``--overflow`` says (default ``shift``: a window run over the last half of the
context, then steps again). It prints the runs and tokens, the median time of the prefills
(the prompt's, and the window runs past the context), the latency percentiles of one cached step
and the rate in tokens per second (every token of every run over the whole duration, prefills
included). ``--compare`` adds one run without the cache (the window re-run for every token,
what sampling cost before the cache) and the speedup; ``-pc`` the per-op counters of the step
graph. Generation runs one sequence: ``--batch`` must be 1 and ``--requests`` does not apply.

Example:
    $ ngraph bench out/char_transformer/char_transformer.h5 --generate 200 --time 5 --compare
"""

from __future__ import annotations

import argparse
import statistics
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import ngraph_core as ng

from .common import UsageError, print_counters
from .sources import load_source

__all__ = ["GenerationResult", "format_generation", "load_generator", "measure_generation", "run_generation_bench"]

PC_RUNS = 20  # profiled step runs behind -pc
PROMPT = (0,)  # a one-token prompt: any id is in every vocabulary


def load_generator(path: str | Path, precision: str | None = None, overflow: str = "shift") -> ng.inference.Generator:
    """The ``Generator`` ``bench --generate`` runs: the checkpoint's window and step graphs compiled for inference.

    Args:
        path: a checkpoint of a model with ``__ngraph_generation__`` (a ``char_transformer.h5``).
        precision: ``fp32`` (default) or ``fp16``.
        overflow: past the context: ``shift``, ``window`` or ``error``.

    Raises:
        UsageError: a deployable file, a model that does not generate, ``--precision int8``.
        NgraphError: a file that cannot be read (``CheckpointError``...).

    Example:
        >>> load_generator("out/char_transformer/char_transformer.h5").context
        64
    """
    path = Path(path)
    if zipfile.is_zipfile(path):
        raise UsageError(f"bench --generate: expected a checkpoint of a causal language model (.h5), received the "
                         f"deployable file {path}; hint: pass the model's checkpoint, e.g. "
                         "out/char_transformer/char_transformer.h5")
    if precision == "int8":
        raise UsageError("bench --generate: expected --precision fp32 or fp16, received int8; hint: INT8 needs "
                         "calibrated activation ranges, which generation does not collect")
    source = load_source(path)
    if not hasattr(source, "__ngraph_generation__"):
        raise UsageError(f"bench --generate: expected a causal language model (a model with __ngraph_generation__, "
                         f"e.g. a char_transformer checkpoint), received {path}, a {type(source).__name__}; hint: "
                         "leave --generate out to measure requests per second")
    return ng.inference.compile_generator(source, precision=precision or "fp32", overflow=overflow)


@dataclass
class GenerationResult:
    """What one ``bench --generate`` run measured.

    Attributes:
        runs: runs of ``length`` tokens completed.
        length: tokens per run.
        duration_s: seconds over all runs.
        prefill_ms: one figure per prefill (each run's prompt, and each window run past the context).
        step_ms: one figure per cached step.
        uncached_tokens_per_s: the rate without the cache (``--compare``), or None.
    """

    runs: int
    length: int
    duration_s: float
    prefill_ms: list[float]
    step_ms: list[float]
    uncached_tokens_per_s: float | None = None

    @property
    def tokens(self) -> int:
        return self.runs * self.length

    @property
    def tokens_per_s(self) -> float:
        """Every generated token over the whole duration (prefills included)."""
        return self.tokens / self.duration_s if self.duration_s > 0 else 0.0


def _timed_run(generator: ng.inference.Generator, length: int, prefill_ms: list[float], step_ms: list[float]) -> None:
    """One greedy run of ``length`` tokens, each window run and step timed into the lists."""
    start = time.perf_counter()
    logits = generator.start(PROMPT)
    prefill_ms.append(1e3 * (time.perf_counter() - start))
    for _ in range(1, length):
        windows = generator.window_runs
        start = time.perf_counter()
        logits = generator.append(int(np.argmax(logits)))
        (prefill_ms if generator.window_runs > windows else step_ms).append(1e3 * (time.perf_counter() - start))


def measure_generation(generator: ng.inference.Generator, length: int, seconds: float,
                       compare: bool = False) -> GenerationResult:
    """Runs of ``length`` greedy tokens for ``seconds`` (at least one), after an untimed warm-up run.

    Args:
        generator: what to run.
        length: tokens per run (>= 1).
        seconds: how long to keep starting runs.
        compare: also time one run without the cache (``Generator.generate(cached=False)``).

    Returns:
        a ``GenerationResult``.

    Example:
        >>> measure_generation(generator, 50, 1.0).tokens_per_s > 0
        True
    """
    _timed_run(generator, min(length, 4), [], [])  # warm-up: the first calls fill caches and the BLAS pools
    prefill_ms: list[float] = []
    step_ms: list[float] = []
    runs, start = 0, time.perf_counter()
    while runs == 0 or time.perf_counter() - start < seconds:
        _timed_run(generator, length, prefill_ms, step_ms)
        runs += 1
    duration = time.perf_counter() - start
    uncached = None
    if compare:
        begin = time.perf_counter()
        generator.generate(PROMPT, length, cached=False)
        uncached = length / (time.perf_counter() - begin)
    return GenerationResult(runs, length, duration, prefill_ms, step_ms, uncached)


def format_generation(result: GenerationResult) -> list[str]:
    """The lines ``bench --generate`` prints, benchmark_app style.

    Example:
        >>> format_generation(result)[-1]
        'Tokens/s:     1234.56 (cached)'
    """
    lines = [f"Count:        {result.runs} runs, {result.tokens} tokens",
             f"Duration:     {1e3 * result.duration_s:.2f} ms",
             f"Prefill:      {statistics.median(result.prefill_ms):.3f} ms "
             f"(median of {len(result.prefill_ms)} prefills)"]
    steps = result.step_ms
    if steps:
        lines += ["Latency (one cached step):",
                  f"    Median:   {statistics.median(steps):.3f} ms", f"    Average:  {statistics.fmean(steps):.3f} ms",
                  f"    p90:      {float(np.percentile(steps, 90)):.3f} ms",
                  f"    p99:      {float(np.percentile(steps, 99)):.3f} ms",
                  f"    Min:      {min(steps):.3f} ms", f"    Max:      {max(steps):.3f} ms"]
    lines.append(f"Tokens/s:     {result.tokens_per_s:.2f} (cached)")
    if result.uncached_tokens_per_s is not None:
        speedup = result.tokens_per_s / result.uncached_tokens_per_s
        lines.append(f"Uncached:     {result.uncached_tokens_per_s:.2f} tokens/s (the window re-run per token); "
                     f"the cache is {speedup:.1f}x faster")
    return lines


def run_generation_bench(args: argparse.Namespace) -> int:
    """``bench --generate N``: compile the checkpoint's generator, measure, print; exit code 0.

    Raises:
        UsageError: ``--batch`` other than 1, and ``load_generator``'s.
    """
    if args.batch not in (None, 1):
        raise UsageError(f"bench --generate: expected --batch 1 (generation runs one sequence), received --batch "
                         f"{args.batch}; hint: leave --batch out")
    generator = load_generator(args.path, args.precision, args.overflow)
    step = generator.step_model
    logits = generator.graphs.step_outputs[0].axes
    vocabulary = next(a.length for a in logits if not (a.is_batch or a.is_recurrent))
    print(f"{args.path}: generation, {args.precision or 'fp32'}, context {generator.context}, vocabulary "
          f"{vocabulary}; runs of {args.generate} tokens from a one-token prompt for {args.time:g} s (overflow "
          f"{args.overflow})")
    print("\n".join(format_generation(measure_generation(generator, args.generate, args.time, args.compare))))
    if args.pc and step is not None:
        print_counters(step, "the cached step", PC_RUNS)
    return 0
