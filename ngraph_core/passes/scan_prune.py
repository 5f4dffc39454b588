"""Scan pruning: a scan packs what its gradient would read only when something reads it.

A differentiable ``ng.scan`` is built to serve its gradient: besides the final states and the
stacked outputs, its pack holds every step's pre-step states and the body's ``sigmoid``/``tanh``
values (``ScanArg.save_states``, ``n_keep``; ``api/scan.py``). A computation that never takes the
gradient (inference, an evaluation, an LSTM in an ONNX model) reads none of them, yet every step
would copy them into the pack, and the kept values, being body roots, could not fuse with the
rest of the cell. When no ``scan_result`` of a scan reads past its outputs, this pass rebuilds
it with ``save_states=False`` and no kept values (the body's roots trimmed to outputs and new
states). Step outputs nobody reads are dropped as well (a layer that returns only its last
state still stacks every step's output for a user who asks; training the issue-10 LSTM step
never does: one strided copy a step saved). The ``scan_result`` views follow, their indices
remapped.

Measured on a neon ``LSTM(8)`` over 200 steps at batch 1, forward only: a sixth less time a step than before (the
per-step copies of 2 saved states and 5 kept values, and 9 body kernels: the gate activations were roots, so
nothing fused; after, two fused programs). Figures: benchmarks/RESULTS.md, "Behind the code:
passes/scan_prune.py".
"""

from __future__ import annotations

import dataclasses

from ..ir import Graph, Op, OpType, ScanArg, make, rebuild, toposort


def _read(order: list[Op]) -> dict[Op, set[int] | None]:
    """For each scan, the indices of the results something reads (None: an op other than
    ``scan_result`` reads the pack itself, so every result counts)."""
    read: dict[Op, set[int] | None] = {}
    for op in order:
        for s in op.src:
            if s.op is OpType.SCAN:
                if op.op is not OpType.SCAN_RESULT:
                    read[s] = None
                elif read.get(s, set()) is not None:
                    read.setdefault(s, set()).add(op.arg)
    return read


def _pruned(arg: ScanArg, read: set[int]) -> tuple[ScanArg, dict[int, int]] | None:
    """``arg`` without the step outputs nobody reads, and without the saved states and kept values
    when nobody reads any of them; with the map old result index -> new. None: nothing to drop."""
    n_state, n_out = arg.n_state, arg.n_out
    outputs = [i for i in range(n_out) if n_state + i in read]
    extra = range(n_state + n_out, len(arg.result_types()))  # saved states, then kept values
    keep_extra = (arg.save_states or arg.n_keep) and any(i in read for i in extra)
    if len(outputs) == n_out and (keep_extra or not (arg.save_states or arg.n_keep)):
        return None
    roots = arg.body.roots
    new_roots = [roots[i] for i in outputs] + list(roots[n_out:n_out + n_state])
    index = {j: j for j in range(n_state)}
    index.update({n_state + i: n_state + k for k, i in enumerate(outputs)})
    if keep_extra:
        new_roots += list(arg.kept())
        index.update({i: i - n_out + len(outputs) for i in extra})
        new = dataclasses.replace(arg, body=Graph(arg.body.params, tuple(new_roots)), n_out=len(outputs))
    else:
        new = dataclasses.replace(arg, body=Graph(arg.body.params, tuple(new_roots)), n_out=len(outputs),
                                  save_states=False, n_keep=0)
    return new, index


def prune_scans(roots: list[Op]) -> list[Op]:
    """``roots`` with every scan rebuilt without the results nobody reads (module docstring)."""
    order = toposort(roots)
    read = _read(order)
    index_of: dict[Op, dict[int, int]] = {}  # a rebuilt scan -> old result index -> new

    def rewrite(op: Op, cur: Op) -> Op:
        if cur.op is OpType.SCAN_RESULT and cur.src[0] in index_of:
            return cur.replace(arg=index_of[cur.src[0]][cur.arg])
        if cur.op is not OpType.SCAN or read.get(op) is None:
            return cur
        pruned = _pruned(cur.arg, read[op])
        if pruned is None:
            return cur
        arg, index = pruned
        new = make(OpType.SCAN, cur.src, arg)
        new = cur.replace(axes=new.axes, arg=arg)
        index_of[new] = index
        return new

    new = rebuild(order, rewrite)
    return [new[r] for r in roots]
