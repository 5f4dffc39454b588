"""The NumPy transformer's ``fused_attention`` kernel: the shared tiled kernel with a compiled softmax step.

The shared kernel (``kernels/attention.py``) multiplies its tiles with BLAS and updates the online
softmax between the two GEMMs. Written against ``xp`` that update is some ten whole-tile passes (mask,
row maximum, subtract, exp, row sum, rescale); here it is one numba function, three sweeps per row (the
maximum; ``exp`` as a polynomial; scale and sum) that vectorize. On one 256 x 512 tile (D=64, one thread,
the 2-core EPYC of docs/attention.md, medians of 21) the float32 step took 809 us in NumPy, 278-504 us
compiled with ``math.exp`` (a call per element) and 114 us as below, beside 351 us for the tile's two
GEMMs (float64: 1352 us, 351 us and 173 us, beside 730 us).

The step's source is static and goes through the kernel disk cache (``numba_loader.load_kernel``). Until
numba has compiled it (``NG_COMPILE``: in the background by default) the kernel runs the NumPy step;
``NG_KERNELS=numpy``, a missing numba or a dtype other than float32/float64 keep the NumPy step.

Memory safety: the loop indexes without bounds checks. Its bounds are ``rows <= s.shape[0]`` and
``width <= s.shape[1]``, which the shared kernel derives from the op's axes and its own scratch shapes
(``QUERY_BLOCK``, ``KEY_BLOCK``), and ``hi``, ``m``, ``l`` and ``acc`` have ``s.shape[0]`` rows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from ...ir import Op
from ..kernels import attention as shared
from ..kernels.collective import communicator_of
from ..kernels.context import Kernel, KernelContext
from .numba_loader import FLOAT_DTYPES, HAVE_NUMBA, Pending, background_allowed, load_kernel, prepare, reference_only

_STEP = """\
from numba import njit
import numpy as np

F = np.{float}
LOG2E = F(1.4426950408889634)
LN2_HI = F({ln2_hi})
LN2_LO = F({ln2_lo})
LOWEST = F({lowest})


@njit(cache=True, nogil=True, fastmath={{"reassoc", "contract", "nsz"}})
def k(s, m, l, acc, hi, rows, width, start):
    bits = np.empty(s.shape[1], np.{int})
    two = bits.view(F)
    for i in range(rows):
        seen = min(max(hi[i] - start, 0), width)
        row = s[i]
        if seen == 0:
            for j in range(width):
                row[j] = 0
            continue
        top = m[i]
        for j in range(seen):
            top = max(top, row[j])
        scale = np.exp(m[i] - top)
        for j in range(seen):
            x = max(row[j] - top, LOWEST)
            n = np.floor(x * LOG2E + F(0.5))
            r = x - n * LN2_HI - n * LN2_LO
            row[j] = {poly}
            bits[j] = (np.{int}(n) + {bias}) << {shift}
        total = F(0)
        for j in range(seen):
            p = row[j] * two[j]
            row[j] = p
            total += p
        for j in range(seen, width):
            row[j] = 0
        l[i] = l[i] * scale + total
        m[i] = top
        if scale != 1:
            for d in range(acc.shape[1]):
                acc[i, d] *= scale
"""
"""``k(s, m, l, acc, hi, rows, width, start)``: ``kernels/attention.softmax_step``'s update, one row at a time:
the row's maximum, then ``exp(x - max)`` as ``2^n * e^r`` (``n = round(x / ln 2)``, ``|r| <= ln(2) / 2``, the
Taylor polynomial of ``e^r`` in Horner form, ``2^n`` made from its exponent bits), then the row sum. Unlike
``math.exp`` (a call per element) these loops vectorize. ``x`` is clamped at ``LOWEST`` so ``2^n`` stays a
normal number: a weight below ``e^LOWEST`` (1.6e-38 in float32) is taken as that, not 0."""

_CONSTANTS = {  # Cody-Waite split of ln 2; the polynomial's degree makes its error below the dtype's epsilon
    "float32": dict(int="int32", ln2_hi="0.693359375", ln2_lo="-2.12194440e-4", lowest="-87.0", bias=127, shift=23,
                    degree=7),  # truncation (ln 2 / 2)^8 / 8! = 5e-10
    "float64": dict(int="int64", ln2_hi="6.93147180369123816490e-01", ln2_lo="1.90821492927058770002e-10",
                    lowest="-708.0", bias=1023, shift=52, degree=13),  # (ln 2 / 2)^14 / 14! = 4e-18
}


def step_source(dtype: str) -> str:
    """The numba source of the softmax step for ``dtype`` (float32 or float64).

    Example:
        >>> "np.float32" in step_source("float32")
        True
    """
    constants = dict(_CONSTANTS[dtype])
    degree = constants.pop("degree")
    poly = f"F({1 / math.factorial(degree)!r})"
    for d in range(degree - 1, -1, -1):
        poly = f"({poly} * r + F({1 / math.factorial(d)!r}))"
    return _STEP.format(float=dtype, poly=poly, **constants)


@functools.cache
def compiled_step(dtype: str) -> Callable[..., Any]:
    """The numba dispatcher of ``step_source(dtype)``, from the kernel disk cache."""
    return load_kernel(step_source(dtype))


def attention(op: Op, kc: KernelContext) -> Kernel:
    """The NumPy transformer's ``fused_attention`` kernel: the compiled step where eligible, else the shared one."""
    dtype = kc.dtype_of(op)
    if not HAVE_NUMBA or reference_only() or dtype not in FLOAT_DTYPES:
        return shared.attention(op, kc)
    fn, fallback = compiled_step(dtype), shared.softmax_step(kc.xp)
    background = background_allowed(communicator_of(kc).size)
    pending: list[Pending] = []

    def ready(scratch: list[Any]) -> shared.Step:
        if not pending:  # the first call: load or compile (NG_COMPILE) for the scratch's types
            pending.append(prepare(fn, (*scratch, 0, 0, 0), background))
        return fn if pending[0].done else fallback

    return shared.attention(op, kc, ready=ready)
