"""A CPU stand-in for ``nvidia-cudnn-frontend``'s graph API (the part ``cupy/cudnn.py`` calls), for the tests.

``FakeCudnn`` offers ``pygraph``, ``create_handle``, ``set_stream`` and the enums, and executes a convolution
graph the way cuDNN reads its tensors: each tensor is rebuilt from its pointer, dims and element strides
(``numpy.lib.stride_tricks.as_strided`` over host memory) and the convolution runs in PyTorch (float64) in
cuDNN's ``[N, C, *spatial]`` / ``[K, C/G, *F]`` order. So a wrong dim, stride or padding in the descriptors
``cuda_cudnn`` builds gives wrong numbers here, as it would on the GPU. ``accepts`` decides which tensor
layouts "have an engine" (default: all), to drive the strided -> packed -> im2col fallbacks.

Modelled on frontend 1.24.1 (``cudnn/__init__.py``, ``python/pygraph/pygraph.cpp``, ``graph_interface.h``) and
what cuDNN 9.19 did on an H200:

* **uids**: a tensor made without ``uid=`` has uid 0 (``Tensor_attributes::uid``) until
  ``build_operation_graph`` numbers the unnumbered ones from 1, skipping the ones set (``create_cudnn_tensor``).
* **execute(pack, workspace, handle=None)**: ``pack``'s keys are uids (``int``) or the graph's tensors (their
  ``get_uid()``), its values device pointers (``int``) or objects with ``__dlpack__``; a uid of the graph
  missing from it fails (``INVALID_VARIANT_PACK``, "Uid N does not exist in variant pack.").
* **filters**: a filter tensor (fprop's and dgrad's weight, wgrad's output) whose strides are neither packed
  ``KCRS`` nor packed ``KRSC`` is read (written) as packed ``KCRS``, silently: every plan built and ran on the
  H200, and each result equalled a convolution with the filter's memory taken as row-major ``[K, C, R, S]``
  (the activations read through their strides, batch innermost included).
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Callable
from typing import Any

import numpy as np

NUMPY_DTYPES = {"FLOAT": np.float32, "DOUBLE": np.float64, "HALF": np.float16}


class NotSupported(Exception):
    """As ``cudnn.cudnnGraphNotSupportedError``."""


class data_type(enum.Enum):  # noqa: N801 - the frontend's names
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    HALF = "HALF"


class heur_mode(enum.Enum):  # noqa: N801
    A = "A"
    FALLBACK = "FALLBACK"


class numerical_note(enum.Enum):  # noqa: N801
    TENSOR_CORE = "TENSOR_CORE"
    DOWN_CONVERT_INPUTS = "DOWN_CONVERT_INPUTS"


class Tensor:
    def __init__(self, dims: list[int], strides: list[int], dtype: data_type | None, name: str = "",
                 uid: int = -1) -> None:
        self.dims, self.strides, self.dtype, self.output, self.name = list(dims), list(strides), dtype, False, name
        self.uid, self.uid_assigned = (0, False) if uid == -1 else (uid, True)

    def set_output(self, value: bool) -> Tensor:
        self.output = value
        return self

    def set_dim(self, dims: list[int]) -> Tensor:
        self.dims = list(dims)
        return self

    def set_stride(self, strides: list[int]) -> Tensor:
        self.strides = list(strides)
        return self

    def set_data_type(self, dtype: data_type) -> Tensor:
        self.dtype = dtype
        return self

    def get_uid(self) -> int:
        return self.uid  # 0 until build_operation_graph numbers it, as the frontend's

    def set_uid(self, uid: int) -> Tensor:
        self.uid, self.uid_assigned = uid, True
        return self


def packed_strides(dims: list[int], memory: list[int]) -> list[int]:
    """The strides of a packed tensor of ``dims`` laid out in ``memory`` order (outermost first)."""
    strides, step = [0] * len(dims), 1
    for i in reversed(memory):
        strides[i] = step
        step *= dims[i]
    return strides


def same_layout(dims: list[int], strides: list[int], want: list[int]) -> bool:
    """``strides`` equal ``want`` along every dim longer than 1."""
    return all(d == 1 or s == w for d, s, w in zip(dims, strides, want))


def filter_strides(dims: list[int], strides: list[int]) -> list[int]:
    """The strides cuDNN 9.19 reads a filter ``[K, C, *F]`` through: its own when packed ``KCRS`` or ``KRSC``,
    else packed ``KCRS`` (see the module docstring)."""
    kcrs = packed_strides(dims, list(range(len(dims))))
    krsc = packed_strides(dims, [0, *range(2, len(dims)), 1])
    return strides if same_layout(dims, strides, kcrs) or same_layout(dims, strides, krsc) else kcrs


def host_view(ptr: int, dims: list[int], strides: list[int], dtype: Any) -> np.ndarray:
    """The array cuDNN would read at ``ptr``: ``dims`` with element ``strides``."""
    itemsize = np.dtype(dtype).itemsize
    span = (sum((d - 1) * s for d, s in zip(dims, strides)) + 1) * itemsize
    buffer = np.ctypeslib.as_array((ctypes.c_char * span).from_address(ptr)).view(np.uint8).view(dtype)
    return np.lib.stride_tricks.as_strided(buffer, tuple(dims), tuple(s * itemsize for s in strides))


class Graph:
    def __init__(self, module: FakeCudnn, io_data_type: data_type, intermediate_data_type: data_type,
                 compute_data_type: data_type, handle: Any) -> None:
        self.module, self.io, self.handle = module, io_data_type, handle
        self.tensors: list[Tensor] = []
        self.op: tuple[str, Tensor, Tensor, dict] | None = None
        self.deselected: list[Any] = []
        self.built = False

    def tensor(self, dim: list[int], stride: list[int], data_type: data_type | None = None, is_virtual: bool = False,
               is_pass_by_value: bool = False, ragged_offset: Any = None, reordering_type: Any = None,
               name: str = "", uid: int = -1) -> Tensor:
        t = Tensor(dim, stride, data_type, name, uid)
        self.tensors.append(t)
        return t

    def _conv(self, kind: str, a: Tensor, b: Tensor, **kw: Any) -> Tensor:
        assert self.op is None and {"pre_padding", "post_padding", "stride", "dilation"} <= set(kw)
        assert set(kw) <= {"pre_padding", "post_padding", "stride", "dilation", "compute_data_type", "name"}, kw
        out = Tensor([], [], None, name=f"{kind}::out")
        self.tensors.append(out)
        self.op = (kind, a, b, kw)
        self.out = out
        return out

    def conv_fprop(self, image: Tensor, weight: Tensor, **kw: Any) -> Tensor:
        return self._conv("fprop", image, weight, **kw)

    def conv_dgrad(self, loss: Tensor, filter: Tensor, **kw: Any) -> Tensor:  # noqa: A002 - the frontend's name
        return self._conv("dgrad", loss, filter, **kw)

    def conv_wgrad(self, image: Tensor, loss: Tensor, **kw: Any) -> Tensor:
        return self._conv("wgrad", image, loss, **kw)

    def validate(self) -> None:
        assert self.op is not None and self.out.output and self.out.dims and self.out.strides

    def build_operation_graph(self) -> None:
        """Numbers the tensors without a uid from 1, skipping those set (``detail::assign_uid``)."""
        used = {t.uid for t in self.tensors if t.uid_assigned}
        assert len(used) == len([t for t in self.tensors if t.uid_assigned]), "uids must be unique"
        candidate = 1
        for t in self.tensors:
            if not t.uid_assigned:
                while candidate in used:
                    candidate += 1
                t.set_uid(candidate)
                candidate += 1

    def create_execution_plans(self, modes: list[heur_mode]) -> None:
        assert modes

    def deselect_numeric_notes(self, notes: list[numerical_note]) -> None:
        self.deselected += notes

    def check_support(self) -> None:
        for t in self.tensors:
            if not self.module.accepts(t.dims, t.strides):
                raise NotSupported(f"no engine for dims {t.dims} strides {t.strides}")

    def build_plans(self) -> None:
        self.built = True
        self.module.builds += 1

    def get_workspace_size(self) -> int:
        return 256

    def get_plan_name_at_index(self, index: int) -> str:
        return "fake_engine"

    def execute(self, pack: dict[Any, Any], workspace: Any, handle: Any = None) -> None:
        """As ``cudnn.pygraph.execute`` (``cudnn/__init__.py``'s ``_execute`` over the binding's ``_execute``)."""
        import torch

        assert self.built and handle == self.handle
        kind, a, b, kw = self.op
        uids = {k if type(k) is int else k.get_uid(): self.module.device_pointer(v) for k, v in pack.items()
                if k is not None}
        workspace = self.module.device_pointer(workspace)
        assert workspace
        for t in (a, b, self.out):
            if t.uid not in uids:
                raise RuntimeError(f"cudnn_frontend error INVALID_VARIANT_PACK: Uid {t.uid} does not exist in "
                                   "variant pack.")
        dtype = NUMPY_DTYPES[self.io.value]
        weight = b if kind in ("fprop", "dgrad") else self.out
        view = {t.uid: host_view(uids[t.uid], t.dims, filter_strides(t.dims, t.strides) if t is weight else t.strides,
                                 dtype) for t in (a, b, self.out)}
        ta, tb = (torch.from_numpy(np.array(view[t.uid], dtype=np.float64)) for t in (a, b))
        pre, post, stride, dilation = kw["pre_padding"], kw["post_padding"], kw["stride"], kw["dilation"]
        rank = len(stride)
        conv = torch.nn.functional.conv2d if rank == 2 else torch.nn.functional.conv3d
        grad = torch.nn.grad
        pads = [p for pair in zip(reversed(pre), reversed(post)) for p in pair]  # F.pad's order: last dim first
        if kind == "fprop":
            groups = ta.shape[1] // tb.shape[1]
            result = conv(torch.nn.functional.pad(ta, pads), tb, stride=stride, dilation=dilation, groups=groups)
        elif kind == "dgrad":
            dx_dims = self.out.dims
            groups = dx_dims[1] // tb.shape[1]
            padded = [dx_dims[0], dx_dims[1], *(n + p + q for n, p, q in zip(dx_dims[2:], pre, post))]
            fn = grad.conv2d_input if rank == 2 else grad.conv3d_input
            full = fn(padded, tb, ta, stride=stride, dilation=dilation, groups=groups)
            result = full[(slice(None), slice(None), *(slice(p, p + n) for p, n in zip(pre, dx_dims[2:])))]
        else:
            dw_dims = self.out.dims
            groups = ta.shape[1] // dw_dims[1]
            fn = grad.conv2d_weight if rank == 2 else grad.conv3d_weight
            result = fn(torch.nn.functional.pad(ta, pads), dw_dims, tb, stride=stride, dilation=dilation, groups=groups)
        target = view[self.out.uid]
        assert target.shape == tuple(result.shape), (target.shape, tuple(result.shape))
        target[...] = result.numpy()
        self.module.executed.append((kind, handle))


class FakeCudnn:
    """The module: ``import cudnn`` as ``cuda_cudnn`` uses it.

    Args:
        accepts: ``fn(dims, strides) -> bool``: whether some engine takes a tensor (default: every tensor).
    """

    data_type = data_type
    heur_mode = heur_mode
    numerical_note = numerical_note
    cudnnGraphNotSupportedError = NotSupported

    def __init__(self, accepts: Callable[[list[int], list[int]], bool] | None = None) -> None:
        self.accepts = accepts or (lambda dims, strides: True)
        self.handles = 0
        self.streams: list[tuple[int, int]] = []
        self.executed: list[tuple[str, Any]] = []
        self.builds = 0
        self.graphs: list[Graph] = []

    def create_handle(self) -> int:
        self.handles += 1
        return 1000 + self.handles

    def set_stream(self, handle: int, stream: int) -> None:
        self.streams.append((handle, stream))

    @staticmethod
    def device_pointer(value: Any) -> int:
        """``cudnn/__init__.py``'s ``_library_device_pointer``: an ``int`` as is, else the object's ``__dlpack__``
        data (here: a NumPy array's address)."""
        if type(value) is int:
            return value
        if not hasattr(value, "__dlpack__"):
            raise RuntimeError("cudnn_frontend error INVALID_VARIANT_PACK: Object does not have the __dlpack__() "
                               "method")
        return int(value.__array_interface__["data"][0])

    def pygraph(self, **kw: Any) -> Graph:
        graph = Graph(self, **kw)
        self.graphs.append(graph)
        return graph


def is_packed(dims: list[int], strides: list[int]) -> bool:
    """Row-major packed (dims of length 1 ignored): what a fake that has only NCHW / KCRS engines accepts."""
    step = 1
    for d, s in zip(reversed(dims), reversed(strides)):
        if d != 1 and s != step:
            return False
        step *= d
    return True
