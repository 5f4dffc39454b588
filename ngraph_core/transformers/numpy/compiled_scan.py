"""The ``scan`` loop compiled whole: one numba function runs every step of a small body.

The shared kernel (``kernels/scan.py``) calls the body's plan once per step from Python. For a
batch-1 LSTM cell that is five kernel calls and a few slices a step, ~17 us, where onnxruntime
runs a whole 16-step sequence in 28 us: at small sizes the loop is dispatch, not arithmetic.
Here the body's compiled graph (after fusion) becomes the source of one ``@njit`` function that
holds the whole loop: views are expressions, element-wise ops and fused programs are loops with
their steps in registers (``numba_kernels.step_lines``: the same arithmetic as the fused kernels),
and a ``dot`` is one call of the BLAS NumPy itself uses (``cblas_?gemm``, linked by symbol name
through ``numba.types.ExternalFunction``, so numba's disk cache keeps the machine code). BLAS runs
at the runtime's one thread (``runtime.own_cores``); the loop is one call, however many steps.

Semantics are the shared kernel's: the states are copied in, each step reads the previous one,
saved states (``save_states``) are written to their pre-step slots, outputs and kept values to
their step's slot, the final states last. Every body value has a buffer of its own, allocated once
per call, so no value is overwritten while a later op of the step still reads it.

Used (``scan`` below, the NumPy transformer's override) when ``NG_KERNELS`` is not ``numpy`` (under
``auto``, the default, from a scan's ``HOT_CALLS``-th call: a compile costs ~1 s per distinct body),
numba imports, the BLAS exports ``cblas_sgemm``/``cblas_dgemm`` (possibly ``scipy_``-prefixed and
``64_``-suffixed, as NumPy's wheels ship it), the scan has no valid lengths, every value is float32
or float64 of one dtype, and every op of the body is a placeholder, ``cast_axes``, ``slice``,
``broadcast``, ``constant`` (passed in as an argument), a ``dot`` of two matrices (one free and one
shared axis each; a fused program's ``dot`` head too), or an element-wise op or fused program that
``numba_kernels`` supports, whose operands have the op's own shape; no value is a scalar. Anything
else (valid lengths, a reduction or a random op in the body, a debug tap) runs the shared kernel,
silently. Generated code contains only generated identifiers and numeric literals.

Memory safety: the loop indexes without bounds checks. Its bounds, offsets and slices are the body
graph's axes and ``slice`` args, which ``ir.infer`` checked against their axes when the graph was built
or decoded and ``compile_graph`` verified again; each call then checks that every operand has its op's
shape (``VerifyError`` otherwise) before the loop starts.

Measured with ``benchmarks/onnx_latency.py --models lstm``: the ONNX LSTM classifier became several times
faster at batch 1 and twice as fast at batch 32; a training step (``lstm_step``) is GEMM-bound and unchanged
(figures: benchmarks/RESULTS.md, "Behind the code: numpy/compiled_scan.py").
"""

from __future__ import annotations

import ctypes
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import VerifyError
from ...ir import FusedProgram, Op, OpType, walk
from ..kernels import leaf
from ..kernels import scan as shared
from ..kernels.collective import communicator_of
from ..kernels.context import Kernel, KernelContext
from ..kernels.movement import slice_index
from . import runtime
from .numba_kernels import SUPPORTED, VECTOR_MATH, step_lines, uses_vector_math
from .numba_loader import FLOAT_DTYPES, HAVE_NUMBA, Pending, background_allowed, kernel_set, load_kernel, prepare

_VIEWS = frozenset({OpType.PLACEHOLDER, OpType.CAST_AXES, OpType.SLICE})

HOT_CALLS = 3
"""Under ``NG_KERNELS=auto`` a scan runs the shared kernel for its first calls and is compiled on this one
(then its machine code is on disk for the next process). Each distinct body costs numba ~1-1.5 s to
compile, which a computation called once or twice (a test, a one-off evaluation) never earns back: the
ONNX and recurrent tests compiled 84 bodies in 134 s when every scan compiled at once. A served model
or a benchmark's warm-up calls it more often than this."""

TRANSPOSE_MIN_ROWS = 8
"""A transposed weight (an extra, the same every step) is copied C-contiguous once per call when the
matrix it multiplies has at least this many rows (columns, on the left). Measured on
``[m, 64] @ [64, 256]``: from m = 8 OpenBLAS's transposed path is 2-3x slower, so a 16-step sequence gains
more than ten times what the copy costs; below, the copy costs what it saves (figures:
benchmarks/RESULTS.md, "Behind the code: numpy/compiled_scan.py")."""

_GEMM_HELPERS = '''

@njit(inline="always")
def _operand(x):
    """(CblasNoTrans or CblasTrans, leading dimension, array) of the matrix ``x`` for BLAS; a copy when
    neither of its strides is one element."""
    rows, cols = x.shape
    s0, s1 = x.strides[0] // x.itemsize, x.strides[1] // x.itemsize
    if (cols == 1 or s1 == 1) and (rows == 1 or s0 >= max(cols, 1)):
        return 111, (s0 if rows > 1 else max(cols, 1)), x
    if (rows == 1 or s0 == 1) and (cols == 1 or s1 >= max(rows, 1)):
        return 112, (s1 if cols > 1 else max(rows, 1)), x
    return 111, max(cols, 1), np.ascontiguousarray(x)


@njit(inline="always")
def _gemm(a, b, c):
    """c = a @ b (``c`` C-contiguous, of its own memory)."""
    m, k = a.shape
    n = b.shape[1]
    ta, lda, a2 = _operand(a)
    tb, ldb, b2 = _operand(b)
    GEMM(101, ta, tb, m, n, k, T(1.0), a2.ctypes.data, lda, b2.ctypes.data, ldb, T(0.0), c.ctypes.data, max(n, 1))
'''


@functools.cache
def blas() -> tuple[str, str, str] | None:
    """The integer type and the ``sgemm``/``dgemm`` CBLAS symbols of the BLAS NumPy loaded, made visible
    to numba's linker; None when there is no such BLAS (then scans run the shared kernel). The integer
    width is read from the symbols' ``64_`` suffix (NumPy's wheels: ILP64, suffixed); an ILP64 library
    that exports unsuffixed names would be called with 32-bit integers, so only suffixed or LP64 ones are
    expected here.

    Example:
        >>> blas()  # ('int64', 'scipy_cblas_sgemm64_', 'scipy_cblas_dgemm64_') with NumPy's own wheel
    """
    try:
        import llvmlite.binding as llvm
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    # NumPy's own first: another package's BLAS (torch's, say) may be loaded too, with its own threads
    pools = sorted(threadpool_info(), key=lambda info: "numpy" not in info.get("filepath", ""))
    for info in pools:
        if info.get("user_api") != "blas" or not info.get("filepath"):
            continue
        try:
            lib = ctypes.CDLL(info["filepath"])
        except OSError:
            continue
        for prefix, suffix in (("scipy_cblas_", "64_"), ("cblas_", "64_"), ("scipy_cblas_", ""), ("cblas_", "")):
            single, double = f"{prefix}sgemm{suffix}", f"{prefix}dgemm{suffix}"
            if hasattr(lib, single) and hasattr(lib, double):
                llvm.load_library_permanently(info["filepath"])
                return ("int64" if suffix else "int32"), single, double
    return None


def _index_text(index: tuple) -> str:
    """``index`` (ints and slices) as the text between brackets."""
    parts = []
    for s in index:
        if isinstance(s, int):
            parts.append(str(s))
        else:
            parts.append(":".join("" if v is None else str(v) for v in (s.start, s.stop, s.step)))
    return ", ".join(parts)


def _at(position: int, step: str = "t") -> str:
    """The index text putting ``step`` on the axis at ``position`` (every axis before it whole)."""
    return ":, " * position + step


def _loops(shape: Sequence[int], indent: str) -> tuple[list[str], str, list[str]]:
    """A loop nest over ``shape``: its ``for`` lines, the inner indent and the loop indices."""
    lines = [indent + "    " * d + f"for i{d} in range({n}):" for d, n in enumerate(shape)]
    return lines, indent + "    " * len(shape), [f"i{d}" for d in range(len(shape))]


Element = Callable[[Sequence[str]], str]
"""An element of a body value as text: (one index text per axis of the value) -> e.g. ``v5[i0, 128 + i1]``."""


def _element(base: str, fixed: dict[int, str] | None = None) -> Element:
    """Elements of the array ``base``, with the axes in ``fixed`` held at the given index texts."""
    def element(ix: Sequence[str]) -> str:
        it = iter(ix)
        count = len(ix) + len(fixed or {})
        return f"{base}[{', '.join((fixed or {}).get(d) or next(it) for d in range(count))}]"
    return element


def _sliced(source: Element, index: tuple, ndim: int) -> Element:
    """Elements of ``source[index]`` (``index``: ints and slices, then whole axes up to ``ndim``) read from
    ``source`` itself: no view, so a loop over a slice of a C-contiguous buffer still vectorizes."""
    index = index + (slice(None),) * (ndim - len(index))

    def element(ix: Sequence[str]) -> str:
        it, inner = iter(ix), []
        for s in index:
            if isinstance(s, int):
                inner.append(str(s))
                continue
            i, start, step = next(it), s.start or 0, 1 if s.step is None else s.step
            inner.append(i if (start, step) == (0, 1) else f"{start} + {step} * {i}" if step != 1 else f"{start} + {i}")
        return source(inner)
    return element


def _broadcast_element(source: Element, positions: Sequence[int], ix: Sequence[str]) -> str:
    """An element of a ``broadcast``: its source's element at the indices of the source's axes."""
    return source([ix[p] for p in positions])


def _copy(dst: Element, src: Element, shape: Sequence[int], indent: str) -> list[str]:
    """Lines copying ``src`` into ``dst`` (both of ``shape``) element by element."""
    lines, inner, ix = _loops(shape, indent)
    return lines + [f"{inner}{dst(ix)} = {src(ix)}"]


def _dot_operands(a: Op, b: Op, out_axes: Any) -> tuple[bool, bool, bool] | None:
    """For the product of two matrices ``a`` and ``b`` with ``out_axes``: (a transposed, b transposed, the
    output is (b's free, a's free)), or None (more or fewer axes)."""
    shared = a.axes & b.axes
    a_rest, b_rest = a.axes - shared, b.axes - shared
    if not (len(a.axes) == len(b.axes) == 2 and len(shared) == len(a_rest) == len(b_rest) == 1):
        return None
    if out_axes == a_rest + b_rest:
        swapped = False
    elif out_axes == b_rest + a_rest:
        swapped = True
    else:
        return None
    return a.axes != a_rest + shared, b.axes != shared + b_rest, swapped


def _header(dtype: str, symbol: str, int_type: str, vector: bool) -> list[str]:
    """The lines of a generated module before its function ``k``: imports, the BLAS ``GEMM`` (``symbol``,
    with ``int_type`` integers) and ``_gemm``, and ``VECTOR_MATH`` when ``vector``."""
    integer, real = f"types.{int_type}", f"types.{dtype}"
    return [
        "# generated by ngraph_core.transformers.compiled_scan: do not edit",
        "import math",
        "",
        "import numpy as np",
        f"from numpy import {dtype} as T",
        "from numba import njit, types",
        *(["from numpy import float32, floor, int32", *VECTOR_MATH.splitlines()] if vector else []),
        "",
        f"GEMM = types.ExternalFunction({symbol!r}, types.void(types.int32, types.int32, types.int32, "
        f"{integer}, {integer}, {integer}, {real}, types.voidptr, {integer}, types.voidptr, {integer}, {real}, "
        f"types.voidptr, {integer}))",
        *_GEMM_HELPERS.splitlines(),
        "",
        "",
    ]


def gemm(dtype: str) -> Callable[[Any, Any, Any], None] | None:
    """The compiled ``_gemm(a, b, c)`` the generated loops call (``c = a @ b``, any strides of ``a`` and
    ``b``, ``c`` C-contiguous), for checking it on its own; None without numba or a known BLAS."""
    found = blas() if HAVE_NUMBA else None
    if found is None or dtype not in FLOAT_DTYPES:
        return None
    int_type, single, double = found
    lines = _header(dtype, single if dtype == "float32" else double, int_type, False)
    source = "\n".join([*lines, "@njit(cache=True, nogil=True)", "def k(a, b, c):", "    _gemm(a, b, c)"]) + "\n"
    return load_kernel(source)


def generate_source(op: Op, graph: Any, dtype: str, symbol: str, int_type: str) -> tuple[str, list[Op]] | None:
    """The source of a numba function ``k(*seqs, *initial_states, *extras, *finals, *saved, *stacked,
    *constants)`` running every step of the scan ``op`` whose body compiled to ``graph``, and the body's
    ``constant`` ops it takes (in order), or None when a body op, shape or dtype is not supported (see
    the module docstring).

    Each body value has a view expression (for BLAS calls) and an element expression (for loops):
    element-wise loops read a slice of a buffer at offsets into the buffer itself, never through a
    strided view, so LLVM sees unit strides and vectorizes them.
    """
    arg = op.arg
    n_seq, n_state, n_out, n_extra = arg.n_seq, arg.n_state, arg.n_out, arg.n_extra
    n_saved = n_state if arg.save_states else 0
    params, name = list(arg.body.params), arg.axis.name
    layout = arg.layout()
    stacked_axes = [axes for _, _, axes in layout[n_state:n_state + n_out]] + \
        [axes for _, _, axes in layout[n_state + n_out + n_saved:]]
    saved_axes = [axes for _, _, axes in layout[n_state + n_out:n_state + n_out + n_saved]]
    numbered = {x: i for i, x in enumerate(graph.order)}
    constants: list[Op] = []
    element: dict[Op, Element] = {}
    hoisted: list[str] = []  # before the loop: buffers, and views of the extras (the same every step)
    body: list[str] = []  # one step
    indent = "        "
    vector = False
    invariant: set[Op] = set()
    unviewed: set[Op] = set()  # broadcasts (and views of them): read element by element, never as arrays
    for i, x in enumerate(graph.order):
        if not x.axes.lengths or math.prod(x.axes.lengths) == 0:
            return None  # scalars and empty values: the shared kernel
        shape = tuple(x.axes.lengths)
        v = f"v{i}"
        if x.op is OpType.BROADCAST:  # an element of the source, at the output's indices of its axes
            positions = [x.axes.index(a) for a in x.src[0].axes]
            element[x] = functools.partial(_broadcast_element, element[x.src[0]], positions)
            unviewed.add(x)
            invariant.update([x] if x.src[0] in invariant else [])
            continue
        if x.op in _VIEWS:
            if x.op is not OpType.PLACEHOLDER and x.src[0] in unviewed:  # elements only, no array view
                unviewed.add(x)
                element[x] = element[x.src[0]] if x.op is OpType.CAST_AXES else \
                    _sliced(element[x.src[0]], slice_index(x), len(x.src[0].axes))
                continue
            if x.op is OpType.PLACEHOLDER:
                k = params.index(x)
                if k < n_seq:
                    at = op.src[k].axes.index(name)
                    line, element[x] = f"{v} = seq{k}[{_at(at)}]", _element(f"seq{k}", {at: "t"})
                elif k < n_seq + n_state:
                    line, element[x] = f"{v} = state{k - n_seq}", _element(f"state{k - n_seq}")
                else:
                    line, element[x] = f"{v} = extra{k - n_seq - n_state}", _element(f"extra{k - n_seq - n_state}")
                    invariant.add(x)
            elif x.op is OpType.CAST_AXES:
                line, element[x] = f"{v} = v{numbered[x.src[0]]}", element[x.src[0]]
            else:
                index = slice_index(x)
                line = f"{v} = v{numbered[x.src[0]]}[{_index_text(index)}]"
                element[x] = _sliced(element[x.src[0]], index, len(x.src[0].axes))
            if x.op is not OpType.PLACEHOLDER and x.src[0] in invariant:
                invariant.add(x)
            (hoisted if x in invariant else body).append(("    " if x in invariant else indent) + line)
            continue
        element[x] = _element(v)
        if x.op is OpType.CONSTANT:  # an argument after the pack's views (``constants`` lists them)
            hoisted.append(f"    {v} = constant{len(constants)}")
            constants.append(x)
            invariant.add(x)
            continue
        hoisted.append(f"    {v} = np.empty({shape!r}, T)")
        if x.op is OpType.DOT or x.op is OpType.FUSED and x.arg.dot:  # a product (the fused program's head)
            flags = _dot_operands(x.src[0], x.src[1], x.axes)
            if flags is None or x.src[0] in unviewed or x.src[1] in unviewed:
                return None
            a_t, b_t, swapped = flags
            a, b = (f"v{numbered[s]}" + (".T" if t else "") for s, t in zip(x.src, (a_t, b_t)))
            matrices = [(f"{b}.T", x.src[1]), (f"{a}.T", x.src[0])] if swapped else [(a, x.src[0]), (b, x.src[1])]
            m, n = shape
            operands = []
            for side, (text, source) in enumerate(matrices):
                text = text.replace(".T.T", "")
                if source in invariant and text.endswith(".T") and (n, m)[side] >= TRANSPOSE_MIN_ROWS:
                    hoisted.append(f"    w{i}_{side} = np.ascontiguousarray({text})")
                    text = f"w{i}_{side}"
                operands.append(text)
            body.append(f"{indent}_gemm({operands[0]}, {operands[1]}, {v})")
            if x.op is OpType.DOT:
                continue
        if x.op is OpType.FUSED:
            program = x.arg
            if program.conv is not None:
                return None
        elif x.op in SUPPORTED:
            program = FusedProgram(steps=((x.op, tuple(("in", n) for n in range(len(x.src)))),))
        else:
            return None
        read = sorted({r[1] for _, refs in program.steps for r in refs if r[0] == "in"})
        if any(tuple(x.src[n].axes.lengths) != shape for n in read):
            return None
        stepped = step_lines(program, dtype, lambda n: f"x{n}", lambda n: f"x{n}")
        if stepped is None:
            return None
        vector = vector or uses_vector_math(program, dtype)
        lines, result = stepped
        nest, inner, ix = _loops(shape, indent)
        body += nest + [f"{inner}x{n} = {element[x.src[n]](ix)}" for n in read]
        if program.head is not None:
            body.append(f"{inner}d = {v}[{', '.join(ix)}]")
        body += [inner + line for line in lines] + [f"{inner}{v}[{', '.join(ix)}] = {result}"]
    results = list(graph.results)
    state_params = params[n_seq:n_seq + n_state]
    if any(tuple(results[n_out + j].axes.lengths) != tuple(p.axes.lengths) for j, p in enumerate(state_params)):
        return None
    # outputs then kept values, as the pack stacks them: body roots 0..n_out-1, then n_out + n_state...
    stacked_roots = results[:n_out] + results[n_out + n_state:]
    before: list[str] = []  # each step, first: the saved states
    for j, p in enumerate(state_params[:n_saved]):
        before += _copy(_element(f"saved{j}", {saved_axes[j].index(name): "t"}), _element(f"state{j}"),
                        p.axes.lengths, indent)
    after: list[str] = []  # each step, last: the stacked values, then the next states
    for i, r in enumerate(stacked_roots):
        after += _copy(_element(f"stacked{i}", {stacked_axes[i].index(name): "t"}), element[r], r.axes.lengths, indent)
    for j, p in enumerate(state_params):
        after += _copy(_element(f"next{j}"), element[results[n_out + j]], p.axes.lengths, indent)
    after += [f"{indent}state{j}, next{j} = next{j}, state{j}" for j in range(n_state)]
    prologue: list[str] = []
    epilogue: list[str] = []
    for j, p in enumerate(state_params):
        shape = tuple(p.axes.lengths)
        prologue += [f"    state{j} = np.empty({shape!r}, T)", f"    next{j} = np.empty({shape!r}, T)"]
        prologue += _copy(_element(f"state{j}"), _element(f"initial{j}"), shape, "    ")
        epilogue += _copy(_element(f"final{j}"), _element(f"state{j}"), shape, "    ")
    names = [*(f"seq{k}" for k in range(n_seq)), *(f"initial{j}" for j in range(n_state)),
             *(f"extra{k}" for k in range(n_extra)), *(f"final{j}" for j in range(n_state)),
             *(f"saved{j}" for j in range(n_saved)), *(f"stacked{i}" for i in range(len(stacked_roots))),
             *(f"constant{c}" for c in range(len(constants)))]
    header = _header(dtype, symbol, int_type, vector) + [
        '@njit(cache=True, fastmath=False, nogil=True, error_model="numpy")',
        f"def k({', '.join(names)}):",
    ]
    steps = arg.axis.length
    loop = [f"    for s in range({steps}):", f"        t = {steps - 1} - s" if arg.reverse else "        t = s"]
    return "\n".join(header + prologue + hoisted + loop + before + body + after + epilogue) + "\n", constants


def compiled_scan(op: Op, kc: KernelContext, fallback: Kernel | None = None) -> Kernel | None:
    """The whole-loop kernel ``kernel(out, *src)`` for the ``scan`` ``op`` on NumPy, or None (see the module
    docstring for what is supported). With a ``fallback`` (the shared kernel) and ``NG_COMPILE=background``,
    the loop compiles on the background thread (``numba_loader.prepare``) and ``fallback`` runs meanwhile."""
    arg = op.arg
    if not HAVE_NUMBA or kc.xp is not np or arg.has_lengths:
        return None
    dtype = kc.dtype_of(op)
    if dtype not in FLOAT_DTYPES or any(kc.dtype_of(s) != dtype for s in op.src):
        return None
    found = blas()
    if found is None:
        return None
    run = kc.subgraph(arg.body)
    graph = getattr(run, "compiled_graph", None)
    if graph is None or any(kc.dtype_of(x) != dtype for x in graph.order):
        return None
    int_type, single, double = found
    generated = generate_source(op, graph, dtype, single if dtype == "float32" else double, int_type)
    if generated is None:
        return None
    source, constant_ops = generated
    constants = [leaf.constant(c, kc)() for c in constant_ops]
    fn = load_kernel(source)
    n_seq, n_state, n_out, n_extra = arg.n_seq, arg.n_state, arg.n_out, arg.n_extra
    n_saved = n_state if arg.save_states else 0
    spans = [(offset, offset + size, axes.lengths) for offset, size, axes in arg.layout()]
    inputs = n_seq + n_state + n_extra

    shapes = [s.axes.lengths for s in op.src[:inputs]]
    background = fallback is not None and background_allowed(communicator_of(kc).size)
    pending: list[Pending] = []

    def compiled_scan_kernel(out: Any, *src: Any) -> Any:
        # the loop indexes without bounds checks: every operand must have its op's shape (the plan's
        # buffers always do; this keeps a bug elsewhere from turning into a read past a buffer)
        for x, shape in zip(src, shapes):
            if x.shape != shape:
                raise VerifyError(f"compiled scan {op.name}: expected operand shapes {shapes}, received "
                                  f"{[x.shape for x in src[:inputs]]}; hint: a bug in ngraph_core, please report it")
        views = [out[start:stop].reshape(shape) for start, stop, shape in spans]
        finals, rest = views[:n_state], views[n_state:]
        stacked = rest[:n_out] + rest[n_out + n_saved:]
        args = (*src[:inputs], *finals, *rest[n_out:n_out + n_saved], *stacked, *constants)
        if not pending or not pending[0].done:  # the first call, or numba still compiling (NG_COMPILE)
            pending[:] = pending or [prepare(fn, args, background)]
            if not pending[0].done:
                return fallback(out, *src)
        fn(*args)
        return out

    return compiled_scan_kernel


def _splits_its_gemms(op: Op) -> bool:
    """True when the shared kernel splits a product of the body over the runtime's workers (``NG_THREADS``
    > 1 and a ``dot`` of ``runtime.MIN_PARALLEL_FLOPS`` or more), which the compiled loop, at one BLAS
    thread, would not: there ``auto`` keeps the shared kernel (an LSTM of hidden 256 at batch 32)."""
    if runtime.threads() == 1:
        return False
    for x in walk(op.arg.body.roots):
        if x.op is OpType.DOT or x.op is OpType.FUSED and x.arg.dot:
            a, b = x.src[0].axes, x.src[1].axes
            common = a & b
            if (a - common).size * common.size * (b - common).size >= runtime.MIN_PARALLEL_FLOPS:
                return True
    return False


def _compiled_or_warn(op: Op, kc: KernelContext, fallback: Kernel) -> Kernel | None:
    """``compiled_scan``, where a failure to generate or compile the loop (a bug: please report it) is a
    ``RuntimeWarning`` and the shared kernel goes on, instead of an error in the middle of a run."""
    try:
        return compiled_scan(op, kc, fallback)
    except Exception as exc:  # noqa: BLE001 - any compile failure: keep running on the shared kernel
        warnings.warn(f"scan {op.name}: the compiled loop failed ({type(exc).__name__}: {exc}); the scan runs on "
                      "the shared kernel; hint: NG_KERNELS=numpy avoids compiling, and a report with the body helps",
                      RuntimeWarning, stacklevel=2)
        return None


def scan(op: Op, kc: KernelContext) -> Kernel:
    """The NumPy transformer's ``scan`` kernel: the shared kernel (``kernels/scan.py``), replaced by the
    compiled loop where it is supported: at once under ``NG_KERNELS=numba``, from the ``HOT_CALLS``-th
    call under ``auto`` (never under ``numpy``, nor under ``auto`` where the shared kernel splits the body's
    products over the workers: ``_splits_its_gemms``)."""
    chosen = kernel_set()
    kernel = shared.scan(op, kc)
    if chosen == "numba":
        return compiled_scan(op, kc, kernel) or kernel
    if chosen == "numpy" or _splits_its_gemms(op):
        return kernel
    current, calls = [kernel], [0]

    def tiered_scan_kernel(out: Any, *src: Any) -> Any:
        run = current[0]
        if calls[0] < HOT_CALLS:
            calls[0] += 1
            if calls[0] == HOT_CALLS:  # from now on: the compiled loop, or the shared kernel where unsupported
                current[0] = _compiled_or_warn(op, kc, kernel) or kernel
        return run(out, *src)

    return tiered_scan_kernel
