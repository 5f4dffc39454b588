"""``fused_attention``: scaled dot-product attention by tiles of key steps, the softmax computed online.

The composite that ``ng.scaled_dot_product_attention`` builds holds its scores ``[*kept, REC, REC_K]``
(heads x queries x keys x batch values); this kernel never does. For each kept position (a head of an
example) and each block of ``QUERY_BLOCK`` queries it walks the visible keys in tiles of ``KEY_BLOCK``:

    s   = (q * scale) @ k_tile^T                        one GEMM, a [queries, keys] tile
    m'  = max(m, rowmax(s));  a = exp(m - m')           the running maximum and the rescale it implies
    p   = exp(s - m');  l = l * a + rowsum(p)           the running denominator
    acc = acc * a + p @ v_tile                          one GEMM into the running output

and writes ``acc / l`` (zeros where a query saw no key). The tiles and the running values are the only
scratch besides contiguous copies of q, k and v (``KernelContext.workspace``, so ``memory_report`` counts
them): ``O(T * D)`` instead of ``O(T * T)``. Keys past a query's last visible step (``causal``,
``key_lengths``) are skipped a tile at a time and masked inside the last tile; a query block stops at its
furthest visible key, so causal attention does about half the work.

The blocks are split over the runner's workers (``kc.runner.run``), each GEMM in its worker's thread
(``kc.runner.product``). The softmax step (``softmax_step``) is written against ``xp``; the NumPy
transformer passes a compiled one (``transformers/numpy/fused_attention.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...ir import Axes, Op, OpType
from ...ir.attention import attention_roles
from .context import Kernel, KernelContext

QUERY_BLOCK = 256
"""Queries per block (the rows of a score tile)."""

KEY_BLOCK = 512
"""Keys per tile (the columns of a score tile). 256 x 512 float32 is 512 KiB, an L2's worth. The size hardly
matters: on the 2-core EPYC of docs/attention.md (T=2048, 4 heads, D=64, two workers, the machine busy), tiles of
128 x 256 to 256 x 1024 all took 106-115 ms."""

Step = Callable[..., None]
"""``step(s, m, l, acc, hi, rows, width, start)``: one online-softmax update of rows ``:rows`` and columns
``:width`` of the score tile ``s`` (keys ``start:start + width``), in place (see ``softmax_step``)."""


def softmax_step(xp: Any) -> Step:
    """The online-softmax update written against ``xp``.

    For each row ``i < rows`` the first ``min(max(hi[i] - start, 0), width)`` columns of ``s`` are visible:
    ``m[i]`` becomes the running maximum over them, ``s`` their ``exp(s - m)`` (0 where not visible),
    ``l[i]`` the running sum of those, and ``acc[i]`` is multiplied by ``exp(old m - new m)``. A row with
    nothing visible keeps its running values (its columns become 0).

    Example:
        >>> step = softmax_step(numpy)
        >>> step(s, m, l, acc, hi, 256, 512, 1024)  # the tile of keys 1024..1535 of a block of 256 queries
    """

    def step(s: Any, m: Any, l: Any, acc: Any, hi: Any, rows: int, width: int, start: int) -> None:  # noqa: E741
        tile, mv, lv, av = s[:rows, :width], m[:rows], l[:rows], acc[:rows]
        visible = xp.arange(width)[None, :] < (hi[:rows] - start)[:, None]
        masked = xp.where(visible, tile, -xp.inf)
        top = xp.maximum(mv, masked.max(axis=1))
        safe = xp.where(xp.isfinite(top), top, 0)  # a row with nothing visible yet: no shift
        scale = xp.exp(mv - safe)
        xp.exp(masked - safe[:, None], out=tile)
        lv *= scale
        lv += tile.sum(axis=1)
        av *= scale[:, None]
        mv[...] = top

    return step


class Layout:
    """How the op's arrays become the kernel's ``(B, T, D)`` stacks: B the kept positions in q's order."""

    def __init__(self, op: Op) -> None:
        q, k, v = op.src[:3]
        kept, (query, key), v_feature = attention_roles(q.axes, k.axes, v.axes, op.arg.feature)
        feature = q.axes.find(op.arg.feature)
        self.kept = kept
        self.batch, self.queries, self.keys = kept.size, query.length, key.length
        self.depth, self.v_depth = feature.length, v_feature[0].length
        self.q_perm = tuple(q.axes.index(a) for a in kept + Axes([query, feature]))
        self.k_perm = tuple(k.axes.index(a) for a in kept + Axes([feature, key]))  # k transposed: [D, keys]
        self.v_perm = tuple(v.axes.index(a) for a in kept + Axes([key]) + v_feature)
        standard = kept + Axes([query]) + v_feature
        self.direct = op.axes == standard  # the output is the (B, T, Dv) stack itself
        self.to_out = tuple(standard.index(a) for a in op.axes)
        self.kept_shape = kept.lengths
        self.length_axis = kept.index(op.src[3].axes[0]) if len(op.src) == 4 else None

    def example_of(self, xp: Any) -> Any:
        """For each kept position (row-major over the kept axes), its index along the ``key_lengths`` axis."""
        return xp.indices(self.kept_shape, dtype=xp.int64)[self.length_axis].reshape(-1)


def attention(op: Op, kc: KernelContext, step: Step | None = None,
              ready: Callable[[list[Any]], Step] | None = None) -> Kernel:
    """The ``fused_attention`` kernel (``ir/attention.py``): ``kernel(out, q, k, v[, key_lengths])``.

    Args:
        op: the ``fused_attention`` op.
        kc: the kernel context (its workspace holds the tiles, its runner splits the blocks).
        step: the online-softmax update (default: ``softmax_step(kc.xp)``).
        ready: called once per run, in the calling thread, with one worker's scratch ``[s, m, l, acc, hi]``:
            returns the step to use this run (how a compiled step switches in when it is compiled).

    Returns:
        the kernel.
    """
    xp, dtype = kc.xp, kc.dtype_of(op)
    layout = Layout(op)
    B, Tq, Tk, D, Dv = layout.batch, layout.queries, layout.keys, layout.depth, layout.v_depth
    rows, cols = min(QUERY_BLOCK, Tq), min(KEY_BLOCK, Tk)
    workers = max(1, min(kc.runner.threads(), B * math.ceil(Tq / rows)))
    tile_specs = [((rows, cols), dtype), ((rows,), dtype), ((rows,), dtype), ((rows, Dv), dtype),
                  ((rows,), "int64"), ((rows, Dv), dtype)]
    specs = [((B, Tq, D), dtype), ((B, D, Tk), dtype), ((B, Tk, Dv), dtype)]
    if not layout.direct:
        specs.append(((B, Tq, Dv), dtype))
    views = kc.scratch().request(specs + tile_specs * workers)
    product, run = kc.runner.product(), kc.runner.run
    default = step or softmax_step(xp)
    scale, causal = op.arg.scale, op.arg.causal
    steps = xp.arange(1, Tq + 1, dtype=xp.int64)  # a causal query i sees keys < i + 1
    example_of = layout.example_of(xp) if layout.length_axis is not None else None
    kept_shape = layout.kept_shape

    def part(scratch: list[Any], blocks: list[tuple[int, int]], qs: Any, kt: Any, vs: Any, o: Any,
             visible: list[int], update: Step) -> None:
        s, m, l, acc, hi, pv = scratch  # noqa: E741
        for b, q0 in blocks:
            q1 = min(q0 + rows, Tq)
            n, last = q1 - q0, visible[b]
            if causal:
                xp.minimum(steps[q0:q1], last, out=hi[:n])
                last = min(last, q1)
            else:
                hi[:n] = last
            m[:n] = -xp.inf
            l[:n] = 0
            acc[:n] = 0
            for j0 in range(0, last, cols):
                width = min(cols, last - j0)
                product(qs[b, q0:q1], kt[b, :, j0:j0 + width], s[:n, :width])
                update(s, m, l, acc, hi, n, width, j0)
                product(s[:n, :width], vs[b, j0:j0 + width], pv[:n])
                acc[:n] += pv[:n]
            seen = l[:n] > 0
            xp.divide(acc[:n], xp.where(seen, l[:n], 1)[:, None], out=o[b, q0:q1])
            o[b, q0:q1] *= seen[:, None]

    def attention_kernel(out: Any, q: Any, k: Any, v: Any, *lengths: Any) -> Any:
        arrays = views()
        qs, kt, vs = arrays[:3]
        o = out.reshape(B, Tq, Dv) if layout.direct else arrays[3]
        scratch = arrays[len(specs):]
        xp.multiply(q.transpose(layout.q_perm), scale, out=qs.reshape(*kept_shape, Tq, D))
        xp.copyto(kt.reshape(*kept_shape, D, Tk), k.transpose(layout.k_perm))
        xp.copyto(vs.reshape(*kept_shape, Tk, Dv), v.transpose(layout.v_perm))
        if lengths:
            visible = [int(x) for x in xp.clip(lengths[0].astype(xp.int64)[example_of], 0, Tk).tolist()]
        else:
            visible = [Tk] * B
        update = default if ready is None else ready(scratch[:5])
        blocks = [(b, q0) for b in range(B) for q0 in range(0, Tq, rows)]
        tasks = [lambda w=w: part(scratch[6 * w:6 * w + 6], blocks[w::workers], qs, kt, vs, o, visible, update)
                 for w in range(workers)]
        run(tasks)
        if not layout.direct:
            xp.copyto(out, o.reshape(*kept_shape, Tq, Dv).transpose(layout.to_out))
        return out

    return attention_kernel


KERNELS = {OpType.FUSED_ATTENTION: attention}
