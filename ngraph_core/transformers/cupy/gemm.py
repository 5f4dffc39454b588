"""GEMMs a CUDA graph can capture: cuBLAS called through ctypes, with handles of our own.

Why not ``cupy.matmul``: CuPy 14.2 refuses every cuBLAS call while the current stream captures. Each
function of ``cupy_backends/cuda/libs/cublas.pyx`` (``sgemm``, ``gemmEx``, ``gemmStridedBatchedEx``...,
hence ``cupy.matmul``, ``cupy.dot``, ``cupy.einsum``) first runs ``_setStream(handle)``, which calls
``setStream(handle, current stream)``, which raises ``NotImplementedError("calling cuBLAS API during
stream capture is currently unsupported")`` when ``runtime.streamIsCapturing(stream)`` (CuPy issue
6290; its comment: cuBLAS supports capture "under certain conditions" CuPy has not worked out). The
check is CuPy's, not cuBLAS's, and its binding cannot be called around it: ``setStream`` is run by
every routine. cuBLAS's own conditions ("CUDA Graphs Support" in its documentation) are met here:

* a workspace of our own per handle (``cublasSetWorkspace``, ``WORKSPACE_BYTES``), so cuBLAS never
  allocates while capturing; ``cublasSetStream`` resets it, so each handle is bound to one stream
  once, when made (``CublasGemm.handle``: one handle per stream);
* the host pointer mode: alpha = 1 and beta = 0 are read when the call is recorded, as constants;
* no result written to host memory (a GEMM has none).

Layouts (``plan_gemm``): our arrays are row-major views with any strides; cuBLAS is column-major. A
row-major ``C = A @ B`` is the column-major ``Cᵀ = Bᵀ Aᵀ``, so a C-contiguous output swaps the operands.
Each operand is read as it lies: unit stride along its rows (a transposed view: ``OP_N``) or along its
columns (``OP_T``), its other stride the leading dimension. Stacks (3-D, or a 2-D operand against a 3-D
one) are one strided-batched call; a batch stride of 0 repeats a matrix. An operand with neither unit
stride is copied contiguous first (an element-wise kernel, capturable too). float16, integer, mixed
dtypes and more than three dimensions go to ``cupy.matmul`` (which CuPy's check then refuses under
capture: the computation stays eager and says why).

The math mode is cuBLAS's default (no TF32), as ``cupy.matmul``'s without ``CUPY_TF32``.
"""

from __future__ import annotations

import ctypes
import os
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import BackendUnavailableError, NgraphError

OP_N, OP_T = 0, 1  # cublasOperation_t
POINTER_MODE_HOST = 0  # cublasPointerMode_t
WORKSPACE_BYTES = 32 << 20
"""A handle's workspace: cuBLAS's recommended size for Hopper and Blackwell (4 MiB for older GPUs)."""
_INT_MAX = 2**31 - 1

Matrix = tuple[int, int]
"""A matrix's element strides: (along its columns = between rows, along its rows = between columns)."""


class CublasError(NgraphError, RuntimeError):
    """A cuBLAS call returned a status other than success."""


class GemmPlan(NamedTuple):
    """The arguments of one column-major cuBLAS GEMM (``C = op(A) op(B)``), element counts.

    ``swapped``: cuBLAS's A is our right operand (the row-major ``Cᵀ = Bᵀ Aᵀ``); ``batch > 1``: a
    strided-batched call with the batch strides ``stride_*`` (0 repeats one matrix).
    """

    transa: int
    transb: int
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    swapped: bool
    batch: int
    stride_a: int
    stride_b: int
    stride_c: int


def column_major(rows: int, cols: int, along_cols: int, along_rows: int) -> tuple[int, int] | None:
    """``(op, ld)`` reading a ``rows x cols`` matrix of element strides ``(along_cols, along_rows)`` as op(Q),
    Q column-major with leading dimension ld; None when neither stride is a unit one.

    A stride of a length-1 axis is never used, so it counts as whatever fits.

    Example:
        >>> column_major(3, 4, 4, 1)  # row-major: the transpose of a column-major 4 x 3
        (1, 4)
    """
    if (along_cols == 1 or rows == 1) and (cols == 1 or along_rows >= max(1, rows)):
        return OP_N, (max(1, rows) if cols == 1 else along_rows)
    if (along_rows == 1 or cols == 1) and (rows == 1 or along_cols >= max(1, cols)):
        return OP_T, (max(1, cols) if rows == 1 else along_cols)
    return None


def plan_gemm(m: int, n: int, k: int, a: Matrix, b: Matrix, c: Matrix, batch: int = 1,
              batch_strides: tuple[int, int, int] = (0, 0, 0)) -> GemmPlan | None:
    """The cuBLAS call writing ``C (m x n) = A (m x k) @ B (k x n)`` for row-major views of element strides
    ``a``, ``b``, ``c`` (``batch`` of them, ``batch_strides`` apart); None for a layout cuBLAS cannot take
    as it lies (the caller copies the operands contiguous) or sizes past its 32-bit arguments.

    Example:
        >>> plan_gemm(2, 3, 4, (4, 1), (3, 1), (3, 1))[:9]  # all C-contiguous: Cᵀ = Bᵀ Aᵀ, nothing transposed
        (0, 0, 3, 2, 4, 3, 4, 3, True)
    """
    stride_a, stride_b, stride_c = batch_strides if batch > 1 else (0, 0, 0)
    out = column_major(m, n, *c)
    swapped = out is None or out[0] != OP_N
    if swapped:  # Cᵀ (n x m) = Bᵀ (n x k) @ Aᵀ (k x m): each transposed view swaps its strides
        m, n, a, b, stride_a, stride_b = n, m, b[::-1], a[::-1], stride_b, stride_a
        out = column_major(m, n, *c[::-1])
        if out is None or out[0] != OP_N:
            return None
    left, right = column_major(m, k, *a), column_major(k, n, *b)
    if left is None or right is None or min(stride_a, stride_b, stride_c) < 0:
        return None
    ldc = out[1]
    if batch > 1 and stride_c < (n - 1) * ldc + m:  # the outputs of a batch would overlap
        return None
    if max(m, n, k, left[1], right[1], ldc, batch) > _INT_MAX:
        return None
    return GemmPlan(left[0], right[0], m, n, k, left[1], right[1], ldc, swapped, batch, stride_a, stride_b,
                    stride_c)


def matmul_shape(a_shape: Sequence[int], b_shape: Sequence[int]) -> tuple[int, ...] | None:
    """``matmul``'s result shape for operands of 1-3 dimensions, None otherwise (or when they do not fit)."""
    if not (1 <= len(a_shape) <= 3 and 1 <= len(b_shape) <= 3):
        return None
    if a_shape[-1] != (b_shape[0] if len(b_shape) == 1 else b_shape[-2]):
        return None
    stacks = [s[0] for s in (a_shape, b_shape) if len(s) == 3]
    if len(stacks) == 2 and stacks[0] != stacks[1] and 1 not in stacks:
        return None
    lead = (max(stacks),) if stacks else ()
    return lead + tuple(a_shape[-2:-1]) + tuple(b_shape[-1:] if len(b_shape) > 1 else ())


def plan_matmul(a_shape: Sequence[int], a_strides: Sequence[int], b_shape: Sequence[int],
                b_strides: Sequence[int], c_strides: Sequence[int], itemsize: int) -> GemmPlan | None:
    """``plan_gemm`` for ``matmul(a, b, out=c)`` given shapes and byte strides (1-3 dimensions each, as
    ``matmul_shape`` checked); a 1-D operand is a one-row (a) or one-column (b) matrix.

    Example:
        >>> plan_matmul((5, 2, 3), (24, 12, 4), (3, 4), (16, 4), (32, 16, 4), 4).batch  # a stack times a matrix
        5
    """
    if any(s % itemsize for s in (*a_strides, *b_strides, *c_strides)):
        return None
    a_st, b_st, c_st = ([s // itemsize for s in st] for st in (a_strides, b_strides, c_strides))
    m = a_shape[-2] if len(a_shape) > 1 else 1
    n = b_shape[-1] if len(b_shape) > 1 else 1
    a_mat = (a_st[-2], a_st[-1]) if len(a_shape) > 1 else (0, a_st[0])
    b_mat = (b_st[-2], b_st[-1]) if len(b_shape) > 1 else (b_st[0], 0)
    batch = max(s[0] if len(s) == 3 else 1 for s in (a_shape, b_shape))
    a_batch = a_st[0] if len(a_shape) == 3 and a_shape[0] > 1 else 0
    b_batch = b_st[0] if len(b_shape) == 3 and b_shape[0] > 1 else 0
    stacked = len(a_shape) == 3 or len(b_shape) == 3
    rest = list(c_st[1:] if stacked else c_st)
    c_m = rest.pop(0) if len(a_shape) > 1 else 0
    c_n = rest.pop(0) if len(b_shape) > 1 else 0
    c_batch = c_st[0] if stacked else 0
    return plan_gemm(m, n, a_shape[-1], a_mat, b_mat, (c_m, c_n), batch, (a_batch, b_batch, c_batch))


def device_pointer(x: Any) -> int:
    """The device address of ``x``'s first element (a CuPy view's ``data.ptr`` includes its offset)."""
    return x.data.ptr


class CublasGemm:
    """``matmul`` and ``dot`` with ``cupy.matmul``'s signature, issued to cuBLAS through our handles.

    Args:
        cupy: the cupy module (allocations, the current stream, the fallback).
        library: libcublas as ``load_library`` returns it (or a stand-in with the same functions).
        workspace_bytes: each handle's workspace.

    A handle is made on the device current when its stream first runs a GEMM (one device per transformer).

    Attributes:
        calls: GEMMs issued straight to cuBLAS; ``fallbacks``: products handed to ``cupy.matmul``.

    Example:
        >>> gemm = CublasGemm(cupy, load_library(cupy))
        >>> gemm.matmul(a, b, out=c)  # capturable: no CuPy cuBLAS binding involved
    """

    def __init__(self, cupy: Any, library: Any, workspace_bytes: int = WORKSPACE_BYTES) -> None:
        self.cupy, self.library, self.workspace_bytes = cupy, library, workspace_bytes
        self.handles: dict[int, int] = {}
        self._workspaces: list[Any] = []  # kept alive as long as the handles that use them
        self._scalars = {char: (ctype(1.0), ctype(0.0)) for char, ctype in (("f", ctypes.c_float),
                                                                               ("d", ctypes.c_double))}
        self._addresses = {char: (ctypes.addressof(one), ctypes.addressof(zero))
                           for char, (one, zero) in self._scalars.items()}
        self._gemm = {"f": library.cublasSgemm_v2, "d": library.cublasDgemm_v2}
        self._batched = {"f": library.cublasSgemmStridedBatched, "d": library.cublasDgemmStridedBatched}
        self.calls = 0
        self.fallbacks = 0

    def handle(self, stream_ptr: int) -> int:
        """The handle bound to the stream at ``stream_ptr`` (made on first use: a handle, its workspace)."""
        handle = self.handles.get(stream_ptr)
        if handle is None:
            lib, box = self.library, ctypes.c_void_p()
            _check("cublasCreate", lib.cublasCreate_v2(ctypes.byref(box)))
            handle = box.value
            workspace = self.cupy.empty((self.workspace_bytes,), dtype=self.cupy.uint8)
            self._workspaces.append(workspace)
            _check("cublasSetStream", lib.cublasSetStream_v2(handle, stream_ptr))
            # after setStream: it resets the workspace to cuBLAS's own pool
            _check("cublasSetWorkspace", lib.cublasSetWorkspace_v2(handle, device_pointer(workspace),
                                                                   self.workspace_bytes))
            _check("cublasSetPointerMode", lib.cublasSetPointerMode_v2(handle, POINTER_MODE_HOST))
            self.handles[stream_ptr] = handle
        return handle

    def matmul(self, a: Any, b: Any, out: Any = None) -> Any:
        """``cupy.matmul(a, b, out=out)`` for float32/float64 operands of 1-3 dimensions through our handle."""
        char = a.dtype.char
        shape = matmul_shape(a.shape, b.shape)
        if (shape is None or char not in self._gemm or b.dtype.char != char
                or (out is not None and (out.shape != shape or out.dtype.char != char))):
            return self._fallback(a, b, out)
        cupy = self.cupy
        if out is None:
            out = cupy.empty(shape, dtype=a.dtype)
        if out.size == 0 or a.shape[-1] == 0:
            if out.size:
                out.fill(0)
            return out
        target = out
        plan = plan_matmul(a.shape, a.strides, b.shape, b.strides, out.strides, a.itemsize)
        if plan is None:  # an operand strided both ways (or an output cuBLAS cannot write): contiguous copies
            a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
            if not out.flags.c_contiguous:
                target = cupy.empty(shape, dtype=a.dtype)
            plan = plan_matmul(a.shape, a.strides, b.shape, b.strides, target.strides, a.itemsize)
            if plan is None:
                return self._fallback(a, b, out)
        self._launch(plan, char, a, b, target)
        if target is not out:
            cupy.copyto(out, target)
        return out

    def dot(self, a: Any, b: Any, out: Any = None) -> Any:
        """``cupy.dot``: for operands of 1-2 dimensions it is ``matmul``; others go to ``cupy.dot``."""
        if 1 <= a.ndim <= 2 and 1 <= b.ndim <= 2:
            return self.matmul(a, b, out)
        self.fallbacks += 1
        return self.cupy.dot(a, b, out=out)

    def _launch(self, plan: GemmPlan, char: str, a: Any, b: Any, c: Any) -> None:
        handle = self.handle(self.cupy.cuda.get_current_stream().ptr)
        first, second = device_pointer(a), device_pointer(b)
        if plan.swapped:
            first, second = second, first
        one, zero = self._addresses[char]
        if plan.batch == 1:
            status = self._gemm[char](handle, plan.transa, plan.transb, plan.m, plan.n, plan.k, one, first,
                                      plan.lda, second, plan.ldb, zero, device_pointer(c), plan.ldc)
        else:
            status = self._batched[char](handle, plan.transa, plan.transb, plan.m, plan.n, plan.k, one, first,
                                         plan.lda, plan.stride_a, second, plan.ldb, plan.stride_b, zero,
                                         device_pointer(c), plan.ldc, plan.stride_c, plan.batch)
        _check("cublasSgemm" if char == "f" else "cublasDgemm", status)
        self.calls += 1

    def _fallback(self, a: Any, b: Any, out: Any) -> Any:
        self.fallbacks += 1
        try:
            return self.cupy.matmul(a, b, out=out)
        except NotImplementedError as exc:  # CuPy's capture check: say which product it was
            raise NotImplementedError(
                f"{exc} (cupy.matmul of {a.dtype} {a.shape} by {b.dtype} {b.shape}: a product the capture-safe "
                "GEMM does not take; it takes float32/float64 operands of 1-3 dimensions)") from None


def _check(name: str, status: int) -> None:
    if status:
        raise CublasError(f"cupy/gemm.py: {name} returned cuBLAS status {status}; hint: NG_CUDA_GRAPHS=0 runs "
                          "cupy.matmul instead")


def library_candidates(maps: str = "/proc/self/maps") -> list[str]:
    """Where libcublas (not cublasLt) may be, best first: the copy already loaded in this process, the pip
    wheels' (``nvidia-cublas``: ``nvidia/cu13/lib``, ``nvidia/cublas/lib``), then names for ``dlopen``."""
    found: list[str] = []
    try:
        with open(maps) as lines:
            paths = (line.split()[-1] for line in lines if line.strip())
            found += [path for path in paths if os.path.basename(path).startswith("libcublas.so")]
    except OSError:
        pass
    try:
        import nvidia  # type: ignore[import-not-found]  # the namespace package of NVIDIA's pip wheels

        for root in nvidia.__path__:
            found += sorted(str(p) for p in Path(root).glob("*/lib/libcublas.so*"))
    except ImportError:
        pass
    found += ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]
    return list(dict.fromkeys(found))


def load_library(cupy: Any) -> ctypes.CDLL:
    """libcublas with the prototypes ``CublasGemm`` calls: the one CuPy loaded (CuPy's cuBLAS handle is made
    first, so it is in the process), else the first that ``dlopen`` finds.

    Raises:
        BackendUnavailableError: no libcublas could be opened, or it lacks a function used here.
    """
    errors = []
    try:
        cupy.cuda.device.get_cublas_handle()  # loads CuPy's libcublas (a no-op once made)
    except Exception as exc:  # CuPy could not load it: look further
        errors.append(f"CuPy's cuBLAS handle: {exc}")
    for path in library_candidates():
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
            return lib
        except (OSError, AttributeError) as exc:
            errors.append(f"{path}: {exc}")
    raise BackendUnavailableError("cupy transformer: cannot open libcublas for capture-safe GEMMs ("
                                  + "; ".join(errors) + "); hint: NG_CUDA_GRAPHS=0 runs cupy.matmul instead")


def _declare(lib: ctypes.CDLL) -> None:
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    gemm = [vp, i32, i32, i32, i32, i32, vp, vp, i32, vp, i32, vp, vp, i32]
    batched = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i64, vp, i32, i64, vp, vp, i32, i64, i32]
    for name, args in (("cublasCreate_v2", [ctypes.POINTER(vp)]), ("cublasSetStream_v2", [vp, vp]),
                       ("cublasSetWorkspace_v2", [vp, vp, ctypes.c_size_t]), ("cublasSetPointerMode_v2", [vp, i32]),
                       ("cublasSgemm_v2", gemm), ("cublasDgemm_v2", gemm),
                       ("cublasSgemmStridedBatched", batched), ("cublasDgemmStridedBatched", batched)):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int


def capture_safe(cupy: Any, gemm: CublasGemm) -> types.ModuleType:
    """A module that is ``cupy`` except for ``matmul`` and ``dot`` (``gemm``'s): the kernels' ``xp``.

    The shared kernels call ``xp.matmul`` / ``xp.dot`` (``kernels/contraction.py``, ``conv.py``,
    ``normalization.py``...), so giving them this module routes every GEMM of a plan through ``gemm``
    with no kernel changed. Names are copied from a real module (a lookup costs what it did), and
    looked up on ``cupy`` otherwise.
    """
    module = types.ModuleType("cupy", "cupy, with capture-safe matmul and dot (ngraph_core.transformers.cupy.gemm)")
    if isinstance(cupy, types.ModuleType):
        module.__dict__.update({k: v for k, v in vars(cupy).items() if not k.startswith("__")})
    module.__getattr__ = lambda name: getattr(cupy, name)  # PEP 562: names not copied
    module.matmul, module.dot = gemm.matmul, gemm.dot
    module.capture_safe_gemm = gemm
    return module


__all__ = ["CublasError", "CublasGemm", "GemmPlan", "capture_safe", "column_major", "load_library",
           "matmul_shape", "plan_gemm", "plan_matmul"]
