"""The ``scan`` loop and its ``scan_result`` views (``ir/scan.py`` says what they compute).

The body is compiled once, when the kernel is made (``kc.subgraph``), and the loop is a
Python ``for`` over the steps that calls it: the plan, and its compile time, do not grow
with the sequence length, and one compiled computation runs any lengths of its batches.
Per step the kernel only slices views and calls the body, which writes its results into the
preallocated pack: kept values (and outputs with contiguous slots) straight into their step's
slot, each new state into the next step's pre-step slot (or one of two ping-pong buffers),
the final step's into the final states; what the body's plan cannot write in place is copied
(``scan`` says when). With valid lengths every result is a copy masked by ``t < lengths``:
finished examples' states stay unchanged, and their outputs and kept values stay zero.
"""

from __future__ import annotations

from typing import Any

from ...ir import Op, OpType
from ...ir.scan import ScanArg
from .context import Kernel, KernelContext, per_object


def _batch_shape(axes: Any) -> tuple[int, ...] | None:
    """A shape of ones but for the batch axis: how a ``[N]`` mask broadcasts against ``axes`` (None: no N,
    the value is not per-example and is written at every step)."""
    return tuple(a.length if a.is_batch else 1 for a in axes) if axes.batch_axis is not None else None


def _slot_is_contiguous(axes: Any, name: str) -> bool:
    """True when one step of a result stacked with ``axes`` is one C-contiguous block: every axis
    before the recurrent one (called ``name``) has length 1."""
    return all(a.length == 1 for a in axes[:axes.index(name)])


def scan(op: Op, kc: KernelContext) -> Kernel:
    """Run the body once per step over the recurrent axis, writing every result into the pack ``out``."""
    arg: ScanArg = op.arg
    xp = kc.xp
    n_seq, n_state, n_out, n_extra, n_keep = arg.n_seq, arg.n_state, arg.n_out, arg.n_extra, arg.n_keep
    n_saved = n_state if arg.save_states else 0
    steps = arg.axis.length
    order = range(steps - 1, -1, -1) if arg.reverse else range(steps)
    layout = arg.layout()
    spans = [(offset, offset + size, axes.lengths) for offset, size, axes in layout]
    # prefixes of slices that put the step index on the recurrent axis of each array
    seq_at = [(slice(None),) * s.axes.index(arg.axis.name) for s in op.src[:n_seq]]
    stacked_at = [(slice(None),) * axes.index(arg.axis.name) for _, _, axes in layout[n_state:]]
    out_at, saved_at = stacked_at[:n_out], stacked_at[n_out:n_out + n_saved]
    out_at = out_at + stacked_at[n_out + n_saved:]  # the kept values are written like outputs
    state_params = arg.body.params[n_seq:n_seq + n_state]
    # a state whose dtype differs from the pack's (an int counter in a float pack) runs in its own buffer
    own_dtype = [None if kc.dtype_of(p) == kc.dtype_of(op) else kc.dtype_of(p) for p in state_params]
    stacked_roots = (*arg.body.roots[:n_out], *arg.kept())
    out_masks = [_batch_shape(r.axes) for r in stacked_roots]
    state_masks = [_batch_shape(p.axes) for p in state_params]
    # Without lengths every step writes every slot whole, so the body computes the step outputs and
    # kept values whose slot is one contiguous block (REC first: the kept values) straight into it
    # where its plan can (``Transformer._subgraph``'s ``into``): no fresh array, no copy. Strided
    # slots (an output stacked ``[H, REC, N]``) are copied: written directly or staged in a scratch
    # array and moved once after the loop, they measured no faster (the LSTM step, 5 pairs).
    # The states are chained the same way: the body reads step t's state where the previous step
    # wrote it, its pre-step slot in the pack (or one of two ping-pong buffers when no states are
    # saved), and writes the next one straight into the following slot (the final states at the
    # last step): no per-step copies of states. With lengths every result is a masked copy.
    name = arg.axis.name
    stacked_axes = [axes for _, _, axes in layout[n_state:n_state + n_out]] + \
        [axes for _, _, axes in layout[n_state + n_out + n_saved:]]
    root_of = [*range(n_out), *range(n_out + n_state, n_out + n_state + n_keep)]  # stacked value -> body root
    direct = not arg.has_lengths
    chain = direct and all(dt is None for dt in own_dtype)
    stacked_into = tuple((root_of[i], True) for i, (root, axes) in enumerate(zip(stacked_roots, stacked_axes))
                         if direct and kc.dtype_of(root) == kc.dtype_of(op) and _slot_is_contiguous(axes, name))
    state_into = tuple((n_out + j, True) for j in range(n_state)) if chain else ()
    run = kc.subgraph(arg.body, state_into + stacked_into) if state_into + stacked_into else kc.subgraph(arg.body)
    accepted = getattr(run, "accepted_into", ())
    if chain and not all(n_out + j in accepted for j in range(n_state)):  # a new state the plan cannot write
        chain = False
        run = kc.subgraph(arg.body, stacked_into) if stacked_into else kc.subgraph(arg.body)
        accepted = getattr(run, "accepted_into", ())
    # what each buffer run takes is, in its order: ("state", j) or ("stacked", i)
    takes = [("state", r - n_out) if n_out <= r < n_out + n_state else ("stacked", root_of.index(r)) for r in accepted]
    copied = [i for i in range(len(stacked_roots)) if root_of[i] not in accepted]
    pingpong = kc.scratch().request([(p.axes.lengths, kc.dtype_of(op)) for p in state_params]) \
        if chain and not n_saved else None
    copyto = xp.copyto

    def chained_kernel(out: Any, *src: Any) -> Any:
        """No lengths, every new state written in place by the body: no state copies."""
        views = [out[start:stop].reshape(shape) for start, stop, shape in spans]
        finals, saved = views[:n_state], views[n_state + n_out:n_state + n_out + n_saved]
        stacked = views[n_state:n_state + n_out] + views[n_state + n_out + n_saved:]  # outputs, kept values
        seqs, extras = src[:n_seq], src[n_seq + n_state:n_seq + n_state + n_extra]
        if n_saved:  # step t reads its state from its pre-step slot
            slots = [[keep[at + (t, ...)] for t in order] for keep, at in zip(saved, saved_at)]
        else:  # two buffers, alternately read and written, ending on the final state's
            scratch = pingpong()
            slots = [[(f, b)[(steps - k) % 2] for k in range(steps)] for f, b in zip(finals, scratch)]
        for j, f in enumerate(finals):
            slots[j].append(f)  # the last step writes the final state
        for j, initial in enumerate(src[n_seq:n_seq + n_state]):
            copyto(slots[j][0], initial, casting="unsafe")
        copy_slots = [(stacked[i], out_at[i], root_of[i]) for i in copied]
        for k, t in enumerate(order):
            xs = [x[at + (t, ...)] for x, at in zip(seqs, seq_at)]
            buffers = [slots[i][k + 1] if kind == "state" else stacked[i][out_at[i] + (t, ...)] for kind, i in takes]
            res = run(*xs, *[slots[j][k] for j in range(n_state)], *extras, *buffers)
            for y, at, j in copy_slots:
                copyto(y[at + (t, ...)], res[j], casting="unsafe")
        return out

    if chain:
        return chained_kernel

    def scan_kernel(out: Any, *src: Any) -> Any:
        views = [out[start:stop].reshape(shape) for start, stop, shape in spans]
        finals, saved = views[:n_state], views[n_state + n_out:n_state + n_out + n_saved]
        stacked = views[n_state:n_state + n_out] + views[n_state + n_out + n_saved:]  # outputs, kept values
        seqs, extras = src[:n_seq], src[n_seq + n_state:n_seq + n_state + n_extra]
        states = [f if dt is None else xp.empty(f.shape, dtype=dt) for f, dt in zip(finals, own_dtype)]
        for state, initial in zip(states, src[n_seq:n_seq + n_state]):
            copyto(state, initial, casting="unsafe")
        copy_slots = [(stacked[i], out_at[i], root_of[i]) for i in copied]
        valid = None
        if arg.has_lengths:
            valid = xp.arange(steps).reshape(steps, 1) < src[-1].reshape(1, -1)  # (T, N): step t of example n runs
            for y in stacked:
                y.fill(0)
        for t in order:
            xs = [x[at + (t, ...)] for x, at in zip(seqs, seq_at)]
            for keep, state, at in zip(saved, states, saved_at):
                copyto(keep[at + (t, ...)], state, casting="unsafe")
            res = run(*xs, *states, *extras, *[stacked[i][out_at[i] + (t, ...)] for _, i in takes])
            new_states = res[n_out:n_out + n_state]
            if valid is None:
                for y, at, j in copy_slots:
                    copyto(y[at + (t, ...)], res[j], casting="unsafe")
                for state, r in zip(states, new_states):
                    copyto(state, r, casting="unsafe")
            else:
                mask = valid[t]
                for (y, at, j), shape in zip(copy_slots, out_masks):  # with lengths every stacked value is copied
                    where = True if shape is None else mask.reshape(shape)
                    copyto(y[at + (t, ...)], res[j], casting="unsafe", where=where)
                for state, r, shape in zip(states, new_states, state_masks):
                    copyto(state, r, casting="unsafe", where=True if shape is None else mask.reshape(shape))
        for final, state in zip(finals, states):
            if final is not state:
                copyto(final, state, casting="unsafe")
        return out

    return scan_kernel


def scan_result(op: Op, kc: KernelContext) -> Kernel:
    """A view of one result inside its scan's pack (no copy).

    The pack is an arena buffer, the same array object every call, so the view is made once and
    returned again while the pack is the same object: a consumer that caches on its input's identity
    (``broadcast``, ~3 us a call) then caches too.
    """
    start, size, axes = op.src[0].arg.layout()[op.arg]
    stop, shape = start + size, axes.lengths
    return per_object(lambda pack: pack[start:stop].reshape(shape))


KERNELS = {OpType.SCAN: scan, OpType.SCAN_RESULT: scan_result}
