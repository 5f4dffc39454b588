"""Generated CUDA element-wise kernels: one ``cupy.ElementwiseKernel`` launch per ``fused`` op
(a whole ``FusedProgram``) or per lone element-wise op (``elementwise``).

The NumPy kernel (``kernels/fused.py``) runs a ``FusedProgram`` step by step over cache-sized
blocks; on a GPU each step would be a kernel launch and a round trip through device memory. Here
the whole program becomes the body of one CUDA element-wise kernel: every step is a local
variable, so each element is read once, computed in registers and written once. A program with a
head (``dot`` or ``conv``) runs the head into the output buffer first (cuBLAS through the shared
kernels) and the epilogue kernel reads it back from the output (``("d",)`` is ``out0``), in place.

``cuda_source(program, dtype)`` gives the kernel's parts (``CudaSource``: parameter lists, the
operation body, a preamble of helper functions) as text; ``translation_unit`` wraps any number of
them into a standalone ``.cu`` file that ``nvcc`` compiles on a machine without a GPU, which is how
the tests check the generated code for syntax and type errors (``tests/.../test_cuda_elementwise.py``).
The text holds only generated identifiers (``x2``, ``t0``, ``out0``), C types and numeric literals
(hexadecimal, so constants are exact), never a name from the graph.

Semantics follow NumPy's ufuncs, step by step in the op's dtype: comparisons give 0/1; ``maximum``
and ``minimum`` propagate a NaN of either operand and give NumPy's sign of zero (``maximum(-0., 0.)``
is ``0.``); ``relu`` is ``maximum(x, 0)``; ``sign`` keeps NaN; ``mod`` is NumPy's ``remainder`` (the
sign of the divisor); ``round`` is ``rint`` (half to even); ``sigmoid`` is ``1 / (1 + exp(-x))``.
float32 programs call the float functions (``expf``...), float64 the double ones, with CUDA's
documented error bounds (a few ulp; ``tanhf`` 2 ulp) instead of NumPy's SIMD loops.

Not compiled (the shared whole-array kernel, one launch per step, runs instead): dtypes other than
float32/float64, and steps without a CUDA expression here (``UNSUPPORTED_REASON`` says which).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...ir import FusedProgram, Op, OpType
from ..kernels.context import Kernel, KernelContext
from ..kernels.fused import program_head, unblocked

C_TYPES = {"float32": "float", "float64": "double"}
"""The dtypes a fused program compiles for, and their C types."""

_FUNCTIONS = {  # OpType -> the C function (the float32 program calls its ``f`` variant: expf)
    OpType.ABS: "fabs", OpType.EXP: "exp", OpType.LOG: "log", OpType.LOG1P: "log1p", OpType.SQRT: "sqrt",
    OpType.TANH: "tanh", OpType.SIN: "sin", OpType.COS: "cos", OpType.TAN: "tan", OpType.ASIN: "asin",
    OpType.ACOS: "acos", OpType.ATAN: "atan", OpType.SINH: "sinh", OpType.COSH: "cosh", OpType.ASINH: "asinh",
    OpType.ACOSH: "acosh", OpType.ATANH: "atanh", OpType.FLOOR: "floor", OpType.CEIL: "ceil", OpType.ROUND: "rint",
    OpType.ERF: "erf", OpType.POW: "pow", OpType.FMOD: "fmod",
}
_EXPRESSIONS = {  # OpType -> a C expression of its operands {0}, {1}, {2}; T is the C type
    OpType.NEG: "(-{0})",
    OpType.SQUARE: "({0} * {0})",
    OpType.RECIPROCAL: "(T(1) / {0})",
    OpType.RSQRT: "(T(1) / sqrt_T({0}))",
    OpType.SIGMOID: "(T(1) / (T(1) + exp_T(-{0})))",
    OpType.RELU: "(({0} > T(0) || {0} != {0}) ? {0} : T(0))",
    OpType.SIGN: "({0} > T(0) ? T(1) : ({0} < T(0) ? T(-1) : ({0} == T(0) ? T(0) : {0})))",
    OpType.ADD: "({0} + {1})", OpType.SUB: "({0} - {1})", OpType.MUL: "({0} * {1})", OpType.DIV: "({0} / {1})",
    OpType.MAXIMUM: "(({0} > {1} || {0} != {0}) ? {0} : {1})",
    OpType.MINIMUM: "(({0} < {1} || {0} != {0}) ? {0} : {1})",
    OpType.MOD: "ng_mod({0}, {1})",
    OpType.EQUAL: "({0} == {1} ? T(1) : T(0))", OpType.NOT_EQUAL: "({0} != {1} ? T(1) : T(0))",
    OpType.LESS: "({0} < {1} ? T(1) : T(0))", OpType.LESS_EQUAL: "({0} <= {1} ? T(1) : T(0))",
    OpType.GREATER: "({0} > {1} ? T(1) : T(0))", OpType.GREATER_EQUAL: "({0} >= {1} ? T(1) : T(0))",
    OpType.WHERE: "({0} != T(0) ? {1} : {2})",
}
SUPPORTED = frozenset(_FUNCTIONS) | frozenset(_EXPRESSIONS)
"""The element-wise OpTypes a generated kernel computes."""

_PREAMBLE = """\
__host__ __device__ __forceinline__ {T} ng_mod({T} a, {T} b) {{  // NumPy's remainder: the sign of the divisor
    {T} r = fmod{f}(a, b);
    if (r != {T}(0)) {{
        if ((b < {T}(0)) != (r < {T}(0))) r += b;
    }} else {{
        r = copysign{f}({T}(0), b);
    }}
    return r;
}}
"""


@dataclass(frozen=True)
class CudaSource:
    """One fused program as the parts of a ``cupy.ElementwiseKernel``.

    Attributes:
        name: the kernel's name, from a hash of its text (equal programs share a compiled kernel).
        in_params: ``"float32 x2, float32 x3"``: the program's element-wise inputs (a head's
            operands, sources 0 and 1, are not among them).
        out_params: ``"float32 out0"``; with a head, ``out0`` holds the head's value on entry.
        operation: the body: one ``const`` local per step, then ``out0 = ...;``.
        preamble: helper device functions the body may call.
        inputs: the indices of the op's sources the kernel takes, in ``in_params`` order.
    """

    name: str
    in_params: str
    out_params: str
    operation: str
    preamble: str
    inputs: tuple[int, ...]


def unsupported_reason(program: FusedProgram, dtype: str) -> str | None:
    """Why ``program`` cannot become a CUDA kernel in ``dtype`` (None: it can)."""
    if dtype not in C_TYPES:
        return f"dtype {dtype} (compiled: {', '.join(C_TYPES)})"
    missing = sorted({kind.value for kind, _ in program.steps if kind not in SUPPORTED})
    return f"step(s) {', '.join(missing)} have no CUDA expression" if missing else None


def _literal(value: float, c_type: str) -> str:
    """An exact C literal of ``value`` as ``c_type`` (hexadecimal floats; inf and NaN as IEEE quotients)."""
    value = float(value)
    if math.isnan(value):
        return f"({c_type}(0) / {c_type}(0))"
    if math.isinf(value):
        return f"({'-' if value < 0 else ''}{c_type}(1) / {c_type}(0))"
    return f"{c_type}({value.hex()})"


def _expression(kind: OpType, operands: Sequence[str], c_type: str) -> str:
    suffix = "f" if c_type == "float" else ""
    fn = _FUNCTIONS.get(kind)
    if fn is not None:
        return f"{fn}{suffix}({', '.join(operands)})"
    text = _EXPRESSIONS[kind].format(*operands)
    return text.replace("sqrt_T(", f"sqrt{suffix}(").replace("exp_T(", f"exp{suffix}(").replace("T(", f"{c_type}(")


def cuda_source(program: FusedProgram, dtype: str) -> CudaSource:
    """The CUDA element-wise kernel computing ``program`` in ``dtype``.

    Raises:
        ValueError: a program ``unsupported_reason`` refuses (callers check it first).

    Example:
        >>> src = cuda_source(fused_op.arg, "float32")
        >>> print(src.operation)  # const float t0 = (x0 * x1); out0 = tanhf((t0 + float(0x1.0p-1)));
    """
    reason = unsupported_reason(program, dtype)
    if reason is not None:
        raise ValueError(f"fused program {program.expression()}: cannot compile {reason}")
    c_type = C_TYPES[dtype]
    first = 2 if program.head is not None else 0
    used = sorted({r[1] for _, refs in program.steps for r in refs if r[0] == "in" and r[1] >= first})

    def operand(ref: tuple) -> str:
        tag = ref[0]
        if tag == "in":
            return f"x{ref[1]}"
        if tag == "t":
            return f"t{ref[1]}"
        if tag == "c":
            return _literal(ref[1], c_type)
        return "d"  # the head's value, read from out0 before the first write

    lines = [f"const {c_type} d = out0;"] if program.head is not None else []
    last = len(program.steps) - 1
    for j, (kind, refs) in enumerate(program.steps):
        text = _expression(kind, [operand(r) for r in refs], c_type)
        lines.append(f"out0 = {text};" if j == last else f"const {c_type} t{j} = {text};")
    operation = "\n".join(lines)
    preamble = _PREAMBLE.format(T=c_type, f="f" if c_type == "float" else "") \
        if OpType.MOD in {kind for kind, _ in program.steps} else ""
    in_params = ", ".join(f"{dtype} x{i}" for i in used)
    digest = hashlib.sha256(f"{in_params}|{operation}|{preamble}".encode()).hexdigest()[:16]
    return CudaSource(f"ng_fused_{digest}", in_params, f"{dtype} out0", operation, preamble, tuple(used))


def translation_unit(sources: Sequence[CudaSource], host: bool = False) -> str:
    """A standalone CUDA file holding every kernel of ``sources`` as CuPy would instantiate it.

    Each body becomes a function over references (inputs ``const``, the output mutable, as in
    CuPy's generated code) called by a ``__global__`` loop over flat arrays, so ``nvcc -c``
    checks exactly the text CuPy compiles. Preambles are emitted once each.

    Args:
        host: also make each body a host function, with an ``extern "C"`` host loop
            ``<name>_host(inputs..., out, n)`` over contiguous arrays: built as a shared library
            (``nvcc -shared``), it runs the generated arithmetic on the CPU through ``ctypes``,
            which is how the tests compare it with the NumPy kernel on a machine without a GPU.
    """
    parts, seen = [], set()
    for src in sources:
        if src.preamble and src.preamble not in seen:
            seen.add(src.preamble)
            parts.append(src.preamble)
    qualifier = "__host__ __device__" if host else "__device__"
    for src in sources:
        params = [(C_TYPES[p.split()[0]], p.split()[1]) for p in src.in_params.split(", ") if p]
        out_type = C_TYPES[src.out_params.split()[0]]
        refs = ", ".join([f"const {t}& {n}" for t, n in params] + [f"{out_type}& out0"])
        pointers = ", ".join([f"const {t}* __restrict__ p_{n}" for t, n in params] + [f"{out_type}* p_out0"])
        call = ", ".join([f"p_{n}[i]" for _, n in params] + ["p_out0[i]"])
        body = "\n    ".join(src.operation.splitlines())
        parts.append(
            f"{qualifier} __forceinline__ void {src.name}({refs}) {{\n    {body}\n}}\n"
            f"extern \"C\" __global__ void {src.name}_kernel({pointers}, long long n) {{\n"
            f"    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
            f"    if (i < n) {src.name}({call});\n}}\n"
        )
        if host:
            parts.append(
                f"extern \"C\" void {src.name}_host({pointers}, long long n) {{\n"
                f"    for (long long i = 0; i < n; ++i) {src.name}({call});\n}}\n"
            )
    return "\n".join(parts)


_kernels: dict[CudaSource, Any] = {}  # one compiled ElementwiseKernel per distinct source, per process


def _elementwise_kernel(src: CudaSource) -> Any:
    kernel = _kernels.get(src)
    if kernel is None:
        import cupy  # only reached on the CuPy transformer

        kernel = _kernels[src] = cupy.ElementwiseKernel(src.in_params, src.out_params, src.operation, src.name,
                                                        preamble=src.preamble)
    return kernel


def fused(op: Op, kc: KernelContext) -> Kernel:
    """The CuPy ``fused`` kernel: the head (if any) into ``out``, then one generated launch.

    Programs ``unsupported_reason`` refuses run on the shared whole-array kernel (``unblocked``).
    """
    program, dtype = op.arg, kc.dtype_of(op)
    if unsupported_reason(program, dtype) is not None:
        return unblocked(op, kc)
    src = cuda_source(program, dtype)
    kernel = _elementwise_kernel(src)
    head = program_head(op, kc)
    picks = src.inputs

    def cuda_fused_kernel(out, *vs):
        if head is not None:
            head(out, vs[0], vs[1])
        kernel(*[vs[i] for i in picks], out)
        return out

    return cuda_fused_kernel


def elementwise(op: Op, kc: KernelContext) -> Kernel:
    """A lone element-wise op as a one-step generated kernel: one launch where CuPy's ufuncs may take
    several (the shared sigmoid is four launches, and as one generated kernel takes under half their host
    time: benchmarks/RESULTS.md, "Behind the code: cupy/elementwise.py").

    Ops the generator cannot compile (integer or bool dtypes, mixed source dtypes, steps without a CUDA
    expression) run on the shared kernel.
    """
    from ..kernels import KERNELS

    dtype = kc.dtype_of(op)
    program = FusedProgram(steps=((op.op, tuple(("in", i) for i in range(len(op.src)))),))
    if op.op not in SUPPORTED or any(kc.dtype_of(s) != dtype for s in op.src) \
            or unsupported_reason(program, dtype) is not None:
        return KERNELS[op.op](op, kc)
    kernel = _elementwise_kernel(cuda_source(program, dtype))

    def cuda_elementwise_kernel(out, *vs):
        kernel(*vs, out)
        return out

    return cuda_elementwise_kernel
