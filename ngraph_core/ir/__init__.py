"""The IR: ``Op`` (one node type), ``OpType`` and groups, ``Axis``/``Axes``, inference, verification."""

from .args import ARG_TYPES
from .axes import Axes, Axis, format_axes
from .codec import CodecContext
from .conv import ConvArg, PoolArg
from .dtypes import FLOAT_DTYPES, is_float, promote
from .fused_program import FusedProgram
from .graph import CallArg, Graph, GraphError, subgraphs, walk
from .infer import INFER, infer, make
from .meta import Meta, Scope, ScopeEntry, changed_since, current_scope, meta_generation, name_scope, scope_override
from .node import (
    Op,
    consumers,
    format_op,
    owns_buffer,
    rebuild,
    substitute,
    toposort,
    update_meta,
)
from .ops import OP_BY_NAME, OpGroup, OpType
from .printer import format_graph
from .scan import ScanArg, stacked_axes
from .spec import verify
from .uids import next_uid
from .values import ArrayValue, RandomInfo, VariableInfo

__all__ = [
    "ARG_TYPES", "CodecContext",
    "Axes", "Axis", "format_axes", "ConvArg", "PoolArg", "FusedProgram", "FLOAT_DTYPES", "INFER", "infer",
    "is_float", "make", "promote",
    "ArrayValue", "Meta", "Op", "RandomInfo", "ScopeEntry", "VariableInfo", "consumers", "current_scope",
    "name_scope", "next_uid", "owns_buffer", "rebuild", "scope_override", "substitute", "toposort", "update_meta",
    "Scope", "changed_since", "meta_generation", "OP_BY_NAME",
    "OpGroup",
    "OpType", "format_graph", "format_op", "verify", "CallArg", "Graph", "GraphError", "subgraphs", "walk",
    "ScanArg", "stacked_axes",
]
