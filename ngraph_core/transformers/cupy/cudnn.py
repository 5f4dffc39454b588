"""Convolutions through cuDNN on the CuPy transformer, with im2col + cuBLAS as the fallback.

CuPy 14 has no cuDNN bindings; NVIDIA's ``nvidia-cudnn-frontend`` (``import cudnn``, pinned in setup.cfg's
``gpu`` extra, 1.24.1) reaches cuDNN 9's graph API from Python, and torch's CUDA 13 wheels already ship
cuDNN 9 (``nvidia-cudnn-cu13``). ``variant`` is the CuPy transformer's ``conv_variant``: every convolution
kernel the shared code makes (``kernels/conv.py``: forward, forward with a filter cut to its live taps,
data gradient, filter gradient; a fused op's conv head too) is handed to it with its im2col kernel, and it
returns a kernel that runs cuDNN's ``conv_fprop`` / ``conv_dgrad`` / ``conv_wgrad`` instead, or that im2col
kernel.

* **Layout: activations by their strides, filters packed.** A cuDNN tensor is its dims and its strides, so our
  activations ``[C, *spatial, N]`` (batch innermost) are described in place as cuDNN's ``[N, C, *spatial]``
  with the array's own strides (``describe``). Not so a filter: cuDNN reads (writes) a filter whose strides
  are not packed ``KCRS`` or ``KRSC`` as packed ``KCRS``, without an error. On the H200 (cuDNN 9.19.0,
  frontend 1.24.1) every plan built and ran with our ``[Ci, *F, K]`` filters described as ``[K, Ci, *F]``
  with strides ``(1, ...)``, and every result was a convolution with the filter's memory read as row-major
  ``[K, Ci, *F]`` (the five failing CuPy op tests that print values replay to 6 digits under that model,
  ``fake_cudnn.py``). So a filter goes through a packed ``KCRS`` copy (``filter_layout``), a buffer the plan
  owns, copied in before the call (fprop's and dgrad's weight) or out after it (wgrad's gradient): one
  transposing copy of the weights per call (they change every training step).
  Where no engine takes the activations' strides (the plan fails to build), the layer runs on packed
  copies, ``NCHW`` / ``KCRS`` buffers (only the operands not already so laid out), then on ``NHWC`` /
  ``KRSC`` ones; where none builds, on im2col. Decided without measuring: a strided activation costs
  nothing around the call when an engine takes it, a packed copy costs one transposing copy per operand
  (NCHW first: the layout cuDNN's float32 engines have supported longest), and im2col is what ran before.
* **Plans** are built on a layer's first call (the arrays' strides are known then) and kept for the process
  in ``PLANS``, keyed by the direction, the three tensors' dims and strides, padding, strides, dilation, dtype,
  layout (``strided``, ``nchw``, ``nhwc``) and device; a plan owns its cuDNN workspace (one CuPy allocation).
  Plans execute on CuPy's current stream: the handle (one per device) is moved to it whenever it changed
  (``GraphRunner``'s stream while it captures).
* **Numerics**: float32 plans leave out engines with cuDNN's ``TENSOR_CORE`` or ``DOWN_CONVERT_INPUTS``
  notes (TF32), as the im2col path's cuBLAS GEMMs compute in float32; ``NG_CUDNN_TF32=1`` keeps them.
* **Epilogue**: a forward kernel's ``conv.Epilogue`` (bias / residual / relu) runs after, with
  ``epilogue.finish``, as the other kernels do. Not fused into the cuDNN graph: on CuPy the fused op's
  epilogue already is one generated launch (``elementwise.py``), which does not hand it to the conv head.
* **Fallback, with reasons**: ``NG_CUDNN=0``, no usable frontend, mixed dtypes, a pointer cuDNN cannot take, no
  plan that builds or an execution cuDNN refuses: im2col runs. ``CHOSEN`` says per layer what runs (``cudnn
  strided, copying w (filter packed)``, ``cudnn nchw, copying x, w (why not strided)``, ``im2col: why``),
  ``report()`` prints it, and the first fallback of a process warns once.
* **Variant pack**: ``graph.execute({uid: pointer}, workspace, handle=)`` with int uids and int pointers, the
  form 1.24.1's ``pygraph.execute`` passes through unchanged (``cudnn/__init__.py``'s ``_execute``); the uids
  are read after ``build_operation_graph``, which is where the frontend numbers the tensors made without one
  (before it, ``get_uid()`` is 0).

Importing this module needs neither CuPy nor the frontend (``import cudnn`` happens at the first
convolution compiled for the GPU; the frontend's import also imports torch when it is installed).
"""

from __future__ import annotations

import ctypes
import glob
import os
import site
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

from ...ir.conv import ConvArg, activation_roles
from ..kernels.context import Kernel, KernelContext
from ..kernels.conv import Epilogue

FRONTEND = "nvidia-cudnn-frontend==1.24.1"
ALIGNMENT = 16
"""Bytes a strided plan's operand pointers must be a multiple of (cuDNN's default tensor alignment)."""
DIRECTIONS = {"conv": "fprop", "conv_cut": "fprop", "bprop_data": "dgrad", "bprop_filter": "wgrad"}
"""``conv_variant`` kinds -> cuDNN's operation."""
FLOAT64 = False
"""Whether float64 convolutions go to cuDNN: every float64 plan built, ran and wrote zeros (H200, cuDNN
9.19), so they run on im2col (the CPU tests turn it on to check the float64 descriptors on a fake)."""
IO_TYPES = {"float16": "HALF", "float32": "FLOAT", "float64": "DOUBLE"}
COMPUTE_TYPES = {"float16": "FLOAT", "float32": "FLOAT", "float64": "DOUBLE"}
PACKED = ("nchw", "nhwc")
"""The packed layouts tried, in order, when no engine takes an operand's own strides (filters: KCRS, KRSC)."""
OPERANDS = {"fprop": ("x", "w", "y"), "dgrad": ("dy", "w", "dx"), "wgrad": ("x", "dy", "dw")}
"""The operands ``a``, ``b`` and the output of each direction, by name (for ``CHOSEN``)."""
FILTER = {"fprop": 1, "dgrad": 1, "wgrad": 2}
"""The position of each direction's filter among ``a``, ``b`` and the output."""

Layout = tuple[tuple[int, ...], tuple[int, ...]]
"""A cuDNN tensor: its dims and element strides."""

CHOSEN: dict[str, str] = {}
"""Layer description -> what runs it (``cudnn strided``, ``cudnn packed``, ``im2col``) and why."""
PLANS: dict[tuple, Any] = {}
"""Plan key -> a built ``Plan``, or the text of why it did not build."""
_WARNED: list[bool] = []


# -- descriptors (pure) ---------------------------------------------------------------------------------------


def activation_order(perm: tuple[int, ...]) -> tuple[int, ...]:
    """The array axes in cuDNN's ``[N, C, *spatial]`` order, for an activation whose roles sit at ``perm``
    (``ActivationRoles.perm``: the positions of ``(C, *spatial, N)``).

    Example:
        >>> activation_order((0, 1, 2, 3))  # [C, H, W, N]
        (3, 0, 1, 2)
    """
    return (perm[-1], perm[0], *perm[1:-1])


def filter_order(ndim: int) -> tuple[int, ...]:
    """The axes of a filter ``[Ci, *F, K]`` (``ndim`` axes) in cuDNN's ``[K, Ci, *F]`` order."""
    return (ndim - 1, 0, *range(1, ndim - 1))


def canonical(dims: tuple[int, ...], strides: tuple[int, ...]) -> Layout:
    """``(dims, strides)`` as cuDNN is given them: a 1-D convolution's tensor gains a unit last spatial dim, and a
    dim of length 1 takes the stride a packed layout would give it (``strides[i+1] * dims[i+1]``, 1 for the
    last), which PyTorch's tensors have and cuDNN's layout checks expect: a batch-1 ``[C, H, W, N]`` array
    is then exactly a packed ``NCHW`` tensor.

    Example:
        >>> canonical((1, 3, 4, 5), (1, 20, 5, 1))  # [C:3, H:4, W:5, N:1] as [N, C, H, W]
        ((1, 3, 4, 5), (60, 20, 5, 1))
    """
    if len(dims) == 3:
        dims, strides = (*dims, 1), (*strides, 1)
    fixed = list(strides)
    for i in reversed(range(len(dims))):
        if dims[i] == 1:
            fixed[i] = 1 if i == len(dims) - 1 else fixed[i + 1] * dims[i + 1]
    return tuple(dims), tuple(fixed)


def describe(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, order: tuple[int, ...]
             ) -> Layout | None:
    """The cuDNN tensor of an array (``shape``, byte ``strides``) read in ``order`` (``activation_order``,
    ``filter_order``); None when its strides cannot be described (negative or zero along a dim longer than 1,
    or not a whole number of elements).

    Example:
        >>> describe((16, 32, 32, 128), (524288, 16384, 512, 4), 4, (3, 0, 1, 2))  # [C, H, W, N] float32
        ((128, 16, 32, 32), (1, 131072, 4096, 128))
    """
    dims = tuple(shape[i] for i in order)
    if any(strides[i] % itemsize for i in order):
        return None
    elements = tuple(strides[i] // itemsize for i in order)
    if any(s <= 0 and d > 1 for d, s in zip(dims, elements)):
        return None
    return canonical(dims, elements)


def memory_order(layout: str, ndim: int) -> tuple[int, ...]:
    """The dims of a ``packed`` tensor of ``ndim`` dims in memory order, outermost first: ``nchw`` (``KCRS`` for a
    filter) or ``nhwc`` (``KRSC``).

    Example:
        >>> memory_order("nhwc", 4)
        (0, 2, 3, 1)
    """
    return tuple(range(ndim)) if layout == "nchw" else (0, *range(2, ndim), 1)


def packed(dims: tuple[int, ...], memory: tuple[int, ...] | None = None) -> Layout:
    """A packed tensor of ``dims`` laid out in ``memory`` order (``memory_order``; default row-major), ``canonical``.

    Example:
        >>> packed((2, 3, 4, 5), (0, 2, 3, 1))  # NHWC
        ((2, 3, 4, 5), (60, 1, 15, 3))
    """
    memory = tuple(range(len(dims))) if memory is None else memory
    strides, step = [0] * len(dims), 1
    for i in reversed(memory):
        strides[i] = step
        step *= dims[i]
    return canonical(tuple(dims), tuple(strides))


def filter_layout(layout: Layout) -> tuple[Layout, bool]:
    """The cuDNN tensor a filter ``layout`` (``[K, C, *F]``) is given as, and whether that needs a copy: itself
    when packed ``KCRS`` or ``KRSC``, else packed ``KCRS`` (cuDNN reads any other filter as packed ``KCRS``).

    Example:
        >>> filter_layout(((16, 3, 3, 3), (1, 144, 48, 16)))  # [Ci:3, R:3, S:3, K:16] C-contiguous
        (((16, 3, 3, 3), (27, 9, 3, 1)), True)
    """
    dims = layout[0]
    if layout in (packed(dims), packed(dims, memory_order("nhwc", len(dims)))):
        return layout, False
    return packed(dims), True


def geometry(arg: ConvArg) -> dict[str, list[int]]:
    """``conv_fprop`` / ``conv_dgrad`` / ``conv_wgrad``'s keywords for ``arg`` (2 spatial dims at least).

    Example:
        >>> geometry(ConvArg((2,), ((1, 0),), (1,)))
        {'pre_padding': [1, 0], 'post_padding': [0, 0], 'stride': [2, 1], 'dilation': [1, 1]}
    """
    extra = [0] if arg.rank == 1 else []
    unit = [1] if arg.rank == 1 else []
    return {"pre_padding": [p[0] for p in arg.padding] + extra, "post_padding": [p[1] for p in arg.padding] + extra,
            "stride": list(arg.strides) + unit, "dilation": list(arg.dilation) + unit}


# -- the frontend ----------------------------------------------------------------------------------------------


def _site_dirs() -> list[str]:
    dirs = [p for p in sys.path if p and os.path.isdir(p)]
    try:
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # a virtualenv's old site module
        pass
    return list(dict.fromkeys(dirs))


def _preload(soname: str, patterns: tuple[str, ...]) -> None:
    """Make ``soname`` loadable by name: the frontend dlopens cuDNN and the CUDA runtime by name, and pip's
    ``nvidia-*`` wheels are not on the loader's path (torch finds them through its RPATH, CuPy through its own
    search). Loaded globally from the first wheel directory that has it; nothing when it loads already."""
    try:
        ctypes.CDLL(soname)
        return
    except OSError:
        pass
    for directory in _site_dirs():
        for pattern in patterns:
            for path in sorted(glob.glob(os.path.join(directory, pattern))):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    return
                except OSError:
                    continue


class Frontend:
    """The ``cudnn`` module and its handles: one per device, each moved to the stream it runs on.

    Args:
        module: the imported ``cudnn`` (or a stand-in with its API, in the tests).
    """

    def __init__(self, module: Any) -> None:
        self.module = module
        self.handles: dict[int, Any] = {}
        self.streams: dict[int, int] = {}

    def handle(self, device: int, stream: int | None = None) -> Any:
        """The device's handle, on ``stream`` (a ``cudaStream_t`` as an int) when given."""
        handle = self.handles.get(device)
        if handle is None:
            handle = self.handles[device] = self.module.create_handle()
        if stream is not None and self.streams.get(device) != stream:
            self.module.set_stream(handle=handle, stream=stream)
            self.streams[device] = stream
        return handle


_LOADED: list[tuple[Frontend | None, str | None]] = []


def load_frontend() -> tuple[Frontend | None, str | None]:
    """``(Frontend, None)``, or ``(None, why it cannot be used)``; imported once per process."""
    if not _LOADED:
        try:
            _preload("libcudart.so.13", ("nvidia/cu13/lib/libcudart.so.13*",
                                         "nvidia/cuda_runtime/lib/libcudart.so.13*"))
            _preload("libcudnn.so.9", ("nvidia/cudnn/lib/libcudnn.so.9*", "nvidia/cu13/lib/libcudnn.so.9*"))
            import cudnn  # type: ignore[import-not-found]  # nvidia-cudnn-frontend
        except Exception as exc:  # ImportError, or the frontend's own checks of the libraries it finds
            _LOADED.append((None, f"cannot import cudnn: {type(exc).__name__}: {exc}; hint: pip install {FRONTEND}"))
        else:
            _LOADED.append((Frontend(cudnn), None))
    return _LOADED[0]


def enabled() -> bool:
    """``NG_CUDNN=1`` tries cuDNN first; anything else (the default) runs every convolution on im2col.

    Off by default. On the first GPU run (H200, cuDNN 9.19, frontend 1.24.1) every plan built and ran but
    gave wrong values: cuDNN read our ``[Ci, *F, K]`` filters, described by strides, as packed ``KCRS``.
    With filters given packed (``filter_layout``) float32 layers then matched PyTorch in all three
    directions (``benchmarks/gpu_cudnn_check.py --quick``); float64 plans wrote zeros (``FLOAT64``). The
    whole GPU suite has not yet run with it on: that run decides the default (benchmarks/RESULTS.md)."""
    return os.environ.get("NG_CUDNN", "0").strip() == "1"


# -- hooks the tests replace (CuPy's on the GPU) ----------------------------------------------------------------


def pointer(a: Any) -> int:
    """The device address of ``a``'s first element."""
    return a.data.ptr


def current_stream(xp: Any) -> int:
    """CuPy's current stream as a ``cudaStream_t``."""
    return xp.cuda.get_current_stream().ptr


def current_device(xp: Any) -> int:
    return xp.cuda.runtime.getDevice()


# -- plans -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """One convolution kernel as cuDNN sees it.

    Attributes:
        direction: ``fprop``, ``dgrad`` or ``wgrad``.
        orders: for the kernel's operands ``a, b`` and its output (fprop: x, w, y; dgrad: dy, w, dx; wgrad: x,
            dy, dw), the array axes in cuDNN's dim order (``activation_order`` / ``filter_order``).
        arg: the convolution's geometry.
        dtype: the computation dtype (every operand's).
    """

    direction: str
    orders: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    arg: ConvArg
    dtype: str


@dataclass
class Plan:
    """A built cuDNN graph: its tensors' uids (a, b, output), its workspace and the packed buffers of the
    operands that need a packed copy (None for the others)."""

    graph: Any
    uids: tuple[int, int, int]
    workspace: Any
    layout: str
    buffers: list[Any] = field(default_factory=lambda: [None, None, None])
    name: str = ""

    def execute(self, handle: Any, pointers: tuple[int, int, int]) -> None:
        workspace = pointer(self.workspace) if self.workspace is not None else 0
        self.graph.execute(dict(zip(self.uids, pointers)), workspace, handle=handle)


def build_plan(front: Frontend, xp: Any, layer: Layer, tensors: tuple[Layout, Layout, Layout], layout: str,
               device: int) -> Plan:
    """Build the cuDNN graph of ``layer`` over ``tensors`` (a, b, output); raises what the frontend raises when
    no engine takes it."""
    cudnn = front.module
    io, compute = (getattr(cudnn.data_type, table[layer.dtype]) for table in (IO_TYPES, COMPUTE_TYPES))
    handle = front.handle(device)
    graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=compute, compute_data_type=compute, handle=handle)
    a, b = (graph.tensor(name=name, dim=list(dims), stride=list(strides), data_type=io)
            for name, (dims, strides) in zip(("A", "B"), tensors[:2]))
    keywords = {**geometry(layer.arg), "compute_data_type": compute}
    if layer.direction == "fprop":
        y = graph.conv_fprop(image=a, weight=b, **keywords)
    elif layer.direction == "dgrad":
        y = graph.conv_dgrad(loss=a, filter=b, **keywords)
    else:
        y = graph.conv_wgrad(image=a, loss=b, **keywords)
    dims, strides = tensors[2]
    y.set_output(True).set_dim(list(dims)).set_stride(list(strides)).set_data_type(io)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    if layer.dtype == "float32" and os.environ.get("NG_CUDNN_TF32", "0") != "1":
        graph.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE, cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    graph.check_support()
    graph.build_plans()
    size = graph.get_workspace_size()
    workspace = xp.empty(size, dtype=xp.uint8) if size > 0 else None
    try:
        name = graph.get_plan_name_at_index(0)
    except Exception:  # older frontends, or an index the policy did not build: the name is only for the report
        name = ""
    return Plan(graph, (a.get_uid(), b.get_uid(), y.get_uid()), workspace, layout, name=name)


def plan_for(front: Frontend, xp: Any, layer: Layer, tensors: tuple[Layout, Layout, Layout], layout: str,
             device: int) -> Any:
    """The cached plan of ``layer`` over ``tensors`` in ``layout``, built on first use: a ``Plan``, or the text of
    why it did not build (also cached: a failed build is not retried)."""
    key = (layer, tensors, layout, device)
    found = PLANS.get(key)
    if found is None:
        try:
            found = build_plan(front, xp, layer, tensors, layout, device)
        except Exception as exc:  # cudnnGraphNotSupportedError, or the frontend's RuntimeError with cuDNN's status
            found = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        PLANS[key] = found
    return found


def _record(description: str, text: str, warn: bool) -> None:
    """``CHOSEN[description] = text``; the process's first unwanted fallback (``warn``) warns."""
    if CHOSEN.get(description) == text:
        return
    CHOSEN[description] = text
    if warn and not _WARNED:
        _WARNED.append(True)
        warnings.warn(f"cuDNN convolution not used for {description}: {text}; running im2col "
                      "(ngraph_core.transformers.cupy.cudnn.report() lists every layer)", RuntimeWarning, stacklevel=3)


def report() -> str:
    """What runs each convolution this process compiled for the GPU, and why, one layer a line."""
    lines = [f"{path:<60}  {description}" for description, path in sorted(CHOSEN.items())]
    return "\n".join(lines) if lines else "(no convolution compiled for cuDNN)"


class CudnnConv:
    """A convolution kernel ``fn(out, a, b, *epilogue_inputs)`` running cuDNN, else its im2col ``fallback``.

    Args:
        layer: the convolution (``Layer``).
        fallback: the im2col kernel (with the epilogue, when there is one).
        xp: the array module (CuPy).
        front: the loaded frontend.
        description: the layer's line in ``CHOSEN``.
        epilogue: a forward kernel's epilogue, applied after cuDNN's convolution.
        index: a cut filter's live taps (``conv_cut``): cuDNN reads ``b[index]``.
    """

    def __init__(self, layer: Layer, fallback: Kernel, xp: Any, front: Frontend, description: str,
                 epilogue: Epilogue | None = None, index: tuple | None = None) -> None:
        self.layer, self.fallback, self.xp, self.front = layer, fallback, xp, front
        self.description, self.epilogue, self.index = description, epilogue, index
        self.itemsize = xp.dtype(layer.dtype).itemsize
        # (the operands' shapes and strides, (the plan or why none, the device, which operands are copied))
        self._last: tuple[tuple, tuple] | None = None

    def _buffers(self, plan: Plan, copies: tuple[bool, ...], shapes: tuple[tuple[int, ...], ...],
                 memory: list[tuple[int, ...]]) -> None:
        """The packed buffers of the operands ``copies`` marks, laid out in ``memory`` order, viewed in cuDNN's dim
        order; the plan's own, shared by the kernels that use the plan."""
        for i, copy in enumerate(copies):
            if copy and plan.buffers[i] is None:
                buffer = self.xp.empty(tuple(shapes[i][d] for d in memory[i]), dtype=self.layer.dtype)
                plan.buffers[i] = buffer.transpose(tuple(memory[i].index(d) for d in range(len(shapes[i]))))

    def _choose(self, arrays: tuple[Any, Any, Any], device: int) -> tuple[Any, tuple[bool, ...], str]:
        """``(plan, which operands go through a packed copy, why not strided)`` for these operands' strides:
        strided first (the filter packed, ``filter_layout``), then each ``PACKED`` layout; or ``(why none
        built, (), "")``."""
        layer, xp = self.layer, self.xp
        strided = tuple(describe(a.shape, a.strides, self.itemsize, order) for a, order in zip(arrays, layer.orders))
        shapes = tuple(tuple(a.shape[i] for i in order) for a, order in zip(arrays, layer.orders))
        f = FILTER[layer.direction]
        if all(t is not None for t in strided):
            tensors, copies = list(strided), [False, False, False]
            tensors[f], copies[f] = filter_layout(strided[f])  # type: ignore[arg-type]
            plan = plan_for(self.front, xp, layer, tuple(tensors), "strided", device)  # type: ignore[arg-type]
            if isinstance(plan, Plan):
                self._buffers(plan, tuple(copies), shapes, [memory_order("nchw", len(s)) for s in shapes])
                return plan, tuple(copies), "filter packed"
            reasons = [f"strided: {plan}"]
        else:
            reasons = ["strided: an operand's strides are negative, zero or not whole elements"]
        for layout in PACKED:
            memory = [memory_order(layout, len(s)) for s in shapes]
            layouts = tuple(packed(s, m) for s, m in zip(shapes, memory))
            plan = plan_for(self.front, xp, layer, layouts, layout, device)
            if not isinstance(plan, Plan):
                reasons.append(f"{layout}: {plan}")
                continue
            copies = tuple(s != p for s, p in zip(strided, layouts))  # an operand already so laid out is used as is
            self._buffers(plan, copies, shapes, memory)
            return plan, copies, "; ".join(reasons)
        return "; ".join(reasons), (), ""

    def __call__(self, out: Any, a: Any, b: Any, *inputs: Any) -> Any:
        whole = b
        if self.index is not None:
            b = b[self.index]
        arrays = (a, b, out)
        key = tuple((x.shape, x.strides) for x in arrays)
        if self._last is None or self._last[0] != key:
            device = current_device(self.xp)
            chosen, copies, why = self._choose(arrays, device)
            self._last = (key, (chosen, device, copies))
            if isinstance(chosen, Plan):
                copied = ", ".join(n for n, c in zip(OPERANDS[self.layer.direction], copies) if c)
                how = f"cudnn {chosen.layout}" + (f", copying {copied} ({why})" if copied else "")
                _record(self.description, how + (f" [{chosen.name}]" if chosen.name else ""), False)
            else:
                _record(self.description, f"im2col: {chosen}", True)
        plan, device, copies = self._last[1]
        if not isinstance(plan, Plan):
            return self.fallback(out, a, whole, *inputs)
        pointers = tuple(pointer(plan.buffers[i] if copy else x) for i, (x, copy) in enumerate(zip(arrays, copies)))
        if any(p % ALIGNMENT for p in pointers):  # a view into the middle of a buffer: cuDNN would refuse it
            _record(self.description, f"im2col: an operand is not {ALIGNMENT}-byte aligned this call", True)
            return self.fallback(out, a, whole, *inputs)
        handle = self.front.handle(device, current_stream(self.xp))
        orders = self.layer.orders
        try:
            for i in (0, 1):
                if copies[i]:
                    self.xp.copyto(plan.buffers[i], arrays[i].transpose(orders[i]))
            plan.execute(handle, pointers)
            if copies[2]:
                self.xp.copyto(out.transpose(orders[2]), plan.buffers[2])
        except Exception as exc:  # the frontend raises cuDNN's execution status: im2col from now on
            reason = f"execute failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
            self._last = (key, (reason, device, ()))
            _record(self.description, f"im2col: {reason}", True)
            return self.fallback(out, a, whole, *inputs)
        if self.epilogue is not None:
            self.epilogue.finish(out, *inputs)
        return out


# -- the CuPy transformer's conv_variant --------------------------------------------------------------------------


def layer_of(kind: str, kc: KernelContext, args: tuple) -> tuple[Layer, tuple[str, ...], tuple | None]:
    """``kind``'s ``Layer`` from ``conv_variant``'s ``args``, the operands' dtypes, and a cut filter's index."""
    direction, index = DIRECTIONS[kind], None
    if kind in ("conv", "conv_cut"):
        x, w, arg, dtype = args[:4]
        if kind == "conv_cut":
            index = args[5]
        ndim = len(w.axes)
        out_order = activation_order(tuple(range(len(x.axes))))  # [K, *out, N]
        orders = (activation_order(activation_roles(x.axes, "conv").perm), filter_order(ndim), out_order)
        dtypes = (kc.dtype_of(x), kc.dtype_of(w))
    else:
        (op,) = args
        arg, dtype = op.arg, kc.dtype_of(op)
        a, b = op.src
        if kind == "bprop_data":  # dy, w -> dx
            orders = (activation_order(activation_roles(a.axes, "conv_bprop_data").perm), filter_order(len(b.axes)),
                      activation_order(activation_roles(op.axes, "conv_bprop_data").perm))
        else:  # x, dy -> dw
            orders = (activation_order(activation_roles(a.axes, "conv_bprop_filter").perm),
                      activation_order(activation_roles(b.axes, "conv_bprop_filter").perm), filter_order(len(op.axes)))
        dtypes = (kc.dtype_of(a), kc.dtype_of(b))
    return Layer(direction, orders, arg, dtype), dtypes, index


def _description(kind: str, args: tuple, layer: Layer) -> str:
    ops = args[:2] if kind in ("conv", "conv_cut") else args[0].src
    shapes = "*".join("x".join(str(n) for n in op.axes.lengths) for op in ops)
    cut = " (filter cut to its live taps)" if kind == "conv_cut" else ""
    return f"{layer.direction} {shapes} {layer.arg!r} {layer.dtype}{cut}"


def variant(kind: str, kernel: Kernel, kc: KernelContext, *args: Any, epilogue: Epilogue | None = None) -> Kernel:
    """The kernel a convolution runs on the GPU: cuDNN (``CudnnConv``) with ``kernel`` (im2col) as its fallback,
    or ``kernel`` alone when cuDNN cannot run it (the reason goes to ``CHOSEN``).

    ``kind`` and ``args`` as ``conv_choice.variant``'s: ``"conv"`` (x, w, arg, dtype), ``"conv_cut"`` (x, w, arg,
    dtype, fshape, index: the filter cut to ``w[index]``), ``"bprop_data"`` / ``"bprop_filter"`` (the op).
    """
    layer, dtypes, index = layer_of(kind, kc, args)
    description = _description(kind, args, layer)
    reason = None
    if not enabled():
        reason = "NG_CUDNN is not 1 (off by default)"
    elif layer.dtype == "float64" and not FLOAT64:
        reason = "float64: cuDNN 9.19's plans gave zeros on an H200; im2col is exact"
    elif layer.dtype not in IO_TYPES or any(d != layer.dtype for d in dtypes):
        reason = f"operand dtypes {dtypes} for a {layer.dtype} convolution (cuDNN takes one float dtype)"
    front, why = (None, None) if reason else load_frontend()
    if reason is None and front is None:
        reason = why
    if reason is not None or front is None:
        _record(description, f"im2col: {reason}", enabled())  # no warning for NG_CUDNN=0: asked for
        return kernel
    return CudnnConv(layer, kernel, kc.xp, front, description, epilogue, index)
