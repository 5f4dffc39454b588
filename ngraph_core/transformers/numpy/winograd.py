"""Winograd F(2x2, 3x3) convolutions on the CPU: numba-compiled transforms, one tile row at a time.

For a 3x3 filter with stride 1 (no dilation, no groups), each 2x2 block of outputs is
``Aᵀ [U ⊙ V] A``: ``V = Bᵀ d B`` of the 4x4 input tile ``d`` around it, ``U = G g Gᵀ`` of the
filter. Summed over channels, the 16 element-wise products become 16 GEMMs
``U[pq] (K x C) @ V[pq] (C x tiles*N)``: 2.25x fewer multiplications than im2col's GEMM, and
a GEMM whose rows are the output channels and whose reduction is the input channels, in
place of im2col's ``K x 9C`` against ``9C x positions``.

Layout: the internal layout of ``kernels/conv.py``, ``(C, H, W, N)`` (neon's CHWN). A tile row
of the input (four padded rows) becomes ``V`` of shape ``(16, C, tiles, N)``; the innermost loop
runs over the batch, contiguous on both sides, so the generated loops vectorize. Each of the 16
outputs of a tile is its own loop (one store stream against four loads): a single loop that
stored all 16 did not vectorize (numba cannot tell LLVM the arrays do not overlap) and took
over ten times as long.

Why a tile row at a time: ``V`` and the GEMM's output for one tile row (0.3-1 MiB in ResNet-20)
stay in the 2 MiB L2 cache between the transform, the GEMM and the output transform. Whole-layer
arrays (4-16 MiB) went to memory and back: measured on ResNet-20's three layer shapes, a tile row at a
time beat both im2col and the whole-layer Winograd, by up to 2.5x. The same transforms written as NumPy
array operations (40 strided passes) were slower than im2col, and a Python loop of them per tile row is
worse (figures: benchmarks/RESULTS.md, "Behind the code: numpy/winograd.py"); so this path needs numba,
and without numba (or with ``NG_KERNELS=numpy``) the im2col kernels run.

The three convolution kernels:

* forward: ``out = Aᵀ[U ⊙ V(x)]A``;
* data gradient (stride 1): the forward convolution of ``dY`` with the filter flipped in
  space and its channel roles swapped, with "full" padding ``2 - p``;
* filter gradient: ``dU[pq] = Σ_tiles Ŷ[pq] V[pq]ᵀ`` with ``Ŷ = A dY Aᵀ`` (the adjoint of the
  output transform) and ``dg = Gᵀ dU G`` (the adjoint of the filter transform).

Which algorithm runs is chosen per layer by measurement (``NG_CONV``, ``conv_choice.py``).

Memory safety: the transforms index without bounds checks. Their extents come from the conv's verified
axes and ``ConvArg`` (``ir.conv.check_conv``: positive strides, non-negative padding, a kernel that fits
the padded input); the input reaches them through a padded copy of the planned shape, the scratch is
sized by the same ``Tiles``, and each call checks the arrays a transform reads or writes directly
(``out``, an uncopied ``dy``) against that shape (``VerifyError``) before the first tile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import VerifyError
from ...ir import Op
from ...ir.conv import ConvArg, activation_roles, filter_roles
from ..kernels.context import Kernel, KernelContext, per_object
from ..kernels.contraction import is_constant
from ..kernels.windows import PaddedCopy, is_identity
from . import runtime
from .numba_loader import HAVE_NUMBA, load_kernel, prepare

BT = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
"""Bᵀ: the input transform of F(2, 3) along one axis (4 inputs -> 4)."""
G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))
"""G: the filter transform (3 taps -> 4)."""
AT = ((1, 1, 1, 0), (0, 1, -1, -1))
"""Aᵀ: the output transform (4 -> 2 outputs)."""

FLOAT_DTYPES = ("float32", "float64")


def _signed_sum(terms: Sequence[tuple[int, str]]) -> str:
    """``a - b + c`` from ``[(1, "a"), (-1, "b"), (1, "c")]`` (zero coefficients left out)."""
    text = ""
    for coefficient, term in terms:
        if coefficient:
            text += f" {'+' if coefficient > 0 else '-'} {term}" if text else ("" if coefficient > 0 else "-") + term
    return text


def _tile_source(matrix: Sequence[Sequence[int]]) -> str:
    """``k(src, dst, i)``: ``dst[4p + q, c, j, :] = Σ_ab matrix[p][a] matrix[q][b] src[c, 2i + a, 2j + b, :]``
    for tile row ``i`` (``matrix`` is 4 x R: each tile reads R rows and R columns of ``src``)."""
    reach = len(matrix[0])
    lines = ["def k(src, dst, i):",
             "    channels, batch, tiles = src.shape[0], src.shape[3], dst.shape[2]",
             "    for c in range(channels):"]
    lines += [f"        r{a} = src[c, 2 * i + {a}]" for a in range(reach)]
    lines += ["        for j in range(tiles):",
              "            w = 2 * j"]
    for p in range(4):
        for q in range(4):
            terms = [(matrix[p][a] * matrix[q][b], f"r{a}[w + {b}, n]") for a in range(reach) for b in range(reach)]
            lines += [f"            o = dst[{4 * p + q}, c, j]",
                      "            for n in range(batch):",
                      f"                o[n] = {_signed_sum(terms)}"]
    return "\n".join(lines) + "\n"


def input_source() -> str:
    """``k(xp, V, i)``: ``V[pq, c, j, :] = (Bᵀ d B)[p, q]`` of tile row ``i`` of the padded input ``xp``
    ``(C, H, W, N)``; ``V`` is ``(16, C, tiles, N)``."""
    return _tile_source(BT)


def output_source() -> str:
    """``k(M, out, i)``: output rows ``2i, 2i + 1`` of ``out`` ``(K, 2 * tile rows, 2 * tiles, N)`` as
    ``Aᵀ m A`` of each tile's 16 GEMM results ``M`` ``(16, K, tiles, N)``."""
    lines = ["def k(M, out, i):",
             "    channels, tiles, batch = M.shape[1], M.shape[2], M.shape[3]",
             "    for c in range(channels):",
             "        for j in range(tiles):",
             "            w = 2 * j"]
    lines += [f"            m{t} = M[{t}, c, j]" for t in range(16)]
    for y in range(2):
        for z in range(2):
            terms = [(AT[y][p] * AT[z][q], f"m{4 * p + q}[n]") for p in range(4) for q in range(4)]
            lines += [f"            o = out[c, 2 * i + {y}, w + {z}]",
                      "            for n in range(batch):",
                      f"                o[n] = {_signed_sum(terms)}"]
    return "\n".join(lines) + "\n"


def gradient_source() -> str:
    """``k(dy, Y, i)``: ``Y[pq, k, j, :] = (A e Aᵀ)[p, q]`` of each 2x2 block ``e`` of tile row ``i`` of
    the output gradient ``dy`` ``(K, 2 * tile rows, 2 * tiles, N)``; ``Y`` is ``(16, K, tiles, N)``."""
    return _tile_source(tuple(zip(*AT)))  # A, 4 x 2: the adjoint of the output transform


_SOURCES = {"input": input_source, "output": output_source, "gradient": gradient_source}


@functools.cache
def transform(name: str) -> Callable[..., Any]:
    """The numba function of a transform (``input``, ``output``, ``gradient``): ``njit(cache=True)``, its
    generated source kept in the kernel cache directory so a second process loads the machine code."""
    return load_kernel("from numba import njit\n\n\n@njit(cache=True, nogil=True)\n" + _SOURCES[name]())


def ready(dtype: str, background: bool) -> bool:
    """True when the three transforms' machine code for ``dtype`` is loaded; starts compiling what is missing
    (``numba_loader.prepare``: in the background with ``background``, else here)."""
    probe = np.empty((1, 1, 1, 1), dtype=dtype)  # the transforms take C-contiguous 4-d arrays and a row index
    return all([prepare(transform(name), (probe, probe, 0), background).done for name in _SOURCES])


def filter_transform(g: Any, out: Any) -> Any:
    """``U[p, q, k, c] = (G g[c, :, :, k] Gᵀ)[p, q]`` of a ``(C, 3, 3, K)`` filter into ``out`` ``(16, K, C)``."""
    gm = np.asarray(G, dtype=out.dtype)
    rows = np.tensordot(gm, g, axes=(1, 1))  # (4, C, 3, K)
    both = np.tensordot(rows, gm, axes=(2, 1))  # (4, C, K, 4)
    np.copyto(out.reshape(4, 4, *out.shape[1:]), both.transpose(0, 3, 2, 1))
    return out


def filter_gradient(du: Any, out: Any) -> Any:
    """``dg[c, :, :, k] = Gᵀ dU[:, :, k, c] G`` (the adjoint of ``filter_transform``) into ``out`` ``(C, 3, 3, K)``."""
    gm = np.asarray(G, dtype=du.dtype)
    d4 = du.reshape(4, 4, *du.shape[1:])  # (p, q, K, C)
    rows = np.tensordot(gm, d4, axes=(0, 0))  # (r, q, K, C)
    both = np.tensordot(rows, gm, axes=(1, 0))  # (r, K, C, s)
    np.copyto(out, both.transpose(2, 0, 3, 1), casting="unsafe")
    return out


def eligible(fshape: Sequence[int], arg: ConvArg, dtype: str, xp: Any = np) -> bool:
    """True when this module computes the convolution: NumPy arrays, numba importable, a float
    dtype, a 2-d 3x3 filter, stride 1, no dilation, no groups."""
    return (HAVE_NUMBA and xp is np and dtype in FLOAT_DTYPES and tuple(fshape) == (3, 3)
            and tuple(arg.strides) == (1, 1) and tuple(arg.dilation) == (1, 1) and arg.groups == 1)


class Scratch:
    """Named scratch arrays collected into one workspace request (``kc.scratch().request``)."""

    def __init__(self) -> None:
        self.specs: list[tuple[tuple[int, ...], str]] = []
        self.index: dict[str, int] = {}

    def add(self, name: str, shape: Sequence[int], dtype: str) -> None:
        self.index[name] = len(self.specs)
        self.specs.append((tuple(shape), dtype))

    def request(self, kc: KernelContext) -> Callable[[], dict[str, Any]]:
        views, index = kc.scratch().request(self.specs), self.index
        return lambda: (lambda arrays: {name: arrays[i] for name, i in index.items()})(views())


class Tiles:
    """The tiling of one convolution: a padded input copy, the compiled transforms, and the tile
    rows split over the runtime's workers (``runtime.threads()``), each with its own scratch.

    Args:
        c: input channels (of the convolution as computed: ``dY``'s for a data gradient).
        k: output channels.
        lengths: the input's spatial lengths ``(H, W)``.
        n: the batch.
        padding: ``((top, bottom), (left, right))`` zero padding.
        perm: the input's axes order to the internal ``(C, H, W, N)``.
        dtype: the computation dtype.
        scratch: where the tiling adds its scratch arrays.
    """

    def __init__(self, c: int, k: int, lengths: Sequence[int], n: int, padding: Sequence[tuple[int, int]],
                 perm: Sequence[int], dtype: str, scratch: Scratch) -> None:
        self.c, self.k, self.n, self.dtype = c, k, n, dtype
        self.out_lengths = tuple(length + before + after - 2 for length, (before, after) in zip(lengths, padding))
        self.tile_rows, self.tiles = (-(-m // 2) for m in self.out_lengths)
        padded = (c, 2 * self.tile_rows + 2, 2 * self.tiles + 2, n)
        # a ceil-sized output needs the padded input one row/column longer than its padding says
        pads = [(before, size - length - before) for (before, _), size, length in zip(padding, padded[1:3], lengths)]
        self.pad = PaddedCopy(padded, (1, 2), pads, 0.0)
        self.perm = tuple(perm)
        self.even = all(m % 2 == 0 for m in self.out_lengths)
        self.whole_shape = (k, 2 * self.tile_rows, 2 * self.tiles, n)
        self.parts = runtime.split(self.tile_rows, runtime.threads())  # tile rows per worker
        scratch.add("padded", padded, dtype)
        for w in range(len(self.parts)):
            scratch.add(f"V{w}", (16, c, self.tiles, n), dtype)
        self.to_tiles = transform("input")

    def padded_input(self, x: Any, buffers: dict[str, Any]) -> Any:
        """``x`` (any axes order) padded into its buffer, in internal layout."""
        return self.pad(np, buffers["padded"], x.transpose(self.perm))

    def in_parallel(self, rows: Callable[[int, int, int], None]) -> None:
        """``rows(worker, start, stop)`` for each worker's tile rows, in parallel."""
        runtime.run([functools.partial(rows, w, start, stop) for w, (start, stop) in enumerate(self.parts)])


class Forward:
    """``out = Aᵀ[U ⊙ V]A``: the forward convolution of an internal-layout input with a ``(C, 3, 3, K)`` filter."""

    def __init__(self, tiles: Tiles, scratch: Scratch) -> None:
        self.tiles = tiles
        t = tiles
        scratch.add("U", (16, t.k, t.c), t.dtype)
        for w in range(len(t.parts)):
            scratch.add(f"M{w}", (16, t.k, t.tiles, t.n), t.dtype)
        if not t.even:
            scratch.add("whole", t.whole_shape, t.dtype)
        self.from_tiles = transform("output")

    def __call__(self, out: Any, x: Any, g: Any, buffers: dict[str, Any], u: Any = None) -> Any:
        """``out`` ``(K, Ho, Wo, N)`` (C-contiguous) = the convolution of ``x`` (any axes order) with ``g``
        (or with ``u``, ``g`` already transformed, when given)."""
        t, from_tiles = self.tiles, self.from_tiles
        _check_shape("winograd forward output", out, (t.k, *t.out_lengths, t.n))
        u = filter_transform(g, buffers["U"]) if u is None else u
        padded = t.padded_input(x, buffers)
        whole = out if t.even else buffers["whole"]

        def rows(w: int, start: int, stop: int) -> None:
            v, m = buffers[f"V{w}"], buffers[f"M{w}"]
            vm, mm = v.reshape(16, t.c, -1), m.reshape(16, t.k, -1)
            for i in range(start, stop):
                t.to_tiles(padded, v, i)
                np.matmul(u, vm, out=mm)
                from_tiles(m, whole, i)

        t.in_parallel(rows)
        if not t.even:
            np.copyto(out, whole[:, :t.out_lengths[0], :t.out_lengths[1]])
        return out


def _check_shape(what: str, array: Any, shape: tuple[int, ...]) -> None:
    """The compiled transforms index without bounds checks: an array they read or write whole must have the
    shape the tiling was planned for (a few integers compared per call)."""
    if tuple(array.shape) != tuple(shape):
        raise VerifyError(f"{what}: expected shape {tuple(shape)}, received {tuple(array.shape)}; hint: a bug in "
                          "ngraph_core, please report it")


def _forward(x_axes: Any, k: int, padding: Any, dtype: str, scratch: Scratch) -> Forward:
    roles = activation_roles(x_axes, "conv")
    tiles = Tiles(roles.channel.length, k, roles.spatial.lengths, roles.batch.length, padding, roles.perm, dtype,
                  scratch)
    return Forward(tiles, scratch)


def conv_into(x: Op, w: Op, arg: ConvArg, dtype: str, kc: KernelContext) -> Callable[[Any, Any, Any], Any]:
    """``fn(out, xv, wv)``: the forward convolution into ``out`` ``[K, *out, N]``, as ``kernels/conv.conv_into``."""
    wr = filter_roles(w.axes, "conv")
    c, k = wr.in_channels.length, wr.out_channels.length
    scratch = Scratch()
    forward = _forward(x.axes, k, arg.padding, dtype, scratch)
    views = scratch.request(kc)
    if not is_constant(w):
        def winograd_conv_kernel(out, xv, wv):
            return forward(out, xv, wv.reshape(c, 3, 3, k).astype(dtype, copy=False), views())

        return winograd_conv_kernel
    # a constant filter (inference weights: never written, the same array object every call) is
    # transformed once into an array of its own: 16/9 of the weights, rewritten on every call otherwise
    transformed = per_object(lambda wv: filter_transform(wv.reshape(c, 3, 3, k).astype(dtype, copy=False),
                                                         np.empty((16, k, c), dtype=dtype)))

    def held_winograd_conv_kernel(out, xv, wv):
        return forward(out, xv, None, views(), u=transformed(wv))

    return held_winograd_conv_kernel


def bprop_data(op: Op, kc: KernelContext) -> Kernel:
    """dX = conv(dY, W') with "full" padding ``2 - p``, ``W'`` the filter flipped in space with its
    channel roles swapped: ``W'[k, r, s, c] = W[c, 2 - r, 2 - s, k]``."""
    dtype = kc.dtype_of(op)
    dy, w = op.src
    xr, wr = activation_roles(op.axes, "conv_bprop_data"), filter_roles(w.axes, "conv_bprop_data")
    c, k = wr.in_channels.length, wr.out_channels.length
    scratch = Scratch()
    forward = _forward(dy.axes, c, tuple((2 - before, 2 - after) for before, after in op.arg.padding), dtype, scratch)
    scratch.add("flipped", (k, 3, 3, c), dtype)
    copy_out = not is_identity(xr.perm)
    if copy_out:
        scratch.add("dx", tuple(xr.canonical.lengths), dtype)
    views = scratch.request(kc)

    def winograd_bprop_data_kernel(out, dyv, wv):
        buffers = views()
        flipped = buffers["flipped"]
        np.copyto(flipped, wv.reshape(c, 3, 3, k)[:, ::-1, ::-1].transpose(3, 1, 2, 0), casting="unsafe")
        dx = buffers["dx"] if copy_out else out
        forward(dx, dyv, flipped, buffers)
        if copy_out:
            np.copyto(out.transpose(xr.perm), dx)
        return out

    return winograd_bprop_data_kernel


def bprop_filter(op: Op, kc: KernelContext) -> Kernel:
    """dW: ``dU[pq] = Σ over tile rows of Ŷ[pq] V[pq]ᵀ`` (``Ŷ = A dY Aᵀ``), then ``dW = Gᵀ dU G``."""
    dtype = kc.dtype_of(op)
    x, dy = op.src
    wr = filter_roles(op.axes, "conv_bprop_filter")
    c, k = wr.in_channels.length, wr.out_channels.length
    xr, dyr = activation_roles(x.axes, "conv_bprop_filter"), activation_roles(dy.axes, "conv_bprop_filter")
    scratch = Scratch()
    t = Tiles(c, k, xr.spatial.lengths, xr.batch.length, op.arg.padding, xr.perm, dtype, scratch)
    dy_pad = PaddedCopy(t.whole_shape, (1, 2),
                        [(0, whole - length) for whole, length in zip(t.whole_shape[1:3], t.out_lengths)], 0.0)
    copy_dy = not t.even or not is_identity(dyr.perm) or kc.dtype_of(dy) != dtype
    if copy_dy:
        scratch.add("dy", t.whole_shape, dtype)
    for w in range(len(t.parts)):
        scratch.add(f"Y{w}", (16, k, t.tiles, t.n), dtype)
        scratch.add(f"dU{w}", (16, k, c), dtype)
        scratch.add(f"part{w}", (16, k, c), dtype)
    to_gradient = transform("gradient")
    views = scratch.request(kc)

    def winograd_bprop_filter_kernel(out, xv, dyv):
        buffers = views()
        padded = t.padded_input(xv, buffers)
        if not copy_dy:  # the gradient transform then reads dy itself, tile by tile
            _check_shape("winograd filter gradient's dy", dyv, t.whole_shape)
        dyi = dy_pad(np, buffers["dy"], dyv.transpose(dyr.perm)) if copy_dy else dyv

        def rows(w: int, start: int, stop: int) -> None:
            v, y, du, part = buffers[f"V{w}"], buffers[f"Y{w}"], buffers[f"dU{w}"], buffers[f"part{w}"]
            vt, ym = v.reshape(16, c, -1).transpose(0, 2, 1), y.reshape(16, k, -1)
            for i in range(start, stop):
                t.to_tiles(padded, v, i)
                to_gradient(dyi, y, i)
                np.matmul(ym, vt, out=du if i == start else part)
                if i != start:
                    du += part

        t.in_parallel(rows)
        du = buffers["dU0"]
        for w in range(1, len(t.parts)):
            du += buffers[f"dU{w}"]
        return filter_gradient(du, out.reshape(c, 3, 3, k))

    return winograd_bprop_filter_kernel
