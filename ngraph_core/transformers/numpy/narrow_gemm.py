"""GEMMs with few columns, compiled by numba: each row of the left operand is read from memory once.

``out[M, n] = a[M, K] @ b[K, n]`` with ``n`` of 2 to 4 is what a batch-1 convolution of a small map is under
im2col (ResNet-18 on 32x32 images: ``[256, 2304] @ [2304, 4]`` at the 2x2 stage) and what a dense layer in neon's
batch-last layout is at batch 2-4. OpenBLAS packs ``a`` for so few columns; the loop here took a third to a half
of its time, in cache and from memory. With one column BLAS's GEMV was as fast (before the quartered rows below;
see ``conv_channels_last.MIN_LOOP_DEPTH`` for one column now).

The loop (``times_transposed``, ``out = a @ btᵀ``) holds a block of four rows of ``a`` and four rows of
``bt`` (four columns of the product) and runs their sixteen dot products together, sixteen sums in
registers, vectorized along the depth (sums reassociated, ``fastmath``, as BLAS's blocked sums are:
results agree with NumPy's matmul to rounding). Every column block reuses the same four rows of ``a`` from L1, so
``a`` (the weights) streams from memory once whatever the column count, and nothing is packed. The four rows are
``i, i + q, i + 2q, i + 3q`` (``q``: a quarter of the rows), so each of the four read streams runs on through
memory from one block to the next; with four adjacent rows three streams started anew at every block. Quartered
rows took a quarter less time than adjacent ones over the 17 MB of a batch-1 ResNet-18's weights cycled as in an
inference.

With ``bt`` given transposed (the channels-last col matrix of ``numpy/conv_channels_last.py``) it beat OpenBLAS
at every column count a small-map convolution has, in cache and with the weights cycled as in an inference; the
whole cycle of a batch-1 ResNet-18's 20 weight matrices took about 40% less with this loop for every product of 2
or more columns: BLAS's packed copies of the weights also pushed other layers' weights out of this VM's share of
the L3 (figures for this module: benchmarks/RESULTS.md, "Behind the code: numpy/narrow_gemm.py").

``runtime.matmul`` calls ``run`` first (2-4 columns, ``b`` as it comes: the loop transposes it); it
declines (returns False) unless numba imports, ``NG_KERNELS`` is not ``numpy``, the arrays are 2-d NumPy
arrays of one float dtype, ``a`` is C-contiguous and big enough (``MIN_ELEMENTS``). The source is static
and goes through the kernel disk cache (``numba_loader.load_kernel``).

Memory safety: the loops index without bounds checks, so each generated kernel first compares its
operands' shapes (``a``, ``bt``, ``out`` and the epilogue's ``bias`` and ``res``) with the extents it will
index and raises ``ValueError`` before any read when one falls short: a check of a few integers per call,
whatever the caller (the channels-last convolution builds its operands from a verified graph's axes).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .numba_loader import FLOAT_DTYPES, HAVE_NUMBA, load_kernel, reference_only

MAX_COLUMNS = 4
"""``run`` takes products of 2 to this many columns (BLAS's packed kernel wins from 5 on when ``b`` must be
transposed first: a transposed copy of a wide ``b`` costs more than the packing saves)."""

MIN_ELEMENTS = 1 << 14
"""Left operands smaller than this stay on BLAS: the compiled call and the column copy cost ~2 us."""

_FMAS = "".join(f"                v = w{d}[r]\n" + "".join(f"                s{d}{c} += v * x{c}\n" for c in range(4))
                for d in range(4))
"""The loop body: row ``d``'s element times each column's, into the sums ``s<d><c>`` (sixteen in registers)."""

EPILOGUE_STEPS = ("bias", "add", "relu")
"""What the loop may apply to each sum as it stores it (``compiled(dtype, epilogue)``, in the given order):
``bias``: add ``bias[row]``; ``add``: add ``res[row, column]``; ``relu``: ``max(v, 0)``, NaN kept."""

_EPILOGUE_LINES = {"bias": "v = v + bias[row]", "add": "v = v + res[row, col]",
                   "relu": "v = v if v >= 0 or v != v else T(0.0)"}

_EPILOGUE = '''

@njit(cache=True, nogil=True)
def epilogue(v, bias, res, row, col):
    # no fastmath here: each step rounds as NumPy's separate ufuncs do
{lines}    return v
'''


def _epilogue_lines(dtype: str, epilogue: tuple[str, ...]) -> str:
    """The epilogue function's body; the sources are made only from this module's text, a float dtype's name
    and steps of ``EPILOGUE_STEPS`` (anything else is refused before it could reach a source)."""
    if dtype not in FLOAT_DTYPES or any(step not in _EPILOGUE_LINES for step in epilogue):
        raise ValueError(f"narrow_gemm: expected a dtype in {FLOAT_DTYPES} and epilogue steps among "
                         f"{EPILOGUE_STEPS}, received {dtype!r} and {epilogue!r}")
    return "".join(f"    {_EPILOGUE_LINES[step]}\n" for step in epilogue)


def _operand_checks(epilogue: tuple[str, ...], rows: str = "rows", cols: str = "cols") -> str:
    """The extra conditions of the kernels' shape check: the epilogue's operands cover the output."""
    checks = ""
    if "bias" in epilogue:
        checks += f" or bias.shape[0] < {rows}"
    if "add" in epilogue:
        checks += f" or res.shape[0] < {rows} or res.shape[1] < {cols}"
    return checks


def _stores(epilogue: tuple[str, ...]) -> str:
    rows = ("i", "i + q", "i + 2 * q", "i + 3 * q")
    if not epilogue:
        return "".join(f"                out[{rows[d]}, j + {c}] = s{d}{c}\n" for d in range(4) for c in range(4))
    return "".join(f"                out[{rows[d]}, j + {c}] = epilogue(s{d}{c}, bias, res, {rows[d]}, j + {c})\n"
                   for d in range(4) for c in range(4))


_SOURCE = '''\
# generated by ngraph_core.transformers.narrow_gemm: do not edit
import numpy as np
from numba import njit, prange
from numpy import {dtype} as T
{epilogue}

@njit(cache=True, nogil=True, parallel={parallel}, fastmath={{"reassoc", "contract", "nsz", "arcp"}})
def k(a, bt, out{params}):
    rows, depth = a.shape
    cols = bt.shape[0]
    # the loop indexes without bounds checks: operands that disagree stop here (checks_operands)
    if bt.shape[1] < depth or out.shape[0] < rows or out.shape[1] < cols{operand_checks}:
        raise ValueError("narrow_gemm: operand shapes disagree (a bug in ngraph_core: please report it)")
    last_row, last_col = rows - 1, cols - 1
    q = (rows + 3) // 4
    for i in {range}(q):
        # rows i, i + q, i + 2q, i + 3q: four streams that each run on through a's memory block after block
        # (a row past the end reads the last row again and is not written; so does a last column)
        w0, w1, w2, w3 = a[i], a[min(i + q, last_row)], a[min(i + 2 * q, last_row)], a[min(i + 3 * q, last_row)]
        for j in range(0, cols, 4):
            c0, c1, c2, c3 = bt[j], bt[min(j + 1, last_col)], bt[min(j + 2, last_col)], bt[min(j + 3, last_col)]
            s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = T(0.0)
            s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = T(0.0)
            for r in range(depth):
                x0, x1, x2, x3 = c0[r], c1[r], c2[r], c3[r]
{fmas}            if i + 3 * q < rows and j + 4 <= cols:  # a whole block: sixteen stores, no tuple indexing
{stores}            else:
                sums = ((s00, s01, s02, s03), (s10, s11, s12, s13), (s20, s21, s22, s23), (s30, s31, s32, s33))
                for d in range(4):
                    if i + d * q < rows:
                        for c in range(min(4, cols - j)):
                            out[i + d * q, j + c] = {partial}
'''


def available(dtype: Any) -> bool:
    """True when ``times_transposed`` can run for ``dtype``: numba imports, the dtype is float32 or float64,
    and ``NG_KERNELS`` is not ``numpy``."""
    return HAVE_NUMBA and np.dtype(dtype).name in FLOAT_DTYPES and not reference_only()


def compiled(dtype: Any, epilogue: tuple[str, ...] = (), parallel: bool = False) -> Callable[..., None]:
    """The compiled loop for ``dtype`` (``available`` must hold): ``k(a, bt, out)``, ``out[M, n] = a[M, K] @
    bt[n, K]ᵀ``, ``a`` and ``bt`` C-contiguous, ``out`` any strides. A kernel that calls it on every run
    looks it up once: ``dtype.name`` alone costs ~2 us a call.

    With ``epilogue`` (steps of ``EPILOGUE_STEPS``, in order) it is ``k(a, bt, out, bias, res)`` and each sum
    goes through them as it is stored: a fused conv + bias + residual + relu in one pass (``bias``: ``(M,)``,
    ``res``: ``(M, n)``, any strides; an array a step does not read may be any array of the dtype).

    ``parallel``: the blocks of rows shared out over numba's threads (``prange``; see ``parallel_call``)."""
    name = np.dtype(dtype).name
    key = (name, tuple(epilogue), parallel)
    kernel = _kernels.get(key)
    if kernel is None:
        lines = _epilogue_lines(name, epilogue)
        kernel = _kernels[key] = load_kernel(_SOURCE.format(
            dtype=name, fmas=_FMAS, stores=_stores(tuple(epilogue)),
            epilogue=_EPILOGUE.format(lines=lines) if epilogue else "",
            params=", bias, res" if epilogue else "", parallel=parallel, range="prange" if parallel else "range",
            operand_checks=_operand_checks(tuple(epilogue)),
            partial="epilogue(sums[d][c], bias, res, i + d * q, j + c)" if epilogue else "sums[d][c]"))
    return kernel


_STORE_SOURCE = '''\
# generated by ngraph_core.transformers.narrow_gemm: do not edit
import numpy as np
from numba import njit
from numpy import {dtype} as T
{epilogue}

@njit(cache=True, nogil=True)
def k(src, out, bias, res):
    rows, cols = out.shape
    if src.shape[0] < cols or src.shape[1] < rows{operand_checks}:
        raise ValueError("narrow_gemm: operand shapes disagree (a bug in ngraph_core: please report it)")
    for j0 in range(0, cols, 16):  # 16 of src's rows at a time: their elements are read along out's rows
        j1 = min(j0 + 16, cols)
        for i in range(rows):
            for j in range(j0, j1):
                out[i, j] = {value}
'''


def transposed_store(dtype: Any, epilogue: tuple[str, ...] = ()) -> Callable[..., None]:
    """``k(src, out, bias, res)``: ``out[i, j] = src[j, i]`` through the ``epilogue`` steps (as ``compiled``'s):
    a product computed transposed (``[n, M]``, BLAS's better orientation for a shallow ``a`` and many
    columns) stored as ``[M, n]`` with its bias, residual and relu in the same pass."""
    name = np.dtype(dtype).name
    key = ("store", name, tuple(epilogue))
    kernel = _kernels.get(key)
    if kernel is None:
        lines = _epilogue_lines(name, epilogue)
        kernel = _kernels[key] = load_kernel(_STORE_SOURCE.format(
            dtype=name, epilogue=_EPILOGUE.format(lines=lines) if epilogue else "",
            value="epilogue(src[j, i], bias, res, i, j)" if epilogue else "src[j, i]",
            operand_checks=_operand_checks(tuple(epilogue))))
    return kernel


_PROBE_SOURCE = '''\
# generated by ngraph_core.transformers.narrow_gemm: do not edit
from numba import njit, prange


@njit(cache=True, parallel=True)
def k(x):
    for i in prange(x.shape[0]):
        x[i] += 1.0
'''

SPIN_ROUNDS = 10_000
"""``GOMP_SPINCOUNT`` set for numba's OpenMP threads when the user has not (see ``threadsafe_layer``)."""

_threadsafe: list[bool] = []  # [whether numba's threading layer takes launches from several threads], once known


def threadsafe_layer() -> bool:
    """True when numba's parallel loops run on a threading layer that takes launches from several threads at
    once (OpenMP or TBB): an inference engine runs computations in several threads, and numba's fallback
    layer (``workqueue``) aborts the process on concurrent launches. Asked for once (``threadsafe``, unless
    ``NUMBA_THREADING_LAYER`` chooses), on a probe loop; False (and a warning) when none loads. Sets
    ``GOMP_SPINCOUNT`` (``SPIN_ROUNDS``) unless it is set, before OpenMP loads."""
    if not _threadsafe:
        try:
            import numba

            if not os.environ.get("NUMBA_THREADING_LAYER"):
                numba.config.THREADING_LAYER = "threadsafe"
            # OpenMP's threads spin ~300K rounds after a loop by default, and took the runtime's workers'
            # core: ResNet-18 at batch 32, two threads, 1.37 -> 1.88x onnxruntime. 10K rounds keep the next
            # layer's launch cheap (batch 1: 0.99 ms) and give the core back (batch 32: 1.31x).
            os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_ROUNDS))
            load_kernel(_PROBE_SOURCE)(np.zeros(2))
            _threadsafe.append(numba.threading_layer() in ("omp", "tbb"))
        except Exception as exc:  # noqa: BLE001 - any failure to load a layer means: no parallel loops
            warnings.warn(f"narrow_gemm: numba has no thread-safe threading layer ({exc}); the compiled GEMMs of "
                          "small convolutions run on one thread; hint: install OpenMP (libgomp) or tbb",
                          RuntimeWarning, stacklevel=2)
            _threadsafe.append(False)
    return _threadsafe[0]


def parallel_loop(dtype: Any, epilogue: tuple[str, ...], threads: int) -> Callable[..., None] | None:
    """``compiled(dtype, epilogue)`` with its blocks of rows shared out over ``threads`` of numba's threads
    (OpenMP's team: a launch costs ~1.6 us here, against 35-75 us for a hand-off to one of the runtime's
    workers), or None where numba has no thread-safe threading layer (``threadsafe_layer``)."""
    if threads < 2 or not threadsafe_layer():
        return None
    import numba

    kernel = compiled(dtype, epilogue, parallel=True)
    count = min(threads, numba.config.NUMBA_NUM_THREADS)
    set_threads = numba.set_num_threads

    def parallel_kernel(*args):
        set_threads(count)  # (numba's count is per launching thread)
        kernel(*args)

    return parallel_kernel


def times_transposed(a: Any, bt: Any, out: Any) -> Any:
    """``out[M, n] = a[M, K] @ bt[n, K]ᵀ`` by the compiled loop (``available`` must hold).

    Args:
        a: C-contiguous ``(M, K)``.
        bt: C-contiguous ``(n, K)``, of ``a``'s dtype.
        out: ``(M, n)`` of that dtype, any strides.

    Returns:
        ``out``.
    """
    compiled(out.dtype)(a, bt, out)
    return out


def run(a: Any, b: Any, out: Any) -> bool:
    """``out = a @ b`` by the compiled loop, if it takes this product (see the module docstring); False
    when it declines and the caller runs BLAS."""
    cols = b.shape[-1] if b.ndim == 2 else 0
    if not (2 <= cols <= MAX_COLUMNS and a.ndim == 2 and out.ndim == 2 and a.size >= MIN_ELEMENTS and HAVE_NUMBA):
        return False
    dtype = out.dtype
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and dtype.name in FLOAT_DTYPES
            and a.dtype == b.dtype == dtype and a.flags.c_contiguous) or reference_only():
        return False
    times_transposed(a, np.ascontiguousarray(b.T), out)
    return True


_kernels: dict[tuple, Any] = {}  # (["store",] dtype name, epilogue) -> the loaded dispatcher
