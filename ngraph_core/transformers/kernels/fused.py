"""The ``fused`` kernel: evaluate a ``FusedProgram`` in cache-sized blocks.

Plain NumPy evaluates ``tanh(a * b + c)`` as three passes over memory, each writing
a full-size temporary. Here each block of rows (about ``BLOCK_ELEMENTS`` elements)
runs through every step while it sits in cache, with a few temporaries allocated
like registers: measured on 10M floats, over twice as fast as plain NumPy; numexpr was slower
than NumPy (it computed in float64). Block size: 4K-element blocks paid Python overhead per
step, 64K was best and steady (figures: benchmarks/RESULTS.md, "Behind the code: kernels/fused.py").

Threads: with more than one worker (the kernel context's runner; on NumPy ``transformers/numpy/runtime.py``:
``NG_THREADS``, default every core) blocks of tensors of at least ``PARALLEL_MIN_ELEMENTS`` are split over the
runner's workers (``runner.run``: one pool for every kernel; NumPy releases the GIL inside ufuncs). Before BLAS
was held at one thread by the runtime, this slowed
an MLP step on 2 vCPUs by competing with OpenBLAS's spinning threads; with BLAS at one thread it
pays from about 256K elements (two workers against one on ``relu(x) * z + 0.5 tanh(x)``; figures:
benchmarks/RESULTS.md, "Behind the code: kernels/fused.py").

With a head (a ``dot``, or a ``conv`` run by ``conv.conv_into``) the head's value is
written into the output buffer first and the epilogue (bias, activation...) runs over
it block by block, in place.

``unblocked`` evaluates the program on whole arrays: it is what a backend without
a cache hierarchy worth blocking for (CuPy) uses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ...ir import FusedProgram, Op, OpType
from .context import PARALLEL_MIN_ELEMENTS, Kernel, KernelContext
from .contraction import dot_into
from .conv import Epilogue, conv_into
from .elementwise import step_function

BLOCK_ELEMENTS = 65536


def _compile(xp: Any, program: FusedProgram) -> tuple[list[tuple[Callable[..., Any], tuple, int | None]], int]:
    """``(function, refs, destination slot)`` per step (``("t", j)`` refs renamed to temporary
    *slots*; the last step's destination, None, is the output), and the slot count.

    Slots are allocated like registers: a step reuses the slot of a value that dies at it
    (every step function reads all its inputs before writing), which keeps a block's
    working set in cache — one temporary per step spilled out of L2 and ran 2x slower.
    """
    last_use: dict[int, int] = {}
    for k, (_, refs) in enumerate(program.steps):
        for r in refs:
            if r[0] == "t":
                last_use[r[1]] = k
    slot_of: dict[int, int] = {}
    free: list[int] = []
    n_slots = 0
    steps = []
    for j, (kind, refs) in enumerate(program.steps):
        renamed = tuple(("t", slot_of[r[1]]) if r[0] == "t" else r for r in refs)
        free.extend(slot_of[r[1]] for r in dict.fromkeys(refs) if r[0] == "t" and last_use[r[1]] == j)
        dest = None
        if j < len(program.steps) - 1:  # the last step writes the output
            if free:
                dest = free.pop()
            else:
                dest, n_slots = n_slots, n_slots + 1
            slot_of[j] = dest
        steps.append((step_function(xp, kind), renamed, dest))
    return steps, n_slots


def epilogue_steps(op: Op) -> tuple[tuple[str, int | None], ...] | None:
    """A conv-headed fused op's program as ``conv.Epilogue`` steps, or None when it is not one: a chain from
    the conv's value of at most one add of a per-channel bias (a ``broadcast`` of a vector over the output's
    first axis), at most one add of an input laid out as the output (a residual), in either order, then an
    optional relu. ResNet's ``relu(conv + b)`` and ``relu(conv + b + shortcut)`` are such."""
    prev: tuple = ("d",)
    spec: list[tuple[str, int | None]] = []
    for j, (kind, refs) in enumerate(op.arg.steps):
        if kind is OpType.RELU and refs == (prev,):
            spec.append(("relu", None))
        elif kind is OpType.ADD and len(refs) == 2 and prev in refs and refs[0] != refs[1]:
            other = refs[1] if refs[0] == prev else refs[0]
            if other[0] != "in":
                return None
            src = op.src[other[1]]
            if src.dtype != op.dtype or src.axes != op.axes:
                return None
            bias = src.op is OpType.BROADCAST and len(src.src[0].axes) == 1 and src.src[0].axes[0] == op.axes[0]
            spec.append(("bias" if bias else "add", other[1] - 2))
        else:
            return None
        prev = ("t", j)
    kinds = [step for step, _ in spec]
    if not spec or len(set(kinds)) != len(kinds) or ("relu" in kinds and kinds[-1] != "relu"):
        return None
    return tuple(spec)


def program_head(op: Op, kc: KernelContext) -> Callable[[Any, Any, Any], Any] | None:
    """``fn(out, a, b)`` computing the program's head (``dot`` or ``conv``) into ``out``, or None."""
    program, dtype = op.arg, kc.dtype_of(op)
    if program.head == "dot":
        return dot_into(kc, op.src[0], op.src[1], op.axes, dtype)
    if program.head == "conv":
        return conv_into(op.src[0], op.src[1], program.conv, dtype, kc)
    return None


def _run(steps: list, refs_values: Callable[[tuple], Any], temps: Sequence[Any], out: Any) -> None:
    for fn, refs, dest in steps:
        fn(out if dest is None else temps[dest], *(refs_values(r) for r in refs))


def fused(op: Op, kc: KernelContext) -> Kernel:
    """The blocked kernel for a ``fused`` op (NumPy): ``kernel(out, *inputs)``."""
    xp, runner, program, dtype = kc.xp, kc.runner, op.arg, kc.dtype_of(op)
    steps, n_slots = _compile(xp, program)
    shape = op.axes.lengths
    if not shape:  # a scalar: nothing to block
        return unblocked(op, kc)
    spec = epilogue_steps(op) if program.head == "conv" and xp.__name__ == "numpy" and \
        op.axes.size <= BLOCK_ELEMENTS else None
    if spec is not None:  # conv + bias/residual/relu, small: the convolution kernel applies them
        temps = [xp.empty(shape, dtype=dtype) for _ in range(n_slots)]
        block = _single_block(steps, temps, None, len(op.src))
        return conv_into(op.src[0], op.src[1], program.conv, dtype, kc,
                         Epilogue(spec, lambda out, *inputs: block(out, None, None, *inputs)))
    head = program_head(op, kc)
    size = 1
    for n in shape:
        size *= n
    rows, row_size = shape[0], size // max(shape[0], 1)
    block_rows = max(1, BLOCK_ELEMENTS // max(row_size, 1))
    blocks = [(s, min(s + block_rows, rows)) for s in range(0, rows, block_rows)]
    n_workers = min(kc.runner.threads(), len(blocks)) if size >= PARALLEL_MIN_ELEMENTS else 1
    temps = [[xp.empty((block_rows,) + shape[1:], dtype=dtype) for _ in range(n_slots)] for _ in range(n_workers)]

    def run_blocks(worker: int, out: Any, values: Sequence[Any]) -> None:
        my_temps = temps[worker]
        for s, e in blocks[worker::n_workers]:
            k = e - s
            block_temps = [t[:k] for t in my_temps]
            o = out[s:e]
            _run(steps, lambda r: _value(r, values, o, block_temps, s, e), block_temps, o)

    if len(blocks) == 1:  # one block (small tensors: a batch-1 layer): no block loop, no slicing per call
        return _single_block(steps, [t[:rows] for t in temps[0]], head, len(op.src))

    def fused_kernel(out, *vs):
        if head is not None:
            head(out, vs[0], vs[1])
        values = vs
        if n_workers == 1:
            run_blocks(0, out, values)
        else:
            runner.run([functools.partial(run_blocks, w, out, values) for w in range(n_workers)])
        return out

    return fused_kernel


def _single_block(steps: list, temps: list[Any], head: Callable[..., Any] | None, n_inputs: int) -> Kernel:
    """The program over whole arrays as one generated Python function: a line per step calling its
    function with its operands named (``f0(t1, in0, c0)``), so a call pays no per-step dispatch.
    The loop it replaces spent a fifth of a batch-1 LSTM step building argument lists (measured:
    benchmarks/RESULTS.md, "Behind the code: kernels/fused.py"). The source holds generated identifiers only; functions,
    temporaries and constants are bound in its namespace."""
    env: dict[str, Any] = {"head": head}
    params = [f"in{i}" for i in range(n_inputs)]
    lines = ["    head(out, in0, in1)"] if head is not None else []
    for j, (fn, refs, dest) in enumerate(steps):
        env[f"f{j}"] = fn
        args = []
        for k, r in enumerate(refs):
            if r[0] == "t":
                env[f"t{r[1]}"] = temps[r[1]]
                args.append(f"t{r[1]}")
            elif r[0] == "c":
                env[f"c{j}_{k}"] = r[1]
                args.append(f"c{j}_{k}")
            elif r[0] == "d":
                args.append("out")
            else:
                args.append(f"in{r[1]}")
        if dest is not None:
            env[f"t{dest}"] = temps[dest]
        lines.append(f"    f{j}({'out' if dest is None else f't{dest}'}, {', '.join(args)})")
    code = f"def single_block_kernel(out, {', '.join(params)}):\n" + "\n".join(lines) + "\n    return out\n"
    exec(compile(code, "<ngraph fused program>", "exec"), env)  # noqa: S102 - generated names only
    kernel = env["single_block_kernel"]
    kernel.source = code  # shown for debugging and checked by the tests: generated identifiers only
    return kernel


def _value(ref: tuple, values: Sequence[Any], out_block: Any, temps: Sequence[Any], s: int = 0,
           e: int | None = None) -> Any:
    tag = ref[0]
    if tag == "t":
        return temps[ref[1]]
    if tag == "c":
        return ref[1]
    if tag == "d":
        return out_block  # the dot product, already in the output buffer
    v = values[ref[1]]
    return v if e is None or v.ndim == 0 else v[s:e]


def unblocked(op: Op, kc: KernelContext) -> Kernel:
    """The program over whole arrays (for backends where blocking does not pay, like CuPy)."""
    xp, program, dtype = kc.xp, op.arg, kc.dtype_of(op)
    steps, n_slots = _compile(xp, program)
    head = program_head(op, kc)
    temps = [xp.empty(op.axes.lengths, dtype=dtype) for _ in range(n_slots)]

    def unblocked_kernel(out, *vs):
        if head is not None:
            head(out, vs[0], vs[1])
        values = vs
        _run(steps, lambda r: _value(r, values, out, temps), temps, out)
        return out

    return unblocked_kernel


KERNELS = {OpType.FUSED: fused}
