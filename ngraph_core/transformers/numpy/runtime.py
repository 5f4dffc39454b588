"""The one parallel runtime of the NumPy transformer: our threads own the cores, BLAS runs one thread.

Two thread pools on two cores fight: after every multi-threaded GEMM, OpenBLAS's idle workers
spin (``sched_yield`` in a loop, for ~2^28 cycles, about 0.1 s) and steal the cores our own
threads need. Measured: two Python threads each running GEMMs after a 2-thread GEMM took
twice as long with OpenBLAS's workers spinning as with them told to sleep at once (figures:
benchmarks/RESULTS.md, "Behind the code: numpy/runtime.py").

So with ``threads() > 1`` a NumPy transformer calls ``own_cores()`` when it is created: BLAS is
set to one thread for the process (through threadpoolctl, which works after numpy is loaded),
and the kernels split their own work over ``threads()`` workers (the caller is one of them), all
through ``run`` and its one pool:

* ``matmul``: a GEMM split by its batch, output columns or rows, one BLAS call per worker.
  Two Python threads calling a one-thread OpenBLAS run in parallel; calls made while OpenBLAS
  has two threads serialize on its lock (measured: benchmarks/RESULTS.md, "Behind the code: numpy/runtime.py").
* Winograd convolutions split their tile rows (``transformers/numpy/winograd.py``);
* im2col convolutions split their output rows, each worker building and multiplying its own col
  blocks; col2im (a strided data gradient) splits the input channels (``kernels/conv.py``);
* pooling splits the channels (compiled loops, ``transformers/numpy/compiled_pool.py``);
* fused element-wise programs from 256K elements split their blocks (``kernels/fused.py``) or, compiled
  (``numba_kernels.py``, the default at that size), the outermost axis of their loop.

Batch-norm statistics stay in the calling thread: split, they measured slower (``kernels/normalization.py``).

Two other designs were measured against this one (``run.py <name> --pairs 3 --threads 2``; figures:
benchmarks/RESULTS.md, "Behind the code: numpy/runtime.py"): GEMMs on BLAS's threads with BLAS at one thread only while
our workers run a Winograd section, and ``dot`` on BLAS's threads with convolutions on our workers. Both were
faster on the MLP (and the LSTM) and a fifth to a half slower on ResNet-20 and the small CNN: OpenBLAS's own
threads split a lone GEMM better than our hand-off (each part packs its panels alone), so GEMM-bound models lose
10-25% at 2 threads here. But any multi-threaded GEMM (an FC layer, a stride-2 im2col convolution) leaves
OpenBLAS's workers spinning into the convolution sections that follow. The convolution models decided it.

Hence one exception: a computation with no convolution or pooling (an MLP, an RNN; the
NumPy transformer's ``blas_threads``) runs its big GEMMs as single calls on BLAS's own threads
(``blas_matmul``: the count raised to the workers' for the call, back to one after). At two threads,
against splitting them, it made the MLP and LSTM steps faster, and doing it in every computation made
the small CNN slower (measured: benchmarks/RESULTS.md, "Behind the code: numpy/runtime.py").

``NG_THREADS`` sets the count (default: the cores this process may run on, divided among the MPI
ranks sharing the machine when run under ``mpiexec``: ``local_ranks``). ``NG_THREADS=1`` in a process
alone on its machine leaves BLAS alone and runs every kernel in the calling thread. The workers release
the GIL in BLAS, in NumPy's ufunc loops and in numba's ``nogil`` loops.

Ranks sharing a machine never let BLAS go past their share (``blas_limit``): left alone, OpenBLAS starts
a thread per core in every rank, so ``mpiexec -n 2`` on 2 cores ran 4 BLAS threads whose idle workers
spin; held to their share, README's ResNet-20 command and the MNIST MLP on 2 ranks ran several times
faster (measured: benchmarks/RESULTS.md, "reliability item 10").
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ...distributed import world
from ..kernels.context import Runner, split
from . import narrow_gemm

MIN_PARALLEL_FLOPS = 1 << 23
"""A GEMM below this many multiply-adds runs in one call. A hand-off to a worker and the wait for it cost
about what half of an 8M multiply-add GEMM takes at one thread; from 2M (the first setting) a batch-1
ResNet-18 at two threads split its 2-4M multiply-add layers and ran slower than with 8M (measured:
benchmarks/RESULTS.md, "Behind the code: numpy/runtime.py", and the eighth session)."""

_pool: ThreadPoolExecutor | None = None
_owned = False


LOCAL_RANKS_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE")
"""Where MPICH (hydra), Open MPI and MVAPICH tell a rank how many ranks share its machine."""


def local_ranks() -> int:
    """The MPI ranks on this machine, this one included: ``ng.distributed.local_size()`` (counted by
    ``distributed.init`` with MPI's shared-memory split), else the launcher's variable (``LOCAL_RANKS_VARS``),
    else 1. Read when a transformer is created: call ``init`` before."""
    counted = world.local_size()
    if counted:
        return counted
    for var in LOCAL_RANKS_VARS:
        if os.environ.get(var, "").isdigit() and int(os.environ[var]) > 0:
            return int(os.environ[var])
    return 1


def cores() -> int:
    """The cores this process may run on, shared out among the MPI ranks on this machine (at least one).

    Example:
        >>> cores()  # 2 cores: 2 alone, 1 under ``mpiexec -n 2``; 32 cores, 4 ranks: 8
    """
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return max(1, available // local_ranks())


def threads() -> int:
    """Worker count: ``NG_THREADS``, else ``cores()`` (every core, or this rank's share under mpiexec).

    Raises:
        ValueError: ``NG_THREADS`` is not a positive integer.
    """
    value = os.environ.get("NG_THREADS", "").strip()
    if not value:
        return cores()
    try:
        wanted = int(value)
    except ValueError:
        wanted = 0
    if wanted < 1:
        raise ValueError(f"NG_THREADS={value!r}: expected a positive integer (worker threads); "
                         "hint: unset it to use every core")
    return wanted


def blas_limit() -> int | None:
    """The thread count ``own_cores`` holds BLAS at: 1 with several workers of our own; with one worker, the
    rank's share of the cores (``cores()``) when other ranks share the machine; else None (BLAS left alone).

    Example:
        >>> blas_limit()  # mpiexec -n 2 on 2 cores: 1 (was OpenBLAS's default, 2 a rank)
    """
    if threads() > 1:
        return 1
    return cores() if local_ranks() > 1 else None


def own_cores() -> None:
    """Hold BLAS at ``blas_limit()`` threads for this process (once); see the module docstring."""
    global _owned
    limit = blas_limit()
    if _owned or limit is None:
        return
    _owned = True
    try:
        from threadpoolctl import ThreadpoolController, threadpool_limits
    except ImportError:  # pragma: no cover - a pinned dependency
        return
    threadpool_limits(limits=limit, user_api="blas")
    global _blas
    libraries = ThreadpoolController().select(user_api="blas").lib_controllers
    _blas = libraries[0] if len(libraries) == 1 else None


_blas: Any = None
"""threadpoolctl's controller of NumPy's BLAS once ``own_cores`` held it (None: not held, or not one library)."""
_wide = threading.Lock()


def blas_matmul(a: Any, b: Any, out: Any, workers: int) -> Any:
    """``out = a @ b`` in one BLAS call on ``workers`` of BLAS's own threads: the count is raised for the call
    and set back to one (0.6 us each way). For computations with no section of our own (``blas_threads``):
    OpenBLAS splits a lone GEMM better than ``matmul``'s parts (each packs the shared operand again), but its
    workers spin after the call and would take a core from our next section. One call at a time: another
    thread meanwhile gets ``matmul``."""
    if _blas is None or not _wide.acquire(blocking=False):
        return matmul(a, b, out, workers)
    try:
        _blas.set_num_threads(workers)
        return np.matmul(a, b, out=out)
    finally:
        _blas.set_num_threads(1)
        _wide.release()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(1, threads() - 1), thread_name_prefix="ng-worker")
    return _pool


def run(tasks: Sequence[Callable[[], Any]]) -> None:
    """Run ``tasks`` in parallel, the first in the calling thread; re-raises the first failure."""
    if len(tasks) == 1:
        tasks[0]()
        return
    futures = [_executor().submit(task) for task in tasks[1:]]
    try:
        tasks[0]()
    finally:
        for future in futures:
            future.result()


def product(a: Any, b: Any, out: Any) -> Any:
    """``out = a @ b``: the compiled loop of ``narrow_gemm`` for 2-4 columns where it takes them, else BLAS."""
    return out if narrow_gemm.run(a, b, out) else np.matmul(a, b, out=out)


def matmul(a: Any, b: Any, out: Any, workers: int | None = None) -> Any:
    """``numpy.matmul(a, b, out=out)`` (2-d ``out``, or 3-d with a batch), split over the workers
    when big enough (``MIN_PARALLEL_FLOPS``): by the batch when it has a part for every worker,
    else by ``out``'s columns or rows, whichever is longer (each part a strided view BLAS takes
    as it is). A 2-d product with 2-4 columns runs ``narrow_gemm``'s compiled loop where it applies
    (a batch-1 convolution of a small map), split by rows like BLAS's."""
    workers = threads() if workers is None else workers
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = out.shape[0] if out.ndim == 3 else 1
    narrow = 2 <= n <= 4 and out.ndim == 2
    if workers == 1 or batch * m * k * n < MIN_PARALLEL_FLOPS:
        return product(a, b, out) if narrow else np.matmul(a, b, out=out)
    if narrow:
        run([functools.partial(product, a[s:e], b, out[s:e]) for s, e in split(m, workers)])
        return out
    if out.ndim == 3 and batch >= workers:
        parts = [(a[s:e] if a.ndim == 3 else a, b[s:e] if b.ndim == 3 else b, out[s:e])
                 for s, e in split(batch, workers)]
    elif n >= m:
        parts = [(a, b[..., s:e], out[..., s:e]) for s, e in split(n, workers)]
    else:
        parts = [(a[..., s:e, :], b, out[..., s:e, :]) for s, e in split(m, workers)]
    run([functools.partial(np.matmul, x, y, out=o) for x, y, o in parts])
    return out


class NumpyRunner(Runner):
    """The NumPy transformer's ``Runner`` (``KernelContext.runner``): sections split over this module's workers
    (``threads``, ``run``), GEMMs through ``matmul`` (split when big), ``blas_matmul`` and ``product``."""

    def threads(self) -> int:
        return threads()

    def run(self, tasks: Sequence[Callable[[], Any]]) -> None:
        run(tasks)  # the module's function (a method's body does not see the class's names)

    def matmul(self, size: int | None = None, blas_threads: bool = False) -> Callable[[Any, Any, Any], Any]:
        """Split over the workers (BLAS at one thread); with ``blas_threads``, a GEMM of a computation with no
        section of our own, one call on BLAS's threads; a GEMM of ``size`` multiply-adds too small to split,
        ``numpy.matmul`` straight (no per-call checks: a batch-1 LSTM step has three)."""
        workers = threads()  # read once, when the kernel is made (no environment lookup per call)
        if blas_threads and workers > 1 and size is not None and size >= MIN_PARALLEL_FLOPS:
            return lambda a, b, out: blas_matmul(a, b, out, workers)
        if size is None or (workers > 1 and size >= MIN_PARALLEL_FLOPS):
            return lambda a, b, out: matmul(a, b, out, workers)
        return lambda a, b, out: np.matmul(a, b, out=out)

    def product(self) -> Callable[[Any, Any, Any], Any]:
        """``product``: a GEMM of 2-4 columns by ``narrow_gemm``'s compiled loop, else BLAS."""
        return product
