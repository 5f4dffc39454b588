"""Fused element-wise programs compiled by numba: one loop over the data, every step in registers.

By default (``NG_KERNELS=auto``) programs over ``COMPILED_MIN_ELEMENTS`` elements or more run
compiled, smaller ones on the shared blocked kernel of ``kernels/fused.py``, which stays the
reference; ``NG_KERNELS=numba`` compiles every program numba supports, ``NG_KERNELS=numpy`` none.
Large programs split their outermost axis over the runtime's workers. numba compiles for NumPy
arrays only, so this is not a shared ``xp`` kernel: the NumPy transformer installs ``fused`` below
as its override of the ``fused`` kernel (``kernel_overrides``), as the CuPy transformer installs
its own.

For each ``FusedProgram`` this module generates the source of one
``@njit(cache=True)`` function that walks the output once and evaluates every step of the
program per element, with no temporaries. Steps compute in the op's dtype exactly as the NumPy
step functions do (each step's value is rounded to the dtype; comparisons give 0/1; sigmoid is
``1 / (1 + exp(min(-x, L)))`` with ``L = floor(log(max of dtype))``, which agrees with NumPy's
uncapped form except below the normal range, where both give at most twice the smallest normal),
so arithmetic agrees bit for bit and transcendental functions to within the libm's last-place
differences.

Caching: compiled functions are kept in-process by the program's canonical text, and on disk by
numba's own cache: the generated source is written (once, atomically) to
``$NG_CACHE_DIR/kernels/<hash>.py`` (default ``~/.cache/ngraph/kernels``), imported as a module,
and numba stores its machine code beside it, so a second process compiles nothing. Generated
code contains only generated identifiers and numeric literals, never names from the graph. numba
reads its cache back with pickle, so the cache is used only while no other user can write it
(``kernel_cache.py``: directories created 0700; a cache another user owns or can write is refused
with a ``KernelCacheWarning`` and kernels compile in a private temporary directory removed at exit).

Layouts: the output and the inputs (broadcast to the output's shape) have their dimensions
coalesced like NumPy's iterator does; contiguous data becomes one flat loop, a broadcast bias a
two-level loop, and an input that is one value everywhere is passed as a scalar.

Not supported (the NumPy kernel runs instead, silently): numba not importable, output dtypes
other than float32/float64, inputs of another dtype than the output used by any step other
than ``cast`` or the condition of ``where``, and OpTypes this generator does not know. By policy
(measured, see ``LIBM_STEPS``) programs with steps that would call libm once per element also stay
on NumPy unless ``COMPILE_LIBM_STEPS`` is set: log/log1p/sin/cos/pow always, exp/tanh/sigmoid in
float64. In float32, exp/tanh/sigmoid compile to vectorizable approximations (``VECTOR_MATH``:
within 3e-7 relative of NumPy's, exact at 0, +-inf, NaN, overflow and underflow): a fused
``sigmoid(a) * tanh(b) + exp(0.1 a)`` on 256x32 floats took about 30% less than on NumPy (measured:
benchmarks/RESULTS.md, "Behind the code: numpy/numba_kernels.py").

Memory safety: a generated loop indexes without bounds checks over the coalesced shape of the op's
output. Before it runs, every operand goes through ``np.broadcast_to`` to that shape and the output
through ``np.reshape(..., copy=False)``, which raise on any array that does not fit: no operand can be
shorter than the loop.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import FusedProgram, Op, OpType
from ..kernels.collective import communicator_of
from ..kernels.context import Kernel, KernelContext
from ..kernels.fused import PARALLEL_MIN_ELEMENTS, program_head
from ..kernels.fused import fused as numpy_fused
from . import runtime
from .kernel_cache import cache_dir as cache_dir  # re-exported: the tests read it here
from .numba_loader import FLOAT_DTYPES, HAVE_NUMBA, background_allowed, kernel_set, load_kernel, prepare

_UNARY = {
    OpType.NEG: "(-{0})", OpType.ABS: "abs({0})", OpType.EXP: "math.exp({0})", OpType.LOG: "math.log({0})",
    OpType.LOG1P: "math.log1p({0})", OpType.SQRT: "math.sqrt({0})", OpType.SQUARE: "({0} * {0})",
    OpType.RECIPROCAL: "(T(1.0) / {0})", OpType.TANH: "math.tanh({0})", OpType.SIN: "math.sin({0})",
    OpType.COS: "math.cos({0})", OpType.RSQRT: "(T(1.0) / math.sqrt({0}))", OpType.CAST: "{0}",
    OpType.SIGN: "(T(1.0) if {0} > 0 else (T(-1.0) if {0} < 0 else (T(0.0) if {0} == 0 else {0})))",
    OpType.RELU: "({0} if {0} >= 0 or {0} != {0} else T(0.0))",  # np.maximum(x, 0): NaN propagates
}
_BINARY = {
    OpType.ADD: "({0} + {1})", OpType.SUB: "({0} - {1})", OpType.MUL: "({0} * {1})", OpType.DIV: "({0} / {1})",
    OpType.POW: "({0} ** {1})",
    OpType.MAXIMUM: "({0} if {0} >= {1} or {0} != {0} else {1})",  # NaN of either operand propagates
    OpType.MINIMUM: "({0} if {0} <= {1} or {0} != {0} else {1})",
    OpType.EQUAL: "(T(1.0) if {0} == {1} else T(0.0))", OpType.NOT_EQUAL: "(T(1.0) if {0} != {1} else T(0.0))",
    OpType.LESS: "(T(1.0) if {0} < {1} else T(0.0))", OpType.LESS_EQUAL: "(T(1.0) if {0} <= {1} else T(0.0))",
    OpType.GREATER: "(T(1.0) if {0} > {1} else T(0.0))",
    OpType.GREATER_EQUAL: "(T(1.0) if {0} >= {1} else T(0.0))",
}
_VECTOR_UNARY = {OpType.EXP: "_exp({0})", OpType.TANH: "_tanh({0})"}
SUPPORTED = frozenset(_UNARY) | frozenset(_BINARY) | {OpType.SIGMOID, OpType.WHERE}
"""The element-wise OpTypes the generator compiles; a program with any other step runs on NumPy."""

LIBM_STEPS = frozenset({OpType.EXP, OpType.LOG, OpType.LOG1P, OpType.TANH, OpType.SIN, OpType.COS, OpType.POW,
                        OpType.SIGMOID})
"""Steps numba evaluates with one scalar libm call per element: LLVM cannot vectorize them (this llvmlite
has no SVML), and NumPy's SIMD loops are several times faster: compiled, ``sigmoid(a) * tanh(b) + c`` took
four times as long as NumPy's blocked kernel, where ``a * b + c * 0.5 - a`` took less (measured:
benchmarks/RESULTS.md, "Behind the code: numpy/numba_kernels.py"). So by default a program with such a step keeps the
NumPy kernel (float32 exp, tanh and sigmoid excepted: ``VECTOR_STEPS_FLOAT32``)."""

VECTOR_STEPS_FLOAT32 = frozenset({OpType.EXP, OpType.TANH, OpType.SIGMOID})
"""Steps that float32 programs compute with the vectorizable approximations of ``VECTOR_MATH`` (no libm call,
so LLVM vectorizes the loop): exp by Cody-Waite range reduction and a degree-7 polynomial (at most 3 ulp from
NumPy's float32 exp, relative error < 1e-7 for normal results), ``2**k`` built from its exponent bits; tanh as
``1 - 2 / (exp(2|x|) + 1)`` with an odd Taylor polynomial below 0.3 (relative error < 3e-7); sigmoid as
``1 / (1 + exp(-x))``. float64 programs keep libm (they are the precise path: gradient checks)."""

VECTOR_MATH = '''
F = float32
_LOG2E, _LN2_HI, _LN2_LO = F(1.4426950408889634), F(0.693359375), F(-2.12194440e-4)


@njit(inline="always", fastmath={"contract"})
def _exp(x):
    y = F(89.0) if x > F(89.0) else x  # above log(max): 2**128 overflows to inf, as exp does
    y = F(-104.0) if y < F(-104.0) else y  # below: 2**-150 underflows to 0
    k = floor(y * _LOG2E + F(0.5))
    r = (y - k * _LN2_HI) - k * _LN2_LO
    p = F(1.0) + r * (F(1.0) + r * (F(0.5) + r * (F(1 / 6) + r * (F(1 / 24) + r * (F(1 / 120) + r * (
        F(1 / 720) + r * F(1 / 5040)))))))
    n = int32(k)
    h = n >> 1  # 2**k as two normal powers of two: k in [-150, 128]
    return p * int32((h + 127) << 23).view(float32) * int32((n - h + 127) << 23).view(float32)


@njit(inline="always", fastmath={"contract"})
def _tanh(x):
    a = abs(x)
    big = F(1.0) - F(2.0) / (_exp(F(2.0) * a) + F(1.0))
    z = x * x
    small = x * (F(1.0) + z * (F(-1 / 3) + z * (F(2 / 15) + z * (F(-17 / 315) + z * (F(62 / 2835) + z * F(
        -1382 / 155925))))))  # x * (...): tanh(-0.0) keeps its sign
    return small if a < F(0.3) else (big if x >= F(0.0) else -big)
'''


def libm_steps(dtype: str) -> frozenset[OpType]:
    """The steps that cost one scalar libm call per element for ``dtype`` (see ``LIBM_STEPS``)."""
    return LIBM_STEPS - VECTOR_STEPS_FLOAT32 if dtype == "float32" else LIBM_STEPS


MAX_ALIAS_VERSIONS = 4
"""Programs reading at most this many arrays get a loop version per input that may be ``out`` itself."""

COMPILE_LIBM_STEPS = False
"""True compiles programs with ``LIBM_STEPS`` too (the tests do, to check their semantics)."""

def _constant(value: Any) -> str:
    v = float(value)
    if math.isnan(v):
        return "T(math.nan)"
    if math.isinf(v):
        return "T(math.inf)" if v > 0 else "T(-math.inf)"
    return f"T({v!r})"  # repr round-trips the float64 exactly; T() rounds it as NumPy does a weak scalar


def generate_source(program: FusedProgram, dtype: str, modes: Sequence[str], ndim: int,
                    raw_inputs: frozenset[int] = frozenset()) -> str | None:
    """The Python source of a numba kernel ``k(out, *inputs)`` evaluating ``program``, or None.

    Args:
        program: the fused program (its head, if any, is already in ``out``: ``("d",)`` reads it).
        dtype: the output's dtype, ``"float32"`` or ``"float64"``.
        modes: per referenced input in order of first use: ``"a"`` (an array of ``out``'s shape),
            ``"r"`` (one value per row: an array of ``out``'s shape without its last dimension, read
            once before the innermost loop, which then vectorizes; ``ndim`` >= 2) or ``"s"`` (a scalar).
        ndim: the number of (coalesced) dimensions of ``out`` and the array inputs; 0 means 1.
        raw_inputs: input indices whose dtype differs from ``dtype`` (allowed only as the operand
            of ``cast`` or the condition of ``where``).

    Returns:
        The module source (one function ``k``), or None when a step is not supported.

    Example:
        >>> print(generate_source(prog, "float32", ["a", "a"], 1))  # for tanh(x0 * x1)
    """
    if dtype not in FLOAT_DTYPES:
        return None
    inputs = _referenced_inputs(program)
    index = {i: n for n, i in enumerate(inputs)}
    if len(modes) != len(inputs):
        return None
    nd = max(ndim, 1)
    vector = uses_vector_math(program, dtype)
    loop_ix = ", ".join(f"i{d}" for d in range(nd))
    if "r" in modes and nd < 2:
        return None
    row_ix = ", ".join(f"i{d}" for d in range(nd - 1))
    loads: list[str] = []
    row_loads: list[str] = []
    hoisted: list[str] = []
    for n, mode in enumerate(modes):
        if mode == "s":
            hoisted.append(f"x{n} = v{n}")
        elif mode == "r":
            row_loads.append(f"x{n} = v{n}[{row_ix}]")
        else:
            loads.append(f"x{n} = v{n}[{loop_ix}]")
    stepped = step_lines(program, dtype, lambda i: None if i in raw_inputs else f"x{index[i]}",
                         lambda i: f"x{index[i]}")
    if stepped is None:
        return None
    body, result = stepped
    params = "".join(f", v{n}" for n in range(len(inputs)))
    lines = [
        "# generated by ngraph_core.transformers.numba_kernels: do not edit",
        "import math",
        "",
        f"from numpy import {dtype} as T",
        "from numba import njit",
        *(["from numpy import float32, floor, int32", *VECTOR_MATH.splitlines()] if vector else []),
        "",
        "",
        '@njit(cache=True, fastmath=False, nogil=True, error_model="numpy")',
        f"def k(out{params}):",
    ]
    indent = "    "
    lines += [indent + h for h in hoisted]

    def loop(depth: int, alias: int | None) -> list[str]:
        """The loop nest at ``depth`` indents; input ``alias`` (if any) is read from ``out``."""
        nest = [indent * (depth + d) + f"for i{d} in range(out.shape[{d}]):" for d in range(nd)]
        nest[nd - 1:nd - 1] = [indent * (depth + nd - 1) + s for s in row_loads]  # before the innermost loop
        inner = indent * (depth + nd)
        if program.head is not None:
            nest.append(inner + f"d = out[{loop_ix}]")
        nest += [inner + (f"x{alias} = out[{loop_ix}]" if alias is not None and n == alias else s)
                 for n, s in zip([n for n, m in enumerate(modes) if m == "a"], loads)]
        nest += [inner + s for s in body]
        nest.append(inner + f"out[{loop_ix}] = {result}")
        return nest

    # An update written into its own input's buffer (p - lr * g into p) makes LLVM's runtime alias check
    # fail and run the loop scalar (measured 80 us against 28 us on 256K floats): a version per input
    # reads that input from ``out`` itself when it is exactly out's memory, which vectorizes.
    arrays = [n for n, m in enumerate(modes) if m == "a"]
    if arrays and len(arrays) <= MAX_ALIAS_VERSIONS:
        for k, n in enumerate(arrays):
            keyword = "if" if k == 0 else "elif"
            lines.append(indent + f"{keyword} v{n}.ctypes.data == out.ctypes.data and v{n}.strides == out.strides:")
            lines += loop(2, n)
        lines.append(indent + "else:")
        lines += loop(2, None)
    else:
        lines += loop(1, None)
    return "\n".join(lines) + "\n"


def uses_vector_math(program: FusedProgram, dtype: str) -> bool:
    """True when ``program``'s loop uses ``VECTOR_MATH`` (float32 with an exp, tanh or sigmoid step)."""
    return dtype == "float32" and any(kind in VECTOR_STEPS_FLOAT32 for kind, _ in program.steps)


def step_lines(program: FusedProgram, dtype: str, value: Callable[[int], str | None],
               raw: Callable[[int], str]) -> tuple[list[str], str] | None:
    """The statements evaluating ``program`` for one element, and the name holding its result, or None.

    Args:
        program: the fused program; ``("d",)`` (a head's value) reads the name ``d``.
        dtype: the output's dtype (``T`` in the generated module).
        value: input index -> the name of its element, or None where that input's dtype differs
            from ``dtype`` (then only ``cast`` and ``where``'s condition may read it).
        raw: input index -> the name of its element, for those two readers.

    Returns:
        ``(lines, result)``, or None when a step is not in ``SUPPORTED`` or reads a raw input.
    """
    vector = uses_vector_math(program, dtype)
    body: list[str] = []

    def operand(ref: tuple, raw_ok: bool) -> str | None:
        tag = ref[0]
        if tag == "t":
            return f"t{ref[1]}"
        if tag == "c":
            return _constant(ref[1])
        if tag == "d":
            return "d"
        return raw(ref[1]) if raw_ok else value(ref[1])

    for j, (kind, refs) in enumerate(program.steps):
        if kind not in SUPPORTED:
            return None
        if kind is OpType.WHERE:
            c, a, b = (operand(r, raw_ok=k == 0) for k, r in enumerate(refs))
            if None in (c, a, b):
                return None
            expr = f"({a} if {c} != 0 else {b})"
        elif kind is OpType.SIGMOID:
            x = operand(refs[0], raw_ok=False)
            if x is None:
                return None
            if vector:
                body.append(f"t{j} = T(T(1.0) / (_exp(-{x}) + T(1.0)))")
                continue
            limit = math.floor(math.log(float(np.finfo(dtype).max)))
            body.append(f"n{j} = -{x}")
            body.append(f"n{j} = n{j} if n{j} <= T({float(limit)!r}) or n{j} != n{j} else T({float(limit)!r})")
            expr = f"(T(1.0) / (math.exp(n{j}) + T(1.0)))"
        else:
            args = [operand(r, raw_ok=kind is OpType.CAST) for r in refs]
            if None in args:
                return None
            template = _VECTOR_UNARY[kind] if vector and kind in _VECTOR_UNARY else _UNARY.get(kind) or _BINARY[kind]
            expr = template.format(*args)
        body.append(f"t{j} = T({expr})")
    return body, f"t{len(program.steps) - 1}"


def _referenced_inputs(program: FusedProgram) -> list[int]:
    """The source indices the steps read, in order of first use."""
    seen: dict[int, None] = {}
    for _, refs in program.steps:
        for r in refs:
            if r[0] not in ("t", "c", "d"):
                seen.setdefault(r[1], None)
    return list(seen)


def _coalesce(shape: tuple[int, ...], strides: Sequence[tuple[int, ...]]) -> tuple[tuple[int, ...], list[tuple]]:
    """``shape`` with dimensions merged where every array's strides allow it, and each array's strides."""
    dims: list[tuple[int, list[int]]] = []
    for k, n in enumerate(shape):
        if n == 1:
            continue
        st = [s[k] for s in strides]
        if dims and all(ps == s * n for ps, s in zip(dims[-1][1], st)):
            dims[-1] = (dims[-1][0] * n, st)
        else:
            dims.append((n, st))
    if not dims:
        return (1,), [(0,) for _ in strides]
    return tuple(n for n, _ in dims), [tuple(d[1][a] for d in dims) for a in range(len(strides))]


def _mode(strides: tuple[int, ...]) -> str:
    """How the loop reads an input of these (coalesced) strides: ``"s"`` one value, ``"r"`` one per row (stride 0
    along the innermost dimension only), ``"a"`` one per element.

    An ``"a"`` input with a zero stride keeps LLVM from vectorizing the innermost loop: ``exp(x - max)`` of a
    softmax over 128-long rows ran scalar, 9.3 ms on 2M floats against 1.9 ms on NumPy (AMD EPYC, one thread)."""
    if all(s == 0 for s in strides):
        return "s"
    return "r" if len(strides) >= 2 and strides[-1] == 0 else "a"


def compiled_fused(op: Op, kc: KernelContext) -> Kernel | None:
    """The compiled kernel ``kernel(out, *inputs)`` for a ``fused`` op on NumPy, or None.

    None (the caller then uses the NumPy kernel) when numba is not importable, the backend is
    not NumPy, or the program has a step or dtype the generator does not support. The head
    (``dot``/``conv``) runs as in the NumPy kernel; the compiled loop is the epilogue, in place.

    Args:
        op: a ``fused`` op (its ``arg`` is a ``FusedProgram``).
        kc: the kernel context (``xp`` must be NumPy).

    Returns:
        The kernel, or None.

    Example:
        >>> kernel = compiled_fused(op, kc)  # with NG_KERNELS=numba, fused.fused calls this
    """
    if not HAVE_NUMBA or kc.xp is not np:
        return None
    program, dtype = op.arg, kc.dtype_of(op)
    if dtype not in FLOAT_DTYPES or not program.steps:
        return None
    inputs = _referenced_inputs(program)
    try:
        raw = frozenset(i for i in inputs if kc.dtype_of(op.src[i]) != dtype)
    except Exception:  # a source without a known dtype: let NumPy handle it
        return None
    if not COMPILE_LIBM_STEPS and any(kind in libm_steps(dtype) for kind, _ in program.steps):
        return None  # slower compiled than on NumPy (see LIBM_STEPS)
    # check support once, with every input an array (modes only change loads)
    if generate_source(program, dtype, ["a"] * len(inputs), 1, raw) is None:
        return None
    head = program_head(op, kc)
    shape = tuple(op.axes.lengths)
    plans: dict[tuple, tuple[Callable[..., Any], tuple[int, ...], list[Callable[[Any], Any]], Any]] = {}
    background = background_allowed(communicator_of(kc).size)
    fallback: list[Kernel] = []  # the shared NumPy kernel, made when first needed: while numba compiles

    def plan(key: tuple, out: Any, arrays: Sequence[Any]) -> tuple:
        """The dispatcher for these layouts, the coalesced shape, how to pass each input, and its ``Pending``
        (``numba_loader.prepare``: compiled now, or in the background while the fallback runs)."""
        views = [np.broadcast_to(a, shape) for a in arrays]
        cshape, strides = _coalesce(shape, [out.strides] + [v.strides for v in views])
        modes = [_mode(st) for st in strides[1:]]
        source = generate_source(program, dtype, modes, len(cshape), raw)
        assert source is not None  # support was checked when the kernel was made
        preps: list[Callable[[Any], Any]] = []
        for a, mode in zip(arrays, modes):
            if mode == "s":  # one value everywhere: a scalar argument
                preps.append(lambda a: a.reshape(-1)[0] if a.size == 1 else a[(0,) * a.ndim])
            elif mode == "r":  # one value per row (a softmax's max or sum broadcast along it): the rows' values
                preps.append(lambda a: np.reshape(np.broadcast_to(a, shape), cshape, copy=False)[..., 0])
            elif a.shape == cshape:  # as it is (strided or not): numba indexes it directly
                preps.append(lambda a: a)
            elif a.shape == shape and a.flags.c_contiguous:  # a view, no broadcast needed
                preps.append(lambda a: a.reshape(cshape))
            else:  # copy=False: a layout that would need a copy is an error, never a silent copy
                preps.append(lambda a: np.reshape(np.broadcast_to(a, shape), cshape, copy=False))
        fn = load_kernel(source)
        o = out if out.shape == cshape else np.reshape(out, cshape, copy=False)
        pending = prepare(fn, [o, *(prep(a) for prep, a in zip(preps, arrays))], background)
        found = plans[key] = (fn, cshape, preps, pending)
        return found

    def numpy_kernel() -> Kernel:
        """The shared blocked kernel (``kernels/fused.py``) with scratch of its own: made at the first call
        that needs it, after the computation's workspace was allocated."""
        if not fallback:
            fallback.append(numpy_fused(op, dataclasses.replace(kc, workspace=None)))
        return fallback[0]

    workers = runtime.threads() if math.prod(shape) >= PARALLEL_MIN_ELEMENTS else 1

    def compiled_kernel(out, *vs):
        arrays = [np.asarray(vs[i]) for i in inputs]
        key = (out.strides,) + tuple((a.shape, a.strides) for a in arrays)
        fn, cshape, preps, pending = plans.get(key) or plan(key, out, arrays)
        if not pending.done:  # numba is still compiling this loop (NG_COMPILE=background)
            return numpy_kernel()(out, *vs)
        if fallback:
            fallback.clear()  # compiled from here on: its scratch is freed
        if head is not None:
            head(out, vs[0], vs[1])
        o = out if out.shape == cshape else np.reshape(out, cshape, copy=False)
        args = [prep(a) for prep, a in zip(preps, arrays)]
        if workers == 1 or cshape[0] < workers:
            fn(o, *args)
        else:  # the outermost coalesced axis split over the runtime's workers (the loop releases the GIL)
            runtime.run([functools.partial(fn, o[s:e], *(a[s:e] if isinstance(a, np.ndarray) else a for a in args))
                         for s, e in runtime.split(cshape[0], workers)])
        return out

    return compiled_kernel


COMPILED_MIN_ELEMENTS = 1 << 18
"""Under ``NG_KERNELS=auto`` (the default) a fused program over at least this many elements runs compiled.

Measured at 2 threads, default against ``NG_KERNELS=numba``: compiled, the CNN and DCGAN steps were faster and
ResNet-20's the same (figures: benchmarks/RESULTS.md, "Behind the code: numpy/numba_kernels.py"). Their big fused
programs (batch-norm and activation epilogues over 400K-4M elements) make several NumPy passes per 64K-element
block; the compiled loop makes one. Small programs stay on NumPy: there compiling did not pay (the LSTM step took
the same either way, RESULTS.md), and every distinct program costs a compile on a machine's first run.
"""


def wanted(elements: int | None = None) -> bool:
    """True when a fused program over ``elements`` elements (None: any size) is to be compiled."""
    chosen = kernel_set()
    return chosen == "numba" or (chosen == "auto" and elements is not None and elements >= COMPILED_MIN_ELEMENTS)


def fused(op: Op, kc: KernelContext) -> Kernel:
    """The NumPy transformer's ``fused`` kernel: the compiled loop where ``wanted`` and numba supports the
    program, else the shared blocked kernel (``kernels/fused.py``)."""
    kernel = compiled_fused(op, kc) if wanted(op.axes.size) else None
    return kernel if kernel is not None else numpy_fused(op, kc)

