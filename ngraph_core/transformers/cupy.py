"""The CuPy transformer: the same compiled plans on an NVIDIA GPU.

``make_transformer("cupy")`` compiles exactly the plans the NumPy transformer compiles (the same
passes, memory plan and generated source); only the array module differs. Everything a plan
touches lives on the device: the arena of temporaries (one ``cupy.empty`` per computation, carved
into views by the memory plan), the variables (persistent device arrays), the kernels' scratch
workspace and the result buffers (CuPy's memory pool recycles them). Data crosses the bus only at a
computation's boundary: fed NumPy arrays are copied to the device once each call (device arrays
are used as they are), and results come back as NumPy arrays, or stay on the device with
``device_arrays=True``.

Kernels: the shared ``xp`` kernels run unchanged on CuPy (cuBLAS for ``dot`` and the im2col
convolution, CuPy's ufuncs and reductions for the rest; ``tests/.../cupy_surface.py`` keeps them
within CuPy's API on machines without a GPU). What differs is in ``kernel_overrides``: a fused
element-wise program is one generated ``cupy.ElementwiseKernel`` (``cuda_fused.py``) instead of one
launch per step, and CTC's recursions are CUDA kernels with a thread block per example
(``cuda_ctc.py``) instead of a Python loop over frames. Convolution: CuPy 14 removed its cuDNN
bindings (``cupy.cuda.cudnn`` and ``cupyx.cudnn`` are absent from CuPy 14.2 on the H100 machine,
2026-11-25), so convolutions and their gradients run through ``nvidia-cudnn-frontend``'s graph API
(``cuda_cudnn.py``, the ``conv_variant``), and as im2col + a cuBLAS GEMM, the shared kernel's method,
where it is missing or cannot run a layer (``cuda_cudnn.report()`` says which ran and why).

Random ops draw from CuPy's device generators (``cupy.random.default_rng``): reproducible for a
seed, but a different stream from the NumPy transformer's, and their state cannot be saved
(``random_state`` raises ``UnsupportedOpError``; neon checkpoints then omit it).

Importing this module never needs CuPy; constructing the transformer does, and without CuPy, a
device or a recent enough driver it raises ``BackendUnavailableError`` saying which.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, UnsupportedOpError
from ..ir import Op, OpType, owns_buffer
from . import cuda_ctc, cuda_cudnn, cuda_fused, cuda_im2col
from .base import Transformer, register_transformer

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
            it from then on (``GraphRunner``; plans calling cuBLAS cannot be captured on CuPy 14
            and stay eager); default: the ``NG_CUDA_GRAPHS`` environment variable (``1`` turns it
            on), else off.
        **options: the ``Transformer`` options (``float_dtype``, ``seed``, ``optimize``...).

    Raises:
        BackendUnavailableError: no CuPy, no GPU, or a driver too old (``load_cupy``).

    Example:
        >>> with make_transformer("cupy", device_arrays=True) as t:
        ...     y_dev = t.computation(y, x)(cupy.asarray(x_batch))  # stays on the GPU
    """

    name = "cupy"
    # one generated CUDA kernel per fused program (the shared kernel would launch once per step) and per
    # lone float element-wise op; CTC as three launches (the shared kernel launches a dozen per frame)
    kernel_overrides = {**{kind: cuda_fused.elementwise for kind in cuda_fused.SUPPORTED},
                        OpType.FUSED: cuda_fused.fused, OpType.CTC: cuda_ctc.ctc, OpType.CTC_GRAD: cuda_ctc.ctc_grad}
    # the convolutions' col matrix in one CUDA launch, read through the input's strides
    im2col = staticmethod(cuda_im2col.make_im2col)
    # convolutions and their gradients through cuDNN (nvidia-cudnn-frontend), im2col where it cannot run them
    conv_variant = staticmethod(cuda_cudnn.variant)

    def __init__(self, device_arrays: bool = False, cuda_graphs: bool | None = None, **options: Any) -> None:
        self.xp = load_cupy()
        self.device_arrays = bool(device_arrays)
        self.cuda_graphs = os.environ.get("NG_CUDA_GRAPHS", "0") == "1" if cuda_graphs is None else bool(cuda_graphs)
        super().__init__(**options)

    def _build(self, graph: Any, placeholders: Any, workspace: Any = None, on_device: bool = False,
               into: tuple = ()) -> Any:
        if not self.cuda_graphs or on_device:
            return super()._build(graph, placeholders, workspace, on_device, into)
        # the plan with device results and unfed inputs; GraphRunner feeds, replays and converts
        source, fn = super()._build(graph, placeholders, workspace, on_device=True)
        return source, GraphRunner(self, fn, placeholders, graph.results)

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


class GraphRunner:
    """A computation's plan captured once as a CUDA graph and replayed: one launch per call.

    The plan's Python (a call per op, ~10-40 us each on the host) runs twice: once eagerly, then
    once under stream capture, which records every kernel it launches. Each later call copies the
    feeds into persistent input buffers, replays the graph and converts the results. A graph
    replays the addresses it recorded, so everything it touches stays put: the inputs are staged
    into fixed buffers, the arena, variables and workspace are persistent, and the temporaries the
    kernels allocate come from a memory pool private to this runner (the graph owns them). A plan
    that cannot be captured (a kernel that reads device data on the host, as CTC's label checks do)
    keeps running eagerly: ``captured`` is False and ``capture_error`` says why.

    Measured limit (H100, CuPy 14.2, 2026-11-25): CuPy refuses every cuBLAS call during capture
    ("calling cuBLAS API during stream capture is currently unsupported", CuPy issue 6290), so a
    plan with a ``dot`` or a convolution (every model in ``benchmarks/gpu.py``) falls back to eager
    execution; what captures today are the plans made only of element-wise work, reductions and
    data movement (an optimizer's update computation, a normalization, a loss). That is why this
    is opt-in.
    """

    def __init__(self, transformer: CupyTransformer, fn: Any, placeholders: Any, results: Any) -> None:
        cupy = transformer.xp
        self.cupy, self.fn = cupy, fn
        self.feeds = [transformer._feeder(p) for p in placeholders]
        self.staged: list[Any] | None = None
        self.pool = cupy.cuda.MemoryPool()
        self.stream = cupy.cuda.Stream()  # blocking: ordered after work on the default stream
        self.graph: Any = None
        self.outs: tuple = ()
        self.calls = 0
        self.captured = False
        self.capture_error: str | None = None
        device = transformer.device_arrays
        self.convert = [(lambda v: None) if r.op is OpType.DOALL else (lambda v: v.copy()) if device
                        else (lambda v: v.get()) for r in results]

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
                elif self.calls == 0 or self.capture_error is not None:
                    outs = self.fn(*self.staged)
                else:
                    outs = self._capture()
            self.calls += 1
            result = tuple(convert(v) for convert, v in zip(self.convert, outs))
            self.stream.synchronize()
        return result

    def _capture(self) -> tuple:
        """Record the plan into a graph and run it once; on failure run eagerly from now on."""
        stream = self.stream
        try:
            stream.begin_capture(self.cupy.cuda.runtime.streamCaptureModeRelaxed)
            try:
                outs = self.fn(*self.staged)
            finally:
                graph = stream.end_capture()
        except Exception as exc:  # CUDA refuses a host synchronisation (or an allocator call) while capturing
            self.capture_error = f"{type(exc).__name__}: {exc}"
            stream.synchronize()
            return self.fn(*self.staged)
        self.graph, self.outs, self.captured = graph, outs, True
        graph.launch(stream)
        return outs


register_transformer("cupy", CupyTransformer)
