"""The CuPy transformer: the same compiled plans on an NVIDIA GPU.

``make_transformer("cupy")`` compiles exactly the plans the NumPy transformer compiles (the same
passes, memory plan and generated source); only the array module differs. Everything a plan
touches lives on the device: the arena of temporaries (one ``cupy.empty`` per computation, carved
into views by the memory plan), the variables (persistent device arrays), the kernels' scratch
workspace and the result buffers (CuPy's memory pool recycles them). Data crosses the bus only at a
computation's boundary: fed NumPy arrays are copied to the device once each call (device arrays
are used as they are), and results come back as NumPy arrays, or stay on the device with
``device_arrays=True``.

Kernels: the shared ``xp`` kernels run unchanged on CuPy (cuBLAS for ``dot`` and the im2col convolution, CuPy's
ufuncs and reductions for the rest; ``tests/.../cupy_surface.py`` keeps them within CuPy's API on machines without
a GPU). What differs is in ``kernel_overrides``: a fused element-wise program is one generated
``cupy.ElementwiseKernel`` (``elementwise.py``) instead of one launch per step, and CTC's recursions are CUDA
kernels with a thread block per example (``ctc.py``) instead of a Python loop over frames. Convolution: CuPy
14 removed its cuDNN bindings (``cupy.cuda.cudnn`` and ``cupyx.cudnn`` are absent from CuPy 14.2), so convolutions
and their gradients run through ``nvidia-cudnn-frontend``'s graph API (``cudnn.py``, the ``conv_variant``),
and as im2col + a cuBLAS GEMM, the shared kernel's method, where it is missing or cannot run a layer
(``cudnn.report()`` says which ran and why).

GEMMs and CUDA graphs: the kernels' ``xp`` is CuPy with ``matmul`` and ``dot`` replaced
(``gemm.py``): cuBLAS called through ctypes on handles of our own, one per stream with its own
workspace, because CuPy refuses its own cuBLAS calls while a stream captures. That lets
``GraphRunner`` capture a whole training step: each computation is captured as a CUDA graph at its
second call and replayed from then on, one launch instead of a Python call per op
(``cuda_graphs``; ``NG_CUDA_GRAPHS=0`` runs every plan eagerly, ``NG_CUBLAS_GEMM=0`` goes back to
``cupy.matmul``); a plan that cannot be captured runs eagerly and says why (``graph_report()``).

Random ops draw from CuPy's device generators (``cupy.random.default_rng``): reproducible for a
seed, but a different stream from the NumPy transformer's, and their state cannot be saved
(``random_state`` raises ``UnsupportedOpError``; neon checkpoints then omit it).

Importing this module never needs CuPy; constructing the transformer does, and without CuPy, a
device or a recent enough driver it raises ``BackendUnavailableError`` saying which.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from ...errors import BackendUnavailableError, UnsupportedOpError
from ...ir import Op, OpType, owns_buffer
from ..base import Transformer
from ..registry import register_transformer
from . import ctc as cuda_ctc
from . import cudnn as cuda_cudnn
from . import elementwise as cuda_elementwise
from . import gemm as cuda_gemm
from . import im2col as cuda_im2col

_NUMPY_HINT = "use make_transformer('numpy') (or backend='auto', which falls back to NumPy)"


def load_cupy() -> Any:
    """The cupy module, checked to see a usable GPU.

    Raises:
        BackendUnavailableError: CuPy is not installed, the CUDA driver is missing or older than
            CuPy's CUDA runtime needs, or no device is visible.
    """
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError as exc:
        raise BackendUnavailableError(
            f"cupy transformer: CuPy is not installed ({exc}); hint: pip install cupy-cuda13x (or the build "
            f"matching your CUDA) on a machine with an NVIDIA GPU, or {_NUMPY_HINT}"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA raises its own error types when no driver is present
        text = str(exc)
        if "InsufficientDriver" in text or "insufficient driver" in text.lower():
            raise BackendUnavailableError(
                f"cupy transformer: the NVIDIA driver is too old for this CuPy's CUDA runtime ({text}); hint: "
                f"update the driver or install the CuPy build for an older CUDA, or {_NUMPY_HINT}"
            ) from None
        raise BackendUnavailableError(
            f"cupy transformer: no usable GPU: the CUDA driver did not answer ({text}); hint: check nvidia-smi, "
            f"or {_NUMPY_HINT}"
        ) from None
    if count == 0:
        raise BackendUnavailableError(f"cupy transformer: CuPy sees no GPU (0 devices); hint: {_NUMPY_HINT}")
    return cupy


class CupyTransformer(Transformer):
    """Runs compiled plans with CuPy on the current GPU.

    Args:
        device_arrays: return results as CuPy device arrays (no copy to the host); default False:
            NumPy arrays, as the NumPy transformer returns.
        cuda_graphs: capture each computation's plan as a CUDA graph at its second call and replay
            it from then on (``GraphRunner``); a plan that cannot be captured runs eagerly and says why
            (``graph_report()``). Default: the ``NG_CUDA_GRAPHS`` environment variable (``0`` turns it
            off), else on.
        cublas_gemm: issue the plans' GEMMs to cuBLAS through handles of our own (``gemm.py``), the
            route a capture can record; False: ``cupy.matmul``, which CuPy refuses under capture.
            Default: the ``NG_CUBLAS_GEMM`` environment variable (``0`` turns it off), else on.
        **options: the ``Transformer`` options (``float_dtype``, ``seed``, ``optimize``, ``profile``...).
            With ``profile=True`` plans run eagerly (each kernel is timed on the host); a plan is still
            captured once, at its second call, to learn whether it could be, and a plan that cannot warns
            with the reason (``RuntimeWarning``).

    Raises:
        BackendUnavailableError: no CuPy, no GPU, or a driver too old (``load_cupy``).

    Example:
        >>> with make_transformer("cupy", device_arrays=True) as t:
        ...     y_dev = t.computation(y, x)(cupy.asarray(x_batch))  # stays on the GPU
        ...     print(t.graph_report())  # which computations replay as CUDA graphs
    """

    name = "cupy"
    # one generated CUDA kernel per fused program (the shared kernel would launch once per step) and per
    # lone float element-wise op; CTC as three launches (the shared kernel launches a dozen per frame)
    kernel_overrides = {**{kind: cuda_elementwise.elementwise for kind in cuda_elementwise.SUPPORTED},
                        OpType.FUSED: cuda_elementwise.fused,
                        OpType.CTC: cuda_ctc.ctc, OpType.CTC_GRAD: cuda_ctc.ctc_grad}
    compiled_elementwise = cuda_elementwise.SUPPORTED  # the steps a CUDA kernel computes (read by catalog.py)
    # the convolutions' col matrix in one CUDA launch, read through the input's strides
    im2col = staticmethod(cuda_im2col.make_im2col)
    # convolutions and their gradients through cuDNN (nvidia-cudnn-frontend), im2col where it cannot run them
    conv_variant = staticmethod(cuda_cudnn.variant)

    def __init__(self, device_arrays: bool = False, cuda_graphs: bool | None = None, cublas_gemm: bool | None = None,
                 **options: Any) -> None:
        cupy = load_cupy()
        self.device_arrays = bool(device_arrays)
        self.cuda_graphs = _switch("NG_CUDA_GRAPHS", cuda_graphs)
        self.gemm: cuda_gemm.CublasGemm | None = None
        self.gemm_error: str | None = None  # why the plans' GEMMs are cupy.matmul's, when they are
        if _switch("NG_CUBLAS_GEMM", cublas_gemm):
            try:
                self.gemm = cuda_gemm.CublasGemm(cupy, cuda_gemm.load_library(cupy))
            except Exception as exc:  # no usable libcublas: cupy.matmul (plans with GEMMs then stay eager)
                self.gemm_error = f"{type(exc).__name__}: {exc}"
        else:
            self.gemm_error = "cublas_gemm=False (NG_CUBLAS_GEMM=0)"
        self.xp = cupy if self.gemm is None else cuda_gemm.capture_safe(cupy, self.gemm)
        self._stream: Any = None
        self.runners: list[GraphRunner] = []
        super().__init__(**options)

    def close(self) -> None:
        super().close()
        self.runners.clear()

    def _build(self, graph: Any, placeholders: Any, workspace: Any = None, on_device: bool = False,
               into: tuple = ()) -> Any:
        if not self.cuda_graphs or on_device:
            return super()._build(graph, placeholders, workspace, on_device, into)
        # the plan with device results and unfed inputs; GraphRunner feeds, replays and converts
        source, fn = super()._build(graph, placeholders, workspace, on_device=True)
        runner = GraphRunner(self, fn, placeholders, graph.results, len(graph.order))
        self.runners.append(runner)
        return source, runner

    def capture_stream(self) -> Any:
        """The stream every ``GraphRunner`` of this transformer runs and captures on (made once)."""
        if self._stream is None:
            self._stream = self.xp.cuda.Stream()  # blocking: ordered after work on the default stream
        return self._stream

    def graph_report(self) -> str:
        """One line per computation run with CUDA graphs: replayed, eager (and why), or not called twice yet.

        Example:
            >>> print(t.graph_report())
            computation 0 (41 ops): replayed as a CUDA graph
        """
        if not self.cuda_graphs:
            return "cuda_graphs is off (cuda_graphs=False or NG_CUDA_GRAPHS=0): every plan runs eagerly"
        lines = [f"computation {i} ({r.op_count} ops): {r.status}" for i, r in enumerate(self.runners)]
        return "\n".join(lines) or "no computation compiled yet"

    def to_numpy(self, value: Any) -> np.ndarray:
        return value.get() if hasattr(value, "get") else np.asarray(value)

    def _result(self, op: Op, on_device: bool = False) -> Any:
        if not self.device_arrays or on_device or op.op is OpType.DOALL:
            return super()._result(op, on_device)
        # a result's buffer is fresh each call (hand it over); views of the arena or of variables are copied
        return (lambda v: v) if owns_buffer(op) else self.xp.copy

    def _generator_state(self, gen: Any) -> Any:
        # CuPy's generators (XORWOW on the device) expose no state to save: say so instead of
        # writing a checkpoint that would not resume exactly
        raise UnsupportedOpError(
            "cupy transformer: random_state is not supported (CuPy's device generators expose no state); "
            "hint: resume on the numpy backend for bit-exact random streams, or accept fresh streams"
        )


def _switch(variable: str, value: bool | None) -> bool:
    """``value``, or when None the environment ``variable`` (on unless it is ``0``)."""
    return os.environ.get(variable, "1") != "0" if value is None else bool(value)


class GraphRunner:
    """A computation's plan captured once as a CUDA graph and replayed: one launch per call.

    The plan's Python (a call per op, ~10-40 us each on the host) runs twice: once eagerly, then
    once under stream capture, which records every kernel it launches. Each later call copies the
    feeds into persistent input buffers, replays the graph and copies the results out. A graph
    replays the addresses it recorded, so everything it touches stays put: the inputs are staged
    into fixed buffers, the arena, variables and workspace are persistent (a variable updated in
    place by the graph keeps its value between calls and for ``read_variable``), the temporaries the
    kernels allocate come from a memory pool private to this runner (the graph owns them), and the
    GEMMs go to cuBLAS through a handle bound to the capture stream with a workspace of its own
    (``gemm.py``). Results are copied out of the recorded buffers every call (to the host, or
    into fresh device arrays with ``device_arrays=True``): the next replay overwrites those buffers.

    Random ops replay correctly: CuPy's generators keep their XORWOW states in device memory, which
    the recorded kernel reads and advances (``cupy/random/_generator_api.pyx``: ``_launch_dist`` passes
    ``bit_generator.state()``, a device pointer; the kernel draws with ``curand(&state[id])``), so each
    replay draws the next numbers, the same ones the eager plan would have drawn.

    A plan that cannot be captured keeps running eagerly: ``captured`` is False and ``capture_error``
    says why (a kernel that reads device data on the host, as CTC's label checks and the gather's
    range check do; a GEMM layout or dtype the capture-safe route does not take).
    """

    def __init__(self, transformer: CupyTransformer, fn: Any, placeholders: Any, results: Any,
                 op_count: int = 0) -> None:
        cupy = transformer.xp
        self.cupy, self.fn, self.op_count = cupy, fn, op_count
        self.feeds = [transformer._feeder(p) for p in placeholders]
        self.staged: list[Any] | None = None
        self.pool = cupy.cuda.MemoryPool()
        self.stream = transformer.capture_stream()
        if transformer.gemm is not None:
            transformer.gemm.handle(self.stream.ptr)  # its handle and workspace exist before any capture
        self.gemm_error = transformer.gemm_error
        self.profile = transformer.profile_counters if transformer.profile else None
        self.graph: Any = None
        self.outs: tuple = ()
        self.calls = 0
        self.captured = False
        self.capture_error: str | None = None
        device = transformer.device_arrays
        self.convert = [(lambda v: None) if r.op is OpType.DOALL else (lambda v: v.copy()) if device
                        else (lambda v: v.get()) for r in results]

    @property
    def status(self) -> str:
        """``replayed as a CUDA graph``, ``eager: <why>``, or ``not captured yet`` (fewer than two calls)."""
        if self.capture_error is not None:
            return f"eager: {self.capture_error}"
        if self.captured:
            return "replayed as a CUDA graph" if self.profile is None else \
                "capturable (eager while profile=True times each kernel)"
        return "not captured yet (captured at the second call)"

    def __call__(self, *values: Any) -> tuple:
        cupy = self.cupy
        fed = [feed(v) for feed, v in zip(self.feeds, values)]
        with self.stream:
            if self.staged is None:
                self.staged = [cupy.empty_like(v) for v in fed]
            for buffer, value in zip(self.staged, fed):
                cupy.copyto(buffer, value)
            # the plan's temporaries come from the private pool; nothing else may (the graph reuses them)
            with cupy.cuda.using_allocator(self.pool.malloc):
                if self.graph is not None:
                    self.graph.launch(self.stream)
                    outs = self.outs
                elif self.calls == 1 and self.capture_error is None:
                    outs = self._capture()
                else:
                    outs = self.fn(*self.staged)
            self.calls += 1
            result = tuple(convert(v) for convert, v in zip(self.convert, outs))
            self.stream.synchronize()
        return result

    def _capture(self) -> tuple:
        """Record the plan into a graph and launch it once; on failure run eagerly from now on.

        With ``profile=True`` the graph serves this call only (later calls run eagerly, each kernel timed),
        and the kernels' host time spent recording is taken back out of the counters.
        """
        stream, saved = self.stream, self._counters()
        error: BaseException | None = None
        outs: tuple = ()
        stream.begin_capture(self.cupy.cuda.runtime.streamCaptureModeRelaxed)
        try:
            outs = self.fn(*self.staged)
        except Exception as exc:  # a host read (CUDA refuses the copy), cupy.matmul (CuPy refuses cuBLAS)...
            error = exc
        try:
            graph = stream.end_capture()  # ends the capture whatever happened (invalidated: it raises)
        except Exception as exc:
            error = error or exc
        self._restore(saved)
        if error is not None:
            self.capture_error = f"{type(error).__name__}: {error}"
            if self.gemm_error is not None:
                self.capture_error += f" (GEMMs are cupy.matmul's: {self.gemm_error})"
            if self.profile is not None:
                warnings.warn(f"cupy transformer: a computation runs eagerly, not as a CUDA graph: "
                              f"{self.capture_error}", RuntimeWarning, stacklevel=4)
            return self.fn(*self.staged)
        graph.launch(stream)
        self.captured = True
        if self.profile is None:
            self.graph, self.outs = graph, outs
        return outs

    def _counters(self) -> dict | None:
        return None if self.profile is None else {op: list(c) for op, c in self.profile.items()}

    def _restore(self, saved: dict | None) -> None:
        for op, values in (saved or {}).items():
            self.profile[op][:] = values  # in place: the timed kernels hold these lists


register_transformer("cupy", CupyTransformer)
