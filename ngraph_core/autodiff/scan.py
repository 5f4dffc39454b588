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

An extra's per-step gradient that is a sum of ``dot(a_t, p_t)`` terms, ``p_t`` a sequence or a
state param (a weight's gradient: ``dot(dgates_t, h_t)``), is not summed in the loop: ``a_t``
becomes a step output and the sum over steps is ONE dot of the stacked ``a`` and the stacked
``p`` (the forward's sequence or saved states), contracting the recurrent axis with the others.
The forward's ``sigmoid``/``tanh`` values, kept per step (``ScanArg.n_keep``), enter the reverse
scan as sequences too: its body reads them instead of recomputing them and the gate matmul.
That replaces T skinny matmuls and T read-modify-writes of the weight-sized sum by one large
matmul, as PyTorch's LSTM backward does. Likewise a ``dot(w, p_t)`` of an extra and a
sequence or state param that the body recomputes (the forward's gate matmul
``dot(W_h, h_t)``) is computed for all steps at once, one dot of ``w`` and the stacked
``p``, and enters the reverse scan as one more sequence. The reverse scan itself saves no
pre-step states (``save_states=False``): nothing differentiates it again.

Dtypes, when the step mixes float widths (a float32 weight read by float64 arithmetic over a
float64 sequence): the gradient of each input has that input's dtype, as a ``cast``'s gradient
does. Every accumulator follows one rule, its carry dtype fixed across steps:

* a state's gradient is carried in the state's dtype (the forward state has it at every step): a
  step's gradient w.r.t. the state param is cast to it;
* an extra's running sum accumulates in ``promote(extra, step term)``, never narrower than the
  terms it adds (a float16 weight read by float32 arithmetic sums in float32), and the final sum
  is cast to the extra's dtype once; a hoisted extra's single dot runs in its factors' promoted
  dtype and is cast likewise;
* a sequence's stacked gradient is cast to the sequence's dtype.

In a graph of one float dtype every cast is absent, so it builds exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import api
from ..api.scan import build_scan
from ..errors import UnsupportedOpError
from ..ir import Axes, Axis, Graph, Op, OpType, is_float, make, promote, substitute, toposort
from ..ir.scan import PACK_AXIS_NAME, ScanArg
from .walk import Grads, Rule, backprop


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
            flat = api.slice_along_axis(g, g.axes[0], slice(start, start + size))
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
    steps = api.constant(np.arange(axis.length, dtype=lengths.dtype), [axis], dtype=lengths.dtype)
    grid = Axes([axis, lengths.axes[0]])
    return api.cast(api.less(api.broadcast(steps, grid), api.broadcast(lengths, grid)), "float32")


def _masked(g: Op, mask_t: list[Op]) -> Op:
    """``g`` with the masked examples' entries zeroed (``g`` itself without lengths, or without the batch axis)."""
    if not mask_t or not mask_t[0].axes.is_subset_of(g.axes):
        return g
    return api.where(mask_t[0], g, 0.0)


def _like(g: Op, dtype: str) -> Op:
    return g if g.dtype == dtype else api.cast(g, dtype)


def _same(a: Op, b: Op) -> bool:
    """``a`` and ``b`` compute the same value by construction: one op, or one op type, arg, axes and sources."""
    return a is b or (a.op is b.op and a.arg == b.arg and a.axes == b.axes and a.dtype == b.dtype
                      and len(a.src) == len(b.src) and all(x is y for x, y in zip(a.src, b.src)))


def _dot_terms(g: Op, stepwise: set[Op]) -> list[tuple[Op, Op, bool]] | None:
    """``g`` as a sum of ``dot`` terms ``(a, p, p_first)``, each with one factor ``p`` in ``stepwise``; else None."""
    terms, stack = [], [g]
    while stack:
        t = stack.pop()
        if t.op is OpType.ADD:
            stack.extend(t.src)
        elif t.op is OpType.DOT and (t.src[0] in stepwise) != (t.src[1] in stepwise):
            p_first = t.src[0] in stepwise
            terms.append((t.src[1], t.src[0], True) if p_first else (t.src[0], t.src[1], False))
        else:
            return None
    return terms


def _hoist_dots(roots: list[Op], outer: dict[Op, Op], stacked_of: dict[Op, Op]) -> tuple[list[Op], list[Op], list[Op]]:
    """Replace each body ``dot`` of an extra param and a stepwise param by a new sequence param.

    Args:
        roots: the reverse body's roots.
        outer: extra param -> the outer op it stands for (a lifted variable).
        stacked_of: sequence or state param -> its stacked values over the recurrent axis.

    Returns:
        the new roots, the new params, and their outer values (one dot over all steps each): the
        param's axes are the value's without the recurrent axis, as for any sequence.
    """
    found = [op for op in toposort(roots) if op.op is OpType.DOT and is_float(op.dtype) and len(op.src) == 2
             and ((op.src[0] in outer and op.src[1] in stacked_of) or (op.src[1] in outer and op.src[0] in stacked_of))]
    if not found:
        return roots, [], []
    params = [api.placeholder(op.axes, op.dtype, name=f"hoisted_dot{k}") for k, op in enumerate(found)]
    values = [api.dot(*(outer[s] if s in outer else stacked_of[s] for s in op.src)) for op in found]
    return substitute(roots, dict(zip(found, params, strict=True))), params, values


def _pad_concat(g: Op) -> Op | None:
    """A sum of ``pad``s that tile one axis end to end (the gate gradients) as ONE ``concat``; else None."""
    pads, stack = [], [g]
    while stack:
        t = stack.pop()
        if t.op is OpType.ADD:
            stack.extend(t.src)
        elif t.op is OpType.PAD and t.axes == g.axes and len(t.src) == 1:
            pads.append(t)
        else:
            return None
    if len(pads) < 2:
        return None
    moved = {k for t in pads for k, (start, step) in enumerate(t.arg) if start != 0 or step != 1} or {0}
    if len(moved) != 1 or any(len(t.arg) != len(g.axes) or any(step != 1 for _, step in t.arg) for t in pads):
        return None
    (k,) = moved
    if any(any(a.length != b.length for i, (a, b) in enumerate(zip(t.src[0].axes, g.axes)) if i != k)
           for t in pads):
        return None
    pads.sort(key=lambda t: t.arg[k][0])
    at = 0
    for t in pads:
        if t.arg[k][0] != at or any(start != 0 for i, (start, _) in enumerate(t.arg) if i != k):
            return None
        at += t.src[0].axes[k].length
    if at != g.axes[k].length:
        return None
    parts = [api.cast_axes(t.src[0], [a.with_length(b.length) for a, b in zip(g.axes, t.src[0].axes)]) for t in pads]
    joined = api.concat_along_axis(parts, g.axes[k])
    return joined if joined.axes == g.axes else None


def _pads_to_concats(roots: list[Op]) -> list[Op]:
    """Each outermost sum of tiling ``pad``s among ``roots``' ops replaced by one ``concat`` (``_pad_concat``)."""
    order = toposort(roots)
    inner = {s for op in order if op.op is OpType.ADD for s in op.src if s.op is OpType.ADD}
    found = {op: c for op in order if op.op is OpType.ADD and op not in inner
             and (c := _pad_concat(op)) is not None}
    return substitute(roots, found) if found else roots


def scan_grad(ctx: Op, op: Op, rules: Mapping[OpType, Rule]) -> Grads:
    """Gradients of the sequences, initial states and extras: the results of a reverse scan whose body
    is the step's vector-Jacobian product, differentiated by ``rules`` (the table this rule sits in)."""

    arg: ScanArg = op.arg
    if not arg.save_states:
        raise UnsupportedOpError(
            "gradients: a scan built without saved pre-step states (a scan's own gradient loop) cannot be "
            "differentiated again (a second derivative through a scan); hint: differentiate the forward scan once")
    n_seq, n_state, n_out = arg.n_seq, arg.n_state, arg.n_out
    body = arg.body
    p_x, p_h, p_w = body.params[:n_seq], body.params[n_seq:n_seq + n_state], body.params[n_seq + n_state:]
    seqs = op.src[:n_seq]
    extras = op.src[n_seq + n_state:n_seq + n_state + len(p_w)]
    lengths = op.src[-1] if arg.has_lengths else None
    pieces = _pieces(ctx, op)
    g_final, g_out = pieces[:n_state], pieces[n_state:n_state + n_out]
    ys, h_next = body.roots[:n_out], body.roots[n_out:n_out + n_state]

    outs = [i for i in range(n_out) if g_out[i] is not None and is_float(ys[i].dtype)]
    f_seq = [k for k in range(n_seq) if is_float(p_x[k].dtype)]
    f_state = [j for j in range(n_state) if is_float(p_h[j].dtype)]
    f_extra = [e for e in range(len(p_w)) if is_float(p_w[e].dtype)]
    none: Grads = (None,) * len(op.src)
    if not (outs or any(g_final[j] is not None for j in f_state)) or not (f_seq or f_state or f_extra):
        return none

    dy = [api.placeholder(ys[i].axes, ys[i].dtype, name=f"d_y{i}") for i in outs]
    dh = [api.placeholder(p_h[j].axes, p_h[j].dtype, name=f"d_state{j}") for j in f_state]
    mask_t, valid = [], None
    if lengths is not None:  # a masked step of an example contributes nothing: zero its upstream gradients
        valid = _valid_steps(arg.axis, lengths)
        mask_t = [api.placeholder(valid.axes - [arg.axis], valid.dtype, name="valid_t")]
    up_y = [_masked(d, mask_t) for d in dy]
    up_h = [_masked(d, mask_t) for d in dh]
    terms = [api.sum(ys[i] * d) for i, d in zip(outs, up_y)] + [api.sum(h_next[j] * d) for j, d in zip(f_state, up_h)]
    cost = terms[0]
    for term in terms[1:]:
        cost = cost + term
    wrt = [p_x[k] for k in f_seq] + [p_h[j] for j in f_state] + [p_w[e] for e in f_extra]
    grads = backprop(cost, wrt, None, rules)
    g_x, g_h, g_w = grads[:len(f_seq)], grads[len(f_seq):len(f_seq) + len(f_state)], grads[len(f_seq) + len(f_state):]
    g_h = [_like(g, p_h[j].dtype) for g, j in zip(g_h, f_state)]  # carried in the state's dtype (module docstring)

    saved = [make(OpType.SCAN_RESULT, [op], arg.saved_index(j)) for j in range(n_state)]
    saved = [_like(s, p.dtype) for s, p in zip(saved, p_h)]
    # past an example's end its inputs may be garbage (padding): zero them, so the masked
    # step's Jacobian stays finite and its zero upstream gradient contributes exactly zero
    seen = [s if valid is None or lengths.axes[0] not in s.axes else
            api.where(valid, s, api.constant(0, (), dtype=s.dtype)) for s in seqs]

    # an extra's gradient summed by one dot over the stacked steps (module docstring), else in the loop
    stacked_of = {**{p_x[k]: seen[k] for k in f_seq}, **{p_h[j]: saved[j] for j in f_state}}
    step_outs = list(g_x)  # the body's step outputs: the sequence gradients, then the hoisted factors
    hoisted: dict[int, list[tuple[int, Op, bool]]] = {}  # extra -> (step output index, stacked p, p_first)
    summed: list[int] = []  # positions in f_extra summed in the loop
    for pos, g in enumerate(g_w):
        terms = _dot_terms(g, set(stacked_of))
        if terms is None:
            summed.append(pos)
            continue
        hoisted[pos] = []
        for a, p, p_first in terms:
            index = next((i for i, o in enumerate(step_outs) if _same(o, a)), None)
            if index is None:
                index = len(step_outs)
                step_outs.append(a)
            hoisted[pos].append((index, stacked_of[p], p_first))
    # a running sum no narrower than its terms or its extra; cast to the extra's dtype after the loop
    acc = [api.placeholder(p_w[f_extra[pos]].axes, promote(p_w[f_extra[pos]].dtype, g_w[pos].dtype),
                          name=f"sum_d_extra{f_extra[pos]}") for pos in summed]
    roots = [*step_outs, *g_h, *(a + g_w[pos] for a, pos in zip(acc, summed))]
    # the activations the forward kept per step are read, not recomputed (nor the matmul before them)
    kept_params = [api.placeholder(k.axes, k.dtype, name=f"kept{i}") for i, k in enumerate(arg.kept())]
    if kept_params:
        roots = substitute(roots, dict(zip(arg.kept(), kept_params, strict=True)))
    kept_values = [_like(make(OpType.SCAN_RESULT, [op], arg.kept_index(i)), k.dtype)
                   for i, k in enumerate(arg.kept())]
    roots = _pads_to_concats(roots)  # the gate gradients joined by one concat, not 4 pads and a sum
    roots, pre_params, pre_values = _hoist_dots(roots, dict(zip(p_w, extras)), stacked_of)
    bw_body = Graph((*p_x, *p_h, *dy, *mask_t, *pre_params, *kept_params, *dh, *acc, *p_w), tuple(roots))

    bw_seqs = [*seen, *saved, *(_like(g_out[i], ys[i].dtype) for i in outs), *([valid] if mask_t else []),
               *pre_values, *kept_values]
    bw_init = [_like(g_final[j], p_h[j].dtype) if g_final[j] is not None else api.fill_like(p_h[j], 0.0)
               for j in f_state] + [api.fill_like(a, 0.0) for a in acc]
    finals, stacked, _ = build_scan(bw_body, bw_seqs, bw_init, list(extras), arg.axis, len(step_outs),
                                    not arg.reverse, lengths, save_states=False)
    out = list(none)
    for k, g in zip(f_seq, stacked):
        out[k] = api.axes_with_order(_like(g, seqs[k].dtype), seqs[k].axes)
    for j, g in zip(f_state, finals[:len(f_state)]):
        out[n_seq + j] = g
    for pos, g in zip(summed, finals[len(f_state):]):
        out[n_seq + n_state + f_extra[pos]] = _like(g, p_w[f_extra[pos]].dtype)
    for pos, terms in hoisted.items():
        total = None
        for index, p, p_first in terms:
            term = api.dot(p, stacked[index]) if p_first else api.dot(stacked[index], p)
            total = term if total is None else total + term
        e = f_extra[pos]
        out[n_seq + n_state + e] = api.axes_with_order(_like(total, p_w[e].dtype), p_w[e].axes)
    return tuple(out)
