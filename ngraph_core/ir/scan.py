"""The ``scan`` loop in the IR: ``ScanArg`` (its body and shape), the layout of its results, and inference.

A ``scan`` op runs its body sub-graph once per position of a recurrent axis (``REC``).
Its sources are, in order: the sequences (each has the axis), the initial states, the
extras (loop-invariant values the body reads: lifted variables), and optionally the
per-example valid lengths ``[N]``. The body's params are one per sequence (its axes
without the recurrent axis), one per state, one per extra; its roots are the step
outputs, then the new states.

One execution of the loop computes several results, so the op's value *packs* them into
one flat buffer (axis ``scan_pack``, of the promoted dtype of all results; an int result in a
float pack, such as a per-step argmax, is exact below 2**24 in float32), in this order:

1. the final states (one per state; the state after each example's last valid step);
2. the stacked step outputs (the step output's axes with the recurrent axis inserted just
   before ``N``, or appended when there is no ``N``);
3. the stacked *pre-step* states (state before each step, stacked with the recurrent axis
   first, like the kept values below): what the gradient, a reverse scan, needs to re-run
   the body's vector-Jacobian product. A scan
   built with ``save_states=False`` (the gradient's own reverse scan, which nothing
   differentiates again) has none: the loop then neither stores nor copies them;
4. the stacked *kept* values (``n_keep``, only with ``save_states``): body intermediates
   (the gate activations ``sigmoid``/``tanh``) that the body returns after its new states,
   so the gradient reads them instead of recomputing them (and the gate matmul before them).
   They are stacked with the recurrent axis *first* (``rec_first_axes``), as the pre-step
   states are: the gradient reads them a step at a time (its reverse scan) or all at once
   (its hoisted dots), never as a user's sequence, and a step's values are then one
   contiguous block (measured: the reverse step's element-wise programs ran 3x faster than
   on slices strided by T*N, and the LSTM training step 9% faster).

With lengths, the results that have the batch axis of the lengths are masked per example
(past its end a state keeps its value, an output is zero); a result without it is not
per-example and is written at every step (``ng.scan`` refuses such user states and outputs;
the gradient's running sums of extras are such states).

``scan_result`` (arg: the result's index) is a view picking one result out of the pack
without copying (``OpGroup.VIEW``), so liveness and the memory plan see one buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AxesError, DTypeError
from .axes import Axes, Axis, format_axes
from .codec import CodecContext, check_keys, check_type, fail, wrong_arg
from .dtypes import promote
from .graph import Graph, decode_graph
from .node import Op
from .ops import OpType

PACK_AXIS_NAME = "scan_pack"
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def stacked_axes(axes: Axes, axis: Axis) -> Axes:
    """``axes`` with the recurrent ``axis`` inserted just before the batch axis ``N``, or appended.

    Example:
        >>> stacked_axes(Axes([H, N]), REC)   # [H, REC, N]
    """
    items = list(axes)
    at = next((i for i, a in enumerate(items) if a.is_batch), len(items))
    return Axes(items[:at] + [axis] + items[at:])


def rec_first_axes(axes: Axes, axis: Axis) -> Axes:
    """``axes`` with the recurrent ``axis`` first: how pre-step states and kept values are stacked
    (step ``t`` is one contiguous block).

    Example:
        >>> rec_first_axes(Axes([H, N]), REC)   # [REC, H, N]
    """
    return Axes([axis, *axes])


@dataclass(frozen=True, slots=True)
class ScanArg:
    """``arg`` of a ``scan`` op.

    Attributes:
        body: the step sub-graph: params (sequences, states, extras), roots (outputs, new states).
        n_seq: how many sequences (the first params and sources).
        n_state: how many carried states.
        n_out: how many step outputs (the first roots).
        axis: the recurrent axis iterated over (its length is the number of steps T).
        reverse: iterate T-1 .. 0.
        has_lengths: the last source is the valid lengths ``[N]``.
        save_states: pack the stacked pre-step states (needed to differentiate the scan).
        n_keep: how many kept intermediates: the last roots, after the new states, packed stacked.
    """

    body: Graph
    n_seq: int
    n_state: int
    n_out: int
    axis: Axis
    reverse: bool = False
    has_lengths: bool = False
    save_states: bool = True
    n_keep: int = 0

    @property
    def graphs(self) -> tuple[Graph, ...]:
        return (self.body,)

    @property
    def n_extra(self) -> int:
        return len(self.body.params) - self.n_seq - self.n_state

    def __repr__(self) -> str:
        flags = "".join((", reverse" if self.reverse else "", ", lengths" if self.has_lengths else "",
                         "" if self.save_states else ", no saved states",
                         f", {self.n_keep} kept" if self.n_keep else ""))
        return (f"scan over {self.axis}: {self.n_seq} seq, {self.n_state} state, {self.n_out} out, "
                f"{self.n_extra} extra{flags}; {self.body!r}")

    # -- results ------------------------------------------------------------------------------
    def result_types(self) -> list[tuple[Axes, str]]:
        """``(axes, dtype)`` of each packed result: final states, stacked outputs, pre-step states, kept values."""
        states = self.body.params[self.n_seq:self.n_seq + self.n_state]
        outs = self.body.roots[:self.n_out]
        saved = states if self.save_states else ()
        return ([(s.axes, s.dtype) for s in states]
                + [(stacked_axes(o.axes, self.axis), o.dtype) for o in outs]
                + [(rec_first_axes(s.axes, self.axis), s.dtype) for s in saved]
                + [(rec_first_axes(k.axes, self.axis), k.dtype) for k in self.kept()])

    def kept(self) -> tuple[Op, ...]:
        """The body's kept intermediates (its last ``n_keep`` roots)."""
        return self.body.roots[len(self.body.roots) - self.n_keep:] if self.n_keep else ()

    def kept_index(self, k: int) -> int:
        """Index of kept value ``k``'s stacked values among the results."""
        return self.n_state + self.n_out + (self.n_state if self.save_states else 0) + k

    def saved_index(self, j: int) -> int:
        """Index of state ``j``'s stacked pre-step values among the results (only with ``save_states``)."""
        return self.n_state + self.n_out + j

    def layout(self) -> list[tuple[int, int, Axes]]:
        """``(offset, size, axes)`` of each result in the flat pack, in result order."""
        out, offset = [], 0
        for axes, _ in self.result_types():
            out.append((offset, axes.size, axes))
            offset += axes.size
        return out

    # -- as an op's arg (the protocol of ir/args.py) ------------------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a ScanArg, else None (inference checks its fit)."""
        return None if isinstance(op.arg, ScanArg) else wrong_arg(op, "a ScanArg (body, counts, axis, flags)")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """The counts, axis and flags, and the body as ids of earlier records (``ctx.index``)."""
        arg: ScanArg = op.arg
        return {"params": [ctx.index[p] for p in arg.body.params], "roots": [ctx.index[r] for r in arg.body.roots],
                "n_seq": arg.n_seq, "n_state": arg.n_state, "n_out": arg.n_out,
                "axis": [arg.axis.name, arg.axis.length], "reverse": arg.reverse, "has_lengths": arg.has_lengths,
                **({} if arg.save_states else {"save_states": False}),
                **({"n_keep": arg.n_keep} if arg.n_keep else {})}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> ScanArg:
        """The ScanArg ``to_json`` wrote, its body's ops taken from ``ctx.built``.

        Raises:
            SerializationError: bad keys or types, or ids that are not earlier ops of the document.
        """
        keys = ("params", "roots", "n_seq", "n_state", "n_out", "axis", "reverse", "has_lengths")
        if isinstance(data, dict):
            keys += tuple(k for k in ("save_states", "n_keep") if k in data)
        check_keys(data, keys, where)
        body = decode_graph(data, ctx, where)
        axis = check_type(data["axis"], list, where, "the axis as [name, length]")
        if len(axis) != 2:
            raise fail(where, "the axis as [name, length]", axis)
        name = check_type(axis[0], str, where, "an axis name")
        length = check_type(axis[1], int, where, "an axis length")
        counts = [check_type(data[k], int, where, f"{k} as an int") for k in ("n_seq", "n_state", "n_out")]
        flags = [check_type(data.get(k, True), bool, where, f"{k} as true or false")
                 for k in ("reverse", "has_lengths", "save_states")]
        n_keep = check_type(data.get("n_keep", 0), int, where, "n_keep as an int")
        return ScanArg(body, *counts, Axis(name, length), *flags, n_keep)


class ResultIndex:
    """A ``scan_result``'s ``arg``: which packed result of its scan it is (an int); JSON: the int."""

    @staticmethod
    def check(op: Op) -> str | None:
        ok = isinstance(op.arg, int) and not isinstance(op.arg, bool)
        return None if ok else wrong_arg(op, "an int result index")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> int:
        return op.arg

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> int:
        return check_type(data, int, where, "an int result index")


# -- inference -------------------------------------------------------------------------------------


def _fits(what: str, op: Op, axes: Axes, dtype: str, hint: str) -> None:
    if op.axes != axes:
        raise AxesError(f"scan: {what} has axes {format_axes(op.axes)}; expected {format_axes(axes)}; hint: {hint}")
    if op.dtype != dtype:
        raise DTypeError(f"scan: {what} has dtype {op.dtype}; expected {dtype}; hint: {hint}")


def check_lengths(lengths: Op, what: str = "lengths") -> Axis:
    """The batch axis of a valid-lengths op: its axes must be exactly ``[N]``, its dtype an int.

    Raises:
        AxesError / DTypeError: other axes, or a float or bool dtype.
    """
    if len(lengths.axes) != 1 or not lengths.axes[0].is_batch:
        raise AxesError(f"scan: {what} has axes {format_axes(lengths.axes)}; expected exactly the batch axis [N]; "
                        "hint: one valid length per example")
    if lengths.dtype not in INT_DTYPES:
        raise DTypeError(f"scan: {what} has dtype {lengths.dtype}; expected an int dtype {INT_DTYPES}; "
                         "hint: ng.cast(lengths, 'int32')")
    return lengths.axes[0]


def infer_scan(src: Sequence[Op], arg: Any, axes: Any, dtype: Any) -> tuple[Axes, str]:
    """The pack's axes ``[scan_pack: total]`` and dtype, after checking the sources fit the body."""
    if not isinstance(arg, ScanArg):
        raise AxesError(f"scan: expected a ScanArg, received {type(arg).__name__}; hint: build it with ng.scan")
    params, roots = arg.body.params, arg.body.roots
    n_extra = arg.n_extra
    if min(arg.n_seq, arg.n_state, arg.n_out, n_extra, arg.n_keep) < 0 \
            or len(roots) != arg.n_out + arg.n_state + arg.n_keep or (arg.n_keep and not arg.save_states):
        raise AxesError(f"scan: the body has {len(params)} params and {len(roots)} roots; expected "
                        f"{arg.n_seq} + {arg.n_state} + extras params and {arg.n_out} + {arg.n_state} + "
                        f"{arg.n_keep} roots (kept values only with saved states)")
    expected = len(params) + arg.has_lengths
    if len(src) != expected:
        raise AxesError(f"scan: expected {expected} sources (sequences, states, extras, lengths), received {len(src)}")
    for k in range(arg.n_seq):
        seq, p = src[k], params[k]
        found = seq.axes.find(arg.axis.name)
        if found is None or found.length != arg.axis.length:
            raise AxesError(f"scan: sequence {k} has axes {format_axes(seq.axes)}; expected the axis {arg.axis}; "
                            "hint: every sequence has the scanned axis, with one length")
        _fits(f"sequence {k} without {arg.axis.name}", p, seq.axes - [found], seq.dtype,
              "build scans with ng.scan")
    for j in range(arg.n_state):
        p = params[arg.n_seq + j]
        _fits(f"initial state {j}", src[arg.n_seq + j], p.axes, p.dtype, "give the initial state the state's axes")
        _fits(f"new state {j} ({roots[arg.n_out + j].name})", roots[arg.n_out + j], p.axes, p.dtype,
              "the step must return each state with the axes (in order) and dtype it received")
    for e in range(n_extra):
        p = params[arg.n_seq + arg.n_state + e]
        _fits(f"extra input {e}", src[arg.n_seq + arg.n_state + e], p.axes, p.dtype, "build scans with ng.scan")
    if arg.has_lengths:
        check_lengths(src[-1])
    results = arg.result_types()
    total = sum(a.size for a, _ in results)
    return Axes([Axis(PACK_AXIS_NAME, total)]), promote(*(d for _, d in results)) if results else "float32"


def infer_scan_result(src: Sequence[Op], arg: Any, axes: Any, dtype: Any) -> tuple[Axes, str]:
    """One packed result of a scan: its axes, in the pack's dtype (a view)."""
    (scan,) = src
    if scan.op is not OpType.SCAN:
        raise AxesError(f"scan_result: expected a scan op as the source, received {scan.op.value}")
    layout = scan.arg.layout()
    if not isinstance(arg, int) or not 0 <= arg < len(layout):
        raise AxesError(f"scan_result: index {arg!r} out of range for {len(layout)} result(s)")
    return layout[arg][2], scan.dtype
