"""Which convolution kernel a layer runs, chosen per layer by measurement and recorded on disk.

A forward convolution, or its filter gradient, has up to four kernels on the NumPy transformer:

* ``im2col``: batch innermost, ``(C, *spatial, N)`` (``kernels/conv.py``), the reference and fallback;
* ``winograd``: F(2x2, 3x3) for 3x3 stride-1 layers (``winograd.py``), in the same layout;
* ``image``: batch outermost, one image at a time (``numpy/conv_image.py``), for batches of 2 or more;
* ``channels_last``: the forward convolution of few output positions (a batch-1 layer on a small map),
  its col matrix built channels last and multiplied by a compiled loop that reads the filter once
  (``numpy/conv_channels_last.py``).

The data gradient chooses between the first two. ``variant`` (the NumPy transformer's ``conv_variant``)
makes the candidates a layer has; over the layer's first calls ``choose`` times them on the calls' own
operands, one candidate a call, and keeps the fastest, recording the medians under the layer's key (its shapes, padding,
dtype, CPU and thread settings) in ``conv_choices.json`` beside the compiled kernels, so later
processes skip the measurement.

A run of several ranks (the transformer's communicator, default ``ng.distributed.current()``, has
``size > 1``) never times: timings differ from run to run and from rank to rank (both ranks timing at
once on 2 cores measured im2col at 1.6 and 19.7 ms for one layer), so two identical ``mpiexec`` runs
took different kernels, rounded differently and ended 1.4 points apart in accuracy. Each layer runs
``unmeasured_choice`` instead, the same on every rank and in every run, whatever the record holds.
``report()`` formats the record::

    python -c "from ngraph_core.transformers.numpy import conv_choice; print(conv_choice.report())"
"""

from __future__ import annotations

import functools
import json
import os
import platform
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ... import safe_json
from ...errors import SerializationError
from ...ir import Op
from ...ir.conv import ConvArg, activation_roles, filter_roles
from ..kernels.collective import communicator_of
from ..kernels.context import Kernel, KernelContext
from ..kernels.conv import Epilogue, finishing
from . import conv_channels_last, conv_image, winograd
from .kernel_cache import cache_dir, make_private
from .numba_loader import background_allowed, reference_only

ALGORITHMS = ("im2col", "winograd", "image", "channels_last")
MAX_RECORD_BYTES = 16 << 20  # a record of a few hundred layers is a few hundred kB
TIMED_CALLS = 3
"""Calls of each algorithm timed, one a call in turn, before a layer's choice (the median decides)."""
CALLS_TO_DECIDE = len(ALGORITHMS) * TIMED_CALLS
"""A layer whose candidates are ready is decided by this many calls at most (one candidate timed a call)."""
NEAR_TIE = 0.10
"""A measured choice won by less than this fraction is measured again by later processes (``choose``)."""
MEASURE_PROCESSES = 3
"""How many processes measure a near tie before the choice is final."""


def mode() -> str:
    """``NG_CONV``: ``auto`` (default: time a layer's candidates on its first call, keep the fastest),
    ``winograd``, ``image`` or ``channels_last`` (that kernel wherever it applies, else im2col) or ``im2col``
    (always).
    ``NG_KERNELS=numpy`` means im2col."""
    if reference_only():
        return "im2col"
    value = os.environ.get("NG_CONV", "auto").strip().lower() or "auto"
    if value not in ("auto", *ALGORITHMS):
        raise ValueError(f"NG_CONV={value!r}: expected one of auto, {', '.join(ALGORITHMS)}; hint: unset it for auto")
    return value


MEASURED: dict[str, dict[str, Any]] = {}
"""Choices made in this process (and loaded from disk): key -> ``{"chosen", "ms": {algorithm: median}}``."""
_loaded = False
_DECIDED: dict[str, dict[str, Any]] = {}
"""The entries this process measured (compared by identity): a near tie is measured again by later processes,
never twice in one, so all of a process's computations run a layer with the same kernel (the same rounding:
a model and its reloaded copy predict bit for bit alike)."""


def choices_path() -> Path:
    """The on-disk record of measured choices (next to the compiled kernels)."""
    return cache_dir().parent / "conv_choices.json"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load_choices() -> None:
    """Read the disk record once; an unreadable or malformed record is ignored (it is re-measured)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    try:
        record = safe_json.loads(choices_path().read_bytes(), what=str(choices_path()), error=SerializationError,
                                 max_chars=MAX_RECORD_BYTES)
    except (OSError, SerializationError):
        return
    if isinstance(record, dict):
        for key, entry in record.items():
            if isinstance(entry, dict) and entry.get("chosen") in ALGORITHMS:
                MEASURED.setdefault(key, entry)


def _save_choices() -> None:
    """Write the record atomically (a temporary file renamed over it)."""
    path = choices_path()
    try:
        make_private(path.parent)  # 0700 levels, as the kernel cache beside it wants (kernel_cache.py)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(MEASURED, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: the choice is kept for this process only


def layer_key(kind: str, shapes: Sequence[Sequence[int]], arg: ConvArg, dtype: str) -> str:
    """The key of a measured choice: the kernel, its operands' shapes, padding, dtype, CPU and threads."""
    threads = ",".join(os.environ.get(v, "") for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "NG_THREADS"))
    geometry = ";".join("x".join(str(d) for d in s) for s in shapes)
    return f"{kind}|{geometry}|pad={arg.padding}|{dtype}|{_cpu()}|cores={os.cpu_count()}|threads={threads}"


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else default


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def settled(entry: dict[str, Any]) -> bool:
    """True when a recorded choice is final: measured by ``MEASURE_PROCESSES`` processes, or won by more
    than ``NEAR_TIE`` (records without ``runs`` count as one process)."""
    if _count(entry.get("runs")) >= MEASURE_PROCESSES:
        return True
    ms = entry.get("ms")
    if not isinstance(ms, dict):
        return True
    times = sorted(_number(v, 0.0) for v in ms.values())
    return len(times) < 2 or times[0] <= 0 or times[1] > times[0] * (1 + NEAR_TIE)


def choose(key: str, candidates: dict[str, Kernel], ready: Callable[[], bool] | None = None) -> Kernel:
    """A kernel that runs the measured-faster candidate for ``key``.

    While neither this process nor the disk record knows ``key``, each call runs the candidate timed the
    fewest times so far (im2col, then the others in order, round and round) on the call's own operands
    (each writes the whole output, so every call's result is right); once each has ``TIMED_CALLS`` timings,
    the medians are recorded under ``key`` and the fastest runs from then on. Spread over calls, the
    measurement costs no call more than its slowest candidate (all of them timed in the first call made a
    model's first step several times longer), and each time is taken inside the running network.

    ``ready``: False while a candidate's compiled code is not loaded yet (numba compiling in the background,
    ``numba_loader.prepare``): until then the calls run im2col, untimed.

    A near tie (the slower within ``NEAR_TIE`` of the faster) is measured again by later processes,
    up to ``MEASURE_PROCESSES`` in all, each algorithm keeping its best median so far: a busy
    machine only adds time, so one noisy process no longer fixes the choice for good.
    """
    _load_choices()
    known = MEASURED.get(key)
    if known is not None and known["chosen"] in candidates and (
            _DECIDED.get(key) is known or (settled(known) and set(candidates) <= set(known.get("ms") or candidates))):
        return candidates[known["chosen"]]
    chosen: list[Kernel] = []
    times: dict[str, list[float]] = {name: [] for name in candidates}
    reference = candidates["im2col"]

    def measuring_kernel(out, *args):
        decided = _DECIDED.get(key)
        if not chosen and decided is not None and decided is MEASURED.get(key) and decided["chosen"] in candidates:
            chosen.append(candidates[decided["chosen"]])  # another computation of this process measured it first
            _STARTED.discard(measuring_kernel)
        if chosen:
            return chosen[0](out, *args)
        if ready is not None and not ready():
            return reference(out, *args)
        name = min(times, key=lambda n: len(times[n]))  # the least timed, in the candidates' order
        _STARTED.add(measuring_kernel)
        start = time.perf_counter()
        result = candidates[name](out, *args)
        times[name].append(time.perf_counter() - start)
        if all(len(t) >= TIMED_CALLS for t in times.values()):
            decide()
        return result

    def decide() -> None:
        ms = {name: 1e3 * sorted(t)[len(t) // 2] for name, t in times.items()}
        runs = 1
        if known is not None and isinstance(known.get("ms"), dict):  # a near tie measured again
            ms = {name: min(v, _number(known["ms"].get(name), v)) for name, v in ms.items()}
            runs = _count(known.get("runs")) + 1
        best = min(ms, key=ms.__getitem__)
        MEASURED[key] = _DECIDED[key] = {"chosen": best, "ms": {name: round(v, 4) for name, v in ms.items()},
                                         "runs": runs}
        _save_choices()
        chosen.append(candidates[best])
        _STARTED.discard(measuring_kernel)

    return measuring_kernel


_STARTED: weakref.WeakSet = weakref.WeakSet()  # measuring kernels that timed a candidate, undecided (and alive)


def measurements_in_progress() -> int:
    """How many layers of this process have started timing their candidates and not decided yet (a
    benchmark runs untimed steps until none is left, so it times the chosen kernels)."""
    return len(_STARTED)


MIN_COLUMNS = 8
"""Under ``NG_CONV=auto`` a forward convolution whose Winograd GEMMs would have fewer columns (2x2 tiles
times the batch) runs im2col without measuring. Such a layer is bound by reading its weights, and
Winograd reads 16/9 of them (the transformed ``U``) where im2col reads them once. The measured choice
had picked Winograd for a batch-1 ResNet-18's 256-channel 2x2 layers (one tile, each timed alone, its
weights in cache); inside the network they took three times as long as im2col (figures:
benchmarks/RESULTS.md, "Behind the code: numpy/conv_choice.py")."""


UNMEASURED_ORDER = ("winograd", "im2col")
"""What a run of several ranks takes (the first that applies), never timing: Winograd won every 3x3
stride-1 layer of ResNet-20 at batch 32 where the measurements agreed (one thread; benchmarks/RESULTS.md,
"reliability item 10"), and im2col is the reference every layer has."""


def unmeasured_choice(candidates: dict[str, Kernel]) -> Kernel:
    """The kernel a run of several ranks takes among ``candidates`` (``UNMEASURED_ORDER``; ``im2col`` always
    present): chosen by the layer's shape alone, so every rank and every run rounds alike."""
    return candidates[next(name for name in UNMEASURED_ORDER if name in candidates)]


def _columns(x: Op, arg: ConvArg) -> int:
    """The columns of a forward convolution's Winograd GEMMs: its 2x2 output tiles times the batch."""
    roles = activation_roles(x.axes, "conv")
    tiles = 1
    for length, (before, after) in zip(roles.spatial.lengths, arg.padding):
        tiles *= (length + before + after - 2 + 1) // 2
    return tiles * roles.batch.length


def variant(kind: str, kernel: Kernel, kc: KernelContext, *args: Any, epilogue: Epilogue | None = None) -> Kernel:
    """The kernel a convolution runs: ``kernel`` (im2col), or the Winograd, per-image or channels-last kernel,
    or a measured choice among those that apply.

    ``kind``: ``"conv"`` (``args``: x, w, arg, dtype), ``"bprop_data"`` or ``"bprop_filter"`` (``args``: the op),
    or ``"conv_cut"``: a forward convolution whose filter is cut to its live taps. That one is not measured: it
    runs channels last wherever that applies, because at those sizes (a batch-1 layer on a 1x1 or 2x2 map)
    the product is weight-bound and the channels-last loop streams the weights faster than BLAS (see
    ``conv_channels_last.MIN_LOOP_DEPTH``), with less around it.

    A forward kernel may come with the ``epilogue`` of the fused op it heads (``kernel`` applies it): every
    candidate then applies it too (the channels-last kernel as it stores, the others after), the candidates
    are timed with it, and the record's key says so (``conv+epilogue``).
    """
    wanted = mode()
    if wanted == "im2col":
        return kernel
    if kind == "conv_cut":  # a filter cut to its live taps (``args``: x, w, arg, dtype, fshape, taps)
        x, w, arg, dtype, fshape, taps = args
        if wanted in ("auto", "channels_last") and conv_channels_last.applies(x.axes, w.axes, arg, dtype, kc.xp,
                                                                              fshape):
            return conv_channels_last.conv_into(x, w, arg, dtype, kc, fshape, taps, epilogue=epilogue)
        return kernel
    makers: dict[str, Callable[[], Kernel]] = {}  # the other kernels that apply, made only when needed
    if kind == "conv":
        x, w, arg, dtype = args
        if winograd.eligible(filter_roles(w.axes, "conv").spatial.lengths, arg, dtype, kc.xp) and \
                not (wanted == "auto" and _columns(x, arg) < MIN_COLUMNS):  # (weight-bound: MIN_COLUMNS)
            makers["winograd"] = lambda: finishing(winograd.conv_into(x, w, arg, dtype, kc), epilogue)
        if conv_image.applies(x.axes, kc.xp):
            makers["image"] = lambda: finishing(conv_image.conv_into(x, w, arg, dtype, kc), epilogue)
        if conv_channels_last.applies(x.axes, w.axes, arg, dtype, kc.xp):
            makers["channels_last"] = lambda: conv_channels_last.conv_into(x, w, arg, dtype, kc, epilogue=epilogue)
        shapes = (x.axes.lengths, w.axes.lengths)
        kind = kind if epilogue is None else "conv+epilogue"  # (the record's key)
    else:
        (op,) = args
        filters = op.src[1] if kind == "bprop_data" else op
        dtype = kc.dtype_of(op)
        fshape = filter_roles(filters.axes, f"conv_{kind}").spatial.lengths
        too_wide = kind == "bprop_data" and any(p > 2 for pair in op.arg.padding for p in pair)
        if not too_wide and winograd.eligible(fshape, op.arg, dtype, kc.xp):  # ("full" padding 2 - p >= 0)
            make = winograd.bprop_data if kind == "bprop_data" else winograd.bprop_filter
            makers["winograd"] = lambda: make(op, kc)
        if kind == "bprop_filter" and op.arg.groups == 1 and conv_image.applies(op.src[0].axes, kc.xp):
            makers["image"] = lambda: conv_image.bprop_filter(op, kc)
        arg, shapes = op.arg, tuple(s.axes.lengths for s in op.src)
    if wanted != "auto":  # one kernel forced where it applies
        return makers[wanted]() if wanted in makers else kernel
    if not makers:
        return kernel
    if communicator_of(kc).size > 1:  # several ranks: never timed (module docstring)
        return unmeasured_choice({"im2col": kernel, **{n: make() for n, make in makers.items()
                                                        if n in UNMEASURED_ORDER}})
    ready = None
    if "winograd" in makers and background_allowed():  # (several ranks returned above)
        ready = functools.partial(winograd.ready, dtype, True)  # its transforms compile in the background
    return choose(layer_key(kind, shapes, arg, dtype), {"im2col": kernel, **{n: make() for n, make in makers.items()}},
                  ready)


def report(record: dict[str, dict[str, Any]] | None = None) -> str:
    """The recorded choices (``record``, default: this process's and the disk's) as a table: kernel kind,
    shapes, padding, dtype, thread settings (``OPENBLAS_NUM_THREADS,OMP_NUM_THREADS,NG_THREADS``), the chosen
    kernel and each one's median in ms. The CPU is in the key too, not in the table."""
    _load_choices()
    lines = [f"{'kind':<13} {'shapes':<30} {'padding':<21} {'dtype':<8} {'threads':<8} {'chosen':<9} ms"]
    for key, entry in sorted((record if record is not None else MEASURED).items()):
        kind, shapes, padding, dtype, *rest = key.split("|") + [""] * 4
        threads = next((part[len("threads="):] for part in rest if part.startswith("threads=")), "")
        ms = entry.get("ms") if isinstance(entry.get("ms"), dict) else {}
        times = "  ".join(f"{name} {value}" for name, value in sorted(ms.items()))
        lines.append(f"{kind:<13} {shapes:<30} {padding.removeprefix('pad='):<21} {dtype:<8} {threads:<8} "
                     f"{entry.get('chosen', '?'):<9} {times}")
    return "\n".join(lines)
