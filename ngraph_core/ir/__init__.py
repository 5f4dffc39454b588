"""The IR: ``Op`` (one node type), ``OpType`` and groups, ``Axis``/``Axes``, inference, verification."""

from .axes import Axes, Axis, format_axes
from .conv import ConvArg, PoolArg
from .fused import FusedProgram
from .infer import FLOAT_DTYPES, INFER, infer, is_float, make, promote
from .node import (
    ArrayValue,
    Meta,
    Op,
    RandomInfo,
    ScopeEntry,
    VariableInfo,
    consumers,
    current_scope,
    name_scope,
    next_uid,
    owns_buffer,
    scope_override,
    substitute,
    toposort,
)
from .ops import OP_BY_NAME, OpGroup, OpType
from .printer import format_graph, format_op
from .spec import verify

__all__ = [
    "Axes", "Axis", "format_axes", "ConvArg", "PoolArg", "FusedProgram", "FLOAT_DTYPES", "INFER", "infer",
    "is_float", "make", "promote",
    "ArrayValue", "Meta", "Op", "RandomInfo", "ScopeEntry", "VariableInfo", "consumers", "current_scope",
    "name_scope", "next_uid", "owns_buffer", "scope_override", "substitute", "toposort", "OP_BY_NAME",
    "OpGroup",
    "OpType", "format_graph", "format_op", "verify",
]
