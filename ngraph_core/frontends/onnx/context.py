"""The state of one import: the values made so far, the opsets, node views and static evaluation.

``ImportContext`` is what every converter receives. Besides the positional helpers
(``tensor.Positional``) it gives:

* ``static(value, what)``: the value as a NumPy array known at import time. A value built
  from constants only is evaluated now (with the NumPy transformer); one that depends on
  a graph input raises ``NeedStatic`` naming that input: the backend then re-imports with
  the input's value baked in (ONNX feeds shapes, pads and indices as inputs), and
  ``import_model`` tells the user to pass it in ``static_inputs``.
* ``fold``: after a node whose inputs were all static, its outputs are evaluated too, so
  shape arithmetic never reaches the compiled graph.
* ``dtype(onnx_type)``: ONNX element types -> ngraph dtypes (unsupported ones raise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir import Op, OpType, toposort
from .errors import OnnxError, UnsupportedOnnxOpError
from .tensor import Positional, Value

# ONNX TensorProto element types -> ngraph dtypes (the ones ngraph computes in)
ONNX_DTYPES: dict[int, str] = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                               9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}
ONNX_TYPE_NAMES = {0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32",
                   7: "INT64", 8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
                   14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ",
                   19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1"}
_REQUIRED = object()
MAX_ELEMENTS = 2**31  # the most elements one imported tensor may hold (8 GiB of float32): a damaged or hostile
                      # model declaring a terabyte tensor fails at import, before anything is allocated


def check_elements(shape: Sequence[int], what: str) -> None:
    """Raise ``OnnxError`` naming ``what`` when a tensor of ``shape`` would hold over ``MAX_ELEMENTS`` elements.

    Example:
        >>> check_elements((2**20, 2**20), "ConstantOfShape node 'c'")   # OnnxError: ... over the limit
    """
    count = 1
    for n in shape:
        count *= int(n)  # Python ints: no overflow
    if count > MAX_ELEMENTS:
        raise OnnxError(f"{what}: a tensor of shape {tuple(int(n) for n in shape)} would hold {count:,} elements, over "
                        f"the limit of {MAX_ELEMENTS:,}; hint: is the model damaged? (MAX_ELEMENTS in "
                        "ngraph_core/frontends/onnx/context.py)")


class NeedStatic(OnnxError):
    """A converter needs, at import time, the value of graph inputs that are placeholders.

    Attributes:
        inputs: the graph inputs' names whose values are needed.
    """

    def __init__(self, inputs: Sequence[str], what: str, node: str) -> None:
        self.inputs = tuple(inputs)
        super().__init__(
            f"node {node!r}: {what} must be known at import time but depends on the graph input(s) "
            f"{', '.join(map(repr, self.inputs))}; hint: pass their values as "
            f"import_model(..., static_inputs={{{self.inputs[0]!r}: array}})")


@dataclass
class Node:
    """One ONNX node as converters see it.

    Attributes:
        op_type, domain: the operator.
        name: the node's name (``"<op_type>_<index>"`` when the model leaves it empty).
        opset: the model's opset for the node's domain.
        attrs: attribute name -> Python value (ints, floats, strings decoded, lists, arrays for
            tensors, ``GraphProto`` for graphs).
        inputs, outputs: value names (``""`` for an omitted optional input).
        proto: the ``NodeProto``.
    """

    op_type: str
    domain: str
    name: str
    opset: int
    attrs: dict[str, Any]
    inputs: list[str]
    outputs: list[str]
    proto: Any = field(repr=False, default=None)

    def attr(self, key: str, default: Any = _REQUIRED) -> Any:
        """The attribute ``key``, else ``default``; a missing required attribute raises ``OnnxError``."""
        if key in self.attrs:
            return self.attrs[key]
        if default is _REQUIRED:
            raise OnnxError(f"{self.op_type} node {self.name!r}: required attribute {key!r} is missing")
        return default

    def unsupported(self, detail: str) -> UnsupportedOnnxOpError:
        """The error for a feature of this node the importer does not express (raise it)."""
        return UnsupportedOnnxOpError(self.op_type, self.opset, self.name, self.domain, detail)


def parse_attribute(attr: Any) -> Any:
    """An ``AttributeProto``'s value as plain Python / NumPy (strings decoded as UTF-8)."""
    from onnx import helper, numpy_helper

    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    if type(value).__name__ == "TensorProto":
        return tensor_to_array(value)
    if isinstance(value, list) and value and type(value[0]).__name__ == "TensorProto":
        return [numpy_helper.to_array(v) for v in value]
    return value


def tensor_to_array(tensor: Any, where: str = "tensor") -> np.ndarray:
    """A ``TensorProto`` as a NumPy array, checked against its declared element type.

    Raises:
        OnnxError: an element type ngraph does not compute in (strings, bfloat16, float8...),
            external data, or data that does not fill the declared shape.
    """
    from onnx import numpy_helper

    if tensor.data_type not in ONNX_DTYPES:
        kind = ONNX_TYPE_NAMES.get(tensor.data_type, tensor.data_type)
        raise OnnxError(f"{where} {tensor.name!r}: element type {kind} is not supported; hint: ngraph computes in "
                        f"{', '.join(sorted(set(ONNX_DTYPES.values())))}")
    if tensor.data_location == 1:
        raise OnnxError(f"{where} {tensor.name!r}: stored as external data; hint: load the model with "
                        "onnx.load(path, load_external_data=True) and pass the ModelProto")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # malformed raw data: a typed error, never a crash
        raise OnnxError(f"{where} {tensor.name!r}: data does not match its shape {list(tensor.dims)}: {exc}") from None
    return np.asarray(array.astype(ONNX_DTYPES[tensor.data_type], copy=False), order="C")  # 0-d stays 0-d


class ImportContext(Positional):
    """Everything one import knows; handed to every converter.

    Args:
        opsets: domain -> opset version of the model.
        evaluate: run constant-only ops now (``fold``); False keeps them as graph ops.
    """

    def __init__(self, opsets: dict[str, int], evaluate: bool = True) -> None:
        super().__init__()
        self.opsets = dict(opsets)
        self.values: dict[str, Value | None] = {"": None}
        self.input_names: dict[Op, str] = {}  # placeholder -> graph input name
        self.fed: set[int] = set()  # ids of static values that came from graph inputs (``static_inputs``)
        self.pending: dict[str, np.ndarray] = {}  # trainable initializers not read yet (made in their reader's scope)
        self.fold_enabled = evaluate
        self._transformer: Any = None
        self.node: Node | None = None  # the node being converted (errors name it)

    def fresh(self, shape: Sequence[int]) -> Any:
        """``Positional.fresh``, refusing a tensor over ``MAX_ELEMENTS`` elements (``OnnxError`` naming the node)."""
        check_elements(shape, self._where())
        return super().fresh(shape)

    # -- dtypes -----------------------------------------------------------------------------------------
    @staticmethod
    def dtype(onnx_type: int, where: str = "value") -> str:
        """The ngraph dtype for an ONNX element type, else ``OnnxError`` naming ``where``."""
        if onnx_type not in ONNX_DTYPES:
            raise OnnxError(f"{where}: element type {ONNX_TYPE_NAMES.get(onnx_type, onnx_type)} is not supported; "
                            f"hint: ngraph computes in {', '.join(sorted(set(ONNX_DTYPES.values())))}")
        return ONNX_DTYPES[onnx_type]

    # -- static values -----------------------------------------------------------------------------------
    def static(self, v: Value | None, what: str, default: Any = _REQUIRED) -> np.ndarray:
        """``v`` as a NumPy array known now (evaluating constant-only ops), else ``NeedStatic``.

        Args:
            v: the value; None (an omitted input) gives ``default`` when one is given.
            what: names the value in errors (``"Reshape's shape"``).
        """
        if v is None:
            if default is _REQUIRED:
                raise OnnxError(f"{self._where()}: {what} is required")
            return default if default is None else np.asarray(default)
        if isinstance(v, np.ndarray):
            return v
        inputs = [self.input_names[o] for o in toposort([v]) if o.op is OpType.PLACEHOLDER]
        variables = [o for o in toposort([v]) if o.op is OpType.VARIABLE]
        if inputs:
            raise NeedStatic(inputs, what, self._where())
        if variables:
            raise OnnxError(f"{self._where()}: {what} must be known at import time but reads the trainable "
                            f"initializer {variables[0].name!r}; hint: import with initializers='constants'")
        return self.evaluate([v])[0]

    def constant(self, v: Value | None, what: str) -> np.ndarray:
        """``v`` as an array that is a constant *of the model* (initializers, ``Constant`` nodes and what is
        computed from them), for operators whose output shape depends on their input's values (``NonZero``,
        ``Unique``): a graph input fed as a constant would have NumPy compute the node instead of the graph.

        Raises:
            UnsupportedOnnxOpError: ``v`` depends on a graph input.
        """
        try:
            array = self.static(v, what)
        except NeedStatic:
            array = None
        if array is None or id(array) in self.fed:
            raise self.node.unsupported(f"{what} depends on a graph input; an output shape that depends on run-time "
                                        "values cannot be compiled (only constants of the model are supported)")
        return array

    def evaluate(self, ops: Sequence[Op]) -> list[np.ndarray]:
        """The values of constant-only ``ops`` now, computed by a NumPy transformer."""
        from ...transformers import make_transformer

        if self._transformer is None:
            self._transformer = make_transformer("numpy")
        results = self._transformer.computation(list(ops))()
        results = list(results) if isinstance(results, tuple) else [results]  # a list of one may give a 1-tuple
        return [np.asarray(r, dtype=o.dtype) for r, o in zip(results, ops)]

    def fold(self, inputs: Sequence[Value | None], outputs: list[Value]) -> list[Value]:
        """The outputs evaluated now when every input was static (and folding is on)."""
        if not self.fold_enabled or any(isinstance(v, Op) for v in inputs):
            return outputs
        ops = [o for o in outputs if isinstance(o, Op)]
        if not ops or any(x.op in (OpType.PLACEHOLDER, OpType.VARIABLE, OpType.UNIFORM, OpType.NORMAL)
                          for x in toposort(ops)):
            return outputs
        arrays = iter(self.evaluate(ops))
        return [next(arrays) if isinstance(o, Op) else o for o in outputs]

    def close(self) -> None:
        """Release the evaluation transformer."""
        if self._transformer is not None:
            self._transformer.close()
            self._transformer = None

    def _where(self) -> str:
        return f"{self.node.op_type} node {self.node.name!r}" if self.node is not None else "import"
