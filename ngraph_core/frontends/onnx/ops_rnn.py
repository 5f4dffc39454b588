"""Converters: the recurrent operators RNN, GRU and LSTM, each direction one ``ng.scan``.

ONNX gives a whole sequence and stacked weights (``W [dirs, gates*H, I]``, ``R [dirs,
gates*H, H]``, ``B [dirs, 2*gates*H]``; gate order RNN ``i``, GRU ``z r h``, LSTM ``i o f c``).
Each direction becomes one compiled loop over the time axis, never a Python unrolling:

* the input projection ``X W^T + Wb + Rb`` of all gates is one ``dot`` over the whole
  sequence, before the loop (the part of a step that does not read the state);
* the loop body (``ng.scan``'s step) does one ``dot`` of ``h`` with ``R`` for all gates, then
  slices the gates and applies the activations; its state is ``h`` (and ``c``), ``[N, H]``;
* ``sequence_lens`` becomes the scan's valid-length mask (the batch axis is named ``N`` for
  it): steps past an example's length keep its state and write zeros to ``Y``, and the
  reverse direction starts at each example's own last step, as onnxruntime computes;
* ``Y`` is ``[seq, dirs, batch, H]`` (``layout=1``: ``[batch, seq, dirs, H]``), ``Y_h``/``Y_c``
  ``[dirs, batch, H]`` (``layout=1``: ``[batch, dirs, H]``).

Attributes: ``direction`` (forward/reverse/bidirectional), ``activations`` (with
``activation_alpha``/``activation_beta``; any of ``ACTIVATIONS``), ``clip`` (applied to the gate
pre-activations), ``hidden_size``, ``layout``, GRU ``linear_before_reset``, LSTM ``input_forget``
and peepholes ``P``.

Example:
    >>> node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=8,
    ...                         direction="bidirectional")
    >>> # imported as two ng.scan ops; Y: [seq, 2, batch, 8]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import api
from ...ir import Axes, Axis, Op
from .errors import OnnxError
from .registry import converter
from .tensor import Value, shape_of

Activation = Callable[[Op], Op]

# name (lower case) -> (builder(x, alpha, beta), how many of alpha/beta it reads, default alpha, default beta)
ACTIVATIONS: dict[str, tuple[Callable[[Op, float, float], Op], int, float, float]] = {
    "relu": (lambda x, a, b: api.relu(x), 0, 0.0, 0.0),
    "tanh": (lambda x, a, b: api.tanh(x), 0, 0.0, 0.0),
    "sigmoid": (lambda x, a, b: api.sigmoid(x), 0, 0.0, 0.0),
    "affine": (lambda x, a, b: a * x + b, 2, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: api.where(api.greater_equal(x, 0.0), x, a * x), 1, 0.01, 0.0),
    "thresholdedrelu": (lambda x, a, b: api.where(api.greater(x, a), x, 0.0 * x), 1, 1.0, 0.0),
    "scaledtanh": (lambda x, a, b: a * api.tanh(b * x), 2, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: api.minimum(api.maximum(a * x + b, 0.0), 1.0), 2, 0.2, 0.5),
    "elu": (lambda x, a, b: api.where(api.greater_equal(x, 0.0), x, a * (api.exp(x) - 1.0)), 1, 1.0, 0.0),
    "softsign": (lambda x, a, b: x / (1.0 + api.absolute(x)), 0, 0.0, 0.0),
    "softplus": (lambda x, a, b: api.softplus(x), 0, 0.0, 0.0),
}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


def parse_activations(node: Any, kind: str, num_dirs: int) -> list[list[Activation]]:
    """The activation functions per direction, from ``activations``/``activation_alpha``/``activation_beta``.

    Alphas and betas are consumed in order by the activations that take them (defaults otherwise);
    a bidirectional node given one direction's list uses it for both.

    Args:
        node: the RNN/GRU/LSTM node (its attributes are read).
        kind: ``"RNN"``, ``"GRU"`` or ``"LSTM"`` (1, 2 or 3 activations per direction).
        num_dirs: 1 or 2.

    Returns:
        one list per direction of functions ``op -> op`` (RNN ``[f]``, GRU ``[f, g]``, LSTM ``[f, g, h]``).

    Raises:
        UnsupportedOnnxOpError: an activation name outside ``ACTIVATIONS``.
        OnnxError: a list of the wrong length.

    Example:
        >>> f, g = parse_activations(gru_node, "GRU", 1)[0]   # Sigmoid, Tanh by default
    """
    per_dir = len(DEFAULT_ACTIVATIONS[kind])
    names = list(node.attr("activations", None) or DEFAULT_ACTIVATIONS[kind] * num_dirs)
    if len(names) == per_dir and num_dirs == 2:
        names = names * 2
    if len(names) != per_dir * num_dirs:
        raise OnnxError(f"{kind} node {node.name!r}: expected {per_dir * num_dirs} activations ({per_dir} per "
                        f"direction), received {names}; hint: e.g. {list(DEFAULT_ACTIVATIONS[kind]) * num_dirs}")
    alphas, betas = list(node.attr("activation_alpha", []) or []), list(node.attr("activation_beta", []) or [])
    built: list[Activation] = []
    for name in names:
        entry = ACTIVATIONS.get(str(name).lower())
        if entry is None:
            raise node.unsupported(f"activation {name!r} (supported: {', '.join(sorted(ACTIVATIONS))})")
        fn, takes, alpha, beta = entry
        if takes >= 1 and alphas:
            alpha = float(alphas.pop(0))
        if takes >= 2 and betas:
            beta = float(betas.pop(0))
        built.append(lambda x, fn=fn, alpha=alpha, beta=beta: fn(x, alpha, beta))
    return [built[d * per_dir:(d + 1) * per_dir] for d in range(num_dirs)]


class Recurrence:
    """One RNN/GRU/LSTM node's operands, checked and cut into per-direction ngraph ops.

    Attributes:
        kind: ``"RNN"``, ``"GRU"`` or ``"LSTM"``; ``gates`` its gate count.
        time, batch, hidden, hidden_in, gate_axis: the axes of the loop (``batch`` is ``N``).
        x: the input ``[time, batch, features]`` (after ``layout``).
        reverse: per direction, whether it runs backwards; ``activations`` per direction.
    """

    def __init__(self, ctx: Any, node: Any, inputs: Sequence[Value | None], kind: str) -> None:
        self.ctx, self.node, self.kind, self.gates = ctx, node, kind, GATES[kind]
        inputs = list(inputs) + [None] * (8 - len(inputs))
        self.layout = int(node.attr("layout", 0))
        if self.layout not in (0, 1):
            raise OnnxError(f"{kind} node {node.name!r}: expected layout 0 or 1, received {self.layout}")
        direction = node.attr("direction", "forward")
        if direction not in DIRECTIONS:
            raise OnnxError(f"{kind} node {node.name!r}: expected direction in {sorted(DIRECTIONS)}, "
                            f"received {direction!r}")
        self.reverse = DIRECTIONS[direction]
        x = ctx.as_op(inputs[0])
        if len(x.axes) != 3:
            raise OnnxError(f"{kind} node {node.name!r}: expected X of rank 3, received shape {shape_of(x)}")
        self.x = ctx.transpose(x, (1, 0, 2)) if self.layout else x
        steps, batch, features = shape_of(self.x)
        self.dtype = self.x.dtype
        self.w, self.r, self.b = inputs[1], inputs[2], inputs[3]
        dirs, gates = len(self.reverse), self.gates
        hidden = int(node.attr("hidden_size", shape_of(self.r)[-1]))
        self.size = hidden
        self._check("W", self.w, (dirs, gates * hidden, features))
        self._check("R", self.r, (dirs, gates * hidden, hidden))
        self._check("B", self.b, (dirs, 2 * gates * hidden))
        self.time, self.batch = ctx.fresh([steps])[0], Axis("N", batch)
        self.hidden, self.hidden_in, self.features = ctx.fresh([hidden, hidden, features])
        self.gate_axis = ctx.fresh([gates * hidden])[0]
        self.lengths = self._lengths(inputs[4], steps, batch)
        self.initial = [self._state(inputs[5], "initial_h"), self._state(inputs[6], "initial_c")]
        self._check("P", inputs[7], (dirs, 3 * hidden))
        self.peepholes = inputs[7]
        self.activations = parse_activations(node, kind, dirs)
        clip = node.attr("clip", None)
        self.clip = None if clip is None else float(clip)

    def _check(self, what: str, value: Value | None, shape: tuple[int, ...]) -> None:
        if value is not None and shape_of(value) != shape:
            raise OnnxError(f"{self.kind} node {self.node.name!r}: expected {what} of shape {shape}, received "
                            f"{shape_of(value)}; hint: check hidden_size and direction against the weights")

    def _lengths(self, value: Value | None, steps: int, batch: int) -> Op | None:
        if value is None:
            return None
        self._check("sequence_lens", value, (batch,))
        if isinstance(value, np.ndarray) and np.all(value == steps):
            return None  # every example runs the whole sequence: no mask needed
        return api.cast_axes(self.ctx.as_op(value), Axes([self.batch]))

    def _state(self, value: Value | None, what: str) -> Op | None:
        if value is None:
            return None
        shape = (len(self.reverse), self.batch.length, self.size)
        value = self.ctx.as_op(value, self.dtype)
        value = self.ctx.transpose(value, (1, 0, 2)) if self.layout else value
        self._check(what, value, shape)
        return value

    def part(self, value: Value, index: Sequence[Any], axes: Sequence[Axis]) -> Op:
        """``value[index]`` with ``axes`` (sliced at import time when ``value`` is static)."""
        if isinstance(value, np.ndarray):
            return api.constant(np.asarray(value[tuple(index)], order="C"), axes=Axes(axes), dtype=self.dtype)
        sliced = api.tensor_slice(value, list(index))
        return api.cast_axes(sliced if sliced.dtype == self.dtype else api.cast(sliced, self.dtype), Axes(axes))

    def projection(self, d: int, without: slice | None = None) -> Op:
        """``X W^T + Wb + Rb`` of direction ``d`` for all gates: ``[time, batch, gates*H]``.

        ``without``: a range of ``Rb`` left out (GRU's ``linear_before_reset`` adds it inside the step).
        """
        x = api.cast_axes(self.x, Axes([self.time, self.batch, self.features]))
        out = api.dot(x, self.part(self.w, [d], [self.gate_axis, self.features]))
        if self.b is not None:
            size = self.gate_axis.length
            w_bias = self.part(self.b, [d, slice(0, size)], [self.gate_axis])
            r_bias = self.part(self.b, [d, slice(size, 2 * size)], [self.gate_axis])
            if without is not None:
                keep = np.ones(size, dtype=self.dtype)
                keep[without] = 0
                r_bias = r_bias * api.constant(keep, axes=Axes([self.gate_axis]), dtype=self.dtype)
            out = out + (w_bias + r_bias)
        return api.axes_with_order(out, Axes([self.time, self.batch, self.gate_axis]))

    def recurrent_weights(self, d: int, gates: slice | None = None) -> Op:
        """``R`` of direction ``d`` (rows ``gates``, default all) with axes ``[gate rows, hidden_in]``."""
        rows = gates or slice(None)
        n = len(range(*rows.indices(self.gate_axis.length)))
        axis = self.gate_axis if n == self.gate_axis.length else self.ctx.fresh([n])[0]
        return self.part(self.r, [d, rows, slice(None)], [axis, self.hidden_in])

    def r_bias(self, d: int, gate: int) -> Op | None:
        """``Rb`` of one gate of direction ``d`` as ``[hidden]`` (None without ``B``)."""
        if self.b is None:
            return None
        start = (self.gates + gate) * self.size
        return self.part(self.b, [d, slice(start, start + self.size)], [self.hidden])

    def peephole(self, d: int, gate: int) -> Op | None:
        """``P`` of one peephole (0: input, 1: output, 2: forget) of direction ``d`` as ``[hidden]``."""
        if self.peepholes is None:
            return None
        return self.part(self.peepholes, [d, slice(gate * self.size, (gate + 1) * self.size)], [self.hidden])

    def start(self, d: int, which: int) -> Op:
        """The initial state ``which`` (0: h, 1: c) of direction ``d``, ``[batch, hidden]`` (zeros if not given)."""
        state = self.initial[which]
        if state is None:
            return api.constant(0, axes=Axes([self.batch, self.hidden]), dtype=self.dtype)
        return self.part(state, [d], [self.batch, self.hidden])

    # -- inside the step -----------------------------------------------------------------------------------
    def rows(self, pre: Op, first: int, count: int) -> Op:
        """Gates ``first .. first+count-1`` of a ``[batch, gates*H]`` (or narrower) op, as ``[batch, count*H]``."""
        rows = next(a for a in pre.axes if a != self.batch)
        pre = api.axes_with_order(pre, Axes([self.batch, rows]))
        return api.tensor_slice(pre, [slice(None), slice(first * self.size, (first + count) * self.size)])

    def gate(self, pre: Op, g: int) -> Op:
        """Gate ``g``'s slice ``[batch, hidden]`` of a ``[batch, gates*H]`` (or narrower) op."""
        return api.cast_axes(self.rows(pre, g, 1), Axes([self.batch, self.hidden]))

    def recur(self, h: Op, weights: Op) -> Op:
        """``h R^T``: ``[batch, hidden]`` times ``[rows, hidden_in]`` -> ``[batch, rows]``."""
        return api.dot(api.cast_axes(h, Axes([self.batch, self.hidden_in])), weights)

    def clipped(self, x: Op) -> Op:
        """``x`` clipped to ``[-clip, clip]`` when the node has ``clip``."""
        return x if self.clip is None else api.minimum(api.maximum(x, -self.clip), self.clip)

    def state(self, x: Op) -> Op:
        """``x`` in the state's axis order ``[batch, hidden]``."""
        return api.axes_with_order(x, Axes([self.batch, self.hidden]))

    # -- the loop ------------------------------------------------------------------------------------------
    def run(self, step: Callable[..., Any], d: int, sequences: Sequence[Op], states: Sequence[Op]) -> tuple:
        """One direction's ``ng.scan``: (final states, ``Y`` of that direction ``[time, batch, hidden]``)."""
        name = f"{self.node.name}_{'reverse' if self.reverse[d] else 'forward'}"
        finals, (ys,) = api.scan(step, list(sequences), list(states), self.time, reverse=self.reverse[d],
                                lengths=self.lengths, name=name)
        return finals, ys

    def outputs(self, ys: Sequence[Op], finals: Sequence[Sequence[Op]]) -> list[Op]:
        """ONNX's ``Y``, ``Y_h`` (and ``Y_c``) from each direction's outputs and final states."""
        ctx = self.ctx
        dirs = ctx.fresh([len(self.reverse)])[0]
        y = api.stack(list(ys), dirs, pos=1)  # [time, dirs, batch, hidden]
        y = api.axes_with_order(y, Axes([self.time, dirs, self.batch, self.hidden]))
        results = [ctx.transpose(y, (2, 0, 1, 3)) if self.layout else y]
        for which in range(len(finals[0])):
            state = api.stack([f[which] for f in finals], dirs, pos=0)
            state = api.axes_with_order(state, Axes([dirs, self.batch, self.hidden]))
            results.append(ctx.transpose(state, (1, 0, 2)) if self.layout else state)
        return [ctx.rename(r) for r in results]


def _rnn_step(rec: Recurrence, d: int) -> Callable[..., Any]:
    f = rec.activations[d][0]
    weights = rec.recurrent_weights(d)

    def step(x_t: Op, h: Op) -> tuple[list[Op], list[Op]]:
        h_new = rec.state(f(rec.clipped(rec.gate(x_t + rec.recur(h, weights), 0))))
        return [h_new], [h_new]
    return step


def _gru_step(rec: Recurrence, d: int, linear_before_reset: bool) -> Callable[..., Any]:
    f, g = rec.activations[d]
    zr_weights = rec.recurrent_weights(d, slice(0, 2 * rec.size))
    h_weights = rec.recurrent_weights(d, slice(2 * rec.size, 3 * rec.size))
    rh_bias = rec.r_bias(d, 2) if linear_before_reset else None

    def step(x_t: Op, h: Op) -> tuple[list[Op], list[Op]]:
        zr_in = rec.rows(x_t, 0, 2)
        zr = f(rec.clipped(zr_in + api.cast_axes(rec.recur(h, zr_weights), zr_in.axes)))  # z and r: one activation
        z, r = rec.gate(zr, 0), rec.gate(zr, 1)
        if linear_before_reset:  # h~ = g(x Wh + r * (h Rh + Rbh) + Wbh)
            recurrent = rec.gate(rec.recur(h, h_weights), 0)
            recurrent = recurrent if rh_bias is None else recurrent + rh_bias
            candidate = g(rec.clipped(rec.gate(x_t, 2) + r * recurrent))
        else:  # h~ = g(x Wh + (r * h) Rh + Rbh + Wbh)
            candidate = g(rec.clipped(rec.gate(x_t, 2) + rec.gate(rec.recur(rec.state(r * h), h_weights), 0)))
        h_new = rec.state((1.0 - z) * candidate + z * h)
        return [h_new], [h_new]
    return step


def _lstm_step(rec: Recurrence, d: int, input_forget: bool) -> Callable[..., Any]:
    f, g, act_h = rec.activations[d]
    weights = rec.recurrent_weights(d)
    p_in, p_out, p_forget = (rec.peephole(d, k) for k in range(3))

    def plain_step(x_t: Op, h: Op, c: Op) -> tuple[list[Op], list[Op]]:
        pre = x_t + rec.recur(h, weights)  # gates i, o, f, c
        iof = f(rec.clipped(rec.rows(pre, 0, 3)))  # one activation for the three contiguous gates
        c_new = rec.state(rec.gate(iof, 2) * c + rec.gate(iof, 0) * g(rec.clipped(rec.gate(pre, 3))))
        h_new = rec.state(rec.gate(iof, 1) * act_h(c_new))
        return [h_new], [h_new, c_new]

    def step(x_t: Op, h: Op, c: Op) -> tuple[list[Op], list[Op]]:
        pre = x_t + rec.recur(h, weights)  # gates i, o, f, c
        i_pre = rec.gate(pre, 0) if p_in is None else rec.gate(pre, 0) + c * p_in
        i = f(rec.clipped(i_pre))
        if input_forget:  # coupled gates: f = 1 - i
            forget = 1.0 - i
        else:
            f_pre = rec.gate(pre, 2) if p_forget is None else rec.gate(pre, 2) + c * p_forget
            forget = f(rec.clipped(f_pre))
        c_new = rec.state(forget * c + i * g(rec.clipped(rec.gate(pre, 3))))
        o_pre = rec.gate(pre, 1) if p_out is None else rec.gate(pre, 1) + c_new * p_out
        h_new = rec.state(f(rec.clipped(o_pre)) * act_h(c_new))
        return [h_new], [h_new, c_new]
    return plain_step if p_in is None and p_out is None and p_forget is None and not input_forget else step


def _convert(ctx: Any, node: Any, inputs: Sequence[Value | None], kind: str) -> list[Op]:
    rec = Recurrence(ctx, node, inputs, kind)
    ys, finals = [], []
    for d in range(len(rec.reverse)):
        if kind == "RNN":
            step, projection, states = _rnn_step(rec, d), rec.projection(d), [rec.start(d, 0)]
        elif kind == "GRU":
            lbr = bool(node.attr("linear_before_reset", 0))
            h_rows = slice(2 * rec.size, 3 * rec.size)
            step, projection = _gru_step(rec, d, lbr), rec.projection(d, without=h_rows if lbr else None)
            states = [rec.start(d, 0)]
        else:
            step, projection = _lstm_step(rec, d, bool(node.attr("input_forget", 0))), rec.projection(d)
            states = [rec.start(d, 0), rec.start(d, 1)]
        final, y = rec.run(step, d, [projection], states)
        ys.append(y)
        finals.append(final)
    return rec.outputs(ys, finals)


@converter("RNN", since=1)
def rnn(ctx, node, inputs):
    """ONNX RNN: ``H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)``; outputs ``Y``, ``Y_h``."""
    return _convert(ctx, node, inputs, "RNN")


@converter("GRU", since=1)
def gru(ctx, node, inputs):
    """ONNX GRU (gates z, r, h; ``linear_before_reset`` 0 or 1); outputs ``Y``, ``Y_h``."""
    return _convert(ctx, node, inputs, "GRU")


@converter("LSTM", since=1)
def lstm(ctx, node, inputs):
    """ONNX LSTM (gates i, o, f, c; peepholes ``P``; ``input_forget``); outputs ``Y``, ``Y_h``, ``Y_c``."""
    return _convert(ctx, node, inputs, "LSTM")
