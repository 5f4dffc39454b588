"""``import_model``: an ONNX model as an ngraph graph (placeholders, variables, output ops).

Reading, in order:

1. **Load** (``load_model``): a path, bytes or ``ModelProto``; anything that is not a
   readable model raises ``OnnxLoadError`` (never a protobuf crash); ``onnx.checker`` runs
   on it and its complaints become ``OnnxLoadError`` too.
2. **Inputs**: each graph input that is not an initializer becomes a placeholder whose axes
   are generated; a dynamic dim (``dim_param: "batch"``) becomes an axis named after the
   parameter, whose length comes from ``dims={"batch": 32}`` or ``input_shapes`` (default 1).
3. **Initializers**: float ones become trainable variables (``initializers="variables"``, the
   default: an imported model fine-tunes with neon optimizers) or constants
   (``"constants"``); integer ones are always constants (they are shapes and indices).
4. **Nodes**, in the graph's order: each is converted by the registered converter for its
   operator at the model's opset, inside ``name_scope(node name, kind=op_type)`` so selectors
   work on imported graphs (``"Conv variable"``). Nodes whose inputs are all known at import
   time are evaluated then (shape arithmetic).

Example:
    >>> model = import_model("resnet18.onnx", dims={"N": 8})
    >>> y = model.run({"input": batch})[0]
    >>> model.select("Conv variable").names[:2]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ... import api
from ...errors import NgraphError
from ...ir import Axes, Axis, Op, name_scope, toposort
from ...ir.names import MAX_NAME_LENGTH
from .context import ImportBudget, ImportContext, NeedStatic, Node, check_elements, parse_attribute, tensor_to_array
from .errors import OnnxBudgetError, OnnxError, OnnxLoadError, UnsupportedOnnxOpError
from .registry import lookup
from .tensor import Value, dtype_of, shape_of

INITIALIZER_MODES = ("variables", "constants")


def safe_name(name: str, fallback: str) -> str:
    """``name`` made a valid ngraph name (printable, <= 256 characters), or ``fallback`` when empty."""
    text = "".join(ch if ch.isprintable() else "?" for ch in (name or ""))[:MAX_NAME_LENGTH]
    return text or fallback


def load_model(source: Any) -> Any:
    """An ``onnx.ModelProto`` from a path, bytes or a ``ModelProto``, checked.

    Raises:
        OnnxLoadError: a missing file, bytes that are not an ONNX model (corrupt, truncated,
            empty), or a model ``onnx.checker`` rejects.
    """
    import onnx

    if isinstance(source, onnx.ModelProto):
        model = source
    else:
        if isinstance(source, (str, os.PathLike)):
            try:
                with open(source, "rb") as f:
                    data = f.read()
            except OSError as exc:
                raise OnnxLoadError(f"import_model: cannot read {os.fspath(source)!r}: {exc.strerror}") from None
            where = os.fspath(source)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            data, where = bytes(source), "the bytes given"
        else:
            raise OnnxLoadError(f"import_model: expected a path, bytes or an onnx.ModelProto, "
                                f"received {type(source).__name__}")
        if not data:
            raise OnnxLoadError(f"import_model: {where} is empty; hint: expected an ONNX model file")
        model = onnx.ModelProto()
        try:
            model.ParseFromString(data)
        except Exception as exc:  # protobuf's DecodeError and friends: corrupt or truncated
            raise OnnxLoadError(f"import_model: {where} is not a valid ONNX model (corrupt or truncated): "
                                f"{type(exc).__name__}; hint: re-export the model") from None
    if not model.HasField("graph") or not model.opset_import:
        raise OnnxLoadError("import_model: the model has no graph or no opset_import; hint: is it an ONNX model?")
    if not model.graph.output:
        raise OnnxLoadError("import_model: the graph declares no outputs; hint: a model lists what it computes in "
                            "graph.output (is the file damaged?)")
    where = non_utf8_string(model)
    if where is not None:
        raise OnnxLoadError(f"import_model: the text at {where} is not valid UTF-8 (corrupt bytes); hint: re-export "
                            "the model")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise OnnxLoadError(f"import_model: onnx.checker rejects the model: {str(exc).splitlines()[0][:300]}") from None
    return model


def non_utf8_string(message: Any, path: str = "model") -> str | None:
    """Where in ``message`` a string field holds bytes that are not UTF-8, else None.

    ONNX's schema is proto2, whose string fields read back as ``bytes`` (not ``str``) when the
    file's bytes are not UTF-8; a damaged name would otherwise surface as a ``TypeError`` deep in
    a converter.

    Example:
        >>> non_utf8_string(model)   # e.g. "model.graph.node[0].name"
    """
    for field, value in message.ListFields():
        if field.type not in (field.TYPE_STRING, field.TYPE_MESSAGE):
            continue  # numbers and raw bytes (a tensor's data): nothing to walk
        items = value if field.is_repeated else [value]
        for i, item in enumerate(items):
            at = f"{path}.{field.name}" + (f"[{i}]" if field.is_repeated else "")
            if field.type == field.TYPE_STRING and isinstance(item, bytes):
                return at
            if field.type == field.TYPE_MESSAGE:
                found = non_utf8_string(item, at)
                if found is not None:
                    return found
    return None


class ImportedModel:
    """An imported ONNX graph: its inputs as placeholders, outputs as ops, initializers as variables.

    Attributes:
        inputs: the placeholders, in the graph's input order (``input_names`` their ONNX names).
        outputs: one op per graph output (``output_names``).
        variables: the trainable initializers, as variables.
        values: every ONNX value name -> its op (or static array).
        dims: each dynamic dim's name -> the length it was given.
        opset: the default domain's opset.
        max_bytes: the import's memory budget, also the budget of the transformer ``computation`` makes.

    Example:
        >>> m = import_model(path)
        >>> (probs,) = m.run([x])
    """

    def __init__(self, inputs: list[Op], input_names: list[str], outputs: list[Op], output_names: list[str],
                 values: dict[str, Value], dims: dict[str, int], opset: int, proto: Any,
                 max_bytes: int | None = None) -> None:
        self.inputs, self.input_names = inputs, input_names
        self.max_bytes = max_bytes
        self.outputs, self.output_names = outputs, output_names
        self.values, self.dims, self.opset, self.proto = values, dims, opset, proto
        self.variables = [o for o in toposort(outputs) if o.op.name == "VARIABLE"]
        self._transformer: Any = None
        self._computation: Any = None

    def computation(self, transformer: Any = None, mode: str = "inference") -> Any:
        """The compiled function of the inputs returning the outputs (a NumPy transformer by default)."""
        if transformer is None:
            if self._computation is None:
                from ...transformers import make_transformer

                self._transformer = make_transformer("numpy", max_bytes=self.max_bytes)
                self._computation = self._transformer.computation(self.outputs, *self.inputs, mode=mode)
            return self._computation
        return transformer.computation(self.outputs, *self.inputs, mode=mode)

    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> list[np.ndarray]:
        """The outputs for ``inputs`` (a list in input order, or a dict by input name).

        Raises:
            OnnxError: a missing or unknown input name.
        """
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - set(self.input_names))
            missing = [n for n in self.input_names if n not in inputs]
            if unknown or missing:
                raise OnnxError(f"run: expected inputs {self.input_names}, missing {missing}, unknown {unknown}")
            inputs = [inputs[n] for n in self.input_names]
        if len(inputs) != len(self.inputs):
            raise OnnxError(f"run: expected {len(self.inputs)} inputs ({self.input_names}), received {len(inputs)}")
        result = self.computation()(*[np.asarray(v) for v in inputs])
        return [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]

    def select(self, query: str) -> Any:
        """``ng.select`` over the imported graph (scopes are the ONNX nodes, typed by operator)."""
        from ...selectors import select

        return select(self.outputs, query)

    def __ngraph_ops__(self) -> list[Op]:
        return list(self.outputs)

    def __repr__(self) -> str:
        return (f"ImportedModel(inputs={self.input_names}, outputs={self.output_names}, "
                f"variables={len(self.variables)}, opset={self.opset})")


def _input_axes(ctx: ImportContext, value_info: Any, dims: dict[str, int], shape: Sequence[int] | None) -> Axes:
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        if shape is None:
            raise OnnxError(f"input {value_info.name!r} has no shape; hint: pass input_shapes={{name: shape}}")
        return ctx.fresh(shape)
    axes = []
    declared = list(tensor_type.shape.dim)
    check_elements(shape if shape is not None else [d.dim_value if d.HasField("dim_value") else 1 for d in declared],
                   f"input {value_info.name!r}", ctx.budget.max_bytes)
    if shape is not None and len(shape) != len(declared):
        raise OnnxError(f"input {value_info.name!r}: declared rank {len(declared)}, received shape {tuple(shape)}")
    for i, d in enumerate(declared):
        if shape is not None:
            length = int(shape[i])
            if d.HasField("dim_value") and d.dim_value != length:
                raise OnnxError(f"input {value_info.name!r}: dim {i} is {d.dim_value}, received {length}")
        elif d.HasField("dim_value"):
            length = int(d.dim_value)
        else:
            length = dims.setdefault(d.dim_param or f"{value_info.name}_{i}", 1)
        if d.HasField("dim_param") and d.dim_param:
            dims.setdefault(d.dim_param, length)
            name = safe_name(d.dim_param, "dim")
            if name.isidentifier() and all(a.name != name for a in axes):
                axes.append(Axis(name, length))
                continue
        axes.append(ctx.fresh([length])[0])
    check_elements([a.length for a in axes], f"input {value_info.name!r}", ctx.budget.max_bytes)
    return Axes(axes)


def convert_nodes(ctx: ImportContext, nodes: Sequence[Any]) -> None:
    """Convert ``nodes`` in order into ``ctx.values`` (the body of ``import_model``; subgraphs reuse it).

    Raises:
        UnsupportedOnnxOpError: an operator with no converter at the model's opset.
        OnnxError: a node reading a value nothing defined, or a malformed node.
    """
    for index, proto in enumerate(nodes):
        domain = proto.domain if proto.domain != "ai.onnx" else ""
        opset = ctx.opsets.get(domain, ctx.opsets.get("", 1))
        name = safe_name(proto.name, f"{proto.op_type}_{index}")
        node = Node(proto.op_type, domain, name, opset, {a.name: parse_attribute(a) for a in proto.attribute},
                    list(proto.input), list(proto.output), proto)
        fn = lookup(proto.op_type, opset, domain)
        if fn is None:
            raise UnsupportedOnnxOpError(proto.op_type, opset, name, domain)
        missing = [n for n in node.inputs if n not in ctx.values and n not in ctx.pending]
        if missing:
            raise OnnxError(f"{proto.op_type} node {name!r} reads {missing[0]!r}, which no earlier node, input or "
                            "initializer defines; hint: the graph must be topologically sorted")
        ctx.node = node
        with name_scope(safe_name(name.replace("/", "_"), "node"), kind=safe_name(proto.op_type, "Op")):
            for n in node.inputs:  # a trainable initializer lives in the scope of the first node reading it
                if n in ctx.pending:
                    array = ctx.pending.pop(n)
                    ctx.values[n] = api.variable(ctx.fresh(array.shape), initial_value=array, dtype=array.dtype.name,
                                                name=safe_name(n, "initializer"))
            inputs = [ctx.values[n] for n in node.inputs]
            try:
                result = fn(ctx, node, inputs)
            except (NgraphError, UnsupportedOnnxOpError):
                raise
            except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as exc:  # a malformed node: say which
                raise OnnxError(f"{proto.op_type} node {name!r}: {type(exc).__name__}: {exc}") from exc
            except MemoryError as exc:  # a helper array a converter sized from the model (the budget bounds it)
                raise OnnxBudgetError(f"{proto.op_type} node {name!r}: out of memory computing its value at import "
                                      f"time ({exc}); hint: is the model damaged?") from None
        outputs = list(result) if isinstance(result, (list, tuple)) else [result]
        for value in outputs:  # every value within the budget, before a fold computes it or a transformer allocates it
            if value is not None:
                ctx.check_tensor(shape_of(value), dtype_of(value))
        ctx.budget.charge([v for v in outputs if isinstance(v, np.ndarray) and not any(v is i for i in inputs)],
                          ctx._where())  # arrays the converter computed (checked before allocating when large)
        outputs = ctx.fold(inputs, outputs)
        if any(id(v) in ctx.fed for v in inputs if v is not None):  # values computed from fed inputs are fed too
            ctx.fed.update(id(v) for v in outputs if v is not None)
        for out_name, value in zip(node.outputs, outputs):
            if out_name:
                ctx.values[out_name] = value
    ctx.node = None


def import_graph(ctx: ImportContext, graph: Any, initializers: str = "variables",
                 dims: dict[str, int] | None = None, input_shapes: Mapping[str, Sequence[int]] | None = None,
                 static_inputs: Mapping[str, Any] | None = None) -> tuple[list[Op], list[str]]:
    """Fill ``ctx.values`` from ``graph``'s initializers, inputs and nodes; return the placeholders and names."""
    dims = {} if dims is None else dims
    static_inputs = dict(static_inputs or {})
    for tensor in graph.initializer:
        array = tensor_to_array(tensor, "initializer")
        if initializers == "variables" and array.dtype.kind == "f":
            ctx.pending[tensor.name] = array  # made a variable in its first reader's scope
        else:
            ctx.values[tensor.name] = array
    for tensor in graph.sparse_initializer:
        raise OnnxError(f"sparse initializer {tensor.values.name!r} is not supported; hint: densify the model")
    placeholders, names = [], []
    for value_info in graph.input:
        if value_info.name in ctx.values and value_info.name not in static_inputs:
            continue  # an initializer listed among the inputs (IR < 4) keeps its value
        if value_info.name in ctx.pending and value_info.name not in static_inputs:
            continue
        if not value_info.type.HasField("tensor_type"):
            raise OnnxError(f"input {value_info.name!r}: only tensor inputs are supported (sequences, maps "
                            "and optionals are not)")
        dtype = ctx.dtype(value_info.type.tensor_type.elem_type, f"input {value_info.name!r}")
        if value_info.name in static_inputs:
            ctx.values[value_info.name] = np.asarray(static_inputs[value_info.name], dtype=dtype)
            ctx.fed.add(id(ctx.values[value_info.name]))
            continue
        shape = None if input_shapes is None else input_shapes.get(value_info.name)
        axes = _input_axes(ctx, value_info, dims, shape)
        p = api.placeholder(axes, dtype=dtype, name=safe_name(value_info.name, "input"))
        ctx.values[value_info.name] = p
        ctx.input_names[p] = value_info.name
        ctx.check_tensor(axes.lengths, dtype, f"input {value_info.name!r}")
        placeholders.append(p)
        names.append(value_info.name)
    convert_nodes(ctx, graph.node)
    return placeholders, names


def import_model(source: Any, dims: Mapping[str, int] | None = None,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 static_inputs: Mapping[str, Any] | None = None,
                 initializers: str = "variables", max_bytes: int | None = None) -> ImportedModel:
    """Import an ONNX model (path, bytes or ``ModelProto``) as an ngraph graph.

    Args:
        source: the model.
        dims: lengths of the dynamic dims by their ``dim_param`` name (default 1 each).
        input_shapes: full shapes of inputs by name (override the declared ones).
        static_inputs: values of inputs to bake in as constants (inputs a converter needs at
            import time: a shape fed to Reshape, the pads of Pad...).
        initializers: ``"variables"`` (float initializers trainable) or ``"constants"``.
        max_bytes: the memory budget: the most bytes one value of the graph may take, and the
            constants computed at import time (folded values, ``ConstantOfShape``...) in total;
            each is checked before it is allocated. None: ``NG_MAX_BYTES``, else 1 GiB
            (``ngraph_core/memory_budget.py``). Initializers are not counted (the file holds them).

    Returns:
        an ``ImportedModel``.

    Raises:
        OnnxLoadError: not a readable, valid ONNX model.
        UnsupportedOnnxOpError: an operator (or opset) with no converter.
        OnnxBudgetError: a value, or the constants computed at import time, over ``max_bytes``.
        OnnxIndexError: static ``Gather`` indices outside the axis they index.
        OnnxError: a value needed at import time that depends on a placeholder (the message names
            the input to pass in ``static_inputs``), or another inexpressible feature.

    Example:
        >>> m = import_model("mlp.onnx", dims={"N": 32})
        >>> m.run({"x": x})
    """
    try:
        return build_model(load_model(source), dims, input_shapes, static_inputs, initializers, max_bytes)
    except NeedStatic as exc:
        raise OnnxError(str(exc)) from None


def build_model(model: Any, dims: Mapping[str, int] | None = None,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                static_inputs: Mapping[str, Any] | None = None, initializers: str = "variables",
                max_bytes: int | None = None) -> ImportedModel:
    """``import_model`` on a loaded, checked ``ModelProto``; a value needed at import time that depends
    on an input raises ``NeedStatic`` (naming the inputs) instead of ``OnnxError``, so a caller holding
    the inputs' values (the backend) can retry with them in ``static_inputs``."""
    if initializers not in INITIALIZER_MODES:
        raise OnnxError(f"import_model: expected initializers in {INITIALIZER_MODES}, received {initializers!r}")
    opsets = {(o.domain if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import}
    ctx = ImportContext(opsets, budget=ImportBudget(max_bytes))
    dims = dict(dims or {})
    try:
        placeholders, names = import_graph(ctx, model.graph, initializers, dims, input_shapes, static_inputs)
        outputs, out_names = [], []
        for value_info in model.graph.output:
            if value_info.name in ctx.pending:  # an initializer returned as it is
                array = ctx.pending.pop(value_info.name)
                ctx.values[value_info.name] = api.variable(ctx.fresh(array.shape), initial_value=array,
                                                          dtype=array.dtype.name,
                                                          name=safe_name(value_info.name, "initializer"))
            value = ctx.values.get(value_info.name)
            if value is None:
                raise OnnxError(f"graph output {value_info.name!r} is not produced by any node")
            where = f"graph output {value_info.name!r}"
            outputs.append(value if isinstance(value, Op) else ctx.as_op(value, what=where))
            out_names.append(value_info.name)
    finally:
        ctx.close()
    values = {k: v for k, v in ctx.values.items() if k}
    return ImportedModel(placeholders, names, outputs, out_names, values, dims, opsets.get("", 1), model,
                         ctx.budget.max_bytes)
