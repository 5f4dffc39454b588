"""What a kernel factory may ask of its transformer: the array module, dtypes, seeds and scratch memory."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import UnsupportedOpError
from ...ir import Op

Kernel = Callable[..., Any]

ALIGNMENT = 64


def _nbytes(xp: Any, shape: Sequence[int], dtype: str) -> int:
    return math.prod(shape) * xp.dtype(dtype).itemsize


class Workspace:
    """Scratch memory shared by every kernel of one computation.

    The executor runs one kernel at a time and a kernel's scratch is dead once it
    returns, so all kernels can carve their scratch out of one buffer, sized for the
    greediest (an im2col matrix, a padded copy). A factory calls ``request`` at compile
    time; its kernel calls the returned function at run time to get the arrays. The
    buffer is allocated at the first such call, when every factory has made its request.
    Arrays of one request are disjoint; arrays of different requests overlap, so a
    kernel makes exactly one request for all its scratch.

    Example:
        >>> views = workspace.request([((3, 9, 64), "float32")])
        >>> def kernel(out, x):
        ...     (col,) = views()
    """

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self.nbytes = 0
        self._buffer: Any = None

    def request(self, specs: Sequence[tuple[tuple[int, ...], str]]) -> Callable[[], list[Any]]:
        """A function returning one array per ``(shape, dtype)`` spec, disjoint from each other."""
        offsets, end = [], 0
        for shape, dtype in specs:
            offsets.append(end)
            end += -(-_nbytes(self.xp, shape, dtype) // ALIGNMENT) * ALIGNMENT
        self.nbytes = max(self.nbytes, end)
        cache: list[Any] = []

        def views() -> list[Any]:
            if not cache:
                if self._buffer is None:
                    self._buffer = self.xp.empty(max(self.nbytes, 1), dtype=self.xp.uint8)
                assert self._buffer.size >= end, "a workspace request came after the buffer was allocated"
                for (shape, dtype), start in zip(specs, offsets):
                    size = _nbytes(self.xp, shape, dtype)
                    cache.append(self._buffer[start:start + size].view(dtype).reshape(shape))
            return cache

        return views


PARALLEL_MIN_ELEMENTS = 1 << 18
"""A pass over memory of at least this many elements is split over the runner's workers (fused programs' blocks,
single element-wise ops, reductions, layer-norm statistics): with BLAS at one thread two workers pay from about
256K elements (benchmarks/RESULTS.md, "Behind the code: kernels/fused.py", and its Transformer step section for
the others)."""


def split(length: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(start, stop)`` ranges covering ``range(length)`` (none empty)."""
    parts = max(1, min(parts, length))
    bounds = [length * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


class Runner:
    """How a backend runs a kernel's work: its worker count, its parallel sections and its GEMMs.

    Shared kernels ask the kernel context's runner (``kc.runner``) and never import a backend. This one,
    every backend's default, is serial: one worker, tasks run in turn in the calling thread, GEMMs are
    ``xp.matmul``. The NumPy transformer hands kernels ``NumpyRunner`` (``transformers/numpy/runtime.py``),
    which splits sections and big GEMMs over its worker threads.
    """

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    def threads(self) -> int:
        """How many workers a kernel may split a section over (read when the kernel is made)."""
        return 1

    def run(self, tasks: Sequence[Callable[[], Any]]) -> None:
        """Run ``tasks``, the first in the calling thread; re-raises the first failure."""
        for task in tasks:
            task()

    def matmul(self, size: int | None = None, blas_threads: bool = False) -> Callable[[Any, Any, Any], Any]:
        """``fn(a, b, out)``: a kernel's GEMM of ``size`` multiply-adds (None: any size), into ``out``.
        ``blas_threads``: the computation runs its big GEMMs on BLAS's own threads (``KernelContext``)."""
        xp = self.xp
        return lambda a, b, out: xp.matmul(a, b, out=out)

    def product(self) -> Callable[[Any, Any, Any], Any]:
        """``fn(a, b, out)``: one GEMM in the calling thread (a worker's part of a section)."""
        xp = self.xp
        return lambda a, b, out: xp.matmul(a, b, out=out)


def per_object(make: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn(x)``: ``make(x)``, kept and returned again while ``x`` is the same array object as last call's.

    A plan hands a kernel the same objects call after call: arena buffers, constants, the views kernels
    keep. A view made from one follows its data, and a constant never changes, so what is derived from
    them (a reshaped view, a contiguous copy of a weight) need be made once; a new object makes it anew.
    Only for values that are views of ``x`` or for ``x`` that never changes (a constant): a variable
    written in place is the same object with new values.

    Example:
        >>> matrix = per_object(lambda w: xp.ascontiguousarray(w.T))  # a constant weight, transposed once
    """
    last: list[tuple[Any, Any] | None] = [None]

    def kept(x: Any) -> Any:
        seen = last[0]  # one tuple read: threads sharing the kernel never see half an update
        if seen is not None and seen[0] is x:
            return seen[1]
        value = make(x)
        last[0] = (x, value)
        return value

    return kept


@dataclass(frozen=True)
class KernelContext:
    """Handed to every kernel factory at compile time.

    Attributes:
        xp: the array module (numpy or cupy).
        dtype_of: the dtype an op's value has on this transformer (float32 may run as float64).
        generator_for: the random generator a random op draws from (the transformer's stream).
        workspace: scratch shared by the kernels of one computation (None: each kernel
            that needs scratch makes its own, as constant folding does).
        communicator: the ``ng.distributed`` communicator collective kernels use (None: the
            current one, ``ng.distributed.current()``, when the kernel is made).
        pending: requests that ``allreduce_start`` kernels started and the matching
            ``allreduce_wait`` kernels complete, keyed by the start op (one dict per computation).
        im2col: the backend's im2col maker, ``(xp, x_axes, fshape, conv_arg, dtype, x_dtype, workers=) -> Im2col``
            (None: the shared ``kernels/conv.Im2col``; the CuPy transformer gives a CUDA kernel's).
        conv_variant: ``(kind, kernel, kc, *args, epilogue=None) -> kernel``: what a convolution kernel of ``kind``
            (``conv``, ``conv_cut``: a filter cut to its live taps, ``bprop_data``, ``bprop_filter``) runs
            in place of the im2col ``kernel``
            (None: that kernel; the NumPy transformer gives ``numpy/conv_choice.variant``).
        blas_threads: the computation's big GEMMs run on BLAS's own threads (the NumPy runtime's
            ``blas_matmul``), not split over the runtime's workers: set by the NumPy transformer for a
            computation with no section of its own on the workers (``NumpyTransformer.blas_threads``).
        runner: how kernels split work and run GEMMs (``Runner``; None: the serial ``Runner(xp)``; the
            NumPy transformer gives ``NumpyRunner``, its worker threads).

    Calling convention: a kernel for an op that owns a buffer (not in
    ``OpGroup.NO_BUFFER``) is called as ``kernel(out, *inputs)`` and writes its value
    into ``out`` (C-contiguous, the op's shape and dtype: a planned arena view, or a
    fresh array for a result); other kernels are called as ``kernel(*inputs)``.
    """

    xp: Any
    dtype_of: Callable[[Op], str]
    generator_for: Callable[[Op], Any]
    workspace: Workspace | None = None
    compile_subgraph: Callable[..., Callable[..., tuple]] | None = None
    communicator: Any = None
    pending: dict[Op, Any] = field(default_factory=dict, compare=False)
    im2col: Callable[..., Any] | None = None
    conv_variant: Callable[..., Any] | None = None
    blas_threads: bool = False
    runner: Runner = field(default=None, compare=False)  # type: ignore[assignment]  # None: Runner(xp), below

    def __post_init__(self) -> None:
        if self.runner is None:
            object.__setattr__(self, "runner", Runner(self.xp))

    def subgraph(self, graph: Any, into: tuple[tuple[int, bool], ...] = ()) -> Callable[..., tuple]:
        """``graph`` (an ``ir.Graph``) compiled once on this transformer: a function from one array per
        param to a tuple of its results. Raises ``UnsupportedOpError`` where nothing can compile it.

        ``into``: roots the caller can give a buffer for, as (root index, the buffer is C-contiguous).
        The function's ``accepted_into`` attribute (absent: none) lists the roots it writes straight
        into such buffers; it takes them as extra arguments after the params, in that order.
        """
        if self.compile_subgraph is None:
            raise UnsupportedOpError(
                f"this kernel context cannot compile sub-graphs ({graph!r}); hint: run the graph through a "
                "transformer's computation"
            )
        return self.compile_subgraph(graph, into) if into else self.compile_subgraph(graph)

    def scratch(self) -> Workspace:
        """The computation's workspace, or a private one when there is none."""
        return self.workspace if self.workspace is not None else Workspace(self.xp)


KernelFactory = Callable[[Op, KernelContext], Kernel]
