"""Gradients of ``scan``: a reverse scan whose body is the vector-Jacobian product of the forward body.

``scan_result`` is a view of one result in its scan's pack, so its gradient places the
upstream gradient at that result's span of the pack (a ``pad``); the reverse walk sums
them into the scan op's gradient. ``scan_grad`` takes those pieces back apart (reading
the pads directly, so no padded pack is ever computed) and builds the backward scan:

* it iterates the other way, over the forward sequences, the forward *pre-step* states
  (the pack's saved states) and the upstream gradients of the step outputs;
* it carries the gradient of each float state (starting from the final state's upstream
  gradient) and one running sum per float extra (lifted variables), starting at zero;
* its step outputs are the gradients of the float sequences at that step;
* it takes the same lengths: a masked step passes the state gradient through unchanged,
  adds nothing to the sums and gives a zero sequence gradient, as the forward step left
  the state unchanged and wrote zeros.

The backward body is ``gradients(sum(y_t * dy_t) + sum(h_next * dh), [x_t, h, w])`` over the
forward body's own params; it is one more ``Graph``, compiled once like any body.
"""

from __future__ import annotations

import numpy as np

from .. import api as ng
from ..api.scan import build_scan
from ..errors import UnsupportedOpError
from ..ir import Axes, Axis, Graph, Op, OpType, is_float, make
from ..ir.scan import PACK_AXIS_NAME, ScanArg

Grads = tuple[Op | None, ...]


def scan_result_grad(ctx: Op, op: Op) -> Grads:
    """The upstream gradient placed at this result's span of the pack, zeros elsewhere."""
    scan = op.src[0]
    arg: ScanArg = scan.arg
    if op.arg >= arg.saved_index(0):
        raise UnsupportedOpError(
            "gradients: the saved pre-step states of a scan are internal to its gradient and have no gradient "
            "of their own (a second derivative through a scan's states); hint: differentiate the scan's "
            "outputs and final states")
    start, size, _ = arg.layout()[op.arg]
    flat = make(OpType.RESHAPE, [ctx], axes=Axes([Axis(PACK_AXIS_NAME, size)]))
    return (make(OpType.PAD, [flat], arg=((start, 1),), axes=scan.axes),)


def _pieces(ctx: Op, scan: Op) -> list[Op | None]:
    """The upstream gradient of each packed result: read off the sum of pads ``scan_result_grad`` made,
    or sliced out of ``ctx`` when it has another form."""
    layout = scan.arg.layout()
    by_start = {start: i for i, (start, size, _) in enumerate(layout) if size}
    parts: list[list[Op]] = [[] for _ in layout]
    stack, opaque = [ctx], []
    while stack:
        g = stack.pop()
        if g.op is OpType.ADD:
            stack.extend(g.src)
        elif g.op is OpType.PAD and len(g.arg) == 1 and isinstance(g.arg[0], tuple) and g.arg[0][1] == 1 \
                and by_start.get(g.arg[0][0]) is not None \
                and layout[by_start[g.arg[0][0]]][1] == g.src[0].axes.size:
            i = by_start[g.arg[0][0]]
            flat = g.src[0]
            axes = layout[i][2]
            piece = flat.src[0] if flat.op is OpType.RESHAPE and flat.src[0].axes == axes else \
                make(OpType.RESHAPE, [flat], axes=axes)
            parts[i].append(piece)
        else:
            opaque.append(g)
    for g in opaque:  # any other form: slice each span out of it
        for i, (start, size, axes) in enumerate(layout):
            flat = ng.slice_along_axis(g, g.axes[0], slice(start, start + size))
            parts[i].append(make(OpType.RESHAPE, [flat], axes=axes))
    out: list[Op | None] = []
    for items in parts:
        total = items[0] if items else None
        for item in items[1:]:
            total = total + item
        out.append(total)
    return out


def _valid_steps(axis: Axis, lengths: Op) -> Op:
    """``[axis, N]``: 1 where step t of example n is within its length, else 0 (float)."""
    steps = ng.constant(np.arange(axis.length, dtype=lengths.dtype), [axis], dtype=lengths.dtype)
    grid = Axes([axis, lengths.axes[0]])
    return ng.cast(ng.less(ng.broadcast(steps, grid), ng.broadcast(lengths, grid)), "float32")


def _masked(g: Op, mask_t: list[Op]) -> Op:
    """``g`` with the masked examples' entries zeroed (``g`` itself without lengths, or without the batch axis)."""
    if not mask_t or not mask_t[0].axes.is_subset_of(g.axes):
        return g
    return ng.where(mask_t[0], g, 0.0)


def _like(g: Op, dtype: str) -> Op:
    return g if g.dtype == dtype else ng.cast(g, dtype)


def scan_grad(ctx: Op, op: Op) -> Grads:
    """Gradients of the sequences, initial states and extras: the results of a reverse scan."""
    from .gradient import gradients  # the reverse walk uses the rule table: imported at use

    arg: ScanArg = op.arg
    n_seq, n_state, n_out = arg.n_seq, arg.n_state, arg.n_out
    body = arg.body
    p_x, p_h, p_w = body.params[:n_seq], body.params[n_seq:n_seq + n_state], body.params[n_seq + n_state:]
    seqs = op.src[:n_seq]
    extras = op.src[n_seq + n_state:n_seq + n_state + len(p_w)]
    lengths = op.src[-1] if arg.has_lengths else None
    pieces = _pieces(ctx, op)
    g_final, g_out = pieces[:n_state], pieces[n_state:n_state + n_out]
    ys, h_next = body.roots[:n_out], body.roots[n_out:]

    outs = [i for i in range(n_out) if g_out[i] is not None and is_float(ys[i].dtype)]
    f_seq = [k for k in range(n_seq) if is_float(p_x[k].dtype)]
    f_state = [j for j in range(n_state) if is_float(p_h[j].dtype)]
    f_extra = [e for e in range(len(p_w)) if is_float(p_w[e].dtype)]
    none: Grads = (None,) * len(op.src)
    if not (outs or any(g_final[j] is not None for j in f_state)) or not (f_seq or f_state or f_extra):
        return none

    dy = [ng.placeholder(ys[i].axes, ys[i].dtype, name=f"d_y{i}") for i in outs]
    dh = [ng.placeholder(p_h[j].axes, p_h[j].dtype, name=f"d_state{j}") for j in f_state]
    acc = [ng.placeholder(p_w[e].axes, p_w[e].dtype, name=f"sum_d_extra{e}") for e in f_extra]
    mask_t, valid = [], None
    if lengths is not None:  # a masked step of an example contributes nothing: zero its upstream gradients
        valid = _valid_steps(arg.axis, lengths)
        mask_t = [ng.placeholder(valid.axes - [arg.axis], valid.dtype, name="valid_t")]
    up_y = [_masked(d, mask_t) for d in dy]
    up_h = [_masked(d, mask_t) for d in dh]
    terms = [ng.sum(ys[i] * d) for i, d in zip(outs, up_y)] + [ng.sum(h_next[j] * d) for j, d in zip(f_state, up_h)]
    cost = terms[0]
    for term in terms[1:]:
        cost = cost + term
    wrt = [p_x[k] for k in f_seq] + [p_h[j] for j in f_state] + [p_w[e] for e in f_extra]
    grads = gradients(cost, wrt)
    g_x, g_h, g_w = grads[:len(f_seq)], grads[len(f_seq):len(f_seq) + len(f_state)], grads[len(f_seq) + len(f_state):]
    roots = [*g_x, *g_h, *(a + g for a, g in zip(acc, g_w))]
    bw_body = Graph((*p_x, *p_h, *dy, *mask_t, *dh, *acc, *p_w), tuple(roots))

    saved = [make(OpType.SCAN_RESULT, [op], arg.saved_index(j)) for j in range(n_state)]
    saved = [_like(s, p.dtype) for s, p in zip(saved, p_h)]
    # past an example's end its inputs may be garbage (padding): zero them, so the masked
    # step's Jacobian stays finite and its zero upstream gradient contributes exactly zero
    seen = [s if valid is None or lengths.axes[0] not in s.axes else
            ng.where(valid, s, ng.constant(0, (), dtype=s.dtype)) for s in seqs]
    bw_seqs = [*seen, *saved, *(_like(g_out[i], ys[i].dtype) for i in outs), *([valid] if mask_t else [])]
    bw_init = [_like(g_final[j], p_h[j].dtype) if g_final[j] is not None else ng.fill_like(p_h[j], 0.0)
               for j in f_state] + [ng.fill_like(p_w[e], 0.0) for e in f_extra]
    finals, stacked, _ = build_scan(bw_body, bw_seqs, bw_init, list(extras), arg.axis, len(f_seq),
                                    not arg.reverse, lengths)
    out = list(none)
    for k, g in zip(f_seq, stacked):
        out[k] = ng.axes_with_order(g, seqs[k].axes)
    for j, g in zip(f_state, finals[:len(f_state)]):
        out[n_seq + j] = g
    for e, g in zip(f_extra, finals[len(f_state):]):
        out[n_seq + n_state + e] = g
    return tuple(out)
