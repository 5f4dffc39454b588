"""The ONNX exporter's working state: names, initializers, graphs being written, and each op's value.

Named axes become positions: an op's ONNX tensor has its axes' lengths in its axes' order.
One difference is kept on purpose: a ``Value`` may be *partial*, holding length 1 where the
op's axes say more (``full[i]`` is False). A ``broadcast`` exports as Transpose + Unsqueeze
only, and element-wise ops let ONNX broadcast positionally; the Expand to the real shape is
emitted only when an op needs every element (a reduction, a dot, a graph output), so an
exported graph carries no materialized bias or scalar broadcasts.

With ``dynamic`` batch, the axis ``N`` is the symbolic dim ``"N"``: shapes that hold it
(Expand, Reshape) are built at run time from the length of ``N`` in an input
(``batch_length``). An op that bakes the batch length into the graph (a constant with ``N``,
a reshape that merges ``N`` with another axis, a partial slice of ``N``) raises
``BakedBatch``, and ``export`` starts again with a static batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...errors import NgraphError
from ...ir import Axes, Op, OpType, toposort
from ...ir.node import format_op

MIN_OPSET = 13
"""Oldest opset we write: Squeeze/Unsqueeze/ReduceSum/Pad/Split take their axes as inputs from 13 on."""


class ExportError(NgraphError, ValueError):
    """A graph cannot be written as ONNX: an op with no ONNX mapping, or a bad source or option."""


class BakedBatch(Exception):
    """Internal: the graph fixes the batch length; ``export`` retries with a static batch (and warns)."""


def scope_path(op: Op) -> str:
    """The op's scope as a path (``Sequential_0/Conv_0/Convolution_0``); empty at top level."""
    return "/".join(str(s) for s in op.meta.scope)


def unsupported(op: Op, hint: str) -> ExportError:
    """The error for an op that has no ONNX form: the op, its scope and a hint."""
    where = scope_path(op) or "<top level>"
    return ExportError(f"ONNX export: expected an inference op with an ONNX mapping, received "
                       f"{format_op(op)} (scope {where}); hint: {hint}")


def onnx_dtype(dtype: str) -> int:
    """The ``TensorProto`` element type of a NumPy dtype name."""
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


@dataclass
class Value:
    """An op's ONNX tensor: its name and, per axis, whether it has the axis' full length (else 1)."""

    name: str
    full: tuple[bool, ...]

    @property
    def complete(self) -> bool:
        """Every axis at its full length."""
        return all(self.full)


@dataclass
class GraphScope:
    """One ONNX graph being written (the main graph, or a loop body inside it)."""

    parent: GraphScope | None
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    outputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    values: dict[Op, Value] = field(default_factory=dict)
    cache: dict[Any, str] = field(default_factory=dict)  # materialized values, shape tensors

    def find(self, table: str, key: Any) -> Any:
        """``key`` in this graph's ``values`` or ``cache`` (``table``), else in the enclosing graphs'; or None."""
        scope: GraphScope | None = self
        while scope is not None:
            found = (scope.values if table == "values" else scope.cache).get(key)
            if found is not None:
                return found
            scope = scope.parent
        return None


Converter = Callable[["Emitter", Op], "Value | str"]

_HINTS = {
    OpType.UNIFORM: "random ops have no deterministic ONNX form; export the graph built in inference mode "
                    "(Dropout off), where none is left",
    OpType.NORMAL: "random ops have no deterministic ONNX form; export the graph built in inference mode",
    OpType.ASSIGN: "the graph writes variables (a training step); export the inference graph",
    OpType.DOALL: "the graph runs side effects (a training step); export the inference graph",
    OpType.CTC: "CTC is a loss; export the model's outputs (the logits) and decode them outside the graph",
    OpType.FUSED: "fused kernels are compiler-made; export the unoptimized graph (export(computation) reads "
                  "its results as built)",
}
"""Hints for ops that cannot be exported, beyond the default (add a converter)."""


class Emitter:
    """Writes ONNX nodes for ops; owns the unique names, the initializers and the graph stack.

    Args:
        opset: the default-domain opset written.
        dynamic: export the batch axis ``N`` as the symbolic dim ``"N"``.
        table: ``OpType -> converter(emitter, op) -> Value or full tensor name``.
        values: variable -> its value (an initializer).

    Example:
        >>> em = Emitter(17, True, CONVERTERS, {W: w_value})
        >>> em.bind(x, Value("x", (True, True))); em.convert([y])
        >>> name = em.full(y)  # y's tensor, expanded to its full shape if it was partial
    """

    def __init__(self, opset: int, dynamic: bool, table: dict[Any, Converter], values: dict[Op, np.ndarray]) -> None:
        self.opset, self.dynamic, self.table, self.values = opset, dynamic, table, values
        self.initializers: list[TensorProto] = []
        self.graph = GraphScope(None)
        self.current: Op | None = None
        self._node_names: set[str] = set()
        self._value_names: set[str] = set()
        self._consts: dict[tuple, str] = {}
        self._batch: str | None = None
        self._batch_source: tuple[str, int] | None = None
        self.scan_uses: dict[Op, set[int]] = {}  # scan -> the indices of its results the graph reads

    # -- names ------------------------------------------------------------------------------------
    @staticmethod
    def _unique(base: str, taken: set[str]) -> str:
        name, i = base, 0
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        taken.add(name)
        return name

    def value_name(self, base: str) -> str:
        """A tensor name not used yet, from ``base``."""
        return self._unique(base, self._value_names)

    def scope_name(self) -> str:
        """``scope/op`` of the op being converted: the prefix of its nodes' and tensors' names."""
        op = self.current
        if op is None:
            return "graph"
        prefix = scope_path(op)
        return f"{prefix}/{op.op.value}" if prefix else op.op.value

    # -- nodes ------------------------------------------------------------------------------------
    def node(self, op_type: str, inputs: Sequence[str], n_out: int = 1, outputs: Sequence[str] | None = None,
             **attrs: Any) -> Any:
        """Add a node named from the op being converted (``scope/op/OnnxType``); returns its output name(s)
        (``outputs``: names reserved with ``value_name``; default: fresh ones)."""
        name = self._unique(f"{self.scope_name()}/{op_type}", self._node_names)
        outs = list(outputs) if outputs is not None else [self.value_name(f"{name}:{i}") for i in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if not (isinstance(v, list) and not v)}  # [] has no ONNX type
        self.graph.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, array: Any, base: str = "const", shared: bool = True) -> str:
        """An initializer holding ``array``: one per distinct dtype, shape and bytes when ``shared``, else
        its own (a variable keeps its own name even when another holds the same values)."""
        array = np.asarray(array, order="C")  # (ascontiguousarray would make a scalar 1-D)
        key = (str(array.dtype), array.shape, array.tobytes())
        if not shared or key not in self._consts:
            name = self.value_name(base)
            self.initializers.append(numpy_helper.from_array(array, name))
            if not shared:
                return name
            self._consts[key] = name
        return self._consts[key]

    def scalar(self, value: float, dtype: str) -> str:
        """A 0-d initializer of ``dtype``."""
        return self.const(np.asarray(value, dtype=dtype), "scalar")

    def ints(self, values: Iterable[int]) -> str:
        """A 1-D int64 initializer (axes, pads, shapes)."""
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def transpose(self, name: str, perm: Sequence[int]) -> str:
        """``name`` transposed by ``perm`` (no node for the identity)."""
        perm = [int(p) for p in perm]
        return name if perm == sorted(perm) else self.node("Transpose", [name], perm=perm)

    def unsqueeze(self, name: str, axes: Sequence[int]) -> str:
        """``name`` with length-1 axes inserted at the output positions ``axes`` (no node for none)."""
        return name if not axes else self.node("Unsqueeze", [name, self.ints(axes)])

    def squeeze(self, name: str, axes: Sequence[int]) -> str:
        """``name`` without its length-1 axes ``axes`` (no node for none)."""
        return name if not axes else self.node("Squeeze", [name, self.ints(axes)])

    def cast(self, name: str, have: str, want: str) -> str:
        """``name`` (of dtype ``have``) as ``want`` (no node when they agree)."""
        return name if have == want else self.node("Cast", [name], to=onnx_dtype(want))

    # -- values -----------------------------------------------------------------------------------
    def bind(self, op: Op, value: Value) -> None:
        """Record ``op``'s tensor in the graph being written."""
        self.graph.values[op] = value

    def lookup(self, op: Op) -> Value:
        """The value of an op converted before (in this graph or an enclosing one)."""
        found = self.graph.find("values", op)
        if found is None:
            raise unsupported(op, "the graph reads a placeholder that is not among the inputs; pass every "
                              "placeholder the outputs need as an input")
        return found

    def full(self, op: Op, dtype: str | None = None) -> str:
        """The name of ``op``'s tensor with every axis at its full length (Expand when partial), in ``dtype``."""
        value = self.lookup(op)
        name = value.name
        if not value.complete:
            key = ("full", value.name)
            name = self.graph.find("cache", key)
            if name is None:
                name = self.node("Expand", [value.name, self.shape_of(op.axes)])
                self.graph.cache[key] = name
        return self.cast(name, op.dtype, dtype or op.dtype)

    def partial(self, op: Op, dtype: str) -> str:
        """``op``'s tensor as it is (maybe partial), cast to ``dtype``: for ops that broadcast positionally."""
        return self.cast(self.lookup(op).name, op.dtype, dtype)

    # -- the batch axis ---------------------------------------------------------------------------
    def bake(self, op: Op, baked: bool, reason: str) -> None:
        """Raise ``BakedBatch`` when exporting a dynamic batch and ``op`` fixes the batch length."""
        if self.dynamic and baked:
            raise BakedBatch(f"{op.op.value} in {scope_path(op) or '<top level>'}: {reason}")

    def set_batch_source(self, input_name: str, position: int) -> None:
        """The batch length is read, at run time, from dim ``position`` of the graph input ``input_name``."""
        self._batch_source = (input_name, position)

    def batch_length(self) -> str:
        """A ``[1]`` int64 tensor holding the batch length, written at the top of the main graph on first use."""
        if self._batch is None:
            if self._batch_source is None:
                raise BakedBatch("no graph input has the batch axis N to read its length from")
            root, outer = self.graph, self.graph
            while root.parent is not None:
                root = root.parent
            self.graph, previous, self.current = root, self.current, None
            mark = len(root.nodes)
            try:
                shape = self.node("Shape", [self._batch_source[0]])
                self._batch = self.node("Gather", [shape, self.ints([self._batch_source[1]])], axis=0)
            finally:
                self.graph, self.current = outer, previous
            root.nodes[:] = root.nodes[mark:] + root.nodes[:mark]  # first: it reads only a graph input
        return self._batch

    def dims(self, axes: Axes) -> list[int | str]:
        """ONNX dims of ``axes``: lengths, ``"N"`` for the batch axis when dynamic."""
        return ["N" if self.dynamic and a.is_batch else a.length for a in axes]

    def shape_of(self, axes: Axes) -> str:
        """A 1-D int64 tensor holding the lengths of ``axes`` (the batch length read at run time when dynamic)."""
        if not (self.dynamic and axes.batch_axis is not None):
            return self.ints(axes.lengths)
        key = ("shape", tuple(axes))
        found = self.graph.find("cache", key)
        if found is not None:
            return found
        pieces, run = [], []
        for a in axes:
            if a.is_batch:
                if run:
                    pieces.append(self.ints(run))
                    run = []
                pieces.append(self.batch_length())
            else:
                run.append(a.length)
        if run:
            pieces.append(self.ints(run))
        name = pieces[0] if len(pieces) == 1 else self.node("Concat", pieces, axis=0)
        self.graph.cache[key] = name
        return name

    def tensor_info(self, name: str, op: Op, order: Sequence[int] | None = None) -> onnx.ValueInfoProto:
        """A graph input's or output's type: ``op``'s dtype and dims (``"N"`` when dynamic), its axes taken
        in ``order`` (positions; default: as they are)."""
        axes = op.axes if order is None else Axes([op.axes[i] for i in order])
        return helper.make_tensor_value_info(name, onnx_dtype(op.dtype), self.dims(axes))

    # -- conversion -------------------------------------------------------------------------------
    def convert(self, roots: Sequence[Op]) -> None:
        """Convert every op below ``roots`` not converted yet (sources first) into the current graph."""
        for op in toposort(roots):
            if self.graph.find("values", op) is not None:
                continue
            converter = self.table.get(op.op)
            if converter is None:
                raise unsupported(op, _HINTS.get(op.op, f"no ONNX mapping for {op.op.value}: export the inference "
                                                 "graph (training, gradient and loss ops have none), or add a "
                                                 "converter to ngraph_core/frontends/onnx/export_ops.py"))
            previous, self.current = self.current, op
            try:
                result = converter(self, op)
            finally:
                self.current = previous
            self.bind(op, result if isinstance(result, Value) else Value(result, (True,) * len(op.axes)))

    @contextmanager
    def subgraph(self) -> Iterator[GraphScope]:
        """Write nodes into a new graph (a loop body) that may read this graph's values by name."""
        outer = self.graph
        self.graph = GraphScope(outer)
        try:
            yield self.graph
        finally:
            self.graph = outer
