"""im2col on the GPU: one CUDA kernel reads the input where it lies and writes the col matrix.

The shared ``Im2col`` (``kernels/conv.py``) builds col in NumPy's way: a padded copy of the input (a border fill
per padded side, then the interior copy), a strided window view, and one ``copyto`` from that view. On a GPU each
of those is a launch and tens of microseconds of host Python: the convolution kernels were host-bound (measured:
benchmarks/RESULTS.md, "Behind the code: cupy/im2col.py"). ``CudaIm2col`` has the same interface (``specs``,
``blocks``, ``windows``, ``block``) and does it in one launch: thread ``(r, p)`` of the ``(C * prod(F), prod(out)
* N)`` col matrix computes its input position from the strides, padding and dilation and reads it through the
input's own strides (any axes order, so no transposing copy either), or writes 0 in the padding. The forward
convolution, the filter gradient and the data gradient computed as a convolution all take their col matrix from
it.

1-x-1 convolutions with stride 1 and no padding need no col at all, and inputs whose dtype
differs from the computation's need a converting copy: both keep the shared ``Im2col``
(``make_im2col`` chooses). The source is fixed text; ``source(host=True)`` adds a host loop over
the same body, which is how the tests compare it with the shared ``Im2col`` with ``nvcc`` and no GPU.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir import Axes
from ...ir.conv import ConvArg, activation_roles
from ..kernels.conv import Im2col, is_pointwise

_BODY = """\
// col[r, p] for r = (c, f1, f2, f3) and p = (o1, o2, o3, n), row-major; g: the geometry (see GEOMETRY)
__host__ __device__ __forceinline__ void ng_im2col_body_%(suffix)s(long long idx, const %(real)s* x,
        %(real)s* col, const long long* g) {
    const long long C = g[0], N = g[1];
    const long long positions = g[5] * g[6] * g[7] * N;
    long long r = idx / positions, p = idx %% positions;
    const long long n = p %% N;
    p /= N;
    const long long o3 = p %% g[7], o2 = (p / g[7]) %% g[6], o1 = p / (g[7] * g[6]);
    const long long f3 = r %% g[10], f2 = (r / g[10]) %% g[9], f1 = (r / g[10] / g[9]) %% g[8];
    const long long c = r / (g[10] * g[9] * g[8]);
    const long long i1 = o1 * g[11] - g[14] + f1 * g[17];
    const long long i2 = o2 * g[12] - g[15] + f2 * g[18];
    const long long i3 = o3 * g[13] - g[16] + f3 * g[19];
    if (c >= C || i1 < 0 || i1 >= g[2] || i2 < 0 || i2 >= g[3] || i3 < 0 || i3 >= g[4]) {
        col[idx] = (%(real)s)0;
        return;
    }
    col[idx] = x[c * g[20] + i1 * g[21] + i2 * g[22] + i3 * g[23] + n * g[24]];
}

extern "C" __global__ void ng_im2col_%(suffix)s(const %(real)s* x, %(real)s* col, long long total,
        const long long* g) {
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx < total) ng_im2col_body_%(suffix)s(idx, x, col, g);
}
"""

_HOST = """\
extern "C" void ng_im2col_host_%(suffix)s(const %(real)s* x, %(real)s* col, long long total, const long long* g) {
    for (long long idx = 0; idx < total; ++idx) ng_im2col_body_%(suffix)s(idx, x, col, g);
}
"""

GEOMETRY = ("C", "N", "L1", "L2", "L3", "O1", "O2", "O3", "F1", "F2", "F3", "S1", "S2", "S3", "P1", "P2", "P3",
            "D1", "D2", "D3", "xC", "x1", "x2", "x3", "xN")
"""The 25 int64 the kernel reads: channels, batch, input, output and filter lengths, strides, padding before,
dilation (missing spatial axes are length 1), then the input's element strides in ``(C, *spatial, N)`` order."""

_SUFFIX = {"float32": ("f32", "float"), "float64": ("f64", "double")}
THREADS = 256


def source(host: bool = False) -> str:
    """The CUDA source of ``ng_im2col_{f32,f64}`` (and, with ``host``, ``ng_im2col_host_{f32,f64}``)."""
    parts = []
    for suffix, real in _SUFFIX.values():
        names = {"suffix": suffix, "real": real}
        parts += [_BODY % names] + ([_HOST % names] if host else [])
    return "\n".join(parts)


def geometry(x: Any, perm: tuple[int, ...], fshape: tuple[int, ...], arg: ConvArg,
             out_lengths: tuple[int, ...]) -> np.ndarray:
    """The kernel's ``GEOMETRY`` for input array ``x`` (its axes in their own order; ``perm`` gives
    ``(C, *spatial, N)``), as an int64 NumPy array."""
    shape = [x.shape[i] for i in perm]
    strides = [x.strides[i] // x.itemsize for i in perm]
    rank = len(shape) - 2
    pad3 = lambda values, fill: list(values) + [fill] * (3 - rank)  # noqa: E731
    return np.array([shape[0], shape[-1], *pad3(shape[1:-1], 1), *pad3(out_lengths, 1), *pad3(fshape, 1),
                     *pad3(arg.strides, 1), *pad3([p[0] for p in arg.padding], 0), *pad3(arg.dilation, 1),
                     strides[0], *pad3(strides[1:-1], 0), strides[-1]], dtype=np.int64)


_module: list[Any] = []


def _kernel(dtype: str) -> Any:
    if not _module:
        import cupy  # only reached on the CuPy transformer

        _module.append(cupy.RawModule(code=source(), options=("--std=c++17",)))
    return _module[0].get_function(f"ng_im2col_{_SUFFIX[dtype][0]}")


class CudaIm2col:
    """``Im2col``'s interface, the col matrix made by one CUDA kernel (see the module docstring)."""

    def __init__(self, xp: Any, x_axes: Axes, fshape: tuple[int, ...], arg: ConvArg, dtype: str) -> None:
        roles = activation_roles(x_axes, "conv")
        self.xp, self.perm, self.fshape, self.arg, self.dtype = xp, roles.perm, tuple(fshape), arg, dtype
        c, n, lengths = roles.channel.length, roles.batch.length, roles.spatial.lengths
        self.out_lengths = tuple(
            (length + p[0] + p[1] - d * (k - 1) - 1) // s + 1
            for length, k, s, p, d in zip(lengths, fshape, arg.strides, arg.padding, arg.dilation))
        self.pointwise = False
        self.rows = c * math.prod(fshape)
        self.positions = math.prod(self.out_lengths) * n
        self.second = self.out_lengths[1] if len(self.out_lengths) > 1 else 1
        self.blocks = [(0, self.out_lengths[0], 0, self.second)]  # the whole matrix
        self.parts = [self.blocks]  # one worker: the device runs the block
        self.specs: list[tuple[tuple[int, ...], str]] = [((self.rows * self.positions,), dtype)]
        self._geometry: tuple[tuple, Any] | None = None  # (the input's shape and strides, its device geometry)

    def windows(self, x: Any, buffers: list[Any]) -> Any:
        """The input itself: the kernel reads it through its strides."""
        return x

    def block(self, x: Any, block: Any, buffers: list[Any], worker: int = 0) -> Any:
        """The whole ``(C * prod(F), prod(out) * N)`` col matrix (one block on a GPU), in one launch."""
        key = (x.shape, x.strides)
        if self._geometry is None or self._geometry[0] != key:  # uploaded once per input layout
            host = geometry(x, self.perm, self.fshape, self.arg, self.out_lengths)
            self._geometry = (key, self.xp.asarray(host))
        col = buffers[-1][:self.rows * self.positions]
        total = col.size
        _kernel(self.dtype)(((total + THREADS - 1) // THREADS,), (THREADS,),
                            (x, col, np.int64(total), self._geometry[1]))
        return col.reshape(self.rows, -1)


def make_im2col(xp: Any, x_axes: Axes, fshape: tuple[int, ...], arg: ConvArg, dtype: str, x_dtype: str,
                workers: int = 1) -> Any:
    """``CudaIm2col`` where it applies (float32/float64 input in the computation's dtype, not a 1x1
    stride-1 unpadded convolution), else the shared ``Im2col`` (``workers``: the runner's, one on CuPy)."""
    if is_pointwise(fshape, arg) or x_dtype != dtype or dtype not in _SUFFIX:
        return Im2col(xp, x_axes, fshape, arg, dtype, x_dtype, workers)
    return CudaIm2col(xp, x_axes, fshape, arg, dtype)
