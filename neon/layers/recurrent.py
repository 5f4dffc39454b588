"""Recurrent layers over ``ng.scan``: ``Recurrent(cell)``, ``LSTM``, ``GRU``, ``BiRNN``, ``BiLSTM``,
``DeepBiRNN``, ``DeepBiLSTM``, and the reductions over time ``RecurrentSum/Mean/Last``.

Layout (neon's): a sequence is ``[F, REC, N]`` — features, time (the axis named ``REC``),
batch last. ``return_sequence=True`` gives ``[H, REC, N]``, else the final hidden state
``[H, N]``; ``H`` is named after the layer (as ``Affine`` names its output axis).

**Valid lengths.** A padded batch comes with an int ``[N]`` op of each example's length.
Give it at the call, ``layer(x, lengths=lengths)``, or around a whole model built from
containers, ``with sequence_lengths(lengths): y = model_layers(x)`` (every recurrent layer
built inside uses it unless given its own). Steps past an example's length keep its state
and output zeros; the final state is the one after its last valid step; a ``reverse`` layer
starts each example at its own last valid step (PyTorch's packed sequences).

``Recurrent(...)(x, initial_state=..., return_state=True)`` takes a starting state (a seq2seq
decoder starts from its encoder's) and returns ``(output, final_state)``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

import ngraph_core as ng

from .base import Layer, LayerError, name_children
from .cells import GRUCell, LSTMCell, RNNCell, SimpleRNNCell, State
from .checks import describe, feature_axes, fmt_axes, layer_error, output_axis, positive_int, same_axes
from .composite import CompositeLayer
from .serialization import deserialize_layer, serialize_layer

_lengths: contextvars.ContextVar[ng.Op | None] = contextvars.ContextVar("neon_sequence_lengths", default=None)
INIT_STATES = (None, "zeros", "learned")
MERGES = ("concat", "sum")
MAX_DEPTH = 100


@contextmanager
def sequence_lengths(lengths: ng.Op | None) -> Iterator[None]:
    """Recurrent layers built inside use ``lengths`` (int ``[N]``) unless given their own.

    Example:
        >>> with sequence_lengths(lengths):
        ...     y = Sequential([LSTM(64, return_sequence=True), RecurrentMean()])(x)
    """
    token = _lengths.set(lengths)
    try:
        yield
    finally:
        _lengths.reset(token)


@dataclass(frozen=True)
class CallOptions:
    lengths: ng.Op | None = None
    initial_state: Any = None
    return_state: bool = False


_options: contextvars.ContextVar[CallOptions | None] = contextvars.ContextVar("neon_sequence_call", default=None)


def time_axis(layer: Layer, x: ng.Op) -> ng.Axis:
    """The recurrent axis ``REC`` of ``x``, or ``LayerError``."""
    axis = x.axes.recurrent_axis
    if axis is None:
        raise layer_error(layer, "a sequence input with a recurrent axis named 'REC', e.g. [F, REC, N]",
                          fmt_axes(x.axes), "name the time axis 'REC'; for flat samples, Unflatten((F, T), "
                          "names=('F', 'REC')) first")
    return axis


def check_lengths(layer: Layer, x: ng.Op, lengths: Any) -> ng.Op | None:
    """``lengths`` (or ``sequence_lengths``' value) checked against ``x``: an int op ``[N]``."""
    lengths = _lengths.get() if lengths is None else lengths
    if lengths is None:
        return None
    batch = x.axes.batch_axis
    if not isinstance(lengths, ng.Op) or batch is None or lengths.axes != ng.make_axes([batch]):
        got = fmt_axes(lengths.axes) if isinstance(lengths, ng.Op) else type(lengths).__name__
        raise layer_error(layer, f"lengths as an op with axes [{batch}] (the input's batch axis)", got,
                          "e.g. ng.placeholder([N], dtype='int32') holding each example's valid length")
    return lengths if lengths.dtype.startswith(("int", "uint")) else ng.cast(lengths, "int32")


class SequenceLayer(CompositeLayer):
    """A layer over sequences whose call takes keywords: ``layer(x, lengths=..., ...)``."""

    takes_state = False  # Recurrent: the call also takes initial_state= and return_state=

    def __call__(self, x: ng.Op, *, lengths: ng.Op | None = None, initial_state: Any = None,  # type: ignore[override]
                 return_state: bool = False) -> Any:
        if not self.takes_state and (initial_state is not None or return_state):
            raise layer_error(self, "the call keyword lengths= only", "initial_state/return_state",
                              "initial and final states belong to Recurrent, LSTM and GRU layers")
        token = _options.set(CallOptions(lengths, initial_state, return_state))
        try:
            return super().__call__(x)
        finally:
            _options.reset(token)

    def call_options(self) -> CallOptions:
        """This call's keywords (read once in ``call``; layers built inside see the defaults)."""
        options = _options.get() or CallOptions()
        _options.set(None)
        return options


class Recurrent(SequenceLayer):
    """Runs an ``RNNCell`` over the recurrent axis: ``[F, REC, N] -> [H, N]`` (or ``[H, REC, N]``).

    Args:
        cell: the cell (``SimpleRNNCell``, ``LSTMCell``, ``GRUCell`` or your own ``RNNCell``).
        return_sequence: output every step's ``h`` (``[H, REC, N]``) instead of the final one.
        reverse: run from the last step to the first (outputs stay aligned with the input).
        init_state: ``None``/``"zeros"`` (zeros) or ``"learned"`` (trainable, shared by the batch).
        name: the layer's name (the hidden axis is named after it).

    Call keywords: ``lengths`` (int ``[N]``), ``initial_state`` (an op, or a tuple of one op per
    state tensor, each ``[H, N]``; a feature axis of another name but the same length is renamed),
    ``return_state`` (return ``(output, final_state)``).

    Raises:
        LayerError: a cell that is not an ``RNNCell``, a bad option; at call, no ``REC`` axis,
            bad lengths or a bad initial state.

    Example:
        >>> h = Recurrent(GRUCell(64), return_sequence=True)(x)  # [F, REC, N] -> [Recurrent_0:64, REC, N]
        >>> out, (h, c) = LSTM(32)(x, lengths=lengths, return_state=True)
    """

    takes_state = True

    def __init__(self, cell: RNNCell, return_sequence: bool = False, reverse: bool = False,
                 init_state: str | None = None, name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(cell, RNNCell):
            raise layer_error(self, "an RNNCell", type(cell).__name__, "e.g. Recurrent(LSTMCell(64))")
        for key, value in (("return_sequence", return_sequence), ("reverse", reverse)):
            if not isinstance(value, bool):
                raise layer_error(self, f"{key} to be a bool", repr(value), f"pass {key}=True or False")
        if init_state not in INIT_STATES:
            raise layer_error(self, f"init_state among {INIT_STATES}", repr(init_state),
                              "pass initial_state= at the call for a state computed elsewhere")
        self.cell, self.return_sequence, self.reverse, self.init_state = cell, return_sequence, reverse, init_state
        self.strict_axis_name = self.explicit_name
        name_children([cell])

    @property
    def sublayers(self) -> list[Layer]:
        return [self.cell]

    @property
    def nout(self) -> int:
        return self.cell.nout

    def build(self, x: ng.Op) -> None:
        rec = time_axis(self, x)
        if not self.cell.built:
            self.cell.hidden_axis = output_axis(self, x, self.cell.nout, self.name, self.strict_axis_name)
        self.out_axis = self.cell.hidden_axis
        self.cell.build_once(ng.slice_along_axis(x, rec, 0))
        if self.init_state == "learned":
            self.h0 = tuple(self.add_variable(f"init_{i}", axes, 0.0, labels=("initial_state",))
                            for i, axes in enumerate(self.cell.state_axes()))

    def initial(self, x: ng.Op, given: Any) -> State:
        """The starting state: ``given`` conformed to the state's axes, or the layer's default."""
        batch = ng.make_axes([a for a in x.axes if a.is_batch])
        wanted = [axes + batch for axes in self.cell.state_axes()]
        if given is None:
            if self.init_state == "learned":
                return tuple(ng.broadcast(v, axes) for v, axes in zip(self.h0, wanted))
            return self.cell.initial_state(batch, x.dtype)
        given = (given,) if isinstance(given, ng.Op) else tuple(given)
        if len(given) != len(wanted) or not all(isinstance(g, ng.Op) for g in given):
            raise layer_error(self, f"initial_state as {len(wanted)} op(s) with axes {[str(w) for w in wanted]}",
                              repr(given)[:120], "pass the final state of a layer with the same cell type")
        return tuple(self._conform(g, axes) for g, axes in zip(given, wanted))

    def _conform(self, op: ng.Op, axes: ng.Axes) -> ng.Op:
        """``op`` with ``axes``' order; a feature axis of another name but the same length is renamed."""
        mine, theirs = [a for a in axes if not a.is_batch], [a for a in op.axes if not a.is_batch]
        if [a.length for a in mine] == [a.length for a in theirs] and len(op.axes) == len(axes) and all(
                a in axes for a in op.axes if a.is_batch):
            renamed = ng.cast_axes(op, [a if a.is_batch else mine[theirs.index(a)] for a in op.axes])
            return ng.axes_with_order(renamed, axes)
        raise layer_error(self, f"an initial state with axes {fmt_axes(axes)}", fmt_axes(op.axes),
                          "the state's feature length must equal the cell's nout, and its batch axis the input's")

    def call(self, x: ng.Op) -> Any:
        options = self.call_options()
        lengths = check_lengths(self, x, options.lengths)
        rec = time_axis(self, x)
        same_axes(self, feature_axes(x), self.cell.in_axes, "feature axes")
        start = self.initial(x, options.initial_state)
        with self.cell.scope():
            seq = self.cell.project(x)

        def step(x_t: ng.Op, *state: ng.Op) -> tuple[list[ng.Op], list[ng.Op]]:
            h, new = self.cell(x_t, state)
            return [h], list(new)

        final, outputs = ng.scan(step, [seq], list(start), rec, reverse=self.reverse, lengths=lengths,
                                 name=self.name)
        final = tuple(final)
        out = outputs[0] if self.return_sequence else self.cell.hidden(final)
        return (out, final) if options.return_state else out

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "cell": serialize_layer(self.cell), "return_sequence": self.return_sequence,
                "reverse": self.reverse, "init_state": self.init_state}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None,
                    memo: dict | None = None) -> Layer:
        config = dict(config)
        if "cell" in config:
            config["cell"] = deserialize_layer(config["cell"], custom_objects)
        return cls(**config)


def make_cell(owner: str, cls: type[RNNCell], nout: Any, options: dict[str, Any]) -> RNNCell:
    """``cls(nout, **options)``, a wrong keyword reported as ``LayerError`` naming ``owner``."""
    try:
        return cls(nout, **options)
    except TypeError as exc:
        raise LayerError(f"{owner}: expected keywords of {cls.__name__}, received {sorted(options)}; "
                         f"hint: {exc}") from None


class CellLayer(Recurrent):
    """``Recurrent`` over a cell of ``cell_class`` made from this layer's arguments (``LSTM``, ``GRU``)."""

    cell_class: type[RNNCell] = SimpleRNNCell

    def __init__(self, nout: int, return_sequence: bool = False, reverse: bool = False,
                 init_state: str | None = None, name: str | None = None, **cell_options: Any) -> None:
        cell = make_cell(f"{name or type(self).__name__} ({type(self).__name__})", self.cell_class, nout, cell_options)
        super().__init__(cell, return_sequence, reverse, init_state, name)

    def get_config(self) -> dict[str, Any]:
        cell = {k: v for k, v in self.cell.get_config().items() if k != "name"}
        return {"name": self.name, **cell, "return_sequence": self.return_sequence, "reverse": self.reverse,
                "init_state": self.init_state}


class LSTM(CellLayer):
    """``Recurrent(LSTMCell(nout, ...))``: keywords of both (``init``, ``inner_init``, ``bias``,
    ``gate_activation``, ``activation``, ``forget_bias``, ``return_sequence``, ``reverse``, ``init_state``).

    Example:
        >>> h = LSTM(128, forget_bias=1.0, return_sequence=True)(x)  # [F, REC, N] -> [LSTM_0:128, REC, N]
    """

    cell_class = LSTMCell


class GRU(CellLayer):
    """``Recurrent(GRUCell(nout, ...))`` (see ``LSTM`` for the keywords).

    Example:
        >>> h = GRU(64)(x)  # [F, REC, N] -> [GRU_0:64, N]
    """

    cell_class = GRUCell


def clone_cell(cell: RNNCell) -> RNNCell:
    """A new, unbuilt cell with ``cell``'s configuration (its own weights)."""
    return type(cell).from_config({**cell.get_config(), "name": None})  # type: ignore[return-value]


def cell_template_layer(cls: type[Layer], config: dict[str, Any], custom_objects: dict | None) -> Layer:
    """``cls(cell, **rest)`` from a config whose ``"cell"`` is a serialized cell (``BiRNN``, ``DeepBiRNN``)."""
    config = dict(config)
    cell = deserialize_layer(config.pop("cell"), custom_objects) if "cell" in config else config.pop("nout", None)
    return cls(cell, **config)


class BiRNN(SequenceLayer):
    """A forward and a reverse ``Recurrent`` over the same input, merged: ``[F, REC, N] -> [B:2H, REC, N]``.

    The two directions (sub-layers ``fwd`` and ``bwd``, each with its own cell) are
    concatenated forward first (``merge="concat"``, like ``torch.nn.LSTM(bidirectional=True)``)
    or summed (``"sum"``). Without ``return_sequence`` the output merges the final states:
    the forward one after the last valid step, the reverse one after step 0.

    Args:
        nout: hidden size per direction, or a cell to copy for both directions.
        merge: ``"concat"`` or ``"sum"``.
        return_sequence: output every step (default True) or the final states.
        name: the layer's name (the output axis is named after it).
        **cell_options: the cell's keywords (``init``, ``activation``...), with an int ``nout``.

    Raises:
        LayerError: a bad merge, nout or cell option.

    Example:
        >>> y = BiRNN(64)(x, lengths=lengths)  # [F, REC, N] -> [BiRNN_0:128, REC, N]
        >>> y = BiRNN(GRUCell(64), merge="sum")(x)  # [BiRNN_1:64, REC, N]
    """

    cell_class: type[RNNCell] = SimpleRNNCell

    def __init__(self, nout: int | RNNCell, merge: str = "concat", return_sequence: bool = True,
                 name: str | None = None, **cell_options: Any) -> None:
        super().__init__(name)
        if merge not in MERGES:
            raise layer_error(self, f"merge among {MERGES}", repr(merge), "concat doubles the feature length")
        if isinstance(nout, RNNCell):
            if cell_options:
                raise layer_error(self, "no cell keywords with a cell", sorted(cell_options), "configure the cell")
            cell = nout
        else:
            cell = make_cell(describe(self), self.cell_class, positive_int(self, "nout", nout), cell_options)
        self.template, self.merge, self.return_sequence = cell, merge, return_sequence
        self.fwd = Recurrent(cell, return_sequence, reverse=False, name="fwd")
        self.bwd = Recurrent(clone_cell(cell), return_sequence, reverse=True, name="bwd")
        self.fwd.strict_axis_name = self.bwd.strict_axis_name = False

    @property
    def sublayers(self) -> list[Layer]:
        return [self.fwd, self.bwd]

    def build(self, x: ng.Op) -> None:
        length = self.template.nout * (2 if self.merge == "concat" else 1)
        self.out_axis = output_axis(self, x, length, self.name, self.explicit_name)

    def call(self, x: ng.Op) -> ng.Op:
        lengths = check_lengths(self, x, self.call_options().lengths)
        part = self.out_axis.with_length(self.template.nout)
        outs = [layer(x, lengths=lengths) for layer in (self.fwd, self.bwd)]
        outs = [ng.cast_axes(o, [part if a == layer.out_axis else a for a in o.axes])
                for o, layer in zip(outs, (self.fwd, self.bwd))]
        return ng.concat_along_axis(outs, part) if self.merge == "concat" else outs[0] + outs[1]

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "cell": serialize_layer(self.template), "merge": self.merge,
                "return_sequence": self.return_sequence}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None,
                    memo: dict | None = None) -> Layer:
        return cell_template_layer(cls, config, custom_objects)


class BiLSTM(BiRNN):
    """``BiRNN`` of ``LSTMCell`` s (``BiLSTM(64)(x)`` is ``torch.nn.LSTM(F, 64, bidirectional=True)``)."""

    cell_class = LSTMCell


class DeepBiRNN(SequenceLayer):
    """``depth`` stacked ``BiRNN`` layers (``BiRNN_0`` ... inside); all but the last return sequences.

    Args:
        nout: hidden size per direction, or a cell to copy for every direction of every layer.
        depth: number of bidirectional layers (> 0).
        merge / return_sequence: as ``BiRNN`` (``return_sequence`` applies to the last layer).
        name: the layer's name; **cell_options: the cell's keywords.

    Example:
        >>> y = DeepBiLSTM(256, depth=3)(x, lengths=lengths)  # speech models (DeepSpeech 2)
    """

    bi_class: type[BiRNN] = BiRNN

    def __init__(self, nout: int | RNNCell, depth: int = 2, merge: str = "concat", return_sequence: bool = True,
                 name: str | None = None, **cell_options: Any) -> None:
        super().__init__(name)
        self.depth = positive_int(self, "depth", depth)
        if self.depth > MAX_DEPTH:
            raise layer_error(self, f"depth at most {MAX_DEPTH}", depth, "stack fewer bidirectional layers")
        first = self.bi_class(nout, merge, return_sequence=depth > 1 or return_sequence, **cell_options)
        self.template, self.merge, self.return_sequence = first.template, merge, return_sequence
        self.layers = [first] + [self.bi_class(clone_cell(self.template), merge, return_sequence=(
            k < depth - 1 or return_sequence)) for k in range(1, depth)]
        name_children(self.layers)

    @property
    def sublayers(self) -> list[Layer]:
        return list(self.layers)

    def call(self, x: ng.Op) -> ng.Op:
        lengths = check_lengths(self, x, self.call_options().lengths)
        for layer in self.layers:
            x = layer(x, lengths=lengths)
        return x

    @property
    def out_axis(self) -> ng.Axis:
        return self.layers[-1].out_axis

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "cell": serialize_layer(self.template), "depth": self.depth,
                "merge": self.merge, "return_sequence": self.return_sequence}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None,
                    memo: dict | None = None) -> Layer:
        return cell_template_layer(cls, config, custom_objects)


class DeepBiLSTM(DeepBiRNN):
    """``DeepBiRNN`` of ``BiLSTM`` layers.

    Example:
        >>> y = DeepBiLSTM(128, depth=2, return_sequence=False)(x)  # [DeepBiLSTM_0... : 256, N]
    """

    bi_class = BiLSTM


class RecurrentReduce(SequenceLayer):
    """Base of the reductions over ``REC`` honouring lengths: ``[H, REC, N] -> [H, N]``."""

    def call(self, x: ng.Op) -> ng.Op:
        lengths = check_lengths(self, x, self.call_options().lengths)
        rec = time_axis(self, x)
        if lengths is None:
            return self.reduce(x, rec, None, None)
        steps = ng.broadcast(ng.constant(np.arange(rec.length), [rec], dtype=lengths.dtype),
                             [rec, *lengths.axes])
        return self.reduce(x, rec, steps, lengths)

    def reduce(self, x: ng.Op, rec: ng.Axis, steps: ng.Op | None, lengths: ng.Op | None) -> ng.Op:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}


class RecurrentSum(RecurrentReduce):
    """The sum over the valid steps: ``[H, REC, N] -> [H, N]``.

    Example:
        >>> s = RecurrentSum()(h, lengths=lengths)
    """

    def reduce(self, x: ng.Op, rec: ng.Axis, steps: ng.Op | None, lengths: ng.Op | None) -> ng.Op:
        if steps is None:
            return ng.sum(x, reduction_axes=[rec])
        return ng.sum(x * ng.cast(ng.less(steps, lengths), x.dtype), reduction_axes=[rec])


class RecurrentMean(RecurrentReduce):
    """The mean over each example's valid steps (an empty example gives zeros).

    Example:
        >>> m = RecurrentMean()(h, lengths=lengths)
    """

    def reduce(self, x: ng.Op, rec: ng.Axis, steps: ng.Op | None, lengths: ng.Op | None) -> ng.Op:
        if steps is None:
            return ng.mean(x, reduction_axes=[rec])
        total = RecurrentSum.reduce(self, x, rec, steps, lengths)
        return total / ng.maximum(ng.cast(lengths, x.dtype), 1.0)


class RecurrentLast(RecurrentReduce):
    """Each example's last valid step (step ``lengths - 1``; the last step without lengths).

    Example:
        >>> last = RecurrentLast()(h, lengths=lengths)
    """

    def reduce(self, x: ng.Op, rec: ng.Axis, steps: ng.Op | None, lengths: ng.Op | None) -> ng.Op:
        if steps is None:
            return ng.slice_along_axis(x, rec, rec.length - 1)
        return ng.sum(x * ng.cast(ng.equal(steps + 1, lengths), x.dtype), reduction_axes=[rec])


__all__ = [
    "Recurrent", "LSTM", "GRU", "BiRNN", "BiLSTM", "DeepBiRNN", "DeepBiLSTM", "RecurrentSum", "RecurrentMean",
    "RecurrentLast", "sequence_lengths",
]
