"""CuPy's CUDA side stood in on the CPU: streams that capture, graphs that replay, libcublas on NumPy memory.

The CuPy transformer's capture logic (``cupy.GraphRunner``) and its capture-safe GEMMs (``cupy/gemm.py``)
run here without a GPU, on the CuPy-surface checker (``cupy_surface.py``) plus:

* ``FakeCuda`` (``cupy.cuda``): ``Stream`` (a context manager making it current, ``begin_capture`` /
  ``end_capture``), ``get_current_stream``, ``MemoryPool``, ``using_allocator``, ``runtime``.
* Capture as CUDA does it, as far as the host can tell: every device call and operator made while a
  stream captures is recorded (``cupy_surface.CAPTURE``) and the graph ``end_capture`` returns replays
  them into the arrays they wrote. What CUDA and CuPy refuse while capturing raises here too:
  ``cupy.matmul`` / ``cupy.dot`` (CuPy's "calling cuBLAS API during stream capture is currently
  unsupported"), a device value read on the host (the capture is invalidated), work issued on
  another stream than the capturing one, a stream synchronised while capturing.
  A recorded call runs at once as well (the host needs its result's shape), so the first launch after a
  capture replays nothing: the capture was that run (the runner always launches once after capturing).
* ``FakeCublas``: ``cublasCreate_v2``, ``SetStream``, ``SetWorkspace``, ``SetPointerMode`` and the
  (strided-batched) S/D GEMMs, computed by NumPy on the raw addresses with cuBLAS's column-major
  meaning of every argument; it refuses a handle without a workspace, leading dimensions cuBLAS would
  reject, and a GEMM on a handle bound to another stream than the one capturing.

``installed()`` puts it all in place (``sys.modules["cupy"]``, ``cuda_gemm``'s library and pointers);
``CpuCupyTransformer`` is the CuPy transformer with the shared kernels where it has CUDA ones.

Example:
    >>> with installed() as cupy:
    ...     t = CpuCupyTransformer()  # GraphRunner + capture-safe GEMMs on NumPy
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import types
from collections.abc import Iterator
from typing import Any

import cupy_surface
import numpy as np
from cupy_surface import CupySurface, Ufunc

from ngraph_core.ir import OpType
from ngraph_core.transformers.cupy import CupyTransformer
from ngraph_core.transformers.cupy import gemm as cuda_gemm
from ngraph_core.transformers.kernels.fused import unblocked

CUBLAS_REFUSAL = "calling cuBLAS API during stream capture is currently unsupported"


class CUDARuntimeError(RuntimeError):
    """What ``cupy_backends.cuda.api.runtime`` raises for a CUDA error."""


class FakeStream:
    """``cupy.cuda.Stream``: a pointer, ``with`` makes it current, and capture."""

    _next_ptr = [0x1000]

    def __init__(self, cuda: FakeCuda, ptr: int | None = None) -> None:
        self.cuda = cuda
        if ptr is None:
            ptr = self._next_ptr[0] = self._next_ptr[0] + 0x10
        self.ptr = ptr
        self.log: _Log | None = None
        self._reads = 0

    def __enter__(self) -> FakeStream:
        self.cuda.stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cuda.stack.pop()

    def synchronize(self) -> None:
        if self.cuda.capturing is not None:
            raise CUDARuntimeError("cudaErrorStreamCaptureUnsupported: operation not permitted when stream is "
                                   "capturing (fake_cuda)")

    def is_capturing(self) -> bool:
        return self.log is not None

    def begin_capture(self, mode: Any = None) -> None:
        if self.cuda.capturing is not None:
            raise CUDARuntimeError("cudaErrorIllegalState: a stream is already capturing (fake_cuda)")
        self.log = _Log(self)
        self._reads = cupy_surface.HOST_READS[0]
        cupy_surface.CAPTURE[0] = self.log
        self.cuda.capturing = self
        self.cuda.captures += 1

    def end_capture(self) -> FakeGraph:
        log, self.log = self.log, None
        cupy_surface.CAPTURE[0] = None
        self.cuda.capturing = None
        if log is None:
            raise CUDARuntimeError("cudaErrorIllegalState: the stream is not capturing (fake_cuda)")
        if cupy_surface.HOST_READS[0] != self._reads:
            raise CUDARuntimeError("cudaErrorStreamCaptureInvalidated: operation failed due to a previous error "
                                   "during capture (a device value was read on the host; fake_cuda)")
        return FakeGraph(list(log))


class _Log(list):
    """The calls recorded by a capture; a call issued on another stream than the capturing one is an error
    (CUDA would run it at once, outside the graph, or refuse it on the legacy stream)."""

    def __init__(self, stream: FakeStream) -> None:
        super().__init__()
        self.stream = stream

    def append(self, replay: Any) -> None:
        current = self.stream.cuda.get_current_stream()
        if current is not self.stream:
            raise CUDARuntimeError(f"cudaErrorStreamCaptureImplicit: work on stream {current.ptr:#x} while stream "
                                   f"{self.stream.ptr:#x} captures (fake_cuda)")
        super().append(replay)


class FakeGraph:
    """A captured graph: ``launch`` replays the recorded calls (the first launch after capture: nothing)."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.launches = 0

    def launch(self, stream: Any = None) -> None:
        if self.launches:
            for replay in self.log:
                replay()
        self.launches += 1


class FakeCuda:
    """``cupy.cuda``: streams, the current stream, memory pools and the runtime constants used here."""

    def __init__(self) -> None:
        self.null = FakeStream(self, ptr=0)
        self.stack: list[FakeStream] = []
        self.capturing: FakeStream | None = None
        self.captures = 0
        self.runtime = types.SimpleNamespace(getDeviceCount=lambda: 1, streamCaptureModeRelaxed=2,
                                             runtimeGetVersion=lambda: 13000,
                                             getDeviceProperties=lambda i: {"name": b"fake_cuda CPU"})
        self.device = types.SimpleNamespace(get_cublas_handle=lambda: 0)

    def Stream(self, non_blocking: bool = False) -> FakeStream:  # noqa: N802 - CuPy's name
        return FakeStream(self)

    def get_current_stream(self) -> FakeStream:
        return self.stack[-1] if self.stack else self.null

    def MemoryPool(self) -> Any:  # noqa: N802 - CuPy's name
        return types.SimpleNamespace(malloc=lambda size: None)

    def using_allocator(self, malloc: Any = None) -> Any:
        return contextlib.nullcontext()

    def Device(self) -> Any:  # noqa: N802 - CuPy's name
        return types.SimpleNamespace(synchronize=lambda: None)


class FakeCupy(CupySurface):
    """The CuPy-surface ``xp`` with ``cuda`` (``FakeCuda``) and CuPy's refusal of cuBLAS while capturing."""

    def __init__(self) -> None:
        super().__init__()
        self.cuda = FakeCuda()
        self.__version__ = "14.2.0 (fake_cuda on NumPy)"
        self._extra["cuda"] = self.cuda
        self._extra["matmul"] = self._refusing(Ufunc(np.matmul))
        self._extra["dot"] = self._refusing(self._function("dot", np.dot))

    def _refusing(self, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.cuda.capturing is not None:  # cupy_backends/cuda/libs/cublas.pyx: setStream
                raise NotImplementedError(CUBLAS_REFUSAL)
            return fn(*args, **kwargs)

        return call


def pointer(x: Any) -> int:
    """A stand-in device array's address (``cuda_gemm.device_pointer`` on a GPU reads ``x.data.ptr``)."""
    return np.ndarray.view(x, np.ndarray).__array_interface__["data"][0]


def _view(ptr: int, dtype: Any, rows: int, cols: int, ld: int) -> np.ndarray:
    """The column-major ``rows x cols`` matrix with leading dimension ``ld`` at address ``ptr``."""
    itemsize = np.dtype(dtype).itemsize
    extent = ((cols - 1) * ld + rows) * itemsize if rows and cols else itemsize
    buffer = (ctypes.c_char * extent).from_address(ptr)
    return np.ndarray((rows, cols), dtype, buffer=buffer, strides=(itemsize, ld * itemsize))


class FakeCublas:
    """libcublas's functions used by ``cuda_gemm``, computed with NumPy on raw addresses (status 0: success).

    Attributes:
        gemms: one ``(handle, stream pointer, batch)`` per GEMM run.
    """

    INVALID_VALUE, NOT_INITIALIZED = 7, 1

    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.handles: dict[int, dict[str, Any]] = {}
        self.gemms: list[tuple[int, int, int]] = []

    def cublasCreate_v2(self, box: Any) -> int:  # noqa: N802 - cuBLAS's names
        handle = 0x100 * (len(self.handles) + 1)
        box._obj.value = handle  # a ctypes.byref(c_void_p)
        self.handles[handle] = {"stream": 0, "workspace": None, "mode": None}
        return 0

    def cublasSetStream_v2(self, handle: int, stream: int) -> int:  # noqa: N802
        self.handles[handle].update(stream=stream, workspace=None)  # as cuBLAS: back to its own pool
        return 0

    def cublasSetWorkspace_v2(self, handle: int, ptr: int, size: int) -> int:  # noqa: N802
        self.handles[handle]["workspace"] = (ptr, size)
        return 0

    def cublasSetPointerMode_v2(self, handle: int, mode: int) -> int:  # noqa: N802
        self.handles[handle]["mode"] = mode
        return 0

    def cublasSgemm_v2(self, *args: Any) -> int:  # noqa: N802
        return self._gemm(np.float32, *args[:9], 0, *args[9:11], 0, *args[11:], 0, 1)

    def cublasDgemm_v2(self, *args: Any) -> int:  # noqa: N802
        return self._gemm(np.float64, *args[:9], 0, *args[9:11], 0, *args[11:], 0, 1)

    def cublasSgemmStridedBatched(self, *args: Any) -> int:  # noqa: N802
        return self._gemm(np.float32, *args)

    def cublasDgemmStridedBatched(self, *args: Any) -> int:  # noqa: N802
        return self._gemm(np.float64, *args)

    def _gemm(self, dtype: Any, handle: int, transa: int, transb: int, m: int, n: int, k: int, alpha: int, a: int,
              lda: int, stride_a: int, b: int, ldb: int, stride_b: int, beta: int, c: int, ldc: int, stride_c: int,
              batch: int) -> int:
        state = self.handles.get(handle)
        if state is None:
            return self.NOT_INITIALIZED
        if state["workspace"] is None or state["mode"] != 0:  # cuBLAS would allocate (or read device scalars)
            return self.INVALID_VALUE
        a_rows, b_rows = (m, k) if transa == 0 else (k, m), (k, n) if transb == 0 else (n, k)
        if min(m, n, k, batch) < 0 or lda < max(1, a_rows[0]) or ldb < max(1, b_rows[0]) or ldc < max(1, m):
            return self.INVALID_VALUE
        capturing = self.cuda.capturing
        if capturing is not None and capturing.ptr != state["stream"]:
            raise CUDARuntimeError(f"fake_cuda: a GEMM on a handle bound to stream {state['stream']:#x} while "
                                   f"stream {capturing.ptr:#x} captures (it would run outside the graph)")
        scalar = ctypes.c_float if dtype is np.float32 else ctypes.c_double
        one, zero = scalar.from_address(alpha).value, scalar.from_address(beta).value
        itemsize = np.dtype(dtype).itemsize

        def run() -> None:
            for i in range(batch):
                left = _view(a + i * stride_a * itemsize, dtype, *a_rows, lda)
                right = _view(b + i * stride_b * itemsize, dtype, *b_rows, ldb)
                out = _view(c + i * stride_c * itemsize, dtype, m, n, ldc)
                product = (left if transa == 0 else left.T) @ (right if transb == 0 else right.T)
                out[...] = one * product + (zero * out if zero else 0)

        run()
        if capturing is not None:
            capturing.log.append(run)
        self.gemms.append((handle, state["stream"], batch))
        return 0


@contextlib.contextmanager
def installed() -> Iterator[FakeCupy]:
    """``import cupy`` gives a ``FakeCupy`` and ``cuda_gemm`` calls a ``FakeCublas`` on it, until the block ends."""
    cupy = FakeCupy()
    saved = sys.modules.get("cupy"), cuda_gemm.load_library, cuda_gemm.device_pointer
    sys.modules["cupy"] = cupy  # type: ignore[assignment]
    cuda_gemm.load_library = lambda module: FakeCublas(module.cuda)
    cuda_gemm.device_pointer = pointer
    try:
        yield cupy
    finally:
        if saved[0] is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved[0]
        cuda_gemm.load_library, cuda_gemm.device_pointer = saved[1], saved[2]
        cupy_surface.CAPTURE[0] = None


class CpuCupyTransformer(CupyTransformer):
    """The CuPy transformer on ``FakeCupy``: its GraphRunner and GEMM route, the shared kernels for its CUDA ones
    (generated element-wise kernels, CTC, im2col, cuDNN), as ``CupySurfaceTransformer`` runs them."""

    kernel_overrides = {OpType.FUSED: unblocked}
    im2col = None
    conv_variant = None

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.array(cupy_surface._plain(value)) if isinstance(value, cupy_surface.DeviceArray) \
            else np.asarray(value)
