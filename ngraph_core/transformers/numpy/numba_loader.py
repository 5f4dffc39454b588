"""Whether compiled (numba) kernels run (``NG_KERNELS``), how a generated kernel's source is loaded, and when
it is compiled (``NG_COMPILE``).

Every module that generates numba source (``numba_kernels``, ``narrow_gemm``, ``compiled_pool``,
``compiled_scan``, ``winograd``) loads it with ``load_kernel``, which writes it once under the kernel
cache (``kernel_cache.kernel_dir``) and imports it; ``kernel_set``/``reference_only`` say which
kernels the user asked for.

Compiling in the background. numba compiles a kernel for the argument types of its first call, which on a
machine's first run (an empty kernel cache) cost seconds per kernel: a ResNet-20's first step waited for its
Winograd transforms and fused programs. A kernel with a NumPy fallback instead calls ``prepare`` with its
first call's arguments: machine code already in this process or in numba's disk cache is loaded at once
(tens of milliseconds), anything else is compiled on one background thread while the kernel runs its
fallback (the shared NumPy kernel, im2col for a convolution), and the kernel switches to the compiled code
at the first call after ``Pending.done``. Results are the same either way up to rounding: the reference
tests compare both paths with NumPy. ``NG_COMPILE=wait`` compiles in the calling thread instead (the first
call waits, as before), and so does a run of several ranks (``background_allowed``): ranks switching at
different steps would round differently and drift apart. At exit the process waits for the compile in
progress, so its machine code reaches the disk cache; queued ones are dropped.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import queue
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .kernel_cache import kernel_dir

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
"""numba is optional (the ``fast`` extra); it is imported by the generated modules only, when first needed."""

FLOAT_DTYPES = ("float32", "float64")

_functions: dict[str, Callable[..., Any]] = {}  # canonical text -> the compiled (lazily) numba dispatcher


def load_kernel(source: str) -> Callable[..., Any]:
    """The numba dispatcher ``k`` of ``source``, written once under ``kernel_dir()`` (the cache when it is
    private, else a private temporary directory) and imported."""
    fn = _functions.get(source)
    if fn is not None:
        return fn
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    directory = kernel_dir()
    path = directory / f"k_{digest}.py"
    if not path.exists() or path.read_text() != source:
        # atomically, and only when missing: numba's on-disk index is keyed by the file's mtime
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    name = f"_ngraph_kernel_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cache locates a function by its module
    spec.loader.exec_module(module)
    fn = _functions[source] = module.k
    return fn


KERNEL_SETS = ("auto", "numba", "numpy")


def kernel_set() -> str:
    """``NG_KERNELS``: ``auto`` (default: compiled pooling and Winograd, fused programs compiled from
    ``numba_kernels.COMPILED_MIN_ELEMENTS``), ``numba`` (every fused program numba supports compiled) or ``numpy``
    (the NumPy reference kernels only). Read when a kernel is made.

    Raises:
        ValueError: another value.
    """
    return _setting("NG_KERNELS", KERNEL_SETS)


def _setting(variable: str, values: tuple[str, ...]) -> str:
    """The environment ``variable``, one of ``values`` (case-insensitive; unset or empty: the first)."""
    value = os.environ.get(variable, "").strip().lower() or values[0]
    if value not in values:
        raise ValueError(f"{variable}={value!r}: expected one of {', '.join(values)}; hint: unset it for {values[0]}")
    return value


def reference_only() -> bool:
    """True when ``NG_KERNELS=numpy`` asks for the NumPy reference kernels only: no compiled pooling or
    fused programs, no Winograd convolutions."""
    return kernel_set() == "numpy"


COMPILE_MODES = ("background", "wait")


def compile_mode() -> str:
    """``NG_COMPILE``: ``background`` (default: compile on a background thread while NumPy kernels run) or
    ``wait`` (compile in the calling thread: the first call waits). Read when a kernel is made.

    Raises:
        ValueError: another value.
    """
    return _setting("NG_COMPILE", COMPILE_MODES)


def background_allowed(ranks: int = 1) -> bool:
    """True when kernels may compile in the background: ``NG_COMPILE=background`` and one rank (``ranks``: the
    size of the computation's communicator; several ranks must switch kernels at the same step)."""
    return ranks <= 1 and compile_mode() == "background"


class Pending:
    """One dispatcher's machine code for one signature: ``done`` once it is loaded (compiled, or read from
    numba's disk cache); ``error`` holds the exception when compiling failed (the kernel keeps its fallback)."""

    __slots__ = ("fn", "signature", "done", "error")

    def __init__(self, fn: Callable[..., Any], signature: tuple) -> None:
        self.fn, self.signature = fn, signature
        self.done = False
        self.error: BaseException | None = None

    def compile(self) -> None:
        try:
            self.fn.compile(self.signature)  # numba reads its disk cache first, and writes it after compiling
            self.done = True
        except Exception as error:  # noqa: BLE001 - reported once; the kernel keeps running its fallback
            self.error = error
            warnings.warn(f"numba could not compile a generated kernel ({type(error).__name__}: {error}); its NumPy "
                          "kernel runs instead; hint: NG_KERNELS=numpy runs the NumPy kernels only", RuntimeWarning,
                          stacklevel=2)


SWITCH_INTERVAL = 0.0005
"""Python's thread switch interval (seconds) while the background thread compiles, instead of the default
5 ms. numba's typing is Python code that holds the GIL; every NumPy or BLAS call of the running model releases
the GIL and then waits for it, up to a switch interval each time. With 5 ms a cold ResNet-20 step took 5.1 s
beside a compile, with 0.5 ms 1.3 s (a warm one: 0.4 s; figures: benchmarks/RESULTS.md, "Behind the code:
numpy/numba_loader.py"); the compile itself took as long."""
_pending: dict[tuple[int, tuple], Pending] = {}  # (id of the dispatcher, signature) -> its Pending
_jobs: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
_compiling = threading.Lock()  # held by the background thread while it compiles
_worker: threading.Thread | None = None
_stopping = False


def _work() -> None:
    while True:
        job = _jobs.get()
        with _compiling:
            if job is None or _stopping:
                return
            interval = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL)
            try:
                job.compile()
            finally:
                sys.setswitchinterval(interval)


def _finish() -> None:
    """At exit: drop the queued compiles and wait for the one in progress (its machine code reaches the disk
    cache, and numba is never torn down under a compiling thread)."""
    global _stopping
    _stopping = True
    _jobs.put(None)
    with _compiling:
        pass


def _start_worker() -> None:
    global _worker
    if _worker is None:
        _worker = threading.Thread(target=_work, name="ng-compile", daemon=True)
        _worker.start()
        atexit.register(_finish)  # after numba's own handlers were registered: runs before them


_magic: list[tuple] = []  # the code generator's target (triple, CPU, features), read once


def _in_disk_cache(fn: Any, signature: tuple) -> bool:
    """True when numba's disk cache holds ``fn``'s machine code for ``signature``: its index holds the key
    numba's ``Cache._index_key`` makes (any surprise from numba's internals counts as not cached; the
    background thread then loads it). The target is read once, before any background compile: each read
    calls into LLVM, whose lock a compiling thread holds for seconds."""
    try:
        if not _magic:
            _magic.append(fn.targetctx.codegen().magic_tuple())
        code = fn.py_func
        closure = b"" if code.__closure__ is None else None
        if closure is None:
            return False  # generated kernels have no closure; anything else: let numba decide
        digest = (hashlib.sha256(code.__code__.co_code).hexdigest(), hashlib.sha256(closure).hexdigest())
        return (signature, _magic[0], digest) in fn._cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - numba's private API: when it differs, compile as if not cached
        return False


def signature_of(args: Sequence[Any]) -> tuple:
    """numba's argument types of a call with ``args``."""
    from numba import typeof

    return tuple(typeof(a) for a in args)


def prepare(fn: Callable[..., Any], args: Sequence[Any], background: bool) -> Pending:
    """``fn``'s machine code for the types of ``args``, compiled or being compiled.

    Already compiled in this process, or in numba's disk cache: loaded here, done. Otherwise compiled here
    (``background`` False) or queued for the background thread, and the caller runs its fallback until
    ``done``. The same ``Pending`` is returned for the same dispatcher and types.
    """
    signature = signature_of(args)
    key = (id(fn), signature)
    found = _pending.get(key)
    if found is not None:
        return found
    pending = _pending[key] = Pending(fn, signature)
    if not background or signature in fn.overloads:
        pending.compile()
    elif not (_in_disk_cache(fn, signature) and _load_now(pending)):
        _start_worker()
        _jobs.put(pending)
    return pending


def _load_now(pending: Pending) -> bool:
    """Load ``pending`` from the disk cache here, unless the background thread holds numba's compiler lock
    (then waiting would cost the rest of its compile); True when loaded."""
    from numba.core.compiler_lock import global_compiler_lock

    lock = getattr(global_compiler_lock, "_lock", None)
    if lock is None or not lock.acquire(blocking=False):
        return False
    try:
        pending.compile()
    finally:
        lock.release()
    return pending.done


def compiles_pending() -> int:
    """How many kernels are queued or compiling on the background thread."""
    return sum(not p.done and p.error is None for p in list(_pending.values()))


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Block until every queued background compile is done (benchmarks call it before timing); False on timeout."""
    import time

    deadline = None if timeout is None else time.monotonic() + timeout
    while compiles_pending():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
