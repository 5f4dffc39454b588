"""``ng.scan``: a loop over a named recurrent axis, written as one step function.

The step is called once, at build time, with placeholders; what it builds becomes the
body sub-graph of one ``scan`` op (``ir/scan.py``), which the executor compiles once and
runs per step. So graph size and compile time do not grow with the sequence length, and
recurrent layers are never unrolled in Python.

Values the step reads that are not its arguments (variables, outer placeholders and the
expressions over them that do not change from step to step) are *lifted*: each maximal
such expression is computed once outside the loop and enters the body as a param, so
gradients flow to the variables through the scan op's inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import AxesError, DTypeError, GraphError
from ..ir import Axis, Graph, Op, OpGroup, OpType, format_axes, make, substitute, toposort
from ..ir.scan import ScanArg, check_lengths
from .math import cast
from .tensors import as_op, placeholder

ScanResult = tuple[list[Op], list[Op]]
KEPT_OPS = (OpType.SIGMOID, OpType.TANH)  # body intermediates a differentiable scan keeps per step


def _kept(body: Graph) -> list[Op]:
    """The body's float ``sigmoid``/``tanh`` ops (not already roots): what its gradient would recompute.

    Their vector-Jacobian products read only their outputs, so keeping those per step spares the
    reverse loop the activations and the (gate) matmul that feeds them.
    """
    roots = set(body.roots)
    return [op for op in toposort(list(body.roots))
            if op.op in KEPT_OPS and op not in roots and op.dtype in ("float16", "float32", "float64")]


def _lift(roots: list[Op], params: list[Op]) -> tuple[list[Op], list[Op], list[Op]]:
    """Replace the loop-invariant, non-constant expressions the roots read by fresh params.

    Returns:
        the new roots, the extra params, and the outer ops they stand for (the scan's extras).
    """
    order = toposort(roots)
    varying = set(params)
    for op in order:
        if op.op in (OpType.ASSIGN, OpType.DOALL):
            raise GraphError(f"scan: the step performs a side effect ({op.op.value} {op.name}); expected a pure "
                             "step; hint: update variables outside ng.scan, from its results")
        if op not in varying and (op.op in OpGroup.RANDOM or any(s in varying for s in op.src)):
            varying.add(op)  # random draws stay in the body: fresh on every step
    free: set[Op] = set()
    for op in order:
        if op not in varying and (op.op in (OpType.VARIABLE, OpType.PLACEHOLDER) or any(s in free for s in op.src)):
            free.add(op)
    lifted = {s for op in order if op in varying for s in op.src if s in free} | {r for r in roots if r in free}
    extras = [op for op in order if op in lifted]
    extra_params = [placeholder(op.axes, op.dtype, name=f"lifted_{op.name}") for op in extras]
    new_roots = substitute(roots, dict(zip(extras, extra_params, strict=True)))
    return new_roots, extra_params, extras


def _check_sequences(sequences: list[Op], axis: Axis) -> None:
    for k, seq in enumerate(sequences):
        found = seq.axes.find(axis.name)
        if found is None:
            raise AxesError(f"scan: sequence {k} ({seq.name}) has axes {format_axes(seq.axes)}; expected the axis "
                            f"{axis}; hint: every sequence has the scanned axis")
        if found.length != axis.length:
            raise AxesError(f"scan: sequence {k} ({seq.name}) has {found}; expected {axis} (length "
                            f"{axis.length}); hint: all sequences share one length along the scanned axis")


def _check_step_result(result: Any, states: list[Op]) -> tuple[list[Op], list[Op]]:
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise GraphError(f"scan: the step returned {type(result).__name__}; expected (step_outputs, new_states), "
                         "two sequences of ops; hint: return ([y_t], [h_t])")
    outputs, new_states = ([as_op(o, where="scan step") for o in part] for part in result)
    if len(new_states) != len(states):
        raise GraphError(f"scan: the step returned {len(new_states)} new state(s); expected {len(states)}, one per "
                         "initial state; hint: return every state, unchanged ones too")
    for j, (new, old) in enumerate(zip(new_states, states)):
        if new.axes != old.axes:
            raise AxesError(f"scan: new state {j} ({new.name}) has axes {format_axes(new.axes)}; expected "
                            f"{format_axes(old.axes)}, the state's axes in order; hint: ng.axes_with_order / "
                            "ng.broadcast it to the state's axes")
        if new.dtype != old.dtype:
            raise DTypeError(f"scan: new state {j} ({new.name}) has dtype {new.dtype}; expected {old.dtype}; "
                             "hint: ng.cast it to the state's dtype")
    return outputs, new_states


def _check_batch(outputs: list[Op], states: list[Op], batch: Axis) -> None:
    """With lengths, every state and step output is per example: it has the lengths' batch axis."""
    for what, op in [(f"state {j}", s) for j, s in enumerate(states)] + \
            [(f"step output {i} ({o.name})", o) for i, o in enumerate(outputs)]:
        if batch not in op.axes:
            raise AxesError(f"scan: with lengths, {what} has axes {format_axes(op.axes)}; expected the batch axis "
                            f"{batch} of the lengths; hint: ng.broadcast it to the batch axis, or scan without lengths")


def build_scan(body: Graph, sequences: Sequence[Op], initial: Sequence[Op], extras: Sequence[Op], axis: Axis,
               n_out: int, reverse: bool = False, lengths: Op | None = None, name: str | None = None,
               save_states: bool = True) -> tuple[list[Op], list[Op], list[Op]]:
    """The scan op over a ready body, and its results: final states, stacked outputs, stacked pre-step states.

    Each result has its declared dtype (a cast of its view of the pack where the pack's differs).
    With ``save_states`` the body also keeps its ``sigmoid``/``tanh`` values per step (``_kept``,
    extra roots after the new states; ``ScanArg.n_keep``), which the gradient reads.
    ``ng.scan`` and the gradient rule build through here; ``save_states=False`` (the gradient's
    reverse scan) packs no pre-step states, and the third list is empty.
    """
    src = [*sequences, *initial, *extras] + ([lengths] if lengths is not None else [])
    kept = _kept(body) if save_states else []
    if kept:
        body = Graph(body.params, (*body.roots, *kept))
    arg = ScanArg(body, len(sequences), len(initial), n_out, axis, reverse, lengths is not None, save_states,
                  len(kept))
    op = make(OpType.SCAN, src, arg, name=name)
    results = []
    for i, (_, dtype) in enumerate(arg.result_types()):
        view = make(OpType.SCAN_RESULT, [op], i)
        results.append(view if view.dtype == dtype else cast(view, dtype))
    n_state = len(initial)
    saved = results[n_state + n_out:n_state + n_out + (n_state if save_states else 0)]
    return results[:n_state], results[n_state:n_state + n_out], saved


def scan(step: Callable[..., Any], sequences: Sequence[Any], initial: Sequence[Any], axis: Axis, *,
         reverse: bool = False, lengths: Any = None, name: str | None = None) -> ScanResult:
    """Iterate ``step`` over the recurrent ``axis``, carrying states: ``final_states, outputs``.

    Args:
        step: ``step(*x_t, *states) -> (step_outputs, new_states)``, called once at build time with
            placeholders: one per sequence (its axes without ``axis``), then one per state (the
            initial state's axes and dtype). It returns two sequences of ops; each new state must
            have exactly its state's axes (in order) and dtype.
        sequences: ops that all have ``axis`` (the same length T).
        initial: the initial states (ops; may have the batch axis ``N``).
        axis: the axis to iterate, normally named ``REC``; its length is the number of steps.
        reverse: iterate T-1 .. 0 (outputs stay aligned with the input positions).
        lengths: optional int op with axes ``[N]``: valid steps per example (0 <= length <= T). Steps
            ``t >= lengths[n]`` leave example n's states unchanged and write zeros to its outputs;
            a reverse scan starts each example at its own last valid step (packed-sequence semantics).
        name: a name for the scan op.

    Returns:
        ``(final_states, outputs)``: the states after each example's last valid step, and one op per
        step output: its axes with ``axis`` inserted just before ``N`` (appended when it has no ``N``).

    Raises:
        GraphError: a step that is not callable, returns the wrong structure or count, or has side effects.
        AxesError: a sequence without ``axis`` or with another length; a new state whose axes differ
            from its state's; lengths whose axes are not ``[N]``, or states/outputs without ``N`` then.
        DTypeError: a new state of another dtype; lengths that are not ints.

    Example:
        >>> REC = ng.make_axis(20, "REC")
        >>> def step(x_t, h):                       # x_t: [F, N], h: [H, N]; W: [H, F], U: [H, Hp]
        ...     h = ng.tanh(ng.dot(W, x_t) + ng.dot(U, ng.cast_axes(h, [Hp, N])))
        ...     return [h], [h]
        >>> (h_last,), (hs,) = ng.scan(step, [x], [h0], REC)   # hs: [H, REC, N]
    """
    if not callable(step):
        raise GraphError(f"scan: expected a callable step, received {type(step).__name__}; "
                         "hint: pass a function step(*x_t, *states) -> (outputs, new_states)")
    if not isinstance(axis, Axis):
        raise AxesError(f"scan: expected an Axis to iterate, received {type(axis).__name__}; "
                        "hint: ng.make_axis(T, 'REC')")
    sequences = [as_op(s, where="scan sequences") for s in sequences]
    initial = [as_op(s, where="scan initial") for s in initial]
    _check_sequences(sequences, axis)
    if lengths is not None:
        lengths = as_op(lengths, where="scan lengths")
        check_lengths(lengths)
    seq_params = [placeholder(s.axes - [s.axes.find(axis.name)], s.dtype, name=f"x_t{k}")
                  for k, s in enumerate(sequences)]
    state_params = [placeholder(s.axes, s.dtype, name=f"state{j}") for j, s in enumerate(initial)]
    outputs, new_states = _check_step_result(step(*seq_params, *state_params), state_params)
    if lengths is not None:
        _check_batch(outputs, state_params, lengths.axes[0])
    roots, extra_params, extras = _lift(outputs + new_states, seq_params + state_params)
    body = Graph(tuple(seq_params + state_params + extra_params), tuple(roots))
    finals, stacked, _ = build_scan(body, sequences, initial, extras, axis, len(outputs), reverse, lengths, name)
    return finals, stacked
