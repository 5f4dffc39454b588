"""Positional tensors over named axes: how ONNX's numbered dimensions live in ngraph.

ONNX addresses dimensions by position and broadcasts NumPy-style (right-aligned, size-1
dims stretch); ngraph addresses them by name. An imported value is an ``Op`` whose axes,
*in order*, are the ONNX dims; their names are generated (``d12``) and carry no meaning,
so every operator converter goes through the helpers here, which rename axes so that:

* element-wise operands end up with identical axes (``broadcast``),
* a contraction shares exactly the contracted axis (``matmul``),
* no op ever holds two axes of one name (``fresh``).

A *value* is either such an ``Op`` or a NumPy array known at import time (a ``static``
value: initializers kept constant, ``Constant`` nodes, shapes, and anything computed
only from those), so that the shape arithmetic of exported models (``Shape -> Gather ->
Concat -> Reshape``) resolves to plain numbers before the graph is built.

Example:
    >>> p = Positional()
    >>> a = p.as_op(np.ones((2, 3), "float32")); b = p.as_op(np.ones((3,), "float32"))
    >>> a2, b2 = p.broadcast(a, b)   # both [d0 d1], lengths (2, 3)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import api
from ...ir import Axes, Axis, Op, OpType, make
from ...ir.axes import BATCH_AXIS_NAME
from .errors import OnnxError

Value = Op | np.ndarray
FLOATS = ("float16", "float32", "float64")


def shape_of(v: Value) -> tuple[int, ...]:
    """The ONNX shape of a value (the axes' lengths in order)."""
    return tuple(v.axes.lengths) if isinstance(v, Op) else tuple(v.shape)


def dtype_of(v: Value) -> str:
    """The element type name of a value (``float32``, ``int64``, ``bool``...)."""
    return v.dtype if isinstance(v, Op) else np.dtype(v.dtype).name


def normalize_axis(axis: int, rank: int, who: str) -> int:
    """``axis`` in ``[-rank, rank)`` as a non-negative index, else ``OnnxError`` naming ``who``."""
    if not -rank <= int(axis) < max(rank, 1):
        raise OnnxError(f"{who}: axis {axis} is out of range for a tensor of rank {rank}; "
                        f"hint: expected an axis in [{-rank}, {rank - 1}]")
    return int(axis) % max(rank, 1)


class Positional:
    """Builds ngraph ops with ONNX's positional semantics; one per import (it names the axes).

    Attributes:
        prefix: the generated axis names' prefix (``d`` -> ``d0``, ``d1``...).
    """

    def __init__(self, prefix: str = "d") -> None:
        self.prefix = prefix
        self._ids = itertools.count()

    # -- axes and values ---------------------------------------------------------------------------
    def fresh(self, shape: Sequence[int]) -> Axes:
        """New axes of these lengths whose names no other axis of this import has."""
        return Axes(Axis(f"{self.prefix}{next(self._ids)}", int(n)) for n in shape)

    def as_op(self, v: Value, dtype: str | None = None) -> Op:
        """``v`` as an op: an array becomes a constant with fresh axes (of ``dtype`` when given)."""
        if isinstance(v, Op):
            return v if dtype is None or v.dtype == dtype else api.cast(v, dtype)
        array = np.asarray(v)
        return api.constant(array, axes=self.fresh(array.shape), dtype=dtype or array.dtype.name)

    def rename(self, x: Op, axes: Axes | None = None) -> Op:
        """``x`` with fresh axis names (or ``axes``: same lengths, same order)."""
        return api.cast_axes(x, axes if axes is not None else self.fresh(x.axes.lengths))

    # -- movement ----------------------------------------------------------------------------------
    def reshape(self, x: Op, shape: Sequence[int]) -> Op:
        """``x`` read in row-major order into ``shape`` (same element count)."""
        shape = tuple(int(n) for n in shape)
        if tuple(x.axes.lengths) == shape:
            return x
        if int(np.prod(shape, dtype=np.int64)) != x.axes.size:
            raise OnnxError(f"reshape: cannot read {x.axes.size} elements of shape {tuple(x.axes.lengths)} "
                            f"as shape {shape}")
        return make(OpType.RESHAPE, [x], axes=self.fresh(shape))

    def transpose(self, x: Op, perm: Sequence[int]) -> Op:
        """``x`` with its dims permuted (``perm[i]`` = the input dim at output position ``i``)."""
        perm = [int(p) for p in perm]
        if sorted(perm) != list(range(len(x.axes))):
            raise OnnxError(f"transpose: perm {perm} is not a permutation of the {len(x.axes)} dims")
        return api.axes_with_order(x, [x.axes[p] for p in perm])

    def expand(self, x: Op, axes: Axes) -> Op:
        """``x`` broadcast NumPy-style to the positional ``axes`` (right-aligned; size-1 dims stretch)."""
        shape, target = tuple(x.axes.lengths), tuple(axes.lengths)
        if len(shape) > len(target):
            raise OnnxError(f"broadcast: cannot broadcast shape {shape} to the lower rank {target}")
        offset = len(target) - len(shape)
        kept = [i for i, n in enumerate(shape) if n == target[offset + i]]
        for i, n in enumerate(shape):
            if n != target[offset + i] and n != 1:
                raise OnnxError(f"broadcast: shapes {shape} and {target} are not broadcastable "
                                f"(dim {i}: {n} vs {target[offset + i]})")
        if len(kept) != len(shape):  # drop the size-1 dims that stretch
            x = make(OpType.RESHAPE, [x], axes=self.fresh([shape[i] for i in kept]))
        x = api.cast_axes(x, Axes(axes[offset + i] for i in kept))
        return api.broadcast(x, axes)

    def broadcast(self, *values: Value, dtype: str | None = None) -> list[Op]:
        """The values as ops with identical axes (NumPy broadcasting); ``dtype`` casts them all."""
        ops = [self.as_op(v) for v in values]
        if dtype is not None:
            ops = [o if o.dtype == dtype else api.cast(o, dtype) for o in ops]
        try:
            target_shape = np.broadcast_shapes(*(tuple(o.axes.lengths) for o in ops))
        except ValueError:
            shapes = ", ".join(str(tuple(o.axes.lengths)) for o in ops)
            raise OnnxError(f"broadcast: shapes {shapes} are not broadcastable; hint: ONNX broadcasting "
                            "aligns dims from the right and stretches only size-1 dims") from None
        target = next((o.axes for o in ops if tuple(o.axes.lengths) == target_shape), None)
        if target is None or len(set(target.names)) != len(target):
            target = self.fresh(target_shape)
        return [o if o.axes == target else self.expand(o, target) for o in ops]

    # -- reductions and products -------------------------------------------------------------------
    def reduce(self, kind: str, x: Op, dims: Sequence[int] | None, keepdims: bool) -> Op:
        """``sum``/``max``/``min``/``prod``/``mean`` of ``x`` over ``dims`` (None: all), ONNX's keepdims."""
        rank = len(x.axes)
        dims = list(range(rank)) if dims is None else sorted({normalize_axis(d, rank, f"Reduce{kind}") for d in dims})
        fn = {"sum": api.sum, "max": api.max, "min": api.min, "prod": api.prod, "mean": api.mean}[kind]
        out = fn(x, reduction_axes=[x.axes[d] for d in dims]) if dims else x
        if keepdims and dims:
            out = self.reshape(out, [1 if i in dims else n for i, n in enumerate(x.axes.lengths)])
        return out

    def matmul(self, a: Value, b: Value) -> Op:
        """NumPy's ``matmul`` (1-D operands promoted and squeezed, leading dims broadcast), lowered to the
        cheapest ngraph product; none materializes the ``[batch, M, K, N]`` broadcast product but the
        last, integer-only one.

        * ``b`` 2-D: ``a`` read as one ``[batch * M, K]`` matrix, one ``ng.dot``;
        * both batched (floats): one grouped 1x1 convolution, a group per batch matrix (``batched``);
        * otherwise (integers with batch dims): ``a [.., M, K, 1] * b [.., 1, K, N]`` summed over K.

        float16 operands multiply in float32 (as NumPy and onnxruntime accumulate), rounded back.

        Raises:
            OnnxError: a scalar operand, inner dims that differ, or batch dims that do not broadcast.
        """
        a, b = self.as_op(a), self.as_op(b)
        if not a.axes or not b.axes:
            raise OnnxError("matmul: expected operands of rank >= 1, received a scalar")
        if a.dtype == "float16" and b.dtype == "float16":
            return api.cast(self.matmul(api.cast(a, "float32"), api.cast(b, "float32")), "float16")
        squeeze_a, squeeze_b = len(a.axes) == 1, len(b.axes) == 1
        if squeeze_a:
            a = self.reshape(a, (1, a.axes[0].length))
        if squeeze_b:
            b = self.reshape(b, (b.axes[0].length, 1))
        (m, k), (k2, n) = a.axes.lengths[-2:], b.axes.lengths[-2:]
        if k != k2:
            raise OnnxError(f"matmul: inner dims differ: {tuple(a.axes.lengths)} @ {tuple(b.axes.lengths)}")
        lead = tuple(a.axes.lengths[:-1])
        if len(b.axes) == 2:  # one matrix on the right: a as [batch * M, K], one dot
            rows = self.reshape(a, [int(np.prod(lead)), k])
            out = self.reshape(api.dot(rows, api.cast_axes(b, Axes([rows.axes[1], *self.fresh([n])]))), [*lead, n])
        elif a.dtype == b.dtype and a.dtype in FLOATS:
            out = self.batched(a, b)
        else:  # integers: a [.., M, K, 1] * b [.., 1, K, N] summed over K
            batch = np.broadcast_shapes(tuple(a.axes.lengths[:-2]), tuple(b.axes.lengths[:-2]))
            bt, (am, ak, bn) = self.fresh(batch), self.fresh((m, k, n))
            a4 = api.broadcast(self.expand(a, bt + Axes([am, ak])), bt + Axes([am, ak, bn]))
            b4 = api.broadcast(self.expand(b, bt + Axes([ak, bn])), bt + Axes([am, ak, bn]))
            out = api.sum(a4 * b4, reduction_axes=[ak])
        shape = list(out.axes.lengths)
        if squeeze_b:
            shape.pop(-1)
        if squeeze_a:
            shape.pop(-2 if not squeeze_b else -1)
        return self.reshape(out, shape)

    def batched(self, a: Op, b: Op) -> Op:
        """``a [*batch, M, K] @ b [*batch, K, N]`` (batch dims broadcast) as one grouped 1x1 convolution.

        With ``G`` batch matrices, the activation is ``a`` as ``[C = G * K, M, N = 1]`` and the
        filter ``b`` as ``[K, 1, G * N]``: group ``g`` of the convolution multiplies the ``K``
        channels of matrix ``g`` by the ``N`` filters of matrix ``g`` at every one of the ``M``
        positions, which is ``a[g] @ b[g]``; the conv kernel runs it as one stacked GEMM.
        """
        try:
            batch = tuple(np.broadcast_shapes(tuple(a.axes.lengths[:-2]), tuple(b.axes.lengths[:-2])))
        except ValueError:
            raise OnnxError(f"matmul: batch dims of {tuple(a.axes.lengths)} and {tuple(b.axes.lengths)} do not "
                            "broadcast") from None
        (m, k), n = a.axes.lengths[-2:], b.axes.lengths[-1]
        a = self.expand(a, self.fresh([*batch, m, k])) if tuple(a.axes.lengths[:-2]) != batch else a
        b = self.expand(b, self.fresh([*batch, k, n])) if tuple(b.axes.lengths[:-2]) != batch else b
        groups = int(np.prod(batch))
        x = self.reshape(self.transpose(self.reshape(a, [groups, m, k]), [0, 2, 1]), [groups * k, m, 1])
        x = api.cast_axes(x, Axes([*self.fresh([groups * k, m]), Axis(BATCH_AXIS_NAME, 1)]))
        w = self.reshape(self.transpose(self.reshape(b, [groups, k, n]), [1, 0, 2]), [k, 1, groups * n])
        y = api.convolution(x, w, groups=groups)  # [G * N, M, 1]
        y = self.transpose(self.reshape(y, [groups, n, m]), [0, 2, 1])
        return self.reshape(y, [*batch, m, n])


def is_static(v: Any) -> bool:
    """True for a value known at import time (a NumPy array)."""
    return isinstance(v, np.ndarray)
