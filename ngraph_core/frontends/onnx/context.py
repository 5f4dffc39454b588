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
* a memory budget (``ImportBudget``, ``max_bytes`` of ``import_model``; default ``NG_MAX_BYTES`` or
  1 GiB, see ``ngraph_core/memory_budget.py``): no value of the graph may take more, and the
  constants computed at import time (folded values, ``ConstantOfShape``, ``Range``...), with
  the graph constants copied from them, may not take more in total; each is checked before it
  is allocated (``OnnxBudgetError``). The initializers are not counted: the file holds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir import Op, OpType, toposort
from ...memory_budget import budget_message, check_bytes, resolve_max_bytes, tensor_bytes
from .errors import OnnxBudgetError, OnnxError, UnsupportedOnnxOpError
from .tensor import Positional, Value

# ONNX TensorProto element types -> ngraph dtypes (the ones ngraph computes in)
ONNX_DTYPES: dict[int, str] = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                               9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}
ONNX_TYPE_NAMES = {0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32",
                   7: "INT64", 8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
                   14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ",
                   19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1"}
_REQUIRED = object()
_BUDGET_HINT = ("hint: is the model damaged? If the size is meant, raise the budget: import_model(..., "
                "max_bytes=...) or NG_MAX_BYTES in the environment (e.g. NG_MAX_BYTES=4GiB)")


def check_elements(shape: Sequence[int], what: str, limit: int) -> None:
    """Raise ``OnnxBudgetError`` naming ``what`` when a tensor of ``shape`` would hold over ``limit`` elements.

    Axes are made before their dtype is known, so this is the coarse check (an element takes at
    least one byte: ``limit`` is the budget in bytes); ``ImportBudget.check_tensor`` is the exact one.

    Example:
        >>> check_elements((2**20, 2**20), "Expand node 'e'", 1 << 30)   # OnnxBudgetError: ... over the limit
    """
    count = 1
    for n in shape:
        count *= int(n)  # Python ints: no overflow
    if count > limit:
        raise OnnxBudgetError(f"{what}: a tensor of shape {tuple(int(n) for n in shape)} would hold {count:,} "
                              f"elements, over the limit of {limit:,} (max_bytes); {_BUDGET_HINT}")


class ImportBudget:
    """The memory budget of one import (shared by its sub-graphs' contexts).

    Args:
        max_bytes: the most bytes one value may take, and the constants computed at import time
            in total; None: ``NG_MAX_BYTES``, else 1 GiB.

    Attributes:
        used: the bytes of the constants computed so far (and of the graph constants copied from them).

    Example:
        >>> budget = ImportBudget(1 << 20)
        >>> budget.check_constants([((2**28,), "float32")], "ConstantOfShape node 'c'")   # OnnxBudgetError
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = resolve_max_bytes(max_bytes, "import_model: max_bytes")
        self.used = 0
        self._computed: dict[int, np.ndarray] = {}  # id -> array (held: ids stay unique while the import runs)
        self._copied: set[int] = set()

    def check_tensor(self, shape: Sequence[int], dtype: Any, what: str) -> None:
        """Refuse a value of the graph (``OnnxBudgetError`` naming ``what``) that would take over ``max_bytes``."""
        check_bytes(tensor_bytes(shape, dtype), self.max_bytes, what,
                    f"shape {tuple(int(n) for n in shape)} of {np.dtype(dtype).name}", OnnxBudgetError, _BUDGET_HINT)

    def check_constants(self, values: Iterable[tuple[Sequence[int], Any]], what: str) -> int:
        """Refuse, before they are computed, constants (``(shape, dtype)`` pairs) that would take one value or
        the import's constants over ``max_bytes``; return their bytes."""
        total = 0
        for shape, dtype in values:
            self.check_tensor(shape, dtype, what)
            total += tensor_bytes(shape, dtype)
        if self.used + total > self.max_bytes:
            expected, received = budget_message(self.used + total, self.max_bytes,
                                                f"{total:,} for this one after {self.used:,} for earlier ones")
            raise OnnxBudgetError(f"{what}: expected the constants computed at import time to take {expected}, "
                                  f"received {received}; {_BUDGET_HINT}")
        return total

    def charge(self, arrays: Sequence[np.ndarray], what: str) -> None:
        """Count constants just computed (checked as ``check_constants`` does; a converter checks before it
        allocates a large one)."""
        self.used += self.check_constants([(a.shape, a.dtype) for a in arrays], what)
        self._computed.update((id(a), a) for a in arrays)

    def charge_copy(self, array: np.ndarray, dtype: Any, what: str) -> None:
        """Count, before it is made, the graph constant copied from a constant computed at import time (once)."""
        if id(array) in self._computed and id(array) not in self._copied:
            self.used += self.check_constants([(array.shape, dtype or array.dtype)], what)
            self._copied.add(id(array))


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
        budget: the import's memory budget (a sub-graph's context shares its parent's).
    """

    def __init__(self, opsets: dict[str, int], evaluate: bool = True, budget: ImportBudget | None = None) -> None:
        super().__init__()
        self.budget = budget if budget is not None else ImportBudget()
        self.opsets = dict(opsets)
        self.values: dict[str, Value | None] = {"": None}
        self.input_names: dict[Op, str] = {}  # placeholder -> graph input name
        self.fed: set[int] = set()  # ids of static values that came from graph inputs (``static_inputs``)
        self.pending: dict[str, np.ndarray] = {}  # trainable initializers not read yet (made in their reader's scope)
        self.fold_enabled = evaluate
        self._transformer: Any = None
        self.node: Node | None = None  # the node being converted (errors name it)

    def fresh(self, shape: Sequence[int]) -> Any:
        """``Positional.fresh``, refusing a tensor of more elements than the budget has bytes (naming the node)."""
        check_elements(shape, self._where(), self.budget.max_bytes)
        return super().fresh(shape)

    def as_op(self, v: Value, dtype: str | None = None, what: str | None = None) -> Op:
        """``Positional.as_op``; the constant copied from an array computed at import time counts against the budget
        (``what`` names the value in that error; default: the node)."""
        if isinstance(v, np.ndarray):
            self.budget.charge_copy(v, dtype, f"{what or self._where()}: the graph constant of a value computed at "
                                              "import time")
        return super().as_op(v, dtype)

    def check_tensor(self, shape: Sequence[int], dtype: Any, what: str | None = None) -> None:
        """Refuse a value of over ``max_bytes`` (``OnnxBudgetError`` naming ``what``, by default the node)."""
        self.budget.check_tensor(shape, dtype, what or self._where())

    def check_constant(self, shape: Sequence[int], dtype: Any, what: str | None = None) -> None:
        """Refuse, before it is allocated, a constant that would take the import's constants over ``max_bytes``
        (converters that compute a value with NumPy call it first: ``ConstantOfShape``, ``Range``...)."""
        self.budget.check_constants([(shape, dtype)], what or self._where())

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

        budget = self.budget
        budget.check_constants([(o.axes.lengths, o.dtype) for o in ops], self._where())  # before computing any
        if self._transformer is None:
            self._transformer = make_transformer("numpy", max_bytes=budget.max_bytes)
        results = self._transformer.computation(list(ops))()
        results = list(results) if isinstance(results, tuple) else [results]  # a list of one may give a 1-tuple
        arrays = [np.asarray(r, dtype=o.dtype) for r, o in zip(results, ops)]
        budget.charge(arrays, self._where())
        return arrays

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
